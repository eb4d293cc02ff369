"""Which source makes a run's FUSE layer, and the one line that says it (collectors/parse/fuse_layer.py), on FUSE
events in the text formats of the kernels that differ: 6.18's (the send carries the request id), Debian 6.12's
(`req 0` on every send: the id is set after the event fires), and a shape no parser knows; and the opcode table
held to the kernel header Debian installs (include/uapi/linux/fuse.h)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mobiperf.collectors.parse import derive_tables, parse_raw_dir
from mobiperf.collectors.parse.fuse_protocol import OPCODES, reply_fits

# mobibench (tid 300) creates a file, writes 4 KiB and fdatasyncs it twice through a daemon (tids 400, 401) on
# FUSE connection 51: (us, comm-tid, event, unique, opcode, send len | reply len, error)
REQUESTS = [  # (send us, end us, opcode, send len, reply len, daemon tid, unique)
    (100, 180, 35, 58, 160, 400, 6), (200, 230, 16, 4176, 24, 401, 8), (240, 900, 20, 56, 16, 400, 10),
    (1000, 1030, 16, 4176, 24, 401, 12), (1040, 1800, 20, 56, 16, 400, 14), (1900, 1920, 25, 64, 16, 401, 16),
]


def _trace(tmp_path: Path, *, send_ids: bool, shape: str = "6.x") -> Path:
    lines = []
    for send, end, op, slen, rlen, daemon, unique in REQUESTS:
        sid = unique if send_ids else 0
        if shape == "6.x":
            body = f"connection 51 req {sid} opcode {op} ({OPCODES[op]}) len {slen} "
        else:   # a shape no parser knows (field names of its own)
            body = f"conn=51 unique={sid} op={op} length={slen}"
        lines.append((send, "mobibench-300", "fuse_request_send", body))
        lines.append((end, f"bfuse-{daemon}", "fuse_request_end", f"connection 51 req {unique} len {rlen} error 0"))
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "ftrace.txt").write_text("".join(f"{comm:>16} [000] ..... {10 + t * 1e-6:12.6f}: {event}: {body}\n"
                                            for t, comm, event, body in sorted(lines)))
    return raw


def _layer(raw: Path):
    parsed = parse_raw_dir(raw, 0)
    derived, summary = derive_tables(parsed.tables, {0: parsed.summary})
    return derived.get("fuse_req"), summary.get("fuse_pairing", {})


def test_sends_with_ids_pair_by_id(tmp_path):
    req, summary = _layer(_trace(tmp_path, send_ids=True))
    assert set(req["source"]) == {"fuse_events"} and req["end_ts"].is_not_null().all()
    assert summary["note"] == "FUSE layer from fuse_request_send/end paired by request id: 6 requests"


def test_sends_without_ids_pair_by_connection_and_order(tmp_path):
    req, summary = _layer(_trace(tmp_path, send_ids=False))
    assert set(req["source"]) == {"fuse_events_by_order"}
    got = req.sort("send_ts").select("unique", "opcode", "daemon_tid", "pid").rows()
    assert got == [(u, op, d, 300) for _, _, op, _, _, d, u in REQUESTS]
    assert summary["note"] == ("FUSE layer from fuse_request_send/end, whose sends carry no request id (req 0, as on "
                               "Debian's 6.12), paired by connection, order, time and reply length: 6 of 6")


def test_events_of_an_unknown_shape_are_said_not_dropped_silently(tmp_path):
    req, summary = _layer(_trace(tmp_path, send_ids=True, shape="future"))
    assert req is None or not req.height
    assert summary["note"] == (
        "6 FUSE events of a shape mobiperf cannot read (their kernel prints other fields; see the parse warnings); "
        "6 FUSE ends without a send to pair them with; no FUSE layer: no FUSE events to pair, no request log of "
        "the daemon's, and no /dev/fuse descriptors of a FUSE daemon are known for this run")


def test_the_opcodes_are_the_kernel_headers():
    header = Path("/usr/include/linux/fuse.h")
    if not header.exists():
        pytest.skip("no kernel headers here (Debian: linux-libc-dev)")
    enum = header.read_text().split("enum fuse_opcode {", 1)[1].split("};", 1)[0]
    declared = {int(v): n for n, v in re.findall(r"\b((?:FUSE|CUSE)_[A-Z_0-9]+)\s*=\s*(\d+)", enum)
                if "BSWAP" not in n}
    assert declared and all(OPCODES[v] == n for v, n in declared.items())


def test_reply_lengths():
    assert reply_fits(16, 0, 24) and not reply_fits(16, 0, 16)     # WRITE: fuse_write_out
    assert reply_fits(20, 0, 16) and reply_fits(3, 0, 120) and reply_fits(3, -2, 16) and not reply_fits(3, 0, 16)
    assert reply_fits(15, 0, 16 + 4096)                             # READ: any length
