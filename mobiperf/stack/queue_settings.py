"""A loop device's settings outlive its attachment: resetting them before use.

/dev/loopN and its request queue persist when the device is detached (`losetup -d`), and so do its IO scheduler
and the dirty-limit knobs of its BDI (strict_limit, min/max_ratio, min/max_bytes). A run that set bfq and a 64 MiB
dirty limit and was killed before restoring them throttles the next run that gets the same loop device, and that
run would record `scheduler: default` and no dirty limit while running under both. So before using a loop device
mobiperf resets these settings to those of a fresh loop device and records what it found
(`reset_loop_device`); `stale_loop_devices` lists the detached ones whose settings differ (`mobiperf doctor`).

A fresh loop device has no IO scheduler (the loop driver asks for none by default; every untouched loop device of
the development host shows `[none]`), strict_limit 0, min_ratio 0 and max_ratio 100 % (the _fine files hold the
ratios in millionths; min/max_bytes are derived from them and need no reset of their own).
"""

from __future__ import annotations

from pathlib import Path

from mobiperf.core.errors import MobiperfError
from mobiperf.target.transport import Transport

FRESH_SCHEDULER = "none"
FRESH_BDI = {"min_ratio_fine": "0", "max_ratio_fine": "1000000", "strict_limit": "0"}  # written in this order


def loop_settings(transport: Transport, device: str) -> dict[str, str]:
    """{"scheduler": active, "strict_limit": ..., "min_ratio_fine": ..., "max_ratio_fine": ...} of a block device
    (knobs this kernel lacks are left out)."""
    name = Path(device).name
    settings = {}
    scheduler = _read(transport, f"/sys/block/{name}/queue/scheduler")
    if scheduler is not None:
        settings["scheduler"] = _active(scheduler)
    dev = _read(transport, f"/sys/block/{name}/dev")
    for knob in FRESH_BDI:
        value = _read(transport, f"/sys/class/bdi/{dev}/{knob}") if dev else None
        if value is not None:
            settings[knob] = value
    return settings


def non_fresh(settings: dict[str, str]) -> dict[str, str]:
    """The settings that differ from a fresh loop device's."""
    fresh = {"scheduler": FRESH_SCHEDULER, **FRESH_BDI}
    return {k: v for k, v in settings.items() if k in fresh and v != fresh[k]}


def reset_loop_device(transport: Transport, device: str) -> dict[str, str]:
    """Give a loop device we just attached the settings of a fresh one; returns those it had instead (empty when
    it was fresh). The bdi ratios go min to 0 first, so that min never exceeds max on the way."""
    found = non_fresh(loop_settings(transport, device))
    if not found:
        return {}
    name = Path(device).name
    if "scheduler" in found:
        _write(transport, f"/sys/block/{name}/queue/scheduler", FRESH_SCHEDULER)
    dev = _read(transport, f"/sys/block/{name}/dev")
    if any(k in found for k in FRESH_BDI):
        for knob, value in FRESH_BDI.items():
            _write(transport, f"/sys/class/bdi/{dev}/{knob}", value)
    left = non_fresh(loop_settings(transport, device))
    if left:
        raise MobiperfError(f"{device} keeps settings of an earlier user that could not be reset: {left}")
    return found


def stale_loop_devices(transport: Transport) -> dict[str, dict[str, str]]:
    """{"/dev/loopN": non-fresh settings} of the detached loop devices whose settings an earlier user left."""
    script = ("for d in /sys/block/loop*; do [ -e \"$d/loop/backing_file\" ] && continue; "
              "echo \"${d##*/}\"; done; true")
    stale = {}
    for name in transport.run(["sh", "-c", script], timeout=30).text.split():
        found = non_fresh(loop_settings(transport, f"/dev/{name}"))
        if found:
            stale[f"/dev/{name}"] = found
    return stale


def _active(text: str) -> str:
    return text[text.index("[") + 1:text.index("]")] if "[" in text and "]" in text else text.strip()


def _read(transport: Transport, path: str) -> str | None:
    try:
        return transport.read_file(path).decode(errors="replace").strip()
    except MobiperfError:
        return None


def _write(transport: Transport, path: str, value: str) -> None:
    transport.write_file(path, value.encode())
