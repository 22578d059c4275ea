"""The real @playwright/mcp promoted with Debian's chromium: an allowed origin works, another is refused."""

from __future__ import annotations

import tomllib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import tomli_w

from tests.conftest import call, stdio_session

from .test_playwright_mcp import PACKAGE, VERSION, baton
from .test_playwright_mcp import env as playwright_env  # noqa: F401 -- the module-scoped fixture

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.needs("chromium", "node", "bwrap", "npm-registry"),
]
ALLOWED = ["browser_navigate", "browser_snapshot", "browser_take_screenshot", "browser_close"]
ARGUMENTS = [
    "--isolated",
    "--no-sandbox",
    "--executable-path",
    "/usr/bin/chromium",
    "--output-dir",
    "/tmp/out",
]


@pytest.fixture(scope="module")
def live(playwright_env: dict[str, str], pages: dict[str, str]) -> dict[str, str]:  # noqa: F811
    """Lock, pin, allow the four browser tools with the allowed origin, replay again, promote."""
    arguments = [item for argument in ARGUMENTS for item in ("--argument", argument)]
    baton(playwright_env, "lock", f"npm:{PACKAGE}@{VERSION}", "--id", "browser", *arguments)
    baton(playwright_env, "verify", "browser")
    baton(playwright_env, "replay", "browser", "--apply", "--record-contract")
    path = Path(playwright_env["BATON_HOME"]) / "adapters" / "browser.toml"
    policy = tomllib.loads(path.read_text())
    names = set(policy["tools"]["allowed"]) | set(policy["tools"]["denied"])
    # @playwright/mcp marks navigate and close destructiveHint: true; the owner exempts them by name
    policy["tools"].update(
        allowed=ALLOWED, denied=sorted(names - set(ALLOWED)), allow_destructive_without_approval=ALLOWED
    )
    policy["runtime"].update(
        browser=True,
        network="allowlist",
        allowed_origins=[pages["allowed"]],
        memory_limit="8g",
        pids_limit=4096,
        tmpfs="/tmp:rw,nosuid,size=512m",
        startup_timeout_seconds=60,
        call_timeout_seconds=60,
    )
    path.write_text(tomli_w.dumps(policy))
    baton(playwright_env, "replay", "browser", "--apply")
    baton(playwright_env, "promote", "browser")
    return {**playwright_env, "BROWSER_HEADLESS": "true"}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def session(live: dict[str, str]) -> AsyncIterator[Any]:
    async with stdio_session(live) as client:
        yield client


async def test_the_browser_navigates_an_allowed_origin_and_refuses_another(
    session: Any, pages: dict[str, str]
) -> None:
    listed = {tool.name for tool in (await session.list_tools()).tools}
    assert {f"browser__{name}" for name in ALLOWED} <= listed
    assert "browser__browser_evaluate" not in listed
    with anyio.fail_after(120):
        navigated = await call(session, "browser__browser_navigate", {"url": pages["allowed"] + "/"})
        assert navigated["success"], navigated["text"]
        snapshot = await call(session, "browser__browser_snapshot")
        assert "Hello allowed-page" in snapshot["text"]
        # The screenshot is of the allowed page: after a refused navigation the tab holds Chromium's
        # error page, and a screenshot of that raced its load (one loaded CI run answered without an image).
        shot = await session.call_tool("browser__browser_take_screenshot", {})
        assert any(block.type == "image" for block in shot.content), shot.content  # what came instead
        refused = await call(session, "browser__browser_navigate", {"url": pages["other"] + "/"})
        assert refused["error_class"] == "mcp_upstream_tool_error"
        assert "ERR_BLOCKED_BY_CLIENT" in refused["text"] and "Hello other-page" not in refused["text"]
        closed = await call(session, "browser__browser_close")
        assert closed["success"]
