"""trace-cmd .dat files read natively (collectors/parse/trace_cmd_dat.py) give the tables of `trace-cmd report`.

Oracle: fixtures/trace-cmd/ holds one capture of this machine (tracefs instance, block + ext4 fsync + fsync
syscall events and a trace_marker write while dd wrote O_DIRECT|O_DSYNC; capture.sh) as trace-cmd wrote it (v7,
zstd) and converted by trace-cmd to v7 uncompressed and v6, each with `trace-cmd report -N` of it beside. The
pages unpacked from each file and decoded by ftrace_raw.py equal the text parser's tables of the report, with
the text's µs timestamps (the report rounds as the kernel's text does).
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from mobiperf.collectors.parse.ftrace_raw import parse_ftrace_raw
from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text
from mobiperf.collectors.parse.trace_cmd_dat import DatUnsupported, extract_dat, read_dat
from mobiperf.core.errors import ParseError, UsageError
from raw_decode_checks import _text_ts, assert_same_durations, assert_same_rows

FIX = Path(__file__).parents[1] / "fixtures" / "trace-cmd"
FIXTURES = {"v7zstd": (7, "zstd"), "v7": (7, None), "v6": (6, None)}
INSTANCE = "mobiperf-dat-25263"  # the tracefs instance of the capture: its pages are the file's second buffer


def dat_file(name: str, tmp: Path) -> Path:
    """The fixture as trace-cmd wrote it (the uncompressed ones are stored gzipped)."""
    plain = FIX / f"dd-block.{name}.dat"
    if plain.exists():
        return plain
    out = tmp / plain.name
    with gzip.open(FIX / f"dd-block.{name}.dat.gz") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def report_text(name: str, buffer: str, tmp: Path) -> Path:
    """trace-cmd report's text without the `<buffer>: ` prefix it puts before every line of an instance."""
    lines = (FIX / f"dd-block.{name}.report.txt").read_text().splitlines(keepends=True)
    text = tmp / f"{name}.report.txt"
    text.write_text("".join(line.removeprefix(f"{buffer}: ") for line in lines))
    return text


def unpacked(dat: Path, tmp: Path, **kw):
    out = tmp / f"unpacked-{dat.name}"
    shutil.rmtree(out, ignore_errors=True)
    got = extract_dat(dat, out, **kw)
    return got, parse_ftrace_raw(out / "ftrace_raw", out / "formats")


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_native_tables_equal_trace_cmd_report(name, tmp_path):
    dat = dat_file(name, tmp_path)
    meta = read_dat(dat)
    assert (meta.version, meta.compression, meta.big_endian, meta.long_size, meta.page_size) == \
        (*FIXTURES[name], False, 8, 4096)
    got, binary = unpacked(dat, tmp_path)
    assert got.buffer == INSTANCE and got.buffers == [INSTANCE] and got.warnings == []
    text = parse_ftrace_text(report_text(name, got.buffer, tmp_path))
    assert binary.undecoded == {} and binary.unrendered == {} and binary.unparsed_by_event == {}
    assert text.unparsed_by_event == {} and binary.other_events == text.other_events
    assert len(text.block_event) > 100 and set(text.block_event["dev_major"].to_list()) == {254}
    assert_frame_equal(_text_ts(binary.block_event), text.block_event)
    # The marker's ip prints as hex in the report (the fixture has no kallsyms); the text is the same.
    assert_frame_equal(_text_ts(binary.trace_marker), text.trace_marker)
    assert binary.trace_marker["text"].to_list() == ["mobiperf fixture"]
    assert set(binary.events) == set(text.events) == {"fsync_event", "syscall_io"}
    assert_same_rows(_text_ts(binary.events["fsync_event"]), text.events["fsync_event"])
    assert_same_durations(_text_ts(binary.events["syscall_io"]), text.events["syscall_io"])
    assert len(text.events["syscall_io"]) == 4  # one fsync per dd


def test_versions_unpack_the_same_pages(tmp_path):
    pages = {}
    for name in FIXTURES:
        out = tmp_path / name
        extract_dat(dat_file(name, tmp_path), out)
        pages[name] = {p.name: p.read_bytes() for p in (out / "ftrace_raw").iterdir()}
    assert pages["v7zstd"] == pages["v7"] == pages["v6"]
    assert sorted(pages["v6"]) == ["cpu0", "cpu1", "saved_cmdlines"] and len(pages["v6"]["cpu1"]) == 3 * 4096


