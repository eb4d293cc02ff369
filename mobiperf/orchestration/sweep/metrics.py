"""What one unit measured, read from its one-repetition run directory through the run store: run.json's
repetition (its workload time, the metrics its analysis wrote, the FUSE daemons' and the device model's
counters), the generator's own figures, the `strace -c` counts of a cell with syscalls=on (the parse stage's
strace_count table), and the block requests inside the generator's timed window. A run whose analysis failed still
has its workload, counter and syscall figures; a run without a repetition, or whose workload failed, is a failed
unit (UnitFailed) with the reason.
"""

from __future__ import annotations

from pathlib import Path

from mobiperf.collectors.parse.strace_count import parse_strace_counts
from mobiperf.core.errors import UsageError
from mobiperf.core.exit_status import describe_exit_status
from mobiperf.core.metrics import metric
from mobiperf.core.run_facts import Metric
from mobiperf.core.runstore import RunDir
from mobiperf.orchestration.sweep.plan import CellPlan


class UnitFailed(Exception):
    """A unit that ran but did not produce a measurement."""


class NoRepetition(UnitFailed):
    """A unit whose run stopped before its workload (its stack could not be set up, say): the run's error says why."""


def unit_outcome(run_path: Path, plan: CellPlan, log: Path, code: int | None
                 ) -> tuple[str, list[Metric], list[str], str | None]:
    """What a unit's child `mobiperf run` left, once it ended with status `code` (its output in `log`): (status,
    metrics, notes, error), status "done" or "failed". A run that stopped before its workload fails with the
    error the run said."""
    try:
        if not (run_path / "run.json").exists():
            raise UnitFailed(f"mobiperf run ended ({describe_exit_status(code)}) before creating the run: "
                             f"{tail(log)}")
        metrics, notes = unit_metrics(run_path, plan)
        if code != 0:
            notes.append(f"mobiperf run ended ({describe_exit_status(code)}): {tail(log, 300)}")
        return "done", metrics, notes, None
    except UnitFailed as e:
        why = f"mobiperf run exited with status {code}: {_error_of(log)}" if code and isinstance(e, NoRepetition) \
            else str(e)
        return "failed", [], [], why
    except (OSError, ValueError, KeyError, UsageError) as e:   # UsageError: a run.json the run store refuses
        return "failed", [], [], f"unreadable run {run_path}: {e}"


def manifest_figures(metrics: list[Metric]) -> tuple[dict[str, float], dict[str, str]]:
    """A unit's metrics as its manifest entry keeps them: {key: value} and {key: unit} (the first of a key wins:
    unit_metrics lists the unit's own figures before the run's)."""
    values: dict[str, float] = {}
    units: dict[str, str] = {}
    for m in metrics:
        if m.key not in values and m.value is not None:
            values[m.key], units[m.key] = float(m.value), m.unit
    return values, units


def unit_metrics(run_path: Path, plan: CellPlan) -> tuple[list[Metric], list[str]]:
    """The metrics of a one-repetition run directory, each with its unit, and notes. Reads the repetition's raw
    output too, so a run whose analysis failed still has its workload, counter and syscall figures."""
    run = RunDir(run_path)
    meta = run.read_meta()
    if not meta.repetitions:
        raise NoRepetition("the run recorded no repetition (interrupted or failed before the workload)")
    rep = meta.repetitions[0]
    raw = run.path / "raw" / f"rep{rep.index}"
    if rep.exit_code is None:  # kept incomplete: the run stopped (say, its stack failed) before the workload
        raise NoRepetition("the repetition has no exit status: the run stopped before its workload ended")
    if rep.exit_code != 0:
        raise UnitFailed(f"the workload failed ({describe_exit_status(rep.exit_code)}): "
                         f"{tail(raw / 'stderr.txt') or tail(raw / 'stdout.txt')}")
    notes: list[str] = []
    out = workload_time_metrics(rep.workload_ns or 0, plan)
    out += generator_metrics(raw / "stdout.txt", notes)
    out += counter_metrics(rep.get("counters", {}))
    out += syscall_count_metrics(run, rep.index, raw / "stderr.txt")
    out += rep.metrics or []
    try:
        out += timed_window_metrics(run)
    except Exception as e:  # noqa: BLE001 - a table another version wrote differently is a note, not a failure
        notes.append(f"no timed-window block figures: {type(e).__name__}: {e}")
    if meta.status != "complete":
        notes.append(f"run status {meta.status!r}: analysis did not finish; raw figures only")
    return out, notes


def workload_time_metrics(workload_ns: int, plan: CellPlan) -> list[Metric]:
    """run.workload_time (ns, as in `mobiperf compare`), and what the cell's workload moved per second of it:
    run.throughput (bytes) and run.tps (transactions)."""
    out = [metric("run.workload_time", workload_ns, "ns")]
    elapsed_s = workload_ns / 1e9
    if plan.bytes_moved and elapsed_s > 0:
        out.append(metric("run.throughput", plan.bytes_moved / elapsed_s, "B/s"))
    if plan.transactions and elapsed_s > 0:
        out.append(metric("run.tps", plan.transactions / elapsed_s, "tx/s"))
    return out


