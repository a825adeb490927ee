"""Open a `synestra timeline` HTML page in real headless Chromium: check that Vega drew it, and save a
screenshot (docs/timeline-job-1003.png is made with this script).

    python scripts/timeline_browser.py PAGE.html [--screenshot OUT.png] [--expect TEXT ...]

Chromium from Debian's packages (`apt-get install -y chromium`); as root it needs --no-sandbox. The page
must render offline: Chromium is started with networking pointed nowhere (--proxy-server), so a page that
fetched its libraries would stay blank and fail the check. Exit 0 when every --expect text is drawn as an
SVG <text> element, 1 otherwise, 2 when no Chromium is found.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--hide-scrollbars",
    "--proxy-server=127.0.0.1:9",
    "--virtual-time-budget=15000",
]


def chromium() -> str | None:
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


def rendered_texts(browser: str, page: Path) -> list[str]:
    """The text of every SVG <text> element Vega drew (the spec's own strings do not count)."""
    dom = subprocess.run(
        [browser, *FLAGS, "--dump-dom", page.resolve().as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return [m.group(1) for m in re.finditer(r"<text[^>]*>([^<]*)</text>", dom)]


def screenshot(browser: str, page: Path, out: Path, size: str = "1150,790") -> None:
    subprocess.run(
        [browser, *FLAGS, f"--window-size={size}", f"--screenshot={out.resolve()}", page.resolve().as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("page", type=Path)
    ap.add_argument("--screenshot", type=Path)
    ap.add_argument("--size", default="1150,790", help="window WIDTH,HEIGHT in CSS pixels")
    ap.add_argument("--expect", action="append", default=[], help="text that must be drawn")
    args = ap.parse_args(argv)
    browser = chromium()
    if browser is None:
        print("no chromium on PATH: apt-get install -y chromium", file=sys.stderr)
        return 2
    texts = rendered_texts(browser, args.page)
    missing = [e for e in args.expect if not any(e in t for t in texts)]
    print(
        f"{args.page}: {len(texts)} text element(s) drawn" + (f"; missing {missing}" if missing else ""),
        file=sys.stderr,
    )
    if args.screenshot:
        screenshot(browser, args.page, args.screenshot, args.size)
    return 1 if missing or not texts else 0


if __name__ == "__main__":
    sys.exit(main())
