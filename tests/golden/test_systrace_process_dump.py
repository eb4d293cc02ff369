"""A systrace HTML whose first trace-data block is a process dump (`PROCESS DUMP`, the `ps` listing systrace writes
on Android 9-10) reads its ftrace block: the dump is skipped, not taken for the trace and refused.

Two captures from elsewhere (tests/fixtures/README.md): AOSP's own example of the layout (committed), and a public
capture from a phone with block events (not redistributable, so not committed: the test reads it where a copy was
placed, tests/fixtures/unlicensed/, and says where to get it otherwise). The block figures are checked against a
count made without mobiperf: a regular expression over the HTML's lines."""

from __future__ import annotations

import hashlib
import re
import zipfile
from pathlib import Path

import pytest

from mobiperf.commands.ingest import ingest
from mobiperf.core.errors import UsageError

FIX = Path(__file__).parents[1] / "fixtures"
PHONE_CAPTURE = FIX / "unlicensed" / "Gracker-SystraceForBlog-wangzherongyao.html.zip"
PHONE_CAPTURE_SHA256 = "3bd3f43eed21a0a55a1d5ef9b6cca98ac1609c8ea082a175d50edc7f29c54471"
BLOCK_LINE = re.compile(r": (block_rq_issue|block_rq_complete): (\d+),(\d+) ([A-Z]+) (?:\d+ )?\(\) (\d+) \+ (\d+) ")


def test_aosp_layout_process_dump_first_reads_the_ftrace_block(tmp_path):
    """AOSP's trace2db test file: PROCESS DUMP, then two mm_filemap lines, then systrace's JSON. Before the fix the
    dump was taken for the trace ("not a trace mobiperf reads (first line 'PROCESS DUMP')"); now the ftrace block
    is read, and since it holds no IO event the refusal names what it does hold."""
    with pytest.raises(UsageError) as refused:
        ingest([FIX / "systrace" / "aosp-trace2db_test-process-dump.html"], tmp_path / "run")
    assert "mm_filemap_add_to_page_cache (2)" in str(refused.value)
    assert "PROCESS DUMP" not in str(refused.value)
    assert not (tmp_path / "run").exists()


def independent_block_count(html: str) -> dict:
    """Issues, completions and requests (dev, sector, sectors) of the ftrace lines, counted without mobiperf."""
    issues: dict[tuple, int] = {}
    completed: set[tuple] = set()
    for line in html.splitlines():
        m = BLOCK_LINE.search(line)
        if not m:
            continue
        key = (int(m[2]), int(m[3]), int(m[5]), int(m[6]))
        if m[1] == "block_rq_issue":
            issues[key] = issues.get(key, 0) + 1
        else:
            completed.add(key)
    return {"issues": sum(issues.values()), "completions": len(completed),
            "bytes": sum(k[3] * 512 for k in completed),
            "dispatches": {k[2]: issues.get(k, 0) for k in completed}}


@pytest.mark.skipif(not PHONE_CAPTURE.exists(), reason=f"the public capture is not on this machine: put "
                    f"Android_Systrace-MainThread-RenderThread/wangzherongyao.html.zip of github.com/Gracker/"
                    f"SystraceForBlog (commit 6c17c38) at {PHONE_CAPTURE} (tests/fixtures/README.md)")
def test_phone_capture_with_process_dump_block_requests_match_an_independent_count(tmp_path):
    """A 2019 systrace of a phone (UFS 8,0; the disk category): PROCESS DUMP first. 13 block_rq_issue lines, 7
    completions: 7 read requests of 564 KiB, 3 of them dispatched 3 times (blk-mq re-dispatches)."""
    data = PHONE_CAPTURE.read_bytes()
    assert hashlib.sha256(data).hexdigest() == PHONE_CAPTURE_SHA256
    with zipfile.ZipFile(PHONE_CAPTURE) as z:
        html = z.read("wangzherongyao.html").decode()
    assert html.index("PROCESS DUMP") < html.index("block_rq_complete: 8,0")
    expected = independent_block_count(html)
    assert (expected["issues"], expected["completions"], expected["bytes"]) == (13, 7, 577536)

    run = ingest([PHONE_CAPTURE], tmp_path / "run")
    rq = run.read_table("block_rq")
    assert len(rq) == expected["completions"]
    assert int(rq["size_bytes"].sum()) == expected["bytes"]
    assert dict(zip(rq["sector"].to_list(), rq["dispatches"].to_list())) == expected["dispatches"]
    assert set(rq["op"]) == {"read"}
    metrics = {m["name"]: m["value"] for m in run.read_meta()["metrics"] if m.get("labels") == {"op": "read"}}
    assert metrics["block.requests"] == 7 and metrics["block.bytes"] == 577536
