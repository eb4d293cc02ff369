"""The loopback adbd itself: what the real client does not exercise (sync v2 SND2/RCV2, checksummed peers, the CLSE
echo) through a minimal raw protocol client, plus the legacy paths through the real client."""

from __future__ import annotations

import os
import socket
import struct
import subprocess

import pytest

pytest_plugins = ["adb_fixtures"]  # adb_server, loopback_device, start_loopback
from mobiperf.core.errors import TargetError
from mobiperf.target.adb import AdbTransport

CNXN, OPEN, OKAY, WRTE, CLSE = 0x4E584E43, 0x4E45504F, 0x59414B4F, 0x45545257, 0x45534C43
HEADER = struct.Struct("<6I")


class RawClient:
    """Just enough of the host side of the adb protocol to open streams on the loopback adbd directly."""

    def __init__(self, port: int, version: int = 0x01000001):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.send(CNXN, version, 1 << 20, b"host::\0")
        self.banner = self.expect(CNXN)
        self.next_id = 100

    def send(self, cmd: int, a0: int, a1: int, data: bytes = b"") -> None:
        self.sock.sendall(HEADER.pack(cmd, a0, a1, len(data), sum(data) & 0xFFFFFFFF, cmd ^ 0xFFFFFFFF) + data)

    def recv(self) -> tuple[int, int, int, bytes, int]:
        head = self._exactly(24)
        cmd, a0, a1, length, check, magic = HEADER.unpack(head)
        assert magic == cmd ^ 0xFFFFFFFF
        return cmd, a0, a1, self._exactly(length), check

    def expect(self, cmd: int) -> bytes:
        got, _, _, data, _ = self.recv()
        assert got == cmd, f"expected {cmd:#x}, got {got:#x}"
        return data

    def _exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            assert chunk, "connection closed"
            out += chunk
        return out

    def open(self, service: str) -> tuple[int, int]:
        self.next_id += 1
        self.send(OPEN, self.next_id, 0, service.encode() + b"\0")
        cmd, remote, local, _, _ = self.recv()
        assert cmd == OKAY and local == self.next_id
        return self.next_id, remote

    def write(self, stream: tuple[int, int], data: bytes) -> None:
        self.send(WRTE, stream[0], stream[1], data)
        cmd, _, _, _, _ = self.recv()
        assert cmd == OKAY

    def read_until(self, stream: tuple[int, int], enough) -> bytes:
        """Collect WRTE payloads (acknowledging each) until enough(data) or the device closes the stream."""
        data = b""
        while not enough(data):
            cmd, _, _, payload, _ = self.recv()
            if cmd == CLSE:
                break
            if cmd == WRTE:
                data += payload
                self.send(OKAY, stream[0], stream[1])
        return data

    def close(self) -> None:
        self.sock.close()


def sync_request(ident: bytes, path: str) -> bytes:
    raw = path.encode()
    return ident + struct.pack("<I", len(raw)) + raw


def test_sync_v2_send_and_receive(loopback_device, tmp_path):
    client = RawClient(loopback_device.port)
    try:
        target = tmp_path / "sub dir" / "f,1"
        payload = os.urandom(200_000)
        stream = client.open("sync:")
        body = sync_request(b"SND2", str(target)) + b"SND2" + struct.pack("<II", 0o100600, 0)
        for i in range(0, len(payload), 65536):
            chunk = payload[i:i + 65536]
            body += b"DATA" + struct.pack("<I", len(chunk)) + chunk
        body += b"DONE" + struct.pack("<I", 1_700_000_000)
        for i in range(0, len(body), 1 << 18):  # requests span WRTE packets: the daemon must parse a byte stream
            client.write(stream, body[i:i + (1 << 18)])
        assert client.read_until(stream, lambda d: len(d) >= 8) == b"OKAY" + bytes(4)
        assert target.read_bytes() == payload
        assert oct(target.stat().st_mode & 0o777) == oct(0o666)  # owner bits copied to group and other
        assert int(target.stat().st_mtime) == 1_700_000_000

        client.write(stream, sync_request(b"RCV2", str(target)) + b"RCV2" + struct.pack("<I", 0))
        got = client.read_until(stream, lambda d: d.endswith(b"DONE" + bytes(4)) and len(d) > len(payload))
        chunks, pos = b"", 0
        while got[pos:pos + 4] == b"DATA":
            (length,) = struct.unpack_from("<I", got, pos + 4)
            chunks += got[pos + 8:pos + 8 + length]
            pos += 8 + length
        assert chunks == payload and got[pos:] == b"DONE" + bytes(4)

        client.write(stream, sync_request(b"STA2", str(tmp_path / "missing")))
        reply = client.read_until(stream, lambda d: len(d) >= 72)
        assert reply[:4] == b"STA2" and struct.unpack_from("<I", reply, 4)[0] == 2  # ENOENT
        client.write(stream, b"QUIT" + bytes(4))
        assert client.expect(CLSE) == b""
    finally:
        client.close()


def test_checksummed_peers_and_the_clse_echo(loopback_device):
    client = RawClient(loopback_device.port, version=0x01000000)
    try:
        assert b"ro.product.model=Loopback" in client.banner and b"shell_v2" in client.banner
        stream = client.open("shell:echo sum")
        cmd, _, _, data, check = client.recv()
        assert (cmd, data, check) == (WRTE, b"sum\n", sum(b"sum\n"))  # an old peer gets real checksums
        client.send(OKAY, stream[0], stream[1])
        assert client.expect(CLSE) == b""

        stream = client.open("shell,v2,raw:sleep 30")
        client.send(CLSE, stream[0], stream[1])
        cmd, local, remote, _, _ = client.recv()  # real adbd answers a host CLSE with its own
        assert (cmd, local, remote) == (CLSE, stream[1], stream[0])
        client.send(OPEN, 999, 0, b"no-such-service:\0")
        cmd, a0, a1, _, _ = client.recv()
        assert (cmd, a0, a1) == (CLSE, 0, 999)
    finally:
        client.close()


def test_legacy_shell_merges_stderr_through_the_real_client(adb_server, loopback_device):
    done = adb_server.client("-s", loopback_device.serial, "shell", "-x", "echo out; echo err >&2; exit 3")
    assert (done.returncode, sorted(done.stdout.split())) == (0, ["err", "out"])  # v1: no status, one stream
    binary = subprocess.run([adb_server.adb, "-P", str(adb_server.port), "-s", loopback_device.serial, "exec-out",
                             "printf 'a\\0b\\r\\n'"], capture_output=True, timeout=15)
    assert binary.stdout == b"a\0b\r\n"


def test_a_device_without_shell_v2_is_refused(start_loopback):
    device = start_loopback("--features", "stat_v2,ls_v2")
    with pytest.raises(TargetError, match="shell protocol v2"):
        AdbTransport(device.serial, adb=device.server.adb, server_port=device.server_port)


def test_sync_errors_through_the_real_client(adb_server, loopback_device, tmp_path):
    missing = adb_server.client("-s", loopback_device.serial, "pull", str(tmp_path / "missing"), str(tmp_path / "x"))
    assert missing.returncode == 1 and "No such file or directory" in missing.stdout + missing.stderr
    (tmp_path / "file").write_text("x")
    blocked = adb_server.client("-s", loopback_device.serial, "push", str(tmp_path / "file"),
                                "/proc/mobiperf-adbtest-nope")
    assert blocked.returncode == 1 and "couldn't create file" in blocked.stdout + blocked.stderr
