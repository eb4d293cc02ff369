"""Sweep planning without running anything: the parameter vocabulary, cells, skipped combinations, the seeded
order, the manifest's resume rules, metric extraction from a run directory, and the matrix text/page."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from mobiperf.orchestration import sweep
from mobiperf.core.errors import UsageError


def test_unknown_parameter_lists_the_valid_ones():
    with pytest.raises(UsageError) as e:
        sweep.parse_grid(["filesystem=ext4"])
    message = str(e.value)
    assert "unknown sweep parameter 'filesystem'" in message
    for name in ("fs", "scheduler", "layer", "io_unit", "journal", "sync", "record"):
        assert name in message


def test_unknown_value_lists_the_valid_ones():
    with pytest.raises(UsageError) as e:
        sweep.parse_grid(["scheduler=cfq"])
    assert "none, mq-deadline, bfq, kyber" in str(e.value)
    with pytest.raises(UsageError) as e:
        sweep.parse_grid(["journal=wal2"])
    assert "delete, truncate, persist, wal, memory, off" in str(e.value)
    with pytest.raises(UsageError, match="not a size"):
        sweep.parse_grid(["record=big"])
    with pytest.raises(UsageError, match="valid profiles: emmc-2012"):
        sweep.parse_grid(["device=emmc-1999"])
    with pytest.raises(UsageError, match="NAME=VALUE"):
        sweep.parse_grid(["fs"])


def test_grid_is_every_combination_in_order():
    grid = sweep.parse_grid(["fs=ext4,XFS", "record=4k,512k"])
    cells = sweep.grid_cells(grid)
    assert cells == [{"fs": "ext4", "record": "4k"}, {"fs": "ext4", "record": "512k"},
                     {"fs": "xfs", "record": "4k"}, {"fs": "xfs", "record": "512k"}]


def test_plan_of_a_bfuse_cell_is_a_stack_and_a_timed_command():
    plan = sweep.plan_cell({"layer": "bfuse", "io_unit": "4k", "buffer": "0", "flush_ms": "10ms",
                            "device": "emmc-2012", "file_size": "32m", "scheduler": "mq-deadline"},
                           available_fs={"ext4"})
    assert plan.skip is None
    assert plan.stack == "ext4+bfuse:io_unit=4k,buffer=0,flush_ms=10ms"
    assert plan.device == "emmc-2012" and plan.scheduler == "mq-deadline"
    assert plan.command[:2] == ["sh", "-c"]
    assert "mobibench -p . -q --no-drop-caches --json=- -f 32768 -r 512 -a 4 -y 0 -t 1" in plan.command[2]
    assert plan.command[2].endswith("&& sync ./test.dat0")
    assert plan.bytes_moved == 32 << 20


def test_plan_of_sqlite_and_fjord_cells():
    plan = sweep.plan_cell({"workload": "sqlite-insert", "journal": "wal", "transactions": "50",
                            "layer": "fjord", "preset": "fjord-ram", "whitelist": "cache", "syscalls": "on"},
                           available_fs={"ext4"})
    assert plan.stack == "ext4+fjord:preset=fjord-ram,whitelist=cache"
    assert plan.command[2].startswith("strace -f -qq -c -U calls,name -- mobibench -p cache")
    assert "-d 0 -n 50 -j 3 -s 2" in plan.command[2]
    assert "sync" not in plan.command[2].split("mobibench")[1]
    assert plan.transactions == 50


def test_combinations_that_cannot_run_are_skipped_with_a_reason():
    assert "this kernel has no f2fs" in sweep.plan_cell({"fs": "f2fs"}, available_fs={"ext4"}).skip
    assert "io_unit applies to a FUSE layer" in sweep.plan_cell({"io_unit": "4k"}, available_fs={"ext4"}).skip
    assert "ext4 feature" in sweep.plan_cell({"fs": "xfs", "fs_journal": "external"},
                                             available_fs={"xfs"}).skip
    assert "not a fjord preset" in sweep.plan_cell({"layer": "fjord", "preset": "legacy"},
                                                   available_fs={"ext4"}).skip
    assert "at most the file size" in sweep.plan_cell({"record": "8m", "file_size": "4m"},
                                                      available_fs={"ext4"}).skip
    plan = sweep.plan_cell({"fs_journal": "external"}, available_fs={"ext4"})
    assert plan.skip is None and plan.stack == "ext4:journal_dev=64M"


def test_manifest_order_is_seeded_and_resume_refuses_a_different_sweep(tmp_path):
    cells = [{"record": r} for r in ("4k", "16k", "64k", "512k")]
    one = sweep.SweepDir(tmp_path / "a").create_or_resume(sweep.SweepDefinition(cells, repeat=3, seed=7))
    two = sweep.SweepDir(tmp_path / "b").create_or_resume(sweep.SweepDefinition(cells, repeat=3, seed=7))
    other = sweep.SweepDir(tmp_path / "c").create_or_resume(sweep.SweepDefinition(cells, repeat=3, seed=8))
    order = [(u["cell"], u["rep"]) for u in one["units"]]
    assert len(order) == 12 and len(set(order)) == 12
    assert order == [(u["cell"], u["rep"]) for u in two["units"]]
    assert order != [(u["cell"], u["rep"]) for u in other["units"]]
    assert order != sorted(order)
    again = sweep.SweepDir(tmp_path / "a").create_or_resume(sweep.SweepDefinition(cells, repeat=3, seed=7))
    assert again["units"] == one["units"]
    with pytest.raises(UsageError, match="holds a different sweep"):
        sweep.SweepDir(tmp_path / "a").create_or_resume(sweep.SweepDefinition(cells[:2], repeat=3, seed=7))
    with pytest.raises(UsageError, match="no sweep to resume"):
        sweep.SweepDir(tmp_path / "none").create_or_resume(None)


STRACE_C = """\
mobibench: something on stderr
  calls    errors syscall
