"""Fuzz inputs for the trace parsers, shared by tests/property/test_parse_fuzz.py (a small count) and
bench/fuzz_parsers.py (>= 100k inputs): real traces with bytes flipped, inserted, deleted and cut, close enough to
real to reach deep code, plus random bytes."""

from __future__ import annotations

import atexit
import functools
import gzip
import shutil
import tarfile
import tempfile
from pathlib import Path

from hypothesis import strategies as st

from mobiperf.collectors.parse.blkparse_text import parse_blkparse_text
from mobiperf.collectors.parse.blktrace_compiled import parse_blktrace_compiled
from mobiperf.collectors.parse.blktrace import parse_blktrace
from mobiperf.collectors.parse.blktrace_numpy import parse_blktrace_numpy
from mobiperf.collectors.parse.compressed import unpack
from mobiperf.collectors.parse.ftrace_raw import parse_ftrace_raw
from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text
from mobiperf.collectors.parse.strace import parse_strace
from mobiperf.collectors.parse.trace_cmd_dat import DatUnsupported, extract_dat
from mobiperf.core.errors import ParseError

FIX = Path(__file__).parent.parent / "fixtures"
SEEDS = {
    "ftrace": [p.read_bytes()[:4000] for p in sorted((FIX / "ftrace").glob("*.txt"))],
    "strace": [(FIX / "strace" / "dd-fsync-threads.strace").read_bytes()],
    "blktrace": [(FIX / "blktrace" / "loop-dd-4k-direct.blkbin").read_bytes()[:3000]],
    "ftrace_raw": [(FIX / "ftrace" / "raw-6.18-dd12" / "ftrace_raw" / "cpu1").read_bytes()[:4096 * 3]],
}
RAW_FORMATS = FIX / "ftrace" / "raw-6.18-dd12" / "formats"
# Pages of every event family (ext4, jbd2, writeback, syscalls: decoded by their print fmts), with their formats.
RAW_EVENTS = FIX / "ftrace" / "raw-6.18-rawdec.tar.gz"


def _raw_events_pages() -> bytes:
    with tarfile.open(RAW_EVENTS) as tar:
        return tar.extractfile("raw-6.18-rawdec/ftrace_raw/cpu0").read()[:4096 * 3]


@functools.cache
def raw_events_formats() -> Path:
    """The fixture's formats/ unpacked once per process (removed at exit)."""
    work = Path(tempfile.mkdtemp(prefix="fuzz-formats-"))
    atexit.register(shutil.rmtree, work, True)
    with tarfile.open(RAW_EVENTS) as tar:
        tar.extractall(work, members=[m for m in tar.getmembers() if "/formats" in m.name], filter="data")
    return work / "raw-6.18-rawdec" / "formats"


SEEDS["ftrace_raw_events"] = [_raw_events_pages()]
# A trace-cmd .dat (v7, zstd): its header, options and compressed sections are what the edits reach.
SEEDS["trace_cmd_dat"] = [(FIX / "trace-cmd" / "dd-block.v7zstd.dat").read_bytes()]
SEEDS["blktrace_numpy"] = SEEDS["blktrace_compiled"] = SEEDS["blktrace"] + [
    (FIX / "blktrace" / "takeoverjp-sample.blktrace.0").read_bytes()[:3000]]
SEEDS["blkparse"] = [gzip.decompress((FIX / "blkparse" / "takeoverjp-sample.blkparse.txt.gz").read_bytes())[:4000]]
# containers: atrace -z, legacy systrace HTML, a gzip'ed trace
SEEDS["containers"] = [(FIX / "systrace" / "catapult-compressed_atrace_data.txt").read_bytes()[:6000],
                       (FIX / "systrace" / "catapult-trivial_systrace.html").read_bytes(),
                       gzip.compress((FIX / "ftrace" / "k4.14-android-ufs.txt").read_bytes())]


def unpack_all(path: Path):
    """Containers opened (their damage is a UsageError, which ingest reports like a ParseError)."""
    from mobiperf.core.errors import UsageError

    try:
        return unpack(path, path.parent / "unpacked")
    except UsageError as e:
        raise ParseError(path, 0, str(e)) from None


def parse_dat(path: Path):
    """A .dat unpacked natively, then its pages decoded; files the reader declines (DatUnsupported: ingest reads
    those with trace-cmd) are not errors."""
    out = path.parent / "unpacked"
    shutil.rmtree(out, ignore_errors=True)
    try:
        extract_dat(path, out)
    except DatUnsupported:
        return None
    return parse_ftrace_raw(out / "ftrace_raw", out / "formats")


def _perfetto_seed() -> bytes:
    """The start of a Perfetto trace of a real capture (typed block/ext4 events, self-described generic ones, a
    process tree, stats) after the Perfetto authors' public test packets (android_fs, f2fs_iostat, task_rename)."""
    from google.protobuf import text_format
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    from perfetto_capture import to_perfetto

    work = Path(tempfile.mkdtemp(prefix="fuzz-perfetto-"))
    try:
        with tarfile.open(RAW_EVENTS) as tar:
            tar.extractall(work, filter="data")
        capture = to_perfetto(work / "raw-6.18-rawdec")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    public = b"".join(text_format.Parse(f.read_text(), pb.Trace()).SerializeToString()
                      for f in sorted((FIX / "perfetto").glob("*.textproto")))
    return public + capture[:12000]


SEEDS["perfetto"] = [_perfetto_seed()]


def parse_perfetto_file(path: Path):
    from mobiperf.collectors.parse.perfetto_trace import parse_perfetto

    return parse_perfetto(path, formats=raw_events_formats(), hz=250)


PARSERS = {"ftrace": lambda p: parse_ftrace_text(p), "strace": lambda p: parse_strace(p),
           "blktrace": lambda p: parse_blktrace([p]), "blktrace_numpy": lambda p: parse_blktrace_numpy([p]),
           "blktrace_compiled": lambda p: parse_blktrace_compiled([p]),
           "blkparse": lambda p: parse_blkparse_text(p), "containers": unpack_all,
           "ftrace_raw": lambda p: parse_ftrace_raw(p.parent, RAW_FORMATS),
           "ftrace_raw_events": lambda p: parse_ftrace_raw(p.parent, raw_events_formats()),
           "trace_cmd_dat": parse_dat, "perfetto": parse_perfetto_file}


def input_name(kind: str) -> str:
    """The file name a parser expects: binary pages are read per CPU."""
    return "cpu0" if kind.startswith("ftrace_raw") else "input"


def mutated(kind: str):
    edits = st.lists(st.tuples(st.integers(0, 12500), st.sampled_from(["flip", "insert", "delete", "cut"]),
                               st.binary(min_size=1, max_size=16)), max_size=8)

    def apply(data_edits):
        data, todo = data_edits
        buf = bytearray(data)
        for pos, op, blob in todo:
            pos %= len(buf) + 1
            if op == "flip" and buf:
                buf[pos % len(buf)] ^= blob[0] or 1
            elif op == "insert":
                buf[pos:pos] = blob
            elif op == "delete":
                del buf[pos:pos + len(blob)]
            else:
                del buf[pos:]
        return bytes(buf)

    return st.tuples(st.sampled_from(SEEDS[kind]), edits).map(apply) | st.binary(max_size=400)


def parse_or_parse_error(kind: str, path: Path, data: bytes) -> bool:
    """True when data parses, False when it raises a ParseError naming the file; anything else escapes."""
    path.write_bytes(data)
    try:
        PARSERS[kind](path)
        return True
    except ParseError as e:
        assert str(path) in str(e), f"ParseError without the file name: {e}"
        return False
