"""Results of the Mobibench-compatible workload generator (reference-impl/mobibench) as mobiperf metrics.

`parse_mobibench_result` reads what `mobibench` printed — its Mobibench text output, the JSON of
`--json=FILE`, or both one after the other (`--json=-` appends the JSON to the text on stdout) — and returns
`{metric name: {"value": float, "unit": str}}` with the dotted names run.json uses:

    workload.elapsed                  s      the timed window (T2 - T1)
    workload.throughput               B/s    file modes; Mobibench's figure: requested KiB / elapsed
    workload.iops                     IOPS   random file modes (-a 1, -a 3)
    workload.tps                      tx/s   SQLite mode (-d)
    workload.cpu.active|idle|iowait   %      system-wide /proc/stat over the window
    workload.ctx_switches[.voluntary] count  the worker thread's switches (single-thread runs only)
    workload.latency.p50|p90|p99|p99.9|max|mean  ns  per IO (file) or per transaction (SQLite); JSON only

Figures Mobibench prints with two decimals (KB/s, TPS) come from the JSON when it is there, at full precision.
A run that reported an error (anything but "Err string : No error") is not a result: it raises.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from mobiperf.core.errors import ParseError

Metrics = dict[str, dict[str, float | str]]


class MobibenchOutputError(ParseError, ValueError):
    """The text is not (successful) Mobibench output. A ValueError too, for callers outside mobiperf's CLI."""

    def __init__(self, message: str, where: str = "-"):
        super().__init__("mobibench output", where, message)


# "[TIME] :%8ld sec %06ldus. \t%.0f B/sec, \t%.2f KB/sec, \t%.2f MB/sec." [+ " %.2f IOPS(%dKB) "]
_FILE_TIME = re.compile(
    r"^\[TIME\] :\s*(?P<sec>\d+) sec (?P<usec>\d{6})us\. \t(?P<bps>[\d.]+|inf|nan) B/sec, "
    r"\t(?P<kbps>[\d.]+|inf|nan) KB/sec, \t(?P<mbps>[\d.]+|inf|nan) MB/sec\."
    r"(?: (?P<iops>[\d.]+|inf|nan) IOPS\((?P<rec>\d+)KB\) ?)?$"
)
# "[TIME] :%8ld sec %06ldus. \t%.2f Transactions/sec"
_DB_TIME = re.compile(
    r"^\[TIME\] :\s*(?P<sec>\d+) sec (?P<usec>\d{6})us\. \t(?P<tps>[\d.]+|inf|nan) Transactions/sec$"
)
_NUM = r"(-?nan|-?inf|-?[\d.]+)"
_CPU = re.compile(rf"^\[CPU\] : Active,Idle,IoWait : {_NUM} {_NUM} {_NUM}$")
_CON = re.compile(r"^\[CON SWITCHES\] : (\d+) (\d+)$")
_ERR = re.compile(r"^Err string : (.*)$")
_JSON_START = re.compile(r'^\{\s*"mobibench_version"', re.M)


def _metric(value: float, unit: str) -> dict[str, float | str]:
    return {"value": float(value), "unit": unit}


def _split_json(output: str) -> tuple[str, dict | None]:
    """Text part and JSON part of the output; either may be empty."""
    match = _JSON_START.search(output)
    if not match:
        return output, None
    blob = output[match.start():]
    try:
        data = json.loads(blob)
    except json.JSONDecodeError as exc:
        raise MobibenchOutputError(f"the JSON part does not parse: {exc}", "json") from exc
    if not isinstance(data, dict) or "results" not in data:
        raise MobibenchOutputError("the JSON part has no 'results' object", "json")
    return output[:match.start()], data


