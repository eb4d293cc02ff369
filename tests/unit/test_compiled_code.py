"""The parsers' numba code compiled ahead of a user's first parse (collectors/parse/compiled_code.py).

The list it compiles (compiled_signatures.py) is held equal to what the compiled parse paths call on the fixtures
(tests/support/compiled_paths.py): a compiled function or argument type added without it would compile on a user's
first parse again. With -m slow, from an empty cache: compile_parsers() alone makes every compiled path run without
compiling anything, and the first parse in a process pays at most 0.5 s of CPU more than the second."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUPPORT = REPO / "tests" / "support"

OBSERVE = """
import json, sys, tempfile, time
from pathlib import Path
from compiled_paths import observed_signatures, parse_through_compiled_paths
start = time.process_time()
parse_through_compiled_paths(Path(tempfile.mkdtemp(dir=sys.argv[1])))
cpu = time.process_time() - start
from numba.core.registry import CPUDispatcher
misses = sorted(f"{name}.{attr}{sig}" for name, m in list(sys.modules.items()) if name.startswith("mobiperf.")
                for attr, d in vars(m).items() if isinstance(d, CPUDispatcher) and d.py_func.__module__ == name
                for sig in d.stats.cache_misses)
print(json.dumps({"signatures": observed_signatures(), "misses": misses, "cpu_s": cpu}))
"""


def _observe(tmp_path: Path, env: dict | None = None) -> dict:
    done = subprocess.run([sys.executable, "-c", OBSERVE, str(tmp_path)], capture_output=True, text=True,
                          timeout=1200, cwd=SUPPORT, env={**os.environ, "PYTHONPATH": str(SUPPORT), **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_list_is_what_the_compiled_paths_call(tmp_path):
    from mobiperf.collectors.parse.compiled_signatures import SIGNATURES

    seen = _observe(tmp_path)["signatures"]
    assert len(seen) >= 20  # every compiled parser ran: text, blktrace, pages, Perfetto, pairing
    missing = {k: sorted(set(v) - set(SIGNATURES.get(k, []))) for k, v in seen.items()}
    stale = {k: sorted(set(v) - set(seen.get(k, []))) for k, v in SIGNATURES.items()}
    fix = "run `python tests/support/compiled_paths.py --write` and commit collectors/parse/compiled_signatures.py"
    assert not any(missing.values()), f"called but not compiled ahead ({fix}): {missing}"
    assert not any(stale.values()), f"listed but no longer called ({fix}): {stale}"


@pytest.mark.slow
def test_compile_parsers_leaves_nothing_to_compile_at_the_first_parse(tmp_path):
    """An empty numba cache (NUMBA_CACHE_DIR of the test's own), filled by compile_parsers() alone, as `make
    setup` and a wheel's build do: then every compiled path loads its code, compiling nothing."""
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
    done = subprocess.run([sys.executable, "-m", "mobiperf.collectors.parse.compiled_code", "-q"],
                          capture_output=True, text=True, timeout=1800, env={**os.environ, **env})
    assert done.returncode == 0 and " not (compiled" not in done.stdout, done.stdout + done.stderr[-2000:]
    assert len(list((tmp_path / "numba-cache").rglob("*.nbc"))) >= 25
    first, second = _observe(tmp_path, env), _observe(tmp_path, env)
    assert first["misses"] == [], f"compiled at the first parse despite the warm-up: {first['misses']}"
    assert first["cpu_s"] - second["cpu_s"] <= 0.5, (first["cpu_s"], second["cpu_s"])
