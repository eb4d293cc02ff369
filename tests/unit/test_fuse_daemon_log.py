"""A bundled daemon's request log (fusecore's -o requests, read by collectors/parse/fuse_daemon_log.py): its
records as fuse_daemon_req, the FUSE layer made from it where the trace has no FUSE events, and what a log cut
short, a request never answered and a log of another format say."""

from __future__ import annotations

import json

import polars as pl

from mobiperf.collectors.parse import derive_tables, parse_raw_dir
from mobiperf.collectors.parse.fuse_daemon_log import FORMAT_LINE, parse_fuse_daemon_log

HEADER = "\t".join(("unique", "opcode", "nodeid", "len", "size", "offset", "pid", "tid", "read_ns", "reply_tid",
                    "reply_ns", "error", "reply_len"))
# As fusecore wrote them for `dd bs=4k count=2 oflag=dsync` on bfuse (reference-impl/fusecore/fc_reqlog.c), the
# times moved to round numbers: CREATE, then per block a WRITE of 4 KiB and an FSYNC, then a FLUSH still served.
RECORDS = [
    "6\t35\t1\t58\t0\t0\t2305\t2301\t1000000\t2301\t1040000\t0\t160",
    "12\t16\t1405\t4176\t4096\t0\t2305\t2301\t2000000\t2301\t2030000\t0\t24",
    "14\t20\t1405\t56\t0\t0\t2305\t2302\t2100000\t2302\t5600000\t0\t16",
    "16\t16\t1405\t4176\t4096\t4096\t2305\t2301\t6000000\t2301\t6020000\t0\t24",
    "18\t20\t1405\t56\t0\t0\t2305\t2302\t6100000\t2302\t9100000\t0\t16",
    "20\t25\t1405\t64\t0\t0\t2305\t2301\t9500000\t\t\t\t",
]


def _log(path, records=RECORDS, *, end=True, start="mono_ns 900000 boot_ns 5900000"):
    text = f"{FORMAT_LINE}\n# daemon bfuse pid 2300\n# clocks start {start}\n{HEADER}\n" + "".join(
        r + "\n" for r in records)
    if end:
        text += f"# clocks end mono_ns 9900000 boot_ns 14900000\n# end {len(records)} records 0 dropped\n"
    path.write_text(text)
    return path


def test_records_with_the_kernels_ids_and_the_daemons_times(tmp_path):
    df, summary, warnings = parse_fuse_daemon_log(_log(tmp_path / "bfuse-requests.tsv"), 2, "bfuse", connection=51)
    assert warnings == [] and summary == {"records": 6, "unanswered": 1, "complete": True, "daemon": "bfuse"}
    assert df["opcode_name"].to_list() == ["FUSE_CREATE", "FUSE_WRITE", "FUSE_FSYNC", "FUSE_WRITE", "FUSE_FSYNC",
                                           "FUSE_FLUSH"]
    assert df["size_bytes"].to_list() == [0, 4096, 0, 4096, 0, 0] and df["offset_bytes"][3] == 4096
    assert set(df["pid"]) == {2305} and set(df["rep"]) == {2} and set(df["connection"]) == {51}
    assert df.filter(pl.col("opcode") == 20)["reply_ts"].to_list() == [5_600_000, 9_100_000]
    flush = df.row(5, named=True)
    assert flush["reply_ts"] is None and flush["reply_tid"] is None and flush["error"] is None


def test_a_trace_on_the_boot_clock_gets_the_logs_own_offset(tmp_path):
    df, _, _ = parse_fuse_daemon_log(_log(tmp_path / "x-requests.tsv"), 0, "x", clock="boot")
    assert df["read_ts"][0] == 1_000_000 + 5_000_000 and df["reply_ts"][1] == 2_030_000 + 5_000_000


def test_a_log_cut_short_keeps_its_whole_lines_and_says_so(tmp_path):
    path = _log(tmp_path / "bfuse-requests.tsv", end=False)
    path.write_bytes(path.read_bytes()[:-20])   # the last line cut in the middle, no end line
    df, summary, warnings = parse_fuse_daemon_log(path, 0, "bfuse")
    assert df.height == 5 and summary["complete"] is False
    assert len(warnings) == 1 and "cut short" in warnings[0] and "5 requests kept" in warnings[0]
    assert "partial last line dropped" in warnings[0]


def test_a_log_of_another_format_is_refused_with_its_first_line(tmp_path):
    path = tmp_path / "bfuse-requests.tsv"
    path.write_text("# mobiperf fuse requests 2\nsomething new\n")
    df, summary, warnings = parse_fuse_daemon_log(path, 0, "bfuse")
    assert df.height == 0 and summary["records"] == 0
    assert warnings == ["bfuse-requests.tsv: not a fusecore request log of format 1 (first line "
                        "'# mobiperf fuse requests 2'): not read"]


def test_without_fuse_events_the_log_is_the_fuse_layer_and_says_it(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    _log(raw / "bfuse-requests.tsv")
    (raw / "tasks.json").write_text(json.dumps({"fuse_daemons": [
        {"layer": "bfuse", "pid": 2300, "tids": [2300, 2301, 2302], "fuse_fds": [5], "connection": 51}]}))
    parsed = parse_raw_dir(raw, 0)
    derived, summary = derive_tables(parsed.tables, {0: parsed.summary})
    req = derived["fuse_req"]
    assert set(req["source"]) == {"daemon_log"} and req.height == 6 and set(req["connection"]) == {51}
    # a request spans from the daemon's read to its reply; the requester is the header's pid
    fsync = req.filter(pl.col("opcode_name") == "FUSE_FSYNC").row(0, named=True)
    assert (fsync["send_ts"], fsync["end_ts"], fsync["pid"], fsync["daemon_tid"]) == (2_100_000, 5_600_000, 2305,
                                                                                     2302)
    assert req.filter(pl.col("opcode_name") == "FUSE_WRITE")["data_bytes"].to_list() == [4096, 4096]
    note = summary["fuse_pairing"]["note"]
    assert summary["fuse_pairing"]["source"] == "daemon_log"
    assert note == ("FUSE layer from bfuse's request log (the trace has no usable FUSE events): 6 requests, 1 never "
                    "answered")
