"""One live adapter's upstream: started lazily in the replay's sandbox, contract re-checked at every start.

A supervisor task owns the transport and the official ``mcp.ClientSession`` (both are context managers
that must open and close in one task); callers ask it to start, then call through the session. A dead
upstream is restarted on the next call after a backoff; drift blocks the adapter for good.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from baton import clock
from baton.errors import GatewayError
from baton.gateway.policy import state
from baton.gateway.policy.contract import compare, tool_contract
from baton.gateway.policy.policy import Policy
from baton.gateway.replay.extract import materialize
from baton.gateway.replay.observation import sandbox_spec
from baton.gateway.replay.protocol import initialize_params
from baton.gateway.sandbox import landlock, scratch
from baton.gateway.sandbox.bwrap_command import Prepared, prepare
from baton.gateway.sandbox.direct_calls import direct_version
from baton.gateway.sandbox.docker import DockerSandbox
from baton.gateway.sandbox.host_programs import check_host_programs
from baton.gateway.sandbox.interpreter import check_interpreter_pin
from baton.gateway.sandbox.landlock import LandlockSandbox
from baton.gateway.sandbox.mounts import host_mounts
from baton.gateway.sandbox.network import EgressProxy, bridged_argv
from baton.gateway.sandbox.sandbox import BubblewrapSandbox, sandbox_for
from baton.gateway.sandbox.sandbox_spec import HostMount, SandboxSpec
from baton.gateway.sandbox.stderr import StderrLog
from baton.gateway.sandbox.transport import Pipe, sandboxed_stdio
from baton.runtime import Runtime
from baton.telemetry import tracing

log = logging.getLogger("baton.gateway")
BACKOFF_START_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 30.0
#: Read-only host paths a browser needs: Debian's chromium wrapper reads /etc/chromium.d; fontconfig.
BROWSER_RO_PATHS = ("/etc/chromium.d", "/etc/chromium", "/etc/fonts")
Blocker = Callable[[GatewayError, dict[str, Any]], None]


class Upstream:
    """The sandboxed upstream of one adapter and the client session to it."""

    def __init__(
        self, runtime: Runtime, policy: Policy, blocker: Blocker, bundle: Path | None = None
    ) -> None:
        self.runtime = runtime
        self.policy = policy
        #: The bundle to extract: the serving snapshot's (default: the adapter's working bundle).
        self.bundle = bundle or state.adapter_dir(runtime, policy.id) / "bundle"
        self.blocker = blocker
        self.session: Any = None
        self.pipe: Pipe | None = None
        #: The protocol version the running upstream answered (decides whether a call may go direct).
        self.version: str | None = None
        self.blocked: GatewayError | None = None
        self.starts = 0
        self.restarts = 0
        self.failures = 0
        self.stderr: dict[str, Any] = {}
        self._next_start = 0.0
        self._lock = anyio.Lock()
        self._stop: anyio.Event | None = None
        self._ended: anyio.Event | None = None
        self._root: Path | None = None
        self._egress: EgressProxy | None = None

    def running(self) -> bool:
        """Whether a session is up and its process alive."""
        return self.session is not None and self.pipe is not None and self.pipe.alive()

    async def ensure(self, group: TaskGroup) -> Any:
        """The live session, starting (or restarting after the backoff) the upstream when needed."""
        if self.blocked is None and self.running():  # the common case, without taking the lock
            return self.session
        async with self._lock:
            if self.blocked is not None:
                raise self.blocked
            if self.running():
                return self.session
            await self.stop()
            await anyio.sleep(max(0.0, self._next_start - clock.monotonic()))
            try:
                await group.start(self._supervise, group)
            except GatewayError as exc:
                self._backoff()
                if exc.error_class.endswith("_mismatch") or exc.error_class == "adapter_runtime_drift":
                    self.blocked = exc
                    self.blocker(exc, {"starts": self.starts, **self.stderr})
                raise
            return self.session

    def crashed(self) -> None:
        """A call saw the connection die: stop the session so the next call restarts it."""
        self._backoff()
        if self._stop is not None:
            self._stop.set()

    def restart(self) -> None:
        """A call timed out: kill the upstream now (it may be stuck), the next call starts a fresh one."""
        self.restarts += 1
        if self.pipe is not None and self.pipe.alive():
            with contextlib.suppress(ProcessLookupError):
                self.pipe.process.kill()
        if self._stop is not None:
            self._stop.set()

    def healthy(self) -> None:
        """A call succeeded: the backoff starts over."""
        self.failures = 0

    def _backoff(self) -> None:
        self.failures += 1
        delay = min(BACKOFF_MAX_SECONDS, BACKOFF_START_SECONDS * 2 ** (self.failures - 1))
        self._next_start = clock.monotonic() + delay

    async def stop(self) -> None:
        """Stop the supervisor (and with it the sandbox) if one runs."""
        if self._stop is not None and self._ended is not None:
            self._stop.set()
            with anyio.move_on_after(self.policy.runtime.shutdown_timeout_seconds + 5):
                await self._ended.wait()

    async def _supervise(
        self, group: TaskGroup, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Own the transport and session for one run of the upstream."""
        from mcp import ClientSession

        self._stop = stop = anyio.Event()
        self._ended = ended = anyio.Event()
        self.starts += 1
        started = False
        prepared: Prepared | None = None
        log_path = state.adapter_dir(self.runtime, self.policy.id) / "upstream-stderr.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        stderr = StderrLog(log_path)
        try:
            argv, prepared = await self._argv(group)
            async with (
                sandboxed_stdio(
                    argv,
                    stderr,
                    self.policy.runtime.shutdown_timeout_seconds,
                    prepared.started if prepared is not None else None,
                ) as pipe,
                ClientSession(pipe.read, pipe.write, **self._client_callbacks()) as session,
            ):
                await self._check_contract(session)
                self.pipe, self.session = pipe, session
                task_status.started()
                started = True
                try:
                    await self._watch(pipe, stop)
                finally:
                    self.pipe = self.session = None
        except Exception as exc:  # after the start, nothing may escape into the server's task group
            error = _unwrap(exc)
            if not started:
                raise error from None
            log.warning("upstream %s ended: %s", self.policy.id, error)
        finally:
            stderr.close()
            self.stderr = stderr.tail.summary()
            if prepared is not None:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(prepared.cleanup)
            ended.set()

    def _client_callbacks(self) -> dict[str, Any]:
        """Answer roots/list with the pinned roots when the policy declares roots (as the replay does)."""
        if "roots" not in self.policy.client.capabilities:
            return {}
        import mcp_types as types

        roots = types.ListRootsResult.model_validate({"roots": list(self.policy.client.roots)})

        async def list_roots(context: Any) -> Any:
            return roots

        return {"list_roots_callback": list_roots}

    async def _watch(self, pipe: Pipe, stop: anyio.Event) -> None:
        async with anyio.create_task_group() as group:

            async def exited() -> None:
                await pipe.process.wait()
                stop.set()

            group.start_soon(exited)
            await stop.wait()
            group.cancel_scope.cancel()

    async def _check_contract(self, session: Any) -> None:
        """initialize + tools/list compared with the pins through the replay's contract code."""
        import mcp_types as types

        timeout = self.policy.runtime.startup_timeout_seconds
        params = types.InitializeRequestParams.model_validate(
            initialize_params(self.policy.client), by_name=False
        )
        try:
            with anyio.fail_after(timeout):
                initialized = await session.send_request(
                    types.InitializeRequest(params=params), types.InitializeResult
                )
                session.adopt(initialized)
                self.version = initialized.protocol_version
                await session.send_notification(types.InitializedNotification())
                listed = await _all_tools(session)
        except TimeoutError:
            raise GatewayError(
                "mcp_protocol_response_timeout",
                f"The upstream of {self.policy.id} did not start in {timeout} s.",
            ) from None
        except Exception as exc:
            raise GatewayError(
                "mcp_upstream_failed", f"The upstream of {self.policy.id} failed to start: {exc}."
            ) from None
        server = {
            "protocol_version": initialized.protocol_version,
            "server_name": initialized.server_info.name,
            "server_version": initialized.server_info.version,
        }
        assert self.policy.contract is not None
        compare(self.policy.contract, server, tool_contract(listed))

    async def _argv(self, group: TaskGroup) -> tuple[list[str], Prepared | None]:
        """The sandbox command line; the bundle is extracted (and re-checked) once per serve process."""
        check_interpreter_pin(self.policy)  # every start: the pinned node/python, or adapter_runtime_drift
        check_host_programs(self.policy)  # and the pinned host programs it spawns (git, a language server)
        mounts = host_mounts(self.policy, self.runtime.settings.home)
        if self._root is None:
            root = scratch.make("upstream")
            try:
                await anyio.to_thread.run_sync(materialize, self.policy, self.bundle, root)
            except BaseException:
                scratch.remove(root)
                raise
            self._root = root
        spec = runtime_spec(self.policy, self._root, self.runtime.settings.browser_headless, mounts)
        if self.policy.runtime.network == "allowlist":
            if self._egress is None:
                self._egress = EgressProxy(self.policy.runtime.allowed_origins, self.policy.id)
                await self._egress.open(group)
            spec = bridged_argv(spec, self._egress, self.policy.runtime.browser)
        sandbox = await anyio.to_thread.run_sync(sandbox_for, self.policy.runtime.sandbox)  # may probe
        reason = await anyio.to_thread.run_sync(sandbox.unavailable_reason)
        if reason:
            raise GatewayError("sandbox_unavailable", f"The sandbox is unavailable: {reason}.")
        if isinstance(sandbox, BubblewrapSandbox):
            prepared = await anyio.to_thread.run_sync(prepare, sandbox.bwrap, spec)
            return prepared.argv, prepared
        if isinstance(sandbox, LandlockSandbox):
            if self.policy.runtime.network == "allowlist":
                raise GatewayError(
                    "sandbox_unavailable",
                    "The Landlock sandbox has no network at all; network = 'allowlist' needs bubblewrap.",
                )
            prepared = await anyio.to_thread.run_sync(landlock.prepare, spec)
            return prepared.argv, prepared
        assert isinstance(sandbox, DockerSandbox)
        return sandbox.command(spec), None

    async def close(self) -> None:
        """Stop the upstream and remove its extracted tree and egress socket."""
        await self.stop()
        if self._egress is not None:
            await self._egress.close()
        if self._root is not None:
            scratch.remove(self._root)
            self._root = None

    async def call(
        self,
        group: TaskGroup,
        tool: str,
        arguments: dict[str, Any],
        progress: Callable[..., Awaitable[None]] | None,
    ) -> Any:
        """Call ``tool`` upstream within the policy's per-call timeout; failures are typed."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        session = await self.ensure(group)
        timeout = self.policy.runtime.call_timeout_seconds
        try:
            with anyio.fail_after(timeout):
                result = await self._send(session, tool, arguments, progress)
        except TimeoutError:
            self.restart()
            raise GatewayError(
                "mcp_upstream_timeout",
                f"{self.policy.id}__{tool} did not finish within {timeout} s; the upstream is restarted.",
                timeout_seconds=timeout,
            ) from None
        except MCPError as exc:
            if self.running() and exc.error.code != CONNECTION_CLOSED:
                raise GatewayError(
                    "mcp_upstream_failed", f"The upstream answered with an error: {exc.error.message}."
                ) from None
            self.crashed()
            raise GatewayError(
                "mcp_upstream_failed",
                f"The upstream of {self.policy.id} died during the call; it restarts on the next call.",
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ValueError) as exc:
            self.crashed()
            raise GatewayError(
                "mcp_upstream_failed", f"The connection to the upstream of {self.policy.id} failed: {exc!r}."
            ) from None
        self.healthy()
        return result

    async def _send(
        self,
        session: Any,
        tool: str,
        arguments: dict[str, Any],
        progress: Callable[..., Awaitable[None]] | None,
    ) -> Any:
        """The call on the pipes (:mod:`~baton.gateway.sandbox.direct_calls`) when that path may carry it, else
        the session's ``call_tool`` (progress, and the client span of a process that exports spans)."""
        pipe, version = self.pipe, self.version
        direct = progress is None and not tracing.active()
        if direct and pipe is not None and version is not None and direct_version(version):
            result = await pipe.calls.call(tool, arguments, version)
            if not result.is_error:
                await session.validate_tool_result(tool, result)
            return result
        return await session.call_tool(tool, arguments, progress_callback=progress)


