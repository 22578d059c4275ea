"""The sandbox's seccomp filter, in the spirit of Docker's default profile, built with libseccomp.

The program is compiled by libseccomp (through ``pyseccomp``, a ctypes binding of the system's
``libseccomp.so.2``) into classic BPF and handed to bwrap with ``--seccomp FD``. bwrap sets
``PR_SET_NO_NEW_PRIVS`` and loads it just before it executes the server, after its own namespace setup.

Default action: allow. Denied (``EPERM``): the calls in :data:`DENIED`; ``clone`` with any
namespace flag; ``personality`` with anything but the default personas. ``clone3`` answers ``ENOSYS``
(its flags live in memory a filter cannot read), so libc falls back to ``clone``, which the filter
checks. Other architectures' system calls (x32, i386 on x86-64) kill the process (libseccomp's
bad-arch action), so the filter cannot be bypassed through another ABI.
"""

from __future__ import annotations

import errno
import tempfile
from functools import lru_cache
from typing import Any

#: System calls refused with EPERM whatever their arguments.
DENIED: tuple[str, ...] = (
    # debugging and reading other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    # the filesystem topology and namespaces
    "mount", "umount2", "pivot_root", "unshare", "setns", "chroot",
    "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    # kernel keyrings, eBPF, userfaultfd, perf
    "keyctl", "add_key", "request_key", "bpf", "userfaultfd", "perf_event_open",
    # the kernel itself, modules, swap, accounting, the clock
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime",
    "quotactl", "quotactl_fd", "lookup_dcookie", "nfsservctl", "_sysctl", "sysfs", "ustat", "uselib",
    "create_module", "get_kernel_syms", "query_module", "vhangup", "iopl", "ioperm",
    # file handles that bypass path permissions, io_uring (which bypasses this filter)
    "open_by_handle_at", "name_to_handle_at", "io_uring_setup", "io_uring_enter", "io_uring_register",
)  # fmt: skip
#: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME.
CLONE_NAMESPACE_FLAGS: tuple[int, ...] = (
    0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x00000080,
)  # fmt: skip
#: The largest persona Docker admits (UNAME26 | PER_LINUX32); anything above sets dangerous flags.
MAX_PERSONALITY = 0x20008


class SeccompUnavailableError(RuntimeError):
    """libseccomp or its binding is missing: the sandbox must not start."""


def _binding() -> Any:
    try:
        import pyseccomp  # type: ignore[import-untyped]  # ctypes binding without type information
    except (ImportError, OSError) as exc:  # the module loads libseccomp.so.2 at import
        raise SeccompUnavailableError(f"libseccomp's Python binding (pyseccomp) cannot load: {exc}") from None
    return pyseccomp


#: ``socket(2)`` families the Landlock sandbox still allows: AF_UNIX (a server's own socketpairs, local IPC).
AF_UNIX = 1


@lru_cache(maxsize=2)
def filter_bpf(*, no_network: bool = False) -> bytes:
    """The compiled BPF program (cached: it depends on nothing but this module and the flag).

    ``no_network`` (the Landlock sandbox, which has no network namespace) also refuses ``socket`` for
    every family but AF_UNIX with EACCES: no IPv4, IPv6, netlink or packet socket.
    """
    s = _binding()
    try:
        rules = s.SyscallFilter(s.ALLOW)
        deny = s.ERRNO(errno.EPERM)
        for name in DENIED:
            rules.add_rule(deny, name)
        for flag in CLONE_NAMESPACE_FLAGS:
            rules.add_rule(deny, "clone", s.Arg(0, s.MASKED_EQ, flag, flag))
        rules.add_rule(s.ERRNO(errno.ENOSYS), "clone3")
        rules.add_rule(deny, "personality", s.Arg(0, s.GT, MAX_PERSONALITY))
        if no_network:
            rules.add_rule(s.ERRNO(errno.EACCES), "socket", s.Arg(0, s.NE, AF_UNIX))
        with tempfile.TemporaryFile() as out:
            rules.export_bpf(out)
            out.seek(0)
            program = out.read()
    except OSError as exc:
        raise SeccompUnavailableError(f"libseccomp could not build the filter: {exc}") from None
    if not program or len(program) % 8:
        raise SeccompUnavailableError("libseccomp produced no BPF program")
    return program


def unavailable_reason() -> str | None:
    """None when the filter can be built here, else why not."""
    try:
        filter_bpf()
    except SeccompUnavailableError as exc:
        return str(exc)
    return None
