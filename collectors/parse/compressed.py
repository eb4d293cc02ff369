"""Traces as they are shared: compressed, zipped or wrapped in HTML -> the plain trace files inside them.

Containers, told apart by their first bytes (never by the file name):
  gzip        1f 8b                      (.gz, `adb bugreport` pieces, trace2html's gzip'ed data)
  zstd        28 b5 2f fd                (.zst)
  xz, bzip2   fd 37 7a 58 5a 00, BZh     (archives of trace repositories)
  zip         PK 03 04                   (systrace HTML and bugreports as shared): every member that is itself a
                                         trace or a container; members that are neither are skipped
  atrace -z   `TRACE:` on a line of its own, then a zlib stream (the raw output of `atrace -z`, which systrace
              reads; adb without -T may have turned its \\n into \\r\\n, undone when the stream does not inflate
              as it is). Without -z, the text after `TRACE:` is the trace.
  systrace    HTML with the trace inside a script:
    legacy    `var linuxPerfData = "\\` then one JavaScript string line per trace line, `...\\n\\` (catapult before
              2015, Android SDK systrace of that time): the escapes (`\\n`, `\\\\`, `\\"`, the line-continuation
              backslash) are removed. Copies where they were already removed (trappy's test data) read as they are.
              The `dummy-0000 [000] 0.0: 0: trace_event_clock_sync` line systrace appends is dropped.
    current   `<script class="trace-data" type="application/text">` blocks: ftrace text as it is, base64 of
              gzip (trace2html), JSON (Chrome trace events: not an IO trace, skipped), or a process dump (`PROCESS
              DUMP` then `ps` output: the block systrace writes before the ftrace block on Android 9-10; skipped).
Everything is streamed into files of the destination directory (a 1 GB trace never sits in memory), nested
containers (a .zip holding a .html.gz) are opened up to MAX_DEPTH deep. What is not a container comes back as it is.
"""

from __future__ import annotations

import base64
import bz2
import gzip
import lzma
import re
import shutil
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from mobiperf.core.errors import UsageError

MAX_DEPTH = 4
CHUNK = 1 << 20
HEAD_BYTES = 4096
ATRACE_MARKER = re.compile(rb"(?:^|\n)TRACE:\r?\n")
# at the start of a line (the viewer's own JavaScript mentions both inside longer lines)
LEGACY_START = re.compile(rb'^\s*var\s+linuxPerfData\s*=\s*"', re.M)
TRACE_DATA_START = re.compile(rb'^\s*<script[^>]*class="trace-data"[^>]*>', re.M)
# legacy systrace's HTML suffix appends a clock-sync line of its own at time 0 (not from the kernel: it would
# stretch the trace's span back to the epoch of the trace clock)
SYSTRACE_DUMMY = re.compile(rb"^\s*dummy-0000\s+\[000\]\s+0\.0+: 0: trace_event_clock_sync: parent_ts=0\.0\s*$")


@dataclass(frozen=True)
class Unpacked:
    path: Path      # a plain file (the input itself when it is no container)
    label: str      # where it came from, for messages: `trace.zip:systrace.html:trace-data[0]`
    container: str  # the outermost container kind it came out of ("" for a plain input)


def container_kind(head: bytes) -> str:
    """The container the first bytes of a file announce, or "" (a plain file, or something else)."""
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        return "zstd"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    if head.startswith(b"BZh") and head[3:4].isdigit():
        return "bzip2"
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return "zip"
    m = ATRACE_MARKER.search(head)
    if m and (m.start() == 0 or _printable(head[:m.start()])):
        return "atrace"
    lower = head.lstrip()[:200].lower()
    if (lower.startswith((b"<!doctype html", b"<html")) or LEGACY_START.search(head)
            or TRACE_DATA_START.search(head)):
        return "html"
    return ""


def _printable(b: bytes) -> bool:
    return all(32 <= c < 127 or c in (9, 10, 13) for c in b)


