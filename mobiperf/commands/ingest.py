"""`mobiperf ingest`: a run directory from traces collected elsewhere (a phone's ftrace text, a blktrace file set,
a trace-cmd .dat, a strace log), analysed and reported like a run of `mobiperf run`.

Each input is copied into raw/rep0/ under the name its parser looks for (ftrace.txt, blktrace/, strace.log),
then the same parse, analyze and report stages run (pipeline.analyze, pipeline.report). The kind of an input is
sniffed from its first bytes unless --kind says it: blktrace magic, trace-cmd's `\\x17\\x08Dtracing`, strace's
`[pid] secs.usecs name(` lines, a Perfetto trace (protobuf packets, gzip'ed, or a bugreport zip holding one; read
natively by collectors/parse/perfetto_trace.py), a directory with formats/ (binary trace_pipe_raw pages), else
ftrace text.
A trace-cmd .dat (versions 6 and 7, zstd/zlib/uncompressed) is unpacked natively into the formats/ and per-CPU
pages of an ftrace-raw input (collectors/parse/trace_cmd_dat.py; no trace-cmd needed, exact ns timestamps); of
several buffers (-B instances) the first with events. What the native reader does not decode (big-endian files,
latency traces, other compressions, a second .dat of the same run) is turned into text with `trace-cmd report`
instead, with a warning (the tool must then be installed; libtraceevent prints ioprio as `0x2,0,4`, which the
text parser reads).
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import click

from mobiperf.errors import MobiperfError, UsageError

KINDS = ("auto", "ftrace", "ftrace-raw", "blktrace", "strace", "trace-cmd", "perfetto")
TRACE_CMD_MAGIC = b"\x17\x08\x44tracing"
STRACE_LINE = re.compile(rb"^(?:\d+\s+)?\d{9,}\.\d+ (?:\w+\(|<\.\.\. |\+\+\+ |--- )")
EPILOG = """

\b
Examples:
  mobiperf ingest phone-trace.txt -o runs/pixel-ftrace
  mobiperf ingest sda.blktrace.0 sda.blktrace.1 -o runs/blk
  mobiperf ingest trace.dat --kind trace-cmd -o runs/tc
  mobiperf ingest pixel.pftrace -o runs/pixel      (Perfetto: .pftrace/.perfetto-trace/.pb, gzip, bugreport.zip)
  mobiperf ingest pixel-pages/ -o runs/raw      (cpuN trace_pipe_raw files and the formats/ saved with them)
  mobiperf ingest ftrace.txt app.strace -o runs/app --label "Pixel 6, app launch"
