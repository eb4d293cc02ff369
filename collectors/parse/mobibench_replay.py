"""What the generator's replay (`mobibench -g SCRIPT`, a mobiperf replay script: reference-impl/mobibench/
mb_rs_run.c) printed after its timed part, as mobiperf metrics:

    workload.elapsed          s      first call's scheduled start to the last call's end (`Replay elapsed`)
    workload.io_time          s      the time spent inside the replayed calls, all threads (`Total IO time`)
    workload.calls            count  calls replayed (`Total IO count`)
    workload.write_bytes, workload.read_bytes  B   what the writes and reads moved (`Total Write:`)
    workload.failed_calls     count  calls that returned an error (`Replay failed calls`)
    workload.wait_time        s      time waiting for other threads (dependencies) (`Replay waits`)
    workload.lateness.mean, .max  s  open loop: how late calls started against the recorded schedule
    workload.cpu.user, .sys   s      the generator's CPU time over the timed part (`Replay CPU`)

Output without `replay_script end` (a replay that stopped before its end) gives no metrics.
"""

from __future__ import annotations

import re

Metrics = dict[str, dict[str, float | str]]

_LINES = (
    (re.compile(r"^Total IO time : [\d.]+ sec \((\d+) usec\)$", re.M), (("workload.io_time", 1e-6, "s"),)),
    (re.compile(r"^Total IO count : (\d+)", re.M), (("workload.calls", 1, "count"),)),
    (re.compile(r"^Total Write: (\d+) bytes, Read: (\d+) bytes$", re.M),
     (("workload.write_bytes", 1, "B"), ("workload.read_bytes", 1, "B"))),
    (re.compile(r"^Replay elapsed : ([\d.]+) sec$", re.M), (("workload.elapsed", 1, "s"),)),
    (re.compile(r"^Replay failed calls : (\d+)$", re.M), (("workload.failed_calls", 1, "count"),)),
    (re.compile(r"^Replay waits : \d+ \(([\d.]+) sec\)$", re.M), (("workload.wait_time", 1, "s"),)),
    (re.compile(r"^Replay lateness : mean ([\d.]+) usec, max ([\d.]+) usec$", re.M),
     (("workload.lateness.mean", 1e-6, "s"), ("workload.lateness.max", 1e-6, "s"))),
    (re.compile(r"^Replay CPU : user ([\d.]+) sec, sys ([\d.]+) sec$", re.M),
     (("workload.cpu.user", 1, "s"), ("workload.cpu.sys", 1, "s"))),
)


def is_replay_output(stdout: str) -> bool:
    return "replay_script end" in stdout and "Replay elapsed :" in stdout


def parse_replay_result(stdout: str) -> Metrics:
    """{metric name: {"value", "unit"}} of a finished replay's output (module docstring); {} otherwise."""
    if not is_replay_output(stdout):
        return {}
    out: Metrics = {}
    for pattern, fields in _LINES:
        match = pattern.search(stdout)
        if not match:
            continue
        for (name, scale, unit), text in zip(fields, match.groups()):
            out[name] = {"value": float(text) * scale, "unit": unit}
    return out
