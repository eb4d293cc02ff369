"""A target: a transport to reach a device, composed with the facts probed about it (DESIGN.md: Target =
transport + facts). OS facts are data, not subclasses: a phone and this host are the same class and answer the
same questions differently.

    target.transport      how commands run and files move (LocalTransport, AdbTransport)
    target.is_local       the host mobiperf runs on: its clock is mobiperf's, its binaries are the host's build
    target.caps           what a run can use (mobiperf.target.probe.Capabilities: root, tracefs, events, strace,
                          FUSE, loop devices, filesystems, schedulers), probed when first asked for
    target.android        the Android-aware facts (mobiperf.target.android.android_facts: one shell round trip),
                          asked once and kept: the ABI, the default work directory, the mounts, the shared storage
    target.abi            the ABI the reference binaries are built for on this device
    target.scratch_dir()  where mobiperf puts pushed binaries and helper files on the device (/data/local/tmp/mobiperf
                          on a phone: shared storage is mounted noexec)
    target.require_root() root for a step that needs it, acquired where the transport can (adb root, su)

Facts are probed lazily and kept for the target's life: a set-up that asks for the ABI, the work directory and the
mounts costs one round trip to a phone, not one per question.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mobiperf.target.probe import Capabilities
    from mobiperf.target.transport import Transport


class Target:
    def __init__(self, transport: Transport, caps: Capabilities | None = None):
        self.transport = transport
        self._caps = caps
        self._android: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.transport.name

    @property
    def is_local(self) -> bool:
        return self.transport.is_local

    @property
    def caps(self) -> Capabilities:
        if self._caps is None:
            from mobiperf.target.probe import probe

            self._caps = probe(self.transport)
        return self._caps

    def refresh(self) -> None:
        """Probe again (root was acquired: tracefs became writable, more events are listed)."""
        self._caps = None
        self._android = None

    @property
    def android(self) -> dict[str, Any]:
        if self._android is None:
            from mobiperf.target.android import android_facts

            self._android = android_facts(self.transport)
        return self._android

    @property
    def abi(self) -> str:
        return self.android["abi"]

    @property
    def is_android(self) -> bool:
        return bool(self.android["is_android"])

    def scratch_dir(self) -> str:
        return self.android["default_workdir"]

    @property
    def is_root(self) -> bool:
        return self.transport.is_root

    def require_root(self, why: str) -> str:
        return self.transport.require_root(why)
