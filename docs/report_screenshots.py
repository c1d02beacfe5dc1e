"""Re-make the screenshots of the HTML report shown in docs/report.md.

Runs ``promptcache demo`` (the real engine, proxies and openai client; about 2 min on 2 cores,
no network), renders ``promptcache report --format html`` of the naive app's log and photographs
it with headless Chromium: the top of the page at 1,100 px, the charts at 1,100 px, and the top
at 360 px. Each PNG must stay under 300 KB (the script fails otherwise).

    python docs/report_screenshots.py                 # writes docs/img/report-*.png
    python docs/report_screenshots.py --demo-dir out/demo   # reuse a finished demo's logs
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from promptcache.proxy.report import build_report
from promptcache.proxy.report.html import render_html

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "img"
MAX_BYTES = 300_000
#: A screenshot shows the top of the page: sections hidden for the charts' picture.
ABOVE_CHARTS = "header, #headline, .priced-as, #breaks, #families-section { display: none; }"
#: (file name, window width, window height, CSS added to the page)
SHOTS = (
    ("report-top.png", 1100, 1250, ""),
    ("report-charts.png", 1100, 1000, ABOVE_CHARTS),
    ("report-phone.png", 360, 1500, ""),
)
MIN_BYTES = 20_000  # less is a blank picture
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo-dir", type=Path, help="a finished demo's --output-dir")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("error: needs Chromium (apt-get install chromium)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        demo = args.demo_dir
        if demo is None:
            demo = Path(tmp) / "demo"
            cli = [sys.executable, "-c", "from promptcache.cli import main; main()"]
            subprocess.run([*cli, "demo", "--output-dir", str(demo)], check=True,
                           stdout=subprocess.DEVNULL)  # fmt: skip
        now = time.time()
        report = build_report(demo / "naive.db", since=now - 86400, until=now + 1, now=now)
        html = render_html(report)
        OUT.mkdir(parents=True, exist_ok=True)
        for name, width, height, css in SHOTS:
            page = Path(tmp) / f"{name}.html"
            page.write_text(html.replace("</style>", css + "</style>", 1), encoding="utf-8")
            target = OUT / name
            subprocess.run(
                [chromium, *FLAGS, f"--user-data-dir={tmp}/profile-{name}",
                 f"--window-size={width},{height}", f"--screenshot={target}",
                 page.as_uri()],
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip
            size = target.stat().st_size
            print(f"{target.relative_to(ROOT)}  {width}x{height}  {size / 1000:.0f} KB")
            if not MIN_BYTES <= size <= MAX_BYTES:
                print(f"error: {name} is {size:,} bytes, not {MIN_BYTES:,}-{MAX_BYTES:,}",
                      file=sys.stderr)  # fmt: skip
                return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
