"""An event's `print fmt` (format string + C argument expressions) rendered over whole columns of records.

This reproduces the text the kernel writes to `trace` for an event (its TP_printk body) from the binary fields,
vectorised: every argument expression is evaluated once over numpy columns (one row per record), and the text
is written by one compiled pass (text_writer.py; the rare conversions it does not do are formatted over the
column's distinct values). What it understands:

  arguments    (parsed by c_expr.py) REC->field, REC->array[constant], integer/char/string literals, casts to C
               integer types (width and sign applied), unary - ~ ! +, binary * / % + - << >> < > <= >= == != & ^
               | && ||, the ternary ?:,
               __get_str(f), __print_symbolic(v, {k, "name"}...), __print_flags(v, "sep", {k, "name"}...),
               jiffies_to_msecs(j) (only when the kernel's HZ is known: the binary field holds jiffies)
  conversions  %d %i %u %x %X %o %c %s with flags, width, precision and the hh h l ll z j t length modifiers
               (the argument is cut to the modifier's width and read signed or unsigned as printf would)
Not reproducible (the argument is printed as its raw value in hex, or `?`, and render() says why): kernel
pointer extensions (%p, %pS, %pU: the kernel hashes or symbolises them), __print_hex/__get_bitmask and other
helpers, enum names the kernel left unresolved in the format file (e.g. the I_DIRTY_* flags of writeback events),
member access other than REC->field, computed subscripts. `*` widths make the whole format Unrenderable.
Limits: C integer promotion is modelled as "the wider operand's width, at least 32 bits, unsigned if the wider
(or either, at equal width) is unsigned", which is what the kernel's print fmts rely on. jiffies_to_msecs follows
the kernel exactly for HZ dividing 1000 or a multiple of 1000 (every common HZ), else rounds up.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from mobiperf.collectors.parse.c_expr import Unrenderable, parse_expr
from mobiperf.collectors.parse.text_writer import concat_text

__all__ = ["IntCol", "Unrenderable", "compile_print_fmt", "render"]

# Enum names some print fmts keep unresolved whose values are user ABI (cannot change between kernels).
ABI_NAMES = {"IOPRIO_CLASS_NONE": 0, "IOPRIO_CLASS_RT": 1, "IOPRIO_CLASS_BE": 2, "IOPRIO_CLASS_IDLE": 3,
             "IOPRIO_CLASS_INVALID": 7}
CONVERSION = re.compile(r"%(?P<flags>[-+ #0]*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?"
                        r"(?P<len>hh|h|ll|l|z|j|t|L)?(?P<conv>[diouxXcsp%])(?P<ext>(?<=p)[A-Za-z]\w*)?")


@dataclass
class IntCol:
    """An integer column: int64 bits, with the C width and signedness it has in the expression."""
    v: np.ndarray
    bits: int = 64
    unsigned: bool = False

    def norm(self) -> IntCol:
        v = self.v.astype(np.int64, copy=False)
        if self.bits < 64:
            v = v & np.int64((1 << self.bits) - 1)
            if not self.unsigned:
                top = np.int64(1 << (self.bits - 1))
                v = np.where(v >= top, v - np.int64(1 << self.bits), v)
        return IntCol(v, self.bits, self.unsigned)

    def as_unsigned64(self) -> np.ndarray:
        return self.v.view(np.uint64) if self.unsigned and self.bits == 64 else self.v

# --- evaluation over columns ---

FieldGetter = Callable[[str], "IntCol | pl.Series"]


def _promote(a: IntCol, b: IntCol) -> tuple[int, bool]:
    bits = max(32, a.bits, b.bits)
    if a.bits == b.bits:
        return bits, a.unsigned or b.unsigned
    wider = a if a.bits > b.bits else b
    return bits, wider.unsigned if wider.bits >= 32 else False


class Evaluator:
    def __init__(self, n: int, get_field: FieldGetter, hz: int | None = None, long_bits: int = 64):
        self.n = n
        self.get_field = get_field
        self.hz = hz
        self.long_bits = long_bits

    def const(self, node) -> int:
        v = self.eval(node)
        if not isinstance(v, IntCol):
            raise Unrenderable("a non-integer constant")
        return int(v.as_unsigned64()[0]) if len(v.v) else 0

    def int_of(self, node) -> IntCol:
        v = self.eval(node)
        if not isinstance(v, IntCol):
            raise Unrenderable("a string where a number is needed")
        return v

    def eval(self, node):
        kind = node[0]
        if kind == "num":
            value, unsigned, long_ = node[1], node[2], node[3]
            bits = 64 if long_ or value > 0x7FFFFFFF else 32
            arr = np.full(self.n, np.uint64(value & 0xFFFFFFFFFFFFFFFF).astype(np.int64), np.int64) \
                if value > 0x7FFFFFFFFFFFFFFF else np.full(self.n, value, np.int64)
            return IntCol(arr, bits, unsigned or value > 0x7FFFFFFF and not long_)
        if kind == "str":
            return pl.Series([node[1]] * self.n, dtype=pl.Utf8) if self.n else pl.Series([], dtype=pl.Utf8)
        if kind == "field":
            return self.get_field(node[1])
        if kind == "id" and node[1] in ABI_NAMES:
            return IntCol(np.full(self.n, ABI_NAMES[node[1]], np.int64), 32, False)
        if kind == "id":
            raise Unrenderable(f"unresolved name {node[1]} (an enum the kernel did not map to its value?)")
        if kind == "cast":
            v = self.eval(node[2])
            if isinstance(v, pl.Series):
                return v
            bits, signed, long_sized = node[1]
            return IntCol(v.v, self.long_bits if long_sized else bits, not signed).norm()
        if kind == "un":
            v = self.int_of(node[2])
            if node[1] == "-":
                return IntCol(-v.v, max(32, v.bits), v.unsigned).norm()
            if node[1] == "~":
                return IntCol(~v.v, max(32, v.bits), v.unsigned).norm()
            if node[1] == "!":
                return IntCol((v.v == 0).astype(np.int64), 32, False)
            return v
        if kind == "bin":
            return self.binary(node[1], node[2], node[3])
        if kind == "tern":
            cond = self.int_of(node[1]).v != 0
            a, b = self.eval(node[2]), self.eval(node[3])
            if isinstance(a, IntCol) and isinstance(b, IntCol):
                bits, unsigned = _promote(a, b)
                return IntCol(np.where(cond, a.v, b.v), bits, unsigned).norm()
            a, b = _null_as_string(a, b), _null_as_string(b, a)
            if isinstance(a, pl.Series) and isinstance(b, pl.Series):
                return pl.select(pl.when(pl.Series(cond)).then(a).otherwise(b)).to_series()
            raise Unrenderable("a ternary of a string and a number")
        if kind == "call":
            return self.call(node[1], node[2])
        raise Unrenderable(f"cannot evaluate {kind}")

    def binary(self, op, left, right):
        if op in ("&&", "||"):
            a, b = self.int_of(left).v != 0, self.int_of(right).v != 0
            return IntCol((a & b if op == "&&" else a | b).astype(np.int64), 32, False)
        a, b = self.int_of(left), self.int_of(right)
        if op in ("<<", ">>"):
            bits, unsigned = max(32, a.bits), a.unsigned
            count = b.v & 63
            if op == "<<":
                return IntCol(a.v << count, bits, unsigned).norm()
            if unsigned:
                src = a.v.view(np.uint64) if bits == 64 else a.v & np.int64((1 << bits) - 1)
                return IntCol((src >> count.astype(src.dtype)).astype(np.int64), bits, unsigned).norm()
            return IntCol(a.v >> count, bits, unsigned).norm()
        bits, unsigned = _promote(a, b)
        x = IntCol(a.v, bits, unsigned).norm()
        y = IntCol(b.v, bits, unsigned).norm()
        xv, yv = (x.v.view(np.uint64), y.v.view(np.uint64)) if unsigned and bits == 64 else (x.v, y.v)
        if unsigned and bits < 64:
            xv, yv = xv & np.int64((1 << bits) - 1), yv & np.int64((1 << bits) - 1)
        if op in ("==", "!=", "<", ">", "<=", ">="):
            res = {"==": np.equal, "!=": np.not_equal, "<": np.less, ">": np.greater, "<=": np.less_equal,
                   ">=": np.greater_equal}[op](xv, yv)
            return IntCol(res.astype(np.int64), 32, False)
        with np.errstate(all="ignore"):
            if op in ("/", "%"):
                safe = np.where(yv == 0, 1, yv)
                if unsigned:
                    res = xv // safe if op == "/" else xv % safe
                else:  # C truncates toward zero
                    q = np.abs(xv) // np.abs(safe) * np.sign(xv) * np.sign(safe)
                    res = q if op == "/" else xv - q * safe
            else:
                res = {"+": np.add, "-": np.subtract, "*": np.multiply, "&": np.bitwise_and,
                       "|": np.bitwise_or, "^": np.bitwise_xor}[op](xv, yv)
        return IntCol(np.asarray(res).astype(np.uint64).view(np.int64) if res.dtype == np.uint64
                      else np.asarray(res, np.int64), bits, unsigned).norm()

    def call(self, name, args):
        if name == "__get_str" and len(args) == 1 and args[0][0] == "id":
            v = self.get_field(args[0][1])
            if not isinstance(v, pl.Series):
                raise Unrenderable(f"__get_str of a non-string field {args[0][1]}")
            return v
        if name == "__print_symbolic":
            return self.symbolic(self.int_of(args[0]), args[1:])
        if name == "__print_flags":
            sep = args[1]
            if sep[0] != "str":
                raise Unrenderable("__print_flags with a computed separator")
            return self.flags(self.int_of(args[0]), sep[1], args[2:])
        if name == "jiffies_to_msecs" and len(args) == 1:
            if not self.hz:
                raise Unrenderable("jiffies_to_msecs needs the kernel's HZ (not saved with this trace)")
            j = self.int_of(args[0]).as_unsigned64().astype(np.uint64)
            hz = self.hz
            if hz <= 1000 and 1000 % hz == 0:
                ms = j * np.uint64(1000 // hz)
            elif hz > 1000 and hz % 1000 == 0:
                ms = (j + np.uint64(hz // 1000 - 1)) // np.uint64(hz // 1000)
            else:
                ms = (j * np.uint64(1000) + np.uint64(hz - 1)) // np.uint64(hz)
            return IntCol(ms.astype(np.int64), 32, False).norm()
        raise Unrenderable(f"function {name}()")

    def _table(self, items) -> list[tuple[int, str]]:
        out = []
        for item in items:
            if item[0] == "list" and len(item[1]) == 2 and item[1][1][0] != "str" and self.const(item[1][1]) == 0:
                break  # { 0, NULL }: the end of the table
            if item[0] != "list" or len(item[1]) != 2 or item[1][1][0] != "str":
                raise Unrenderable("a symbol table entry that is not {value, \"name\"}")
            out.append((self.const(item[1][0]) & 0xFFFFFFFFFFFFFFFF, item[1][1][1]))
        return out

    def symbolic(self, v: IntCol, items) -> pl.Series:
        table = dict(reversed(self._table(items)))  # the first entry of a value wins, as in the kernel
        return _map_unique(v.as_unsigned64(), lambda x: table.get(x & 0xFFFFFFFFFFFFFFFF,
                                                                  f"0x{x & 0xFFFFFFFFFFFFFFFF:x}"))

    def flags(self, v: IntCol, sep: str, items) -> pl.Series:
        table = self._table(items)

        def render(x: int) -> str:
            x &= 0xFFFFFFFFFFFFFFFF
            parts = []
            for mask, name in table:  # trace_print_flags_seq(): in table order while flags are left
                if not x:
                    break
                if x & mask != mask:
                    continue
                parts.append(name)
                x &= ~mask
            if x:
                parts.append(f"0x{x:x}")
            return sep.join(parts)

        return _map_unique(v.as_unsigned64(), render)


def _null_as_string(v, other):
    """`cond ? __get_str(x) : NULL`: the NULL branch of a string ternary is what printf's %s prints for it."""
    if isinstance(v, IntCol) and isinstance(other, pl.Series) and not v.v.any():
        return pl.Series(["(null)"] * len(v.v), dtype=pl.Utf8)
    return v


