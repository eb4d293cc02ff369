"""C expressions of ftrace print fmts (the arguments after the format string) -> nested tuples.

The grammar of what the kernel writes into `print fmt:` after macro expansion: REC->field, REC->array[k],
integer/char/string literals (adjacent strings joined), casts to C types (`(unsigned int)`, `( gfp_t)`, `(void *)`),
unary - ~ ! +, the binary operators by C precedence, ?:, calls (`__print_flags(...)`), and { brace lists } of the
symbol tables. A node is a tuple: ("num", value, unsigned, long), ("str", s), ("field", name), ("id", name),
("cast", (bits, signed, long_sized), node), ("un", op, node), ("bin", op, a, b), ("tern", c, a, b),
("call", name, [args]), ("list", [items]). print_fmt.py evaluates them over columns.
"""

from __future__ import annotations

import re

from mobiperf.collectors.parse.event_format import unescape_c


class Unrenderable(Exception):
    """The print fmt uses something this renderer cannot reproduce from the binary fields."""


TOKEN = re.compile(r"""\s*(?:
    (?P<num>0[xX][0-9a-fA-F]+|\d+)(?P<suffix>[uUlL]*)
  | (?P<chr>'(?:[^'\\]|\\.)+')
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op>->|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^~!<>?:(){}\[\],.])
)""", re.X)

# C integer types: bits and signedness. Unknown typedefs ending in _t are taken as 64-bit unsigned (their cast is
# only a hint in the print fmts seen); `enum X` as int.
C_TYPES = {
    "char": (8, True), "signed char": (8, True), "unsigned char": (8, False), "bool": (8, False),
    "_Bool": (8, False), "short": (16, True), "short int": (16, True), "unsigned short": (16, False),
    "unsigned short int": (16, False), "int": (32, True), "signed": (32, True), "signed int": (32, True),
    "unsigned": (32, False), "unsigned int": (32, False), "long": (64, True), "long int": (64, True),
    "unsigned long": (64, False), "unsigned long int": (64, False), "long long": (64, True),
    "long long int": (64, True), "unsigned long long": (64, False), "unsigned long long int": (64, False),
    "u8": (8, False), "u16": (16, False), "u32": (32, False), "u64": (64, False), "s8": (8, True),
    "s16": (16, True), "s32": (32, True), "s64": (64, True), "__u8": (8, False), "__u16": (16, False),
    "__u32": (32, False), "__u64": (64, False), "__s8": (8, True), "__s16": (16, True), "__s32": (32, True),
    "__s64": (64, True), "size_t": (64, False), "ssize_t": (64, True), "loff_t": (64, True),
    "dev_t": (32, False), "ino_t": (64, False), "pid_t": (32, True), "uid_t": (32, False), "gid_t": (32, False),
    "sector_t": (64, False), "umode_t": (16, False), "gfp_t": (32, False), "tid_t": (32, False),
    "uint8_t": (8, False), "uint16_t": (16, False), "uint32_t": (32, False), "uint64_t": (64, False),
    "int8_t": (8, True), "int16_t": (16, True), "int32_t": (32, True), "int64_t": (64, True),
    "uint": (32, False), "ushort": (16, False), "ulong": (64, False), "uchar": (8, False), "u_int": (32, False),
    "u_long": (64, False), "u_short": (16, False), "u_char": (8, False), "u_int8_t": (8, False),
    "u_int16_t": (16, False), "u_int32_t": (32, False), "u_int64_t": (64, False), "xfs_lsn_t": (64, True),
}
# Types as wide as the kernel's long (32 bits on 32-bit kernels, e.g. older Android phones).
LONG_TYPES = {"long", "long int", "unsigned long", "unsigned long int", "ulong", "u_long", "size_t", "ssize_t",
              "ino_t"}
TYPE_WORDS = {"unsigned", "signed", "int", "long", "short", "char", "void", "const", "volatile", "enum", "struct"}


# --- parsing: C expression -> nested tuples ---

