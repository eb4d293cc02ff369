"""trace-cmd .dat files (versions 6 and 7) -> the saved formats/ tree and per-CPU page files of ftrace_raw.py.

A .dat is a container around what `mobiperf run` saves itself from tracefs: the page header, the event format
files, saved_cmdlines and, per CPU, the ring buffer pages as trace_pipe_raw gives them. So the native reader only
unpacks it (extract_dat) and the binary page decoder (ftrace_raw.parse_ftrace_raw) does the rest; no trace-cmd
needed. Layout (man trace-cmd.dat.v6 / trace-cmd.dat.v7; numbers in the file's byte order after the first bytes):
  both      magic `\\x17\\x08Dtracing`, version string "6"/"7" NUL, endian byte (0 little, 1 big), user-space long
            size byte, u32 page size
  v6        then in fixed order: "header_page\\0" u64 size + text, "header_event\\0" u64 size + text; u32 count of
            ftrace formats, each u64 size + text; u32 count of systems, each name NUL, u32 count, each u64 size +
            text; u32 size + kallsyms; u32 size + printk formats; u64 size + saved_cmdlines; u32 cpus;
            "options  \\0" with options (u16 id, u32 size, data; id 0 ends); "flyrecord\\0" then per CPU u64 offset,
            u64 size of its pages (or "latency  \\0" and text). An instance (-B) is a BUFFER option (id 3: u64
            offset, name NUL) whose offset holds "flyrecord\\0" and its own per-CPU offset/size pairs.
  v7        then the compression "name\\0version\\0" ("none": not compressed) and the u64 offset of the first
            options section. Sections: u16 id, u16 flags (1: compressed), u32 string id, u64 size; a compressed
            section's data is u32 compressed size, u32 size, then the compressed bytes. Options sections (id 0) hold
            options as in v6; DONE (id 0) holds the offset of the next options section (0: none). Options 16-18 and
            21 give the offsets of the header info (as v6's first two records), ftrace formats, event formats and
            saved_cmdlines sections; BUFFER (id 3) is u64 offset of its data section, name NUL, clock NUL, u32
            page size, u32 cpus, per CPU u32 cpu, u64 offset, u64 size. Compressed trace data is u32 chunk count,
            then per chunk u32 compressed size, u32 size and the bytes. BUFFER_TEXT (id 22) is latency text.
Compression: zstd (the zstandard package) and zlib (stdlib), as libtracecmd writes them.
Buffers: a file may hold several (the top one "", instances from -B); the one named, else the first whose pages
hold an event. Not read natively (DatUnsupported, the caller may fall back to `trace-cmd report`): big-endian
files (the page decoder reads little-endian rings), latency (text) traces, unknown compressions, file versions
other than 6 and 7. A truncated file keeps every complete page and warns (v6, whose page table precedes the
pages; trace-cmd writes v7's BUFFER options in a last options section after the pages, so a v7 file cut before
it is a ParseError that says so); a malformed header raises ParseError with the file and the byte offset (in a
compressed section: the section's offset and the offset in its decompressed data). Timestamps are the ring
buffer's: trace-cmd's OFFSET/TSC2NSEC/TIME_SHIFT options (guest/host syncing, TSC clocks) are not applied, and a
warning says so when the file has them. The per-CPU stats trace-cmd saved (CPUSTAT options) of the buffer read
go to ftrace_raw_stats.json as the ftrace collector writes it (overruns count as lost events). Only the formats of
the event types in the pages are written (trace-cmd
saves all ~2300 of a kernel; reading them all takes longer than decoding a small trace): all_formats=True for all.
"""

from __future__ import annotations

import json
import mmap
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from mobiperf.core.errors import MobiperfError, ParseError

