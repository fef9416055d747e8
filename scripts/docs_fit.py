#!/usr/bin/env python
"""Find what runs off the right edge of the built docs site at a given window width.

    .venv/bin/mkdocs build --strict && .venv/bin/python scripts/docs_fit.py site --out docs_fit.json
    .venv/bin/python scripts/docs_fit.py site --page benchmarks --screenshots shots/

Every page of the built site (``site/**/index.html``) is opened in headless Chromium
(:func:`page_screenshot.start_browser`) at ``--width`` (1280 px, a laptop) and every table and
code block of the page's content is measured: one wider than the space it is given needs a
sideways scroll, so part of it (a table's last columns, a command's end) is off-screen. Prints one
line per page with such blocks and saves the list as JSON (``--out``); exit 1 when any block
overflows by more than ``--tolerance`` pixels. ``--screenshots DIR`` also saves a PNG of each page
checked (the top ``--height`` pixels).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from page_screenshot import start_browser  # noqa: E402

# each table / code block of the content: how much wider it is than its box (scrollWidth over
# clientWidth), and the first words of its text to find it by
MEASURE = """
const out = [];
for (const el of document.querySelectorAll('.md-content table, .md-content pre > code')) {
  const box = el.tagName === 'TABLE' ? (el.closest('.md-typeset__scrollwrap') || el.parentElement) : el;
  const over = Math.max(box.scrollWidth - box.clientWidth, el.getBoundingClientRect().right - window.innerWidth);
  if (over > 0) out.push({kind: el.tagName.toLowerCase(), over: Math.round(over),
                          text: el.innerText.replace(/\\s+/g, ' ').slice(0, 60)});
}
return out;
"""


def pages(site: Path, only: list[str]) -> list[Path]:
    """The built pages of ``site`` (every ``index.html``), or those named in ``only`` (a page's
    folder relative to the site, "" for the home page)."""
    if only:
        return [site / name / "index.html" for name in only]
    return sorted(p for p in site.rglob("index.html") if "search" not in p.parts and "assets" not in p.parts)


def measure(site: Path, chosen: list[Path], width: int, height: int, shots: Path | None) -> dict[str, list[Any]]:
    """Per page (relative folder), the blocks that overflow at ``width`` (see :data:`MEASURE`)."""
    driver = start_browser(width, height)
    found: dict[str, list[Any]] = {}
    try:
        for page in chosen:
            name = str(page.parent.relative_to(site)) if page.parent != site else "(home)"
            driver.get(page.resolve().as_uri())
            found[name] = driver.execute_script(MEASURE)
            if shots is not None:
                shots.mkdir(parents=True, exist_ok=True)
                driver.save_screenshot(str(shots / (name.replace("/", "_") + ".png")))
    finally:
        driver.quit()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=Path, help="the built site (mkdocs build writes site/)")
    parser.add_argument("--page", action="append", default=[], help="a page's folder in the site (default: every page)")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=900)
    parser.add_argument("--tolerance", type=int, default=2, help="pixels of overflow allowed (rounding)")
    parser.add_argument("--screenshots", type=Path, help="save a PNG of each page here")
    parser.add_argument("--out", type=Path, help="save the findings as JSON")
    args = parser.parse_args(argv)
    chosen = pages(args.site, args.page)
    missing = [p for p in chosen if not p.is_file()]
    if not chosen or missing:
        print(f"docs_fit: {missing[0] if missing else args.site}: no built page (run mkdocs build)", file=sys.stderr)
        return 2
    try:
        found = measure(args.site, chosen, args.width, args.height, args.screenshots)
    except RuntimeError as exc:
        print(f"docs_fit: {exc}", file=sys.stderr)
        return 2
    over = {name: [b for b in blocks if b["over"] > args.tolerance] for name, blocks in found.items()}
    over = {name: blocks for name, blocks in over.items() if blocks}
    for name, blocks in over.items():
        print(f"{name}: " + "; ".join(f"{b['kind']} +{b['over']} px ({b['text']!r})" for b in blocks))
    print(f"docs_fit: {len(chosen)} pages at {args.width} px, {sum(map(len, over.values()))} blocks run off the edge")
    if args.out:
        args.out.write_text(json.dumps({"width": args.width, "pages": len(chosen), "overflow": over}, indent=1))
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
