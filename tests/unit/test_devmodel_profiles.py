"""Device profiles: the Python table, its spec syntax, and agreement with the daemon's own table.

Needs no root: the daemon rejects bad options before it mounts anything.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from mobiperf.stack.device_model import (
    PROFILES,
    ThrottledStore,
    latency_histogram,
    profile_as_daemon_json,
    resolve_profile,
    summarize_device_counters,
)
from mobiperf.core.errors import UsageError


def test_named_profiles_have_the_papers_numbers():
    emmc = PROFILES["emmc-2012"]
    assert emmc.write_bw_bytes_per_s == 40_000_000  # paper 000: raw eMMC 39-40 MB/s
    assert emmc.read_bw_bytes_per_s == 80_000_000
    assert 1_000_000 <= emmc.rand_write_lat_ns <= 5_000_000  # "a few ms"
    assert 5_000_000 <= emmc.flush_lat_ns <= 10_000_000
    assert any("000" in s and "40 MB/s" in s for s in emmc.sources)
    ufs = PROFILES["ufs-2020"]
    assert (ufs.write_bw_bytes_per_s, ufs.read_bw_bytes_per_s) == (500_000_000, 1_000_000_000)
    assert ufs.flush_lat_ns == 1_000_000
    host = PROFILES["host"]
    assert (host.write_bw_bytes_per_s, host.rand_write_lat_ns, host.flush_lat_ns) == (0, 0, 0)
    assert host.sync_backing and not emmc.sync_backing  # host pays the host's flush; models charge their own
    assert list(PROFILES) == ["emmc-2012", "ufs-2020", "host"]


def test_daemon_profile_table_matches_python(reference_binary):
    out = subprocess.run(
        [str(reference_binary("devmodel")), "--list-profiles"], capture_output=True, text=True, timeout=10, check=True
    )
    daemon = {p["name"]: p for p in json.loads(out.stdout)}
    assert set(daemon) == set(PROFILES)
    for name, profile in PROFILES.items():
        d = dict(daemon[name])
        assert d.pop("description") == profile.description
        assert d == profile_as_daemon_json(profile)


def test_overrides_on_a_named_profile():
    p = resolve_profile("emmc-2012:flush_lat=1ms,write_bw=20M")
    assert p.flush_lat_ns == 1_000_000
    assert p.write_bw_bytes_per_s == 20 << 20
    assert p.rand_write_lat_ns == PROFILES["emmc-2012"].rand_write_lat_ns
    opts = p.daemon_options()
    assert opts.startswith("profile=emmc-2012,")
    assert "flush_lat=1000000ns" in opts and f"write_bw={20 << 20}" in opts


def test_bare_settings_start_from_host():
    p = resolve_profile("write_bw=50M")
    assert p.write_bw_bytes_per_s == 50 << 20
    assert p.flush_lat_ns == 0 and p.rand_write_lat_ns == 0
    assert p.daemon_options().startswith("profile=host,")


@pytest.mark.parametrize(
    "spec, message",
    [
        ("emmc-2013", "unknown device profile 'emmc-2013'; valid profiles: emmc-2012, ufs-2020, host"),
        ("emmc-2012:speed=1", "valid keys: write_bw, read_bw, burst, rand_write_lat"),
        ("write_bw=fast", "bad value for write_bw"),
        ("host:flush_lat=soon", "bad value for flush_lat"),
        ("host:seq_window=0", "expected 1..16"),
        ("host:sync_backing=2", "expected 0 or 1"),
    ],
)
def test_bad_profiles_say_what_is_valid(spec, message, tmp_path):
    with pytest.raises(UsageError) as exc:
        resolve_profile(spec)
    assert message in str(exc.value)
    # the store refuses before it starts anything
    with pytest.raises(UsageError):
        ThrottledStore(tmp_path / "b.img", 1 << 20, spec, tmp_path, tmp_path / "no-daemon")
    assert not (tmp_path / "devmodel-mnt").exists()


@pytest.mark.parametrize(
    "option, message",
    [
        ("profile=emmc-2013", "unknown profile 'emmc-2013'; valid: emmc-2012 ufs-2020 host"),
        ("write_bw=fast", "bad value for write_bw: 'fast' (expected a size like 4096, 512k, 40M)"),
        ("flush_lat=5", "bad value for flush_lat: '5' (expected a duration like 500us, 2ms, 0)"),
        ("seq_window=99", "bad value for seq_window: 99 (expected 1..16)"),
        ("size=huge", "bad value for size: 'huge'"),
        ("sync_backing=2", "bad value for sync_backing: 2 (expected 0 or 1)"),
        ("nice=-99", "bad value for nice: '-99' (expected -20..19)"),
    ],
)
def test_daemon_rejects_bad_options_before_mounting(option, message, reference_binary, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    out = subprocess.run(
        [str(reference_binary("devmodel")), "-f", "-o", option, str(tmp_path / "b.img"), str(mnt)],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert out.returncode == 2
    assert message in out.stderr
    assert not (tmp_path / "b.img").exists()


def test_summaries_of_a_counters_dump():
    counters = {
        "elapsed_ns": 2_000_000_000,
        "max_inflight": 3,
        "ops": {
            "write": {"count": 4, "bytes": 4096 * 4, "seq": 3, "rand": 1, "errors": 0, "service_ns": 10**9,
                      "throttled_ns": 5 * 10**8, "latency_us_log2": [0, 1, 0, 2], "size_log2": []},
            "flush": {"count": 2, "bytes": 0, "seq": 0, "rand": 0, "errors": 0, "service_ns": 10**7,
                      "throttled_ns": 10**7, "latency_us_log2": [], "size_log2": []},
        },
    }
    m = summarize_device_counters(counters)
    assert m["device.write.count"] == 4
    assert m["device.write.seq_fraction"] == 0.75
    assert m["device.write.throttled_s"] == 0.5
    assert m["device.flush.count"] == 2
    assert m["device.elapsed_s"] == 2.0
    assert latency_histogram(counters, "write") == [(2, 4, 1), (8, 16, 2)]
    assert summarize_device_counters({}) == {}
