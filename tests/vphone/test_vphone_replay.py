"""`mobiperf replay -t adb:...` on the virtual phone (a kernel of its own, f2fs /data, x86_64 binaries): a phone
trace's file events replayed on a directory of /data and on bFUSE over it, compared, nothing left on the phone."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from android_device import mobiperf_via
from vphone_fixtures import PhoneDevice

pytest_plugins = ["adb_fixtures", "vphone_fixtures"]
TRACE = Path(__file__).resolve().parents[1] / "fixtures" / "android" / "k4.14-android-fs.txt"


@pytest.mark.slow
def test_a_phone_trace_on_the_virtual_phone(vphone: PhoneDevice, tmp_path):
    base = "/data/local/tmp/replay-test"
    out = tmp_path / "what-if"
    done = mobiperf_via(vphone, "replay", str(TRACE), "-t", f"adb:{vphone.serial}", "--stack", f"dir:{base}",
                        "--stack", f"dir:{base}+bfuse", "-n", "1", "-o", str(out), "--no-report", timeout=1800)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "DIFFERENT WORKLOADS" not in done.stdout and "== dir:" in done.stdout
    for run in sorted(out.glob("*-dir-*")):
        meta = json.loads((run / "run.json").read_text())
        assert meta["status"] == "complete" and meta["target"]["kernel"] == vphone.kernel
        assert meta["repetitions"][0]["stack"]["filesystem"] == "f2fs" or "f2fs" in json.dumps(meta["target"])
        held = pl.read_parquet(run / "results" / "replay_fidelity.parquet").filter(pl.col("tolerance").is_not_null())
        assert held["ok"].all() and dict(held.select("metric", "replay").rows())["calls.pread"] == 3
    left = vphone.shell(f"su 0 sh -c 'ls -A {base} 2>/dev/null; ls -A /data/local/tmp/mobiperf 2>/dev/null'")
    assert left.stdout.split() == []
