"""The bfuse study as a benchmark: raw device vs native vs legacy FUSE vs 512 KiB FUSE vs bFUSE on the
galaxy-s3-2012 phone model (emmc-2012 device, 64 MiB dirty limit, 25 % CPU share, 430 us FUSE wake-up; see
mobiperf/stack/phone.py), with ratios against native and legacy FUSE, beside the paper's (seed 000, Figs. 2, 16, 17).

    python bench/study_bfuse.py                       # full study (256 MiB files, 3 repetitions, phone model)
    python bench/study_bfuse.py --phone none          # the bare emmc-2012 device on this host's memory and CPU
    python bench/study_bfuse.py --quick               # reduced (32 MiB, host disk, 2 repetitions)
    python bench/study_bfuse.py --device ufs-2020 --cpu 20% -o /tmp/bfuse-ufs
    python bench/study_bfuse.py -o /tmp/bfuse --report-only   # reprint from a finished or interrupted study

It is `mobiperf study bfuse` plus the shape test of issue 9: native within 10 % of the profile's bandwidth,
legacy FUSE <= 40 % of native, bFUSE >= 90 % of native. Resumable (the study directory is a sweep). Needs root,
/dev/fuse and reference-impl/bin/{bfuse,devmodel,mobibench}. The machine is shared: medians with min-max.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mobiperf.orchestration.study import Config, Results, plan_study, get_study, run_study  # noqa: E402
from mobiperf.orchestration.sweep import SweepDir, format_rows  # noqa: E402

PEERS = [("raw", "raw device (NOOP)", 40.0), ("native", "ext4, no FUSE", 40.0),
         ("legacy", "legacy FUSE (4 KiB, 1 thread)", 7.0),
         ("nobuf", "512 KiB unit, no buffer", 33.1), ("bfuse", "bFUSE (8 MiB buffer, 10 ms)", 37.0)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", type=Path, default=Path("/tmp/mobiperf-bench-study-bfuse"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--device", default=None, help="device profile (default: the study's, emmc-2012)")
    ap.add_argument("--cpu", default="host", help="CPU share of one core for workload + FUSE daemon, e.g. 20%%")
    ap.add_argument("--phone", default=None, help="phone profile (default: the study's, galaxy-s3-2012; none)")
    ap.add_argument("-n", "--repeat", type=int, default=None)
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    config = Config(quick=args.quick, device=args.device, repeat=args.repeat, cpu=args.cpu, phone=args.phone)
    result = run_study("bfuse", args.output, config, report_only=args.report_only)
    study = get_study("bfuse")
    _, labels = plan_study(study, Config(quick=args.quick, device=config.device, cpu=args.cpu, phone=config.phone))
    res = Results(SweepDir(args.output).read(), labels)
    native = res.median("native", "run.throughput")
    legacy = res.median("legacy", "run.throughput")
    rows = [["configuration", "MB/s median", "min-max", "n", "vs native", "vs legacy", "paper MB/s (JB)"]]
    for label, name, paper in PEERS:
        cell = res.cell(label)
        st = cell.stat("run.throughput") if cell else {"n": 0}
        if not st["n"]:
            rows.append([name, "-", "-", "0", "-", "-", f"{paper:.1f}"])
            continue
        rows.append([name, f"{st['median'] / 1e6:.1f}", f"{st['min'] / 1e6:.1f}-{st['max'] / 1e6:.1f}",
                     str(st["n"]), f"{st['median'] / native:.2f}" if native else "-",
                     f"{st['median'] / legacy:.2f}" if legacy else "-", f"{paper:.1f}"])
    print(f"bfuse study in {args.output} (phone {config.phone}, device {config.device or 'host disk'}, "
          f"cpu {args.cpu}); "
          f"{result['machine_note']}")
    print(format_rows(rows), end="")
    print("\nshape (issue 9):")
    for c in result["checks"]:
        verdict = {True: "HOLDS", False: "DOES NOT HOLD", None: "NOT MEASURED"}[c["passed"]]
        print(f"  [{verdict}] {c['claim']}: {c['detail']}")
    print(f"\nreport: {args.output / 'study.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
