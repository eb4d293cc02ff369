"""The phone model of the emulated stack: the data device's own dirty limit, the CPU share of the FUSE daemons and
the workload, and the FUSE wake-up latency, each set by the stack on what it created and undone at teardown."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import needs_fuse, needs_root
from mobiperf.stack.cpu_share import CpuShare, parse_cpu_share, remove_stale_cgroups
from mobiperf.stack.dirty_limit import parse_dirty_limit
from mobiperf.core.errors import UsageError
from mobiperf.stack.emulated import EmulatedStack
from mobiperf.stack.options import StackOptions
from mobiperf.stack.spec import parse_stack_spec
from mobiperf.target.target import Target
from mobiperf.target.transport import LocalTransport

MiB = 1 << 20
CPU_V1 = Path("/sys/fs/cgroup/cpu")


def test_parse_phone_model_values():
    assert parse_cpu_share("25%") == "25%" and parse_cpu_share("100%") == "host" and parse_cpu_share("host") == "host"
    for bad in ("0.5%", "150%", "25", "fast"):
        with pytest.raises(UsageError, match="between 1% and 100%"):
            parse_cpu_share(bad)
    assert parse_dirty_limit("64M") == 64 * MiB and parse_dirty_limit("host") is None
    with pytest.raises(UsageError, match="at least 1M"):
        parse_dirty_limit("4k")


def test_wrap_workload_joins_the_share_before_exec():
    from mobiperf.stack.facts import StackFacts

    facts = StackFacts(spec="ext4", workdir="/w", device="/dev/loop9", dev_major=7, dev_minor=9,
                       filesystem="ext4", mount_options="", scheduler="none", image_size_bytes=0,
                       cpu_procs_files=["/cg/cpu/x/cgroup.procs", "/cg/cpuacct/x/cgroup.procs"])
    argv = facts.wrap_workload(["mobibench", "-p", "."])
    assert argv[:2] == ["sh", "-c"] and argv[-3:] == ["mobibench", "-p", "."]
    assert 'echo $$ > "/cg/cpu/x/cgroup.procs"; echo $$ > "/cg/cpuacct/x/cgroup.procs" && exec "$@"' == argv[2]
    facts.cpu_procs_files = []
    assert facts.wrap_workload(["true"]) == ["true"]


@needs_root
def test_cpu_share_limits_and_counts_its_members():
    share = CpuShare("20%", "test-share")
    busy = None
    try:
        with share:
            assert share.path is not None and share.path.is_dir()
            if share.kind == "v1":
                assert int((share.path / "cpu.cfs_quota_us").read_text()) * 5 == \
                    int((share.path / "cpu.cfs_period_us").read_text())
            busy = subprocess.Popen(["sh", "-c", "while :; do :; done"])
            share.add(busy.pid)
            assert busy.pid in share.members()
            t0 = time.monotonic()
            time.sleep(1.0)
            wall = time.monotonic() - t0
            used = share.usage_ns()
            busy.kill()
            busy.wait(timeout=10)
            if used is not None:  # a busy loop at 20 % of a core uses about 0.2 s per second
                assert 0.05 * wall < used / 1e9 < 0.35 * wall, used
            assert share.throttled().get("nr_throttled", 0) > 0
        assert not share.path.exists(), "the cgroup outlived its share"
    finally:
        if busy is not None and busy.poll() is None:
            busy.kill()
            busy.wait(timeout=10)
        share.__exit__()


@needs_root
def test_stale_cgroups_of_dead_processes_are_removed():
    if not (CPU_V1 / "cpu.cfs_quota_us").exists():
        pytest.skip("cgroup v1 cpu hierarchy absent")
    dead = _dead_pid()
    stale = CPU_V1 / f"mobiperf-cpu-{dead}-leftover"
    stale.mkdir()
    try:
        assert stale in remove_stale_cgroups()
        assert not stale.exists()
    finally:
        if stale.exists():
            stale.rmdir()


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.fixture
def phone_stack(tmp_path, reference_binary):
    """A stack with the whole phone model (no device profile: the host's disk), torn down in a finalizer."""
    reference_binary("bfuse")
    reference_binary("fuse_wakeup.so")
    stacks: list[EmulatedStack] = []

    def build(spec: str, **options) -> EmulatedStack:
        stack = EmulatedStack(Target(LocalTransport()), parse_stack_spec(spec),
                           StackOptions(image_size=128 * MiB, workroot=str(tmp_path / "root"), counters_dir=tmp_path,
                                        **options))
        stacks.append(stack)
        return stack

    yield build
    for stack in stacks:
        stack._teardown()  # idempotent: what __exit__ already undid is gone from the undo list


@needs_root
@needs_fuse
def test_stack_sets_the_dirty_limit_and_cpu_share_and_undoes_them(phone_stack, tmp_path):
    stack = phone_stack("ext4+fuse", dirty_limit=64 * MiB, cpu_share="20%")
    with stack as facts:
        bdi = Path(f"/sys/class/bdi/{facts.dev_major}:{facts.dev_minor}")
        saved = dict(stack._dirty.saved)
        assert set(saved) == {"strict_limit", "max_ratio_fine", "min_ratio_fine"}
        # During the run: the data device's own limit, and only its own
        assert (bdi / "strict_limit").read_text().strip() == "1"
        # The kernel keeps the limit as a ratio of the global threshold, which moves with the machine's free
        # memory (other tenants): read back, it is 64 MiB give or take that drift.
        assert abs(int((bdi / "max_bytes").read_text()) - 64 * MiB) <= 0.15 * 64 * MiB
        assert abs(int((bdi / "min_bytes").read_text()) - 0.9 * 64 * MiB) <= 0.15 * 64 * MiB
        # The FUSE daemon is in the share; the workload joins it before it execs
        share = stack._cpu
        daemon_pid = facts.layers[-1]["daemon_pid"]
        assert daemon_pid in share.members()
        out = subprocess.run(facts.wrap_workload(["sh", "-c", "cat /proc/self/cgroup"]), capture_output=True,
                             text=True, timeout=30, cwd=facts.workdir)
        assert share.name in out.stdout, out.stdout
        assert facts.cpu_share == "20%" and facts.dirty_limit_bytes == 64 * MiB
        cgroup = share.path
    # After teardown: the BDI as it was, the cgroup gone, the CPU figures written
    assert (bdi / "strict_limit").read_text().strip() == saved["strict_limit"]
    assert (bdi / "max_ratio_fine").read_text().strip() == saved["max_ratio_fine"]
    assert (bdi / "min_ratio_fine").read_text().strip() == saved["min_ratio_fine"]
    assert not cgroup.exists()
    import json

    cpu = json.loads((tmp_path / "cpu-counters.json").read_text())
    assert cpu["share"] == "20%" and cpu["counters"]["nr_periods"] >= 1
    if "usage_s" in cpu["counters"]:
        assert cpu["counters"]["usage_s"] > 0


@needs_root
@needs_fuse
def test_fuse_wakeup_delays_every_request_of_the_daemon(phone_stack):
    """64 legacy 4 KiB FUSE writes with a 3 ms wake-up take at least 64 x 3 ms; without it, far less."""
    def timed(**options) -> float:
        with phone_stack("ext4+fuse", **options) as facts:
            t0 = time.monotonic()
            subprocess.run(["dd", "if=/dev/zero", "of=f", "bs=4k", "count=64"], cwd=facts.workdir, check=True,
                           capture_output=True, timeout=60)
            return time.monotonic() - t0

    slow = timed(fuse_wakeup_ns=3_000_000)
    fast = timed()
    assert slow >= 64 * 0.003, slow
    assert fast < slow / 2, (fast, slow)


def test_remote_targets_refuse_the_host_side_models():
    class Remote(LocalTransport):
        name = "adb"
        is_local = False

    stack = EmulatedStack(Target(Remote()), parse_stack_spec("ext4+fuse"), StackOptions(fuse_wakeup_ns=1000))
    with pytest.raises(UsageError, match="remote target"):
        stack._daemon_env()
    assert os.environ.get("FUSE_WAKEUP_NS") is None


def test_a_directory_stack_refuses_the_phone_models():
    from mobiperf.stack import make_stack

    for option in ({"dirty_limit": 64 * MiB}, {"cpu_share": "25%"}, {"fuse_wakeup_ns": 1000}):
        with pytest.raises(UsageError, match="measured as it is"):
            make_stack(Target(LocalTransport()), parse_stack_spec("dir:/tmp"), StackOptions(**option))


def test_dirty_limit_retries_a_min_refused_by_a_moving_threshold_and_restores_in_order():
    """The kernel refuses min_bytes (EINVAL) when the global threshold moved between the max and min writes."""
    from mobiperf.stack.dirty_limit import DirtyLimit
    from mobiperf.core.errors import TargetError

    class FakeSysfs:
        name = "local"

        def __init__(self):
            self.files = {"strict_limit": "0", "max_ratio_fine": "1000000", "min_ratio_fine": "0",
                          "max_bytes": "4800000000", "min_bytes": "0"}
            self.writes: list[tuple[str, str]] = []
            self.refusals = 1

        def exists(self, path):
            return path.rsplit("/", 1)[1] in self.files

        def read_file(self, path, **_):
            return self.files[path.rsplit("/", 1)[1]].encode()

        def write_file(self, path, data, **_):
            knob = path.rsplit("/", 1)[1]
            if knob == "min_bytes" and self.refusals:
                self.refusals -= 1
                raise TargetError(f"writing {data!r} to {path}: Invalid argument")
            self.writes.append((knob, data.decode()))
            self.files[knob] = data.decode()

    sysfs = FakeSysfs()
    with DirtyLimit(sysfs, "7:9", 64 * MiB):
        assert sysfs.files["strict_limit"] == "1" and sysfs.files["max_bytes"] == str(64 * MiB)
        assert sysfs.files["min_bytes"] == str(64 * MiB * 9 // 10)
        assert [k for k, _ in sysfs.writes] == ["max_bytes", "max_bytes", "min_bytes", "strict_limit"]
    assert sysfs.writes[-3:] == [("min_ratio_fine", "0"), ("max_ratio_fine", "1000000"), ("strict_limit", "0")]