def _map_unique(values: np.ndarray, fn) -> pl.Series:
    """fn over the distinct values only, gathered back to every row."""
    uniq, inverse = np.unique(values, return_inverse=True)
    texts = pl.Series([fn(int(u)) for u in uniq.tolist()], dtype=pl.Utf8)
    return texts.gather(pl.Series(inverse.reshape(-1).astype(np.int64)))


# --- formatting ---

LENGTH_BITS = {None: 32, "hh": 8, "h": 16, "l": 64, "ll": 64, "z": 64, "j": 64, "t": 64, "L": 64}
LONG_LENGTHS = ("l", "z", "t")  # long, size_t, ptrdiff_t: the kernel's long


def _length_bits(spec: re.Match, long_bits: int) -> int:
    return long_bits if spec["len"] in LONG_LENGTHS else LENGTH_BITS[spec["len"]]


def _format_ints(v: IntCol, spec: re.Match, long_bits: int = 64) -> pl.Series:
    conv = spec["conv"]
    bits = _length_bits(spec, long_bits)
    signed = conv in "di"
    col = IntCol(v.v, bits, not signed).norm()
    values = col.v.view(np.uint64) if not signed and bits == 64 else col.v
    if conv == "c":
        return _map_unique(col.v & 0xFF, lambda x: chr(x))
    plain = not spec["flags"] and not spec["width"] and not spec["prec"]
    if plain and conv in "diu":
        return pl.Series(values).cast(pl.Utf8)
    py = "%" + spec["flags"] + (spec["width"] or "") + (f".{spec['prec']}" if spec["prec"] else "") \
        + {"i": "d", "u": "d"}.get(conv, conv)
    if conv == "o" and "#" in spec["flags"]:  # C: a leading 0, Python: 0o
        py = py.replace("#", "")
        return _map_unique(values, lambda x: ("0" + (py % x) if x else py % x))
    return _map_unique(values, lambda x: py % x)


