"""Containers opened by content (collectors/parse/compressed.py), kinds told by content (detect.py) and blkparse -f
formats (blkparse_text.py): the cases the fixtures of test_ingest_foreign.py do not show."""

from __future__ import annotations

import base64
import gzip
import zlib
from pathlib import Path

import pytest

from mobiperf.collectors.parse.blkparse_text import format_pattern, parse_blkparse_text
from mobiperf.collectors.parse.compressed import container_kind, unpack
from mobiperf.collectors.parse.detect import describe_head, sniff_plain
from mobiperf.core.errors import UsageError

FIX = Path(__file__).parents[1] / "fixtures"
LINE = "  dd-4162  [001] ...1  100.000100: tracing_mark_write: say \"hi\" \\ there\n"
BLOCK = "  dd-4162  [001] d..2  100.000200: block_rq_issue: 8,0 W 4096 () 2048 + 8 [dd]\n"


def plain_text(tmp_path: Path, data: bytes) -> str:
    src = tmp_path / "in"
    src.write_bytes(data)
    got = unpack(src, tmp_path / "out")
    assert len(got) == 1
    return got[0].path.read_text()


def test_atrace_z_with_crlf_from_an_old_adb(tmp_path):
    """adb without -T turns every \\n of the binary stream into \\r\\n: the stream is repaired, not refused."""
    text = "".join(BLOCK.replace("2048", str(2048 + 8 * (i * 7919 % 4093))) for i in range(2000))
    z = zlib.compress(text.encode())
    assert b"\n" in z  # else the test shows nothing
    assert plain_text(tmp_path, b"capturing trace... done\r\nTRACE:\r\n" + z.replace(b"\n", b"\r\n")) == text


def test_atrace_without_z_and_truncated_z(tmp_path):
    assert plain_text(tmp_path, b"TRACE:\n" + BLOCK.encode()) == BLOCK
    cut = b"TRACE:\n" + zlib.compress((BLOCK * 500).encode())[:-40]
    with pytest.raises(UsageError, match="damaged atrace container.*ends early"):
        plain_text(tmp_path, cut)


def test_legacy_html_escapes(tmp_path):
    js = LINE.rstrip("\n").replace("\\", "\\\\").replace('"', '\\"') + "\\n\\"
    html = f'<html><body>\n  <script>\n  var linuxPerfData = "\\\n{js}\n{BLOCK.rstrip()}\\n";\n  </script>\n</html>\n'
    assert plain_text(tmp_path, html.encode()) == LINE + BLOCK


def test_legacy_html_drops_systraces_own_clock_sync_line(tmp_path):
    """catapult's HTML suffix ends the trace with a line of time 0 that no kernel wrote."""
    html = (f'<html>\n  <script>\n  var linuxPerfData = "\\\n{BLOCK.rstrip()}\\n\\\n'
            '           dummy-0000  [000] 0.0: 0: trace_event_clock_sync: parent_ts=0.0\\n";\n  </script>\n')
    assert plain_text(tmp_path, html.encode()) == BLOCK


def test_current_html_skips_json_and_reads_base64_gzip(tmp_path):
    packed = base64.b64encode(gzip.compress(BLOCK.encode())).decode()
    html = (f'<!DOCTYPE html>\n<html>\n  <script class="trace-data" type="application/text">\n'
            f'{{"traceEvents": []}}  </script>\n  <script class="trace-data" type="application/text">\n'
            f'{packed[:40]}\n{packed[40:]}\n  </script>\n</html>\n')
    assert plain_text(tmp_path, html.encode()) == BLOCK


def test_html_without_a_trace_is_refused(tmp_path):
    with pytest.raises(UsageError, match="no ftrace text inside"):
        plain_text(tmp_path, b"<!DOCTYPE html>\n<html><body>hello</body></html>\n")


@pytest.mark.parametrize("head, kind", [
    (b"\x1f\x8b\x08", "gzip"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"PK\x03\x04", "zip"), (b"\xfd7zXZ\x00", "xz"),
    (b"BZh9", "bzip2"), (b"TRACE:\nx\x9c", "atrace"), (b"<!DOCTYPE html>", "html"), (BLOCK.encode(), "")])
def test_container_kinds(head, kind):
    assert container_kind(head) == kind


@pytest.mark.parametrize("path, kind", [
    ("ftrace/k4.14-android-ufs.txt", "ftrace"), ("ftrace/tracecmd-6.18-report.txt", "ftrace"),
    ("strace/dd-fsync-threads.strace", "strace"), ("strace/dd-dsync-cat.plain.strace", "strace"),
    ("strace/dd-dsync.tt.strace", "strace"), ("blktrace/takeoverjp-sample.blktrace.0", "blktrace"),
    ("trace-cmd/dd-block.v7zstd.dat", "trace-cmd"), ("fixtures_readme", "unknown")])
def test_kinds_by_content(path, kind):
    file = FIX / "README.md" if path == "fixtures_readme" else FIX / path
    assert sniff_plain(file.read_bytes()[:4096]) == kind


def test_blkparse_text_is_told_by_content(tmp_path):
    text = gzip.decompress((FIX / "blkparse" / "takeoverjp-sample.blkparse.txt.gz").read_bytes())
    assert sniff_plain(text[:4096]) == "blkparse"


def test_descriptions_are_printable():
    gzip_head = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" * 20
    assert describe_head(gzip_head) == "binary data (1f 8b 08 00 00 00 00 00 ...)"
    assert describe_head(b"\n\n  hello world  \nmore") == "first line 'hello world'"


def test_blkparse_custom_formats(tmp_path):
    pattern = format_pattern("%D %2c %8s %5T.%9t %5p %2a %3d ")
    assert "(?P<major>" in pattern and "(?P<act>" in pattern
    with pytest.raises(UsageError, match="lacks %T"):
        format_pattern("%a %S %n\\n")
    with pytest.raises(UsageError, match="unknown specifier %q"):
        format_pattern("%T.%t %a %q")
    f = tmp_path / "custom.txt"
    f.write_text("8,0 0.000001000 Q W 2048 8 4162\n8,0 0.000002000 D W 2048 8 4162\n8,0 0.000005000 C W 2048 8 0\n")
    got = parse_blkparse_text(f, fmt="%D %T.%t %a %d %S %n %p\\n")
    assert got.block_event.select("ts", "event", "dev_major", "sector", "size_bytes", "pid").rows() == [
        (1000, "block_bio_queue", 8, 2048, 4096, 4162), (2000, "block_rq_issue", 8, 2048, 4096, 4162),
        (5000, "block_rq_complete", 8, 2048, 4096, 0)]
