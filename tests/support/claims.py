"""What the project's prose names, checked against the tree: every file or folder a doc, docstring or comment
names exists, every dotted module name it gives imports (`mobiperf.core.units`; with a last part that is not a
module, the module has that name: `mobiperf.core.units.parse_size`), every `make TARGET` is a target of its
Makefile (the nearest one above the file, or -C's), every `mobiperf SUBCOMMAND` is a subcommand, every document
named by its bare name (DESIGN.md) is at the top of the tree, in docs/, or beside the file naming it.

Read: README.md, every other *.md of the tree (docs/, reference-impl/*/README.md, tests/fixtures/README.md), the
docstrings (and other triple-quoted texts: help, epilogs) and comments of the Python sources (one-line string
literals of code are runtime values, not claims),
and the comments of the C sources and Makefiles. A path counts when it starts at a top folder of the repository
(tests/, bench/, docs/, mobiperf/, collectors/, analyzers/, reports/, reference-impl/) or, inside a package, at
one of its subfolders (`parse/ftrace_raw.py` in collectors/, `stack/directory.py` in mobiperf/); placeholders
(`<area>`, `{unit,golden}`, `*`, `N`) are patterns, not names, and are passed over, and so is a path written
after another repository's name (an `owner/name, path` of a trace taken from elsewhere). Commands (`make`,
`mobiperf`) count in code only (between backticks, in fenced blocks, on a Makefile's `#   make ...` lines): in prose they are words.

find_dangling(repo) is the whole check; tests/unit/test_claims.py runs it on this tree and on a tree with a
reference planted in it."""

from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

TOP_FOLDERS = ("tests", "bench", "docs", "mobiperf", "collectors", "analyzers", "reports", "reference-impl")
# folders whose subfolders a path may start at, and where such a path lands
PACKAGE_ROOTS = ("mobiperf", "collectors", "analyzers", "reports", "reference-impl")
PATH = re.compile(r"(?<![\w./<{$-])((?:[A-Za-z_][\w-]*/)+[\w.*<>-]*[\w/*>])")
# `owner/name, path` is a path in another repository (tests/fixtures/README.md's sources)
OTHER_REPOSITORY = re.compile(r"[\w.-]+/[\w.-]+,\s*$")
MODULE = re.compile(r"(?<![\w./])(mobiperf(?:\.[A-Za-z_]\w*)+)")
# one space before the target: `make          native build` in an aligned comment is `make` and its description
MAKE = re.compile(r"\bmake (?:-s )?(?:-C (\S+) )?([a-z][\w-]*)(?![\w=-])")
DOC = re.compile(r"(?<![\w./-])([A-Z][\w-]*\.md)\b")   # DESIGN.md, README.md: a document of the project
SUBCOMMAND = re.compile(r"(?:^|[`$(]|\s)mobiperf\s+([a-z][a-z-]+)\b")
PLACEHOLDER = re.compile(r"[<>{}*]|(?:^|/)[A-Z]+(?:/|$)|-N\b|\bN\.|\.\.\.")  # <area>, *, DIR/, ftrace-N.txt
SKIP_DIRS = {".git", ".venv", "build", "node_modules", "__pycache__", ".stamps", ".pytest_cache", ".hypothesis"}
PROSE_SUFFIXES = (".md",)
C_SUFFIXES = (".c", ".h")


@dataclass(frozen=True)
class Claim:
    where: str      # file:line
    kind: str       # path, module, make, subcommand
    text: str

    def __str__(self) -> str:
        return f"{self.where}: {self.kind} {self.text!r}"


def find_dangling(repo: Path) -> list[Claim]:
    """Every claim in the tree's prose that names something the tree does not have."""
    tree = _Tree(repo.resolve())
    return [claim for source in _sources(tree.repo) for claim in _claims(tree, source) if not tree.holds(source, claim)]


class _Tree:
    """What claims are checked against: the files, the Makefiles' targets, the CLI's subcommands."""

    def __init__(self, repo: Path):
        self.repo = repo
        self.targets = _make_targets(repo)
        self.subcommands = _subcommands()
        self.subfolders = {top: {p.name for p in (repo / top).iterdir() if p.is_dir()}
                           for top in PACKAGE_ROOTS if (repo / top).is_dir()}

    def nearest_makefile_dir(self, rel: Path) -> str:
        """`make X` without -C in a file: the Makefile of its folder or the nearest one above (reference-impl/bfuse/
        README.md means reference-impl/bfuse/Makefile), as the tree's folder name ('.' for the top)."""
        folder = rel.parent
        while folder != Path(".") and not (self.repo / folder / "Makefile").exists():
            folder = folder.parent
        return str(folder)

    def inside_package(self, rel: Path, token: str) -> bool:
        """A path that starts at a subfolder of the package the source sits in (parse/x.py in collectors/)."""
        return token.split("/", 1)[0] in self.subfolders.get(rel.parts[0], ())

    def holds(self, source: Path, claim: Claim) -> bool:
        if claim.kind == "path":
            return self._path_holds(source, claim.text)
        if claim.kind == "module":
            return _module_holds(claim.text)
        if claim.kind == "document":  # at the top, in docs/, or beside the file that names it
            return any((base / claim.text).exists() for base in (self.repo, self.repo / "docs", source.parent))
        if claim.kind == "make":
            folder, target = claim.text.split(":", 1)
            return folder not in self.targets or target in self.targets[folder]
        return claim.text in self.subcommands

    def _path_holds(self, source: Path, token: str) -> bool:
        if PLACEHOLDER.search(token):
            return True
        rel = source.relative_to(self.repo)
        bases = [self.repo, self.repo / rel.parts[0], source.parent]
        if rel.parts[0] == "reference-impl" and len(rel.parts) > 1:
            bases.append(self.repo / "reference-impl" / rel.parts[1])
        return any((base / token).exists() for base in bases)


