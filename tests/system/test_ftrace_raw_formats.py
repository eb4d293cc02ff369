"""Format files -> field layouts, binary fields -> columns, print fmt -> the kernel's text, each on its own."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from conftest import needs_root
from mobiperf.collectors.parse.event_fields import decode_field
from mobiperf.collectors.parse.event_format import parse_event_format, parse_field, split_args
from mobiperf.collectors.parse.print_fmt import IntCol, Unrenderable, compile_print_fmt, render

FORMAT = r'''name: demo_event
ID: 4242
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:dev_t dev;	offset:8;	size:4;	signed:0;
	field:int ret;	offset:12;	size:4;	signed:1;
	field:u64 big;	offset:16;	size:8;	signed:0;
	field:char comm[8];	offset:24;	size:8;	signed:0;
	field:__data_loc char[] name;	offset:32;	size:4;	signed:0;
	field:__rel_loc char[] tag;	offset:36;	size:4;	signed:0;
	field:unsigned int vec[2];	offset:40;	size:8;	signed:0;

print fmt: "dev %d,%d ret %d big %llu/%#llx comm=%s name=\"%s\" tag %s, mode %s", ((unsigned int) ((REC->dev) >> 20)), ((unsigned int) ((REC->dev) & ((1U << 20) - 1))), REC->ret, REC->big, REC->big, REC->comm, __get_str(name), __get_str(tag), __print_flags(REC->ret & 7, "|", { 1, "R" }, { 2, "W" })
'''


def _record(dev, ret, big, comm: bytes, name: bytes, tag: bytes) -> bytes:
    head = struct.pack("<HBBiIiQ8s", 4242, 0, 0, 77, dev, ret, big, comm)
    name_off = 48
    tag_off = name_off + len(name) + 1
    # __data_loc: (len << 16) | offset from the payload; __rel_loc: offset from the end of its own u32 (@36 + 4)
    locs = struct.pack("<II", ((len(name) + 1) << 16) | name_off, ((len(tag) + 1) << 16) | (tag_off - 40))
    return head + locs + struct.pack("<II", 1, 2) + name + b"\0" + tag + b"\0"


def test_format_file_fields_and_print_fmt():
    fmt = parse_event_format(FORMAT, "demo")
    assert (fmt.name, fmt.system, fmt.id, fmt.common_size) == ("demo_event", "demo", 4242, 8)
    f = fmt.fields
    assert (f["ret"].kind, f["ret"].signed, f["big"].size) == ("int", True, 8)
    assert (f["comm"].kind, f["comm"].loc) == ("string", False)
    assert (f["name"].kind, f["name"].loc, f["name"].relative) == ("string", True, False)
    assert (f["tag"].loc, f["tag"].relative) == (True, True)
    assert f["vec"].kind == "array"
    assert fmt.print_format.startswith('dev %d,%d ret %d') and 'name="%s"' in fmt.print_format
    assert len(fmt.print_args) == 9 and fmt.print_args[-1].startswith("__print_flags(REC->ret & 7")
    assert split_args('a(1, 2), {3, "x,y"}, "q\\",r"') == ["a(1, 2)", '{3, "x,y"}', '"q\\",r"']
    assert parse_field("field:__data_loc u8[] blob;\toffset:8;\tsize:4;\tsigned:0;").kind == "dynamic"


def test_binary_fields_decode_and_render_as_the_kernel_prints():
    fmt = parse_event_format(FORMAT, "demo")
    recs = [_record((254 << 20) | 3, -5, 2**64 - 2, b"dd\0\0\0\0\0\0", b"sda", b"x y"),
            _record((7 << 20) | 1, 2, 10, b"eightchr", b"", b"t")]
    buf = np.frombuffer(b"".join(recs), np.uint8)
    offs = np.array([0, len(recs[0])], np.int64)
    lens = np.array([len(r) for r in recs], np.int64)
    cols = {name: decode_field(buf, offs, lens, f) for name, f in fmt.fields.items() if f.kind != "array"}
    assert cols["ret"].tolist() == [-5, 2]
    assert cols["comm"].to_list() == ["dd", "eightchr"]  # no NUL within the 8 bytes: all of them
    assert cols["name"].to_list() == ["sda", ""] and cols["tag"].to_list() == ["x y", "t"]

    def get(name):
        v = cols[name]
        return v if isinstance(v, pl.Series) else IntCol(v, 8 * fmt.fields[name].size, not fmt.fields[name].signed)

    body, why = render(compile_print_fmt(fmt.print_format, fmt.print_args), 2, get)
    assert why == []
    assert body.to_list() == [
        f'dev 254,3 ret -5 big {2**64 - 2}/0xfffffffffffffffe comm=dd name="sda" tag x y, mode R|W',
        'dev 7,1 ret 2 big 10/0xa comm=eightchr name="" tag t, mode W']  # -5 & 7 == 3
    short = decode_field(buf, offs, np.array([20, 20], np.int64), fmt.fields["big"])
    assert short.tolist() == [0, 0]  # a field past a short payload reads as 0


def _c_printf(spec: str, value: int) -> str:
    """An independent oracle: C printf of one integer conversion (value cut to the length modifier)."""
    conv, length = spec[-1], ("ll" if "ll" in spec else "hh" if "hh" in spec else "h" if "h" in spec
                               else "l" if "l" in spec else "")
    bits = {"": 32, "hh": 8, "h": 16, "l": 64, "ll": 64}[length]
    v = value & ((1 << bits) - 1)
    if conv in "di" and v >= 1 << (bits - 1):
        v -= 1 << bits
    py = spec.replace("ll", "").replace("hh", "").replace("h", "").replace("l", "").replace("u", "d")
    return py % v


@pytest.mark.parametrize("spec", ["%d", "%u", "%x", "%X", "%08lx", "%-6d|", "%5u", "%#x", "%#010llx", "%lld",
                                  "%llu", "%hu", "%hhu", "%hd", "%o", "%ld", "%zu"])
def test_integer_conversions_match_c_printf(spec):
    rng = random.Random(spec)
    values = [0, 1, -1, 2**31 - 1, -2**31, 2**32 - 1, 2**63 - 1, -2**63, 255, 256, 65535]
    values += [rng.randrange(-2**63, 2**63) for _ in range(200)]
    spec_c = spec.replace("zu", "lu")
    col = IntCol(np.array(values, np.int64), 64, False)
    body, why = render(compile_print_fmt(f"<{spec}>", ["REC->v"]), len(values), lambda _: col)
    assert why == [] and body.to_list() == [f"<{_c_printf(spec_c.rstrip('|'), v)}{'|' if spec.endswith('|') else ''}>"
                                            for v in values]


def _eval(expr: str, **fields) -> list:
    cols = {k: IntCol(np.array(v, np.int64), 32, False) for k, v in fields.items()}
    n = len(next(iter(fields.values())))
    body, why = render(compile_print_fmt("%s" if expr.startswith("__print") else "%lld", [expr]), n, cols.get)
    assert why == []
    return body.to_list()


def test_expressions_follow_c():
    assert _eval("REC->a ? REC->b : 0", a=[0, 1], b=[5, 6]) == ["0", "6"]
    assert _eval("(int) REC->a", a=[0xFFFFFFFF, 7]) == ["-1", "7"]
    assert _eval("(unsigned char) REC->a + 1", a=[0x1FF, 2]) == ["256", "3"]
    assert _eval("-7 / 2 + REC->a * 0", a=[0]) == ["-3"]  # C truncates toward zero
    assert _eval("!REC->a && REC->b >= 2 || REC->a == 9", a=[0, 9, 1], b=[2, 0, 5]) == ["1", "1", "0"]
    assert _eval("~0U - REC->a", a=[1]) == [str(2**32 - 2)]
    assert _eval("__print_flags(REC->a, \"|\", { 0x1, \"A\" }, { 0x6, \"BC\" }, { 0x2, \"B\" })",
                 a=[0, 1, 7, 3, 0x12]) == ["", "A", "A|BC", "A|B", "B|0x10"]
    assert _eval("__print_symbolic(REC->a, { 1, \"one\" }, { 2, \"two\" })", a=[2, 5]) == ["two", "0x5"]


def test_what_cannot_be_reproduced_is_said_and_kept_raw():
    col = IntCol(np.array([0xFFFFFFFF81000000 - 2**64, 16], np.int64), 64, False)
    body, why = render(compile_print_fmt("at %pS x %d", ["(void *)REC->ip", "REC->x"]), 2, lambda _: col)
    assert body.to_list() == ["at 0xffffffff81000000 x -2130706432", "at 0x10 x 16"] and "pointer" in why[0]
    body, why = render(compile_print_fmt("s=%s", ['__print_flags(REC->s, "|", {I_NEW, "I_NEW"})']), 2,
                       lambda _: col)
    assert body.to_list() == ["s=0xffffffff81000000", "s=0x10"] and "I_NEW" in why[0]
    body, why = render(compile_print_fmt("%u ms", ["jiffies_to_msecs(REC->j)"]), 2, lambda _: col)
    assert "HZ" in why[0]
    assert render(compile_print_fmt("%u ms", ["jiffies_to_msecs(REC->j)"]), 2, lambda _: col, hz=250)[0] \
        .to_list() == [f"{(0xFFFFFFFF81000000 * 4) & 0xFFFFFFFF} ms", "64 ms"]  # unsigned int, as the kernel
    with pytest.raises(Unrenderable):
        compile_print_fmt("%*d", ["REC->w", "REC->x"])


def test_star_precision_null_terminated_tables_and_abi_names():
    cols = {"n": IntCol(np.array([2, -1, 0], np.int64), 32, True),
            "f": IntCol(np.array([3, 0, 5], np.int64), 32, False)}

    def get(name):
        return pl.Series(["abcdef", "xyz", "q"]) if name == "s" else cols[name]

    body, why = render(compile_print_fmt("[%.*s] %s %s", [
        "REC->n", "__get_str(s)", '__print_flags(REC->f, "|", {1, "A"}, {(uint)2, "B"}, { 0, ((void *)0) })',
        '__print_symbolic(REC->f, { IOPRIO_CLASS_BE, "be" }, { IOPRIO_CLASS_RT, "rt" })']), 3, get)
    assert why == [] and body.to_list() == ["[ab] A|B 0x3", "[xyz]  0x0", "[] A|0x4 0x5"]


TRACEFS_EVENTS = Path("/sys/kernel/tracing/events")
IO_SYSTEMS = ("block", "ext4", "jbd2", "writeback", "fuse", "syscalls", "raw_syscalls", "f2fs", "filemap")
# What the kernel's text has that the binary does not: symbols and hashed pointers, enum names the format file
# leaves unresolved, the time of printing (jiffies), strings behind pointers.
NOT_IN_THE_BINARY = ("conversion %p", "unresolved name", "%s of a number")


@needs_root
@pytest.mark.skipif(not TRACEFS_EVENTS.is_dir(), reason="needs tracefs")
def test_every_io_event_format_of_this_kernel_renders():
    """Random records of every IO event this kernel has: each print fmt renders, exactly unless it needs what
    only the running kernel knows."""
    n, partial, total = 20, {}, 0
    for system in IO_SYSTEMS:
        for path in sorted(TRACEFS_EVENTS.glob(f"{system}/*/format")):
            fmt = parse_event_format(path.read_text(), system)
            if fmt is None or fmt.print_format is None:
                continue
            size = max(f.offset + f.size for f in fmt.fields.values()) + 64
            buf = np.random.default_rng(total).integers(0, 256, size * n, dtype=np.uint8)
            offs, lens = np.arange(n, dtype=np.int64) * size, np.full(n, size, np.int64)

            def get(name, fmt=fmt, buf=buf, offs=offs, lens=lens):
                base, _, index = name.rstrip("]").partition("[")
                f = fmt.fields.get(base)
                f = f.element(int(index)) if f is not None and index else f
                if f is None or f.kind not in ("int", "string"):
                    raise Unrenderable(f"no field {name}")
                v = decode_field(buf, offs, lens, f)
                return v if isinstance(v, pl.Series) else IntCol(v, 8 * f.size, not f.signed)

            body, why = render(compile_print_fmt(fmt.print_format, fmt.print_args), n, get, hz=250)
            assert len(body) == n and body.null_count() == 0, fmt.name
            if why:
                partial[fmt.name] = why
            total += 1
    assert total > 100
    assert all(any(w.startswith(NOT_IN_THE_BINARY) for w in why) or "jiffies" in " ".join(why)
               for why in partial.values()), partial
    assert len(partial) < total * 0.05  # what the binary cannot say is rare among IO events


def test_long_is_the_kernels_long():
    """32-bit kernels (older phones): %lx and (unsigned long) casts are 32 bits wide."""
    col = IntCol(np.array([-22, 0x100000005], np.int64), 64, False)
    pieces = compile_print_fmt("%lx %ld %llx %lu", ["REC->r", "REC->r", "REC->r", "(unsigned long)REC->r"])
    assert render(pieces, 2, lambda _: col, long_bits=32)[0].to_list() == [
        "ffffffea -22 ffffffffffffffea 4294967274", "5 5 100000005 5"]
    assert render(pieces, 2, lambda _: col)[0].to_list() == [
        "ffffffffffffffea -22 ffffffffffffffea 18446744073709551594", "100000005 4294967301 100000005 4294967301"]