def read_head(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(HEAD_BYTES)


def unpack(path: Path, dest: Path, label: str | None = None, depth: int = 0) -> list[Unpacked]:
    """The plain files inside `path` (itself if it is none), written into dest; nested containers opened."""
    label = label or str(path)
    kind = container_kind(read_head(path))
    if not kind:
        return [Unpacked(path, label, "")]
    if depth >= MAX_DEPTH:
        raise UsageError(f"{label}: containers nested deeper than {MAX_DEPTH} ({kind} inside)")
    dest.mkdir(parents=True, exist_ok=True)
    stem = _safe_name(Path(label.rsplit(":", 1)[-1]).name)
    try:
        if kind == "zip":
            produced = _unzip(path, dest, label)
        else:
            out = dest / f"{depth}-{len(list(dest.iterdir()))}-{stem}.{kind}.out"
            produced = {"gzip": _gunzip, "zstd": _unzstd, "xz": _unxz, "bzip2": _unbzip2, "atrace": _unatrace,
                        "html": _unhtml}[kind](path, out, label)
    except (OSError, EOFError, zlib.error, lzma.LZMAError, zipfile.BadZipFile, ValueError) as e:
        raise UsageError(f"{label}: a damaged {kind} container ({_reason(e)})") from None
    found: list[Unpacked] = []
    for inner, inner_label in produced:
        for u in unpack(inner, dest, inner_label, depth + 1):
            found.append(Unpacked(u.path, u.label, kind))
    return found


def _reason(e: Exception) -> str:
    text = str(e) or type(e).__name__
    return text if _printable(text.encode(errors="replace")) else type(e).__name__


def _safe_name(name: str) -> str:
    return re.sub(r"[^\w.-]", "_", name)[:80] or "input"


def _copy_stream(src, out: Path) -> None:
    with open(out, "wb") as f:
        shutil.copyfileobj(src, f, CHUNK)


def _gunzip(path: Path, out: Path, label: str):
    with gzip.open(path, "rb") as src:
        _copy_stream(src, out)
    return [(out, label)]


def _unxz(path: Path, out: Path, label: str):
    with lzma.open(path, "rb") as src:
        _copy_stream(src, out)
    return [(out, label)]


def _unbzip2(path: Path, out: Path, label: str):
    with bz2.open(path, "rb") as src:
        _copy_stream(src, out)
    return [(out, label)]


def _unzstd(path: Path, out: Path, label: str):
    import zstandard

    try:
        with open(path, "rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as src:
            _copy_stream(src, out)
    except zstandard.ZstdError as e:
        raise ValueError(f"zstd: {e}") from None
    return [(out, label)]


def _unzip(path: Path, dest: Path, label: str):
    produced = []
    with zipfile.ZipFile(path) as z:
        for i, info in enumerate(z.infolist()):
            if info.is_dir() or info.file_size == 0:
                continue
            with z.open(info) as member:
                head = member.read(HEAD_BYTES)
            from mobiperf.collectors.parse.detect import sniff_plain

            if not container_kind(head) and sniff_plain(head) == "unknown":
                continue  # a bugreport's other files, READMEs, images
            out = dest / f"zip{i}-{_safe_name(Path(info.filename).name)}"
            with z.open(info) as member:
                _copy_stream(member, out)
            produced.append((out, f"{label}:{info.filename}"))
    if not produced:
        raise ValueError("no member is a trace")
    return produced


def _unatrace(path: Path, out: Path, label: str):
    """The trace after atrace's `TRACE:` line: a zlib stream (atrace -z) or the text itself."""
    with open(path, "rb") as f:
        head = f.read(HEAD_BYTES)
        m = ATRACE_MARKER.search(head)
        f.seek(m.end())
        first = f.read(2)
        f.seek(m.end())
        if len(first) == 2 and first[0] == 0x78 and (first[0] * 256 + first[1]) % 31 == 0:  # a zlib header
            try:
                _inflate(f, out, crlf=False)
            except zlib.error:
                f.seek(m.end())
                _inflate(f, out, crlf=True)  # adb without -T turned every \n of the stream into \r\n
        else:
            _copy_stream(f, out)
    return [(out, label)]


def _inflate(f, out: Path, crlf: bool) -> None:
    d = zlib.decompressobj()
    carry = b""
    with open(out, "wb") as o:
        while chunk := f.read(CHUNK):
            if crlf:
                chunk = carry + chunk
                carry = chunk[-1:] if chunk.endswith(b"\r") else b""
                chunk = (chunk[:-1] if carry else chunk).replace(b"\r\n", b"\n")
            o.write(d.decompress(chunk))
            if d.eof:
                break
        o.write(d.decompress(carry) if carry else b"")
        o.write(d.flush())
    if not d.eof:
        raise zlib.error("the zlib stream ends early (a truncated atrace -z capture)")


_JS_ESCAPE = re.compile(rb"\\(.)")
_JS_CHARS = {b"n": b"\n", b"t": b"\t", b"r": b"\r", b"\\": b"\\", b'"': b'"', b"'": b"'", b"/": b"/"}


def _unescape_js_line(line: bytes) -> bytes:
    """One line of legacy systrace's JavaScript string: `text\\n\\` -> `text` + newline (a line whose escapes
    were already removed comes back as it is)."""
    body = line.rstrip(b"\r\n")
    if body.endswith(b"\\"):
        body = body[:-1]  # the line continuation
    if b"\\" not in body:
        return body + b"\n"
    return _JS_ESCAPE.sub(lambda m: _JS_CHARS.get(m.group(1), m.group(1)), body).rstrip(b"\n") + b"\n"


def _unhtml(path: Path, out: Path, label: str):
    """The trace text of every trace script in a systrace HTML file, one output file per script."""
    produced, block, mode, n = [], None, None, 0

    def start(kind: str):
        nonlocal block, mode, n
        target = out.with_name(f"{out.name}-{n}")
        block, mode = open(target, "wb"), kind
        produced.append((target, f"{label}:{'linuxPerfData' if kind == 'legacy' else f'trace-data[{n}]'}"))
        n += 1

    with open(path, "rb") as f:
        for line in f:
            if block is None:
                m = LEGACY_START.search(line) or TRACE_DATA_START.search(line)
                if m:
                    start("legacy" if m.re is LEGACY_START else "current")
                    line = line[m.end():]
                    if not line.strip(b" \t\r\n\\"):
                        continue
                else:
                    continue
            end = line.find(b"</script>")
            legacy_end = mode == "legacy" and re.search(rb'(?<!\\)";\s*$', line)
            text = line[:end] if end >= 0 else (line[:legacy_end.start()] if legacy_end else line)
            if text.strip():
                text = _unescape_js_line(text) if mode == "legacy" else text
                if not SYSTRACE_DUMMY.match(text):
                    block.write(text)
            if end >= 0 or legacy_end:
                block.close()
                block = None
    if block is not None:
        block.close()
    kept = []
    for target, what in produced:
        kind = _trace_data_kind(target)
        if kind == "base64-gzip":
            decoded = target.with_name(target.name + ".gz")
            with open(target, "rb") as src, open(decoded, "wb") as dst:
                dst.write(base64.b64decode(b"".join(src.read().split())))
            kept.append((decoded, what))
        elif kind in ("text", "process-dump"):  # the dump names every process and thread (process_dump.py)
            kept.append((target, what))
    if not any(_trace_data_kind(target) == "text" or target.name.endswith(".gz") for target, _ in kept):
        raise ValueError("no ftrace text inside (no linuxPerfData string or trace-data script with text)")
    return kept


def _trace_data_kind(path: Path) -> str:
    with open(path, "rb") as f:
        head = f.read(64).lstrip()
    if not head:
        return "empty"
    if head[:1] in (b"{", b"["):
        return "json"
    if head.startswith(b"PROCESS DUMP"):  # systrace's `ps` listing of the device's processes, not a trace
        return "process-dump"
    if head.startswith(b"H4sI"):
        return "base64-gzip"
    return "text"