MAGIC = b"\x17\x08Dtracing"
# v7 option ids (v6 uses 0 and 3 the same way)
OPT_DONE, OPT_CPUSTAT, OPT_BUFFER, OPT_OFFSET, OPT_TIME_SHIFT, OPT_TSC2NSEC = 0, 2, 3, 7, 12, 14
OPT_HEADER_INFO, OPT_FTRACE_EVENTS, OPT_EVENT_FORMATS, OPT_CMDLINES, OPT_BUFFER_TEXT = 16, 17, 18, 21, 22
SEC_OPTIONS = 0
MAX_UNCOMPRESSED = 1 << 30  # a section or chunk claiming more is corrupt (libtracecmd chunks are a few pages)
SECTION_COMPRESSED = 1
TIME_OPTIONS = {OPT_OFFSET: "OFFSET", OPT_TIME_SHIFT: "TIME_SHIFT", OPT_TSC2NSEC: "TSC2NSEC"}


class DatUnsupported(MobiperfError):
    """A well-formed .dat this reader does not decode (big-endian rings, latency text, an unknown compression)."""


@dataclass
class CpuData:
    cpu: int
    offset: int
    size: int  # bytes in the file (compressed size when the buffer is compressed)


@dataclass
class DatBuffer:
    name: str  # "" is the top-level buffer
    cpus: list[CpuData]
    compressed: bool = False
    clock: str = ""


@dataclass
class DatFile:
    """The metadata of a .dat: everything but the pages."""
    path: Path
    version: int
    big_endian: bool
    long_size: int
    page_size: int
    compression: str | None = None  # v7 algorithm name, None when "none" (or v6)
    header_page: bytes = b""
    header_event: bytes = b""
    ftrace_formats: list[bytes] = field(default_factory=list)
    event_formats: list[tuple[str, bytes]] = field(default_factory=list)  # (system, format text)
    cmdlines: bytes = b""
    buffers: list[DatBuffer] = field(default_factory=list)
    latency: bool = False
    time_options: list[str] = field(default_factory=list)  # timestamp adjustments trace-cmd would apply
    # per buffer: per CPU the kernel's per_cpu/cpuN/stats values (overrun, dropped events, ...) from CPUSTAT
    cpu_stats: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    _stats_buffer: str = ""  # the buffer the CPUSTAT options being read belong to
    warnings: list[str] = field(default_factory=list)


@dataclass
class Extracted:
    buffer: str  # the first buffer whose pages were written
    buffers: list[str]  # the buffers of the file that have pages (those read included)
    read: list[str]  # the buffers whose pages were written, merged by time (one clock)
    version: int
    compression: str | None
    pages_bytes: int
    warnings: list[str]


class _Cursor:
    """Reads numbers and strings of a byte buffer in the file's byte order; a short read is a ParseError naming
    the file and the offset."""

    def __init__(self, data, path: Path, pos: int = 0, endian: str = "<", base: int = 0,
                 section: int | None = None):
        self.data, self.path, self.pos, self.endian = data, path, pos, endian
        self.base = base  # offset of data[0] in the file
        self.section = section  # offset of the compressed section data[] was decompressed from

    def fail(self, what: str, at: int | None = None):
        where = (self.pos if at is None else at) + self.base
        if self.section is not None:
            raise ParseError(self.path, f"offset {self.section} (+{where} in its decompressed data)", what)
        raise ParseError(self.path, f"offset {where}", what)

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            self.fail(f"{what}: needs {n} bytes, {max(len(self.data) - self.pos, 0)} left (truncated or corrupt "
                      "header)")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return bytes(b)

    def num(self, size: int, what: str) -> int:
        return int.from_bytes(self.take(size, what), "little" if self.endian == "<" else "big")

    def u16(self, what: str) -> int:
        return self.num(2, what)

    def u32(self, what: str) -> int:
        return self.num(4, what)

    def u64(self, what: str) -> int:
        return self.num(8, what)

    def cstr(self, what: str, limit: int = 4096) -> str:
        end = self.data.find(b"\0", self.pos, self.pos + limit)
        if end < 0:
            self.fail(f"{what}: no NUL-terminated string")
        s = bytes(self.data[self.pos:end]).decode(errors="replace")
        self.pos = end + 1
        return s

    def sized(self, size_bytes: int, what: str) -> bytes:
        n = self.num(size_bytes, f"{what} size")
        return self.take(n, what)

    def expect(self, token: bytes, what: str) -> None:
        at = self.pos
        if self.take(len(token), what) != token:
            self.fail(f"{what}: expected {token!r}", at)


