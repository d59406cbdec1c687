"""One headless Chromium for every browser test of a run: Playwright's sync API cannot start a
second instance while one is open in the same process (its event loop is already running)."""
import pytest

from book_pages import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture(scope="session")
def browser():
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
