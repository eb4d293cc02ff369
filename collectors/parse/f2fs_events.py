"""f2fs's own events, from their bodies as the kernel prints them (the rows ftrace_events.py hands over: every
source's text, rendered or read), into two tables:

  f2fs_bio         f2fs_submit_write_bio / f2fs_submit_read_bio: every bio f2fs submits, with its block type.
                   6.1 and 6.12 print `dev = (%d,%d)/(%d,%d), rw = %s(%s), %s, sector = %lld, size = %u`: the
                   bio's device (target) first, then the file system's; the op (blk_op_str) and its flags (S, M,
                   P, PF, FUA); the type DATA, NODE, META, META_FLUSH (the checkpoint's last block: REQ_PREFLUSH |
                   REQ_FUA), IN-PLACE, OUT-OF-PLACE. Kernels before 4.10 print the op as WRITE_SYNC and the like,
                   flags glued on (`rw = WRITE_SYNC(MP)`): the op is taken from the event's name.
  f2fs_checkpoint  f2fs_write_checkpoint: `dev = (%d,%d), checkpoint for %s, state = %s`, one row per state the
                   kernel reports (start block_ops, finish block_ops, finish checkpoint; newer kernels add
                   `elapsed N`): phase start, block_ops, end or other.

The sector and size are the bio's own, before the block layer merges or splits it (a request's first sector is
its first bio's). The type is what f2fs meant the block to be: the one source of node vs data that needs no
snapshot of the disk (analyzers/f2fs_region.py).
"""

from __future__ import annotations

import polars as pl

from mobiperf.core.schema import F2FS_BIO, F2FS_CHECKPOINT

BIO_EVENTS = {"f2fs_submit_write_bio": "write", "f2fs_submit_read_bio": "read"}
BIO_BODY = (r"dev = \((?P<t_major>\d+),(?P<t_minor>\d+)\)/\((?P<major>\d+),(?P<minor>\d+)\), "
            r"rw = (?P<rw>[A-Z_]*?)(?:\((?P<flags>[^)]*)\))?, (?P<type>[A-Z_-]+), "
            r"sector = (?P<sector>\d+), size = (?P<size>\d+)")
CHECKPOINT_BODY = r"dev = \((?P<major>\d+),(?P<minor>\d+)\), checkpoint for (?P<reason>.*?), state = (?P<state>.*)$"
CHECKPOINT_PHASES = {"start block_ops": "start", "finish block_ops": "block_ops", "finish checkpoint": "end"}


def _dev(major: str, minor: str, prefix: str = "dev") -> list[pl.Expr]:
    return [pl.col(major).cast(pl.Int32, strict=False).alias(f"{prefix}_major"),
            pl.col(minor).cast(pl.Int32, strict=False).alias(f"{prefix}_minor")]


def _rows(head: pl.DataFrame, events, pattern: str, unparsed: dict[str, int]) -> pl.DataFrame:
    """The rows of `events` with the pattern's groups; lines that do not match are counted in `unparsed`."""
    rows = head.filter(pl.col("event").is_in(list(events)))
    if not rows.height:
        return rows
    groups = rows["body"].str.strip_chars().str.extract_groups(pattern).struct.unnest()
    got = pl.concat([rows, groups], how="horizontal")
    for event, n in got.filter(pl.col(groups.columns[0]).is_null()).group_by("event").len().iter_rows():
        unparsed[event] = unparsed.get(event, 0) + n
    return got.filter(pl.col(groups.columns[0]).is_not_null())


def f2fs_bio_table(head: pl.DataFrame, rep: int, unparsed: dict[str, int] | None = None) -> pl.DataFrame:
    """f2fs_bio rows of the f2fs_submit_*_bio events among head's rows (ts, cpu, pid, comm, event, body)."""
    got = _rows(head, BIO_EVENTS, BIO_BODY, {} if unparsed is None else unparsed)
    if not got.height:
        return F2FS_BIO.empty()
    return F2FS_BIO.validate(got.select(
        pl.lit(rep, pl.Int32).alias("rep"), "ts", "cpu", "pid", "comm", *_dev("t_major", "t_minor"),
        *_dev("major", "minor", "fs_dev"), pl.col("event").replace_strict(BIO_EVENTS).alias("op"),
        pl.col("flags").fill_null(""), pl.col("type").str.to_lowercase(),
        pl.col("sector").cast(pl.Int64, strict=False),
        pl.col("size").cast(pl.Int64, strict=False).alias("size_bytes")).sort("ts", maintain_order=True))


def f2fs_checkpoint_table(head: pl.DataFrame, rep: int, unparsed: dict[str, int] | None = None) -> pl.DataFrame:
    """f2fs_checkpoint rows of the f2fs_write_checkpoint events among head's rows."""
    got = _rows(head, ("f2fs_write_checkpoint",), CHECKPOINT_BODY, {} if unparsed is None else unparsed)
    if not got.height:
        return F2FS_CHECKPOINT.empty()
    return F2FS_CHECKPOINT.validate(got.select(
        pl.lit(rep, pl.Int32).alias("rep"), "ts", "cpu", "pid", "comm", *_dev("major", "minor"),
        pl.col("reason").str.to_lowercase(),
        pl.col("state").replace_strict(CHECKPOINT_PHASES, default="other").alias("phase"),
        "state").sort("ts", maintain_order=True))


def parse_f2fs_events(head: pl.DataFrame, rep: int, unparsed: dict[str, int]) -> dict[str, pl.DataFrame]:
    """The f2fs tables head's rows hold events for (none when it has no f2fs bio or checkpoint events)."""
    out = {"f2fs_bio": f2fs_bio_table(head, rep, unparsed), "f2fs_checkpoint": f2fs_checkpoint_table(head, rep,
                                                                                                      unparsed)}
    return {name: df for name, df in out.items() if df.height}


F2FS_EVENTS = (*BIO_EVENTS, "f2fs_write_checkpoint")