class _Decompressor:
    def __init__(self, name: str, path: Path):
        self.name, self.path = name, path
        if name == "zstd":
            try:
                import zstandard
            except ImportError:  # pragma: no cover - a dependency of mobiperf
                raise DatUnsupported(f"{path}: zstd-compressed .dat and the zstandard package is not installed "
                                     "(pip install zstandard)") from None
            self.zstd = zstandard.ZstdDecompressor()
        elif name != "zlib":
            raise DatUnsupported(f"{path}: compression {name!r} is not read natively (zstd and zlib are)")

    def __call__(self, data: bytes, size: int, at: int) -> bytes:
        if size > MAX_UNCOMPRESSED:
            raise ParseError(self.path, f"offset {at}", f"{self.name} data claims {size} bytes (corrupt header)")
        try:
            if self.name == "zstd":
                out = self.zstd.decompress(data, max_output_size=size)
            else:
                out = zlib.decompress(data)
        except Exception as e:  # zstd.ZstdError, zlib.error: corrupt data
            raise ParseError(self.path, f"offset {at}", f"{self.name} data does not decompress: {e}") from None
        if len(out) != size:
            raise ParseError(self.path, f"offset {at}", f"{self.name} data gives {len(out)} bytes, not {size}")
        return out


def read_dat(path: Path, data=None) -> DatFile:
    """The metadata of a .dat file (data: its bytes or an mmap, else the file is mapped)."""
    path = Path(path)
    if data is None:
        with open(path, "rb") as f:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if f.seek(0, 2) else b""
    c = _Cursor(data, path)
    c.expect(MAGIC, "trace-cmd magic")
    version_text = c.cstr("file version", 16)
    if not version_text.isdigit():
        c.fail(f"file version {version_text!r} is not a number")
    version = int(version_text)
    if version not in (6, 7):
        raise DatUnsupported(f"{path}: trace-cmd file version {version} (versions 6 and 7 are read natively)")
    endian_at = c.pos
    endian = c.take(1, "endianness")[0]
    if endian not in (0, 1):
        c.fail(f"endianness byte {endian} (0 or 1)", endian_at)
    c.endian = ">" if endian else "<"
    long_size = c.take(1, "long size")[0]
    if long_size not in (4, 8):
        c.fail(f"long size {long_size} (4 or 8)", c.pos - 1)
    page_size = c.u32("page size")
    if page_size < 64 or page_size > 1 << 24 or page_size & (page_size - 1):
        c.fail(f"page size {page_size}", c.pos - 4)
    dat = DatFile(path, version, bool(endian), long_size, page_size)
    if version == 6:
        _read_v6(c, dat)
    else:
        _read_v7(c, dat)
    return dat


def _read_headers(c: _Cursor, dat: DatFile) -> None:
    c.expect(b"header_page\0", "header info")
    dat.header_page = c.sized(8, "header_page")
    c.expect(b"header_event\0", "header info")
    dat.header_event = c.sized(8, "header_event")


def _read_ftrace_formats(c: _Cursor, dat: DatFile) -> None:
    for _ in range(_count(c, "ftrace format count")):
        dat.ftrace_formats.append(c.sized(8, "ftrace event format"))


def _read_event_formats(c: _Cursor, dat: DatFile) -> None:
    for _ in range(_count(c, "event system count")):
        system = c.cstr("event system name")
        for _ in range(_count(c, f"event count of {system}")):
            dat.event_formats.append((system, c.sized(8, f"event format of {system}")))


