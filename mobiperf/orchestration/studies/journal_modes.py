"""Study `journal-modes`: seed 002, Jeong, Lee, Lee, Son, Won, "I/O Stack Optimization for Smartphones"
(USENIX ATC 2013, slides).

Parts:
  per-insert counts   SQLite inserts (Mobibench --compat=1.0.1: one autocommit INSERT per transaction on one
                      table, as in 2013) in DELETE / TRUNCATE / PERSIST / WAL journal modes, counted with strace -c
                      (fsync + fdatasync calls, write calls) and at the block layer (write requests, bytes), per
                      insert. The full study runs each mode at N and at 1 transaction and reports the difference
                      / (N - 1), so the database's set-up is not charged to the inserts; --quick divides by N.
  SQLite speed        transactions per second per journal mode (insert; update in the full study), without strace.
  fsync vs fdatasync  4 KiB random overwrites each followed by fsync() or fdatasync() (Mobibench -y 2 / -y 8),
                      IOPS: fdatasync skips the inode's timestamp update, so a journal commit.
  external journal    the same workload with ext4's journal on a second loop device (mkfs.ext4 -J device=),
                      in the full study; and the other filesystems (the slides' "alternative filesystems").
  f2fs beside ext4    the per-insert counts on f2fs too, block writes split by region (journal_modes_f2fs.py):
                      on this host's kernel when it has f2fs; with -t adb:SERIAL the phone's /data (f2fs on the
                      virtual phone), with ext4 beside it on this host.
"""

from __future__ import annotations

from mobiperf.orchestration.studies import journal_modes_f2fs
from mobiperf.orchestration.study import Check, Config, Results, Row, Section, Study, check, ratio

# The paper's numbers as stated on its slides (Galaxy S3, Android 4.0.4 ICS, Linux 3.0.15, ext4).
PAPER = {
    # slide "SQLite Journaling Mode: Summary": per insert()
    "per_insert": {
        "delete": {"fsync": 2, "ios": 9, "ext4_journal_kb": 24, "volume_kb": 72},
        "truncate": {"fsync": 2, "ios": 8, "ext4_journal_kb": 16, "volume_kb": 64},
        "persist": {"fsync": 3, "ios": 12, "ext4_journal_kb": 8, "volume_kb": 72},
        "wal": {"fsync": 1, "ios": 3, "ext4_journal_kb": 16, "volume_kb": 36},
    },
    # slides "SQLite performance: journaling modes"
    "wal_gain_insert": 1.16,          # TRUNCATE (default) -> WAL: 116 % up
    "wal_gain_update": 2.32,          # 232 % up
    "wal_f2fs_gain_insert": 2.81,     # TRUNCATE, EXT4 -> WAL, F2FS: 281 % up
    "wal_f2fs_gain_update": 3.48,
    # slides "fsync() vs fdatasync()"
    "fdatasync_gain_insert": 0.17,    # fsync() -> fdatasync(): 17 % up
    "fdatasync_gain_update": 0.53,    # 53 % up
    "fdatasync_f2fs_gain_insert": 1.26,
    "fdatasync_f2fs_gain_update": 2.50,
    "external_journal": "journal on a separate partition: the FTL can exploit the locality of IO (no figure)",
    "combined_gain": 1.34,            # "fdatasync(), Ext. J, Polling, WAL: 134 % up"
    # slide "I/O characteristics of Android Apps (GS3, ICS)"
    "app_io": {"sqlite_share": "> 90 %", "metadata_journal": "> 40 %", "synchronous": "> 70 %",
               "random": "> 80 %", "4k": "> 64 %"},
}

MODES = ("delete", "truncate", "persist", "wal")


def _n(config: Config) -> int:
    return 40 if config.quick else 200