def test_buffer_by_name(tmp_path):
    dat = dat_file("v7zstd", tmp_path)
    assert [b.name for b in read_dat(dat).buffers] == ["", INSTANCE]
    got, binary = unpacked(dat, tmp_path, buffer="")  # the top level: no CPU data in this file
    assert got.buffer == "" and binary.events_total == 0
    got, binary = unpacked(dat, tmp_path, buffer=INSTANCE)
    assert got.buffer == INSTANCE and binary.events_total == 273
    with pytest.raises(UsageError, match="no buffer 'nope'"):
        extract_dat(dat, tmp_path / "x", buffer="nope")


def test_only_used_formats_are_written_unless_asked(tmp_path):
    dat = dat_file("v7zstd", tmp_path)
    extract_dat(dat, tmp_path / "used")
    written = sorted(str(p.relative_to(tmp_path / "used" / "formats").parent)
                     for p in (tmp_path / "used" / "formats").glob("*/*/format"))
    assert written == ["block/block_bio_queue", "block/block_rq_complete", "block/block_rq_insert",
                       "block/block_rq_issue", "ext4/ext4_sync_file_enter", "ext4/ext4_sync_file_exit",
                       "ftrace/print", "syscalls/sys_enter_fsync", "syscalls/sys_exit_fsync"]
    extract_dat(dat, tmp_path / "all", all_formats=True)
    assert len(list((tmp_path / "all" / "formats").glob("*/*/format"))) == 2305 + 18


def test_truncated_file_keeps_complete_pages_and_warns(tmp_path):
    dat = dat_file("v6", tmp_path)  # v6: the page table precedes the pages
    cpu1 = read_dat(dat).buffers[-1].cpus[1]
    _, full = unpacked(dat, tmp_path)
    cut = tmp_path / "cut-v6.dat"
    cut.write_bytes(dat.read_bytes()[:cpu1.offset + 4096 + 100])  # cpu1: one whole page and a part
    got, part = unpacked(cut, tmp_path)
    assert len(got.warnings) == 1 and "cpu 1: 4196 of 12288 bytes" in got.warnings[0]
    assert "truncated" in got.warnings[0]
    assert (tmp_path / "unpacked-cut-v6.dat" / "ftrace_raw" / "cpu1").stat().st_size == 4096
    on_cpu1 = part.block_event.filter(pl.col("cpu") == 1).height
    assert 0 < on_cpu1 < full.block_event.filter(pl.col("cpu") == 1).height
    # cpu0 whole, cpu1's first page: its earliest events
    kept = pl.concat([full.block_event.filter(pl.col("cpu") == 0),
                      full.block_event.filter(pl.col("cpu") == 1).sort("ts").head(on_cpu1)])
    assert_frame_equal(part.block_event.sort("ts", "cpu"), kept.sort("ts", "cpu"))


def test_truncated_v7_without_its_buffer_options_says_so(tmp_path):
    dat = dat_file("v7zstd", tmp_path)
    cpu1 = read_dat(dat).buffers[-1].cpus[1]
    cut = tmp_path / "cut-v7.dat"
    cut.write_bytes(dat.read_bytes()[:cpu1.offset + 600])
    with pytest.raises(ParseError, match=rf"{cut}:offset {cpu1.offset + 600}: the options section .* past the end"):
        extract_dat(cut, tmp_path / "out")


def test_cut_compressed_chunk_keeps_other_cpus_and_warns(tmp_path):
    dat = dat_file("v7zstd", tmp_path)
    cpu1 = read_dat(dat).buffers[-1].cpus[1]
    data = bytearray(dat.read_bytes())
    data[cpu1.offset + 4:cpu1.offset + 8] = (1 << 20).to_bytes(4, "little")  # cpu1's first chunk size: too big
    bad = tmp_path / "bad-chunk.dat"
    bad.write_bytes(bytes(data))
    _, full = unpacked(dat, tmp_path)
    got, part = unpacked(bad, tmp_path)
    assert len(got.warnings) == 1 and "cpu 1: compressed pages cut short" in got.warnings[0]
    assert_frame_equal(part.block_event, full.block_event.filter(pl.col("cpu") == 0))