--------- --------- ----------------
      412           pwrite64
      200           fdatasync
       12         3 openat
--------- --------- ----------------
      624         3 total
"""


def test_strace_counts_are_parsed():
    assert sweep.parse_strace_counts(STRACE_C) == {"pwrite64": 412, "fdatasync": 200, "openat": 12}
    assert sweep.parse_strace_counts("no table here") == {}


def _fake_run(path: Path, *, exit_code=0, stdout="", stderr="", counters=None, elapsed_ns=2_000_000_000):
    raw = path / "raw" / "rep0"
    raw.mkdir(parents=True)
    (raw / "stdout.txt").write_text(stdout)
    (raw / "stderr.txt").write_text(stderr)
    meta = {"format": "mobiperf-run", "version": 1, "status": "complete", "repetitions": [
        {"index": 0, "exit_code": exit_code, "workload_ns": elapsed_ns, "counters": counters or {},
         "metrics": [{"name": "block.requests", "labels": {"op": "write"}, "value": 42.0, "unit": "count"}]}]}
    (path / "run.json").write_text(json.dumps(meta))


def test_unit_metrics_reads_workload_counters_and_syscalls(tmp_path):
    counters = {"bfuse-counters": {"counters": {"daemon_pwrite_calls": 32}, "ops": {"write": {"requests": 128}}}}
    _fake_run(tmp_path / "r", stderr=STRACE_C, counters=counters)
    plan = sweep.CellPlan(bytes_moved=64 << 20)
    figures, notes = sweep.unit_metrics(tmp_path / "r", plan)
    metrics, units = sweep.manifest_figures(figures)
    assert (units["run.workload_time"], units["run.throughput"], units["syscall.fdatasync"],
            units["block.requests{op=write}"], units["bfuse.daemon_pwrite_calls"]) == ("ns", "B/s", "count", "count",
                                                                                     "count")
    assert metrics["run.workload_time"] == 2e9
    assert metrics["run.throughput"] == (64 << 20) / 2.0
    assert metrics["bfuse.daemon_pwrite_calls"] == 32
    assert metrics["bfuse.ops.write.requests"] == 128
    assert metrics["syscall.fdatasync"] == 200
    assert metrics["block.requests{op=write}"] == 42
    assert notes == []


def test_a_failed_workload_is_a_failed_unit_with_its_error(tmp_path):
    _fake_run(tmp_path / "r", exit_code=1, stderr="mobibench: write: No space left on device")
    with pytest.raises(sweep.UnitFailed, match=r"\(exit status 1\): mobibench: write: No space left on device"):
        sweep.unit_metrics(tmp_path / "r", sweep.CellPlan())
    _fake_run(tmp_path / "k", exit_code=-6, stderr="free(): invalid pointer")
    with pytest.raises(sweep.UnitFailed, match=r"the workload failed \(killed by SIGABRT\): free\(\): invalid"):
        sweep.unit_metrics(tmp_path / "k", sweep.CellPlan())


def test_summaries_and_matrix_text_show_median_ci_and_failures(tmp_path):
    data = sweep.SweepDir(tmp_path).create_or_resume(sweep.SweepDefinition(
        [{"record": "4k"}, {"record": "512k"}, {"record": "1m", "file_size": "512k"}], repeat=3, seed=1))
    for u in data["units"]:
        if u["cell"] == "c000":
            u.update(status="done", metrics={"run.throughput": [10e6, 11e6, 12e6][u["rep"]]})
        else:
            u.update(status="failed", error="mobibench: boom")
    summaries = {s.cell: s for s in sweep.summarize(data)}
    st = summaries["c000"].stat("run.throughput")
    assert st["n"] == 3 and st["median"] == 11e6
    assert 10e6 <= st["ci_low"] <= st["median"] <= st["ci_high"] <= 12e6
    assert summaries["c001"].status == "failed" and summaries["c001"].reason == "mobibench: boom"
    assert summaries["c002"].status == "skipped"
    assert math.isnan(summaries["c001"].stat("run.throughput")["median"])
    text = sweep.format_matrix_text(data)
    assert "10.5 MiB/s" in text and "failed: mobibench: boom" in text and "skipped" in text

    page = sweep.write_matrix_page(data, tmp_path / "m.html").read_text()
    assert "Plotly.newPlot" in page and "<script src=" not in page
    assert "95% CI (bootstrap)" in page and "mobibench: boom" in page


def test_cli_bad_input_lists_the_valid_choices(tmp_path):
    import shlex
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "mobiperf", "sweep", "-o", str(tmp_path / "s"), *args],
                              cwd=repo, capture_output=True, text=True, timeout=60)

    bad = cli("-p", "filesystem=ext4")
    assert bad.returncode == 2 and "valid parameters: fs, fs_data, fs_journal, scheduler" in bad.stderr
    bad = cli("-p", "layer=fuse3")
    assert bad.returncode == 2 and "valid values: native, fuse, bfuse, fjord" in bad.stderr
    resume = cli()
    assert resume.returncode == 2 and "no sweep to resume" in resume.stderr
    dry = cli("-p", "fs=ext4,f2fs", "-p", "layer=bfuse", "-p", "io_unit=4k,512k", "--dry-run")
    assert dry.returncode == 0
    assert "--stack ext4+bfuse:io_unit=4k" in dry.stdout and "--stack ext4+bfuse:io_unit=512k" in dry.stdout
    if "f2fs" not in sweep.kernel_filesystems():
        assert dry.stdout.count("skipped: this kernel has no f2fs") == 2
    # Every command line pastes into a shell: split as a shell would, it is the argv the sweep runs (with -n).
    commands = [line for line in dry.stdout.splitlines() if not line.startswith("#")]
    assert commands
    for i, line in enumerate(commands):
        argv = shlex.split(line)
        plan = sweep.plan_cell({"fs": "ext4", "layer": "bfuse", "io_unit": ["4k", "512k"][i]})
        expected = sweep.unit_argv(plan, tmp_path / "s" / "runs" / f"c00{i}", 1800, python="x")[3:]
        assert argv == ["mobiperf", "run", "-n", "3", *expected[1:]]
        assert argv[argv.index("--") + 1:] == plan.command  # the sh -c script stays one argument
        assert subprocess.run(["sh", "-n", "-c", line], timeout=10).returncode == 0
    assert not (tmp_path / "s").exists()


def test_phone_model_reaches_the_child_run_as_options_not_as_a_script(tmp_path):
    plan = sweep.plan_cell(sweep.check_params({"layer": "fuse", "cpu": "20%", "dirty": "64M",
                                               "fuse_wakeup": "430us"}), available_fs={"ext4"})
    assert (plan.cpu, plan.dirty, plan.fuse_wakeup) == ("20%", "64m", "430us")
    assert plan.command[2].startswith("mobibench") and "cgroup" not in plan.command[2]  # the stack does it now
    argv = sweep.unit_argv(plan, tmp_path / "run", 60, python="py")
    opts = argv[:argv.index("--")]
    assert opts[opts.index("--cpu") + 1] == "20%" and opts[opts.index("--dirty-limit") + 1] == "64m"
    assert opts[opts.index("--fuse-wakeup") + 1] == "430us"
    host = sweep.unit_argv(sweep.plan_cell({}, available_fs={"ext4"}), tmp_path / "r", 60, python="py")
    assert not {"--cpu", "--dirty-limit", "--fuse-wakeup", "--device"} & set(host)
    with pytest.raises(UsageError, match="between 1% and 100%"):
        sweep.parse_grid(["cpu=0.5%"])


def test_a_phone_profile_expands_into_its_models_and_explicit_values_win():
    from mobiperf.stack.phone import PHONES

    phone = PHONES["galaxy-s3-2012"]
    plan = sweep.plan_cell({"phone": "galaxy-s3-2012", "layer": "fuse"}, available_fs={"ext4"})
    assert (plan.device, plan.dirty, plan.cpu, plan.fuse_wakeup) == (phone.device, phone.dirty, phone.cpu,
                                                                     phone.fuse_wakeup)
    plan = sweep.plan_cell({"phone": "galaxy-s3-2012", "cpu": "host", "dirty": "host"}, available_fs={"ext4"})
    assert (plan.device, plan.dirty, plan.cpu) == ("emmc-2012", "host", "host")
    with pytest.raises(UsageError, match="galaxy-s3-2012"):
        sweep.parse_grid(["phone=pixel"])


def test_one_sweep_process_per_directory(tmp_path):
    import fcntl

    sweep.SweepDir(tmp_path).create_or_resume(sweep.SweepDefinition([{"record": "4k"}], repeat=1))
    with open(tmp_path / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(UsageError, match="another mobiperf sweep is running"):
            sweep.run_sweep(tmp_path)


def test_a_study_that_gained_cells_keeps_what_was_measured_and_adds_the_new_units(tmp_path):
    first = sweep.SweepDefinition([{"record": "4k"}, {"record": "8k"}], repeat=2, seed=3)
    sdir = sweep.SweepDir(tmp_path)
    data = sdir.create_or_resume(first)
    data["units"][0].update(status="done", metrics={"run.throughput": 1.0})
    sdir.write(data)
    grown = sweep.SweepDefinition([{"record": "16k"}, {"record": "4k"}, {"record": "8k"}], repeat=2, seed=3)
    with pytest.raises(UsageError, match="holds a different sweep"):
        sdir.create_or_resume(grown)            # a plain sweep does not grow silently
    data = sdir.create_or_resume(grown, grow=True)
    assert [c["params"]["record"] for c in data["cells"]] == ["4k", "8k", "16k"]
    assert data["units"][0]["status"] == "done" and len(data["units"]) == 6
    assert sorted((u["cell"], u["rep"]) for u in data["units"][4:]) == [("c002", 0), ("c002", 1)]
    assert sdir.create_or_resume(grown, grow=True)["units"] == data["units"]   # growing is idempotent
    with pytest.raises(UsageError, match="holds a different sweep"):
        sdir.create_or_resume(sweep.SweepDefinition([{"record": "16k"}], repeat=2, seed=3), grow=True)


def test_sweeps_written_with_the_old_metric_names_read_in_todays_vocabulary(tmp_path):
    data = sweep.SweepDir(tmp_path / "s").create_or_resume(sweep.SweepDefinition([{"record": "4k"}], repeat=2))
    for u in data["units"]:  # as a sweep before the rename stored them: e2e.* and run.elapsed in seconds
        u.update(status="done", metrics={"e2e.throughput": 5e6 + u["rep"], "run.elapsed": 0.5})
    (only,) = sweep.summarize(data)
    assert only.values == {"run.throughput": [5e6, 5e6 + 1], "run.workload_time": [5e8, 5e8]}
    assert only.stat("e2e.throughput")["median"] == only.stat("run.throughput")["median"] == 5e6 + 0.5
    assert sweep.canonical_metric("e2e.tps") == "run.tps" and sweep.metric_unit("run.workload_time") == "ns"


def test_every_cell_is_compared_with_the_baseline_cell_with_compares_statistics(tmp_path):
    """5 repetitions a cell: 512k at 3x the throughput of 4k in every repetition is a significant improvement
    (the exact Mann-Whitney floor, 2/252), 1m within 1 % of 4k is not; a failed cell has nothing to compare."""
    from mobiperf.core.errors import UsageError

    data = sweep.SweepDir(tmp_path).create_or_resume(sweep.SweepDefinition(
        [{"record": "4k"}, {"record": "512k"}, {"record": "1m"}, {"record": "64k"}], repeat=5, seed=1))
    values = {"c000": [10.0, 10.2, 9.9, 10.1, 10.05], "c001": [30.0, 31.0, 29.0, 30.5, 29.5],
              "c002": [10.0, 10.3, 9.8, 10.1, 10.0]}
    for u in data["units"]:
        if u["cell"] in values:
            u.update(status="done", metrics={"run.throughput": values[u["cell"]][u["rep"]] * 1e6})
        else:
            u.update(status="failed", error="boom")
    text = sweep.format_matrix_text(data)
    rows = {line.split()[0]: line for line in text.splitlines()[2:6]}
    assert rows["4k"].endswith("baseline") and rows["512k"].endswith("+198.5% p=0.0079 IMPROVEMENT")
    assert rows["1m"].endswith("-0.5% p=0.9 not significant") and rows["64k"].endswith("-")
    flat = " ".join(text.split())
    assert "2 cells compared with the baseline" in flat and "not corrected for multiple comparisons" in flat
    base, versus = sweep.cell_comparisons(data, "run.throughput", "record=512k")
    assert base == "c001" and versus["c000"].verdict == "regression" and "c001" not in versus
    with pytest.raises(UsageError, match="matches 0 cells"):
        sweep.cell_comparisons(data, "run.throughput", "record=9k")
    page = sweep.write_matrix_page(data, tmp_path / "m.html").read_text()
    assert "vs baseline" in page and "+198.5% p=0.0079 IMPROVEMENT" in page
