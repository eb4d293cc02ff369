"""Result tables as plain text for a terminal: aligned columns, units from the column names (`size_bytes` as
KiB/MiB, `*_ns` as us/ms, `*_share` as %), at most 120 columns wide (the widest text columns are shortened in the
middle, `…`), and a bounded number of rows with a line saying how to get every row (`--format csv`)."""

from __future__ import annotations

from typing import Any

import polars as pl

WIDTH = 120
MAX_ROWS = 40


def plain_cell(column: str, value: Any) -> tuple[str, bool]:
    """(text, is_number) for a cell, formatted by the unit in the column name."""
    from mobiperf.reports.html import format_cell

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return format_cell(column, value)
    if value is None:
        return "", False
    if isinstance(value, bool):
        return ("yes" if value else "no"), False
    return str(value), False


def _elide(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    keep = width - 1
    return text[:(keep + 1) // 2] + "…" + text[len(text) - keep // 2:] if keep > 1 else text[:width]


def format_table(df: pl.DataFrame, *, width: int = WIDTH, max_rows: int = MAX_ROWS, more_hint: str = "") -> str:
    """`df` as aligned text lines no wider than `width`; the first `max_rows` rows, then how many were left."""
    if df.width == 0:
        return "(no columns)\n"
    cells = [[plain_cell(c, v) for c, v in zip(df.columns, row)] for row in df.head(max_rows).iter_rows()]
    numeric = [any(cell[i][1] for cell in cells) for i in range(df.width)]
    texts = [[cell[0] for cell in row] for row in cells]
    widths = [max([len(c)] + [len(r[i]) for r in texts]) for i, c in enumerate(df.columns)]
    # Shorten the widest column until a line fits: a number column down to its widest value (its header is
    # shortened instead), a text column down to 6.
    floor = [max([6] + [len(r[i]) for r in texts]) if numeric[i] else min(6, widths[i]) for i in range(df.width)]
    while sum(widths) + 2 * (len(widths) - 1) > width:
        candidates = [i for i in range(len(widths)) if widths[i] > floor[i]]
        if not candidates:
            break
        i = max(candidates, key=lambda i: widths[i])
        widths[i] -= 1
    head = [_elide(c, w) for c, w in zip(df.columns, widths)]
    lines = ["  ".join(h.rjust(w) if numeric[i] else h.ljust(w) for i, (h, w) in enumerate(zip(head, widths))),
             "  ".join("-" * w for w in widths)]
    for row in texts:
        lines.append("  ".join(_elide(t, w).rjust(w) if numeric[i] else _elide(t, w).ljust(w)
                               for i, (t, w) in enumerate(zip(row, widths))))
    if df.height > max_rows:
        lines.append(f"… {df.height - max_rows:,} more rows{more_hint}")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def group_notes(notes: dict[str, str]) -> list[str]:
    """`{name: why}` as one line per distinct reason, naming everything it applies to."""
    by_reason: dict[str, list[str]] = {}
    for name, why in notes.items():
        by_reason.setdefault(why, []).append(name)
    return [f"{', '.join(names)} not computed: {why}" for why, names in by_reason.items()]
