"""Every compiled (numba) parse path run over real fixtures, and the argument types each compiled function saw.

parse_through_compiled_paths(tmp) makes each parser take its compiled path whatever the input's size (the small
files of tests/fixtures would otherwise take the numpy and regex paths):
  ftrace text     parse_ftrace_text(compiled=True): the 6.18 block fixture, a 5.10 one with syscalls and tgids, a
                  captured run's syscalls.txt
  blktrace        parse_blktrace_compiled: one file; two per-CPU files (the merge); one stream holding the same
                  records twice (times out of order, sequences falling: the sort and the exact gap count)
  ftrace pages    parse_ftrace_raw: the dd capture (block events) and the busy 6.18 capture (ext4, jbd2,
                  writeback, syscalls: the field decoders and the rendered bodies)
  trace-cmd .dat  ingest's extraction and the page decoder, v6, v7 and v7 with zstd
  Perfetto        parse_perfetto: the busy capture written as a trace with generic events of both encodings
  pairing         pair_block_requests_compiled over a golden run's block events
  sched           the scheduler's scanner (sched_scan.py) over the two-writers capture's sched_* lines
observed_signatures() then lists, for each compiled function of mobiperf, the argument types it was compiled or
loaded for (numba's dispatcher signatures), in the form collectors/parse/compiled_signatures.py keeps them.

    python tests/support/compiled_paths.py            print what the paths call and how it differs from the list
    python tests/support/compiled_paths.py --write    rewrite collectors/parse/compiled_signatures.py
"""

from __future__ import annotations

import gzip
import shutil
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures"


def parse_through_compiled_paths(tmp: Path) -> None:
    _ftrace_text()
    _blktrace(tmp)
    busy = _ftrace_pages(tmp)
    _trace_cmd(tmp)
    _perfetto(tmp, busy)
    _pairing()
    _sched(tmp)


def _ftrace_text() -> None:
    from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text

    for path in (FIX / "ftrace" / "k6.18-dd-4k-direct-dsync.txt", FIX / "ftrace" / "k5.10-tgid-syscalls.txt",
                 FIX / "layers" / "fuse-fdatasync" / "raw" / "rep0" / "syscalls.txt"):
        assert len(parse_ftrace_text(path, compiled=True).block_event) or path.name == "syscalls.txt"


def _sched(tmp: Path) -> None:
    import lzma

    from mobiperf.collectors.parse import sched
    from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text

    text = tmp / "two-writers.txt"
    text.write_bytes(lzma.decompress((FIX / "who" / "two-writers" / "raw" / "rep0" / "ftrace.txt.xz").read_bytes()))
    at = sched.SCAN_MIN_ROWS
    sched.SCAN_MIN_ROWS = 1  # the scanner whatever the count
    try:
        for compiled in (False, True):
            assert len(parse_ftrace_text(text, compiled=compiled).events["sched_switch"])
    finally:
        sched.SCAN_MIN_ROWS = at


def _blktrace(tmp: Path) -> None:
    from mobiperf.collectors.parse.blktrace_compiled import parse_blktrace_compiled

    one = FIX / "blktrace" / "loop-dd-4k-direct.blkbin"
    other = FIX / "blktrace" / "takeoverjp-sample.blktrace.0"
    twice = tmp / "twice.blktrace"  # the blktrace tool's file (sequence numbers), twice
    twice.write_bytes(other.read_bytes() * 2)
    for paths in ([one], [one, other], [twice]):
        assert len(parse_blktrace_compiled(paths).block_event)


def _ftrace_pages(tmp: Path) -> Path:
    from mobiperf.collectors.parse.ftrace_raw import parse_ftrace_raw

    dd = FIX / "ftrace" / "raw-6.18-dd12"
    assert len(parse_ftrace_raw(dd / "ftrace_raw", dd / "formats").block_event)
    with tarfile.open(FIX / "ftrace" / "raw-6.18-rawdec.tar.gz") as tar:
        tar.extractall(tmp, filter="data")
    busy = tmp / "raw-6.18-rawdec"
    assert parse_ftrace_raw(busy / "ftrace_raw", busy / "formats").events
    return busy


