"""The README's pictures, saved from the tests that render them.

`OPSCOPE_SCREENSHOTS=docs/images python -m pytest tests/test_html.py tests/test_graph.py
tests/test_timeline.py` writes one PNG per kind of picture into that folder (the README tour
shows them); without the variable nothing is written beyond each test's own screenshot.
"""

from __future__ import annotations

import os
from pathlib import Path

VARIABLE = "OPSCOPE_SCREENSHOTS"
VIEWPORT = {"width": 1280, "height": 800}


SCROLL = """t => {
  const h = [...document.querySelectorAll('h2, summary')].find(e => e.textContent.startsWith(t));
  if (h.tagName === 'SUMMARY') h.parentElement.open = true;
  h.scrollIntoView();
}"""


def keep(page, name: str, at: str | None = None) -> Path | None:
    """Save what `page` shows as `<name>.png` in the pictures folder (None when none was asked for),
    scrolled first so the heading that starts with `at` is at the top (a closed section opened)."""
    folder = os.environ.get(VARIABLE)
    if not folder:
        return None
    if at is not None:
        page.evaluate(SCROLL, at)
        page.evaluate("window.opscopeDrawAll && window.opscopeDrawAll()")
    path = Path(folder) / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=path)
    return path


def keep_file(html: Path, name: str, at: str | None = None) -> Path | None:
    """`keep` of a page file opened in headless Chromium (for tests that do not open a browser themselves)."""
    if not os.environ.get(VARIABLE):
        return None
    import shutil

    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(html.resolve().as_uri())
        page.evaluate("window.opscopeDrawAll()")
        path = keep(page, name, at)
        browser.close()
    return path
