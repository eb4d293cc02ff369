"""Many reads and writes of a target's files in one round trip.

A phone answers each `adb shell` in tens of milliseconds over USB (a virtual phone under TCG in hundreds), and
setting up a trace touches a hundred files: one write per event's enable and filter, one read per event's format.
A FileBatch collects those steps and runs them as one shell script, in order, on any Transport:

    batch = FileBatch()
    batch.write(f"{root}/buffer_size_kb", "32768")
    fmt = batch.read(f"{tracefs}/events/block/block_rq_issue/format")
    here = batch.exists(f"{root}/buffer_percent")
    done = batch.run(transport, timeout=30)
    done[fmt] -> bytes (None: unreadable), done[here] -> bool

A write is one write() call, as tracefs and sysfs need (at most MAX_INLINE_WRITE bytes of text, the way
Transport.write_file writes small values); the script stops at the first write that fails, and run() raises the
same TargetError write_file would, naming the file and the value. Reads and tests never fail the batch.

Reads and writes use the shell's builtins where it has them: on Android's mksh `print -rn` and `read -N -1` (an
external printf or cat costs a fork and an exec per file: 345 format files took 136 s through `cat` on a virtual
phone under TCG on a loaded host, 2.4 s through `read`), elsewhere printf and cat. So a batched read is for text:
what follows a NUL byte is lost on mksh (Transport.read_file reads bytes).

The script's output is the steps' results, each after a header line that carries a random token, so that no
file's content can be taken for a header.
"""

from __future__ import annotations

import posixpath
import re
import secrets
import shlex
from typing import Any

from mobiperf.core.errors import TargetError

MAX_INLINE_WRITE = 1000
# Shell functions that cost no fork or exec on a phone: _put VALUE (one write() of VALUE), _line TEXT (TEXT and a
# newline, backslashes kept: echo would turn /proc/mounts' \040 into a space on dash), _get FILE (its text).
# Builtins on mksh (`print`, `read -N` are its own); dash, bash and busybox sh have printf built in.
PREAMBLE = """if [ -n "${KSH_VERSION:-}" ]; then
  _put() { print -rn -- "$1"; }
  _line() { print -r -- "$1"; }
  _get() { IFS= read -r -N -1 _v < "$1"; print -rn -- "$_v"; }
else
  _put() { printf %s "$1"; }
  _line() { printf '%s\\n' "$1"; }
  _get() { cat -- "$1"; }
fi"""


def put_command(quoted: str) -> str:
    """A command writing the (shell-quoted) text in one write() without forking: mksh's print, else printf."""
    return f'{{ if [ -n "${{KSH_VERSION:-}}" ]; then print -rn -- {quoted}; else printf %s {quoted}; fi; }}'


# One step each, inline: mksh's function calls cost more under emulation than the longer script (a batch of 228
# steps took 5 s inline and 11 s as calls of step functions on a virtual phone).
STEPS = {
    "_w": "_put {value} > {path} && _hdr {i} ok || {{ _hdr {i} failed; exit 1; }}",
    "_a": "_put {value} >> {path} && _hdr {i} ok || {{ _hdr {i} failed; exit 1; }}",
    "_r": "if [ -r {path} ]; then _hdr {i} ok; _get {path}; else _hdr {i} missing; fi",
    "_e": "if [ -e {path} ]; then _hdr {i} yes; else _hdr {i} no; fi",
}


class FileBatch:
    def __init__(self) -> None:
        self._token = f"@@mobiperf-{secrets.token_hex(6)}"
        self._steps: list[tuple[str, str, str]] = []     # (function or "output", path or script, value)
        self._writes: dict[int, tuple[str, str]] = {}

    def __len__(self) -> int:
        return len(self._steps)

    @property
    def _kinds(self) -> list[str]:
        return [{"_w": "write", "_a": "write", "_r": "read", "_e": "exists"}.get(f, f) for f, _, _ in self._steps]

    def _step(self, function: str, path: str, value: str = "") -> int:
        self._steps.append((function, path, value))
        return len(self._steps) - 1

    def write(self, path: str, value: str, *, append: bool = False) -> int:
        """One write() of value to path (text of at most MAX_INLINE_WRITE bytes); a failure stops the batch."""
        if "\0" in value or len(value.encode()) > MAX_INLINE_WRITE:
            raise ValueError(f"a batched write takes short text, not {value[:40]!r}...")
        self._writes[len(self._steps)] = (path, value)
        return self._step("_a" if append else "_w", path, value)

    def read(self, path: str) -> int:
        """The file's bytes, or None when it cannot be read."""
        return self._step("_r", path)

    def exists(self, path: str) -> int:
        return self._step("_e", path)

    def output(self, script: str) -> int:
        """What a shell snippet prints (stdout), whatever its status."""
        return self._step("output", script)

    def script(self) -> str:
        """The shell script: the preamble, a variable per directory that two or more paths share (the events'
        directories of a tracefs instance), then one line per step."""
        dirs: dict[str, int] = {}
        for function, path, _ in self._steps:
            if function != "output":
                dirs[posixpath.dirname(posixpath.dirname(path))] = dirs.get(posixpath.dirname(
                    posixpath.dirname(path)), 0) + 1
        names = {d: f"d{i}" for i, d in enumerate(d for d, n in dirs.items() if n > 1 and len(d) > 8)}
        header = f'_nl=\'\n\'\n_hdr() {{ _put "${{_nl}}{self._token} $1 $2${{_nl}}"; }}'
        lines = [PREAMBLE, header] + [f"{v}={shlex.quote(d)}" for d, v in names.items()]
        for index, (function, path, value) in enumerate(self._steps):
            if function == "output":
                lines.append(f"_hdr {index} ok; {{ {path}\n}} 2>/dev/null")
                continue
            base = posixpath.dirname(posixpath.dirname(path))
            where = f'"${names[base]}"{shlex.quote(path[len(base):])}' if base in names else shlex.quote(path)
            lines.append(STEPS[function].format(path=where, value=shlex.quote(value), i=index))
        return "\n".join(lines + ["_hdr end"])

    def run(self, transport, *, timeout: float = 60) -> dict[int, Any]:
        """Run every step in one round trip; {step: result} (bytes or None for reads and outputs, bool for tests,
        True for writes)."""
        if not self._kinds:
            return {}
        done = transport.run(["sh", "-c", self.script()], timeout=timeout)
        results, failed = self._parse(done.stdout)
        if failed is not None:
            path, value = self._writes[failed]
            raise TargetError(f"{transport.name}: writing {value.encode()[:60]!r} to {path}: "
                              f"{done.stderr.decode(errors='replace').strip() or 'failed'}")
        if len(results) != len(self._kinds):
            raise TargetError(f"{transport.name}: a batch of {len(self._kinds)} steps ended after {len(results)}: "
                              f"{done.stderr.decode(errors='replace').strip() or f'status {done.returncode}'}")
        return results

    def _parse(self, stdout: bytes) -> tuple[dict[int, Any], int | None]:
        header = re.compile(rb"\n" + re.escape(self._token.encode()) + rb" (\d+|end)(?: (\w*))?\n")
        results: dict[int, Any] = {}
        matches = list(header.finditer(stdout))
        for m, after in zip(matches, matches[1:] + [None]):
            if m.group(1) == b"end":
                break
            index, said = int(m.group(1)), m.group(2).decode()
            body = stdout[m.end():after.start() if after else len(stdout)]
            kind = self._kinds[index]
            if said == "failed":
                return results, index
            if kind == "write":
                results[index] = True
            elif kind == "exists":
                results[index] = said == "yes"
            else:
                results[index] = body if said == "ok" else None
        return results, None