def test_corrupt_header_raises_parse_error_with_file_and_offset(tmp_path):
    data = bytearray(dat_file("v6", tmp_path).read_bytes()[:4096])
    bad = tmp_path / "bad-endian.dat"
    data[12] = 7  # the endianness byte: after magic (10) and "6\0"
    bad.write_bytes(bytes(data))
    with pytest.raises(ParseError, match=rf"{bad}:offset 12: endianness byte 7"):
        read_dat(bad)
    data[12] = 0
    data[30:38] = (1 << 40).to_bytes(8, "little")  # header_page's size, after "header_page\0"
    bad = tmp_path / "bad-size.dat"
    bad.write_bytes(bytes(data))
    with pytest.raises(ParseError, match=rf"{bad}:offset 38: header_page: needs {1 << 40} bytes"):
        extract_dat(bad, tmp_path / "out")
    bad.write_bytes(b"\x17\x08Dtracing7\0\0\x08")
    with pytest.raises(ParseError, match=rf"{bad}:offset 14: page size"):
        read_dat(bad)


def test_unknown_version_is_unsupported_not_an_error(tmp_path):
    dat = tmp_path / "v9.dat"
    dat.write_bytes(b"\x17\x08Dtracing9\0\0\x08\0\x10\0\0")
    with pytest.raises(DatUnsupported, match="version 9"):
        read_dat(dat)


def test_ingest_reads_dat_natively(tmp_path, monkeypatch):
    from mobiperf.commands.ingest import ingest

    monkeypatch.setenv("PATH", "/nonexistent")  # no trace-cmd: the native reader must do it all
    rundir = ingest([FIX / "dd-block.v7zstd.dat"], tmp_path / "run")
    block = rundir.read_table("block_event")
    _, binary = unpacked(FIX / "dd-block.v7zstd.dat", tmp_path)
    assert len(block) == len(binary.block_event) == 224
    assert block["ts"].to_list() == binary.block_event["ts"].to_list()
    assert rundir.has_table("syscall_io") and rundir.has_table("fsync_event")
    assert not (rundir.raw_dir(0) / "trace-cmd-report.txt").exists()


@pytest.mark.skipif(shutil.which("trace-cmd") is None, reason="needs trace-cmd")
def test_ingest_falls_back_to_trace_cmd_report_with_a_warning(tmp_path, monkeypatch):
    from mobiperf.collectors.parse import trace_cmd_dat
    from mobiperf.commands.ingest import ingest

    def unsupported(path, raw, **kw):
        raise DatUnsupported(f"{path}: a big-endian trace")

    monkeypatch.setattr(trace_cmd_dat, "extract_dat", unsupported)
    rundir = ingest([FIX / "dd-block.v7zstd.dat"], tmp_path / "run")
    warnings = rundir.read_meta()["warnings"]
    assert any("big-endian" in w and "trace-cmd report" in w for w in warnings)
    text = parse_ftrace_text(report_text("v7zstd", INSTANCE, tmp_path))
    assert_frame_equal(rundir.read_table("block_event"), text.block_event)


def build_v7(pages: dict[int, bytes], formats: Path, cmdlines: bytes, *, compression: str = "zlib",
             big_endian: bool = False, buffers: tuple[str, ...] = ("",)) -> bytes:
    """A v7 file as the man page lays it out (trace-cmd here only writes zstd): every section and the pages
    compressed with zlib (in two chunks per CPU), in either byte order; each buffer named holds the same pages
    except that all but the last have none."""
    import zlib

    order = "big" if big_endian else "little"

    def n(value: int, size: int) -> bytes:
        return value.to_bytes(size, order)

    def squeeze(data: bytes) -> bytes:
        packed = zlib.compress(data)
        return n(len(packed), 4) + n(len(data), 4) + packed

    out = bytearray(b"\x17\x08Dtracing7\0" + bytes([big_endian, 8]) + n(4096, 4) + compression.encode() + b"\0"
                    + b"1.2\0")
    options_at = len(out)
    out += bytes(8)

    def section(sid: int, data: bytes) -> int:
        at = len(out)
        body = squeeze(data)
        out.extend(n(sid, 2) + n(1, 2) + n(0, 4) + n(len(body), 8) + body)
        return at

    def text(data: bytes) -> bytes:
        return n(len(data), 8) + data

    header = (formats / "header_page").read_bytes(), (formats / "header_event").read_bytes()
    systems = {}
    for fmt in sorted(formats.glob("*/*/format")):
        systems.setdefault(fmt.parent.parent.name, []).append(fmt.read_bytes())
    options = bytearray()

    def option(oid: int, data: bytes) -> None:
        options.extend(n(oid, 2) + n(len(data), 4) + data)

    option(16, n(section(16, b"header_page\0" + text(header[0]) + b"header_event\0" + text(header[1])), 8))
    events = n(len(systems), 4) + b"".join(name.encode() + b"\0" + n(len(texts), 4) + b"".join(map(text, texts))
                                           for name, texts in systems.items())
    option(18, n(section(18, events), 8))
    option(21, n(section(21, text(cmdlines)), 8))
    for k, name in enumerate(buffers):
        cpus = pages if k == len(buffers) - 1 else {}
        at = len(out)
        out.extend(n(3, 2) + n(1, 2) + n(0, 4) + n(0, 8))
        table = b""
        for cpu, blob in cpus.items():
            half = len(blob) // 4096 // 2 * 4096
            data = n(2, 4) + squeeze(blob[:half]) + squeeze(blob[half:])
            table += n(cpu, 4) + n(len(out), 8) + n(len(data), 8)
            out.extend(data)
        option(3, n(at, 8) + name.encode() + b"\0local\0" + n(4096, 4) + n(len(cpus), 4) + table)
    option(0, n(0, 8))
    out[options_at:options_at + 8] = n(section(0, bytes(options)), 8)
    return bytes(out)


