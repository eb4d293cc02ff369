"""mobiperf.core.progress: plain lines when stderr is not a terminal, a rich bar when forced, silent when switched off;
nested stages; the API the pipeline uses (`with stage(name, total=n) as advance`)."""

import io
import sys

from mobiperf.core import progress


def test_lines_when_not_a_terminal(monkeypatch, capsys):
    monkeypatch.delenv("MOBIPERF_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not progress.enabled() and progress.mode() == "lines"
    with progress.stage("collect", total=3) as advance:
        for rep in range(3):
            advance(0, description=f"rep {rep}")
            with progress.stage("inner", total=None) as inner:  # nested: silent in lines
                inner()
            advance()
    lines = sys.stderr.getvalue().splitlines()
    assert lines[0] == "mobiperf: collect ..."
    assert [line.split(" (")[0] for line in lines[1:4]] == [f"mobiperf: collect: rep {i}" for i in range(3)]
    assert lines[2].startswith("mobiperf: collect: rep 1 (1/3, ")
    assert lines[4].startswith("mobiperf: collect done (3/3, ") and len(lines) == 5
    assert progress._depth == 0
    assert list(progress.track([1, 2, 3], "x")) == [1, 2, 3]


def test_forced_bar_reports_name_and_count(monkeypatch):
    monkeypatch.setenv("MOBIPERF_PROGRESS", "1")
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with progress.stage("parse", total=4) as advance:
        with progress.stage("rep 0", total=None) as inner:
            inner()
        advance(2)
        advance(2, description="rep 1")
    out = err.getvalue()
    assert "parse: rep 1" in out and "4/4" in out and "rep 0" in out
    assert progress._active is None and progress._depth == 0


def test_env_can_switch_it_off(monkeypatch):
    monkeypatch.setenv("MOBIPERF_PROGRESS", "0")
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not progress.enabled() and progress.mode() == "off"
    with progress.stage("parse", total=3) as advance:
        advance(description="x")
    assert sys.stderr.getvalue() == ""
