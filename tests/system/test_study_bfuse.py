"""The bfuse study end to end at reduced size (--quick: 32 MiB files on the host's disk, workload and FUSE daemon
at 15 % of one core): legacy FUSE far below bFUSE's 512 KiB IO unit, and Table 3's pwrite() counts (one per 4 KiB,
x128 fewer with 512 KiB, fewer again with the buffer)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import needs_fuse, needs_root

REPO = Path(__file__).resolve().parents[2]
pytestmark = [needs_root, needs_fuse]


def run_quick_study(name: str, out: Path, *extra: str, timeout: float = 600, cwd: Path = REPO) -> dict:
    from mobiperf.orchestration.study import get_study, missing_components

    missing = missing_components(get_study(name))
    if missing:
        pytest.skip(f"study {name} needs {', '.join(missing)}")
    done = subprocess.run([sys.executable, "-m", "mobiperf", "study", name, "--quick", "-o", str(out), *extra],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout)
    print(done.stdout)
    assert done.returncode == 0, done.stderr[-3000:]
    out = cwd / out   # (an absolute out stays as it is)
    result = json.loads((out / "study.json").read_text())
    assert f"== study {name}:" in done.stdout
    page = (out / "study.html").read_text()
    assert "Plotly.newPlot" in page and "<script src=" not in page and "ours (median)" in page
    return result


class _Claims(dict):
    """The study's checks by claim; a key may be the start of a claim."""

    def __missing__(self, start: str) -> dict:
        found = [c for claim, c in self.items() if claim.startswith(start)]
        if len(found) != 1:
            raise KeyError(f"{start!r}: {len(found)} checks match; claims: {list(self)}")
        return found[0]


def checks_by_claim(result: dict) -> dict[str, dict]:
    return _Claims({c["claim"]: c for c in result["checks"]})


def section_rows(result: dict, title_start: str) -> dict[str, dict]:
    section = next(s for s in result["sections"] if s["title"].startswith(title_start))
    return {r["label"]: r for r in section["rows"]}


def test_bfuse_study_quick(tmp_path, clean_machine):
    # A relative -o, as `mobiperf study bfuse` defaults to (studies/bfuse): the FUSE daemons run in another working
    # directory, and Table 3's pwrite() counts come from the counters they write into the run directories.
    result = run_quick_study("bfuse", Path("bfuse"), cwd=tmp_path)
    checks = checks_by_claim(result)
    assert checks["legacy FUSE is far below bFUSE's 512 KiB IO unit"]["passed"] is True, checks
    assert checks["Table 3: the legacy daemon writes 4 KiB per pwrite()"]["passed"] is True
    assert checks["Table 3: a 512 KB IO unit cuts pwrite() x128; the buffer cuts it about x4 more"]["passed"]
    assert checks["Fig. 7: fewer context switches with a larger FUSE IO unit"]["passed"] is True
    table3 = section_rows(result, "System calls of the FUSE daemon")
    # scaled to the paper's 512 MB: exactly 131,072 4 KiB writes and 1,024 512 KiB writes
    assert table3["pwrite(), legacy FUSE"]["ours"] == pytest.approx(131_072, rel=0.01)
    assert table3["pwrite(), legacy FUSE"]["paper"] == 128_000
    assert table3["pwrite(), 512 KB no buffer"]["ours"] == pytest.approx(1_024, rel=0.02)
    assert table3["pwrite(), bFUSE"]["ours"] < 512
    shares = section_rows(result, "Shares")
    assert shares["bFUSE / legacy FUSE"]["ours"] > 1.0
    assert shares["bFUSE / legacy FUSE"]["paper"] == pytest.approx(4.19)
