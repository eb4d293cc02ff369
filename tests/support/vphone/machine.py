"""Booting the virtual phone: one QEMU guest of an image (image.py), reached by `adb connect 127.0.0.1:PORT`.

    qemu-system-x86_64 -accel kvm|tcg -smp 1 -m 1536 -kernel vmlinuz -initrd initrd.cpio
      -drive userdata.f2fs (virtio, snapshot=on: writes go to a temporary overlay QEMU unlinks at once, so nothing of
             a killed guest stays on disk and every boot starts from a fresh /data)
      -drive system.erofs (virtio, read-only)
      -nic user,restrict=on,hostfwd=tcp:127.0.0.1:PORT-:5555   (the guest reaches nothing; the host reaches adbd)

The accelerator: KVM where /dev/kvm opens, else TCG. A KVM guest that does not boot within KVM_BOOT_S (a nested KVM
here stalled before its first console line) is killed and the phone boots under TCG; the stall is remembered for
this boot of the host (a file in the image cache), so later phones go straight to TCG. One vCPU: under TCG two
panicked a 6.12 guest once when tracepoints were enabled ("Oops: int3" in try_to_wake_up, kernel code patching).

Nothing stays behind. Every change on the host is written to an undo journal of its own (mobiperf's, in its usual
directory, so `mobiperf doctor` and the next `mobiperf run` see it) before it is made: the phone's run directory
(console log, QEMU's pid file and temporary files), the QEMU process, the adb connection. A phone meant to outlive
its starter (`python -m vphone up`, make vphone) hands the journal's lock to QEMU: the journal is alive while the
guest runs, and once QEMU is gone (stopped, killed, crashed) its leftovers are undone by `vphone down`, `mobiperf
doctor --fix` or the next mobiperf run. A phone of a test session dies with the session (PDEATHSIG).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from mobiperf.core.lifeline import die_with_owner, without_token
from mobiperf.target.transport import LocalTransport
from mobiperf.target.undo_journal import UndoJournal, boot_id

QEMU = "qemu-system-x86_64"
GUEST_PORT = 5555
MEMORY = "1536M"
KVM_BOOT_S = 20.0           # a KVM guest boots in a few seconds; one that has not by then is stalled
TCG_BOOT_S = 120.0          # 15 s here, idle; the margin is for a loaded machine
CONNECT_S = 30.0
BOOTED = "vphone: booted"
# The phone's own clock: QEMU's RTC sets the guest's realtime clock at boot (`-rtc base=...`); its monotonic clock
# starts at the guest's boot anyway.
DEFAULT_RTC = "utc"


class BootError(Exception):
    """The phone did not come up; the message says how far it got, in one line."""


def default_run_base() -> Path:
    """MOBIPERF_VPHONE_RUN, else /var/tmp/mobiperf-vphone: where running phones keep their console and state."""
    return Path(os.environ.get("MOBIPERF_VPHONE_RUN") or "/var/tmp/mobiperf-vphone")


def port_range() -> range:
    """The host ports phones may forward, from MOBIPERF_VPHONE_PORTS ("5600-5619"); default 5600-5699 (clear of
    5555-5585, which the adb server scans for emulators)."""
    text = os.environ.get("MOBIPERF_VPHONE_PORTS") or "5600-5699"
    low, _, high = text.partition("-")
    return range(int(low), int(high or low) + 1)


def free_port(ports: range | None = None) -> int:
    for port in ports or port_range():
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise BootError(f"no free port in {ports or port_range()} (MOBIPERF_VPHONE_PORTS)")


# --- the accelerator -------------------------------------------------------------------------------------------

def kvm_usable() -> bool:
    try:
        fd = os.open("/dev/kvm", os.O_RDWR)
    except OSError:
        return False
    os.close(fd)
    return True


def _stall_note(cache: Path) -> Path:
    return cache / "kvm-stalled"


def kvm_stalled_before(cache: Path) -> bool:
    """KVM stalled at boot since this host last booted (the verdict holds until the host reboots)."""
    try:
        return _stall_note(cache).read_text().strip() == boot_id()
    except OSError:
        return False


def choose_accel(cache: Path, wanted: str = "auto") -> list[str]:
    """The accelerators to try, in order: ["kvm", "tcg"] where KVM may work, else ["tcg"]."""
    if wanted in ("kvm", "tcg"):
        return [wanted]
    return ["kvm", "tcg"] if kvm_usable() and not kvm_stalled_before(cache) else ["tcg"]


# --- one phone -------------------------------------------------------------------------------------------------

@dataclass
class PhoneState:
    """What `vphone down` and `status` need of a running phone (run_dir/phone.json)."""

    serial: str
    port: int
    pid: int
    start: int
    accel: str
    accel_note: str
    kernel: str
    image: str
    run_dir: str
    adb_server_port: int
    journal: str
    rtc: str
    boot_s: float


class VirtualPhone:
    """A booted phone. boot() -> connect(adb server) -> ... -> stop(); or detach() to leave it running."""

    def __init__(self, image: Path, run_dir: Path, port: int, *, rtc: str = DEFAULT_RTC):
        self.image = image
        self.run_dir = run_dir
        self.port = port
        self.rtc = rtc
        self.info = json.loads((image / "image.json").read_text())
        self.journal = UndoJournal(LocalTransport())
        self.process: subprocess.Popen | None = None
        self.accel = ""
        self.accel_note = ""
        self.boot_s = 0.0
        self._process_entry: int | None = None
        self._connection: tuple[int, int] | None = None   # (journal entry, adb server port)
        self._dir_entry: int | None = None

    @property
    def serial(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def console(self) -> Path:
        return self.run_dir / "console.log"

    def argv(self, accel: str) -> list[str]:
        image = self.image
        append = "console=ttyS0 quiet panic=1 rdinit=/init"
        return [QEMU, "-name", f"vphone-{self.port}", "-accel", accel, *(["-cpu", "host"] if accel == "kvm" else []),
                "-smp", "1", "-m", MEMORY, "-nodefaults", "-no-user-config", "-no-reboot", "-display", "none",
                "-kernel", str(image / "vmlinuz"), "-initrd", str(image / "initrd.cpio"), "-append", append,
                "-drive", f"file={image / 'userdata.f2fs'},format=raw,if=none,id=userdata,snapshot=on",
                "-device", "virtio-blk-pci,drive=userdata,serial=userdata",
                "-drive", f"file={image / 'system.erofs'},format=raw,if=none,id=system,readonly=on",
                "-device", "virtio-blk-pci,drive=system,serial=system",
                "-nic", f"user,model=virtio-net-pci,restrict=on,hostfwd=tcp:127.0.0.1:{self.port}-:{GUEST_PORT}",
                "-rtc", f"base={self.rtc}", "-serial", f"file:{self.console}",
                "-pidfile", str(self.run_dir / "qemu.pid")]

    # -- boot ---------------------------------------------------------------------------------------------------
    def boot(self, *, accel: str = "auto", detached: bool = False, cache: Path | None = None) -> None:
        """Start QEMU and wait for the guest's boot script to finish; KVM that stalls falls back to TCG."""
        cache = cache or self.image.parent
        self._dir_entry = self.journal.record("dir", path=str(self.run_dir))
        self.run_dir.mkdir(parents=True)
        started = time.monotonic()
        tried = []
        for choice in choose_accel(cache, accel):
            try:
                self._start(choice, detached)
                self._wait_booted(KVM_BOOT_S if choice == "kvm" else TCG_BOOT_S)
            except BootError as e:
                tried.append(f"{choice}: {e}")
                self._end_qemu()
                if choice == "kvm" and "did not boot" in str(e):
                    _stall_note(cache).write_text(boot_id() + "\n")
                continue
            self.accel = choice
            self.accel_note = "; ".join(tried) + ("; fell back to tcg" if tried else "")
            self.boot_s = time.monotonic() - started
            return
        raise BootError("the phone did not boot: " + "; ".join(tried))

    def _start(self, accel: str, detached: bool) -> None:
        self.console.unlink(missing_ok=True)
        entry = self.journal.record("process", name=f"{QEMU} vphone-{self.port}")
        self._process_entry = entry
        keep = (self.journal.inheritable_lock(),) if detached else ()
        # TMPDIR: QEMU's temporary overlay of the snapshot=on disk (unlinked at once) lives in the journaled dir.
        env = without_token(dict(os.environ, TMPDIR=str(self.run_dir)))
        self.process = subprocess.Popen(
            self.argv(accel), stdin=subprocess.DEVNULL, stdout=open(self.run_dir / "qemu.log", "ab"),
            stderr=subprocess.STDOUT, env=env, pass_fds=keep, start_new_session=True,
            preexec_fn=None if detached else die_with_owner(signal.SIGKILL))
        self.journal.update(entry, pid=self.process.pid, start=_start_ticks(self.process.pid))

    def _wait_booted(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BootError(f"QEMU exited with status {self.process.returncode}: {self._last_words()}")
            text = self.console.read_text(errors="replace") if self.console.exists() else ""
            if BOOTED in text:
                problems = [line for line in text.splitlines() if line.startswith("vphone: ") and line != BOOTED]
                if problems:
                    raise BootError("; ".join(problems))
                return
            time.sleep(0.1)
        raise BootError(f"did not boot within {timeout:g} s ({self._last_words() or 'nothing on its console'})")

    def _last_words(self) -> str:
        lines = []
        for path in (self.run_dir / "qemu.log", self.console):
            if path.exists():
                lines += [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
        return " | ".join(lines[-3:])[-400:]

    # -- adb ----------------------------------------------------------------------------------------------------
    def connect(self, adb: str, server_port: int) -> None:
        """`adb connect` on the adb server at server_port (journaled), and wait until a shell answers."""
        entry = self.journal.record("adb_connection", serial=self.serial, server_port=server_port)
        self._connection = (entry, server_port)
        deadline = time.monotonic() + CONNECT_S
        said = ""
        while time.monotonic() < deadline:
            said = _adb(adb, server_port, "connect", self.serial).stdout.strip()
            if said.startswith(("connected to", "already connected")):
                shell = _adb(adb, server_port, "-s", self.serial, "shell", "echo ok")
                if shell.stdout.strip() == "ok":
                    return
                said = (shell.stdout + shell.stderr).strip()
            time.sleep(0.2)
        raise BootError(f"adb connect {self.serial}: {said}")

    def state(self, adb_server_port: int) -> PhoneState:
        return PhoneState(serial=self.serial, port=self.port, pid=self.process.pid,
                          start=_start_ticks(self.process.pid) or 0, accel=self.accel, accel_note=self.accel_note,
                          kernel=self.info["kernel_release"], image=str(self.image), run_dir=str(self.run_dir),
                          adb_server_port=adb_server_port, journal=self.journal.path or "", rtc=self.rtc,
                          boot_s=round(self.boot_s, 1))

    def detach(self, adb_server_port: int) -> PhoneState:
        """Leave the phone running (QEMU holds the journal); phone.json says how to find it."""
        state = self.state(adb_server_port)
        (self.run_dir / "phone.json").write_text(json.dumps(asdict(state), indent=2) + "\n")
        return state

    # -- the end ------------------------------------------------------------------------------------------------
    def stop(self, adb: str = "adb") -> None:
        """Disconnect, end QEMU, remove the run directory; each journal entry done as it is undone."""
        if self._connection:
            entry, server_port = self._connection
            try:
                _adb(adb, server_port, "disconnect", self.serial)
            except subprocess.TimeoutExpired:
                pass
            self.journal.done(entry)
            self._connection = None
        self._end_qemu()
        if self._dir_entry is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)
            self.journal.done(self._dir_entry)
            self._dir_entry = None

    def kill(self) -> None:
        """The phone dies (a test's fault): SIGKILL QEMU, nothing else."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def _end_qemu(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self._process_entry is not None:
            self.journal.done(self._process_entry)
            self._process_entry = None


def _adb(adb: str, server_port: int, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([adb, "-P", str(server_port), *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=15, env=without_token())


def _start_ticks(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def boot_phone(image: Path, *, run_base: Path | None = None, port: int | None = None, accel: str = "auto",
               rtc: str = DEFAULT_RTC, detached: bool = False) -> VirtualPhone:
    """Boot a phone of image on a free port; on failure nothing of it is left."""
    port = port or free_port()
    run_dir = (run_base or default_run_base()) / f"{port}"
    if run_dir.exists():
        raise BootError(f"{run_dir} exists: a phone on port {port} runs, or its leftovers wait for "
                        "`mobiperf doctor --fix`")
    phone = VirtualPhone(image, run_dir, port, rtc=rtc)
    try:
        phone.boot(accel=accel, detached=detached)
    except BaseException:
        phone.stop()
        raise
    return phone
