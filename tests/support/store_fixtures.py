"""Stores of runs for the store and cluster tests, made from the golden fixtures (tests/fixtures/golden) with
varied facts, and a real Dask scheduler with workers started as subprocesses.

A store run is a golden fixture's raw/ (hard-linked: analysis never writes there) and its run.json with other
facts: target, kernel, host, id, and the scope of the analysis (workload or all), the one fact of these that
the analysis reads. So the serial analysis of (fixture, scope) is the expected result of every run made from it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

from mobiperf.orchestration import pipeline
from mobiperf.core.runstore import RunDir

GOLDEN = Path(__file__).resolve().parent.parent / "fixtures" / "golden"
# the golden fixtures whose analysis takes ~0.1 s (the strace ones parse strace too)
FAST = ("fuse-seq512k", "rand4k-fsync", "seq512k-buffered", "split-4m-direct", "sqlite-delete", "sqlite-persist",
        "sqlite-truncate", "sqlite-wal")
KERNELS = ("6.1.0-android14", "6.6.30-android15")
TARGETS = ("local", "adb:SERIAL1", "adb:SERIAL2")
SCOPES = ("workload", "all")


def run_facts(i: int) -> dict:
    """The varied facts of the i-th run of a store."""
    return {"fixture": FAST[i % len(FAST)], "kernel": KERNELS[(i // len(FAST)) % 2],
            "target": TARGETS[i % 3], "scope": SCOPES[(i // 3) % 2]}


def link_or_copy(src: str, dst: str) -> None:
    """A hard link (fast, no space: analysis only reads raw/), a copy across filesystems."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def make_run(dest: Path, fixture: str, *, run_id: str, kernel: str, target: str, scope: str) -> Path:
    """A run directory at `dest`: the fixture's raw traces (hard links) and its run.json with these facts."""
    dest.mkdir(parents=True)
    shutil.copytree(GOLDEN / fixture / "raw", dest / "raw", copy_function=link_or_copy)
    for sub in ("tables", "results"):
        (dest / sub).mkdir()
    meta = json.loads((GOLDEN / fixture / "run.json").read_text())
    meta.update(id=run_id, host=f"host-{target.split(':')[-1].lower()}", scope=scope)
    meta["target"] = {**meta["target"], "target": target, "kernel": kernel}
    (dest / "run.json").write_text(json.dumps(meta, indent=1))
    return dest


def make_store(root: Path, n: int) -> list[dict]:
    """A store of n unanalysed runs (run-000 ...); returns each run's facts with its run_id."""
    root.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        facts = run_facts(i)
        run_id = f"run-{i:03d}"
        make_run(root / run_id, facts["fixture"], run_id=run_id, kernel=facts["kernel"], target=facts["target"],
                 scope=facts["scope"])
        out.append({**facts, "run_id": run_id})
    return out


def serial_references(root: Path, runs: list[dict]) -> dict[tuple[str, str], Path]:
    """{(fixture, scope): a run directory analysed in this process} for every pair the store uses."""
    refs = {}
    for fixture, scope in sorted({(r["fixture"], r["scope"]) for r in runs}):
        path = make_run(root / f"{fixture}-{scope}", fixture, run_id="ref", kernel=KERNELS[0], target="local",
                        scope=scope)
        pipeline.analyze(RunDir.open(path), reparse=True)
        refs[(fixture, scope)] = path
    return refs


def analysis_of(path: Path) -> dict:
    """What an analysis wrote: every table and result table, and the metrics of run.json."""
    out = {f"{sub}/{p.stem}": pl.read_parquet(p) for sub in ("tables", "results")
           for p in sorted((path / sub).glob("*.parquet"))}
    meta = json.loads((path / "run.json").read_text())
    out["metrics"] = sorted(json.dumps(m, sort_keys=True) for m in meta.get("metrics", []))
    out["warnings"] = meta.get("warnings", [])
    return out


def assert_same_analysis(got: Path, want: Path) -> None:
    a, b = analysis_of(got), analysis_of(want)
    assert sorted(a) == sorted(b), f"{got.name}: tables {sorted(a)} != {sorted(b)}"
    for name in b:
        if isinstance(b[name], pl.DataFrame):
            assert a[name].equals(b[name]), f"{got.name}: {name} differs from the serial analysis"
        else:
            assert a[name] == b[name], f"{got.name}: {name} differs from the serial analysis"


# --- a real scheduler and workers, as subprocesses ---------------------------------------------------------------

DASK = str(Path(sys.executable).parent / "dask")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DaskProcesses:
    """`dask scheduler` and `dask worker`s on 127.0.0.1, each in its own session, all stopped by stop()."""

    def __init__(self, logdir: Path):
        self.logdir = logdir
        self.procs: dict[str, subprocess.Popen] = {}
        self.address = ""

    def _start(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.logdir / f"{name}.log", "wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=self.logdir)
        log.close()
        self.procs[name] = proc
        return proc

    def start_scheduler(self, timeout_s: float = 60) -> str:
        port = free_port()
        self.address = f"tcp://127.0.0.1:{port}"
        self._start("scheduler", [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                  "--no-dashboard", "--no-show"])
        self._wait_for(lambda c: True, timeout_s)
        return self.address

    def start_worker(self, name: str, resources: str | None = None, *, nthreads: int = 1,
                     timeout_s: float = 60) -> subprocess.Popen:
        argv = [DASK, "worker", self.address, "--name", name, "--nthreads", str(nthreads), "--no-nanny",
                "--no-dashboard", "--host", "127.0.0.1", "--death-timeout", "60"]
        if resources:
            argv += ["--resources", resources]
        proc = self._start(name, argv)
        self._wait_for(lambda c: name in {w["name"] for w in c.scheduler_info(n_workers=-1)["workers"].values()},
                       timeout_s)
        return proc

    def _wait_for(self, ready, timeout_s: float) -> None:
        from distributed import Client

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with Client(self.address, timeout=5) as c:
                    if ready(c):
                        return
            except OSError:
                pass
            time.sleep(0.3)
        logs = {n: (self.logdir / f"{n}.log").read_text(errors="replace")[-800:] for n in self.procs}
        raise TimeoutError(f"dask processes not ready within {timeout_s} s: {logs}")

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def stop(self) -> None:
        for name, proc in reversed(list(self.procs.items())):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)
