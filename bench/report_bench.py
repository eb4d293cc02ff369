"""Report benchmark: how big is the HTML and how fast does it open, from 10 k to 1 M block requests.

For each size, a synthetic run (tests/support/synthetic.py: the real analyzers on a synthetic block trace) is reported,
and the page is opened in headless Chromium (tests/support/browser_check.py) several times; the figure is the page's own
clock from navigation to the first screen's figures drawn (the others are drawn lazily after it; the time to every
figure drawn is in the note), median and range. Peers, on the same machine in the same minute:

  plotly.js only   an empty page with plotly.js inlined: the floor every self-contained plotly page pays
  naive scatter    plotly.js plus one WebGL scatter of every request (no thinning), what a report without
                   thinning would have to load for its access-pattern figure alone

Usage: python bench/report_bench.py [--sizes 10000,100000,1000000] [--repeat 3]
The targets of issue 8: a 1 M-request report opens in under 5 s and stays under 50 MB. The machine is shared;
the plotly.js-only row shows how loaded it was.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio

# the synthetic runs and the browser check are test helpers (tests/support)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))


def _open_times(path: Path, repeat: int) -> tuple[list[float], list[float], int, int]:
    """(first screen drawn, every figure drawn) times of `repeat` loads, the largest JS heap, error count."""
    from browser_check import check_page

    first, every, heap, errors = [], [], 0, 0
    for _ in range(repeat):
        check = check_page(path, timeout=180)
        first.append(check.first_screen_s or check.load_s)
        every.append(check.load_s)
        heap = max(heap, check.js_heap_bytes)
        errors += len(check.console_errors) + len(check.undrawn)
    return first, every, heap, errors


def _fmt(times: list[float]) -> str:
    return f"{statistics.median(times):6.2f} s [{min(times):.2f}-{max(times):.2f}]"


def main() -> int:
    from mobiperf.orchestration import pipeline
    from browser_check import chromium_available
    from mobiperf.reports.html import plotly_js
    from synthetic import make_synthetic_run

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    ok, why = chromium_available()
    if not ok:
        print(f"skipped: {why}")
        return 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="mobiperf-report-bench-") as tmp:
        tmp = Path(tmp)
        floor = tmp / "plotly-only.html"
        floor.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><script>{plotly_js()}</script></head>"
                         "<body></body></html>")
        for n in [int(s) for s in args.sizes.split(",")]:
            t0 = time.monotonic()
            run = make_synthetic_run(tmp / f"run-{n}", n_requests=n, repetitions=1)
            t1 = time.monotonic()
            report = pipeline.report(run)
            t2 = time.monotonic()
            times, every, heap, errors = _open_times(report, args.repeat)
            floor_times, _, _, _ = _open_times(floor, args.repeat)
            rows.append((f"report {n:,}", report.stat().st_size, times, heap, errors, floor_times,
                         f"all figures {statistics.median(every):.2f} s; analyse {t1 - t0:.1f} s, "
                         f"render {t2 - t1:.1f} s"))
            print(f"measured {rows[-1][0]}: {_fmt(times)}", file=sys.stderr, flush=True)
            if n >= 100_000:
                bio = run.read_table("block_io")
                fig = go.Figure(go.Scattergl(x=bio["ts"].to_numpy(), y=bio["sector"].to_numpy(), mode="markers"))
                naive = tmp / f"naive-{n}.html"
                naive.write_text(pio.to_html(fig, include_plotlyjs=True, full_html=True))
                ntimes, _, nheap, nerr = _open_times(naive, args.repeat)
                rows.append((f"naive scatter {n:,}", naive.stat().st_size, ntimes, nheap, nerr, floor_times, ""))
    print("\nmachine shared with other jobs: times are medians [range] of", args.repeat, "loads\n")
    print(f"{'page':<24}{'size':>10}  {'first screen in':<24}{'plotly.js only':<24}{'ratio':>6}  {'JS heap':>8}  "
          f"{'errors':>6}  note")
    for name, size, times, heap, errors, floor_times, note in rows:
        ratio = statistics.median(times) / statistics.median(floor_times)
        print(f"{name:<24}{size / 2**20:>8.1f}MB  {_fmt(times):<24}{_fmt(floor_times):<24}{ratio:>6.2f}  "
              f"{heap / 2**20:>6.0f}MB  {errors:>6}  {note}")
    million = [r for r in rows if r[0] == "report 1,000,000"]
    if million:
        _, size, times, *_ = million[0]
        print(f"\n1 M requests: {size / 2**20:.1f} MB (target < 50 MB), first screen in "
              f"{statistics.median(times):.2f} s (target < 5 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
