"""An Android app on a device: its uid, its processes, and launching it the way the launcher does.

  package_uid     `pm list packages -U PACKAGE` (`package:NAME uid:N`, Android 8+), else the owner of the
                  package's data directory (`stat -c %u /data/data/PACKAGE`: every app owns its own)
  app_tasks       every task whose process runs with that uid (/proc/PID/status `Uid:`), one `grep -H` over /proc:
                  an app's processes (`PACKAGE`, `PACKAGE:service`...) are forked by zygote, not by the shell, so
                  they are found by uid, never as children
  launch_app      `monkey -p PACKAGE -c android.intent.category.LAUNCHER 1`: the package's launcher activity
                  through the activity manager, as a tap on its icon does (the activity need not be known), else
                  `am start -W` of the activity `cmd package resolve-activity --brief` names
Every command has a timeout; what a device lacks is a TargetError naming it.
"""

from __future__ import annotations

import re
import shlex
import time

from mobiperf.core.errors import TargetError, UsageError
from mobiperf.target.transport import Transport

PACKAGE = re.compile(r"^[A-Za-z][\w]*(?:\.[\w]+)+$")
LAUNCH_TIMEOUT_S = 30


def check_package_name(package: str) -> str:
    """package if it is a Java package name (com.example.app), else a UsageError."""
    if not PACKAGE.match(package):
        raise UsageError(f"--app {package!r}: not a package name (like com.example.app)")
    return package


def package_uid(transport: Transport, package: str) -> int:
    """The uid the package's processes run as (module docstring); TargetError when it is not installed."""
    done = transport.run(["sh", "-c", f"pm list packages -U {shlex.quote(package)} 2>/dev/null"], timeout=30)
    for line in done.text.splitlines():
        m = re.match(r"^package:(\S+)\s+uid:(\d+)", line.strip())
        if m and m.group(1) == package:
            return int(m.group(2))
    done = transport.run(["stat", "-c", "%u", f"/data/data/{package}"], timeout=10)
    if done.returncode == 0 and done.text.strip().isdigit():
        return int(done.text.strip())
    raise TargetError(f"package {package} is not installed on the device (neither `pm list packages -U` nor "
                      f"/data/data/{package} knows it)")


def app_tasks(transport: Transport, uid: int) -> dict[int, list[int]]:
    """{pid: [tid, ...]} of every process running as uid (its threads from /proc/PID/task)."""
    done = transport.run(["sh", "-c", "grep -H '^Uid:' /proc/[0-9]*/status 2>/dev/null"], timeout=30)
    pids = []
    for line in done.text.splitlines():
        m = re.match(r"^/proc/(\d+)/status:Uid:\s+(\d+)", line)
        if m and int(m.group(2)) == uid:
            pids.append(int(m.group(1)))
    out = {}
    for pid in pids:
        tasks = transport.run(["ls", f"/proc/{pid}/task"], timeout=10)
        if tasks.returncode == 0:
            out[pid] = sorted(int(t) for t in tasks.text.split() if t.isdigit())
    return out


def launch_app(transport: Transport, package: str, uid: int, *,
               timeout_s: float = LAUNCH_TIMEOUT_S) -> tuple[str, dict[int, list[int]]]:
    """Start the package's launcher activity and wait until a process of its uid runs; how it was started, and
    the app's tasks then (app_tasks)."""
    how = f"monkey -p {package} -c android.intent.category.LAUNCHER 1"
    done = transport.run(["sh", "-c", how], timeout=timeout_s)
    if done.returncode != 0:
        resolved = transport.run(["sh", "-c", "cmd package resolve-activity --brief -c "
                                  f"android.intent.category.LAUNCHER {shlex.quote(package)}"], timeout=30)
        activity = resolved.text.strip().splitlines()[-1] if resolved.returncode == 0 and resolved.text else ""
        if "/" not in activity:
            raise TargetError(f"could not launch {package}: `{how}` failed ({done.text.strip()[-200:]}) and no "
                              "launcher activity was resolved")
        how = f"am start -W -n {activity}"
        transport.run(["sh", "-c", how], timeout=timeout_s).check()
    deadline = time.monotonic() + timeout_s
    while not (tasks := app_tasks(transport, uid)):
        if time.monotonic() > deadline:
            raise TargetError(f"{package} did not start within {timeout_s:g} s of `{how}`")
        time.sleep(0.1)
    return how, tasks