def _count(c: _Cursor, what: str) -> int:
    n = c.u32(what)
    if n > len(c.data):  # each item takes at least a byte: a bigger count is a corrupt header
        c.fail(f"{what} {n} is more than the file can hold", c.pos - 4)
    return n


def _read_v6(c: _Cursor, dat: DatFile) -> None:
    _read_headers(c, dat)
    _read_ftrace_formats(c, dat)
    _read_event_formats(c, dat)
    c.sized(4, "kallsyms")
    c.sized(4, "printk formats")
    dat.cmdlines = c.sized(8, "saved_cmdlines")
    cpus = _count(c, "cpu count")
    kind_at = c.pos
    kind = c.take(10, "data kind")
    instances = []
    if kind == b"options  \0":
        while True:
            opt = c.u16("option id")
            if opt == OPT_DONE:
                break
            body = _Cursor(c.sized(4, f"option {opt}"), c.path, 0, c.endian, c.pos)
            body.base -= len(body.data)
            if opt == OPT_BUFFER:
                instances.append((body.u64("buffer offset"), body.cstr("buffer name")))
            elif opt == OPT_CPUSTAT:
                _cpu_stat(dat, body.data)
            elif opt in TIME_OPTIONS:
                dat.time_options.append(TIME_OPTIONS[opt])
        kind_at = c.pos
        kind = c.take(10, "data kind")
    if kind == b"latency  \0":
        dat.latency = True
        return
    if kind != b"flyrecord\0":
        c.fail(f"data kind {kind!r} (flyrecord or latency)", kind_at)
    dat.buffers.append(DatBuffer("", _cpu_table(c, cpus)))
    for offset, name in instances:
        if offset >= len(c.data):
            dat.warnings.append(f"buffer {name!r}: its data at offset {offset} is past the end of the file "
                                "(truncated)")
            continue
        at = _Cursor(c.data, c.path, offset, c.endian)
        at.expect(b"flyrecord\0", f"buffer {name!r} data kind")  # an instance's pages are a flyrecord of their own
        dat.buffers.append(DatBuffer(name, _cpu_table(at, cpus)))


def _cpu_stat(dat: DatFile, text: bytes) -> None:
    """One CPUSTAT option: a CPU's stats file, or `\\nBuffer: NAME\\n\\n` saying that the stats after it are
    those of that instance (before any: the top-level buffer)."""
    lines = text.decode(errors="replace").strip("\0").strip().splitlines()
    if lines and lines[0].startswith("Buffer: "):
        dat._stats_buffer = lines[0][len("Buffer: "):]
        return
    values = {}
    for line in lines:
        key, _, value = line.partition(":")
        value = value.strip().split()[0] if value.strip() else ""
        if value.isdigit():
            values[key.strip()] = int(value)
    if "CPU" in values:
        dat.cpu_stats.setdefault(dat._stats_buffer, {})[f"cpu{values.pop('CPU')}"] = values


def _cpu_table(c: _Cursor, cpus: int, with_ids: bool = False) -> list[CpuData]:
    table = []
    for i in range(cpus):
        cpu = c.u32("cpu id") if with_ids else i
        table.append(CpuData(cpu, c.u64(f"cpu {cpu} data offset"), c.u64(f"cpu {cpu} data size")))
    return table


