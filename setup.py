"""The package list, found rather than listed, and the C reference binaries built into the wheel.

Packages: mobiperf/ and its subpackages, and collectors/, analyzers/ and reports/ with theirs, installed inside
mobiperf (setup.cfg's package_dir maps those folders). setup.cfg's `find:` cannot rename a folder's packages, hence
this file; everything else is in setup.cfg.

Binaries: `pip install .` (or `pip wheel .`) builds the reference implementations for this host through their
Makefile (`make -C reference-impl`, and the static build for this host's phone ABI, `ARCH=x86_64` on an x86_64
host), then installs reference-impl/bin as <data>/share/mobiperf/bin, where an installed mobiperf looks first
(mobiperf/core/binaries.py). A host without what the build needs stops the install with one line per missing
piece naming its Debian package (reference-impl/check-build-deps.sh). The wheel is tagged for this platform: it
holds machine code. MOBIPERF_SKIP_REFERENCE_BUILD=1 builds a wheel without them (the binaries are then looked
for in $MOBIPERF_BIN).

Compiled parsers: the build also compiles the parsers' numba code into the built tree's caches
(collectors/parse/compiled_code.py; numba, polars and pyarrow are build requirements for this, pyproject.toml), so
that an installed mobiperf's first parse compiles nothing; MOBIPERF_SKIP_COMPILE=1 leaves them out.
"""

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Distribution, find_packages, setup
from setuptools.command.build import build

MAPPED = ("collectors", "analyzers", "reports")   # PyPI names: never installed at the top level
HERE = Path(__file__).resolve().parent
REFERENCE = HERE / "reference-impl"
PHONE_ABI = {"x86_64": "x86_64", "aarch64": "aarch64", "armv7l": "arm"}   # uname -m -> the Makefile's ARCH

packages = find_packages(include=["mobiperf", "mobiperf.*"])
for folder in MAPPED:
    packages += [f"mobiperf.{name}" for name in find_packages(include=[folder, f"{folder}.*"])]


class BinaryDistribution(Distribution):
    """A distribution with machine code: its wheel is tagged for this platform, not `any`."""

    def has_ext_modules(self):
        return not os.environ.get("MOBIPERF_SKIP_REFERENCE_BUILD")


class BuildWithReference(build):
    """build, then the reference binaries, handed to install_data as <data>/share/mobiperf/bin."""

    def run(self):
        # pip builds in the tree: a module renamed or removed since the last build would stay in build/lib and
        # end up in the wheel beside its new name
        shutil.rmtree(self.build_lib, ignore_errors=True)
        super().run()
        self._compile_parsers()
        if os.environ.get("MOBIPERF_SKIP_REFERENCE_BUILD") or not REFERENCE.is_dir():
            return
        self._make()
        bin_dir = REFERENCE / "bin"
        by_folder: dict[str, list[str]] = {}
        for path in sorted(p for p in bin_dir.rglob("*") if p.is_file()):
            folder = Path("share/mobiperf/bin") / path.parent.relative_to(bin_dir)
            by_folder.setdefault(str(folder), []).append(str(path.relative_to(HERE)))
        self.distribution.data_files = sorted(by_folder.items())

    def _compile_parsers(self):
        """The parsers' numba code compiled into the built tree's caches (collectors/parse/compiled_code.py), which
        the wheel carries: its user's first parse loads it instead of compiling. Skipped (the first parse compiles,
        as before) where the build environment lacks numba or MOBIPERF_SKIP_COMPILE is set."""
        if os.environ.get("MOBIPERF_SKIP_COMPILE"):
            return
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}  # the caches beside the modules
        env.update(PYTHONPATH=os.path.abspath(self.build_lib), PYTHONDONTWRITEBYTECODE="1")
        done = subprocess.run([sys.executable, "-m", "mobiperf.collectors.parse.compiled_code", "-q"], env=env,
                              cwd=self.build_lib, capture_output=True, text=True)
        said = (done.stdout + done.stderr).strip().splitlines()
        print(said[-1] if done.returncode == 0 and said else
              "mobiperf: the parsers' numba code was not compiled into the wheel (their first use compiles it): "
              + (said[-1] if said else f"exit {done.returncode}"))

    def _make(self):
        arch = PHONE_ABI.get(platform.machine())
        steps = [["check-deps-static" if arch else "check-deps"], [], *([[f"ARCH={arch}"]] if arch else [])]
        for extra in steps:
            done = subprocess.run(["make", "-s", "-C", str(REFERENCE), *extra], capture_output=True, text=True)
            if done.returncode != 0:
                said = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
                named = [line for line in said if line.startswith("reference-impl:")]
                raise SystemExit("building mobiperf's reference binaries failed:\n  "
                                 + "\n  ".join(named or said[-15:]))


setup(packages=packages, distclass=BinaryDistribution, cmdclass={"build": BuildWithReference})
