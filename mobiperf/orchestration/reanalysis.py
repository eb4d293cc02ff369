"""Re-analysis never replaces a run's figures with weaker data without saying so.

`mobiperf analyze` re-parses the raw traces. If a raw file was damaged or cut since the run was analysed (a disk
error, a copy that stopped half-way, a trace overwritten by hand), the new tables hold fewer events and the metrics
computed from them would silently replace good ones with zeros while the run still says "complete".

`events_lost(recorded, new)` compares what the earlier parse recorded in run.json with what this one found:
the rows of every table (`table_rows`, recorded since this check exists) and, for runs analysed before, the
per-repetition counts each source reports (ftrace and syscalls lines, binary ftrace events, strace lines,
blktrace records, layout extents) and the block and FUSE requests paired from them. Any count that went down is a
loss. The pipeline then refuses (WeakerDataError) unless asked to go on (`--force`), and records the loss.

The recorded counts describe the raw directories as they were parsed. A repetition collected afterwards (`compare
--until` adds some; a run whose run.json was cut back has its later repetitions collected again) has other raw
data: `forget_repetition` drops its counts and the whole-run totals before it is recorded, so the next parse is
held only to what it can still be compared with.
"""

from __future__ import annotations

from pathlib import Path

from mobiperf.core.errors import MobiperfError

# per source of a repetition's parse summary: the key that counts what the source held
SOURCE_COUNTS = {"ftrace": "lines", "syscalls": "lines", "raw_syscalls": "lines", "ftrace_raw": "events",
                 "strace": "lines", "layout": "extents"}


class WeakerDataError(MobiperfError):
    """A re-parse found fewer events than the run recorded: nothing was replaced."""

    def __init__(self, path: Path, loss: list[str]):
        shown = "; ".join(loss[:4]) + (f"; and {len(loss) - 4} more" if len(loss) > 4 else "")
        super().__init__(f"{path}: re-parsing the raw traces found fewer events than the run recorded ({shown}): "
                         "a raw file was damaged or cut since. Nothing was changed; `mobiperf analyze --force` "
                         "replaces the tables and metrics anyway and records the loss in run.json")
        self.loss = loss


def counts(summary: dict) -> dict[str, int]:
    """Flat {what: count} of a parse summary (see the module docstring for what is counted)."""
    out: dict[str, int] = {}
    for name, rows in (summary.get("table_rows") or {}).items():
        out[f"table {name} rows"] = int(rows)
    for rep, per_source in (summary.get("repetitions") or {}).items():
        for source, key in SOURCE_COUNTS.items():
            value = (per_source.get(source) or {}).get(key)
            if isinstance(value, int):
                out[f"rep {rep} {source} {key}"] = value
        for group, blk in (per_source.get("blktrace") or {}).items():
            if isinstance(blk, dict) and isinstance(blk.get("records"), int):
                out[f"rep {rep} blktrace {group} records"] = blk["records"]
    for pairing in ("block_pairing", "fuse_pairing"):
        requests = ((summary.get("derived") or {}).get(pairing) or {}).get("requests")
        if isinstance(requests, int):
            out[f"{pairing.replace('_', ' ')} requests"] = requests
    return out


def forget_repetition(recorded: dict | None, rep: int) -> None:
    """Drop from a recorded parse summary what a new collection of repetition rep makes incomparable: that
    repetition's per-source counts and the whole-run table rows and pairing totals, which sum over it."""
    if not recorded:
        return
    reps = recorded.get("repetitions") or {}
    for key in (rep, str(rep)):  # run.json turns the int keys of a summary into strings
        reps.pop(key, None)
    recorded.pop("table_rows", None)
    for pairing in ("block_pairing", "fuse_pairing"):
        ((recorded.get("derived") or {}).get(pairing) or {}).pop("requests", None)


def events_lost(recorded: dict, new: dict) -> list[str]:
    """`what: N before, M now` for every count that went down (a source or table now missing counts as 0)."""
    before, now = counts(recorded), counts(new)
    return [f"{what}: {n} before, {now.get(what, 0)} now" for what, n in before.items() if now.get(what, 0) < n]
