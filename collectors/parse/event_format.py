"""ftrace event format files (events/<system>/<event>/format, header_page) -> typed field layouts.

A format file lists the binary layout of one event's payload and how the kernel prints it:

    name: ext4_sync_file_enter
    ID: 1232
    format:
        field:unsigned short common_type;  offset:0;  size:2;  signed:0;     <- the common header, every event
        ...
        field:dev_t dev;                   offset:8;  size:4;  signed:0;     <- an integer
        field:char comm[16];               offset:12; size:16; signed:0;     <- a fixed char array (a C string)
        field:__data_loc char[] cmd;       offset:60; size:4;  signed:0;     <- u32 (len << 16 | offset in payload)
        field:__rel_loc char[] name;       ...                               <- the same, offset from the field's end
        field:char buf[];                  offset:16; size:0;  signed:0;     <- a string up to the payload's end
        field:char buf;                    offset:16; size:0;  signed:0;     <- the same, as 3.x kernels declare it
        field:unsigned int x[10];          offset:12; size:40; signed:0;     <- an array of integers
    print fmt: "dev %d,%d ino %lu ...", ((unsigned int) ((REC->dev) >> 20)), ...

Each field gets a kind: int (size 1, 2, 4 or 8), string (char arrays and dynamic char arrays), dynamic (other
__data_loc arrays: kept as bytes, never printed) or array (fixed arrays of other types). The print fmt is kept as
its format string and its argument expressions (split at top-level commas) for print_fmt.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

FIELD_LINE = re.compile(r"field:(?P<decl>[^;]*);\s*offset:(?P<offset>\d+);\s*size:(?P<size>\d+);"
                        r"\s*(?:signed:(?P<signed>-?\d+);?)?")
DECL = re.compile(r"^(?P<type>.*?)\s*\b(?P<name>\w+)\s*(?P<array>\[[^\]]*\])?\s*$")
CHAR_TYPES = {"char", "signed char", "const char"}  # u8 / unsigned char arrays are bytes (hex dumps), not text


@dataclass(frozen=True)
class FieldFormat:
    name: str
    type: str  # the C type as declared, without the array brackets
    offset: int
    size: int
    signed: bool
    kind: str  # int | string | dynamic | array
    loc: bool = False  # __data_loc / __rel_loc: the field is a u32 (length << 16 | offset) of dynamic data
    relative: bool = False  # __rel_loc: the offset counts from the end of this field
    count: int = 0  # elements of a fixed array (`unsigned long args[6]`: 6, each size // count bytes)

    def element(self, index: int) -> FieldFormat | None:
        """Element index of an integer array as an int field of its own (None outside the array)."""
        if self.kind != "array" or not self.count or not 0 <= index < self.count or self.size % self.count:
            return None
        size = self.size // self.count
        if size not in (1, 2, 4, 8):
            return None
        return FieldFormat(f"{self.name}[{index}]", self.type, self.offset + index * size, size, self.signed, "int")


@dataclass
class EventFormat:
    name: str
    system: str
    id: int
    fields: dict[str, FieldFormat] = field(default_factory=dict)
    print_format: str | None = None  # the C format string, unescaped
    print_args: list[str] = field(default_factory=list)  # its argument expressions, C source text

    @property
    def common_size(self) -> int:
        """Bytes of the common header (common_type .. common_pid): where the event's own fields start."""
        common = [f.offset + f.size for f in self.fields.values() if f.name.startswith("common_")]
        return max(common, default=8)


@dataclass
class PageLayout:
    data_offset: int = 16
    data_size: int = 4080
    commit_size: int = 8  # local_t: 8 bytes on 64-bit kernels, 4 on 32-bit ones

    @property
    def page_size(self) -> int:
        return self.data_offset + self.data_size


