"""The journal-modes study end to end at reduced size: per-insert fsync/write/volume per SQLite journal mode
(strace -c and the block layer), fsync vs fdatasync IOPS."""

from __future__ import annotations

import pytest

from conftest import needs_root
from test_study_bfuse import checks_by_claim, run_quick_study, section_rows

pytestmark = [needs_root, pytest.mark.slow]


def test_journal_modes_study_quick(tmp_path, clean_machine):
    result = run_quick_study("journal-modes", tmp_path / "jm")
    checks = checks_by_claim(result)
    assert checks["WAL has the fewest fsync() per insert"]["passed"] is True, checks
    assert checks["fdatasync() is no slower than fsync()"]["passed"] is True, checks
    syncs = section_rows(result, "fsync()/fdatasync() calls per insert")
    assert set(syncs) == {"DELETE", "TRUNCATE", "PERSIST", "WAL"}
    assert 0.9 <= syncs["WAL"]["ours"] <= 1.5          # one sync per commit, plus the set-up shared out
    assert syncs["WAL"]["paper"] == 1 and syncs["PERSIST"]["paper"] == 3
    for mode in ("DELETE", "TRUNCATE", "PERSIST"):
        assert syncs[mode]["ours"] >= 2                # journal + database at least
    volume = section_rows(result, "Write volume per insert")
    assert volume["WAL"]["paper"] == 36 * 1024
    assert volume["WAL"]["ours"] < volume["DELETE"]["ours"]
