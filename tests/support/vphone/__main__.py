"""python -m vphone {build,up,down,status} (run with tests/support on PYTHONPATH; make vphone does).

  build [--kernel 6.1|6.12] [--rebuild]     the image, from the cache or built (image.py)
  up [--kernel K] [--port P] [--accel auto|kvm|tcg] [--rtc BASE]
                                            build if needed, boot, `adb connect` on the adb server of
                                            ANDROID_ADB_SERVER_PORT (default 5037), print the serial
  down [--port P]                           stop the phones started by up (all, or the one on port P) and undo
                                            what each left, through its undo journal
  status                                    the phones up started, one line each

Exit status 0 on success; 1 with one line saying why otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vphone.image import KERNELS, ImageError, ensure_image  # noqa: E402
from vphone.machine import BootError, PhoneState, boot_phone, default_run_base  # noqa: E402


def say(line: str) -> None:
    print(line, file=sys.stderr)


def adb_server_port() -> int:
    return int(os.environ.get("ANDROID_ADB_SERVER_PORT") or 5037)


def cmd_build(args) -> int:
    path = ensure_image(args.kernel, rebuild=args.rebuild, say=say)
    print(path)
    return 0


def cmd_up(args) -> int:
    adb = shutil.which("adb")
    if adb is None:
        raise BootError("no adb client (apt-get install adb)")
    image = ensure_image(args.kernel, say=say)
    phone = boot_phone(image, port=args.port, accel=args.accel, rtc=args.rtc, detached=True)
    try:
        phone.connect(adb, adb_server_port())
    except BaseException:
        phone.stop(adb)
        raise
    state = phone.detach(adb_server_port())
    say(f"vphone: Android 14 on kernel {state.kernel}, {state.accel}"
        + (f" ({state.accel_note})" if state.accel_note else "")
        + f", adb shell in {state.boot_s:.1f} s; `make vphone-down` stops it")
    print(state.serial)
    return 0


def running_phones(base: Path) -> list[PhoneState]:
    phones = []
    for path in sorted(base.glob("*/phone.json")):
        try:
            phones.append(PhoneState(**json.loads(path.read_text())))
        except (OSError, ValueError, TypeError):
            continue
    return phones


def cmd_down(args) -> int:
    from vphone.lifecycle import stop_detached

    phones = [p for p in running_phones(default_run_base()) if args.port in (None, p.port)]
    if not phones:
        say("vphone: no phone is up" + (f" on port {args.port}" if args.port else ""))
        return 0
    failed = 0
    for state in phones:
        problems = stop_detached(state)
        for problem in problems:
            say(f"vphone: {state.serial}: could not undo {problem}")
        failed += bool(problems)
        if not problems:
            say(f"vphone: {state.serial} stopped, nothing of it left")
    return 1 if failed else 0


def cmd_status(args) -> int:
    from vphone.lifecycle import is_running

    for state in running_phones(default_run_base()):
        alive = "running" if is_running(state) else "gone (make vphone-down undoes what it left)"
        print(f"{state.serial}  kernel {state.kernel}  {state.accel}  pid {state.pid}  {alive}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vphone", description="The virtual phone (tests/support/vphone).")
    sub = ap.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build the image if the cache lacks it")
    up = sub.add_parser("up", help="boot a phone and connect adb to it")
    for p in (build, up):
        p.add_argument("--kernel", choices=sorted(KERNELS), default="6.1")
    build.add_argument("--rebuild", action="store_true")
    up.add_argument("--port", type=int, help="host port adb connects to (default: a free one of "
                                             "MOBIPERF_VPHONE_PORTS, 5600-5699)")
    up.add_argument("--accel", choices=("auto", "kvm", "tcg"), default="auto")
    up.add_argument("--rtc", default="utc", help="the guest's realtime clock at boot (QEMU -rtc base=)")
    down = sub.add_parser("down", help="stop the phones up started")
    down.add_argument("--port", type=int)
    sub.add_parser("status", help="list the phones up started")
    args = ap.parse_args(argv)
    sys.argv[0] = "python -m vphone"   # what the undo journal's header says started the phone
    try:
        return {"build": cmd_build, "up": cmd_up, "down": cmd_down, "status": cmd_status}[args.command](args)
    except (ImageError, BootError) as e:
        say(f"vphone: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