def _read_v7(c: _Cursor, dat: DatFile) -> None:
    name = c.cstr("compression name", 64)
    c.cstr("compression version", 64)
    dat.compression = None if name == "none" else name
    decompress = _Decompressor(name, c.path) if dat.compression else None
    options_at = c.u64("first options offset")
    seen = set()
    offsets: dict[int, int] = {}
    while options_at:
        if options_at in seen:
            c.fail("options sections form a loop", options_at)
        seen.add(options_at)
        if options_at >= len(c.data) and seen != {options_at}:
            # trace-cmd writes the BUFFER options (where each CPU's pages are) in a last options section after
            # the pages: a truncated file loses it, and the pages cannot be found without it.
            if not any(b.cpus for b in dat.buffers):
                c.fail(f"the options section at offset {options_at}, which holds where the pages are, is past "
                       f"the end of the file (truncated at {len(c.data)} bytes)", len(c.data))
            dat.warnings.append(f"options section at offset {options_at} past the end of the file (truncated)")
            break
        body = _section(c, options_at, SEC_OPTIONS, decompress, "options")
        options_at = 0
        while body.pos < len(body.data):
            opt = body.u16("option id")
            data = _Cursor(body.sized(4, f"option {opt}"), c.path, 0, c.endian, body.base + body.pos,
                           section=body.section)
            data.base -= len(data.data)
            if opt == OPT_DONE:
                options_at = data.u64("next options offset")
                break
            if opt == OPT_BUFFER:
                dat.buffers.append(_v7_buffer(data, c, decompress is not None))
            elif opt in (OPT_HEADER_INFO, OPT_FTRACE_EVENTS, OPT_EVENT_FORMATS, OPT_CMDLINES):
                offsets[opt] = data.u64(f"option {opt} offset")
            elif opt == OPT_BUFFER_TEXT:
                dat.latency = True
            elif opt == OPT_CPUSTAT:
                _cpu_stat(dat, data.data)
            elif opt in TIME_OPTIONS:
                dat.time_options.append(TIME_OPTIONS[opt])
    readers = {OPT_HEADER_INFO: _read_headers, OPT_FTRACE_EVENTS: _read_ftrace_formats,
               OPT_EVENT_FORMATS: _read_event_formats}
    for opt, read in readers.items():
        if opt in offsets:
            read(_section(c, offsets[opt], opt, decompress, f"section {opt}"), dat)
    if OPT_CMDLINES in offsets:
        dat.cmdlines = _section(c, offsets[OPT_CMDLINES], OPT_CMDLINES, decompress, "cmdlines").sized(
            8, "saved_cmdlines")
    if not dat.header_page:
        c.fail("no header info section (HEADER_INFO option)", 0)


def _v7_buffer(data: _Cursor, c: _Cursor, compressed: bool) -> DatBuffer:
    offset = data.u64("buffer offset")
    name = data.cstr("buffer name")
    clock = data.cstr("buffer clock")
    data.u32("buffer page size")
    cpus = data.u32("buffer cpu count")
    if cpus * 20 > len(data.data):
        data.fail(f"buffer cpu count {cpus} is more than the option holds", data.pos - 4)
    buf = DatBuffer(name, _cpu_table(data, cpus, with_ids=True), compressed, clock)
    if cpus:  # the section header before the pages (the pages themselves are read per CPU)
        head = _Cursor(c.data, c.path, offset, c.endian)
        head.u16("buffer section id")
        flags = head.u16("buffer section flags")
        buf.compressed = bool(flags & SECTION_COMPRESSED)
    return buf


def _section(c: _Cursor, offset: int, want_id: int, decompress, what: str) -> _Cursor:
    """The data of the section at offset as a cursor (decompressed when flagged)."""
    s = _Cursor(c.data, c.path, offset, c.endian)
    sid = s.u16(f"{what} section id")
    if sid != want_id:
        s.fail(f"{what}: section id {sid}, expected {want_id}", offset)
    flags = s.u16(f"{what} section flags")
    s.u32(f"{what} section string id")
    size = s.u64(f"{what} section size")
    if flags & SECTION_COMPRESSED:
        if decompress is None:
            s.fail(f"{what}: compressed section in a file whose compression is none", offset)
        csize, usize = s.u32(f"{what} compressed size"), s.u32(f"{what} uncompressed size")
        at = s.pos
        blob = s.take(csize, f"{what} compressed data")
        return _Cursor(decompress(blob, usize, at), c.path, 0, c.endian, section=offset)
    start = s.pos
    s.take(size, f"{what} data")
    return _Cursor(c.data[start:start + size], c.path, 0, c.endian, base=start)


