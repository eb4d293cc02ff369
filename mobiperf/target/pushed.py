"""A file pushed to a target for the length of a block: written down in the undo journal first (a killed mobiperf's
copy is removed by the next run or `mobiperf doctor`), removed afterwards with the directories made for it, also
on errors and Ctrl-C."""

from __future__ import annotations

import contextlib
import logging
import shlex
from pathlib import Path
from typing import Iterator

from mobiperf.core.errors import TargetError
from mobiperf.target.android import make_dirs, remove_dirs
from mobiperf.target.transport import Transport
from mobiperf.target.undo_journal import journal_for

log = logging.getLogger(__name__)


@contextlib.contextmanager
def pushed_file(transport: Transport, local: Path, remote: str, *, timeout: float = 300.0) -> Iterator[str]:
    """local's content at remote for the block; yields remote."""
    journal = journal_for(transport)
    parent = remote.rsplit("/", 1)[0] or "/"
    dir_entry = None if transport.exists(parent, timeout=timeout) else journal.record("dir", path=parent,
                                                                                       only_if_empty=True)
    created = make_dirs(transport, parent, timeout)
    entry = journal.record("file", path=remote)
    try:
        transport.push(Path(local), remote, timeout=timeout)
        yield remote
    finally:
        try:
            if transport.run(["sh", "-c", f"rm -f -- {shlex.quote(remote)}"], timeout=15).returncode == 0:
                journal.done(entry)
                remove_dirs(transport, created)
                journal.done(dir_entry)
        except TargetError as e:  # the journal keeps it for the next run
            log.warning("could not remove %s from %s: %s", remote, transport.name, e)