@pytest.fixture(scope="module")
def fixture_parts(tmp_path_factory):
    """The pages, formats and cmdlines of the zstd fixture, and its tables."""
    tmp = tmp_path_factory.mktemp("parts")
    extract_dat(FIX / "dd-block.v7zstd.dat", tmp)
    pages = {int(p.name[3:]): p.read_bytes() for p in (tmp / "ftrace_raw").glob("cpu*")}
    tables = parse_ftrace_raw(tmp / "ftrace_raw", tmp / "formats")
    return pages, tmp / "formats", (tmp / "ftrace_raw" / "saved_cmdlines").read_bytes(), tables


def test_zlib_sections_and_chunks(fixture_parts, tmp_path):
    pages, formats, cmdlines, want = fixture_parts
    dat = tmp_path / "zlib.dat"
    dat.write_bytes(build_v7(pages, formats, cmdlines, buffers=("", "phone")))
    meta = read_dat(dat)
    assert (meta.version, meta.compression, [b.name for b in meta.buffers]) == (7, "zlib", ["", "phone"])
    got, binary = unpacked(dat, tmp_path)
    assert got.buffer == "phone" and got.warnings == []
    assert_frame_equal(binary.block_event, want.block_event)
    assert_frame_equal(binary.events["syscall_io"], want.events["syscall_io"])


def test_big_endian_is_read_but_its_pages_are_left_to_trace_cmd(fixture_parts, tmp_path):
    pages, formats, cmdlines, _ = fixture_parts
    dat = tmp_path / "be.dat"
    dat.write_bytes(build_v7(pages, formats, cmdlines, big_endian=True))
    meta = read_dat(dat)  # the container's numbers in either byte order
    assert meta.big_endian and meta.page_size == 4096 and len(meta.event_formats) == 9
    assert sorted(c.cpu for c in meta.buffers[0].cpus) == [0, 1] and meta.cmdlines == cmdlines
    with pytest.raises(DatUnsupported, match="big-endian"):
        extract_dat(dat, tmp_path / "out")


def test_unknown_compression_is_unsupported(fixture_parts, tmp_path):
    pages, formats, cmdlines, _ = fixture_parts
    dat = tmp_path / "lz4.dat"
    dat.write_bytes(build_v7(pages, formats, cmdlines, compression="lz4"))
    with pytest.raises(DatUnsupported, match="compression 'lz4'"):
        read_dat(dat)


@pytest.mark.parametrize("name", ["v7zstd", "v6"])
def test_cpu_stats_of_the_buffer_read_are_saved_as_the_collector_does(name, tmp_path):
    dat = dat_file(name, tmp_path)
    meta = read_dat(dat)
    assert sorted(meta.cpu_stats) == ["", INSTANCE]  # the top level's, then after "Buffer: NAME" the instance's
    extract_dat(dat, tmp_path / "out")
    import json
    stats = json.loads((tmp_path / "out" / "ftrace_raw_stats.json").read_text())
    assert stats["instance"] == INSTANCE and sorted(stats["per_cpu"]) == ["cpu0", "cpu1"]
    per_cpu = stats["per_cpu"]
    assert all(c["overrun"] == 0 and c["dropped events"] == 0 for c in per_cpu.values())
    # read events: what trace-cmd extract read from each CPU, all of which are in the file
    _, binary = unpacked(dat, tmp_path)
    assert sum(c["read events"] for c in per_cpu.values()) == binary.events_total == 273