def parse_field(line: str) -> FieldFormat | None:
    m = FIELD_LINE.search(line)
    if not m:
        return None
    decl = m["decl"].strip()
    offset, size = int(m["offset"]), int(m["size"])
    signed = m["signed"] == "1"
    loc = re.match(r"^__(data|rel)_loc\s+(.*)$", decl)
    if loc:
        d = DECL.match(loc[2].replace("[]", "").strip())
        if not d:
            return None
        base = d["type"].strip()
        kind = "string" if base in CHAR_TYPES else "dynamic"
        return FieldFormat(d["name"], base, offset, size, signed, kind, loc=True, relative=loc[1] == "rel")
    d = DECL.match(decl)
    if not d:
        return None
    base = d["type"].strip()
    count = 0
    if d["array"] is not None:
        kind = "string" if base in CHAR_TYPES else "array"
        count = int(d["array"][1:-1]) if d["array"][1:-1].isdigit() else 0
    elif size == 0 and base in CHAR_TYPES:
        kind = "string"  # `char buf; size:0` (print on 3.x kernels): a string up to the payload's end
    elif size in (1, 2, 4, 8):
        kind = "int"
    else:
        kind = "array"
    return FieldFormat(d["name"], base, offset, size, signed, kind, count=count)


def split_args(text: str) -> list[str]:
    """C expressions separated by top-level commas (not inside (), {}, [] or string literals)."""
    out, depth, cur, i, quote = [], 0, [], 0, None
    while i < len(text):
        c = text[i]
        if quote:
            cur.append(c)
            if c == "\\" and i + 1 < len(text):
                cur.append(text[i + 1])
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
            cur.append(c)
        elif c in "({[":
            depth += 1
            cur.append(c)
        elif c in ")}]":
            depth -= 1
            cur.append(c)
        elif c == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def unescape_c(text: str) -> str:
    """The value of a C string literal's body (\\n, \\t, \\", \\\\, octal)."""
    return re.sub(r"\\(?:([0-7]{1,3})|(.))",
                  lambda m: chr(int(m[1], 8)) if m[1] else {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}
                  .get(m[2], m[2]), text)


def parse_print_fmt(line: str) -> tuple[str | None, list[str]]:
    """`print fmt: "...", args` -> (format string, argument expressions)."""
    m = re.match(r'^print fmt:\s*"((?:[^"\\]|\\.)*)"\s*(?:,(.*))?$', line.strip(), re.S)
    if not m:
        return None, []
    return unescape_c(m[1]), split_args(m[2] or "")


def parse_event_format(text: str, system: str = "") -> EventFormat | None:
    ident = re.search(r"^ID:\s*(\d+)", text, re.M)
    name = re.search(r"^name:\s*(\S+)", text, re.M)
    if not ident or not name:
        return None
    fmt = EventFormat(name[1], system, int(ident[1]))
    for line in text.splitlines():
        if line.lstrip().startswith("field:"):
            f = parse_field(line)
            if f is not None:
                fmt.fields[f.name] = f
        elif line.startswith("print fmt:"):
            fmt.print_format, fmt.print_args = parse_print_fmt(line)
    return fmt


def parse_header_page(text: str) -> PageLayout:
    layout = PageLayout()
    for line in text.splitlines():
        f = parse_field(line)
        if f is None:
            continue
        if f.name == "data":
            layout.data_offset, layout.data_size = f.offset, f.size
        elif f.name == "commit":
            layout.commit_size = f.size
    return layout


def read_formats(formats: Path) -> tuple[dict[int, EventFormat], PageLayout]:
    """Every event format of a saved formats/ directory by its ID, and the page layout of header_page.

    Parsed once per directory content: the files' names, sizes and mtimes are the key (a run's formats are
    read for every repetition, and the fuzz tests read the same ones thousands of times)."""
    paths = sorted(formats.glob("*/*/format"))
    header = formats / "header_page"
    key = (str(formats), tuple((str(p), *_stamp(p)) for p in [*paths, header]))
    hit = _FORMATS_CACHE.get(key)
    if hit is None:
        layout = parse_header_page(header.read_text(errors="replace")) if header.exists() else PageLayout()
        by_id: dict[int, EventFormat] = {}
        for path in paths:
            fmt = parse_event_format(path.read_text(errors="replace"), path.parent.parent.name)
            if fmt is not None:
                by_id[fmt.id] = fmt
        if len(_FORMATS_CACHE) > 16:
            _FORMATS_CACHE.clear()
        hit = _FORMATS_CACHE[key] = (by_id, layout)
    # Copies of the containers: a caller may add to them without changing the cached ones.
    return dict(hit[0]), hit[1]


_FORMATS_CACHE: dict[tuple, tuple[dict[int, EventFormat], PageLayout]] = {}


def _stamp(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns)
