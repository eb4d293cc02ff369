"""The parsers' compiled code (numba), made once ahead of a user's first parse.

numba compiles a function the first time it is called with a tuple of argument types, and keeps the machine code
in a cache beside the module (__pycache__/*.nbi and *.nbc, keyed by the source's content, the CPU and the types).
A fresh install would compile on its user's first parse of a big trace: seconds of CPU per function, tens of
seconds in all. compile_parsers() compiles every function of compiled_signatures.py for each argument types
listed there, into that cache, so the first parse only loads it:
  - `make setup` runs it after installing in place (`python -m mobiperf.collectors.parse.compiled_code`);
  - a wheel's build (setup.py) runs it on the built tree, and the wheel carries the cache; it serves where the
    wheel was built for (its CPU, the numba version of the build), anywhere else numba compiles as before.
The list is what the compiled parse paths call: tests/unit/test_compiled_code.py holds it equal to the
signatures seen when every compiled path reads the fixtures (tests/support/compiled_paths.py, which rewrites it).
"""

from __future__ import annotations

import importlib
import sys
import time


def compile_parsers(say=print) -> tuple[int, list[str]]:
    """Compile (or find in the cache) every listed function for every listed signature: (signatures made, the
    ones that failed, each with the reason; a failure costs its user a compile on first use, nothing else)."""
    from numba.core import types

    from mobiperf.collectors.parse.compiled_signatures import SIGNATURES

    names = {k: v for k, v in vars(types).items() if not k.startswith("_")}
    names["bool"] = types.boolean  # numba's boolean prints as `bool`
    done, failed = 0, []
    for qualname, signatures in SIGNATURES.items():
        module, _, attr = qualname.rpartition(".")
        try:
            function = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            failed.append(f"{qualname}: {e}")
            continue
        for text in signatures:
            start = time.process_time()
            try:
                function.compile(eval(text, {"__builtins__": {}}, names))  # the listing's own type expressions
            except Exception as e:  # noqa: BLE001  (numba raises many kinds; each is only a missed warm-up)
                failed.append(f"{qualname}{text}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
                continue
            done += 1
            say(f"  {qualname} ({time.process_time() - start:.1f} s)")
    return done, failed


def main() -> None:
    start = time.perf_counter()
    print("mobiperf: compiling the parsers' numba code once, so that no first parse waits for it")
    done, failed = compile_parsers(say=lambda line: None if "-q" in sys.argv else print(line))
    print(f"mobiperf: {done} compiled functions ready in {time.perf_counter() - start:.0f} s"
          + (f"; {len(failed)} not (compiled on first use instead):\n  " + "\n  ".join(failed) if failed else ""))


if __name__ == "__main__":
    main()
