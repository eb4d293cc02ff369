"""AdbTransport: a target reached through the real `adb` client, so USB, keys and server sharing work as on any phone.

Every call is one `adb` client process with a timeout. Commands go through `adb shell` (shell protocol v2: exit
status and stderr kept apart), files through `adb push`/`adb pull`, background work through an `adb shell` client
that stays alive with the remote process (killing it hangs the remote up).

Two things the adb client does not say are handled here:
- A device that vanishes mid-command makes `adb shell` exit 0 with whatever output had arrived (Debian adb 29). So
  each command ends by printing a marker with its status to stderr; a missing marker means the stream was cut, and
  `adb get-state` then tells a lost device from a process that was merely killed.
- Root: `id -u` first, then `su -c` (Magisk, SuperSU) or `su 0` (AOSP userdebug); `adb root` only when asked to
  require root, and undone by close(). Every command of a transport that has root runs as root.

Statuses follow subprocess conventions on every transport: a device shell's 128+N for a command ended by signal N is
reported as -N.

Beside it: adb_client.py, the client program itself (finding it, its server, its device list, how its output reads);
adb_process.py, the background process start() returns.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Mapping, Sequence

from mobiperf.core.errors import TargetError
from mobiperf.target.adb_client import (ADB_STATE_TIMEOUT_S, ENV_NAME, attached_devices, client_env, decode,
                                        ensure_server, find_adb, only_device, shell_status, strip_marker)
from mobiperf.target.adb_process import AdbProcess
from mobiperf.target.file_batch import put_command
from mobiperf.target.transport import DEFAULT_TIMEOUT_S, Completed, Transport

log = logging.getLogger(__name__)

ROOT_PROBE_TIMEOUT_S = 10.0      # a su that pops up a dialog on the phone must not stall a probe
ADB_ROOT_RESTART_TIMEOUT_S = 30.0
MAX_INLINE_WRITE = 1000          # text up to this size is written by one printf (stdio buffers hold >= 1 KiB)
MAX_ONE_WRITE = 64 << 20         # data up to this size is staged on the device and written by one dd block
ROOT_MODES = ("auto", "require", "never")


class DeviceLostError(TargetError):
    """The device went away (unplugged, rebooted, adbd killed) in the middle of a call: what it was doing is
    unknown, and a run that meets this is incomplete rather than failed."""


class AdbTransport(Transport):
    """One device, by serial, through one adb server.

    adb: the client binary. server_port: the adb server's port (None: the default, or ANDROID_ADB_SERVER_PORT).
    root: "auto" uses root when the device grants it (adbd as root, or su), "require" also tries `adb root` and
    fails if nothing gives root, "never" stays the shell user. timeout: the default of every call;
    root_probe_timeout: how long su may take to answer before the transport goes on without it.
    """

    def __init__(self, serial: str | None = None, *, adb: str = "adb", server_port: int | None = None,
                 root: str = "auto", timeout: float = DEFAULT_TIMEOUT_S,
                 root_probe_timeout: float = ROOT_PROBE_TIMEOUT_S):
        if root not in ROOT_MODES:
            raise ValueError(f"root must be one of {ROOT_MODES}, not {root!r}")
        self.adb = find_adb(adb)
        self.server_port = server_port
        self.root_mode = root
        self.default_timeout = timeout
        self.root_probe_timeout = root_probe_timeout
        self._marker = f"\x1emobiperf-{secrets.token_hex(4)}:"
        self._root_method: str | None = None   # "adbd", "su -c", "su 0", "adb root"; None = not root
        self._root_probed = False
        self._root_lock = threading.Lock()   # collectors may share one transport across threads
        self._restarted_adbd = False
        ensure_server(self.adb, server_port)
        self.serial = serial or only_device(self.adb, server_port)
        self.name = f"adb:{self.serial}"
        self.features = self._features()
        if "shell_v2" not in self.features:
            # Without the shell protocol (Android < 7) stderr is merged and stdin cannot be closed.
            raise TargetError(f"{self.name}: the device lacks adb's shell protocol v2 (Android 7 or later needed)")

    # -- the adb client -----------------------------------------------------------------------------------------
    def adb_argv(self, *args: str, serial: bool = True) -> list[str]:
        argv = [self.adb]
        if self.server_port is not None:
            argv += ["-P", str(self.server_port)]
        if serial:
            argv += ["-s", self.serial]
        return argv + list(args)

    def _adb(self, *args: str, timeout: float, input: bytes | None = None) -> subprocess.CompletedProcess:
        argv = self.adb_argv(*args)
        try:
            return subprocess.run(argv, input=input, stdin=None if input is not None else subprocess.DEVNULL,
                                  capture_output=True, timeout=timeout, env=client_env(self.server_port))
        except subprocess.TimeoutExpired:
            # Killing the client closes its stream; the device then hangs up the remote command.
            raise TargetError(f"{self.name}: `adb {' '.join(args)[:200]}` did not end within {timeout:g} s") from None

    def device_state(self) -> str | None:
        """The adb server's view of the device ("device", "offline", "unauthorized", ...), None if it is not there."""
        try:
            done = subprocess.run(self.adb_argv("get-state"), capture_output=True, stdin=subprocess.DEVNULL,
                                  timeout=ADB_STATE_TIMEOUT_S, env=client_env(self.server_port))
        except subprocess.TimeoutExpired:
            return None
        if done.returncode == 0:
            return decode(done.stdout) or None
        # "error: device offline", "error: device unauthorized. ...", "error: device '...' not found"
        m = re.match(r"error: device (offline|unauthorized|still authorizing)", decode(done.stderr))
        return m.group(1) if m else None

    def _features(self) -> set[str]:
        """What both this adb client and the device support (shell_v2, stat_v2, ...)."""
        done = self._adb("features", timeout=ADB_STATE_TIMEOUT_S)
        if done.returncode != 0:
            raise TargetError(f"{self.name}: cannot use the device: {decode(done.stderr) or decode(done.stdout)}")
        return set(done.stdout.decode(errors="replace").split())

    def _lost(self, what: str) -> DeviceLostError:
        state = self.device_state()
        return DeviceLostError(f"{self.name}: the device went away during {what[:200]!r} "
                           f"(adb state now: {state or 'not connected'})")

    # -- commands -------------------------------------------------------------------------------------------------
    def shell_command(self, argv: Sequence[str], cwd: str | None = None,
                      env: Mapping[str, str] | None = None) -> str:
        """The device shell's text for argv: quoted word by word, with cwd and env applied."""
        if not argv:
            raise ValueError("empty argv")
        parts = []
        if cwd:
            parts.append(f"cd -- {shlex.quote(cwd)} &&")
        for key, value in (env or {}).items():
            if not ENV_NAME.match(key):
                raise ValueError(f"not an environment variable name: {key!r}")
            parts.append(f"{key}={shlex.quote(value)}")
        parts.append(shlex.join(argv))
        return " ".join(parts)

    def _as_root(self, script: str) -> str:
        """script, run as root when this transport has root."""
        method = self.root_method
        if method == "su -c":
            return f"su -c {shlex.quote(script)}"
        if method == "su 0":
            return f"su 0 sh -c {shlex.quote(script)}"
        return script

    def _run_script(self, script: str, *, timeout: float, input: bytes | None, what: str,
                    as_root: bool = True) -> Completed:
        # The marker proves the command ran to its end: the status comes from shell v2, the marker from the shell
        # (echo: a builtin everywhere, where Android's mksh runs printf as a program, one more exec per call).
        body = f"{{ {script}\n}}; s=$?; echo {shlex.quote(self._marker)}\"$s\" >&2; exit \"$s\""
        if as_root:
            body = self._as_root(body)
        done = self._adb("shell", "-T", body, timeout=timeout, input=input)
        stderr, marked = strip_marker(done.stderr, self._marker)
        if marked is None:
            if self.device_state() != "device":
                raise self._lost(what)
            # The device is there but the shell did not finish: it was killed, or adb itself failed.
            if done.returncode == 0:
                raise TargetError(f"{self.name}: {what[:200]!r} ended without its status: {decode(done.stderr)}")
            marked = done.returncode
        return Completed((what,), shell_status(marked), done.stdout, stderr)

    def run(self, argv, *, timeout=None, input=None, cwd=None, env=None) -> Completed:
        timeout = timeout or self.default_timeout
        done = self._run_script(self.shell_command(argv, cwd, env), timeout=timeout, input=input,
                                what=shlex.join(argv))
        done = Completed(tuple(argv), done.returncode, done.stdout, done.stderr)
        if done.returncode == 127 and b"not found" in done.stderr and argv[0].encode() in done.stderr:
            raise TargetError(f"{self.name}: {argv[0]}: command not found")
        return done

    def start(self, argv, *, stdout_path=None, stderr_path=None, cwd=None, env=None,
              death_signal=signal.SIGKILL) -> "AdbProcess":
        # death_signal: the local adb client dies with mobiperf and the device hangs the command up (SIGHUP);
        # what survives that is found by its pid file or its owner token (mobiperf.target.leftovers).
        return AdbProcess(self, argv, stdout_path=stdout_path, stderr_path=stderr_path, cwd=cwd, env=env)

    # -- files ------------------------------------------------------------------------------------------------------
    def read_file(self, path, *, timeout=None) -> bytes:
        done = self._run_script(f"cat -- {shlex.quote(path)}", timeout=timeout or self.default_timeout,
                                input=None, what=f"cat {path}")
        if done.returncode != 0:
            raise TargetError(f"{self.name}: cannot read {path}: {decode(done.stderr) or done.returncode}")
        return done.stdout

    def write_file(self, path, data, *, timeout=None) -> None:
        # tracefs and sysfs act on each write() call, so a value must arrive in one. Small text goes out in one
        # printf; anything else is staged in a temporary file on the device and copied by dd as a single block
        # (a pipe into cat could split it wherever the data happened to arrive in pieces).
        timeout = timeout or self.default_timeout
        target = shlex.quote(path)
        try:
            text = data.decode()
        except UnicodeDecodeError:
            text = None
        if text is not None and "\0" not in text and 0 < len(data) <= MAX_INLINE_WRITE:
            script, feed = f"{put_command(shlex.quote(text))} > {target}", None
        elif len(data) <= MAX_ONE_WRITE:
            # A subshell, so that its exit does not skip the status marker of _run_script.
            script = (f'(t=$(mktemp) || exit 1; cat > "$t" && dd if="$t" of={target} bs={max(len(data), 1)} '
                      f'count=1 2>"$t.err"; s=$?; [ $s = 0 ] || cat "$t.err" >&2; rm -f "$t" "$t.err"; exit $s)')
            feed = data
        else:
            script, feed = f"cat > {target}", data
        done = self._run_script(script, timeout=timeout, input=feed, what=f"write {path}")
        if done.returncode != 0:
            raise TargetError(f"{self.name}: writing {data[:60]!r} to {path}: "
                              f"{decode(done.stderr) or done.returncode}")

    def push(self, local, remote, *, timeout=None) -> None:
        """Copy a local file or tree; a tree's content becomes remote (created if missing), as LocalTransport does."""
        timeout = timeout or self.default_timeout
        local = Path(os.path.abspath(local))  # a relative name starting with "-" would read as an adb option
        if not local.exists():
            raise TargetError(f"cannot push {local}: no such file or directory")
        if local.is_dir():
            self.run(["mkdir", "-p", remote], timeout=timeout).check()
            children = sorted(str(p) for p in local.iterdir())
            if not children:
                return
            sources = children
            remote = remote.rstrip("/") + "/"
        else:
            sources = [str(local)]
        done = self._adb("push", *sources, remote, timeout=timeout)
        if done.returncode != 0:
            raise self._sync_failure(f"adb push {local} {remote}", done)

    def pull(self, remote, local, *, timeout=None) -> None:
        """Copy a remote file or tree; a tree's content lands in local (created if missing), as LocalTransport does."""
        timeout = timeout or self.default_timeout
        local = Path(os.path.abspath(local))
        is_dir = self.run(["test", "-d", remote], timeout=timeout).returncode == 0
        if not is_dir:
            done = self._adb("pull", remote, str(local), timeout=timeout)
            if done.returncode != 0:
                raise self._sync_failure(f"adb pull {remote}", done)
            return
        # adb pull of a tree nests it under an existing destination; pull next to it, then merge.
        local.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=local.parent, prefix=".mobiperf-pull-") as staging:
            done = self._adb("pull", remote, staging, timeout=timeout)
            if done.returncode != 0:
                raise self._sync_failure(f"adb pull {remote}", done)
            pulled = Path(staging) / Path(remote.rstrip("/")).name
            shutil.copytree(pulled, local, symlinks=True, dirs_exist_ok=True)

    def _sync_failure(self, what: str, done: subprocess.CompletedProcess) -> TargetError:
        if self.device_state() != "device":
            return self._lost(what)
        return TargetError(f"{self.name}: {what} failed: {decode(done.stderr) or decode(done.stdout)}")

    # -- root -------------------------------------------------------------------------------------------------------
    @property
    def root_method(self) -> str | None:
        """How this transport gets root: "adbd", "su -c", "su 0", "adb root", or None (no root, or root="never")."""
        with self._root_lock:
            if not self._root_probed:
                self._root_method = self._probe_root()
                self._root_probed = True
            return self._root_method

    @property
    def is_root(self) -> bool:
        return self.root_method is not None

    def _uid(self, script: str) -> str | None:
        """The uid script prints, None if it failed; "timeout" if it hung (a su waiting for a tap on the phone)."""
        try:
            done = self._run_script(script, timeout=self.root_probe_timeout, input=None, what=script, as_root=False)
        except DeviceLostError:
            raise
        except TargetError as e:
            return "timeout" if "did not end within" in str(e) else None
        return done.text.strip() if done.returncode == 0 else None

    def _probe_root(self) -> str | None:
        if self._uid("id -u") == "0":
            return "adbd"
        if self.root_mode == "never":
            return None
        su = self._uid("su -c 'id -u'")
        if su == "0":
            return "su -c"
        if su == "timeout":
            log.warning("%s: su did not answer within %g s (a root prompt on the phone?); going on without root",
                        self.name, self.root_probe_timeout)
        elif self._uid("su 0 id -u") == "0":
            return "su 0"
        if self.root_mode == "require":
            self._adb_root()
            if self._uid("id -u") == "0":
                return "adb root"
            raise TargetError(f"{self.name}: no root: `id -u` is not 0, su is missing or refused, "
                              "and `adb root` did not help (a production build?)")
        return None

    def require_root(self, why: str) -> str:
        """How this transport gets root for `why` (a step that needs it): its root method, else `adb root` (a
        userdebug or eng build restarts adbd as root). TargetError naming the step and how to get root when
        nothing gives it."""
        method = self.root_method
        if method is not None:
            return method
        said = "not tried (root=never)"
        if self.root_mode != "never":
            with self._root_lock:
                try:
                    self._adb_root()
                    said = "adbd restarted, but the shell is still not root"
                    if self._uid("id -u") == "0":
                        self._root_method = "adb root"
                        return self._root_method
                except DeviceLostError:
                    raise
                except TargetError as e:
                    said = str(e).rsplit("says: ", 1)[-1]
        raise TargetError(f"{self.name}: {why} needs root, and the device gives none: the shell is not uid 0, no "
                          f"su answers (`su -c`, `su 0`), and `adb root` says: {said}. Use a userdebug or eng build "
                          "(adb root), or a rooted phone (Magisk: allow the shell in its prompt)")

    def _adb_root(self) -> None:
        done = self._adb("root", timeout=ADB_ROOT_RESTART_TIMEOUT_S)
        said = decode(done.stdout) + decode(done.stderr)
        if "restarting" not in said:
            raise TargetError(f"{self.name}: no root: su is missing or refused and `adb root` says: {said}")
        self._restarted_adbd = True
        self._wait_for_device(ADB_ROOT_RESTART_TIMEOUT_S)

    def _wait_for_device(self, timeout: float) -> None:
        # adbd restarts: the device drops off and comes back; get-state says "device" once it is usable again.
        deadline = time.monotonic() + timeout
        time.sleep(0.5)
        while time.monotonic() < deadline:
            if self.device_state() == "device":
                try:
                    if self._run_script("true", timeout=10, input=None, what="true", as_root=False).returncode == 0:
                        return
                except TargetError:
                    pass
            time.sleep(0.3)
        raise TargetError(f"{self.name}: the device did not come back within {timeout:g} s after `adb root`")

    def close(self) -> None:
        """Undo what this transport changed on the device: an adbd restarted as root goes back to unroot."""
        if self._restarted_adbd:
            self._restarted_adbd = False
            self._root_probed = False
            done = self._adb("unroot", timeout=ADB_ROOT_RESTART_TIMEOUT_S)
            if "restarting" in decode(done.stdout) + decode(done.stderr):
                self._wait_for_device(ADB_ROOT_RESTART_TIMEOUT_S)

    def __enter__(self) -> "AdbTransport":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def from_target_spec(spec: str, *, adb: str = "adb", server_port: int | None = None, root: str = "auto",
                     timeout: float = DEFAULT_TIMEOUT_S) -> AdbTransport:
    """The transport for a -t value: "adb" (the only attached device) or "adb:SERIAL" (a serial may hold colons,
    e.g. adb:127.0.0.1:5555). The server port defaults to ANDROID_ADB_SERVER_PORT, as for the adb client."""
    kind, _, serial = spec.partition(":")
    if kind != "adb":
        raise ValueError(f"not an adb target: {spec!r}")
    if server_port is None and os.environ.get("ANDROID_ADB_SERVER_PORT", "").isdigit():
        server_port = int(os.environ["ANDROID_ADB_SERVER_PORT"])
    return AdbTransport(serial or None, adb=adb, server_port=server_port, root=root, timeout=timeout)


