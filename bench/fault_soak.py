"""Soak: `mobiperf run` killed at a random moment with a random signal, many times; then `mobiperf doctor --fix`.

Each run builds a real stack with the whole phone model (ext4+fuse or ext4+bfuse, --scheduler bfq --dirty-limit
64M --cpu 50%: a loop device's scheduler and BDI knobs, CPU cgroups, a FUSE daemon, a tracefs instance) and gets
SIGINT, SIGTERM, SIGHUP or SIGKILL after a random delay, which lands anywhere: while Python starts, during set-up,
while the workload runs, during teardown, parse or analysis, or after the run ended. Every next run undoes what a
killed one left (its undo journal), and the soak ends with `mobiperf doctor --fix`.

Then it counts what is left of any of its runs, looking at the machine itself: journals, stack directories,
mounts, loop devices, tracefs instances, cgroups, processes carrying a run's owner token, and every sysfs value a
run wrote down in its journal that is not back to its old value (unless another process holds that loop device
now). Expected: 0 and 0. It also re-analyses a sample of the run directories, which must all work.

    python bench/fault_soak.py                 # 100 runs
    python bench/fault_soak.py --runs 10 --seed 7 --keep

Not part of the test suite (about 10 s per run). Needs root, FUSE and reference-impl/bin.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))

from leftover_checks import changed_values, journal_lines, owned_pids  # noqa: E402

MOBIPERF = [sys.executable, "-m", "mobiperf"]
JOURNALS = Path("/var/tmp/mobiperf/journal")
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL)
STACKS = ("ext4+fuse", "ext4+bfuse")
PHONE = ["--scheduler", "bfq", "--dirty-limit", "64M", "--cpu", "50%", "--image-size", "256M"]
WORKLOAD = ["sh", "-c", "dd if=/dev/zero of=f bs=64k count=320 conv=fsync 2>/dev/null; sleep 2"]


class JournalWatcher(threading.Thread):
    """Reads a run's journal while it lives: a run that stops cleanly removes it at the end."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid = pid
        self.lines: dict[str, list[dict]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for path in JOURNALS.glob(f"{self.pid}-*.jsonl"):
                try:
                    self.lines[path.name] = journal_lines(path)
                except OSError:
                    pass
            time.sleep(0.05)

    def entries(self) -> list[tuple[dict, list[dict]]]:
        """(header, change entries with updates applied) of each journal the run had."""
        out = []
        for lines in self.lines.values():
            if not lines:
                continue
            by_id: dict[int, dict] = {}
            for item in lines[1:]:
                if "kind" in item:
                    by_id[item["id"]] = dict(item)
                elif "update" in item and item["update"] in by_id:
                    by_id[item["update"]].update({k: v for k, v in item.items() if k != "update"})
            out.append((lines[0], list(by_id.values())))
        return out


def one_run(i: int, out: Path, rng: random.Random, max_delay: float) -> dict:
    sig = rng.choice(SIGNALS)
    delay = rng.uniform(0.0, max_delay)
    stack = STACKS[i % len(STACKS)]
    run_dir = out / f"run{i:03d}"
    env = dict(os.environ, MOBIPERF_PROGRESS="0")
    proc = subprocess.Popen([*MOBIPERF, "run", "--stack", stack, *PHONE, "--no-report", "-o", str(run_dir), "--",
                             *WORKLOAD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True, cwd=out,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    watcher = JournalWatcher(proc.pid)
    watcher.start()
    time.sleep(delay)
    ended_before = proc.poll() is not None
    if not ended_before:
        proc.send_signal(sig)
    try:
        _, stderr = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate(timeout=60)
        stderr += "\n[soak: did not end within 300 s of its signal; SIGKILLed]"
    time.sleep(0.2)
    watcher.stop.set()
    watcher.join()
    stage, reason = "no run directory", None
    if (run_dir / "run.json").exists():
        meta = json.loads((run_dir / "run.json").read_text())
        stage = meta.get("stopped", {}).get("stage") or meta["status"]
        reason = meta.get("stopped", {}).get("reason")
    recovered = re.findall(r"mobiperf: leftovers of mobiperf pid (\d+)", stderr)
    return {"i": i, "pid": proc.pid, "stack": stack, "signal": signal.Signals(sig).name, "delay_s": round(delay, 2),
            "ended_before": ended_before, "exit": proc.returncode, "stage": stage, "reason": reason,
            "expected_exit": proc.returncode in (0, 128 + sig, -sig), "recovered": recovered,
            "journals": watcher.entries(), "run_dir": str(run_dir), "traceback": "Traceback" in stderr,
            "stderr_tail": stderr.strip().splitlines()[-1:] if stderr.strip() else []}


def leftovers(runs: list[dict]) -> dict[str, list[str]]:
    """What is left of any run, by kind, looking at the machine."""
    pids = {r["pid"] for r in runs}
    named = re.compile(r"(?:stack|mobiperf|mobiperf-cpu)-(\d+)-")

    def ours(text: str) -> bool:
        return any(int(m) in pids for m in named.findall(text))

    found: dict[str, list[str]] = collections.defaultdict(list)
    found["journals"] = [p.name for p in JOURNALS.glob("*") if p.name.split("-")[0] in {str(p) for p in pids}]
    found["stack directories"] = [p.name for p in Path("/var/tmp/mobiperf").glob("stack-*") if ours(p.name)]
    found["mounts"] = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
                       if ours(line.split()[1])]
    found["loop devices"] = [f"{d.name} {(d / 'loop' / 'backing_file').read_text().strip()}"
                             for d in Path("/sys/block").glob("loop*") if (d / "loop" / "backing_file").exists()
                             and ours((d / "loop" / "backing_file").read_text())]
    found["tracefs instances"] = [p.name for p in Path("/sys/kernel/tracing/instances").glob("mobiperf-*")
                                  if ours(p.name)]
    found["cgroups"] = [str(p) for base in ("cpu", "cpuacct", "")
                        for p in (Path("/sys/fs/cgroup") / base).glob("mobiperf-cpu-*") if ours(p.name)]
    for r in runs:
        for header, _ in r["journals"]:
            found["processes"] += [f"{pid} ({name})" for pid, name in owned_pids(header["token"]).items()]
    values = []
    for r in runs:
        for _, entries in r["journals"]:
            for e in entries:
                if e["kind"] in ("sysfs", "bdi"):
                    values += changed_values(e, entries)
    found["changed sysfs values"] = sorted(set(values))
    return {k: v for k, v in found.items()}


def analyse_sample(runs: list[dict], n: int, rng: random.Random) -> dict[str, int]:
    # (a run stopped before its trace started has nothing to analyse, and `mobiperf analyze` says so in one line)
    with_raw = [r for r in runs if (Path(r["run_dir"]) / "raw" / "rep0" / "ftrace.txt").exists()]
    outcome = collections.Counter()
    for r in rng.sample(with_raw, min(n, len(with_raw))):
        done = subprocess.run([*MOBIPERF, "analyze", r["run_dir"], "--format", "json"], capture_output=True,
                              text=True, timeout=600)
        outcome["ok" if done.returncode == 0 else f"failed: {done.stderr.strip().splitlines()[-1:]}"] += 1
    return dict(outcome)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--max-delay", type=float, default=9.0, help="kill within this many seconds of the start")
    ap.add_argument("--analyse", type=int, default=10, help="re-analyse this many run directories at the end")
    ap.add_argument("--keep", action="store_true", help="keep the run directories")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("fault_soak: needs root (loop devices, mounts, tracefs)", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    out = Path(tempfile.mkdtemp(prefix="mobiperf-soak-", dir="/var/tmp"))
    load = os.getloadavg()
    started = time.time()
    runs = []
    for i in range(args.runs):
        r = one_run(i, out, rng, args.max_delay)
        runs.append(r)
        print(f"[{i + 1}/{args.runs}] {r['stack']:<10} {r['signal']:<7} after {r['delay_s']:5.2f} s: exit {r['exit']}, "
              f"{r['stage']}" + (f"; undid pid {', '.join(r['recovered'])}" if r["recovered"] else "")
              + (f"; TRACEBACK: {r['stderr_tail']}" if r["traceback"] else "")
              + ("" if r["expected_exit"] else f"; UNEXPECTED: {r['stderr_tail']}"), flush=True)
    doctor = subprocess.run([*MOBIPERF, "doctor", "--fix"], capture_output=True, text=True, timeout=600)
    left = leftovers(runs)
    analysed = analyse_sample(runs, args.analyse, rng)
    summary = {
        "runs": args.runs, "seed": args.seed, "wall_s": round(time.time() - started, 1),
        "loadavg_at_start": [round(x, 2) for x in load], "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        "signals": dict(collections.Counter(r["signal"] for r in runs)),
        "ended_before_the_signal": sum(r["ended_before"] for r in runs),
        "exit_statuses": dict(collections.Counter(str(r["exit"]) for r in runs)),
        "where_stopped": dict(collections.Counter(re.sub(r"rep \d+", "rep N", r["stage"]) for r in runs)),
        "leftovers_undone_by_the_next_run": sum(len(r["recovered"]) for r in runs),
        "tracebacks": sum(r["traceback"] for r in runs),
        "unexpected_exits": [f"run {r['i']}: {r['exit']} {r['stderr_tail']}" for r in runs if not r["expected_exit"]],
        "doctor": {"exit": doctor.returncode, "said": doctor.stdout.strip(),
                   "journals_undone": len(re.findall(r"leftovers of mobiperf pid", doctor.stderr))},
        "leftovers": {k: len(v) for k, v in left.items()},
        "leftover_details": {k: v[:10] for k, v in left.items() if v},
        "analysed": analysed,
    }
    print(json.dumps(summary, indent=2))
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    else:
        print(f"run directories kept in {out}")
    bad = sum(summary["leftovers"].values()) or summary["tracebacks"] or any(k != "ok" for k in analysed)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
