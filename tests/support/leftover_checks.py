"""What a mobiperf run changed on this machine, and whether any of it is left: an oracle for the tests and the soak.

It reads a live run's undo journal (what the run says it changed, with the old values) and then looks at the
machine directly, without mobiperf's own undo code: /proc/self/mounts, /sys/block/loop*/loop/backing_file,
the directories of tracefs instances and cgroups, the sysfs values, and /proc/*/environ for the run's owner token.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

JOURNALS = Path("/var/tmp/mobiperf/journal")


def journal_lines(path: Path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def wait_for_journal(pid: int, *, kinds: set[str], timeout: float = 120, directory: Path = JOURNALS,
                     proc=None) -> tuple[dict, list[dict]]:
    """(header, change entries) of the journal of mobiperf process pid, once it holds entries of all kinds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in directory.glob(f"{pid}-*.jsonl"):
            lines = journal_lines(path)
            entries = _entries(lines[1:])
            if lines and kinds <= {e["kind"] for e in entries}:
                return lines[0], entries
        assert proc is None or proc.poll() is None, f"mobiperf ended early: {proc.returncode}"
        time.sleep(0.1)
    raise AssertionError(f"no journal of pid {pid} with {kinds} in {directory} after {timeout:g} s")


def _entries(lines: list[dict]) -> list[dict]:
    by_id: dict[int, dict] = {}
    for item in lines:
        if "kind" in item:
            by_id[item["id"]] = dict(item)
        elif "update" in item and item["update"] in by_id:
            by_id[item["update"]].update({k: v for k, v in item.items() if k != "update"})
    return list(by_id.values())


def _mounts() -> set[str]:
    return {line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()}


def _backing(loop: str) -> str | None:
    try:
        return (Path("/sys/block") / Path(loop).name / "loop" / "backing_file").read_text().strip()
    except OSError:
        return None


def _choice(text: str) -> str:
    return text[text.index("[") + 1:text.index("]")] if "[" in text else text.strip()


def owned_pids(token: str) -> dict[int, str]:
    needle = f"MOBIPERF_OWNER={token}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found[int(entry.name)] = (entry / "comm").read_text().strip()
            except OSError:
                pass
    return found


def remaining(header: dict, entries: list[dict]) -> list[str]:
    """What of a run's changes is still in place: an empty list when it left the machine as it found it."""
    left = []
    mounts = _mounts()
    for e in entries:
        kind = e["kind"]
        if kind == "mount" and e["path"] in mounts:
            left.append(f"mount {e['path']}")
        elif kind == "loop":
            held = [d.name for d in Path("/sys/block").glob("loop*")
                    if (_backing(d.name) or "").split(" (deleted)")[0] == e["image"]]
            if held:
                left.append(f"loop {held} over {e['image']}")
        elif kind in ("dir", "cgroup", "tracefs_instance", "file") and os.path.exists(e["path"]):
            left.append(f"{kind} {e['path']}")
        elif kind in ("sysfs", "bdi"):
            left += changed_values(e, entries)
    left += [f"process {pid} ({name})" for pid, name in owned_pids(header["token"]).items()]
    return left


def changed_values(e: dict, entries: list[dict]) -> list[str]:
    """A value not back to its old one, unless another process has attached the loop device since (then the
    value is that process's business)."""
    ours = next((x for x in entries if x["kind"] == "loop" and x.get("device")), None)
    loop = ours["device"] if ours else None
    someone_elses = bool(loop and _backing(loop) and _backing(loop).split(" (deleted)")[0] != ours["image"])
    knobs = {e["path"]: e["old"]} if e["kind"] == "sysfs" else \
        {f"{e['path']}/{k}": v for k, v in e["old"].items()}
    changed = []
    for path, old in knobs.items():
        try:
            now = Path(path).read_text()
        except OSError:
            continue
        if _choice(now) != _choice(old) and not someone_elses:
            changed.append(f"{path} = {_choice(now)!r} (was {_choice(old)!r})")
    return changed


def wait_until_gone(header: dict, entries: list[dict], timeout: float = 30) -> list[str]:
    """remaining(), after giving dying helpers a moment; the last list seen."""
    deadline = time.monotonic() + timeout
    while True:
        left = remaining(header, entries)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)
