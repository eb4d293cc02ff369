"""The layers study end to end at reduced size on the emmc-2012 profile: per-layer latency and throughput of
random writes + fsync, and the OS's additional writes."""

from __future__ import annotations

import pytest

from conftest import needs_fuse, needs_root
from test_study_bfuse import checks_by_claim, run_quick_study, section_rows

pytestmark = [needs_root, needs_fuse, pytest.mark.slow]


def test_layers_study_quick(tmp_path, clean_machine):
    result = run_quick_study("layers", tmp_path / "layers")
    checks = checks_by_claim(result)
    assert checks["the OS adds writes of its own: more than one block write per small application write"][
        "passed"] is True, checks
    assert checks["blktrace (App IO) is below blktrace (Pure) for small writes"]["passed"] is True, checks
    latency = section_rows(result, "Latency per layer")
    for size in ("4k", "64k", "512k"):
        app = latency[f"{size}: application (platform + kernel + device)"]["ours"]
        device = latency[f"{size}: device (D2C of its requests and flushes)"]["ours"]
        assert 0 < device <= app * 1.05        # the device's time is inside the application's
        assert app > 2e6                       # emmc-2012: a flush alone costs 5 ms
    extra = section_rows(result, "The OS's additional writes")
    assert extra["4k: device bytes / application bytes"]["ours"] > 1.5
