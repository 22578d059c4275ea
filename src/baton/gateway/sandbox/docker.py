"""The Docker backend: the reference controller's ``docker run`` flags, for hosts with a Docker engine."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from typing import IO

from baton.errors import GatewayError
from baton.gateway.sandbox.sandbox_spec import SANDBOX_GID, SANDBOX_UID, SANDBOX_WORKDIR, SandboxSpec


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
            "--pids-limit", str(spec.pids_limit), "--memory", spec.memory_limit,
            *(["--cpus", spec.cpu_limit] if spec.cpu_limit else []),
            "--user", f"{SANDBOX_UID}:{SANDBOX_GID}", "--env", "HOME=/tmp", "--env", "CI=1",
            "--tmpfs", spec.tmpfs, "--stop-timeout", str(spec.shutdown_timeout_seconds), "-i",
            "-v", f"{spec.workdir.resolve()}:{SANDBOX_WORKDIR}:ro", "-w", SANDBOX_WORKDIR,
        ]  # fmt: skip
        for host in spec.mounts:
            args += ["-v", f"{host.host}:{host.sandbox}:{host.mode}"]
        for name, value in sorted(spec.env.items()):
            args += ["--env", f"{name}={value}"]
        return [*args, spec.image, *spec.argv]

    def start(self, spec: SandboxSpec, *, stderr: IO[bytes] | int) -> subprocess.Popen[bytes]:
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
