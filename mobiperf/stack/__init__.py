"""The storage stack under test, built on a target: an emulated phone stack (loop device, filesystem, FUSE
daemons, the phone models around it: local.py) or a directory of the target's own storage, with a bundled FUSE
daemon over it or not (device.py). spec.py says what a stack string means, options.py how it is built beyond it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mobiperf.stack.options import StackOptions
    from mobiperf.stack.spec import StackSpec
    from mobiperf.target.target import Target


def make_stack(target: Target, spec: StackSpec, options: StackOptions | None = None):
    """The stack a spec describes, as a context manager that yields its StackFacts: an existing directory (with a
    bundled FUSE daemon over it), or an emulated stack built on loop devices."""
    from mobiperf.stack.options import StackOptions

    options = options or StackOptions()
    if spec.filesystem.name == "dir":
        from mobiperf.stack.directory import DeviceFuseStack, DirectoryStack

        return (DeviceFuseStack if spec.layers else DirectoryStack)(target, spec, options)
    from mobiperf.stack.emulated import EmulatedStack

    return EmulatedStack(target, spec, options)
