"""`mobiperf ingest`: a run directory from traces collected elsewhere (a phone's ftrace text, systrace or Perfetto
trace, a blktrace file set or blkparse text, a trace-cmd .dat, a strace log), analysed and reported like
`mobiperf run`.

A Perfetto trace (protobuf packets, gzip'ed, or a bugreport zip holding one) goes whole to raw/rep0/trace.pftrace:
its reader (collectors/parse/perfetto_trace.py) opens gzip and zip itself.

Containers are opened first, by content (collectors/parse/compressed.py: gzip, zstd, xz, zip, atrace -z, systrace
HTML). Each trace is then copied into raw/rep0/ under the name its parser looks for (ftrace.txt, ftrace-1.txt,
blktrace/, blkparse/, strace.log), raw/inputs.json keeps the user's name of each, and the same parse, analyze and
report stages run (pipeline.analyze, pipeline.report). The kind of a trace is told by its content unless --kind
says it (collectors/parse/detect.py): blktrace magic, trace-cmd's magic, strace, blkparse or ftrace lines, a
directory with formats/ (binary trace_pipe_raw pages); a file that is none of them is refused, naming it.
A trace-cmd .dat (versions 6 and 7, zstd/zlib/uncompressed) is unpacked natively into the formats/ and per-CPU
pages of an ftrace-raw input (collectors/parse/trace_cmd_dat.py; no trace-cmd needed, exact ns timestamps); of
several buffers (-B instances) the first with events. What the native reader does not decode (big-endian files,
latency traces, other compressions, a second .dat of the same run) is turned into text with `trace-cmd report`
instead, with a warning (the tool must then be installed; libtraceevent prints ioprio as `0x2,0,4`, which the
text parser reads).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import click

from mobiperf.core.errors import MissingTableError, MobiperfError, ParseError, UsageError

KINDS = ("auto", "ftrace", "ftrace-raw", "blktrace", "blkparse", "strace", "trace-cmd", "perfetto")
EPILOG = """

\b
Examples:
  mobiperf ingest phone-trace.txt -o runs/pixel-ftrace
  mobiperf ingest systrace.html.gz -o runs/pixel-html       (atrace -z output, .gz/.zst/.zip/.html likewise)
  mobiperf ingest sda.blktrace.0 sda.blktrace.1 -o runs/blk
  mobiperf ingest sda.blkparse.txt -o runs/blkparse
  mobiperf ingest custom.txt --kind blkparse --blkparse-format '%T.%t %a %d %S %n\\n' -o runs/custom
  mobiperf ingest trace.dat --kind trace-cmd -o runs/tc
  mobiperf ingest pixel.pftrace -o runs/pixel      (Perfetto: .pftrace/.perfetto-trace/.pb, gzip, bugreport.zip)
  mobiperf ingest pixel-pages/ -o runs/raw      (cpuN trace_pipe_raw files and the formats/ saved with them)
  mobiperf ingest ftrace.txt app.strace -o runs/app --label "Pixel 6, app launch"
