#!/usr/bin/env python3
"""A loopback adbd: the device side of the adb protocol on 127.0.0.1, for tests only.

The real `adb` client and server connect to it (`adb connect 127.0.0.1:PORT`) and it runs what they ask on this
host, so mobiperf's AdbTransport is tested end to end through the same binary that drives a real phone.
Standard library only, one asyncio loop, one process.

What it speaks (see ../../shared/specs/adb-loopback.md for the protocol notes):
  - CNXN without AUTH; the banner carries ro.product.{name,model,device} and the feature list.
  - shell[,v2][,raw|,pty][,TERM=..]:CMD and exec:CMD. v2 frames stdout/stderr apart, carries stdin and
    close-stdin, and ends with the exit status (0x80|signal when killed). A pty is never allocated: mobiperf
    never asks for one, and a raw pipe is what it needs.
  - sync: STAT STA2 LST2 LIST LIS2 SEND SND2 RECV RCV2 QUIT (v1 and v2, no compression).
  - root: / unroot: (canned replies, or a real restart into uid 0 and back with --root-restarts).

Knobs the tests need that a phone has and this host does not:
  --uid N        run shell commands as uid N (an unprivileged "shell" user, like uid 2000 on a phone).
  --su STYLE     put a `su` on PATH that really runs its command as root, the way Magisk does: it hands its
                 stdin/stdout/stderr to this daemon over a unix socket (SCM_RIGHTS) and the daemon runs the
                 command. Only the configured uid may use that socket. STYLE "magisk" takes `su -c CMD` (and
                 `su 0 CMD...`); "aosp" takes only `su [0|root] [CMD...]`, like userdebug builds' su; "hang"
                 never answers, like a Magisk prompt nobody taps.
  --prop K=V     properties for the `getprop` put on PATH.
  --pid-dir DIR  every command's process group is recorded as DIR/<pgid> while it runs, so that a test that
                 SIGKILLs this daemon ("the device vanished") can still end what it had started.
  --home DIR     where getprop, su and su's socket live (kept short: a unix socket path has 107 bytes at most);
                 the caller removes it. Without it, a temporary directory removed on SIGTERM/SIGINT.
  --chroot DIR   serve a device whose / is DIR (tests/support/android_device.py builds one: mksh, toybox, getprop, su,
                 /data ...): once listening, the daemon chroots into DIR, so shell commands and sync paths see only
                 the device's files, with Android's PATH and environment. The device brings its own getprop and su
                 (--prop and --su do not apply). Start it in a mount namespace of its own (unshare -m) holding the
                 device's mounts; every module is imported before the chroot, since the host's Python library is
                 not inside. `--chroot /` serves a whole machine as the device: the virtual phone
                 (tests/support/vphone), whose adbd runs inside a QEMU guest and listens with `--host 0.0.0.0`.

Writes the chosen port to --port-file once it listens. SIGTERM/SIGINT end it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import stat
import struct
import sys
import tempfile

# --- the wire (adb.h): a 24-byte header, then the payload --------------------------------------------------------

CNXN, AUTH, OPEN, OKAY = 0x4E584E43, 0x48545541, 0x4E45504F, 0x59414B4F
CLSE, WRTE = 0x45534C43, 0x45545257
HEADER = struct.Struct("<6I")  # command, arg0, arg1, payload length, payload checksum, command ^ 0xffffffff
VERSION_CHECKSUMMED = 0x01000000
VERSION_NO_CHECKSUM = 0x01000001
OWN_MAX_PAYLOAD = 1 << 20
HANDSHAKE_MAX_PAYLOAD = 4096       # CNXN must fit before the peer's limit is known
INBOX_LIMIT = 4 << 20              # withhold OKAY above this many unread bytes (back-pressure)

FEATURES = ("shell_v2", "stat_v2", "ls_v2", "fixed_push_mkdir", "fixed_push_symlink_timestamp",
            "sendrecv_v2", "sendrecv_v2_dry_run_send")

# shell protocol v2 (shell_protocol.h): u8 id, u32 length, data
SHELL_FRAME = struct.Struct("<BI")
ID_STDIN, ID_STDOUT, ID_STDERR, ID_EXIT, ID_CLOSE_STDIN, ID_WINDOW_SIZE = range(6)

# sync (file_sync_protocol.h)
SYNC_REQUEST = struct.Struct("<4sI")
SYNC_CHUNK = 64 * 1024
STAT_V1 = struct.Struct("<4sIII")
STAT_V2 = struct.Struct("<4sIQQIIIIQqqq")
DENT_V1 = struct.Struct("<4sIIII")
DENT_V2 = struct.Struct("<4sIQQIIIIQqqqI")
SEND_V2_SETUP = struct.Struct("<4sII")
RECV_V2_SETUP = struct.Struct("<4sI")
SEND_V2_DRY_RUN = 0x80000000

HANGUP_GRACE_S = 2.0

# What adbd gives a shell on Android 14 (--chroot): its PATH, and the variables of init's environment.
ANDROID_ENV = {
    "PATH": "/product/bin:/apex/com.android.runtime/bin:/apex/com.android.art/bin:/system_ext/bin:/system/bin:"
            "/system/xbin:/odm/bin:/vendor/bin:/vendor/xbin",
    "HOME": "/", "SHELL": "/system/bin/sh", "TERM": "dumb", "TMPDIR": "/data/local/tmp", "USER": "shell",
    "LOGNAME": "shell", "HOSTNAME": "localhost", "ANDROID_DATA": "/data", "ANDROID_ROOT": "/system",
    "ANDROID_STORAGE": "/storage", "EXTERNAL_STORAGE": "/sdcard", "ASEC_MOUNTPOINT": "/mnt/asec",
}


class StreamClosed(Exception):
    """The host closed the stream (or the whole connection went away)."""


def exit_status_byte(returncode: int) -> int:
    """adbd's exit byte: the status, or 0x80|signal for a child that a signal ended."""
    return (0x80 | -returncode) & 0xFF if returncode < 0 else returncode & 0xFF


