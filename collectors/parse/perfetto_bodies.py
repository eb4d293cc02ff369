"""The kernel's text body of Perfetto ftrace events, from their decoded fields.

The tables of the other ftrace events (fsync_event, jbd2_*, fuse_event, fs_event, syscall_io) are read by
ftrace_events.py from the text the kernel prints; a Perfetto trace holds the events' fields instead. This writes
that text back, so one parser makes the tables of every source:

  1. the event's format file saved with the trace (formats/<system>/<event>/format), else
  2. the built-in format of perfetto_formats.py (the events whose text a table reads), rendered by print_fmt.py
     exactly as the kernel does (field widths and signs from the format; the values from the proto fields of the
     same names), or
  3. for syscalls:sys_enter_* / sys_exit_*: the kernel's one print fmt of every call ("fd: 0x%08lx, ..." over the
     call's arguments in their order / "0x%lx" of ret), or
  4. otherwise `dev M,m` (a dev field, as ext4's events print it) followed by the other fields as name=value, as
     `trace-cmd report -R` does, so fs_event still gets its device and inode.

Where an argument cannot be reproduced (a field the proto does not carry: perfetto's protos were generated from
some kernel's formats and newer kernels add fields; %pS pointers; jiffies without the kernel's HZ) it is printed as
its raw value, as parse/ftrace_raw.py does, and the reason is returned; a format that does not compile at all
falls back to 4.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from mobiperf.collectors.parse.event_format import EventFormat
from mobiperf.collectors.parse.perfetto_formats import builtin_formats
from mobiperf.collectors.parse.print_fmt import IntCol, Unrenderable, compile_print_fmt, render

_COMPILED: dict[tuple[str, tuple[str, ...]], list] = {}


class FieldColumns:
    """The decoded fields of n events of one type: ints (int64 numpy, with their signedness) and strings."""

    def __init__(self, n: int, ints: dict[str, np.ndarray], signed: dict[str, bool], strings: dict[str, pl.Series],
                 order: list[str], spans: dict[str, tuple[np.ndarray, np.ndarray]] | None = None):
        self.n, self.ints, self.signed, self.strings, self.order = n, ints, signed, strings, order
        # string fields left as [start, end) byte spans of the trace buffer (built into strings by the caller)
        self.spans = spans or {}

    def int(self, name: str, default: int = -1) -> np.ndarray:
        return self.ints[name] if name in self.ints else np.full(self.n, default, np.int64)

    def has(self, name: str) -> bool:
        return name in self.ints or name in self.strings or name in self.spans


def render_bodies(name: str, system: str, cols: FieldColumns, formats: dict[str, EventFormat],
                  hz: int | None) -> tuple[pl.Series, str | None]:
    """(body of every event, why it is not the kernel's exact text or None)."""
    fmt = formats.get(name) or builtin_formats().get(name)
    if fmt is None and system in ("syscalls", "") and name.startswith(("sys_enter_", "sys_exit_")):
        fmt = _syscall_format(name, cols)
    if fmt is not None and fmt.print_format is not None:
        try:
            body, reasons = _render(fmt, cols, hz)
            # As the binary decoder does: an argument that cannot be reproduced is printed as its raw value
            # (hex, or `?` where the proto lacks the field); the rest is the kernel's text.
            return body, "; ".join(dict.fromkeys(reasons)) or None
        except Unrenderable as e:
            why = str(e)
    else:
        why = "no format file for it came with the trace"
    return field_pairs(cols), why


def _render(fmt: EventFormat, cols: FieldColumns, hz: int | None) -> tuple[pl.Series, list[str]]:
    key = (fmt.print_format, tuple(fmt.print_args))
    if key not in _COMPILED:
        _COMPILED[key] = compile_print_fmt(fmt.print_format, fmt.print_args)

    def value(field: str):
        if field in cols.strings:
            return cols.strings[field]
        base, _, index = field.partition("[")
        f = fmt.fields.get(base)
        if index:  # an element of an integer array: a repeated proto field, one column per occurrence
            field = f"{base}[{index.rstrip(']')}]"
        if field not in cols.ints:
            raise Unrenderable(f"the trace has no field {field}")
        if f is None:
            return IntCol(cols.ints[field], 64, not cols.signed.get(field, True))
        size = f.size // f.count if f.kind == "array" and f.count else f.size
        return IntCol(cols.ints[field], 8 * size, not f.signed)

    return render(_COMPILED[key], cols.n, value, hz)


def _syscall_format(name: str, cols: FieldColumns) -> EventFormat:
    """The print fmt the kernel's syscall trace macros give every sys_enter_* / sys_exit_* event."""
    fmt = EventFormat(name, "syscalls", 0)
    if name.startswith("sys_exit_"):
        fmt.print_format, fmt.print_args = "0x%lx", ["REC->ret"]
        return fmt
    args = [f for f in cols.order if not f.startswith(("__", "common_"))]
    fmt.print_format = ", ".join(f"{a}: 0x%08lx" for a in args)
    fmt.print_args = [f"((unsigned long)(REC->{a}))" for a in args]
    return fmt


def field_pairs(cols: FieldColumns) -> pl.Series:
    """`dev M,m` then the other fields as name=value (strings as they are, ints in decimal)."""
    parts: list[pl.Expr] = []
    for name in sorted(cols.order, key=lambda n: n != "dev"):  # the device first, as the kernel's fs events
        if name == "dev" and name in cols.ints:
            dev = cols.ints[name]
            parts.append(pl.lit(pl.Series([f"dev {int(d) >> 20},{int(d) & 0xFFFFF}" for d in dev], dtype=pl.Utf8)))
        elif name in cols.ints:
            v = cols.ints[name]
            text = pl.Series(v.view(np.uint64) if not cols.signed.get(name, True) else v).cast(pl.Utf8)
            parts.append(pl.lit(f"{name}=") + pl.lit(text))
        elif name in cols.strings:
            parts.append(pl.lit(f"{name}=") + pl.lit(cols.strings[name]))
    if not parts or not cols.n:
        return pl.Series("body", [""] * cols.n, dtype=pl.Utf8)
    return pl.select(pl.concat_str(parts, separator=" ").alias("body")).to_series()
