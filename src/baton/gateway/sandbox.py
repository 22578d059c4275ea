"""Sandboxes for an external MCP server: bubblewrap (default) and Docker behind one interface.

bubblewrap pitfalls this module exists to get right:

- bwrap is started as the unprivileged host user 65534 (when baton runs as root). A root-started
  bwrap with ``--uid 65534`` maps the sandbox's 65534 back to host root, which can read root's files.
- Always ``--unshare-user --uid 65534 --gid 65534 --cap-drop ALL --unshare-all`` (never
  ``--share-net``), ``--new-session`` (no TIOCSTI into our terminal), ``--die-with-parent``.
- ``--tmpfs /tmp`` comes before any bind that must stay visible under it; the root is remounted
  read-only last.
- Memory (RLIMIT_DATA), process (RLIMIT_NPROC) and CPU-time (RLIMIT_CPU) limits are rlimits that
  ``prlimit`` sets before it execs bwrap (no ``preexec_fn``, which is unsafe in a threaded server).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from baton.errors import GatewayError

SANDBOX_UID = 65534
SANDBOX_GID = 65534
SANDBOX_WORKDIR = "/work"
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
SIZE = re.compile(r"size=([0-9]+)([kmg]?)")


@dataclass(frozen=True)
class SandboxSpec:
    """What to run and with which limits; ``workdir`` is bound read-only at /work."""

    workdir: Path
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    memory_bytes: int = 2 << 30
    memory_limit: str = "2g"
    pids_limit: int = 256
    cpu_seconds: int = 120
    cpu_limit: str = "1"
    tmpfs: str = "/tmp:rw,noexec,nosuid,size=64m"  # noqa: S108 -- the sandbox's own tmpfs
    shutdown_timeout_seconds: int = 5
    image: str | None = None
    platform: str = "linux/amd64"
    extra_ro_binds: tuple[tuple[Path, str], ...] = ()
    #: Further tmpfs mounts (a browser's /dev/shm), after /dev.
    extra_tmpfs: tuple[str, ...] = ()

    def tmpfs_path_and_size(self) -> tuple[str, int | None]:
        """The tmpfs mount point and its size in bytes (when the spec states one)."""
        path, _, options = self.tmpfs.partition(":")
        match = SIZE.search(options)
        if not match:
            return path, None
        return path, int(match.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2)]


class Sandbox(Protocol):
    """A way to start a process with no network, a read-only root and no privileges."""

    name: str

    def unavailable_reason(self) -> str | None:
        """None when the sandbox can run here, else why not."""

    def start(self, spec: SandboxSpec, *, stderr: IO[bytes]) -> subprocess.Popen[bytes]:
        """Start ``spec.argv`` in the sandbox with stdin and stdout as pipes."""

    def cleanup(self, process: subprocess.Popen[bytes]) -> bool:
        """Remove what the sandbox left behind; True when nothing remains."""


def rlimit_prefix(spec: SandboxSpec) -> list[str]:
    """``prlimit`` in front of bwrap: the limits are set before exec without Python code in the child.

    Memory is RLIMIT_DATA, not RLIMIT_AS: V8 reserves many GiB of PROT_NONE address space for
    WebAssembly, which RLIMIT_AS counts (Node then dies) and RLIMIT_DATA (private writable memory)
    does not.
    """
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise GatewayError(
            "sandbox_unavailable", "prlimit (util-linux) is needed to set the sandbox's limits."
        )
    return [
        prlimit,
        f"--data={spec.memory_bytes}",
        f"--nproc={spec.pids_limit}",
        f"--cpu={spec.cpu_seconds}",
        "--core=0",
        "--",
    ]


def as_nobody() -> tuple[int | None, int | None, list[int] | None]:
    """(user, group, extra_groups) for Popen: 65534 when we are root; an unprivileged caller stays itself."""
    if os.geteuid() == 0:
        return SANDBOX_UID, SANDBOX_GID, []
    return None, None, None


def _system_binds() -> list[str]:
    """Read-only /usr plus the merged-usr links (or binds) and the loader cache."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        path = Path(top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            args += ["--ro-bind", top, top]
    for name in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/alternatives"):
        if Path(name).exists():
            args += ["--ro-bind", name, name]
    return args


