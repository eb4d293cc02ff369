"""The galaxy-s3-2012 phone model around any FUSE daemon, for bench/bfuse_bench.py's phone part.

mobiperf's emulated stack applies the model to its own daemons (mobiperf.stack.phone: device, dirty limit, CPU share,
FUSE wake-up). The bench also measures libfuse's passthrough_ll, which no mobiperf stack starts, so the four
pieces are put together here from the same mechanisms, alike for every daemon:

  device       the loop device's image is served by the device model (reference-impl/bin/devmodel, profile
               emmc-2012: 40 MB/s sequential writes), mobiperf.stack.device_model.ThrottledStore
  dirty        a 64 MiB dirty page limit on that loop device (mobiperf.stack.dirty_limit.DirtyLimit)
  cpu          one 25 % CPU share (mobiperf.stack.cpu_share.CpuShare) that the writer and the daemon join
  fuse_wakeup  fuse_wakeup.so preloaded into the daemon, FUSE_WAKEUP_NS=430000: each request arrives 430 us late

`with phone_model(workdir, size_mib) as model:` gives the ext4 mountpoint on the modelled device (model.fs), the
daemon's extra environment (model.daemon_env), model.join(pid) for a daemon, and model.write(path, total) for the
writer (dd in the share: MB/s of a 512 KiB-record write + fsync).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mobiperf.stack.cpu_share import CpuShare  # noqa: E402
from mobiperf.stack.device_model import ThrottledStore  # noqa: E402
from mobiperf.stack.dirty_limit import DirtyLimit  # noqa: E402
from mobiperf.stack.phone import resolve_phone  # noqa: E402
from mobiperf.target.transport import LocalTransport  # noqa: E402
from mobiperf.core.units import parse_duration_ns, parse_size  # noqa: E402

BIN = REPO / "reference-impl" / "bin"
MIB = 1 << 20


@dataclass
class PhoneModel:
    name: str
    fs: Path
    daemon_env: dict[str, str]
    share: CpuShare

    def join(self, pid: int) -> None:
        self.share.add(pid)

    def write(self, path: Path, total: int, record: int = 512 << 10) -> float:
        """MB/s (MiB/s) of dd writing `total` bytes to path in `record` writes and fsync, inside the CPU share."""
        joins = " ".join(self.share.procs_files())
        script = f'for f in {joins}; do echo $$ > "$f"; done; exec dd if=/dev/zero of="$0" bs={record} ' \
                 f'count={total // record} conv=fsync status=none'
        start = time.perf_counter()
        subprocess.run(["sh", "-c", script, str(path)], check=True, timeout=3600)
        elapsed = time.perf_counter() - start
        path.unlink()
        return total / MIB / elapsed


@contextmanager
def phone_model(workdir: Path, size_mib: int, name: str = "galaxy-s3-2012"):
    profile = resolve_phone(name)
    for needed in ("devmodel", "fuse_wakeup.so"):
        if not (BIN / needed).exists():
            raise RuntimeError(f"{BIN / needed} is not built: make -C reference-impl")
    store = ThrottledStore(workdir / "phone-backing.img", size_mib * MIB, profile.device, workdir / "devmodel",
                           BIN / "devmodel")
    image = store.__enter__()
    device = None
    fs = workdir / "phone-ext4"
    fs.mkdir(exist_ok=True)
    limit = share = None
    try:
        device = subprocess.run(["losetup", "--find", "--show", "--direct-io=on", str(image)], check=True,
                                capture_output=True, text=True, timeout=60).stdout.strip()
        subprocess.run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", device],
                       check=True, capture_output=True, timeout=600)
        subprocess.run(["mount", "-t", "ext4", "-o", "noatime", device, str(fs)], check=True, timeout=60)
        st = os.stat(device)
        limit = DirtyLimit(LocalTransport(), f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}",
                           parse_size(profile.dirty)).__enter__()
        share = CpuShare(profile.cpu, "bfuse-bench").__enter__()
        env = {"LD_PRELOAD": str(BIN / "fuse_wakeup.so"),
               "FUSE_WAKEUP_NS": str(parse_duration_ns(profile.fuse_wakeup))}
        yield PhoneModel(name, fs, env, share)
    finally:
        if subprocess.run(["umount", str(fs)], capture_output=True, timeout=120).returncode != 0:
            subprocess.run(["umount", "-l", str(fs)], capture_output=True, timeout=60)
        if limit is not None:
            limit.__exit__(None, None, None)
        if device:
            subprocess.run(["losetup", "-d", device], capture_output=True, timeout=60)
        if share is not None:
            share.__exit__(None, None, None)
        store.__exit__(None, None, None)
