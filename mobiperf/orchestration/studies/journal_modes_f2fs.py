"""journal-modes on f2fs beside ext4: seed 002's per-insert question on the file system phones moved to.

The slides count, per SQLite insert, the fsync() calls, block IOs and volume of each journal mode on ext4, whose
fsync commits a jbd2 transaction ("journaling of journal"), and report that WAL on F2FS goes 281 % faster than
TRUNCATE on ext4. f2fs has no journal: its fsync writes the file's data and its node block (marked for
roll-forward recovery) and a cache flush; only some fsyncs (a new file's first, whose directory entry is not
checkpointed yet) write a checkpoint instead. Here each mode's inserts run on both file systems and their block
writes are split by region: ext4's data, metadata and journal, f2fs's data, node and checkpoint (with the SIT,
NAT and SSA blocks a checkpoint writes).

Where the two run:
  this host (-t local)   ext4 on the emulated phone stack (journal_modes.py's count cells), f2fs on the same stack
                         when this kernel has f2fs (else skipped: the reason says so)
  a phone (-t adb:...)   its own /data (f2fs on the virtual phone and on most phones since 2018), with ext4 beside
                         it on this host's emulated stack: the counts depend on the file systems, not on the CPU,
                         so the two compare (their speeds do not: a virtual phone's timing means nothing)
"""

from __future__ import annotations

from mobiperf.orchestration.study import Config, Results, Row, Section, check

MODES = ("delete", "truncate", "persist", "wal")
EXT4_REGIONS = ("data", "metadata", "journal")
F2FS_REGIONS = ("data", "node", "checkpoint", "sit", "nat", "ssa")


def labels(config: Config) -> dict[str, str]:
    """The label prefix of each file system's per-insert cells: the phone's /data takes the study's own count
    cells, and ext4 runs beside it on this host."""
    if config.target == "local":
        return {"ext4": "count", "f2fs": "f2fs/count"}
    return {"ext4": "ext4/count", "f2fs": "count"}


def cells(config: Config, sql: dict[str, str], n: int) -> list[tuple[str, dict[str, str]]]:
    """The per-insert cells of the file system the study's own count cells do not cover."""
    out = []
    for mode in MODES:
        params = {**sql, "journal": mode, "transactions": str(n), "syscalls": "on"}
        if config.target == "local":
            out.append((f"f2fs/count/{mode}", {**params, "fs": "f2fs"}))
        else:
            out.append((f"ext4/count/{mode}", {**params, "target": "local", "fs": "ext4"}))
    return out


def _per_insert(res: Results, label: str, metric: str, n: int) -> float | None:
    value = res.median(label, metric)
    if value is None and res.status(label) == "done":
        return 0.0   # the run wrote nothing to that region
    return None if value is None else value / n


def sections(res: Results, config: Config, n: int) -> tuple[list[Section], list]:
    """Block writes per insert by region on each file system, the fsync calls beside them, and the check that an
    f2fs fsync writes no journal: fewer blocks per insert than ext4 in every mode."""
    prefix = labels(config)
    rows: dict[str, list[Row]] = {"ext4": [], "f2fs": []}
    total: dict[str, dict[str, float | None]] = {"ext4": {}, "f2fs": {}}
    for fs, regions in (("ext4", EXT4_REGIONS), ("f2fs", F2FS_REGIONS)):
        for mode in MODES:
            label = f"{prefix[fs]}/{mode}"
            note = "" if res.status(label) in ("done", "absent") else f"{res.status(label)}: " + (
                (res.cell(label).reason or "") if res.cell(label) else "")
            total[fs][mode] = _per_insert(res, label, "block.requests{op=write}", n)
            syncs = [_per_insert(res, label, m, n) for m in ("syscall.fsync", "syscall.fdatasync")]
            rows[fs].append(Row(f"{mode.upper()}: fsync + fdatasync calls", None if None in syncs else sum(syncs),
                                note=note[:200]))
            rows[fs].append(Row(f"{mode.upper()}: block writes", total[fs][mode], note=note[:200]))
            for region in regions:
                rows[fs].append(Row(f"{mode.upper()}: {region}", _per_insert(
                    res, label, f"block.requests{{op=write,region={region}}}", n)))
    where = "this host's emulated stack" if config.target == "local" else f"{config.target}'s /data"
    out = [Section("ext4: block writes per insert by region (data, metadata, journal)",
                   "slide 'SQLite Journaling Mode: Summary' (number of IOs); ext4 on this host's emulated stack",
                   "count", rows["ext4"], chart=False),
           Section("f2fs: block writes per insert by region (data, node, checkpoint, SIT, NAT, SSA)",
                   f"slides 'Alternative Filesystems', 'F2FS'; f2fs on {where}", "count", rows["f2fs"],
                   chart=False)]
    checks = [check("f2fs writes no journal: fewer block writes per insert than ext4 in every journal mode "
                    "(slides: F2FS with WAL +281 % over ext4 with TRUNCATE)",
                    {"ext4": _complete(total["ext4"]), "f2fs": _complete(total["f2fs"])},
                    lambda ext4, f2fs: all(f2fs[m] < ext4[m] for m in MODES),
                    lambda ext4, f2fs: ", ".join(f"{m.upper()} {f2fs[m]:.1f} vs {ext4[m]:.1f}" for m in MODES))]
    return out, checks


def _complete(values: dict[str, float | None]) -> dict[str, float] | None:
    return None if any(values.get(m) is None for m in MODES) else values
