"""The adb client program as mobiperf drives it: where it is, the environment that points it at a server, the
server started once on its own, the devices it lists, and how what it returns reads (a device shell's statuses,
the status marker each command ends with). The transport (adb.py) and its background processes (adb_process.py)
are built on these.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from mobiperf.core.errors import TargetError
from mobiperf.core.lifeline import without_token

ADB_STATE_TIMEOUT_S = 10.0
SERVER_START_TIMEOUT_S = 30.0
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")   # what a device shell takes as an environment variable name


def shell_status(code: int) -> int:
    """A device shell's status in subprocess terms: 128+N (ended by signal N) becomes -N."""
    return -(code - 128) if 128 < code < 160 else code


def decode(data: bytes) -> str:
    """What the client or a device command printed, as text for a message."""
    return data.decode(errors="replace").strip()


def strip_marker(stderr: bytes, marker: str) -> tuple[bytes, int | None]:
    """stderr without the trailing status marker, and that status (None if the marker is missing). The marker may
    end its line (echo, a builtin in every shell) or not (printf)."""
    m = re.search(re.escape(marker.encode()) + rb"(\d+)\n?\Z", stderr)
    if m is None:
        return stderr, None
    return stderr[:m.start()], int(m.group(1))


def find_adb(adb: str) -> str:
    """The adb client's path (a name is looked up on PATH); TargetError saying how to install it."""
    path = shutil.which(adb)
    if path is None:
        raise TargetError(f"adb client {adb!r} not found: install it (Debian: apt install adb; or Android "
                          "platform-tools) or pass its path")
    return path


def client_env(server_port: int | None) -> dict[str, str]:
    """The environment of an adb client call: ours, pointed at the server on `server_port` when one is given."""
    env = dict(os.environ)
    if server_port is not None:
        env["ANDROID_ADB_SERVER_PORT"] = str(server_port)
    return env


_started_servers: set[tuple[str, int | None]] = set()


def ensure_server(adb: str, server_port: int | None = None) -> None:
    """Start the adb server once, on its own, so that no later call inherits its output pipes or its start-up time."""
    key = (adb, server_port)
    if key in _started_servers:
        return
    argv = [adb] + (["-P", str(server_port)] if server_port is not None else []) + ["start-server"]
    try:  # the server outlives us: it must not carry our owner token (mobiperf.core.lifeline)
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=SERVER_START_TIMEOUT_S, env=without_token(client_env(server_port)))
    except subprocess.TimeoutExpired:
        raise TargetError(f"the adb server did not start within {SERVER_START_TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        raise TargetError(f"the adb server did not start: {decode(done.stderr)}")
    _started_servers.add(key)


def parse_devices_l(text: str) -> list[dict]:
    """`adb devices -l` -> [{serial, state, product, model, device, transport_id, usb}], skipping banners."""
    found = []
    for line in text.splitlines():
        if not line.strip() or line.startswith(("List of devices", "*", "adb server")):
            continue
        serial, _, rest = line.strip().partition(" ") if "\t" not in line else line.strip().partition("\t")
        words = rest.split()
        state_words = []
        details = {}
        for w in words:
            key, colon, value = w.partition(":")
            if colon and key in ("usb", "product", "model", "device", "transport_id"):
                details[key] = value
            elif not details:
                state_words.append(w)
        found.append({"serial": serial, "state": " ".join(state_words) or "unknown",
                      "product": details.get("product"), "model": details.get("model"),
                      "device": details.get("device"), "transport_id": details.get("transport_id"),
                      "usb": details.get("usb")})
    return found


def attached_devices(adb: str, server_port: int | None) -> list[dict]:
    """What `adb devices -l` lists (parse_devices_l), whatever each device's state."""
    argv = [adb] + (["-P", str(server_port)] if server_port is not None else []) + ["devices", "-l"]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=ADB_STATE_TIMEOUT_S * 3,
                              env=client_env(server_port))
    except subprocess.TimeoutExpired:
        raise TargetError("`adb devices` did not answer within 30 s") from None
    if done.returncode != 0:
        raise TargetError(f"`adb devices` failed: {decode(done.stderr)}")
    return parse_devices_l(done.stdout.decode(errors="replace"))


def only_device(adb: str, server_port: int | None) -> str:
    """The serial of the one usable device (-t adb); TargetError naming them when there is none or several."""
    usable = [d for d in attached_devices(adb, server_port) if d["state"] == "device"]
    if len(usable) == 1:
        return usable[0]["serial"]
    if not usable:
        raise TargetError("no adb device is attached and authorized (see `adb devices`)")
    raise TargetError("several adb devices are attached; choose one with -t adb:SERIAL: "
                      + ", ".join(d["serial"] for d in usable))
