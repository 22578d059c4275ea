"""Page layout checks in real Chromium: no horizontal overflow, the decide controls in the first viewport,
at a desktop and a phone size, with a screenshot of each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: The sizes every page is checked at: a laptop, and a phone (iPhone 12–15 class, CSS pixels).
SIZES = {"1280": (1280, 900), "390": (390, 844)}


async def settled(page: Any, script: str) -> Any:
    """``page.evaluate(script)``, again after a live reload replaced the document under it (a list page
    reloads itself when the store changes, by design)."""
    from playwright.async_api import Error

    for attempt in range(5):
        try:
            return await page.evaluate(script)
        except Error as exc:
            if "context was destroyed" not in str(exc) or attempt == 4:
                raise
            await page.wait_for_load_state()
    return None


async def overflow(page: Any) -> tuple[int, int]:
    """The document's scroll width and client width (equal when nothing overflows sideways)."""
    widths = await settled(
        page, "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    return int(widths[0]), int(widths[1])


async def in_first_viewport(page: Any, selector: str) -> dict[str, float]:
    """The bounding box of ``selector`` at the top of the page; asserts it lies inside the viewport."""
    await settled(page, "() => window.scrollTo(0, 0)")
    box = await page.locator(selector).first.bounding_box()
    size = page.viewport_size
    assert box is not None, f"{selector} is not shown"
    assert box["x"] >= 0 and box["y"] >= 0, (selector, box)
    assert box["x"] + box["width"] <= size["width"], (selector, box, size)
    assert box["y"] + box["height"] <= size["height"], (selector, box, size)
    return dict(box)


async def check_sizes(
    page: Any, shots: Path | None, name: str, decide: str | None = None, *, full_page: bool = True
) -> None:
    """At each size: no horizontal overflow, ``decide`` (when given) inside the first viewport, and a
    screenshot ``NAME-1280.png`` / ``NAME-390.png`` in ``shots`` (the whole page, or the first screen of a
    long list); back at 1280×900 after."""
    for label, (width, height) in SIZES.items():
        await page.set_viewport_size({"width": width, "height": height})
        scroll_width, client_width = await overflow(page)
        assert scroll_width <= client_width, f"{name} at {label}: {scroll_width} > {client_width}"
        if decide is not None:
            await in_first_viewport(page, decide)
        if shots is not None:
            await page.screenshot(path=str(shots / f"{name}-{label}.png"), full_page=full_page)
    await page.set_viewport_size({"width": 1280, "height": 900})
