"""`mobiperf doctor`: what killed mobiperf processes left on a target, and (with --fix) undoing it.

It reads the undo journals on the target (mobiperf.target.undo_journal) and keeps those whose owner is dead, each with
what is still in place: its helper processes, mounts, loop devices, tracefs instances, cgroups, directories, and
every sysfs value it changed with the value to restore. It also notes detached loop devices whose scheduler or
dirty limits an earlier user left changed (information only: every run resets a loop device before using it).
The exit status is 0 when no leftovers of mobiperf runs remain at the end, 1 when some do.
"""

from __future__ import annotations

import json
import sys

import click


def _examples(*lines: str) -> str:
    return "\n\n\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


@click.command("doctor", epilog=_examples("mobiperf doctor", "mobiperf doctor --fix",
                                          "mobiperf doctor -t adb:SERIAL --fix", "mobiperf doctor --format json"))
@click.option("-t", "--target", default="local", show_default=True, help="Where to look: local, or adb[:SERIAL].")
@click.option("--fix", is_flag=True, help="Undo what was found: end the processes, unmount, detach, restore the "
                                          "old values, remove what was created.")
@click.option("--other-hosts", is_flag=True, help="Also undo journals that another host wrote on this device "
                                                  "(only when that host's mobiperf is known to be gone).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Output format.")
def cmd_doctor(target: str, fix: bool, other_hosts: bool, fmt: str) -> None:
    """Find (and with --fix undo) what mobiperf processes that were killed left on the target."""
    from mobiperf.core import signals
    from mobiperf.cli import _transport, is_root
    from mobiperf.stack.queue_settings import stale_loop_devices
    from mobiperf.core.errors import TargetError
    from mobiperf.target.leftovers import recover

    transport = _transport(target)
    if not is_root(transport):
        raise TargetError("mobiperf doctor needs root on the target: leftovers are mounts, loop devices and "
                          "sysfs values")
    lines: list[str] = []
    say = signals.say if fmt == "text" else lines.append
    dead = recover(transport, fix=fix, other_hosts=other_hosts, say=say)
    found = [d for d in dead if not d.empty]
    left = [d for d in recover(transport, fix=False, say=lambda _: None) if not d.empty] if fix else found
    # Information only: every run resets the loop device it attaches, and a detached one may be attached by
    # another program at any moment, whose settings these then are.
    stale = stale_loop_devices(transport)
    for device, settings in stale.items():
        say(f"note: {device} (detached) keeps settings an earlier user left: "
            + ", ".join(f"{k}={v}" for k, v in settings.items()) + " (mobiperf resets them before it uses it)")
    if fmt == "json":
        click.echo(json.dumps({"target": transport.name, "fixed": fix, "found": [d.as_dict() for d in found],
                               "left": [d.state.path for d in left], "stale_loop_devices": stale},
                              indent=2, default=str))
    elif not found:
        click.echo(f"{transport.name}: no leftovers of mobiperf processes")
    elif not left:
        click.echo(f"{transport.name}: clean now ({len(found)} dead runs' changes undone)")
    else:
        click.echo(f"{transport.name}: leftovers remain" + ("" if fix else " (mobiperf doctor --fix undoes them)"))
    if left:
        sys.exit(1)


def register(group: click.Group) -> None:
    group.add_command(cmd_doctor)