def cells(config: Config) -> list[tuple[str, dict[str, str]]]:
    n = _n(config)
    sql = {"workload": "sqlite-insert", "compat": "1.0.1", "image_size": "256m" if config.quick else "1g"}
    out = []
    for mode in MODES:
        out.append((f"count/{mode}", {**sql, "journal": mode, "transactions": str(n), "syscalls": "on"}))
        if not config.quick:
            out.append((f"count1/{mode}", {**sql, "journal": mode, "transactions": "1", "syscalls": "on"}))
            out.append((f"tps/insert/{mode}", {**sql, "journal": mode, "transactions": str(n)}))
            out.append((f"tps/update/{mode}", {**sql, "workload": "sqlite-update", "journal": mode,
                                                "transactions": str(n)}))
    rand = {"workload": "file", "access": "rand-write", "record": "4k", "final_fsync": "off",
            "file_size": "2m" if config.quick else "8m", "image_size": "256m" if config.quick else "1g"}
    for sync in ("fsync", "fdatasync"):
        out.append((f"sync/{sync}", {**rand, "sync": sync}))
    if not config.quick:
        out.append(("extj/fsync", {**rand, "sync": "fsync", "fs_journal": "external"}))
        out.append(("extj/fdatasync", {**rand, "sync": "fdatasync", "fs_journal": "external"}))
        for fs in ("xfs", "btrfs", "f2fs"):
            out.append((f"fs/{fs}", {**rand, "sync": "fsync", "fs": fs}))
    return out + journal_modes_f2fs.cells(config, sql, n)


def _per_insert(res: Results, mode: str, metrics: tuple[str, ...], config: Config) -> tuple[float | None, str]:
    """Sum of `metrics` per insert: (N-run - 1-run) / (N - 1) when the 1-transaction run exists, else / N."""
    n = _n(config)
    total = _sum(res, f"count/{mode}", metrics)
    base = _sum(res, f"count1/{mode}", metrics)
    if total is None:
        return None, ""
    if base is None:
        return total / n, f"/ {n} inserts, set-up included"
    return (total - base) / (n - 1), f"({n} - 1 inserts), set-up subtracted"


def _sum(res: Results, label: str, metrics: tuple[str, ...]) -> float | None:
    cell = res.cell(label)
    if cell is None or not any(cell.values.get(m) for m in metrics) and cell.status != "done":
        return None
    values = [res.median(label, m) for m in metrics]
    if all(v is None for v in values):
        return 0.0 if cell.status == "done" else None
    return sum(v for v in values if v is not None)


SYNC_CALLS = ("syscall.fsync", "syscall.fdatasync")
WRITE_CALLS = ("syscall.write", "syscall.pwrite64", "syscall.pwritev", "syscall.writev")


