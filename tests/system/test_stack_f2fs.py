"""`--stack f2fs` where the kernel has no f2fs (this host's 6.18: CONFIG_F2FS_FS is not set): refused in one line
that says why, before a run directory exists, and nothing is left on the machine. Where the kernel has f2fs the
stack is built like ext4's (mkfs.f2fs on a loop device): tests/vphone/test_vphone_f2fs.py shows it inside the
virtual phone, and runs f2fs on the phone's /data."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import needs_root
from mobiperf.stack.kernel_fs import kernel_has
from mobiperf.target.target import Target
from mobiperf.target.transport import LocalTransport

pytestmark = needs_root


def test_f2fs_stack_refused_in_one_line_where_the_kernel_has_none(tmp_path, clean_machine):
    target = Target(LocalTransport())
    if kernel_has(target, "f2fs"):
        pytest.skip("this kernel has f2fs: the stack is built, not refused")
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "mobiperf", "run", "--stack", "f2fs+bfuse", "-o", str(out), "--",
                           "true"], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("mobiperf: error: stack 'f2fs+bfuse': this kernel (")
    assert "has no f2fs: it is not in /proc/filesystems and no module of it loads (CONFIG_F2FS_FS is not set)" \
        in lines[0]
    assert not out.exists()