def _trace_cmd(tmp: Path) -> None:
    from mobiperf.collectors.parse.ftrace_raw import parse_ftrace_raw
    from mobiperf.collectors.parse.trace_cmd_dat import extract_dat

    for name in ("dd-block.v6.dat.gz", "dd-block.v7.dat.gz", "dd-block.v7zstd.dat"):
        src = FIX / "trace-cmd" / name
        dat = tmp / name.removesuffix(".gz")
        dat.write_bytes(gzip.decompress(src.read_bytes()) if name.endswith(".gz") else src.read_bytes())
        raw = tmp / f"{dat.name}-raw"
        extract_dat(dat, raw)
        assert len(parse_ftrace_raw(raw / "ftrace_raw", raw / "formats").block_event)


def _perfetto(tmp: Path, busy: Path) -> None:
    sys.path.insert(0, str(REPO / "tests" / "support"))
    from perfetto_capture import to_perfetto

    from mobiperf.collectors.parse.perfetto_trace import parse_perfetto

    for generic in ("list", "descriptor"):  # jbd2, writeback, syscalls: generic events of each encoding
        trace = tmp / f"busy-{generic}.pftrace"
        trace.write_bytes(to_perfetto(busy, generic=generic))
        assert len(parse_perfetto(trace).block_event)


def _pairing() -> None:
    from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text
    from mobiperf.collectors.parse.pairing import pair_block_requests_compiled

    events = parse_ftrace_text(FIX / "golden" / "rand4k-fsync" / "raw" / "rep0" / "ftrace.txt").block_event
    assert len(pair_block_requests_compiled(events)[0])


def observed_signatures() -> dict[str, list[str]]:
    """Each compiled function of mobiperf's loaded modules that Python calls -> the argument types (repr) it has
    code for. Functions only other compiled functions call are left out: their code is compiled into their
    callers' (and shows here only when the callers were compiled rather than loaded from the cache)."""
    from numba.core.registry import CPUDispatcher

    out: dict[str, list[str]] = {}
    for name, module in sorted(sys.modules.items()):
        if not name.startswith("mobiperf."):
            continue
        compiled = {attr: obj for attr, obj in vars(module).items()
                    if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == name}
        callees = {called for obj in compiled.values() for called in obj.py_func.__code__.co_names}
        for attr, obj in sorted(compiled.items()):
            sigs = sorted(repr(sig) for sig in obj.signatures)
            if sigs and attr not in callees:
                out[f"{name}.{attr}"] = sigs
    return out


def listing(signatures: dict[str, list[str]]) -> str:
    """The source of collectors/parse/compiled_signatures.py for these signatures."""
    import pprint

    head = ('"""The argument types each compiled (numba) function of the parsers is called with: what\n'
            "compiled_code.compile_parsers() compiles ahead of a user's first parse. Generated by\n"
            "`python tests/support/compiled_paths.py --write` from every compiled parse path run over the fixtures;\n"
            'tests/unit/test_compiled_code.py holds it equal to what they call."""\n\n')
    # 105: the first line carries "SIGNATURES = " too, and every line stays within 120 columns
    return head + "SIGNATURES = " + pprint.pformat(signatures, width=105, sort_dicts=True) + "\n"


def main() -> None:
    import tempfile

    from mobiperf.collectors.parse.compiled_signatures import SIGNATURES

    tmp = Path(tempfile.mkdtemp(prefix="compiled-paths-"))
    try:
        parse_through_compiled_paths(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    seen = observed_signatures()
    if "--write" in sys.argv:
        path = REPO / "collectors" / "parse" / "compiled_signatures.py"
        path.write_text(listing(seen))
        print(f"wrote {path}: {sum(map(len, seen.values()))} signatures of {len(seen)} functions")
        return
    for name in sorted(set(seen) | set(SIGNATURES)):
        for sig in sorted(set(seen.get(name, [])) ^ set(SIGNATURES.get(name, []))):
            print(("called, not listed: " if sig in seen.get(name, []) else "listed, not called: ") + name, sig)


if __name__ == "__main__":
    main()
