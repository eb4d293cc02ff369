"""mobiperf.progress: silent when stderr is not a terminal, a rich bar when forced; nested stages; the API the
pipeline uses (`with stage(name, total=n) as advance`)."""

import io
import sys

from mobiperf import progress


def test_silent_when_not_a_terminal(monkeypatch, capsys):
    monkeypatch.delenv("MOBIPERF_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not progress.enabled()
    with progress.stage("parse", total=3) as advance:
        for _ in range(3):
            advance()
    assert sys.stderr.getvalue() == ""
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
    assert not progress.enabled()