def tokenize(text: str) -> list[tuple[str, object]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise Unrenderable(f"cannot read {text[pos:pos + 20]!r}")
        pos = m.end()
        if m["num"] is not None:
            value = int(m["num"], 0) if not re.fullmatch(r"0\d+", m["num"]) else int(m["num"], 8)
            suffix = m["suffix"].lower()
            out.append(("num", (value, "u" in suffix, "l" in suffix)))
        elif m["chr"] is not None:
            out.append(("num", (ord(unescape_c(m["chr"][1:-1])[0]), False, False)))
        elif m["str"] is not None:
            out.append(("str", unescape_c(m["str"][1:-1])))
        elif m["id"] is not None:
            out.append(("id", m["id"]))
        elif m["op"] is not None:
            out.append(("op", m["op"]))
    return out


BINARY = [("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", ">", "<=", ">="), ("<<", ">>"),
          ("+", "-"), ("*", "/", "%")]


class _Parser:
    def __init__(self, tokens):
        self.t = tokens
        self.i = 0

    def peek(self, k=0):
        return self.t[self.i + k] if self.i + k < len(self.t) else ("end", None)

    def take(self, kind=None, value=None):
        tok = self.peek()
        if (kind and tok[0] != kind) or (value is not None and tok[1] != value):
            raise Unrenderable(f"expected {value or kind}, got {tok[1]!r}")
        self.i += 1
        return tok

    def is_op(self, value, k=0):
        tok = self.peek(k)
        return tok[0] == "op" and tok[1] == value

    def expr(self):
        cond = self.binary(0)
        if self.is_op("?"):
            self.take()
            a = self.expr()
            self.take("op", ":")
            b = self.expr()
            return ("tern", cond, a, b)
        return cond

    def binary(self, level):
        if level == len(BINARY):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek()[0] == "op" and self.peek()[1] in BINARY[level]:
            op = self.take()[1]
            left = ("bin", op, left, self.binary(level + 1))
        return left

    def cast_type(self):
        """The type words of a cast at '(' (and move past the ')'), or None if this '(' opens an expression."""
        j, words = 1, []
        while self.peek(j)[0] == "id" or self.is_op("*", j):
            words.append(self.peek(j)[1])
            j += 1
        if not words or not self.is_op(")", j):
            return None
        names = [w for w in words if w not in ("const", "volatile")]
        plain = " ".join(w for w in names if w != "*")
        if not (any(w in TYPE_WORDS for w in names) or plain in C_TYPES or plain.endswith("_t")):
            return None
        self.i += j + 1
        if "*" in names or names[0] == "struct":
            return (64, False, True)  # a pointer is long-sized
        if names[0] == "enum":
            return (32, False, False)
        bits, signed = C_TYPES.get(plain, (64, False))
        return (bits, signed, plain in LONG_TYPES)

    def unary(self):
        tok = self.peek()
        if tok[0] == "op" and tok[1] in ("-", "~", "!", "+"):
            self.take()
            return ("un", tok[1], self.unary())
        if tok[0] == "op" and tok[1] == "(":
            ctype = self.cast_type()
            if ctype is not None:
                return ("cast", ctype, self.unary())
        return self.postfix()

    def postfix(self):
        node = self.primary()
        while True:
            if self.is_op("->") or self.is_op("."):
                self.take()
                member = self.take("id")[1]
                if node != ("id", "REC"):
                    raise Unrenderable("member access other than REC->field")
                node = ("field", member)
            elif self.is_op("("):
                if node[0] != "id":
                    raise Unrenderable("call of an expression")
                self.take()
                args = []
                while not self.is_op(")"):
                    args.append(self.expr())
                    if self.is_op(","):
                        self.take()
                self.take("op", ")")
                node = ("call", node[1], args)
            elif self.is_op("["):
                self.take()
                index = self.take("num")[1][0]
                self.take("op", "]")
                if node[0] != "field":
                    raise Unrenderable("a subscript of something other than a REC-> array")
                node = ("field", f"{node[1]}[{index}]")
            else:
                return node

    def primary(self):
        tok = self.take()
        if tok[0] == "num":
            return ("num",) + tok[1]
        if tok[0] == "str":
            s = tok[1]
            while self.peek()[0] == "str":  # adjacent literals concatenate
                s += self.take()[1]
            return ("str", s)
        if tok[0] == "id":
            return ("id", tok[1])
        if tok == ("op", "("):
            node = self.expr()
            self.take("op", ")")
            return node
        if tok == ("op", "{"):
            items = []
            while not self.is_op("}"):
                items.append(self.expr())
                if self.is_op(","):
                    self.take()
            self.take("op", "}")
            return ("list", items)
        raise Unrenderable(f"unexpected {tok[1]!r}")


def parse_expr(text: str):
    p = _Parser(tokenize(text))
    node = p.expr()
    if p.peek()[0] != "end":
        raise Unrenderable(f"trailing {p.peek()[1]!r} in {text[:60]!r}")
    return node
