"""The Landlock sandbox's launcher: limits, Landlock rules and a seccomp filter on itself, then exec the server.

Run as ``python -I -S landlock_exec.py CONFIG`` (standard library only, so it needs no import path) by
:class:`baton.gateway.sandbox.landlock.LandlockSandbox`. ``CONFIG`` is a JSON file the parent wrote:
``argv``, ``env``, ``cwd``, ``parent`` (baton's pid), ``rlimits`` (name to value), ``rules`` (``[path, access]``: what may be done
beneath each path), ``seccomp`` (a classic BPF program's file). In order: the rlimits, ``no_new_privs``,
a Landlock ruleset that handles every right this kernel knows (filesystem, TCP bind/connect from ABI 4,
abstract unix sockets and signals from ABI 6) and grants only the rules, the seccomp filter, exec. A step
that fails ends the launcher with status 126 and one line on stderr; the server never starts unconfined.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import struct
import sys

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # the same numbers on every arch
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 1, 38, 22, 2

#: Filesystem rights by name, and the ABI that introduced each.
FS = {
    "execute": (1 << 0, 1), "write_file": (1 << 1, 1), "read_file": (1 << 2, 1), "read_dir": (1 << 3, 1),
    "remove_dir": (1 << 4, 1), "remove_file": (1 << 5, 1), "make_char": (1 << 6, 1), "make_dir": (1 << 7, 1),
    "make_reg": (1 << 8, 1), "make_sock": (1 << 9, 1), "make_fifo": (1 << 10, 1), "make_block": (1 << 11, 1),
    "make_sym": (1 << 12, 1), "refer": (1 << 13, 2), "truncate": (1 << 14, 3), "ioctl_dev": (1 << 15, 5),
}  # fmt: skip
#: The rights that apply to a file (a rule on a file may grant only these).
FILE_RIGHTS = ("execute", "write_file", "read_file", "truncate", "ioctl_dev")
#: Rights sets the parent names in its rules.
ACCESS = {
    "read": ("read_file", "read_dir"),
    "exec": ("read_file", "read_dir", "execute"),
    "write": (
        "read_file", "read_dir", "write_file", "remove_dir", "remove_file", "make_dir", "make_reg",
        "make_sym", "make_fifo", "make_sock", "refer", "truncate",
    ),
    "device": ("read_file", "write_file", "ioctl_dev"),
}  # fmt: skip
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
RLIMITS = {
    "data": resource.RLIMIT_DATA,
    "nproc": resource.RLIMIT_NPROC,
    "cpu": resource.RLIMIT_CPU,
    "core": resource.RLIMIT_CORE,
    "fsize": resource.RLIMIT_FSIZE,
}


class LaunchError(Exception):
    """A step of confinement failed: the server must not start."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is absent or disabled."""
    value = _libc().syscall(
        SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION)
    )
    return max(int(value), 0)


def _mask(names: tuple[str, ...], abi: int) -> int:
    return sum(FS[name][0] for name in names if FS[name][1] <= abi)


def _ruleset(abi: int) -> int:
    """A ruleset handling every right this ABI knows (what is not granted is denied)."""
    handled_fs = _mask(tuple(FS), abi)
    handled_net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("=QQQ", handled_fs, handled_net, scoped)[: 8 if abi < 4 else 16 if abi < 6 else 24]
    buffer = ctypes.create_string_buffer(attr, len(attr))
    fd = _libc().syscall(SYS_CREATE_RULESET, buffer, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if fd < 0:
        raise LaunchError(f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}")
    return int(fd)


def _add_rule(ruleset: int, path: str, access: str, abi: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path this host lacks grants nothing
    try:
        names = ACCESS[access]
        if not os.path.isdir(path):
            names = tuple(n for n in names if n in FILE_RIGHTS)
        attr = struct.pack("=Qi", _mask(names, abi), fd)  # struct landlock_path_beneath_attr (packed)
        buffer = ctypes.create_string_buffer(attr, len(attr))
        if _libc().syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, buffer, ctypes.c_uint32(0)) != 0:
            raise LaunchError(f"landlock_add_rule({path}) failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def confine(rules: list[list[str]]) -> int:
    """Restrict this process (and what it executes) to ``rules``; returns the ABI version used."""
    abi = abi_version()
    if abi < 1:
        raise LaunchError("the kernel offers no Landlock")
    ruleset = _ruleset(abi)
    try:
        for path, access in rules:
            _add_rule(ruleset, path, access, abi)
        if _libc().syscall(SYS_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) != 0:
            raise LaunchError(f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    return abi


def load_seccomp(program: bytes) -> None:
    """Install a classic BPF seccomp filter (``no_new_privs`` is already set)."""

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    prog = SockFprog(len(program) // 8, program)
    if _libc().prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise LaunchError(f"seccomp could not be loaded: {os.strerror(ctypes.get_errno())}")


def launch(config: dict[str, object]) -> None:
    """Apply every limit and exec the server; returns only by raising."""
    for name, value in dict(config["rlimits"]).items():  # type: ignore[call-overload]
        resource.setrlimit(RLIMITS[name], (int(value), int(value)))
    with open(str(config["seccomp"]), "rb") as handle:
        program = handle.read()
    os.chdir(str(config["cwd"]))
    os.setsid()  # its own session and process group: no terminal to inject into, killed as one group
    if _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != config["parent"]:
        raise LaunchError("the launcher could not tie its life to baton's")
    if _libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise LaunchError("no_new_privs could not be set")
    confine(list(config["rules"]))  # type: ignore[call-overload]
    load_seccomp(program)
    argv = [str(a) for a in config["argv"]]  # type: ignore[attr-defined]
    os.execvpe(argv[0], argv, {str(k): str(v) for k, v in dict(config["env"]).items()})  # type: ignore[call-overload]  # noqa: S606 -- the sandboxed server, confined above


def main() -> None:
    """Read the config the parent wrote, then confine and exec."""
    try:
        with open(sys.argv[1], encoding="utf-8") as handle:
            config = json.load(handle)
        launch(config)
    except (LaunchError, OSError, ValueError, KeyError, IndexError) as exc:
        sys.stderr.write(f"baton landlock: {exc}\n")
        sys.exit(126)


if __name__ == "__main__":
    main()