"""
TEXT_PLACES = {"ftrace": ("ftrace", ".txt"), "strace": ("strace", ".log"), "process-dump": ("process_dump", ".txt")}


def sniff_kind(path: Path) -> str:
    """The kind of a plain trace file (or directory) from its content: a KINDS entry, or "unknown"."""
    from mobiperf.collectors.parse.detect import sniff_plain

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
    return sniff_plain(head)


def place_inputs(inputs: list[Path], kind: str, raw: Path, warnings: list[str] | None = None,
                 blkparse_format: str | None = None) -> dict[str, list[str]]:
    """Copy (or convert) every input into raw/ under its parser's file name; what went where. Containers (gzip,
    zstd, xz, zip, atrace -z, systrace HTML) are opened first (collectors/parse/compressed.py) and every trace
    inside is placed by its own content. The user's name of each placed file goes to raw/inputs.json. Notes for
    the user (a .dat read through trace-cmd, a truncated .dat) are appended to warnings. An input that is no
    trace mobiperf reads is a UsageError naming it."""
    from mobiperf.collectors.parse.compressed import unpack
    from mobiperf.collectors.parse.perfetto_sniff import sniff_perfetto

    warnings = [] if warnings is None else warnings
    placed: dict[str, list[str]] = {}
    labels: dict[str, str] = {}
    scratch = raw / "unpacked"
    try:
        for path in inputs:
            if path.is_dir():
                k = sniff_kind(path) if kind == "auto" else kind
                placed.setdefault(k, []).append(str(path))
                _place_dir(path, k, raw, labels)
                continue
            if kind in ("auto", "perfetto") and sniff_perfetto(path):  # its reader opens gzip and zip itself
                _place_perfetto(path, raw, labels)
                placed.setdefault("perfetto", []).append(str(path))
                continue
            for item in unpack(path, scratch, str(path)):
                k = _kind_of(item.path, item.label, kind)
                placed.setdefault(k, []).append(item.label)
                _place_file(item.path, item.label, k, raw, labels, warnings, moved=item.path != path)
        if blkparse_format is not None and (raw / "blkparse").is_dir():
            (raw / "blkparse" / "format.txt").write_text(blkparse_format + "\n")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    (raw / "inputs.json").write_text(json.dumps(labels, indent=1) + "\n")
    return placed


def _kind_of(path: Path, label: str, kind: str) -> str:
    from mobiperf.collectors.parse.detect import describe_head

    with open(path, "rb") as f:
        head = f.read(4096)
    if not head:
        if ".blktrace." in Path(label).name:
            return "blktrace"  # a CPU that saw no IO leaves its per-CPU file empty
        raise UsageError(f"{label}: an empty file")
    if kind != "auto":
        return kind
    found = sniff_kind(path)
    if found == "unknown":
        raise UsageError(f"{label}: not a trace mobiperf reads ({describe_head(head)}); it reads ftrace text, "
                         "systrace/atrace output, trace-cmd .dat, Perfetto traces, blktrace, blkparse text and "
                         "strace logs")
    return found


def _place_dir(path: Path, k: str, raw: Path, labels: dict[str, str]) -> None:
    if k == "blktrace":
        for src in sorted(p for p in path.iterdir() if p.is_file()):
            _place_blktrace(src, f"{path}/{src.name}", raw, labels, moved=False)
    elif k == "ftrace-raw":
        formats = path / "formats" if (path / "formats").is_dir() else path.parent / "formats"
        pages = path / "ftrace_raw" if (path / "ftrace_raw").is_dir() else path
        shutil.copytree(formats, raw / "formats", dirs_exist_ok=True)
        shutil.copytree(pages, raw / "ftrace_raw", dirs_exist_ok=True,
                        ignore=lambda d, names: [n for n in names if n == "formats"])
        labels["ftrace_raw"] = str(path)
    else:
        raise UsageError(f"{path}: a directory can be ingested as blktrace files or ftrace-raw pages, not {k}")


def _place_file(src: Path, label: str, k: str, raw: Path, labels: dict[str, str], warnings: list[str],
                moved: bool) -> None:
    if k == "blktrace":
        _place_blktrace(src, label, raw, labels, moved)
    elif k == "blkparse":
        dest = raw / "blkparse"
        dest.mkdir(exist_ok=True)
        name = f"{len(list(dest.iterdir())):02d}-{_safe(Path(label).name)}"
        _put(src, dest / name, moved)
        labels[f"blkparse/{name}"] = label
    elif k in TEXT_PLACES:
        stem, ext = TEXT_PLACES[k]
        n = len([p for p in labels if p.startswith(stem) and p.endswith(ext)])
        name = f"{stem}{ext}" if n == 0 else f"{stem}-{n}{ext}"
        _put(src, raw / name, moved)
        labels[name] = label
    elif k == "trace-cmd":
        text = _trace_cmd_dat(src, raw, warnings)
        if text is not None:
            _place_file(text, label, "ftrace", raw, labels, warnings, moved=True)
        else:
            labels["ftrace_raw"] = label
    else:
        raise UsageError(f"unknown kind {k!r}; kinds are {', '.join(KINDS)}")


def _place_perfetto(path: Path, raw: Path, labels: dict[str, str]) -> None:
    if (raw / "trace.pftrace").exists():
        raise UsageError(f"{path}: one Perfetto trace per run (ingest the others into runs of their own)")
    shutil.copyfile(path, raw / "trace.pftrace")
    labels["trace.pftrace"] = str(path)


def _place_blktrace(src: Path, label: str, raw: Path, labels: dict[str, str], moved: bool) -> None:
    dest = raw / "blktrace"
    dest.mkdir(exist_ok=True)
    name = Path(label).name
    if ".blktrace." not in name and not name.endswith((".blktrace", ".blkbin")):
        name += ".blkbin"  # a single stream (blkparse -d output, blk tracer capture)
    name = _safe(name)
    _put(src, dest / name, moved)
    labels[f"blktrace/{name}"] = label


def _safe(name: str) -> str:
    return re.sub(r"[^\w.+-]", "_", name) or "input"


def _put(src: Path, dest: Path, moved: bool) -> None:
    """src at dest: moved when it is a scratch copy (an unpacked container), else copied."""
    if moved:
        shutil.move(src, dest)
    else:
        shutil.copyfile(src, dest)


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
    others = [repr(n) for n in got.buffers if n not in got.read]
    if len(got.read) > 1 or others:
        warnings.append(f"ingest: {dat}: buffer{'s' if len(got.read) > 1 else ''} "
                        f"{', '.join(repr(n) for n in got.read)} read" + (", merged by time" if len(got.read) > 1
                                                                          else "")
                        + (f"; also in the file, not read (no events, or another clock): {', '.join(others)}"
                           if others else ""))
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


def ingest(inputs: list[Path], out: Path, *, kind: str = "auto", label: str | None = None,
           blkparse_format: str | None = None, report: bool = True):
    """Build, parse, analyze and report a run directory from foreign traces; returns the RunDir.

    An ingest that fails before its traces are parsed, or whose traces hold no event mobiperf reads, leaves no
    run directory behind (the same -o can be used again) and says why in one line naming the user's file."""
    from mobiperf.core.run_facts import new_run_meta
    from mobiperf.core.runstore import RunDir
    from mobiperf.orchestration import pipeline

    missing = [str(p) for p in inputs if not p.exists()]
    if missing:
        raise UsageError(f"no such file: {', '.join(missing)}")
    rundir = RunDir.create(out, new_run_meta(
        out.name, target={"target": "ingested", "label": label, "inputs": [str(p) for p in inputs]},
        stack=label or "ingested", command=[], warnings=[]))
    raw = rundir.raw_dir(0)
    try:
        notes: list[str] = []
        placed = place_inputs(inputs, kind, raw, notes, blkparse_format)
        record = {"index": 0, "exit_code": 0, "workload_ns": 0, "ingested": placed}
        rundir.update_meta(repetitions=[record], warnings=notes)
        pipeline.analyze(rundir, reparse=True)
        _refuse_if_empty(rundir, inputs)
    except MissingTableError:  # not one table parsed
        shutil.rmtree(rundir.path, ignore_errors=True)
        raise UsageError(f"{', '.join(map(str, inputs))}: no block, file system, system call or marker event "
                         "found") from None
    except MobiperfError as e:
        shutil.rmtree(rundir.path, ignore_errors=True)
        raise (UsageError if isinstance(e, ParseError) else type(e))(_user_names(str(e), raw)) from None
    except BaseException:
        shutil.rmtree(rundir.path, ignore_errors=True)
        raise
    meta = rundir.read_meta()
    window = workload_window_ns(rundir)
    record = meta["repetitions"][0]
    if window is not None:  # the traced window (or the markers' one) stands for the workload's duration
        record["workload_ns"], record["workload_window"] = window
    else:  # nothing says how long it ran (a strace log without times): no duration rather than a made-up 0
        record.pop("workload_ns", None)
        record["workload_window"] = "unknown"
    meta["status"] = "complete"
    rundir.write_meta(meta)
    if report:
        pipeline.report(rundir)
    return rundir


