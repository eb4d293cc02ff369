"""A sweep hands each unit to its child as a typed run request (`mobiperf run --request FILE`), never as a
command line the child parses back; `--dry-run` prints the same run as a command line. Over random cells, the
request the child reads equals the one `mobiperf run`'s own options make of that command line."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from mobiperf.cli import cmd_run, run_request_from_options
from mobiperf.core.errors import UsageError
from mobiperf.orchestration import sweep
from mobiperf.orchestration.run_request import read_request, request_from_json, request_to_json

MOBIPERF = [sys.executable, "-m", "mobiperf"]
# values of the parameters that reach the child run (stack, phone models, workload)
CHOICES = {"fs": ["ext4", "xfs", "btrfs", "raw"], "layer": ["native", "fuse", "bfuse", "fjord"],
           "io_unit": ["4k", "512k"], "fs_data": ["journal", "writeback"], "fs_journal": ["internal", "external"],
           "scheduler": ["none", "bfq"], "device": ["none", "emmc-2012"], "cpu": ["host", "20%"],
           "dirty": ["host", "64M"], "fuse_wakeup": ["0", "430us"], "workload": ["file", "sqlite-insert"],
           "sync": ["buffered", "fsync", "direct"], "record": ["4k", "512k"], "phone": ["none", "galaxy-s3-2012"],
           "preset": ["legacy", "bfuse", "fjord-ram"], "flush_ms": ["10ms"], "target": ["local", "adb:XY12"]}


def _options_of(argv: list[str]):
    """The RunRequest `mobiperf run` makes of a unit's command line (its own option parsing)."""
    params = cmd_run.make_context("run", argv[4:]).params
    kept = {k: v for k, v in params.items() if k not in ("target", "output", "request_file")}
    return run_request_from_options(**kept)


def test_the_request_a_unit_hands_its_child_is_the_run_its_command_line_asks_for(tmp_path):
    rng = random.Random(19)
    compared = 0
    for _ in range(1200):
        cell = {name: rng.choice(values) for name, values in CHOICES.items() if rng.random() < 0.5}
        plan = sweep.plan_cell(cell, available_fs={"ext4", "xfs", "btrfs"})
        if plan.skip:
            continue
        run_path = tmp_path / f"u{compared}"
        child = sweep.unit_child(plan, run_path, 600, python="py")
        request = read_request(child[child.index("--request") + 1])
        assert request == _options_of(sweep.unit_argv(plan, run_path, 600, python="py")), cell
        assert request_from_json(json.loads(json.dumps(request_to_json(request)))) == request
        assert child[child.index("-o") + 1] == str(run_path) and "--" not in child
        assert ("-t" in child) == (plan.target != "local")
        compared += 1
    assert compared > 150


def test_a_request_file_with_a_stack_mobiperf_cannot_build_is_refused(tmp_path):
    good = request_to_json(sweep.unit_request(sweep.plan_cell({"layer": "bfuse"}, available_fs={"ext4"}), 60))
    bad = json.loads(json.dumps(good))
    bad["stack"]["filesystem"]["name"] = "ntfs"
    with pytest.raises(UsageError, match="'ntfs' is not a filesystem"):
        request_from_json(bad)
    bad = json.loads(json.dumps(good))
    bad["stack"]["layers"][0]["name"] = "sshfs"
    with pytest.raises(UsageError, match="unknown layer 'sshfs'"):
        request_from_json(bad)
    bad = dict(good, command=[])
    with pytest.raises(UsageError, match="command must be the workload's argv"):
        request_from_json(bad)


def test_run_request_cli_refuses_what_the_file_already_says(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(request_to_json(sweep.unit_request(sweep.plan_cell({}, available_fs={"ext4"}), 60))))
    done = subprocess.run([*MOBIPERF, "run", "--request", str(path), "--stack", "xfs", "--", "true"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert f"--request {path} holds the workload and its options: leave out --stack, the command after --" \
        in done.stderr
    path.write_text("{not json")
    done = subprocess.run([*MOBIPERF, "run", "--request", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "unreadable run request" in done.stderr and "Traceback" not in done.stderr
