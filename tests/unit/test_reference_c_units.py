"""The C unit tests of reference-impl, as `make -C reference-impl/<component> test` runs them: bFUSE's write buffer
(its rules, and a randomised run against a model of the files, under AddressSanitizer) and option parsers, Fjord's
log, RAM buffer and presets, mobibench's generator and record order, devmodel's timing model. None needs root or a
mount.

Each component's summary lines are required, with at least as many checks as the suites make today, so a test
binary that was dropped from its Makefile, or ran nothing, fails here as well as one that failed."""

from __future__ import annotations

import re
import subprocess

import pytest

from conftest import REFERENCE_IMPL

# component -> (summary line, least count of checks it reports); a count of None: the line has no count
SUMMARIES = {
    "bfuse": [(r"test_parse: all passed", None),
              (r"test_bf_buf: (\d+) checks passed", 1000),
              (r"test_bf_model: (\d+) checks passed", 20000)],
    "fjord": [(r"test_fj_log: (\d+) checks passed", 1000),
              (r"test_fj_buf: (\d+) checks passed", 1000),
              (r"test_fj_policy: (\d+) checks passed", 10)],
    "mobibench": [(r"(\d+) passed, 0 failed", 10)],
    "devmodel": [(r"test_model: all tests passed", None)],
}


@pytest.mark.parametrize("component", sorted(SUMMARIES))
def test_the_c_unit_tests_pass(component):
    proc = subprocess.run(["make", "-s", "-C", str(REFERENCE_IMPL / component), "test"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"make test in {component} failed:\n{proc.stdout}\n{proc.stderr}"
    for pattern, least in SUMMARIES[component]:
        match = re.search(pattern, proc.stdout)
        assert match, f"{component}: no line '{pattern}' in:\n{proc.stdout}"
        if least is not None:
            assert int(match.group(1)) >= least, match.group(0)


def test_a_failed_check_stops_the_suite_with_its_place_and_values(tmp_path):
    """The bFUSE suites' harness stops at the first failed check, naming file, line, expression and both values,
    with exit status 1: here the check that its temporary directory was made, under a TMPDIR that does not exist."""
    build = subprocess.run(["make", "-s", "-C", str(REFERENCE_IMPL / "bfuse"), "build/test_bf_buf"],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    proc = subprocess.run([str(REFERENCE_IMPL / "bfuse" / "build" / "test_bf_buf")], capture_output=True, text=True,
                          timeout=60, env={"TMPDIR": str(tmp_path / "missing")})
    assert proc.returncode == 1
    assert re.search(r"test_bf\.c:\d+: mkdtemp\(t_dir\) != NULL: got 0, want 1", proc.stderr), proc.stderr
    assert "checks passed" not in proc.stdout
