"""The fjord study end to end at reduced size on the emmc-2012 device profile: fjord-ram above native TPS in the
whitelisted directory, and fewer bytes written."""

from __future__ import annotations

from conftest import needs_fuse, needs_root
from test_study_bfuse import checks_by_claim, run_quick_study, section_rows

pytestmark = [needs_root, needs_fuse]


def test_fjord_study_quick(tmp_path, clean_machine):
    result = run_quick_study("fjord", tmp_path / "fjord")
    checks = checks_by_claim(result)
    assert checks["fjord-ram above native TPS in a whitelisted directory"]["passed"] is True, checks
    assert checks["fjord-ram writes less than native"]["passed"] is True, checks
    tps = section_rows(result, "SQLite inserts per second")
    assert tps["(m) fjord-ram"]["ours"] > tps["(i) native"]["ours"] > 0
    times = section_rows(result, "Run time relative to native")
    assert times["(i) native"]["ours"] == 1.0
    assert times["(m) fjord-ram"]["paper"].endswith("(RL Benchmark)")
    assert set(times) == {"(i) native", "(m) fjord-ram"}   # a reduced study says nothing of the others