# --- one adb stream ------------------------------------------------------------------------------------------------

class Stream:
    """A host-opened stream: an inbound byte buffer and outbound writes paced one WRTE per OKAY."""

    def __init__(self, link: "Link", local_id: int, remote_id: int):
        self.link = link
        self.local_id = local_id
        self.remote_id = remote_id
        self.inbox = bytearray()
        self.inbox_changed = asyncio.Event()
        self.okay_owed = False          # an OKAY withheld for back-pressure
        self.peer_ready = asyncio.Event()
        self.peer_ready.set()           # the host may receive one WRTE right after OPEN
        self.write_lock = asyncio.Lock()  # keeps v2 frames of stdout and stderr whole
        self.closed = False
        self.task: asyncio.Task | None = None

    # called by the link
    def received(self, data: bytes) -> None:
        self.inbox += data
        self.inbox_changed.set()
        if len(self.inbox) <= INBOX_LIMIT:
            self.link.send(OKAY, self.local_id, self.remote_id)
        else:
            self.okay_owed = True

    def peer_closed(self) -> None:
        if not self.closed:
            self.closed = True
            self.inbox_changed.set()
            self.peer_ready.set()
            if self.task is not None:
                self.task.cancel()

    # used by services
    def _take(self, n: int) -> bytes:
        out = bytes(self.inbox[:n])
        del self.inbox[:n]
        if self.okay_owed and len(self.inbox) <= INBOX_LIMIT and not self.closed:
            self.okay_owed = False
            self.link.send(OKAY, self.local_id, self.remote_id)
        return out

    async def read_some(self, limit: int = SYNC_CHUNK) -> bytes:
        """Up to limit bytes; b"" once the host has closed the stream and the buffer is empty."""
        while not self.inbox:
            if self.closed:
                return b""
            self.inbox_changed.clear()
            await self.inbox_changed.wait()
        return self._take(limit)

    async def read_exactly(self, n: int) -> bytes:
        while len(self.inbox) < n:
            if self.closed:
                raise StreamClosed
            self.inbox_changed.clear()
            await self.inbox_changed.wait()
        return self._take(n)

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        async with self.write_lock:
            while view:
                await self.peer_ready.wait()
                if self.closed:
                    raise StreamClosed
                self.peer_ready.clear()
                size = self.link.max_payload
                self.link.send(WRTE, self.local_id, self.remote_id, bytes(view[:size]))
                view = view[size:]
                await self.link.drain()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.link.send(CLSE, self.local_id, self.remote_id)
        self.link.streams.pop(self.local_id, None)


