"""Task names that line up between runs: a kernel thread's name holds the numbers of the device and the CPU it
serves (jbd2/loop3-8, kworker/1:0H), which differ from one run to the next; without them (jbd2/loop*-*,
kworker/*:*H) the same kernel work has the same name in every run, so two runs' figures can be put side by side
(the time profile, the IO no call caused)."""

from __future__ import annotations

import polars as pl

KERNEL_NAME = r"^(?:jbd2|kworker|ksoftirqd|irq|migration|rcu\w*)/"


def kernel_process_name(comm: pl.Expr) -> pl.Expr:
    """A kernel thread's name with the numbers after its `/` as `*` (jbd2/loop0-8 -> jbd2/loop*-*); any other name
    as it is."""
    head, tail = comm.str.extract(r"^([^/]*/)"), comm.str.extract(r"^[^/]*/(.*)$")
    return pl.when(comm.str.contains(KERNEL_NAME)).then(head + tail.str.replace_all(r"\d+", "*")).otherwise(comm)