def analyse(res: Results, config: Config) -> tuple[list[Section], list[Check]]:
    P = PAPER["per_insert"]
    per_insert: dict[str, dict[str, float | None]] = {}
    notes = {}
    for mode in MODES:
        per_insert[mode] = {}
        for key, metrics in (("sync", SYNC_CALLS), ("writes", WRITE_CALLS),
                             ("ios", ("block.requests{op=write}",)), ("bytes", ("block.bytes{op=write}",)),
                             ("flushes", ("block.requests{op=flush}",))):
            per_insert[mode][key], notes[mode] = _per_insert(res, mode, metrics, config)
    sections = [
        Section("fsync()/fdatasync() calls per insert", "slide 'SQLite Journaling Mode: Summary' (number of fsync())",
                "count", [Row(m.upper(), per_insert[m]["sync"], paper=P[m]["fsync"], note=notes[m]) for m in MODES]),
        Section("write() calls per insert (system calls; the paper counts block IOs, next table)",
                "slide 'SQLite Journaling Mode: Summary'", "count",
                [Row(m.upper(), per_insert[m]["writes"], note=notes[m]) for m in MODES], chart=False),
        Section("Block write requests per insert", "slide 'SQLite Journaling Mode: Summary' (number of IOs)",
                "count", [Row(m.upper(), per_insert[m]["ios"], paper=P[m]["ios"], note=notes[m]) for m in MODES]),
        Section("Write volume per insert", "slide 'SQLite Journaling Mode: Summary' (total IO volume)", "B",
                [Row(m.upper(), per_insert[m]["bytes"], paper=P[m]["volume_kb"] * 1024, note=notes[m])
                 for m in MODES]),
        Section("Cache flushes (REQ_PREFLUSH) per insert", "not in the paper: what each fsync costs the device",
                "count", [Row(m.upper(), per_insert[m]["flushes"], note=notes[m]) for m in MODES], chart=False),
    ]
    tps_metric = "workload.tps"
    tps_source = "tps" if not config.quick else "count"
    tps_rows = []
    for op in ("insert", "update"):
        for mode in MODES:
            label = f"tps/{op}/{mode}" if not config.quick else (f"count/{mode}" if op == "insert" else None)
            if label is None:
                continue
            paper = None
            if mode == "wal":
                paper = f"+{PAPER[f'wal_gain_{op}'] * 100:.0f} % vs TRUNCATE"
            tps_rows.append(res.row(label, tps_metric, display=f"{op}, {mode.upper()}", paper=paper,
                                    note="under strace -c" if tps_source == "count" else ""))
    sections.append(Section("SQLite transactions per second", "slides 'SQLite performance: journaling modes'",
                            "tx/s", tps_rows))
    sync_rows = [res.row("sync/fsync", "workload.iops", display="4 KiB random write + fsync()"),
                 res.row("sync/fdatasync", "workload.iops", display="4 KiB random write + fdatasync()",
                         paper=f"+{PAPER['fdatasync_gain_insert'] * 100:.0f} % (insert), "
                               f"+{PAPER['fdatasync_gain_update'] * 100:.0f} % (update)"),
                 res.row("extj/fsync", "workload.iops", display="external journal, fsync()",
                         paper="faster (FTL locality; no figure)"),
                 res.row("extj/fdatasync", "workload.iops", display="external journal, fdatasync()")]
    sync_rows += [res.row(f"fs/{fs}", "workload.iops", display=f"{fs}, fsync()") for fs in ("xfs", "btrfs", "f2fs")]
    sections.append(Section("fsync() vs fdatasync(), external journal, filesystems (4 KiB random write + sync)",
                            "slides 'fsync() vs fdatasync()', 'External journaling', 'Alternative Filesystems'",
                            "IOPS", sync_rows))
    sync_calls = {m: per_insert[m]["sync"] for m in MODES}
    wal_vs_truncate = ratio(res.median("tps/insert/wal" if not config.quick else "count/wal", tps_metric),
                            res.median("tps/insert/truncate" if not config.quick else "count/truncate", tps_metric))
    sections.append(Section("Gains", "slides 'SQLite performance', 'fsync() vs fdatasync()'", "ratio", [
        Row("WAL / TRUNCATE, insert TPS", wal_vs_truncate, paper=1 + PAPER["wal_gain_insert"]),
        Row("fdatasync / fsync, IOPS", ratio(res.median("sync/fdatasync", "workload.iops"),
                                              res.median("sync/fsync", "workload.iops")),
            paper=1 + PAPER["fdatasync_gain_insert"], note="paper: SQLite insert"),
        Row("external / internal journal, fsync IOPS", ratio(res.median("extj/fsync", "workload.iops"),
                                                             res.median("sync/fsync", "workload.iops"))),
    ], chart=False))
    checks = [
        check("WAL has the fewest fsync() per insert (slides: WAL 1, DELETE/TRUNCATE 2, PERSIST 3)",
              sync_calls, lambda **c: c["wal"] < min(c[m] for m in MODES if m != "wal"),
              lambda **c: ", ".join(f"{m.upper()} {v:.2f}" for m, v in c.items())),
        check("WAL writes the least per insert (slides: 36 KB vs 64-72 KB)",
              {m: per_insert[m]["bytes"] for m in MODES},
              lambda **b: b["wal"] < min(b[m] for m in MODES if m != "wal"),
              lambda **b: ", ".join(f"{m.upper()} {v / 1024:.1f} KiB" for m, v in b.items())),
        check("fdatasync() is no slower than fsync() (slides: +17 % insert, +53 % update)",
              {"fsync": res.median("sync/fsync", "workload.iops"),
               "fdatasync": res.median("sync/fdatasync", "workload.iops")},
              lambda fsync, fdatasync: fdatasync >= 0.95 * fsync,
              "IOPS: fsync {fsync:.0f}, fdatasync {fdatasync:.0f} (5 % noise allowance)"),
        check("WAL inserts faster than TRUNCATE (slides: +116 %)", {"ratio": wal_vs_truncate},
              lambda ratio: ratio > 1.0, "WAL / TRUNCATE TPS = {ratio:.2f}"),
    ]
    f2fs_sections, f2fs_checks = journal_modes_f2fs.sections(res, config, _n(config))
    return sections + f2fs_sections, checks + f2fs_checks


STUDY = Study(
    name="journal-modes",
    title="SQLite journal modes per insert, fsync vs fdatasync, external journal",
    paper="002: Jeong, Lee, Lee, Son, Won, I/O Stack Optimization for Smartphones, USENIX ATC 2013",
    description=__doc__.split("\n\n", 1)[1].strip(),
    cells=cells,
    analyse=analyse,
    metric="workload.tps",
    default_device=lambda config: None if config.quick else "emmc-2012",
    repeat=lambda config: 2 if config.quick else 3,
    needs=("mobibench",),
)