def _format_strings(s: pl.Series, spec: re.Match) -> pl.Series:
    if spec["prec"] and spec["prec"] != "*":  # `.*`: cut by render() already
        s = s.str.slice(0, int(spec["prec"]))
    if spec["width"]:
        w = int(spec["width"])
        s = s.str.pad_end(w) if "-" in spec["flags"] else s.str.pad_start(w)
    return s


def compile_print_fmt(fmt: str, args: list[str]) -> list:
    """The format as pieces: literal strings and (conversion match, argument AST or the Unrenderable of an
    argument that could not be read); raise Unrenderable if the format and its arguments do not line up."""
    pieces, pos, argi = [], 0, 0
    for m in CONVERSION.finditer(fmt):
        if m.start() > pos:
            pieces.append(fmt[pos:m.start()])
        pos = m.end()
        if m["conv"] == "%":
            pieces.append("%")
            continue
        star_prec = m["prec"] == "*" and m["conv"] == "s" and m["width"] != "*"  # %.*s: the length first
        if (m["width"] == "*" or m["prec"] == "*") and not star_prec:
            raise Unrenderable(f"conversion {m[0]} (computed width)")
        if argi + star_prec >= len(args):
            raise Unrenderable("more conversions than arguments")
        try:
            node = parse_expr(args[argi + star_prec])
            if star_prec:
                node = ("prec*", parse_expr(args[argi]), node)
        except Unrenderable as e:
            node = e
        pieces.append((m, node))
        argi += 1 + star_prec
    if "%" in fmt[pos:]:
        raise Unrenderable(f"unknown conversion in {fmt[pos:]!r}")
    if pos < len(fmt):
        pieces.append(fmt[pos:])
    return pieces


