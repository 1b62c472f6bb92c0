"""Debian's Chromium, headless, driven by selenium through chromedriver: the one way the tests
open a page (the documentation site, the matrix report, the browser example)."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
#: why a browser test cannot run here (None: it can)
MISSING = None if CHROMIUM and CHROMEDRIVER else (
    "chromium or chromedriver is not installed (Debian's chromium and chromium-driver; "
    ".ci/system-deps.sh installs them)")


@contextlib.contextmanager
def chromium(profile: Path, window: str = "1280,1000") -> Iterator[Any]:
    """A headless Chromium with its own profile directory, the browser's console log kept
    (``driver.get_log("browser")``); quit on the way out."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM or ""
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", f"--window-size={window}",
                 f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingOptions", {"browser": "ALL"})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


__all__ = ["CHROMEDRIVER", "CHROMIUM", "MISSING", "chromium"]
