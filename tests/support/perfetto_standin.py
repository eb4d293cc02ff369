"""A stand-in for Android's `perfetto` command, for the loopback device (which runs commands on this host).

It takes the documented command line of the real binary (perfetto_cmd.cc's usage):
  -c/--config FILE|-   the TraceConfig (binary, or text with --txt), `-` from stdin
  -o/--out FILE        where the trace goes
  --background, -d     fork, print the background process's pid, exit 0; `kill -TERM PID` ends the session
  --background-wait, -D  the same, once the data sources have started (exit non-zero if they did not)
  --help, --version
and records what the config's linux.ftrace data source asks (ftrace_events, buffer_size_kb, instance_name) from
this machine's tracefs: in the tracefs instance the config names (which must exist, as for traced_probes), else
in an instance of its own (the real traced_probes would use the top level, which other users of this shared
machine also use); with the boot clock, as traced_probes sets it. On SIGTERM/SIGINT (or after duration_ms) it
stops tracing, drains every CPU's binary pages and writes them as a Perfetto trace with the perfetto package's
protos (tests/support/perfetto_capture.py: typed events, self-described generic ones, the process tree of the saved
cmdlines, ftrace stats), then leaves the instance as it found it (its own removed).
What it does not do: atrace categories (logged as unsupported), linux.process_stats' periodic polls, any other
data source, triggers, clones, uploads. With PERFETTO_STANDIN_VERSION=35 in its environment it is a binary older
than ftrace_config.instance_name (v36): its --txt parser rejects the field, as those do.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from ftrace_raw_capture import drain_buffer as _drain  # run as a script: tests/support is on sys.path

sys.path.insert(0, str(Path(__file__).resolve().parent))

TRACEFS = Path("/sys/kernel/tracing")
USAGE = """Usage: perfetto
  --background     -d      : Exits immediately and continues in the background.
  --background-wait -D     : Like --background, but waits for all data sources to be started before exiting.
  --config         -c      : /path/to/trace/config/file or - for stdin
  --out            -o      : /path/to/out/trace/file or - for stdout
  --txt                    : Parse config as pbtxt. Not for production use.
  --help           -h