def _raw_fallback(ev: Evaluator, spec: re.Match, node) -> pl.Series:
    """What stands in for an argument the kernel's text cannot be reproduced for: the raw number in hex
    (a pointer; the value given to __print_flags/__print_symbolic, empty for flags 0 as in the kernel), else `?`."""
    try:
        if isinstance(node, Exception):
            raise node
        no_flags = ""
        if node[0] == "call" and node[1] in ("__print_flags", "__print_symbolic"):
            no_flags = "" if node[1] == "__print_flags" else None  # no flag set prints nothing, whatever the names
            node = node[2][0]
        value = ev.int_of(node)
        return _map_unique(value.as_unsigned64(), lambda x: no_flags if x == 0 and no_flags is not None
                           else f"0x{x & 0xFFFFFFFFFFFFFFFF:x}")
    except Unrenderable:
        return pl.Series(["?"] * ev.n, dtype=pl.Utf8)


def render(pieces: list, n: int, get_field: FieldGetter, hz: int | None = None,
           long_bits: int = 64) -> tuple[pl.Series, list[str]]:
    """The body text of n records, and why any argument was replaced by its raw value (empty: exact text).
    long_bits: the width of the kernel's long (32 on 32-bit kernels: %lx, (unsigned long) casts)."""
    ev = Evaluator(n, get_field, hz, long_bits)
    parts, reasons = [], []
    for piece in pieces:
        if isinstance(piece, str):
            parts.append(piece)
            continue
        spec, node = piece
        try:
            if isinstance(node, Exception):
                raise node
            if spec["conv"] == "p":
                raise Unrenderable(f"conversion {spec[0]} (the kernel hashes or symbolises pointers)")
            prec = None
            if node[0] == "prec*":
                prec, node = ev.int_of(node[1]), node[2]
            value = ev.eval(node)
            if spec["conv"] == "s":
                if not isinstance(value, pl.Series):
                    raise Unrenderable("%s of a number")
                if prec is not None:  # a negative precision is no precision
                    cut = IntCol(prec.v, 32, False).norm().v  # printf reads an int
                    cut = np.where(cut < 0, 1 << 40, cut)
                    value = pl.select(pl.lit(value).str.slice(0, pl.lit(pl.Series(cut)))).to_series()
                parts.append(_format_strings(value, spec))
            else:
                if not isinstance(value, IntCol):
                    raise Unrenderable(f"{spec[0]} of a string")
                parts.append(_int_piece(value, spec, long_bits) or _format_ints(value, spec, long_bits))
        except Unrenderable as e:
            reasons.append(str(e))
            parts.append(_raw_fallback(ev, spec, node))
    return concat_text(parts, n), reasons

# --- integer pieces for the compiled writer (text_writer.py) ---

def _int_piece(v: IntCol, spec: re.Match, long_bits: int = 64) -> tuple | None:
    """An integer conversion the compiled writer does (d i u x X o, flags - 0 #, a width): (values, unsigned,
    base, upper, alt, zero, left, width); None for the rest (precision, + and space flags, %c)."""
    conv, flags = spec["conv"], spec["flags"]
    if conv not in "diuxXo" or spec["prec"] or set(flags) - set("-0#"):
        return None
    bits = _length_bits(spec, long_bits)
    signed = conv in "di"
    col = IntCol(v.v, bits, not signed).norm()
    return (col.v, not signed, {"x": 16, "X": 16, "o": 8}.get(conv, 10), conv == "X", "#" in flags,
            "0" in flags and "-" not in flags, "-" in flags, int(spec["width"] or 0))
