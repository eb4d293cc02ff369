"""`pip install .` (not only -e) must give a working package: collectors, analyzers and reports live inside mobiperf."""

import os
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_wheel_maps_top_level_dirs_into_the_package(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(tmp_path), str(REPO)], check=True, timeout=300, cwd=tmp_path)
    wheel = next(tmp_path.glob("mobiperf-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in ("mobiperf/cli.py", "mobiperf/collectors/ftrace.py", "mobiperf/collectors/parse/ftrace_text.py",
                   "mobiperf/analyzers/locality.py", "mobiperf/reports/figures.py", "mobiperf/target/transport.py",
                   "mobiperf/commands/__init__.py"):
        assert module in names, f"{module} missing from the wheel"
    # The PyPI names collectors, analyzers and reports must never be installed as top-level packages.
    assert not any(n.split("/")[0] in ("collectors", "analyzers", "reports") for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "mobiperf = mobiperf.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_cli_help_lists_the_commands():
    done = subprocess.run([sys.executable, "-m", "mobiperf", "--help"], capture_output=True, text=True, timeout=60)
    for command in ("targets", "probe", "run", "analyze", "report", "show"):
        assert command in done.stdout
    run_help = subprocess.run([sys.executable, "-m", "mobiperf", "run", "--help"], capture_output=True, text=True,
                              timeout=60).stdout
    assert "Examples:" in run_help and "--stack" in run_help


def test_targets_lists_local(tmp_path):
    # A private adb server: listing adb devices starts one, and the host's default server must stay untouched.
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(_free_port()), HOME=str(tmp_path))
    try:
        done = subprocess.run([sys.executable, "-m", "mobiperf", "targets", "--format", "json"], capture_output=True,
                              text=True, timeout=120, env=env)
    finally:
        subprocess.run(["adb", "kill-server"], env=env, capture_output=True, timeout=30)
    assert '"target": "local"' in done.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
