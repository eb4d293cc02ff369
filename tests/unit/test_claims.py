"""What the docs, README and docstrings name exists (tests/support/claims.py says what counts as a claim): on this
tree, and, to show the check can fail, on a copy of it with dangling references planted in a doc, a docstring, a
comment and a Makefile comment."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from claims import find_dangling

REPO = Path(__file__).resolve().parents[2]


def test_every_claim_of_the_tree_holds():
    dangling = find_dangling(REPO)
    assert not dangling, "named but missing:\n" + "\n".join(map(str, dangling))


def copy_of_the_tree(dest: Path) -> Path:
    """The files git tracks (and the untracked ones it does not ignore); fixtures' traces as empty files (what a
    claim needs of them is that they exist); the reference binaries as they were built."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True, timeout=60).stdout.split("\n")
    for name in filter(None, listed):
        src = REPO / name
        if not src.is_file():
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        if name.startswith("tests/fixtures/") and not name.endswith(".md"):
            (dest / name).touch()
        else:
            shutil.copyfile(src, dest / name)
    (dest / "reference-impl" / "bin").symlink_to(REPO / "reference-impl" / "bin")  # built, named by docs
    return dest


def plant(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def test_planted_dangling_references_are_each_found(tmp_path):
    tree = copy_of_the_tree(tmp_path / "tree")
    assert find_dangling(tree) == []
    # the planted names, built from one that exists nowhere (so this file names no missing file itself)
    ghost = "nowhere"
    test_file, bench_file, parse_file = f"tests/unit/test_{ghost}.py", f"bench/{ghost}_bench.py", f"parse/{ghost}.py"
    plant(tree / "docs" / "ARCHITECTURE.md", "# mobiperf: architecture",
          f"# mobiperf: architecture\n\nSee {test_file} and `make {ghost}`.")
    plant(tree / "mobiperf" / "core" / "units.py", '"""', f'"""Checked by {bench_file}.\n', )
    plant(tree / "collectors" / "parse" / "__init__.py", "from __future__ import annotations",
          f"from __future__ import annotations\n\n# the format is read by {parse_file} (mobiperf.core.{ghost})")
    plant(tree / "README.md", "# mobiperf", f"# mobiperf\n\n`mobiperf {ghost}` and {ghost.upper()}.md")
    found = {(c.where.split(":")[0], c.kind, c.text) for c in find_dangling(tree)}
    assert found == {
        ("docs/ARCHITECTURE.md", "path", test_file),
        ("docs/ARCHITECTURE.md", "make", f".:{ghost}"),
        ("mobiperf/core/units.py", "path", bench_file),
        ("collectors/parse/__init__.py", "path", parse_file),
        ("collectors/parse/__init__.py", "module", f"mobiperf.core.{ghost}"),
        ("README.md", "subcommand", ghost),
        ("README.md", "document", f"{ghost.upper()}.md"),
    }