def _unwrap(exc: BaseException) -> GatewayError:
    """The first GatewayError inside (nested) exception groups, or a generic upstream failure."""
    if isinstance(exc, GatewayError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _unwrap(inner)
            if found.error_class != "mcp_upstream_failed" or isinstance(inner, GatewayError):
                return found
    return GatewayError("mcp_upstream_failed", f"The upstream failed: {exc!r}.")


async def _all_tools(session: Any) -> list[dict[str, Any]]:
    """Every listed tool as the wire carried it (the SDK models dumped without defaults it added)."""
    tools: list[dict[str, Any]] = []
    cursor = None
    for _ in range(100):
        from mcp_types import PaginatedRequestParams

        page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools += [t.model_dump(by_alias=True, exclude_unset=True, mode="json") for t in page.tools]
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def runtime_spec(
    policy: Policy, root: Path, headless: bool, mounts: tuple[HostMount, ...] = ()
) -> SandboxSpec:
    """The replay's sandbox spec plus what a browser adapter needs (/dev/shm, ``--headless``)."""
    spec = sandbox_spec(policy, root, mounts=mounts)
    if not policy.runtime.browser:
        return spec
    argv = [*spec.argv, *(["--headless"] if headless and "--headless" not in spec.argv else [])]
    if not headless:
        argv = [arg for arg in argv if arg != "--headless"]
    shm = "/dev/shm"  # noqa: S108 -- a tmpfs inside the sandbox, not a host path
    binds = tuple((Path(p), p) for p in BROWSER_RO_PATHS if Path(p).exists())
    return SandboxSpec(
        **{
            **spec.__dict__,
            "argv": argv,
            "extra_tmpfs": (shm,),
            "extra_ro_binds": (*spec.extra_ro_binds, *binds),
        }
    )