"""


def sniff_kind(path: Path) -> str:
    """The kind of a trace file from its first bytes."""
    if path.is_dir():
        # trace_pipe_raw pages: cpuN files with the formats/ saved beside them (as `mobiperf run` keeps them)
        if (path / "formats").is_dir() or (path.parent / "formats").is_dir():
            return "ftrace-raw"
        return "blktrace"
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror}") from None
    if len(head) >= 4 and (int.from_bytes(head[:4], "little") & 0xFFFFFF00 == 0x65617400
                           or int.from_bytes(head[:4], "big") & 0xFFFFFF00 == 0x65617400):
        return "blktrace"
    if head.startswith(TRACE_CMD_MAGIC):
        return "trace-cmd"
    from mobiperf.collectors.parse.perfetto_trace import sniff_perfetto

    if sniff_perfetto(path):  # protobuf (plain, gzip'ed) or a bugreport zip holding one
        return "perfetto"
    first = next((line for line in head.splitlines() if line.strip()), b"")
    if STRACE_LINE.match(first):
        return "strace"
    return "ftrace"


def place_inputs(inputs: list[Path], kind: str, raw: Path, warnings: list[str] | None = None
                 ) -> dict[str, list[str]]:
    """Copy (or convert) every input into raw/ under its parser's file name; what went where. Notes for the
    user (a .dat read through trace-cmd, a truncated .dat) are appended to warnings."""
    warnings = [] if warnings is None else warnings
    placed: dict[str, list[str]] = {}
    ftrace_parts, strace_parts = [], []
    for path in inputs:
        k = sniff_kind(path) if kind == "auto" else kind
        placed.setdefault(k, []).append(str(path))
        if k == "blktrace":
            dest = raw / "blktrace"
            dest.mkdir(exist_ok=True)
            sources = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
            for src in sources:
                name = src.name
                if ".blktrace." not in name and not name.endswith((".blktrace", ".blkbin")):
                    name += ".blkbin"  # a single stream (blkparse -d output, blk tracer capture)
                shutil.copyfile(src, dest / name)
        elif k == "ftrace-raw":
            formats = path / "formats" if (path / "formats").is_dir() else path.parent / "formats"
            pages = path / "ftrace_raw" if (path / "ftrace_raw").is_dir() else path
            shutil.copytree(formats, raw / "formats", dirs_exist_ok=True)
            shutil.copytree(pages, raw / "ftrace_raw", dirs_exist_ok=True,
                            ignore=lambda d, names: [n for n in names if n == "formats"])
        elif k == "perfetto":
            if (raw / "trace.pftrace").exists():
                raise UsageError(f"{path}: one Perfetto trace per run (ingest the others into runs of their own)")
            shutil.copyfile(path, raw / "trace.pftrace")  # the reader unpacks gzip and zip itself
        elif k == "ftrace":
            ftrace_parts.append(path)
        elif k == "strace":
            strace_parts.append(path)
        elif k == "trace-cmd":
            text = _trace_cmd_dat(path, raw, warnings)
            if text is not None:
                ftrace_parts.append(text)
        else:
            raise UsageError(f"unknown kind {k!r}; kinds are {', '.join(KINDS)}")
    if ftrace_parts:
        _concat(ftrace_parts, raw / "ftrace.txt")
    if strace_parts:
        _concat(strace_parts, raw / "strace.log")
    return placed


def _concat(parts: list[Path], dest: Path) -> None:
    with open(dest, "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out)


def _trace_cmd_dat(dat: Path, raw: Path, warnings: list[str]) -> Path | None:
    """A .dat unpacked natively into raw/formats and raw/ftrace_raw (None), or, where the native reader cannot
    (DatUnsupported), turned into text by `trace-cmd report` (the text's path). A malformed file is a ParseError."""
    from mobiperf.collectors.parse.trace_cmd_dat import DatUnsupported, extract_dat

    try:
        if (raw / "ftrace_raw").is_dir():
            raise DatUnsupported(f"{dat}: the run already holds binary pages (one page source per run)")
        got = extract_dat(dat, raw)
    except DatUnsupported as e:
        warnings.append(f"ingest: {e}; read with `trace-cmd report` instead")
        return _trace_cmd_report(dat, raw)
    others = [repr(n) for n in got.buffers if n != got.buffer]
    if others:
        warnings.append(f"ingest: {dat}: buffer {got.buffer!r} read; also in the file: {', '.join(others)}")
    warnings += [f"ingest: {dat}: {w}" for w in got.warnings]
    return None


def _trace_cmd_report(dat: Path, raw: Path) -> Path:
    tool = shutil.which("trace-cmd")
    if not tool:
        raise UsageError(f"{dat} is a trace-cmd .dat file and trace-cmd is not installed (Debian: apt-get install "
                         "trace-cmd); or convert it elsewhere with `trace-cmd report -i FILE > trace.txt`")
    text = raw / "trace-cmd-report.txt"
    with open(text, "wb") as out:
        done = subprocess.run([tool, "report", "-N", "-i", str(dat)], stdout=out, stderr=subprocess.PIPE,
                              timeout=1800)
    if done.returncode != 0:
        raise MobiperfError(f"trace-cmd report -i {dat} failed: {done.stderr.decode(errors='replace')[-300:]}")
    _keep_one_buffer(dat, text)
    return text


def _keep_one_buffer(dat: Path, text: Path) -> None:
    """With instances (-B), trace-cmd report starts every line with `<buffer>: `, which the text parser does not
    read: keep the lines of the first buffer with pages (the native reader's choice), without the prefix."""
    from mobiperf.collectors.parse.trace_cmd_dat import read_dat

    try:
        buffers = [b.name for b in read_dat(dat).buffers if any(c.size for c in b.cpus)]
    except MobiperfError:
        return
    if not buffers or buffers == [""]:
        return
    prefixes = tuple(f"{name}: ".encode() for name in buffers if name)
    keep = f"{buffers[0]}: ".encode()
    tmp = text.with_suffix(".tmp")
    with open(text, "rb") as src, open(tmp, "wb") as out:
        for line in src:
            if line.startswith(keep):
                out.write(line[len(keep):])
            elif not line.startswith(prefixes):
                out.write(line)
    tmp.replace(text)


def ingest(inputs: list[Path], out: Path, *, kind: str = "auto", label: str | None = None):
    """Build, parse, analyze and report a run directory from foreign traces; returns the RunDir."""
    from mobiperf import __version__, pipeline
    from mobiperf.runstore import RunDir

    missing = [str(p) for p in inputs if not p.exists()]
    if missing:
        raise UsageError(f"no such file: {', '.join(missing)}")
    rundir = RunDir.create(out, {
        "id": out.name, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "mobiperf": __version__, "host": platform.node(),
        "target": {"target": "ingested", "label": label, "inputs": [str(p) for p in inputs]},
        "stack": label or "ingested", "scheduler": None, "command": [], "repetitions": [], "warnings": [],
    })
    notes: list[str] = []
    placed = place_inputs(inputs, kind, rundir.raw_dir(0), notes)
    record = {"index": 0, "exit_code": 0, "workload_ns": 0, "ingested": placed}
    rundir.update_meta(repetitions=[record], warnings=notes)
    pipeline.analyze(rundir, reparse=True)
    meta = rundir.read_meta()
    span = _trace_span_ns(rundir)
    if span is not None:
        meta["repetitions"][0]["workload_ns"] = span  # the traced window stands for the workload's duration
    meta["status"] = "complete"
    rundir.write_meta(meta)
    pipeline.report(rundir)
    return rundir


def _trace_span_ns(rundir) -> int | None:
    for table in ("block_event", "syscall_io"):
        if rundir.has_table(table):
            ts = rundir.read_table(table)["ts"]
            if len(ts):
                return int(ts.max() - ts.min())
    return None


@click.command("ingest", epilog=EPILOG)
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="Run directory to create (never overwritten).")
@click.option("--kind", type=click.Choice(KINDS), default="auto", show_default=True,
              help="What the inputs are; auto sniffs each file.")
@click.option("--label", help="A description of where the traces come from (stored as the run's stack).")
def cmd_ingest(inputs, output, kind, label) -> None:
    """Make a run directory from traces collected elsewhere (ftrace text, blktrace files, trace-cmd .dat,
    Perfetto traces, strace logs), then parse, analyze and report it like `mobiperf run` does."""
    rundir = ingest(list(inputs), output, kind=kind, label=label)
    meta = rundir.read_meta()
    for kind_name, files in meta["repetitions"][0]["ingested"].items():
        click.echo(f"{kind_name:<10} {len(files)} file(s)")
    for table in sorted(p.stem for p in (rundir.path / "tables").glob("*.parquet")):
        click.echo(f"table      {table}")
    for w in meta.get("warnings", []):
        click.echo(f"warning    {w}")
    click.echo(f"report: {rundir.path / 'report.html'}")


def register(group: click.Group) -> None:
    group.add_command(cmd_ingest)