def _user_names(message: str, raw: Path) -> str:
    """An error message with the run directory's copies of the inputs named as the user named them."""
    try:
        labels = json.loads((raw / "inputs.json").read_text())
    except (OSError, ValueError):
        return message
    for placed, label in sorted(labels.items(), key=lambda kv: -len(kv[0])):
        message = message.replace(str(raw / placed), label)
    return message


def _refuse_if_empty(rundir, inputs: list[Path]) -> None:
    """A UsageError when the parsed tables hold no event at all (what the traces did hold, if anything)."""
    import polars as pl

    from mobiperf.core.schema import TABLES

    # who is who (a process dump, the tgid column) is no event of its own
    events = [t for t in TABLES if t != "task"]
    if any(rundir.has_table(t) and rundir.scan_table(t).select(pl.len()).collect().item() for t in events):
        return
    meta = rundir.read_meta()
    seen: dict[str, int] = {}
    for summary in meta.get("parse", {}).get("repetitions", {}).values():
        for s in summary.values():
            if isinstance(s, dict):
                for ev, n in (s.get("other_events") or {}).items():
                    seen[ev] = seen.get(ev, 0) + n
    names = ", ".join(str(p) for p in inputs)
    held = (f"; it holds only {', '.join(f'{ev} ({n})' for ev, n in sorted(seen.items(), key=lambda kv: -kv[1])[:4])}"
            if seen else "")
    raise UsageError(f"{names}: no block, file system, system call or marker event found{held}")


