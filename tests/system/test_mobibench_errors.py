"""Bad input and run-time failures: a clear message on stderr, Mobibench's error lines on stdout, exit 1, no crash.

The original Mobibench exits 0 after a run-time error; this generator exits 1 (a documented, deliberate fix).
The full filesystem is a 1 MiB tmpfs mounted under tmp_path by the test itself and unmounted in a finalizer.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import needs_root


def run(binary: Path, tmp_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "MOBIBENCH_TRACE_MARKER": ""}
    proc = subprocess.run([str(binary), "--no-drop-caches", "-q", *args], capture_output=True, timeout=timeout,
                          env=env)
    assert proc.returncode not in (-11, -6, 139, 134), "crashed"
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())


@pytest.mark.parametrize("args, message", [
    (["-x"], "invalid option -- 'x'"),
    (["--frobnicate"], "unrecognized option '--frobnicate'"),
    (["-p", "/tmp", "-f"], "option requires an argument -- 'f'"),
    (["-f", "0"], "-f 0: must be between 1 and"),
    (["-f", "-512"], "-f -512: must be between 1 and"),
    (["-r", "0"], "-r 0: must be between 1 and"),
    (["-r", "-4"], "-r -4: must be between 1 and"),
    (["-f", "1M"], "-f: '1M' is not a whole number"),
    (["-f", "64", "-r", "128"], "record size 128 KB is larger than the file size per thread 64 KB"),
    (["-f", "64", "-r", "32", "-t", "4"], "record size 32 KB is larger than the file size per thread 16 KB"),
    (["-a", "7"], "-a 7: must be between 0 and 4"),
    (["-y", "9"], "-y 9: must be between 0 and 8"),
    (["-d", "3"], "invaild db operation mode"),
    (["-d", "0", "-n", "0"], "-n 0: must be between 1 and"),
    (["-d", "0", "-n", "3", "-t", "4"], "-n 3 gives no transaction per thread with -t 4"),
    (["-v", "100"], "-v 100: must be between 0 and 99"),
    (["-d", "0", "-D", "20"], "-D 20: SQLite 3."),
    (["--compat=1.0.1", "-a", "4"], "-a 4 (append) is not in Mobibench 1.0.1"),
    (["--compat=1.0.1", "-y", "8"], "-y 8 (fdatasync) is not in Mobibench 1.0.1"),
    (["--compat=0.9"], "--compat=0.9: known semantics are 1.0.1 and 1.0.8"),
    (["-f", "64", "stray"], "unexpected argument 'stray'"),
])
def test_bad_options_exit_1_with_a_message(reference_binary, tmp_path, args, message):
    proc = run(reference_binary("mobibench"), tmp_path, *args)
    assert proc.returncode == 1
    assert message in proc.stderr
    assert proc.stdout == ""  # nothing ran


def test_unwritable_path(reference_binary, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    proc = run(reference_binary("mobibench"), tmp_path, "-p", str(blocker / "sub"), "-f", "64")
    assert proc.returncode == 1
    assert f"cannot create {blocker}/sub/test.dat0: Not a directory" in proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-3:] == [f"{blocker}/sub/test.dat0 Open failed 20", "setState: 4", "Err string : Open failed"]
    assert "[Messurement Result]" not in proc.stdout

    proc = run(reference_binary("mobibench"), tmp_path, "-p", str(blocker / "sub"), "-d", "0")
    assert proc.returncode == 1 and "cannot open" in proc.stderr and "Err string : DB open failed" in proc.stdout


def test_long_paths_are_not_truncated(reference_binary, tmp_path):
    deep = tmp_path / ("d" * 200) / ("e" * 200)
    deep.parent.mkdir()
    proc = run(reference_binary("mobibench"), tmp_path, "-p", str(deep), "-f", "64", "-d", "0", "-n", "2",
               "-D", "11", "-T", "20")
    assert proc.returncode == 0, proc.stderr
    assert (deep / "test.db0_10").exists()
    assert f"[DB information of db {deep}/test.db0_10]" in proc.stdout


@pytest.fixture
def full_fs(tmp_path):
    """A 1 MiB tmpfs of our own under tmp_path, unmounted afterwards."""
    mountpoint = tmp_path / "full"
    mountpoint.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "mobibench-test-tmpfs",
                              str(mountpoint)], capture_output=True, text=True, timeout=30)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", str(mountpoint)], capture_output=True, timeout=30)


@needs_root
def test_full_filesystem_during_precreation(reference_binary, tmp_path, full_fs):
    proc = run(reference_binary("mobibench"), tmp_path, "-p", str(full_fs), "-f", "4096", "-r", "512", "-a", "0")
    assert proc.returncode == 1
    assert "No space left on device" in proc.stderr
    assert "File write error!!! [no: 28, pos: 1024]" in proc.stdout
    assert proc.stdout.rstrip().endswith("Err string : File write error")


@needs_root
def test_full_filesystem_in_the_timed_loop(reference_binary, tmp_path, full_fs):
    # append mode has no pre-creation, so the timed writes are the ones that fail
    proc = run(reference_binary("mobibench"), tmp_path, "-p", str(full_fs), "-f", "4096", "-r", "64", "-a", "4",
               "--json", str(tmp_path / "r.json"))
    assert proc.returncode == 1
    assert "write error at 1024 KB: No space left on device" in proc.stderr
    assert "setState: 2" in proc.stdout and "setState: 4" in proc.stdout
    assert proc.stdout.rstrip().endswith("Err string : File write error")
    assert '"error": "File write error"' in (tmp_path / "r.json").read_text()


@needs_root
def test_full_filesystem_under_sqlite(reference_binary, tmp_path, full_fs):
    proc = run(reference_binary("mobibench"), tmp_path, "-p", str(full_fs), "-d", "0", "-n", "4000", "-T", "5")
    assert proc.returncode == 1
    assert "database or disk is full" in proc.stderr
    assert proc.stdout.rstrip().endswith("Err string : SQL error")


@needs_root
def test_full_filesystem_under_mmap_is_an_error_not_a_sigbus(reference_binary, tmp_path, full_fs):
    # the mapping's holes cannot be allocated: the store faults with SIGBUS, which the original dies of
    proc = run(reference_binary("mobibench"), tmp_path, "-p", str(full_fs), "-f", "4096", "-r", "4", "-a", "4",
               "-y", "6")
    assert proc.returncode == 1
    assert "SIGBUS on record" in proc.stderr and "filesystem full?" in proc.stderr
    assert proc.stdout.rstrip().endswith("Err string : File write error")
