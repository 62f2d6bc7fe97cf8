"""Headless Chromium for the viewer tests: Debian's ``chromium`` and ``chromium-driver`` through selenium.

Nothing is downloaded: the driver and the browser are given by path (selenium's driver manager never runs), and
the browser starts with networking extras off and a fresh profile. Without a browser the tests skip, unless
``KERNBENCH_REQUIRE_BROWSER=1`` (set by ``.ci/run``) makes that a failure.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("KERNBENCH_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("KERNBENCH_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1500,950")


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium)"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (Path(path).exists() or shutil.which(path)):
            return f"{path} not found (apt-get install chromium chromium-driver)"
    return None


def start_driver(profile: Path):
    """A headless Chromium driven by selenium, with console logging on; skips (or fails in CI) when absent."""
    why = missing()
    if why:
        if os.environ.get("KERNBENCH_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser tests required but {why}")
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def wait_ready(driver, timeout: float = 30.0) -> str:
    """Wait until the viewer says it is ready (``body[data-ready]``); returns its value (``1`` or ``error``)."""
    deadline = time.time() + timeout
    while True:
        state = driver.execute_script("return document.body && document.body.getAttribute('data-ready')")
        if state:
            return state
        if time.time() > deadline:
            raise AssertionError("the viewer did not finish loading")
        time.sleep(0.02)


def console_errors(driver) -> list[str]:
    """Console messages of level SEVERE since the last call."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


# ------------------------------------------------------------------ the viewer page (kernbench web)
def js(driver, code, *args):
    """Run ``code`` in the page and return its result."""
    return driver.execute_script(code, *args)


def show(driver, level, sip=0, cube=0, pe=0):
    """Switch the viewer to ``level`` (system, sip, cube, pe) at the given SIP/cube/PE."""
    js(driver, "KB.setView(arguments[0], arguments[1], arguments[2], arguments[3])", level, sip, cube, pe)


def click_on(driver, element):
    """A real mouse click at the middle of an element's box (a horizontal line has no height to click)."""
    from selenium.webdriver import ActionChains

    canvas = driver.find_element("id", "canvas")
    ox, oy = js(driver, "const a = arguments[0].getBoundingClientRect(), b = arguments[1].getBoundingClientRect();"
                        "return [a.x + a.width / 2 - (b.x + b.width / 2), a.y + a.height / 2 - (b.y + b.height / 2)]",
                element, canvas)
    ActionChains(driver).move_to_element_with_offset(canvas, int(ox), int(oy)).click().perform()
