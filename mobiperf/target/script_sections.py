"""The output of a shell script run on a target in one round trip, split at its `@@NAME` marker lines: what the
probe, the Android facts and the Perfetto probe read (each prints `@@name` before each fact it gathers)."""

from __future__ import annotations


def script_sections(text: str, *, keep_indent: bool = False) -> dict[str, list[str]]:
    """name -> the non-blank lines after its `@@name` marker, stripped (keep_indent: only their line ends, for
    output whose columns are aligned with leading blanks). Lines before the first marker are dropped."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("@@"):
            current = sections[line[2:].strip()] = []
        elif current is not None and line.strip():
            current.append(line.rstrip("\n") if keep_indent else line.strip())
    return sections
