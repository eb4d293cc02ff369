"""`pip install` of the wheel (not -e) into a fresh virtual environment outside the checkout gives a working
mobiperf: every module imports from the install, the wheel carries the C binaries it built (setup.py, through
reference-impl's Makefile) to where the installed package looks for them (mobiperf/core/binaries.py), and
`mobiperf run --stack ext4` (and, with -m slow, `mobiperf study journal-modes --quick`) work from a directory that
is not the checkout, with nothing built or copied by hand.

The fresh environment gets its third-party packages from the test's own environment through a path file: this
machine reaches nothing but the package registries, and installing polars, numba and duckdb again would take
minutes per run. A path file only appends those directories to sys.path, it does not process their own .pth
files, so the checkout's editable install stays invisible: mobiperf comes from the wheel or not at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import needs_root

REPO = Path(__file__).resolve().parents[2]

pytestmark = needs_root


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory) -> Path:
    """A venv with mobiperf's wheel built without the parsers' compiled code (MOBIPERF_SKIP_COMPILE: compiling it
    takes minutes of CPU, and only the slow test of the compiled code looks at it)."""
    return _venv_of_wheel(tmp_path_factory.mktemp("install"), {"MOBIPERF_SKIP_COMPILE": "1"})


def _venv_of_wheel(root: Path, env: dict) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(root / "dist"), str(REPO)],
                   check=True, timeout=1800, cwd=root, capture_output=True, env={**os.environ, **env})
    [wheel] = (root / "dist").glob("mobiperf-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True,
                   timeout=300, capture_output=True)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "_test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv


@pytest.mark.slow
def test_an_installed_wheel_parses_without_compiling(tmp_path):
    """pip's build compiles the parsers' numba code into the wheel (setup.py): the installed mobiperf's first
    parse through every compiled path (tests/support/compiled_paths.py) loads it and compiles nothing."""
    venv = _venv_of_wheel(tmp_path / "build", {})
    support = REPO / "tests" / "support"
    code = ("import sys, tempfile\nfrom pathlib import Path\nimport mobiperf\n"
            "from compiled_paths import parse_through_compiled_paths\n"
            "parse_through_compiled_paths(Path(tempfile.mkdtemp()))\n"
            "from numba.core.registry import CPUDispatcher\n"
            "print(mobiperf.__file__, sorted(f'{n}.{a}' for n, m in list(sys.modules.items()) if n.startswith('mobiperf.')"
            " for a, d in vars(m).items() if isinstance(d, CPUDispatcher) and d.stats.cache_misses))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MOBIPERF_BIN", "NUMBA_CACHE_DIR")}
    done = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=support, capture_output=True, text=True,
                          timeout=600, env={**env, "PYTHONPATH": str(support)})
    assert done.returncode == 0, done.stderr[-3000:]
    package, compiled = done.stdout.split(" ", 1)
    assert Path(package).is_relative_to(venv)
    assert compiled.strip() == "[]", f"compiled at the first parse: {compiled}"


def run_installed(venv: Path, cwd: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MOBIPERF_BIN")}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_every_module_imports_from_the_install_and_finds_the_installed_binaries(fresh_venv, tmp_path):
    code = ("import importlib, pkgutil, mobiperf\n"
            "from mobiperf.core.binaries import reference_bin_dir\n"
            "names = [m.name for m in pkgutil.walk_packages(mobiperf.__path__, 'mobiperf.')\n"
            "         if not m.name.endswith('__main__')]  # importing it runs the CLI\n"
            "for name in names: importlib.import_module(name)\n"
            "print(len(names), mobiperf.__file__, reference_bin_dir())\n")
    done = run_installed(fresh_venv, tmp_path, "python", "-c", code)
    assert done.returncode == 0, done.stderr
    count, package_file, bin_dir = done.stdout.split()
    sources = [p for top in ("mobiperf", "collectors", "analyzers", "reports") for p in (REPO / top).rglob("*.py")
               if p.name != "__main__.py" and p != REPO / "mobiperf" / "__init__.py"]   # walk_packages: below it
    assert int(count) == len(sources)    # the whole package, collectors, analyzers and reports included
    assert Path(package_file).is_relative_to(fresh_venv)    # not the checkout
    assert Path(bin_dir) == fresh_venv / "share" / "mobiperf" / "bin"
    assert {"mobibench", "bfuse", "fjord", "devmodel", "fuse_wakeup.so"} <= {p.name for p in Path(bin_dir).iterdir()}
    built = REPO / "reference-impl" / "bin" / "mobibench"
    assert (Path(bin_dir) / "mobibench").read_bytes() == built.read_bytes()   # the wheel's copy of the build


def test_an_installed_mobiperf_runs_the_generator_on_an_ext4_stack(fresh_venv, tmp_path, clean_machine):
    # 256 fdatasync'ed 4 KiB writes: at least 256 data writes of 4 KiB reach the block layer
    done = run_installed(fresh_venv, tmp_path, "mobiperf", "run", "--stack", "ext4", "-n", "1", "--no-report",
                         "--image-size", "128M", "-o", "run", "--", "mobibench", "-p", ".", "-f", "1024", "-r", "4",
                         "-a", "0", "-y", "8")
    assert done.returncode == 0, done.stderr
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["status"] == "complete"
    # per op (the per-region metrics of the same name carry a region label too)
    writes = {m["labels"]["op"]: m["value"] for m in meta["metrics"]
              if m["name"] == "block.requests" and set(m["labels"]) == {"op"}}
    assert writes["write"] >= 256 and writes["flush"] >= 256, writes


@pytest.mark.slow
def test_an_installed_mobiperf_runs_a_study(fresh_venv, tmp_path, clean_machine):
    done = run_installed(fresh_venv, tmp_path, "mobiperf", "study", "journal-modes", "--quick", "-o", "jm",
                         timeout=1800)
    assert done.returncode == 0, done.stderr
    assert "WAL has the fewest fsync() per insert" in done.stdout


@pytest.mark.slow
def test_a_host_without_the_build_dependencies_is_told_which_package(tmp_path):
    """pip builds the wheel through reference-impl's Makefile: where libfuse3-dev and libsqlite3-dev are missing
    (pkg-config finds no .pc file), pip's error ends with the lines naming the Debian packages."""
    env = {**os.environ, "PKG_CONFIG_LIBDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"),
                           str(REPO)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode != 0 and not list((tmp_path / "dist").glob("*.whl"))
    said = done.stdout + done.stderr
    assert "building mobiperf's reference binaries failed:" in said
    assert "install the libfuse3 headers (Debian: apt-get install libfuse3-dev)" in said
    assert "install the SQLite headers (Debian: apt-get install libsqlite3-dev)" in said