WINDOW_START = r"(?i)timed_start|trace_marker_start"
WINDOW_END = r"(?i)timed_end|trace_marker_stop"
TRACE_CLOCK_TABLES = ("block_event", "trace_marker", "fsync_event", "jbd2_commit", "fuse_event", "fs_event",
                      "android_fs_event", "blktrace_event")


def workload_window_ns(rundir) -> tuple[int, str] | None:
    """How long the traced workload ran, and what says so: the window between start and end markers (the
    generator's `timed_start`/`timed_end`, LISA's TRACE_MARKER_START/STOP) when the trace has both, else the span
    of the trace clock (every event line of the ftrace sources, read by a table or not, and the trace-clock
    tables), else the span of the strace log (wall clock; never mixed with the trace clock)."""
    import polars as pl

    if rundir.has_table("trace_marker"):
        m = rundir.read_table("trace_marker")  # small: the text is needed
        lo = m.filter(pl.col("text").str.contains(WINDOW_START))["ts"].min()
        hi = m.filter(pl.col("text").str.contains(WINDOW_END))["ts"].max()
        if lo is not None and hi is not None and hi > lo:
            return int(hi - lo), "markers"
    parsed = [s.get("span_ns") for summary in rundir.read_meta().get("parse", {}).get("repetitions", {}).values()
              for s in summary.values() if isinstance(s, dict) and s.get("span_ns")]
    for tables, what in ((TRACE_CLOCK_TABLES, "trace span"), (("syscall_io",), "strace span")):
        spans = [rundir.scan_table(t).select(pl.col("ts").min().alias("lo"), pl.col("ts").max().alias("hi"))
                 .collect() for t in tables if rundir.has_table(t)]
        if what == "trace span" and parsed:
            spans.append(pl.DataFrame({"lo": [p[0] for p in parsed], "hi": [p[1] for p in parsed]}))
        both = pl.concat(spans).drop_nulls() if spans else None
        if both is not None and len(both):
            return int(both["hi"].max() - both["lo"].min()), what
    return None


@click.command("ingest", epilog=EPILOG)
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="Run directory to create (never overwritten).")
@click.option("--kind", type=click.Choice(KINDS), default="auto", show_default=True,
              help="What the inputs are; auto sniffs each file.")
@click.option("--label", help="A description of where the traces come from (stored as the run's stack).")
@click.option("--blkparse-format", metavar="FMT",
              help="The -f format blkparse wrote the text inputs with (default: blkparse's own).")
@click.option("--no-report", is_flag=True, help="Parse and analyze only (`mobiperf report RUNDIR` draws it later).")
def cmd_ingest(inputs, output, kind, label, blkparse_format, no_report) -> None:
    """Make a run directory from traces collected elsewhere (ftrace text, systrace and atrace output, blktrace
    files, blkparse text, trace-cmd .dat, Perfetto traces, strace logs; compressed or zipped as they are shared),
    then parse, analyze and report it like `mobiperf run` does."""
    rundir = ingest(list(inputs), output, kind=kind, label=label, blkparse_format=blkparse_format,
                    report=not no_report)
    meta = rundir.read_meta()
    for kind_name, files in meta["repetitions"][0]["ingested"].items():
        click.echo(f"{kind_name:<10} {len(files)} file(s)")
    for table in sorted(p.stem for p in (rundir.path / "tables").glob("*.parquet")):
        click.echo(f"table      {table}")
    for w in meta.get("warnings", []):
        click.echo(f"warning    {w}")
    click.echo(f"report: {rundir.path / 'report.html'}" if not no_report else f"run: {rundir.path}")


def register(group: click.Group) -> None:
    group.add_command(cmd_ingest)
