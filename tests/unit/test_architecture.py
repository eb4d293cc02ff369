"""The house's shape, measured on the package as it installs (setup.py's build_py into a scratch directory, so
collectors/ is mobiperf.collectors as a user gets it): no import cycle between modules, no module over 600 lines,
no function over 80 lines but the numba kernels (each with a comment above it saying why it is one function);
what is over the limits today is listed, and the lists may only shrink.
The floors themselves are import-linter's contracts in setup.cfg (`make layers`, part of `make test`)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
NUMBA_DECORATORS = {"njit", "jit"}
# What is over the limits today, each a split still to make. The lists may only shrink: a module or function that
# grows past a limit fails, and so does one listed here that no longer needs to be (remove it from the list).
KNOWN_LONG_MODULES: set[str] = set()
KNOWN_LONG_FUNCTIONS: set[str] = set()


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    tree = tmp_path_factory.mktemp("installed")
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tree)], cwd=REPO, check=True,
                   capture_output=True, timeout=120)
    return tree


def _modules(tree: Path) -> dict[str, Path]:
    out = {}
    for path in sorted((tree / "mobiperf").rglob("*.py")):
        parts = path.relative_to(tree).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def test_every_source_module_is_installed(installed):
    """setup.py finds the packages: every module of mobiperf/, collectors/, analyzers/ and reports/ is in the tree
    an install gets, under mobiperf."""
    sources = {p.relative_to(REPO) for top in ("mobiperf", "collectors", "analyzers", "reports")
               for p in (REPO / top).rglob("*.py")}
    installed_files = {p.relative_to(installed / "mobiperf") for p in (installed / "mobiperf").rglob("*.py")}
    expected = {p.relative_to("mobiperf") if p.parts[0] == "mobiperf" else p for p in sources}
    assert expected == installed_files


def test_no_import_cycle(installed):
    grimp = pytest.importorskip("grimp")
    sys.path.insert(0, str(installed))
    try:
        graph = grimp.build_graph("mobiperf", cache_dir=None)
    finally:
        sys.path.remove(str(installed))
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    cycles = _strongly_connected(edges)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(sorted(c)) for c in cycles)


def _strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components of more than one module (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(component)
    return out


def test_the_cycle_finder_finds_cycles():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _strongly_connected(edges) == [{"a", "b", "c"}]
    assert _strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_module_over_600_lines(installed):
    long = {name: n for name, path in _modules(installed).items()
            if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert set(long) <= KNOWN_LONG_MODULES, f"modules over {MAX_MODULE_LINES} lines: {long}"
    assert KNOWN_LONG_MODULES <= set(long), f"no longer over the limit: {KNOWN_LONG_MODULES - set(long)}"


def test_no_function_over_80_lines_but_commented_numba_kernels(installed):
    long, uncommented = {}, []
    for name, path in _modules(installed).items():
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            size = node.end_lineno - node.lineno + 1
            if size <= MAX_FUNCTION_LINES:
                continue
            where = f"{name}.{node.name}"
            if not _is_numba(node):
                long[where] = size
            elif not _commented_above(node, lines):
                uncommented.append(where)
    assert set(long) <= KNOWN_LONG_FUNCTIONS, f"functions over {MAX_FUNCTION_LINES} lines: " \
        f"{ {k: v for k, v in long.items() if k not in KNOWN_LONG_FUNCTIONS} }"
    assert KNOWN_LONG_FUNCTIONS <= set(long), f"no longer over the limit: {KNOWN_LONG_FUNCTIONS - set(long)}"
    assert not uncommented, f"numba kernels over {MAX_FUNCTION_LINES} lines without a comment saying why: {uncommented}"


def _is_numba(node: ast.FunctionDef) -> bool:
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in NUMBA_DECORATORS:
            return True
    return False


def _commented_above(node: ast.FunctionDef, lines: list[str]) -> bool:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return first >= 2 and lines[first - 2].lstrip().startswith("#")


def test_test_modules_have_unique_basenames():
    # The test directories are not packages, so pytest imports each test module by its basename: two files of one
    # name in different directories stop the whole collection ("import file mismatch"), as CI once did.
    by_name: dict[str, list[str]] = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        by_name.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    assert {name: paths for name, paths in by_name.items() if len(paths) > 1} == {}
