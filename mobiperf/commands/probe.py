"""`mobiperf probe`: what a target can do (root, tracefs and its events, strace, FUSE, loop devices, file systems,
IO schedulers, an Android device's facts) and what a run there traces at each layer."""

from __future__ import annotations

import json

import click

from mobiperf.cli import _examples, _recover_leftovers, _target, format_option, is_root, target_option


@click.command("probe", epilog=_examples("mobiperf probe", "mobiperf probe -t local --format json"))
@target_option
@format_option
def cmd_probe(target: str, fmt: str) -> None:
    """Print what the target can do: root, tracefs, trace events, strace, FUSE, loop devices, filesystems,
    IO schedulers."""
    from mobiperf.target.layer_outlook import layer_outlook
    from mobiperf.target.probe import EVENT_SYSTEMS

    target = _target(target)
    if is_root(target.transport):
        _recover_leftovers(target.transport)
    caps = target.caps.as_dict()
    if not target.is_local:
        caps["android"] = target.android
    if fmt == "json":
        click.echo(json.dumps(caps, indent=2))
        return
    if fmt == "csv":
        for k, v in caps.items():
            click.echo(f"{k},{json.dumps(v) if isinstance(v, (dict, list)) else v}")
        return
    yes = lambda b: "yes" if b else "no"  # noqa: E731
    click.echo(f"target      {caps['target']} (kernel {caps['kernel']})")
    click.echo(f"root        {yes(caps['is_root'])}")
    click.echo(f"tracefs     {caps['tracefs_path'] or 'not found'}  writable: {yes(caps['tracefs_writable'])}  "
               f"instances: {yes(caps['tracefs_instances'])}")
    for system in EVENT_SYSTEMS:
        names = caps["events"].get(system)
        click.echo(f"  {system:<13}{len(names)} events" if names else f"  {system:<13}absent")
    click.echo(f"strace      {caps['strace'] or 'not installed'}")
    click.echo(f"FUSE        /dev/fuse: {yes(caps['fuse'])}  fusermount: {caps['fusermount'] or 'no'}")
    click.echo(f"loop        {yes(caps['loop_devices'])}")
    click.echo("mkfs        " + "  ".join(f"{fs}: {yes(ok)}" for fs, ok in caps["filesystems"].items()))
    click.echo(f"schedulers  {' '.join(caps['schedulers']) or 'none found'}")
    android = caps.get("android")
    if android:
        click.echo(f"android     {android.get('android_version') or 'no'}  model: {android.get('model')}  "
                   f"abi: {android.get('abi')}  SELinux: {android.get('selinux')}")
        users = ", ".join(f"{u['name']} ({u['pid']})" for u in android.get("tracefs_users") or []) or "none"
        click.echo(f"tracefs     owner {android.get('tracefs_owner') or '-'}  other users: {users}")
        click.echo(f"storage     /sdcard: {android.get('sdcard_implementation') or '-'}  "
                   f"/data: {android.get('data_fstype') or '-'} on "
                   f"{' > '.join(android.get('data_block_devices') or [])}")
        click.echo(f"workdir     {android.get('default_workdir')}")
        click.echo(f"cpu         {android.get('cpu_model') or '-'}  clocksource: {android.get('clocksource') or '-'} "
                   f"(of {' '.join(android.get('clocksources') or []) or '-'})")
    click.echo("layers      what a run here traces at each layer:")
    for layer, line in layer_outlook(caps, android):
        click.echo(f"  {layer:<10}{line}")


def register(group: click.Group) -> None:
    group.add_command(cmd_probe)
