"""FileBatch: many reads and writes in one round trip, with each shell a target may have (dash here, mksh on a
phone, whose builtins it uses), exact contents, and a write that fails stopping the batch with the error
write_file would give."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from mobiperf.core.errors import TargetError
from mobiperf.target.file_batch import FileBatch
from mobiperf.target.transport import Completed, LocalTransport

MKSH = shutil.which("mksh") or "/usr/lib/x86_64-linux-musl/bin/mksh"


class ShellTransport(LocalTransport):
    """This host, with `sh -c` run by another shell (Android's mksh), counting the round trips."""

    def __init__(self, shell: str):
        super().__init__()
        self.shell, self.trips = shell, 0

    def run(self, argv, *, timeout=60, input=None, cwd=None, env=None) -> Completed:
        self.trips += 1
        assert argv[:2] == ["sh", "-c"]
        done = subprocess.run([self.shell, "-c", argv[2]], capture_output=True, timeout=timeout)
        return Completed(tuple(argv), done.returncode, done.stdout, done.stderr)


@pytest.fixture(params=["dash", "mksh"])
def shell(request):
    path = shutil.which("dash") if request.param == "dash" else MKSH
    if not path or not shutil.which(path):
        pytest.skip(f"{request.param} is not installed")
    return ShellTransport(path)


def test_reads_writes_and_tests_come_back_exactly_in_one_round_trip(shell, tmp_path):
    texts = {"plain": b"name: block_rq_issue\nID: 1\n", "no-newline": b"[mono] global", "empty": b"",
             "header-like": b"\n@@mobiperf-000000000000 0 ok\nstill the file\n", "blank-lines": b"a\n\n\nb\n\n"}
    for name, data in texts.items():
        (tmp_path / name).write_bytes(data)
    batch = FileBatch()
    reads = {name: batch.read(str(tmp_path / name)) for name in texts}
    wrote = batch.write(str(tmp_path / "knob"), "dev == 266338304 || dev == 8388608")
    appended = [batch.write(str(tmp_path / "pids"), p, append=True) for p in ("644\n", "646\n")]
    after = batch.read(str(tmp_path / "knob"))
    missing = batch.read(str(tmp_path / "nowhere"))
    there, absent = batch.exists(str(tmp_path / "plain")), batch.exists(str(tmp_path / "nowhere"))
    listed = batch.output(f"ls {tmp_path}")
    done = batch.run(shell)
    assert shell.trips == 1 and len(done) == len(batch) == 13
    assert {name: done[i] for name, i in reads.items()} == texts
    assert done[wrote] is True and all(done[i] is True for i in appended)
    assert done[after] == b"dev == 266338304 || dev == 8388608" and (tmp_path / "pids").read_text() == "644\n646\n"
    assert done[missing] is None and (done[there], done[absent]) == (True, False)
    assert done[listed].decode().split() == sorted(list(texts) + ["knob", "pids"])


def test_a_failed_write_stops_the_batch_and_names_the_file_and_value(shell, tmp_path):
    batch = FileBatch()
    batch.write(str(tmp_path / "first"), "1")
    batch.write(str(tmp_path / "no-such-dir" / "enable"), "1")
    batch.write(str(tmp_path / "never"), "1")
    with pytest.raises(TargetError, match=r"writing b'1' to .*no-such-dir/enable: .*(No such file|cannot create|can.t create)"):
        batch.run(shell)
    assert (tmp_path / "first").exists() and not (tmp_path / "never").exists()


def test_a_write_is_short_text():
    with pytest.raises(ValueError, match="short text"):
        FileBatch().write("/x", "x" * 1001)
    with pytest.raises(ValueError, match="short text"):
        FileBatch().write("/x", "a\0b")
    assert FileBatch().run(LocalTransport()) == {}    # nothing to do: no round trip
