"""System calls written by hand in syscall_io's shape, for the replay builder's tests: each says what a recorded
workload did, so a test knows the true answer (calls, handles, files, waits) it expects back."""

from __future__ import annotations

import polars as pl

from mobiperf.core.schema import SYSCALL_IO


def call(t_us: float, pid: int, syscall: str, *, fd: int = -1, path: str = "", size: int = -1, off: int = -1,
         ret: int = 0, flags: str = "", new_path: str = "", dur_us: float = 1.0) -> dict:
    """One recorded call, starting t_us into the trace and lasting dur_us (kernel times, as with syscalls+strace)."""
    return {"rep": 0, "ts": int(t_us * 1000), "dur": int(dur_us * 1000), "pid": pid, "comm": "app",
            "syscall": syscall, "fd": fd, "path": path, "request_bytes": size, "offset_bytes": off, "ret": ret,
            "errno": "" if ret >= 0 else "ENOENT", "source": "strace", "open_flags": flags, "new_path": new_path,
            "clock_error_ns": 0}


def syscall_io(rows: list[dict]) -> pl.DataFrame:
    return SYSCALL_IO.validate(pl.DataFrame(rows, infer_schema_length=None))


def workload(rows: list[dict]) -> pl.DataFrame:
    """The calls as workload_syscalls returns them (timing strace: each call once)."""
    return syscall_io(rows).with_columns(timing=pl.lit("strace"))


def fdatasyncs(n: int, path: str, *, pid: int = 100, size: int = 4096, gap_us: float = 50.0) -> list[dict]:
    """The known answer: open(O_CREAT), n x (pwrite of size at k*size + fdatasync), close."""
    rows = [call(0, pid, "openat", fd=-100, path=path, ret=3, flags="O_RDWR|O_CREAT|O_CLOEXEC")]
    t = 10.0
    for k in range(n):
        rows.append(call(t, pid, "pwrite64", fd=3, path=path, size=size, off=k * size, ret=size))
        rows.append(call(t + 5, pid, "fdatasync", fd=3, path=path, dur_us=20))
        t += gap_us
    rows.append(call(t, pid, "close", fd=3, path=path))
    return rows