class BubblewrapSandbox:
    """bubblewrap, started as host uid 65534, in new user/pid/net/ipc/uts/cgroup namespaces."""

    name = "bubblewrap"

    def __init__(self, bwrap: str | None = None) -> None:
        self.bwrap = bwrap or shutil.which("bwrap")

    def unavailable_reason(self) -> str | None:
        """None when bwrap is installed and can create a user namespace."""
        if self.bwrap is None:
            return "bubblewrap (bwrap) is not installed"
        user, group, groups = as_nobody()
        probe = subprocess.run(
            [self.bwrap, "--unshare-user", "--unshare-all", "--ro-bind", "/", "/", "true"],
            capture_output=True,
            timeout=10,
            check=False,
            user=user,
            group=group,
            extra_groups=groups,
        )
        if probe.returncode != 0:
            return (
                f"bwrap cannot create a sandbox here: {probe.stderr.decode(errors='replace').strip()[:200]}"
            )
        return None

    def command(self, spec: SandboxSpec) -> list[str]:
        """The full bwrap command line for ``spec``."""
        if self.bwrap is None:
            raise GatewayError("sandbox_unavailable", "bubblewrap (bwrap) is not installed.")
        tmp_path, tmp_size = spec.tmpfs_path_and_size()
        args = [
            self.bwrap,
            "--unshare-user",
            "--uid", str(SANDBOX_UID),
            "--gid", str(SANDBOX_GID),
            "--cap-drop", "ALL",
            "--unshare-all",
            "--new-session",
            "--die-with-parent",
            *_system_binds(),
            "--proc", "/proc",
            "--dev", "/dev",
            *(["--size", str(tmp_size)] if tmp_size else []),
            "--tmpfs", tmp_path,
            "--ro-bind", str(spec.workdir), SANDBOX_WORKDIR,
        ]  # fmt: skip
        for mount in spec.extra_tmpfs:
            args += ["--tmpfs", mount]
        for source, target in spec.extra_ro_binds:
            args += ["--ro-bind", str(source), target]
        args += ["--remount-ro", "/", "--chdir", SANDBOX_WORKDIR, "--clearenv"]
        env = {"HOME": tmp_path, "CI": "1", "PATH": SANDBOX_PATH, **spec.env}
        for name, value in sorted(env.items()):
            args += ["--setenv", name, value]
        return [*args, "--", *spec.argv]

    def start(self, spec: SandboxSpec, *, stderr: IO[bytes]) -> subprocess.Popen[bytes]:
        """Start the server as host uid 65534 with rlimits, stdin/stdout as pipes."""
        reason = self.unavailable_reason()
        if reason:
            raise GatewayError("sandbox_unavailable", f"The bubblewrap sandbox is unavailable: {reason}.")
        user, group, groups = as_nobody()
        try:
            return subprocess.Popen(
                [*rlimit_prefix(spec), *self.command(spec)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env={"PATH": SANDBOX_PATH},
                close_fds=True,
                user=user,
                group=group,
                extra_groups=groups,
            )
        except OSError as exc:
            raise GatewayError("mcp_process_start_failed", f"bwrap could not be started: {exc}.") from None

    def cleanup(self, process: subprocess.Popen[bytes]) -> bool:
        """--die-with-parent and the pid namespace take the whole tree down with bwrap."""
        return process.poll() is not None


class DockerSandbox:
    """Docker with the reference controller's flags (used where a Docker engine exists)."""

    name = "docker"

    def __init__(self, docker: str | None = None) -> None:
        self.docker = docker or shutil.which("docker")
        self.container = f"baton-mcp-replay-{uuid.uuid4().hex[:20]}"

    def unavailable_reason(self) -> str | None:
        """None when the docker CLI reaches an engine."""
        if self.docker is None:
            return "the docker CLI is not installed"
        probe = subprocess.run([self.docker, "info"], capture_output=True, timeout=20, check=False)
        if probe.returncode != 0:
            return "no Docker engine answers (docker info failed)"
        return None

    def command(self, spec: SandboxSpec) -> list[str]:
        """``docker run`` with --network none, --read-only, no-new-privileges, cap-drop ALL, user 65534."""
        if self.docker is None or spec.image is None:
            raise GatewayError(
                "sandbox_unavailable", "The docker sandbox needs the docker CLI and a pinned image."
            )
        args = [
            self.docker, "run", "--rm", "--platform", spec.platform, "--name", self.container,
            "--network", "none", "--read-only", "--security-opt", "no-new-privileges", "--cap-drop", "ALL",
            "--pids-limit", str(spec.pids_limit), "--memory", spec.memory_limit, "--cpus", spec.cpu_limit,
            "--user", f"{SANDBOX_UID}:{SANDBOX_GID}", "--env", "HOME=/tmp", "--env", "CI=1",
            "--tmpfs", spec.tmpfs, "--stop-timeout", str(spec.shutdown_timeout_seconds), "-i",
            "-v", f"{spec.workdir.resolve()}:{SANDBOX_WORKDIR}:ro", "-w", SANDBOX_WORKDIR,
        ]  # fmt: skip
        for name, value in sorted(spec.env.items()):
            args += ["--env", f"{name}={value}"]
        return [*args, spec.image, *spec.argv]

    def start(self, spec: SandboxSpec, *, stderr: IO[bytes]) -> subprocess.Popen[bytes]:
        """Start the container attached to our pipes."""
        reason = self.unavailable_reason()
        if reason:
            raise GatewayError("sandbox_unavailable", f"The docker sandbox is unavailable: {reason}.")
        try:
            return subprocess.Popen(
                self.command(spec),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env={**os.environ, "DOCKER_CLI_HINTS": "false"},
            )
        except OSError as exc:
            raise GatewayError("mcp_process_start_failed", f"docker could not be started: {exc}.") from None

    def cleanup(self, process: subprocess.Popen[bytes]) -> bool:
        """``docker rm -f`` the container, then confirm it is gone."""
        assert self.docker is not None
        subprocess.run(
            [self.docker, "rm", "-f", self.container], capture_output=True, timeout=30, check=False
        )
        inspect = subprocess.run(
            [self.docker, "container", "inspect", self.container],
            capture_output=True,
            timeout=30,
            check=False,
        )
        return inspect.returncode != 0


def sandbox_for(name: str) -> Sandbox:
    """The sandbox a policy names."""
    if name == "docker":
        return DockerSandbox()
    return BubblewrapSandbox()