# --- one TCP connection from an adb server ----------------------------------------------------------------------

class Link:
    def __init__(self, device: "Device", reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.device = device
        self.reader = reader
        self.writer = writer
        self.version = VERSION_CHECKSUMMED
        self.max_payload = HANDSHAKE_MAX_PAYLOAD
        self.online = False
        self.streams: dict[int, Stream] = {}
        self.last_id = 0

    def send(self, command: int, arg0: int, arg1: int, payload: bytes = b"") -> None:
        if self.writer.is_closing():
            return
        # Peers at 0x01000001 ignore the checksum; older ones (and every CNXN) get the byte sum.
        checksummed = command == CNXN or self.version < VERSION_NO_CHECKSUM
        check = sum(payload) & 0xFFFFFFFF if checksummed else 0
        self.writer.write(HEADER.pack(command, arg0, arg1, len(payload), check, command ^ 0xFFFFFFFF) + payload)

    async def drain(self) -> None:
        try:
            await self.writer.drain()
        except ConnectionError:
            raise StreamClosed from None

    async def serve(self) -> None:
        try:
            while True:
                command, arg0, arg1, length, _check, magic = HEADER.unpack(await self.reader.readexactly(24))
                if magic != command ^ 0xFFFFFFFF or length > OWN_MAX_PAYLOAD:
                    return
                payload = await self.reader.readexactly(length) if length else b""
                self.handle(command, arg0, arg1, payload)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.drop_streams()
            self.writer.close()
            self.device.links.discard(self)

    def drop_streams(self) -> None:
        for s in list(self.streams.values()):
            s.peer_closed()
        self.streams.clear()

    def handle(self, command: int, arg0: int, arg1: int, payload: bytes) -> None:
        if command == CNXN:
            # The adb server needs no AUTH: it puts the device online when our CNXN arrives.
            self.version = min(arg0, VERSION_NO_CHECKSUM)
            self.max_payload = max(HANDSHAKE_MAX_PAYLOAD, min(arg1, OWN_MAX_PAYLOAD))
            self.drop_streams()
            self.send(CNXN, VERSION_NO_CHECKSUM, OWN_MAX_PAYLOAD, self.device.banner())
            self.online = True
        elif not self.online:
            return
        elif command == OPEN:
            service = payload.rstrip(b"\0").decode("utf-8", "surrogateescape")
            run = self.device.service_for(service)
            if run is None or arg0 == 0:
                self.send(CLSE, 0, arg0)
                return
            self.last_id += 1
            s = Stream(self, self.last_id, arg0)
            self.streams[s.local_id] = s
            self.send(OKAY, s.local_id, arg0)
            s.task = asyncio.ensure_future(self.run_service(s, run))
        elif command == OKAY:
            s = self.streams.get(arg1)
            if s is not None:
                s.peer_ready.set()
        elif command == WRTE:
            s = self.streams.get(arg1)
            if s is not None:
                s.received(payload)
        elif command == CLSE:
            s = self.streams.pop(arg1, None)
            if s is not None:
                # Real adbd answers a host CLSE with its own, whatever protocol.txt says; some clients wait for it.
                if not s.closed:
                    self.send(CLSE, s.local_id, s.remote_id)
                s.peer_closed()

    async def run_service(self, s: Stream, run) -> None:
        try:
            await run(s)
            await self.drain()
        except (StreamClosed, asyncio.CancelledError):
            pass
        except Exception as e:  # a bug in the fixture: say so on stderr, keep serving
            print(f"adbd_loopback: service failed: {e!r}", file=sys.stderr, flush=True)
        finally:
            s.close()


# --- the device ------------------------------------------------------------------------------------------------------

class Device:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.shell = args.shell
        self.uid = args.uid            # the uid shell commands run as; None = this daemon's own
        self.links: set[Link] = set()
        self.props = {
            "ro.product.name": args.product,
            "ro.product.model": args.model,
            "ro.product.device": args.device,
            "ro.serialno": args.serial,
            "ro.build.version.release": "14",
            "ro.build.version.sdk": "34",
            "ro.product.cpu.abi": "x86_64",
            "ro.build.type": "userdebug",
            "ro.debuggable": "1",
            "sys.boot_completed": "1",
        }
        for kv in args.prop or ():
            key, _, value = kv.partition("=")
            self.props[key] = value
        # The pid dir stays reachable by descriptor after a chroot.
        self.pid_dir_fd = os.open(args.pid_dir, os.O_RDONLY | os.O_DIRECTORY) if args.pid_dir else None
        self.su_socket = None
        if args.chroot:  # the device's root holds its own getprop and su
            self.own_home, self.home, self.bin_dir = False, None, None
            return
        self.own_home = not args.home  # a --home given by the caller is the caller's to remove
        self.home = args.home or tempfile.mkdtemp(prefix="adbd-loopback-")
        os.makedirs(self.home, exist_ok=True)
        os.chmod(self.home, 0o755)
        self.bin_dir = os.path.join(self.home, "bin")
        os.makedirs(self.bin_dir, exist_ok=True)
        os.chmod(self.bin_dir, 0o755)
        self._write_getprop()
        self.su_socket = os.path.join(self.home, "su.sock") if args.su else None
        if self.su_socket:
            self._write_su()

    # -- the banner and the environment commands see ---------------------------------------------------------
    def banner(self) -> bytes:
        props = "".join(f"{k}={self.props[k]};" for k in ("ro.product.name", "ro.product.model", "ro.product.device"))
        features = self.args.features.split(",") if self.args.features is not None else FEATURES
        return f"device::{props}features={','.join(features)}".encode()[:HANDSHAKE_MAX_PAYLOAD]

    def _write_getprop(self) -> None:
        # A shell script, so `getprop` works from any shell the tests run, also under su.
        def sq(text: str) -> str:
            return "'" + text.replace("'", "'\\''") + "'"

        lines = ["#!/bin/sh", 'if [ $# -eq 0 ]; then']
        lines += [f"  echo {sq(f'[{k}]: [{v}]')}" for k, v in sorted(self.props.items())]
        lines += ["  exit 0", "fi", 'case "$1" in']
        lines += [f"  {sq(k)}) echo {sq(v)} ;;" for k, v in sorted(self.props.items())]
        lines += ['  *) echo "${2-}" ;;', "esac"]
        self._write_tool("getprop", "\n".join(lines) + "\n")

    def _write_su(self) -> None:
        # The interpreter must be one the shell uid may execute (a venv under a private home may not be).
        python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
        self._write_tool("su", f"#!{python}\nSTYLE = {self.args.su!r}\n{SU_CLIENT}")

    def _write_tool(self, name: str, text: str) -> None:
        path = os.path.join(self.bin_dir, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)

    def environment(self) -> dict[str, str]:
        if self.args.chroot:
            return dict(ANDROID_ENV, ANDROID_SERIAL=self.props["ro.serialno"])
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ADB", "ANDROID"))}
        env["PATH"] = self.bin_dir + os.pathsep + env.get("PATH", "/usr/bin:/bin")
        env["TERM"] = "dumb"
        env["ANDROID_SERIAL"] = self.props["ro.serialno"]
        if self.su_socket:
            env["ADBD_LOOPBACK_SU"] = self.su_socket
        return env

    # -- child processes -------------------------------------------------------------------------------------
    async def spawn(self, argv: list[str], *, as_root: bool = False, **kw) -> asyncio.subprocess.Process:
        user = None if as_root or self.uid is None else self.uid
        proc = await asyncio.create_subprocess_exec(*argv, start_new_session=True, env=kw.pop("env", None)
                                                    or self.environment(), cwd=kw.pop("cwd", "/"),
                                                    user=user, group=user, extra_groups=[] if user else None,
                                                    **kw)
        self._record(proc.pid, True)
        return proc

    def _record(self, pgid: int, alive: bool) -> None:
        if self.pid_dir_fd is None:
            return
        if alive:
            os.close(os.open(str(pgid), os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=self.pid_dir_fd))
        else:
            try:
                os.unlink(str(pgid), dir_fd=self.pid_dir_fd)
            except FileNotFoundError:
                pass

    async def reap(self, proc: asyncio.subprocess.Process) -> int:
        """Wait for proc; if it still runs (the host hung up), SIGHUP its group, then SIGKILL it."""
        if proc.returncode is None:
            for sig, patience in ((signal.SIGHUP, HANGUP_GRACE_S), (signal.SIGKILL, 10.0)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    await asyncio.wait_for(asyncio.shield(proc.wait()), patience)
                    break
                except asyncio.TimeoutError:
                    continue
        rc = await proc.wait()
        self._record(proc.pid, False)
        return rc

    # -- services ----------------------------------------------------------------------------------------------
    def service_for(self, name: str):
        if name.startswith("shell,") or name.startswith("shell:"):
            options, _, command = name[len("shell"):].partition(":")
            return lambda s: self.shell_service(s, options.split(","), command)
        if name.startswith("exec:"):
            return lambda s: self.shell_service(s, ["raw"], name[len("exec:"):])
        if name.startswith("sync:"):
            return self.sync_service
        verb = name.split(":", 1)[0]
        if verb in ("root", "unroot"):
            return lambda s: self.root_service(s, verb)
        return None

    async def root_service(self, s: Stream, verb: str) -> None:
        runs_as_root = self.uid in (None, 0) and os.geteuid() == 0
        if verb == "unroot":
            if not runs_as_root:
                await s.write(b"adbd not running as root\n")
            elif self.args.root_restarts and self.args.uid:
                await self.restart(s, b"restarting adbd as non root\n", self.args.uid)
            else:
                await s.write(b"adbd cannot drop root on adbd_loopback\n")
            return
        if runs_as_root:
            await s.write(b"adbd is already running as root\n")
        elif self.args.root_restarts:
            await self.restart(s, b"restarting adbd as root\n", None)
        else:
            await s.write(b"adbd cannot run as root in production builds\n")

    async def restart(self, s: Stream, message: bytes, uid: int | None) -> None:
        # What a userdebug phone does: say so, drop every connection, come back with the new uid. The adb server
        # reconnects to a TCP device by itself.
        await s.write(message)
        await s.link.drain()
        self.uid = uid
        asyncio.get_running_loop().call_later(0.2, self.drop_links)

    def drop_links(self) -> None:
        for link in list(self.links):
            link.drop_streams()
            link.writer.close()

    async def shell_service(self, s: Stream, options: list[str], command: str) -> None:
        framed = "v2" in options
        argv = [self.shell, "-c", command] if command else [self.shell]
        pipe = asyncio.subprocess.PIPE
        proc = await self.spawn(argv, stdin=pipe, stdout=pipe,
                                stderr=pipe if framed else asyncio.subprocess.STDOUT)
        try:
            async def pump_out(source: asyncio.StreamReader, ident: int) -> None:
                try:
                    while chunk := await source.read(SYNC_CHUNK):
                        await s.write(SHELL_FRAME.pack(ident, len(chunk)) + chunk if framed else chunk)
                except StreamClosed:
                    pass  # the host hung up; reap() ends the command

            async def pump_in() -> None:
                try:
                    while True:
                        if framed:
                            ident, length = SHELL_FRAME.unpack(await s.read_exactly(SHELL_FRAME.size))
                            data = await s.read_exactly(length) if length else b""
                        else:
                            ident, data = ID_STDIN, await s.read_some()
                            if not data:
                                return
                        if ident == ID_STDIN:
                            proc.stdin.write(data)
                            await proc.stdin.drain()
                        elif ident == ID_CLOSE_STDIN:
                            proc.stdin.close()
                except (StreamClosed, ConnectionError):
                    pass

            feeder = asyncio.ensure_future(pump_in())
            pumps = [pump_out(proc.stdout, ID_STDOUT)]
            if framed:
                pumps.append(pump_out(proc.stderr, ID_STDERR))
            await asyncio.gather(*pumps)
            rc = await proc.wait()
            feeder.cancel()
            if framed:
                await s.write(SHELL_FRAME.pack(ID_EXIT, 1) + bytes([exit_status_byte(rc)]))
        finally:
            await self.reap(proc)

    # -- sync ------------------------------------------------------------------------------------------------------
    async def sync_service(self, s: Stream) -> None:
        while True:
            ident, length = SYNC_REQUEST.unpack(await s.read_exactly(8))
            if ident == b"QUIT":
                return
            if length > 1024:
                return await sync_fail(s, "path too long")
            path = os.fsdecode(await s.read_exactly(length))
            if ident == b"STAT":
                await s.write(stat_v1(path))
            elif ident in (b"STA2", b"LST2"):
                await s.write(stat_v2(ident, path))
            elif ident in (b"LIST", b"LIS2"):
                await s.write(list_dir(path, ident == b"LIS2"))
            elif ident == b"SEND":
                path, comma, mode_text = path.rpartition(",")
                if not comma or not mode_text.isdigit():
                    return await sync_fail(s, "bad SEND request")
                if not await self.receive_file(s, path, int(mode_text)):
                    return
            elif ident == b"SND2":
                _, mode, flags = SEND_V2_SETUP.unpack(await s.read_exactly(SEND_V2_SETUP.size))
                if flags & ~SEND_V2_DRY_RUN:
                    return await sync_fail(s, "compression is not supported")
                if flags & SEND_V2_DRY_RUN:
                    await skip_file_data(s)
                    await s.write(b"OKAY" + bytes(4))
                elif not await self.receive_file(s, path, mode):
                    return
            elif ident in (b"RECV", b"RCV2"):
                if ident == b"RCV2":
                    _, flags = RECV_V2_SETUP.unpack(await s.read_exactly(RECV_V2_SETUP.size))
                    if flags:
                        return await sync_fail(s, "compression is not supported")
                if not await send_file(s, path):
                    return
            else:
                return await sync_fail(s, f"unknown sync request {ident!r}")

    async def receive_file(self, s: Stream, path: str, mode: int) -> bool:
        """One SEND: DATA* then DONE(mtime). Answers OKAY, or FAIL (which ends the sync service)."""
        if stat.S_ISLNK(mode):
            target = await read_whole_file_data(s)
            try:
                self._make_parents(path)
                if os.path.lexists(path):
                    os.unlink(path)
                os.symlink(target, path)
            except OSError as e:
                await sync_fail(s, f"symlink failed: {e.strerror}")
                return False
            await s.write(b"OKAY" + bytes(4))
            return True
        # adbd copies the owner's permission bits to group and other.
        perms = mode & 0o777
        perms |= (perms >> 3) & 0o070
        perms |= (perms >> 3) & 0o007
        try:
            self._make_parents(path)
            if os.path.islink(path) or os.path.isfile(path):
                os.unlink(path)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, perms)
        except OSError as e:
            await skip_file_data(s)
            await sync_fail(s, f"couldn't create file: {e.strerror}")
            return False
        with os.fdopen(fd, "wb") as f:
            mtime = await copy_file_data(s, f)
        if mtime is None:
            await sync_fail(s, "invalid data message")
            return False
        os.chmod(path, perms)
        os.utime(path, (mtime, mtime))
        self._own(path)
        await s.write(b"OKAY" + bytes(4))
        return True

    def _make_parents(self, path: str) -> None:
        parent = os.path.dirname(path)
        missing = []
        while parent and not os.path.isdir(parent):
            missing.append(parent)
            parent = os.path.dirname(parent)
        for d in reversed(missing):
            os.mkdir(d, 0o771)
            self._own(d)

    def _own(self, path: str) -> None:
        # Files pushed to a phone belong to the shell user, not to root.
        if self.uid:
            os.lchown(path, self.uid, self.uid)

    # -- su: run a command as root for a client that passed us its stdio ---------------------------------------------
    async def serve_su(self) -> None:
        # Raw sockets rather than asyncio streams: a stream transport would read the request and drop its fds.
        loop = asyncio.get_running_loop()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.su_socket)
        os.chmod(self.su_socket, 0o777)  # the shell uid must reach it; su_session checks who it is
        listener.listen(16)
        listener.setblocking(False)
        try:
            while True:
                conn, _ = await loop.sock_accept(listener)
                asyncio.ensure_future(self.su_session(conn))
        finally:
            listener.close()

    async def su_session(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        fds: list[int] = []
        try:
            _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
            if uid not in (0, self.uid):
                return
            request, fds = await receive_with_fds(conn)
            if len(fds) != 3:
                return
            proc = await self.spawn(request["argv"], as_root=True, stdin=fds[0], stdout=fds[1], stderr=fds[2],
                                    cwd=request.get("cwd") or "/", env=request.get("env"))
            for fd in fds:
                os.close(fd)
            fds = []
            ended = asyncio.ensure_future(proc.wait())
            # The su client going away (killed, or its adb stream closed) ends the command too.
            hangup = asyncio.ensure_future(loop.sock_recv(conn, 1))
            await asyncio.wait({ended, hangup}, return_when=asyncio.FIRST_COMPLETED)
            hangup.cancel()
            rc = await self.reap(proc)
            await loop.sock_sendall(conn, struct.pack("<i", rc))
        except (OSError, ValueError, KeyError, asyncio.TimeoutError):
            pass
        finally:
            for fd in fds:
                os.close(fd)
            conn.close()


# --- sync helpers -------------------------------------------------------------------------------------------------

async def sync_fail(s: Stream, message: str) -> None:
    text = message.encode()
    await s.write(b"FAIL" + struct.pack("<I", len(text)) + text)


def stat_v1(path: str) -> bytes:
    try:
        st = os.lstat(path)
    except OSError:
        return STAT_V1.pack(b"STAT", 0, 0, 0)
    return STAT_V1.pack(b"STAT", st.st_mode & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF, int(st.st_mtime) & 0xFFFFFFFF)


def stat_v2(ident: bytes, path: str) -> bytes:
    try:
        st = os.stat(path) if ident == b"STA2" else os.lstat(path)
    except OSError as e:
        return STAT_V2.pack(ident, e.errno, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    return STAT_V2.pack(ident, 0, st.st_dev, st.st_ino, st.st_mode, st.st_nlink, st.st_uid, st.st_gid,
                        st.st_size, int(st.st_atime), int(st.st_mtime), int(st.st_ctime))


def list_dir(path: str, v2: bool) -> bytes:
    out = bytearray()
    try:
        names = [".", ".."] + os.listdir(path)
    except OSError:
        names = []
    for name in names:
        raw = os.fsencode(name)
        try:
            st = os.lstat(os.path.join(path, name))
        except OSError:
            continue
        if v2:
            out += DENT_V2.pack(b"DNT2", 0, st.st_dev, st.st_ino, st.st_mode, st.st_nlink, st.st_uid, st.st_gid,
                                st.st_size, int(st.st_atime), int(st.st_mtime), int(st.st_ctime), len(raw))
        else:
            out += DENT_V1.pack(b"DENT", st.st_mode & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF,
                                int(st.st_mtime) & 0xFFFFFFFF, len(raw))
        out += raw
    # The client reads the terminator as a whole dent struct: pad DONE to its size.
    out += b"DONE" + bytes((DENT_V2 if v2 else DENT_V1).size - 4)
    return bytes(out)


async def copy_file_data(s: Stream, f) -> int | None:
    """Copy DATA chunks into f until DONE; returns DONE's mtime, or None on a malformed chunk."""
    while True:
        ident, length = SYNC_REQUEST.unpack(await s.read_exactly(8))
        if ident == b"DONE":
            return length
        if ident != b"DATA":
            return None
        f.write(await s.read_exactly(length))


async def skip_file_data(s: Stream) -> None:
    class Discard:
        def write(self, data):
            pass

    await copy_file_data(s, Discard())


async def read_whole_file_data(s: Stream) -> bytes:
    class Keep(bytearray):
        def write(self, data):
            self.extend(data)

    kept = Keep()
    await copy_file_data(s, kept)
    return bytes(kept)


async def send_file(s: Stream, path: str) -> bool:
    try:
        f = open(path, "rb")
    except OSError as e:
        await sync_fail(s, f"open failed: {e.strerror}")
        return False
    with f:
        batch = bytearray()
        while chunk := f.read(SYNC_CHUNK):
            batch += b"DATA" + struct.pack("<I", len(chunk)) + chunk
            if len(batch) >= s.link.max_payload:
                await s.write(bytes(batch))
                batch.clear()
        batch += b"DONE" + bytes(4)
        await s.write(bytes(batch))
    return True


async def receive_with_fds(sock: socket.socket) -> tuple[dict, list[int]]:
    """One su request: a JSON line with the three stdio descriptors attached."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def ready() -> None:
        if fut.done():
            return
        try:
            fut.set_result(socket.recv_fds(sock, 65536, 3))
        except BlockingIOError:
            return
        except OSError as e:
            fut.set_exception(e)

    loop.add_reader(sock.fileno(), ready)
    try:
        data, fds, _flags, _addr = await asyncio.wait_for(fut, 10.0)
    finally:
        loop.remove_reader(sock.fileno())
    return json.loads(data), list(fds)


# The su that --su puts on PATH. It accepts `su -c CMD`, `su 0 CMD...`, `su root -c CMD` and plain `su`,
# passes its stdio to the daemon, and exits with the command's status.
SU_CLIENT = r'''
import json, os, socket, struct, sys
args = sys.argv[1:]
if STYLE == "hang":
    import time
    time.sleep(3600)
if args and args[0] in ("0", "root"):
    args = args[1:]
elif STYLE == "aosp" and args:
    sys.exit(f"su: unknown user {args[0]}")
if args[:1] == ["-c"] and STYLE == "magisk":
    argv = ["/bin/sh", "-c", " ".join(args[1:])]
elif args:
    argv = args
else:
    argv = ["/bin/sh"]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(os.environ["ADBD_LOOPBACK_SU"])
except (KeyError, OSError) as e:
    sys.exit("su: permission denied")
request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
socket.send_fds(s, [request], [0, 1, 2])
os.close(0)
status = b""
while len(status) < 4:
    chunk = s.recv(4 - len(status))
    if not chunk:
        sys.exit(1)
    status += chunk
rc = struct.unpack("<i", status)[0]
sys.exit(128 - rc if rc < 0 else rc)
'''


# --- main ------------------------------------------------------------------------------------------------------

async def serve(args: argparse.Namespace) -> None:
    device = Device(args)

    async def on_connect(reader, writer):
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        link = Link(device, reader, writer)
        device.links.add(link)
        await link.serve()

    # A socket of our own: bound before a chroot, and no name lookup (a thread and NSS files) in asyncio.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((args.host, args.port))
    listener.listen(64)
    server = await asyncio.start_server(on_connect, sock=listener, limit=2 * OWN_MAX_PAYLOAD)
    su_server = asyncio.ensure_future(device.serve_su()) if device.su_socket else None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    port = listener.getsockname()[1]
    port_dir = os.open(os.path.dirname(os.path.abspath(args.port_file)), os.O_RDONLY | os.O_DIRECTORY) \
        if args.port_file else None
    if args.chroot:
        os.chroot(args.chroot)
        os.chdir("/")
    if port_dir is not None:  # last: whoever waits for it may stop us right away
        name = os.path.basename(args.port_file)
        fd = os.open(name + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=port_dir)
        os.write(fd, f"{port}\n".encode())
        os.close(fd)
        os.replace(name + ".tmp", name, src_dir_fd=port_dir, dst_dir_fd=port_dir)
        os.close(port_dir)
    try:
        await stop.wait()
    finally:
        server.close()
        if su_server:
            su_server.cancel()
        device.drop_links()
        await asyncio.sleep(0.1)  # let the services reap their children
        if device.own_home:
            shutil.rmtree(device.home, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description="loopback adbd for tests")
    ap.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (the virtual phone's adbd: 0.0.0.0, reached through QEMU's network)")
    ap.add_argument("--port", type=int, default=0, help="TCP port (0: any free one)")
    ap.add_argument("--port-file", help="write the port here once listening")
    ap.add_argument("--pid-dir", help="record the process group of every running command here")
    ap.add_argument("--home", help="directory for getprop, su and su's socket (default: a temporary one)")
    ap.add_argument("--shell", default="/bin/sh")
    ap.add_argument("--uid", type=int, help="run shell commands as this uid (and its gid)")
    ap.add_argument("--su", choices=("magisk", "aosp", "hang"),
                    help="provide a su that really runs commands as root (hang: one that waits for a tap forever)")
    ap.add_argument("--root-restarts", action="store_true",
                    help="`adb root` restarts the device as root (userdebug phone) instead of refusing")
    ap.add_argument("--features", help="comma-separated features to announce instead of all (e.g. '' for a legacy "
                                       "device without shell_v2)")
    ap.add_argument("--product", default="loopback")
    ap.add_argument("--model", default="Loopback")
    ap.add_argument("--device", default="loopback")
    ap.add_argument("--serial", default="LOOPBACK0001")
    ap.add_argument("--prop", action="append", help="KEY=VALUE for getprop (repeatable)")
    ap.add_argument("--chroot", help="serve the device whose root directory is DIR (chroot once listening)")
    args = ap.parse_args()
    if args.chroot and (args.su or args.prop or args.home):
        ap.error("--chroot: the device's root brings its own getprop and su (no --su, --prop, --home)")
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