def _sources(repo: Path) -> list[Path]:
    out = []
    for folder, dirs, files in os.walk(repo):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        rel = Path(folder).relative_to(repo)
        for name in sorted(files):
            path = Path(folder) / name
            if rel.parts[:2] == ("tests", "fixtures") and path.suffix != ".md":
                continue  # traces and expected tables, not prose
            if path.suffix in (".py", *PROSE_SUFFIXES, *C_SUFFIXES) or name == "Makefile":
                out.append(path)
    return out


def _prose(path: Path) -> list[tuple[int, str, bool]]:
    """(line number, text, whether the whole line is code) of what a file says in words: all of a Markdown file
    (fenced blocks are code), a Python file's docstrings and comments, a C file's comments, a Makefile's comments
    (`#   make demo ...` lines are code)."""
    text = path.read_text(errors="replace")
    if path.suffix in PROSE_SUFFIXES:
        out, fenced = [], False
        for n, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            out.append((n, line, fenced))
        return out
    if path.suffix == ".py":
        return [(n, line, False) for n, line in _python_prose(text)]
    if path.suffix in C_SUFFIXES:
        return [(text.count("\n", 0, m.start()) + 1 + i, line, False)
                for m in re.finditer(r"/\*.*?\*/|//[^\n]*", text, re.S)
                for i, line in enumerate(m.group().splitlines())]
    return [(n, line, bool(re.match(r"#\s+make\s", line))) for n, line in enumerate(text.splitlines(), 1)
            if line.lstrip().startswith("#")]


TRIPLE_QUOTED = re.compile(r'(?:"""|\'\'\')(.*?)(?:"""|\'\'\')', re.S)


def _python_prose(text: str) -> list[tuple[int, str]]:
    """Triple-quoted strings (docstrings, and the help texts and epilogs that show commands) and comments: a `#`
    at a line's start or after a space, with the quotes before it balanced (not inside a one-line string).
    Regular expressions rather than tokenize or ast: a tenth of the time on the tree, and no more false claims."""
    out: list[tuple[int, str]] = []
    for m in TRIPLE_QUOTED.finditer(text):
        first = text.count("\n", 0, m.start()) + 1
        out += [(first + i, line) for i, line in enumerate(m.group(1).splitlines())]
    for number, line in enumerate(text.splitlines(), 1):
        for m in re.finditer(r"(?:^|\s)#", line):
            before = line[:m.start()]
            if before.count('"') % 2 == 0 and before.count("'") % 2 == 0:
                out.append((number, line[m.end() - 1:]))
                break
    return out


def _code_parts(line: str, whole_line_is_code: bool) -> list[str]:
    """The parts of a line that are commands rather than words: the line itself in a code block, else what
    stands between backticks."""
    return [line] if whole_line_is_code else re.findall(r"`([^`]+)`", line)


def _claims(tree: _Tree, source: Path) -> list[Claim]:
    rel = source.relative_to(tree.repo)
    out = []
    for number, line, code in _prose(source):
        where = f"{rel}:{number}"
        for m in PATH.finditer(line):
            token = m.group(1).rstrip(".")
            if OTHER_REPOSITORY.search(line[:m.start()]):
                continue
            if token.split("/", 1)[0] in TOP_FOLDERS or tree.inside_package(rel, token):
                out.append(Claim(where, "path", token))
        for m in MODULE.finditer(line):
            out.append(Claim(where, "module", m.group(1).rstrip(".")))
        for m in DOC.finditer(line):
            if not OTHER_REPOSITORY.search(line[:m.start()]):
                out.append(Claim(where, "document", m.group(1)))
        for part in _code_parts(line, code):  # commands are named in code, not in prose ("make no difference")
            for m in MAKE.finditer(part):
                out.append(Claim(where, "make", f"{m.group(1) or tree.nearest_makefile_dir(rel)}:{m.group(2)}"))
            for m in SUBCOMMAND.finditer(part):
                out.append(Claim(where, "subcommand", m.group(1)))
    return out


def _module_holds(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        obj = module
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _make_targets(repo: Path) -> dict[str, set[str]]:
    """Makefile folder ('.' for the top) -> its targets (rules and .PHONY names)."""
    out = {}
    for makefile in [repo / "Makefile", *sorted(repo.glob("reference-impl/**/Makefile"))]:
        if not makefile.exists():
            continue
        folder = "." if makefile.parent == repo else str(makefile.parent.relative_to(repo))
        text = makefile.read_text()
        names = set(re.findall(r"^([\w.-]+)\s*:(?!=)", text, re.M))
        for phony in re.findall(r"^\.PHONY\s*:(.*)$", text, re.M):
            names.update(phony.split())
        out[folder] = names
    return out


def _subcommands() -> set[str]:
    from mobiperf.cli import cli
    from mobiperf.commands import register_all

    if "ingest" not in cli.commands:
        register_all(cli)
    return set(cli.commands)
