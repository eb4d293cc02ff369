"""reference-impl's C files form layers: no two files of a program call each other, directly or round a longer
loop, and no header includes itself back.

"Calls" is what the linker sees: file A uses file B when A's object file leaves undefined a global symbol
(function or variable) that B's defines (nm). Every product .c of a program is compiled on its own (test_*.c apart:
tests use everything); a cycle is reported with the symbols on each of its edges. The layers this keeps, today:
fusecore's fc_policy.c (the running config and policy) and mobibench's mb_run.c (the state workers share with
main) at the bottom, the entry points (fc_main.c, mb_main.c) at the top."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REFERENCE_IMPL

# program -> the directories whose product .c files link into it
PROGRAMS = {
    "bfuse": ["fusecore", "bfuse"],
    "fjord": ["fusecore", "fjord"],
    "mobibench": ["mobibench"],
    "devmodel": ["devmodel"],
}

needs_cc = pytest.mark.skipif(not shutil.which("cc") or not shutil.which("nm"), reason="needs cc and nm")


def _flags() -> list[str]:
    fuse = subprocess.run(["pkg-config", "--cflags", "fuse3"], capture_output=True, text=True, timeout=30).stdout
    return ["-std=gnu11", "-O0", "-pthread", "-D_FILE_OFFSET_BITS=64", f"-I{REFERENCE_IMPL / 'fusecore'}",
            *fuse.split()]


def _sources(program: str) -> list[Path]:
    return sorted(path for d in PROGRAMS[program] for path in (REFERENCE_IMPL / d).glob("*.c")
                  if not path.name.startswith("test_"))


def _symbols(obj: Path) -> tuple[set[str], set[str]]:
    """(defined globals, undefined) of an object file."""
    out = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True, timeout=30).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBRCGV":
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
    return defined, undefined


def file_graph(program: str, build: Path) -> dict[str, dict[str, set[str]]]:
    """file -> {file it uses: the symbols}, from each product .c compiled alone."""
    tables = {}
    for src in _sources(program):
        obj = build / f"{src.parent.name}-{src.stem}.o"
        subprocess.run(["cc", *_flags(), "-c", "-o", str(obj), str(src)], check=True, capture_output=True,
                       timeout=120)
        tables[src.name] = _symbols(obj)
    return {a: {b: used & tables[b][0] for b in tables if b != a and used & tables[b][0]}
            for a, (_, used) in tables.items()}


def find_cycle(graph: dict[str, dict]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None (depth-first search, three colours)."""
    colour, stack = {}, []

    def visit(node):
        colour[node] = "grey"
        stack.append(node)
        for nxt in sorted(graph.get(node, {})):
            if colour.get(nxt) == "grey":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in colour and (found := visit(nxt)):
                return found
        stack.pop()
        colour[node] = "black"
        return None

    for node in sorted(graph):
        if node not in colour and (found := visit(node)):
            return found
    return None


def test_find_cycle_names_the_loop():
    assert find_cycle({"a": {"b": {"f"}}, "b": {"c": {"g"}}, "c": {"a": {"h"}}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": {"f"}}, "b": {}, "c": {"a": {"g"}}}) is None


@needs_cc
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_no_file_of_a_program_calls_back_into_its_callers(program, tmp_path):
    graph = file_graph(program, tmp_path)
    assert sum(len(uses) for uses in graph.values()) >= len(graph) - 1, f"{program}: files seem unlinked: {graph}"
    cycle = find_cycle(graph)
    detail = cycle and " -> ".join(f"{a} ({', '.join(sorted(graph[a][b])[:4])})" for a, b in zip(cycle, cycle[1:]))
    assert cycle is None, f"{program}: a cycle: {detail} -> {cycle[0]}"


@needs_cc
def test_the_bottom_layers_use_no_file_above_them(tmp_path):
    bfuse = file_graph("bfuse", tmp_path)
    assert set(bfuse["fc_policy.c"]) == set()
    assert {"fc_policy.c", "fc_ops.c", "fc_loop.c"} <= set(bfuse["fc_main.c"])
    assert set(bfuse["bf_flush.c"]) <= {"fc_counters.c", "fc_loop.c", "fc_ops.c", "fc_policy.c"}
    mobibench = file_graph("mobibench", tmp_path)
    assert set(mobibench["mb_run.c"]) == set()
    assert {"mb_run.c", "mb_file.c", "mb_db.c", "mb_replay.c"} <= set(mobibench["mb_main.c"])


def test_no_header_includes_itself_back():
    includes = {}
    for header in REFERENCE_IMPL.glob("*/*.h"):
        names = re.findall(r'^#include "([^"]+)"', header.read_text(), flags=re.M)
        includes[header.name] = {os.path.basename(name): set() for name in names}
    assert includes["bf_internal.h"] == {"bf_buf.h": set()}
    assert find_cycle(includes) is None
