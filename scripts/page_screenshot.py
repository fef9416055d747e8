#!/usr/bin/env python
"""Save a PNG screenshot of a ``debate show --html`` page, taken in headless Chromium.

    .venv/bin/python scripts/page_screenshot.py debates.html debates.png
    .venv/bin/python scripts/page_screenshot.py debates.html q3.png --select 'RUN/q3' --height 2400

For a reviewer who cannot open a browser where the page lies. Needs Chromium and its
chromedriver (Debian/Ubuntu: ``apt-get install chromium chromium-driver``; scripts/setup.sh
installs them where it can) and Selenium (the test extra). Nothing is downloaded: the browser
and driver are found on PATH, or named by ``CHROME_BIN`` and ``CHROMEDRIVER``. The test
(tests/engine/test_page_browser.py) starts its browser with :func:`start_browser`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> tuple[str, str] | str:
    """``(browser, chromedriver)`` paths, or a one-line reason why there are none."""
    browser = os.environ.get("CHROME_BIN") or next(filter(None, map(shutil.which, BROWSERS)), None)
    driver = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver")
    if not browser:
        return f"no Chromium found (none of {', '.join(BROWSERS)} on PATH, CHROME_BIN unset)"
    if not driver:
        return "no chromedriver found (not on PATH, CHROMEDRIVER unset): apt-get install chromium-driver"
    for path in (browser, driver):
        if not os.access(path, os.X_OK):
            return f"{path} (CHROME_BIN / CHROMEDRIVER) is not an executable file"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    return browser, driver


def start_browser(width: int = 1400, height: int = 1000) -> Any:
    """A headless Chromium WebDriver whose browser log (console errors, uncaught exceptions) is
    kept; :class:`RuntimeError` when :func:`find_chromium` finds none. Call ``quit()`` after: it
    also removes the browser's profile and temporary files (Chromium, stopped by its driver,
    leaves its temporary folders behind otherwise)."""
    found = find_chromium()
    if isinstance(found, str):
        raise RuntimeError(found)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    scratch = tempfile.mkdtemp(prefix="debate-browser-")

    class Browser(webdriver.Chrome):
        def quit(self) -> None:
            try:
                super().quit()
            finally:
                shutil.rmtree(scratch, ignore_errors=True)

    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run"):
        options.add_argument(arg)
    options.add_argument(f"--window-size={width},{height}")
    options.add_argument(f"--user-data-dir={os.path.join(scratch, 'profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(found[1], env={**os.environ, "TMPDIR": scratch})  # the browser's temporary folders
    try:
        return Browser(options=options, service=service)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("page", type=Path, help="the HTML page (debate show OUT --html FILE)")
    parser.add_argument("png", type=Path, help="where to write the screenshot")
    parser.add_argument("--select", metavar="RUN/QUESTION", help="show this debate (default: the first)")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=1600, help="window height: the taller, the more rounds shown")
    args = parser.parse_args(argv)
    if not args.page.is_file():
        print(f"page_screenshot: {args.page}: no such file", file=sys.stderr)
        return 2
    try:
        driver = start_browser(args.width, args.height)
    except RuntimeError as exc:
        print(f"page_screenshot: {exc}", file=sys.stderr)
        return 2
    try:
        url = args.page.resolve().as_uri()
        if args.select:
            from urllib.parse import quote

            url += "#" + quote(args.select, safe="")
        driver.get(url)
        errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        driver.save_screenshot(str(args.png))
    finally:
        driver.quit()
    for e in errors:
        print(f"page_screenshot: browser error: {e}", file=sys.stderr)
    print(f"page_screenshot: wrote {args.png}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