def generator_metrics(stdout: Path, notes: list[str]) -> list[Metric]:
    """The Mobibench-compatible generator's own figures from its output ([] for another workload); output that
    does not parse is a note."""
    from mobiperf.collectors.parse.mobibench import MobibenchOutputError, read_generator_output

    try:
        return [metric(name, float(v["value"]), str(v["unit"])) for name, v in read_generator_output(stdout).items()]
    except MobibenchOutputError as e:
        notes.append(f"workload output not parsed: {e}")
        return []


def syscall_count_metrics(run: RunDir, rep: int, stderr: Path) -> list[Metric]:
    """syscall.<name>: the calls `strace -c` counted (a cell with syscalls=on), from the parse stage's strace_count
    table; from the repetition's stderr where the run has no such table (not parsed, or parsed before the table
    existed: the same parser)."""
    try:
        if run.has_table("strace_count"):
            import polars as pl

            table = run.read_table("strace_count").filter(pl.col("rep") == rep)
            return [metric(f"syscall.{name}", calls, "count")
                    for name, calls in table.select("syscall", "calls").iter_rows()]
    except UsageError:
        pass
    if not stderr.exists():
        return []
    return [metric(f"syscall.{name}", calls, "count")
            for name, calls in parse_strace_counts(stderr.read_text(errors="replace")).items()]


def timed_window_metrics(run: RunDir, rep: int = 0) -> list[Metric]:
    """The block requests inside the workload's own timed window (analyzers/timed_window.py: between Mobibench's
    timed_start/timed_end trace markers, so a file's preparation does not count), from the window_block result
    table (computed here by the same analyzer for a run analysed before it existed): window.block.{requests,bytes}
    {op=...}, the mean and median device time (d2c, issue -> complete) and block-layer time (q2c, queue ->
    complete) in ns, window.block.d2c.sum (ns of device time), and window.elapsed (s). [] when the run has no
    markers or no block requests."""
    import polars as pl

    from mobiperf.analyzers.timed_window import block_in_timed_window, timed_windows

    if not run.has_table("trace_marker"):
        return []
    markers = run.read_table("trace_marker")
    window = timed_windows(markers).get(rep)
    if window is None:
        return []
    if run.has_table("window_block"):
        rows = run.read_table("window_block")
    elif run.has_table("block_rq"):
        rows = block_in_timed_window(run.read_table("block_rq"), markers)
    else:
        return []
    out: list[Metric] = []
    for row in rows.filter(pl.col("rep") == rep).iter_rows(named=True):
        op = row["op"]
        out += [metric("window.block.requests", row["requests"], "count", op=op),
                metric("window.block.bytes", row["bytes"], "B", op=op)]
        for name, column in (("d2c.mean", "d2c_mean_ns"), ("d2c.p50", "d2c_p50_ns"), ("d2c.sum", "d2c_sum_ns"),
                             ("q2c.mean", "q2c_mean_ns"), ("q2c.p50", "q2c_p50_ns")):
            if row[column] is not None:
                out.append(metric(f"window.block.{name}", row[column], "ns", op=op))
    out.append(metric("window.elapsed", (window[1] - window[0]) / 1e9, "s"))
    return out


def counter_metrics(counters: dict) -> list[Metric]:
    """The FUSE daemons' and the device model's counters as metrics (bfuse.daemon_pwrite_calls,
    fuse.ops.write.requests, device.write.count, journal_device.flush.count, ...): bytes in B, durations (_ns) in
    ns, the rest counts."""
    from mobiperf.stack.device_model import summarize_device_counters

    flat: dict[str, float] = {}
    for name, data in counters.items():
        if not isinstance(data, dict) or "error" in data:
            continue
        if name.startswith("device-counters"):
            prefix = "device" if name.endswith("userdata") else "journal_device"
            flat.update({prefix + k[len("device"):]: float(v) for k, v in summarize_device_counters(data).items()})
            continue
        layer = name.removesuffix("-counters")
        for key, value in (data.get("counters") or {}).items():
            if isinstance(value, (int, float)):
                flat[f"{layer}.{key}"] = float(value)
        for op, c in (data.get("ops") or {}).items():
            if isinstance(c, dict):
                for key, value in c.items():
                    if isinstance(value, (int, float)):
                        flat[f"{layer}.ops.{op}.{key}"] = float(value)
    return [metric(key, value, counter_unit(key)) for key, value in flat.items()]


def counter_unit(key: str) -> str:
    """The unit of a counter by its name: bytes in B, durations (_ns) in ns, the rest counts."""
    if key.endswith(("bytes", "_bytes")):
        return "B"
    if key.endswith(("_ns", ".ns")):
        return "ns"
    return "count"


def tail(path: Path, n: int = 400) -> str:
    """The last `n` characters of a file, whitespace folded ('' when unreadable)."""
    try:
        return " ".join(path.read_text(errors="replace").split())[-n:]
    except OSError:
        return ""


def _error_of(log: Path) -> str:
    """What a child `mobiperf run` said its error was (its last `mobiperf: error:` line), else its log's tail."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    said = [line for line in lines if line.startswith("mobiperf: error: ")]
    return said[-1][len("mobiperf: error: "):][:400] if said else tail(log, 300)