"""


def parse_config(raw: bytes, text: bool):
    from google.protobuf import text_format

    from mobiperf.core.perfetto_protos import message_class

    cfg = message_class("TraceConfig")()
    if text:
        text_format.Parse(raw.decode(), cfg)
    else:
        cfg.ParseFromString(raw)
    ftrace = [d.config.ftrace_config for d in cfg.data_sources if d.config.name == "linux.ftrace"]
    if not ftrace:
        raise SystemExit("perfetto: the config has no linux.ftrace data source")
    return cfg, ftrace[0]


class Session:
    def __init__(self, ftrace_cfg, duration_ms: int):
        self.own = not ftrace_cfg.instance_name
        self.name = ftrace_cfg.instance_name or f"mobiperf-{os.getpid()}-perfetto"
        self.root = TRACEFS / "instances" / self.name
        self.events = [e for e in ftrace_cfg.ftrace_events if (TRACEFS / "events" / e / "format").exists()]
        self.missing = [e for e in ftrace_cfg.ftrace_events if e not in self.events]
        self.buffer_kb = ftrace_cfg.buffer_size_kb or 2048
        self.duration_ms = duration_ms
        if ftrace_cfg.atrace_categories:
            print(f"perfetto stand-in: atrace categories are not supported: {list(ftrace_cfg.atrace_categories)}",
                  file=sys.stderr)

    def start(self) -> None:
        if self.own:
            self.root.mkdir()
        elif not self.root.is_dir():
            raise SystemExit(f"perfetto: tracefs instance {self.name} does not exist")
        (self.root / "tracing_on").write_text("0")
        (self.root / "buffer_size_kb").write_text(str(self.buffer_kb))
        (self.root / "trace_clock").write_text("boot")
        for e in self.events:
            (self.root / "events" / e / "enable").write_text("1")
        (self.root / "tracing_on").write_text("1")

    def finish(self, out: Path) -> None:
        from perfetto_capture import to_perfetto

        (self.root / "tracing_on").write_text("0")
        capture = Path(tempfile.mkdtemp(prefix="perfetto-standin-"))
        try:
            formats = capture / "formats"
            for e in [*self.events, "ftrace/print"]:
                (formats / e).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(TRACEFS / "events" / e / "format", formats / e / "format")
            for header in ("header_page", "header_event"):
                shutil.copyfile(TRACEFS / "events" / header, formats / header)
            raw = capture / "ftrace_raw"
            raw.mkdir()
            for cpu in sorted((self.root / "per_cpu").iterdir()):
                (raw / cpu.name).write_bytes(_drain(cpu / "trace_pipe_raw"))
            shutil.copyfile(TRACEFS / "saved_cmdlines", raw / "saved_cmdlines")
            data = to_perfetto(capture, "descriptor", clock=0)
            tmp = out.with_name(f".{out.name}.tmp")
            tmp.write_bytes(data)
            tmp.replace(out)
        finally:
            shutil.rmtree(capture, ignore_errors=True)
            self.close()

    def close(self) -> None:
        try:
            for e in self.events:
                (self.root / "events" / e / "enable").write_text("0")
        except OSError:
            pass
        if self.own:
            for _ in range(50):
                try:
                    self.root.rmdir()
                    return
                except FileNotFoundError:
                    return
                except OSError:
                    time.sleep(0.1)




def record(session: Session, out: Path, ready_fd: int | None) -> int:
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    try:
        session.start()
    except BaseException as e:
        session.close()
        if ready_fd is not None:
            os.write(ready_fd, b"\x01")
        print(f"perfetto: {e}", file=sys.stderr)
        return 1
    if ready_fd is not None:
        os.write(ready_fd, b"\x00")
        os.close(ready_fd)
    deadline = time.monotonic() + session.duration_ms / 1000 if session.duration_ms else None
    while not stop and (deadline is None or time.monotonic() < deadline):
        time.sleep(0.05)
    session.finish(out)
    return 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("-c", "--config")
    ap.add_argument("-o", "--out")
    ap.add_argument("--txt", action="store_true")
    ap.add_argument("-d", "--background", action="store_true")
    ap.add_argument("-D", "--background-wait", action="store_true")
    ap.add_argument("-h", "--help", action="store_true")
    ap.add_argument("--version", action="store_true")
    args, unknown = ap.parse_known_args(argv)
    if args.help or unknown:
        sys.stderr.write(USAGE)
        return 0 if args.help else 1
    if args.version:
        print("perfetto stand-in (mobiperf tests) v0")
        return 0
    if not args.config or not args.out:
        sys.stderr.write(USAGE)
        return 1
    raw = sys.stdin.buffer.read() if args.config == "-" else Path(args.config).read_bytes()
    if int(os.environ.get("PERFETTO_STANDIN_VERSION", "99")) < 36 and b"instance_name" in raw:
        print("perfetto: Could not parse TraceConfig: unknown field instance_name", file=sys.stderr)
        return 1
    cfg, ftrace_cfg = parse_config(raw, args.txt)
    session = Session(ftrace_cfg, cfg.duration_ms)
    out = Path(args.out)
    if not (args.background or args.background_wait):
        return record(session, out, None)
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the background session: its own session, no ties to the caller's terminal or pipes
        os.close(ready_r)
        if not args.background_wait:  # nobody waits for the acknowledgement
            os.close(ready_w)
            ready_w = None
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os._exit(record(session, out, ready_w))
    os.close(ready_w)
    status = os.read(ready_r, 1) if args.background_wait else b"\x00"
    print(pid, flush=True)
    return 0 if status == b"\x00" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