DEVICE_SUMMARY = "getprop ro.build.version.release; uname -r; getprop ro.product.cpu.abi"


def list_adb_devices(adb: str = "adb", server_port: int | None = None, *,
                     timeout: float = ROOT_PROBE_TIMEOUT_S) -> list[dict]:
    """Every device the adb server knows, with model, Android version, kernel and root for the usable ones.

    Each dict: serial, state, model, product, device, transport_id, usb, android_version, kernel, abi (the
    ABI property: the binaries a phone runs, whatever `uname -m` says), root (bool), root_method. Devices not in
    state "device" (offline, unauthorized, ...) keep None for what needs a shell.
    Root is detected without changing the device (`id -u`, then su); `adb root` is never tried here.
    """
    adb = find_adb(adb)
    ensure_server(adb, server_port)
    listed = attached_devices(adb, server_port)
    for d in listed:
        d.update(android_version=None, kernel=None, abi=None, root=False, root_method=None)
        if d["state"] != "device":
            continue
        try:
            t = AdbTransport(d["serial"], adb=adb, server_port=server_port, root="auto", timeout=timeout,
                             root_probe_timeout=timeout)
            lines = t.run(["sh", "-c", DEVICE_SUMMARY], timeout=timeout).text.splitlines()
            d["android_version"] = (lines[0].strip() or None) if lines else None
            d["kernel"] = lines[1].strip() if len(lines) > 1 else None
            d["abi"] = (lines[2].strip() or None) if len(lines) > 2 else None
            d["root_method"] = t.root_method
            d["root"] = d["root_method"] is not None
        except TargetError as e:
            d["error"] = str(e)
    return listed
