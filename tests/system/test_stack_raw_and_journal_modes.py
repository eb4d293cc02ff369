"""Issue 9's smaller stacks: `raw` (the bare loop device, Fig. 2's raw-device bars) and ext4's data= journal modes
(seed 002), in the stack spec and as sweep parameters."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import needs_root
from mobiperf.orchestration import sweep
from mobiperf.core.errors import UsageError
from mobiperf.stack.emulated import EmulatedStack
from mobiperf.stack.options import StackOptions
from mobiperf.stack.spec import parse_stack_spec
from mobiperf.target.target import Target
from mobiperf.target.transport import LocalTransport

MiB = 1 << 20


def test_specs_and_their_errors():
    assert str(parse_stack_spec("raw")) == "raw"
    assert parse_stack_spec("ext4:data=journal").filesystem.options == {"data": "journal"}
    for bad, why in (("raw+fuse", "bare device"), ("raw:mkfs=-O", "bare device"),
                     ("xfs:data=journal", "ext4's journal mode"), ("ext4:data=full", "ordered, journal, writeback")):
        with pytest.raises(UsageError, match=why):
            parse_stack_spec(bad)


def test_sweep_plans_raw_cells_as_dd_on_the_device_and_journal_modes_as_ext4_options():
    plan = sweep.plan_cell(sweep.check_params({"fs": "raw", "file_size": "8m", "record": "512k"}),
                           available_fs={"ext4"})
    assert plan.stack == "raw" and plan.bytes_moved == 8 * MiB
    assert plan.command[2] == 'dd if=/dev/zero of="$MOBIPERF_DEVICE" bs=524288 count=16 conv=fsync status=none'
    direct = sweep.plan_cell(sweep.check_params({"fs": "raw", "sync": "direct"}), available_fs=set())
    assert "oflag=direct" in direct.command[2] and direct.skip is None
    assert "does not apply" in sweep.plan_cell({"fs": "raw", "layer": "bfuse"}, available_fs=set()).skip
    assert "sequential file write only" in sweep.plan_cell({"fs": "raw", "access": "rand-write"},
                                                           available_fs=set()).skip
    plan = sweep.plan_cell(sweep.check_params({"fs_data": "journal", "layer": "fuse"}), available_fs={"ext4"})
    assert plan.stack == "ext4:data=journal+fuse"
    assert "ext4 journal mode" in sweep.plan_cell({"fs": "xfs", "fs_data": "writeback"}, available_fs={"xfs"}).skip
    with pytest.raises(UsageError, match="valid values: ordered, journal, writeback"):
        sweep.parse_grid(["fs_data=full"])


@pytest.fixture
def build(tmp_path):
    stacks: list[EmulatedStack] = []

    def make(spec: str) -> EmulatedStack:
        stack = EmulatedStack(Target(LocalTransport()), parse_stack_spec(spec),
                           StackOptions(image_size=64 * MiB, workroot=str(tmp_path / "root")))
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        stack._teardown()


@needs_root
def test_raw_stack_is_the_bare_loop_device(build):
    with build("raw") as facts:
        assert facts.filesystem == "raw" and facts.device.startswith("/dev/loop")
        assert not any(line.split()[0] == facts.device for line in Path("/proc/self/mounts").read_text().splitlines())
        subprocess.run(["dd", "if=/dev/zero", f"of={facts.device}", "bs=1M", "count=4", "conv=fsync", "status=none"],
                       check=True, timeout=60)
        written = int(Path(f"/sys/block/{Path(facts.device).name}/stat").read_text().split()[6]) * 512
        assert written >= 4 * MiB
        device = facts.device
    assert device not in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout


@needs_root
def test_ext4_journal_mode_reaches_the_mount(build):
    for mode in ("journal", "writeback"):
        with build(f"ext4:data={mode}") as facts:
            assert f"data={mode}" in facts.mount_options and "data=ordered" not in facts.mount_options
            mounted = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
            opts = next(m[3] for m in mounted if m[1] == str(Path(facts.workdir)))
            if mode == "journal":
                assert "data=journal" in opts, opts
            else:
                assert "data=writeback" in opts, opts
    with build("ext4:mount=rw;noatime;data=journal") as facts:
        assert facts.mount_options == "rw,noatime,data=journal"