def _parse_text(text: str) -> Metrics:
    # progress is "%02d%%\r" with no newline, so a carriage return also ends a line
    lines = [line.strip(" ") for line in re.split(r"[\r\n]", text)]  # drops the blank after "IOPS(4KB)"
    if "[Messurement Result]" not in lines:
        for index, line in enumerate(lines, 1):
            match = _ERR.match(line)
            if match and match.group(1) != "No error":
                raise MobibenchOutputError(f"the run failed: {match.group(1)}", f"line {index}")
        raise MobibenchOutputError("not Mobibench output: no '[Messurement Result]' block")

    metrics: Metrics = {}
    seen_time = False
    for index, line in enumerate(lines, 1):
        where = f"line {index}"
        if line.startswith("[TIME]"):
            file_time = _FILE_TIME.match(line)
            db_time = _DB_TIME.match(line)
            if not (file_time or db_time):
                raise MobibenchOutputError(f"unreadable [TIME] line: {line!r}", where)
            match = file_time or db_time
            metrics["workload.elapsed"] = _metric(int(match["sec"]) + int(match["usec"]) / 1e6, "s")
            if db_time:
                metrics["workload.tps"] = _metric(float(db_time["tps"]), "tx/s")
            else:
                metrics["workload.throughput"] = _metric(float(file_time["bps"]), "B/s")
                if file_time["iops"] is not None:
                    metrics["workload.iops"] = _metric(float(file_time["iops"]), "IOPS")
            seen_time = True
        elif line.startswith("[CPU]"):
            match = _CPU.match(line)
            if not match:
                raise MobibenchOutputError(f"unreadable [CPU] line: {line!r}", where)
            for name, value in zip(("active", "idle", "iowait"), match.groups()):
                metrics[f"workload.cpu.{name}"] = _metric(float(value.lstrip("-")), "%")
        elif line.startswith("[CON SWITCHES]"):
            match = _CON.match(line)
            if not match:
                raise MobibenchOutputError(f"unreadable [CON SWITCHES] line: {line!r}", where)
            metrics["workload.ctx_switches"] = _metric(int(match[1]), "count")
            metrics["workload.ctx_switches.voluntary"] = _metric(int(match[2]), "count")
        else:
            match = _ERR.match(line)
            if match and match.group(1) != "No error":
                raise MobibenchOutputError(f"the run failed: {match.group(1)}", where)
    if not seen_time:
        raise MobibenchOutputError("not Mobibench output: no [TIME] line in the result block")
    return metrics


def _parse_json(data: dict) -> Metrics:
    if data.get("error"):
        raise MobibenchOutputError(f"the run failed: {data['error']}", "json")
    results = data.get("results") or {}
    if "elapsed_s" not in results:
        raise MobibenchOutputError("the JSON has no results.elapsed_s", "json")

    def number(key: str) -> float | None:
        value = results.get(key)
        return None if value is None else float(value)

    metrics: Metrics = {"workload.elapsed": _metric(results["elapsed_s"], "s")}
    pairs = [
        ("throughput_bytes_per_s", "workload.throughput", "B/s"),
        ("iops", "workload.iops", "IOPS"),
        ("tps", "workload.tps", "tx/s"),
        ("cpu_active_pct", "workload.cpu.active", "%"),
        ("cpu_idle_pct", "workload.cpu.idle", "%"),
        ("cpu_iowait_pct", "workload.cpu.iowait", "%"),
        ("ctx_switches", "workload.ctx_switches", "count"),
        ("ctx_switches_voluntary", "workload.ctx_switches.voluntary", "count"),
    ]
    for key, name, unit in pairs:
        value = number(key)
        if value is not None:
            metrics[name] = _metric(value, unit)
    latency = results.get("latency_ns") or {}
    if latency.get("count"):
        for key in ("p50", "p90", "p99", "p99.9", "max", "mean"):
            if latency.get(key) is not None:
                metrics[f"workload.latency.{key}"] = _metric(latency[key], "ns")
    return metrics


def parse_mobibench_result(stdout: str) -> Metrics:
    """Metrics of one mobibench run from its text output, its --json output, or the text followed by the JSON.

    Raises MobibenchOutputError (a ValueError) when the text is not Mobibench output or the run reported an error.
    """
    if not stdout or not stdout.strip():
        raise MobibenchOutputError("not Mobibench output: empty")
    text, data = _split_json(stdout)
    metrics: Metrics = {}
    if text.strip():
        metrics.update(_parse_text(text))
    if data is not None:
        # the JSON has the same figures unrounded, and the latency percentiles the text lacks
        metrics.update(_parse_json(data))
    if not metrics:
        raise MobibenchOutputError("not Mobibench output: no result")
    for name, metric in metrics.items():
        if math.isnan(metric["value"]):
            metric["value"] = math.nan  # normalise "-nan" from a zero-length CPU sample
    return metrics


# What only the generator prints: its result header (Mobibench's own spelling) or its JSON's version key.
GENERATOR_MARKS = ("[Messurement Result]", '"mobibench_version"')


def read_generator_output(path: Path) -> Metrics:
    """The generator's figures from a file its output went to (a repetition's stdout.txt): {} when the file is
    missing or holds another workload's output; MobibenchOutputError when it is the generator's output but not a
    result (the run reported an error, the output was cut short). The one reader of a run's generator output:
    the run's metrics and a sweep unit's both come from it."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return {}
    if not any(mark in text for mark in GENERATOR_MARKS):
        return {}
    return parse_mobibench_result(text)
