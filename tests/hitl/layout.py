"""Page layout checks in real Chromium: no horizontal overflow, a list's decide controls in the first
viewport, a request page's decide buttons after the whole request, at a desktop and a phone size, with a
screenshot of each."""

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


#: The bottom of the request's message, context and arguments, and the top of its decide buttons.
REQUEST_THEN_DECIDE = """() => {
  const bottoms = ["#message", "#context", "#arguments"].map((s) => document.querySelector(s))
    .filter(Boolean).map((e) => e.getBoundingClientRect().bottom);
  return [Math.max(...bottoms), document.querySelector("#decide-buttons").getBoundingClientRect().top];
}"""


async def decide_after_request(page: Any) -> None:
    """A request page's decide buttons come after the whole request (message, context, arguments), so
    nobody reaches Approve without having passed every line of it."""
    request_bottom, decide_top = await settled(page, REQUEST_THEN_DECIDE)
    assert request_bottom <= decide_top, (request_bottom, decide_top)


async def check_sizes(
    page: Any,
    shots: Path | None,
    name: str,
    decide: str | None = None,
    *,
    full_page: bool = True,
    request_page: bool = False,
) -> None:
    """At each size: no horizontal overflow, ``decide`` (when given) inside the first viewport, a request
    page's decide buttons after the whole request, and a screenshot ``NAME-1280.png`` / ``NAME-390.png`` in
    ``shots`` (the whole page, or the first screen of a long list); back at 1280×900 after."""
    for label, (width, height) in SIZES.items():
        await page.set_viewport_size({"width": width, "height": height})
        scroll_width, client_width = await overflow(page)
        assert scroll_width <= client_width, f"{name} at {label}: {scroll_width} > {client_width}"
        if decide is not None:
            await in_first_viewport(page, decide)
        if request_page:
            await decide_after_request(page)
        if shots is not None:
            await page.screenshot(path=str(shots / f"{name}-{label}.png"), full_page=full_page)
    await page.set_viewport_size({"width": 1280, "height": 900})


NAV_CONTRAST = """() => {
  const luminance = (css) => {
    const [r, g, b] = css.match(/\\d+(\\.\\d+)?/g).slice(0, 3).map(Number).map((v) => {
      const c = v / 255;
      return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const bar = document.querySelector("header.top");
  const box = bar.getBoundingClientRect();
  const ground = luminance(getComputedStyle(bar).backgroundColor);
  return [...document.querySelectorAll("header.top nav a")].map((a) => {
    const r = a.getBoundingClientRect();
    const own = getComputedStyle(a).backgroundColor;
    const back = own.startsWith("rgba(0, 0, 0, 0)") ? ground : luminance(own);
    const fore = luminance(getComputedStyle(a).color);
    const ratio = (Math.max(fore, back) + 0.05) / (Math.min(fore, back) + 0.05);
    const inside = r.top >= box.top && r.bottom <= box.bottom && r.left >= box.left && r.right <= box.right;
    return [a.textContent, Math.round(ratio * 10) / 10, inside];
  });
}"""


async def nav_readable(page: Any) -> list[Any]:
    """Each console nav item: its text, its WCAG contrast against what is behind it, and whether it lies on
    the dark bar; asserts every item is on the bar with a contrast of at least 4.5 (WCAG AA)."""
    items = list(await settled(page, NAV_CONTRAST))
    assert items, "no nav items"
    for text, ratio, inside in items:
        assert inside and ratio >= 4.5, (text, ratio, inside)
    return items
