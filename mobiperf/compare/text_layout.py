"""How a comparison's text is laid out for people: at most WIDTH columns, lines wrapped between words, tables
aligned with their first column shortened (middle elided) to fit."""

from __future__ import annotations

import textwrap

WIDTH = 120


def table(rows: list[tuple[str, ...]], indent: str, left: tuple[int, ...] = (0,)) -> list[str]:
    """Rows of cells as aligned lines; the first column is shortened (middle elided) so a line fits WIDTH."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    rest = len(indent) + sum(widths[1:]) + 2 * (len(widths) - 1)
    room = max(24, WIDTH - rest)
    if widths[0] > room:
        rows = [(elide(r[0], room), *r[1:]) for r in rows]
        widths[0] = room
    return [(indent + "  ".join(cell.ljust(widths[i]) if i in left else cell.rjust(widths[i])
                                for i, cell in enumerate(r))).rstrip() for r in rows]


def wrap(text: str, indent: str = "   ") -> list[str]:
    return textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False)


def elide(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    keep = width - 1
    return text[:keep // 2] + "…" + text[len(text) - (keep - keep // 2):]