def cpu_pages(dat: DatFile, buf: DatBuffer, cpu: CpuData, data) -> tuple[bytes, list[str]]:
    """The pages of one CPU, whole pages only (a truncated file keeps what it has, with a warning)."""
    warnings = []
    page = dat.page_size
    if not buf.compressed:
        end = min(cpu.offset + cpu.size, len(data))
        got = bytes(data[cpu.offset:end]) if cpu.offset < len(data) else b""
        if len(got) < cpu.size:
            warnings.append(f"buffer {buf.name!r} cpu {cpu.cpu}: {len(got)} of {cpu.size} bytes of pages in the "
                            "file (truncated); every complete page was kept")
        return got[:len(got) // page * page], warnings
    c = _Cursor(data, dat.path, cpu.offset, ">" if dat.big_endian else "<")
    decompress = _Decompressor(dat.compression or "", dat.path)
    out = []
    try:
        chunks = c.u32(f"cpu {cpu.cpu} chunk count")
        for k in range(chunks):
            csize, usize = c.u32("chunk compressed size"), c.u32("chunk size")
            at = c.pos
            out.append(decompress(c.take(csize, f"cpu {cpu.cpu} chunk {k}"), usize, at))
    except ParseError as e:
        warnings.append(f"buffer {buf.name!r} cpu {cpu.cpu}: compressed pages cut short ({e}); every complete "
                        "chunk was kept")
    pages = b"".join(out)
    return pages[:len(pages) // page * page], warnings


def _has_events(pages: bytes, page_size: int, commit_size: int, data_offset: int) -> bool:
    """Whether any page commits data (the length in the low 27 bits of its commit word)."""
    for base in range(0, len(pages) - data_offset + 1, page_size):
        commit = int.from_bytes(pages[base + 8:base + 8 + min(commit_size, 4)], "little")
        if commit & ((1 << 27) - 1):
            return True
    return False


def extract_dat(path: Path, raw: Path, buffer: str | None = None, all_formats: bool = False) -> Extracted:
    """Write the .dat's formats into raw/formats and the pages of one buffer into raw/ftrace_raw/cpuN (with its
    saved_cmdlines), the layout parse_ftrace_raw(raw/ftrace_raw, raw/formats) reads.

    buffer: the instance name ("" the top level); default every buffer whose pages hold events and whose clock is the
    first such buffer's, merged (each CPU's pages one after the other: the decoder orders records by time), as
    `trace-cmd report` shows them all.
    all_formats: write every format of the file (trace-cmd saves all ~2000 of the kernel: reading them takes
    longer than decoding a small trace); by default only those of the event types in the pages.
    Raises DatUnsupported for files it does not decode, ParseError for malformed ones."""
    from mobiperf.collectors.parse.event_format import parse_header_page

    path = Path(path)
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    dat = read_dat(path, data)
    if dat.big_endian:
        raise DatUnsupported(f"{path}: a big-endian trace (the page decoder reads little-endian ring buffers)")
    if dat.latency and not dat.buffers:
        raise DatUnsupported(f"{path}: a latency tracer's text trace, not ring buffer pages")
    warnings = list(dat.warnings)
    if dat.time_options:
        warnings.append(f"timestamps are the ring buffer's: trace-cmd's {', '.join(dat.time_options)} "
                        "adjustments are not applied")
    names = [b.name for b in dat.buffers]
    layout = parse_header_page(dat.header_page.decode(errors="replace"))
    read, pages = [], {}
    for buf in dat.buffers:
        if buffer is not None and buf.name != buffer:
            continue
        if read and buf.clock != read[0].clock:
            continue  # another clock: its times cannot be merged with the first buffer's
        got = {}
        for cpu in buf.cpus:
            got[cpu.cpu], w = cpu_pages(dat, buf, cpu, data)
            warnings += w
        if buffer is not None or any(_has_events(p, layout.page_size, layout.commit_size, layout.data_offset)
                                     for p in got.values()):
            read.append(buf)
            for cpu, blob in got.items():
                pages[cpu] = pages.get(cpu, b"") + blob
    if not read:
        if buffer is not None:
            from mobiperf.core.errors import UsageError
            raise UsageError(f"{path}: no buffer {buffer!r}; it has {', '.join(repr(n) for n in names)}")
        read = [dat.buffers[0] if dat.buffers else DatBuffer("", [])]
        warnings.append(f"no buffer holds events (buffers: {', '.join(repr(n) for n in names) or 'none'})")
    used = None if all_formats else _event_types(pages, layout)
    _write_formats(dat, raw / "formats", used)
    pages_dir = raw / "ftrace_raw"
    pages_dir.mkdir(parents=True, exist_ok=True)
    for cpu, blob in pages.items():
        (pages_dir / f"cpu{cpu}").write_bytes(blob)
    (pages_dir / "saved_cmdlines").write_bytes(dat.cmdlines)
    stats = _summed_stats([dat.cpu_stats.get(b.name) or {} for b in read])
    if stats:  # as the ftrace collector saves them: the parse stage counts overruns and drops as lost events
        (raw / "ftrace_raw_stats.json").write_text(json.dumps(
            {"clock": read[0].clock, "per_cpu": stats, "instance": read[0].name or None}, indent=2) + "\n")
    with_data = [b.name for b in dat.buffers if b in read or any(c.size for c in b.cpus)]
    return Extracted(read[0].name, with_data, [b.name for b in read], dat.version, dat.compression,
                     sum(map(len, pages.values())), warnings)


def _summed_stats(per_buffer: list[dict]) -> dict:
    """The per-CPU statistics of the buffers read, each count summed over them."""
    out: dict = {}
    for stats in per_buffer:
        for cpu, values in stats.items():
            into = out.setdefault(cpu, {})
            for key, value in values.items():
                into[key] = into.get(key, 0) + value if isinstance(value, (int, float)) else value
    return out


EVENT_NAME = re.compile(rb"^name:\s*(\S+)", re.M)


EVENT_ID = re.compile(rb"^ID:\s*(\d+)", re.M)


def _event_types(pages: dict[int, bytes], layout) -> set[int] | None:
    """The type ids of the records in the pages (the page walk of ftrace_raw.py); None when there are none."""
    import numpy as np

    from mobiperf.collectors.parse.ftrace_raw import walk_pages

    blob = b"".join(pages.values())
    if not blob or layout.data_size <= 0:
        return None
    types = walk_pages(np.frombuffer(blob, np.uint8), layout.data_offset, layout.data_size)[3]
    return set(np.unique(types).tolist()) or None


def _write_formats(dat: DatFile, formats: Path, used: set[int] | None = None) -> None:
    """formats/header_page, header_event and <system>/<event>/format: all, or those whose ID is in used."""
    formats.mkdir(parents=True, exist_ok=True)
    (formats / "header_page").write_bytes(dat.header_page)
    (formats / "header_event").write_bytes(dat.header_event)
    for system, text in [("ftrace", t) for t in dat.ftrace_formats] + dat.event_formats:
        if used is not None:
            id_match = EVENT_ID.search(text)
            if not id_match or int(id_match.group(1)) not in used:
                continue
        m = EVENT_NAME.search(text)
        if not m or not re.fullmatch(rb"[\w.+-]+", m.group(1)) or not re.fullmatch(r"[\w.+-]+", system):
            continue  # a format without a usable name cannot be looked up by id anyway
        d = formats / system / m.group(1).decode()
        d.mkdir(parents=True, exist_ok=True)
        (d / "format").write_bytes(text)
