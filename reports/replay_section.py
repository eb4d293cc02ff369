"""A replay run's page (`mobiperf replay`): what it replayed and how faithfully (the result replay_fidelity), beside
the run's own figures; a replay whose fidelity fails says so at the top of the page."""

from __future__ import annotations

from typing import Any

import polars as pl

from mobiperf.core.metrics import format_quantity
from mobiperf.core.units import format_size
from mobiperf.reports.html import esc, missing


def replay_banner(meta: dict[str, Any], tables: dict[str, pl.DataFrame]) -> str:
    """A loud line when a held metric is outside its bound (none for other runs and faithful replays)."""
    fidelity = tables.get("replay_fidelity")
    if not meta.get("replay") or fidelity is None:
        return ""
    failed = fidelity.filter(pl.col("ok") == False)  # noqa: E712 (null: not held to a bound)
    if not failed.height:
        return ""
    names = ", ".join(dict.fromkeys(failed["metric"].to_list()))
    return (f'<p class="banner loud">REPLAY FIDELITY FAILED: {failed.height} check(s) outside their bounds '
            f'({esc(names)}): this replay did not do what its recording did; see <a href="#replay">Replay</a>.</p>')


def replay_section(meta: dict[str, Any], tables: dict[str, pl.DataFrame]) -> str:
    replay = meta.get("replay") or {}
    where = ("the stack it was recorded on: block, sync and time figures are held to their bounds"
             if replay.get("same_stack") else
             "another stack than the recording's: only the calls and their bytes are held to their bounds; the "
             "rest is what the change did")
    timing = {"open": "open loop (each call after its recorded think time)",
              "closed": "closed loop (each call as soon as the previous one returned)"}.get(replay.get("timing"), "?")
    facts = [("replays", f"{replay.get('source')} (repetition {replay.get('rep')}, "
                         f"{'system calls' if replay.get('kind') == 'syscalls' else 'file events'})"),
             ("calls", f"{replay.get('calls', 0):,} in {replay.get('threads', 0)} thread(s)"),
             ("timing", timing), ("on", where)]
    out = ["<table>" + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts) + "</table>"]
    made = replay.get("made_before") or {}
    if made.get("files") or made.get("dirs"):
        out.append(f"<p class='sub'>made before the timed part, as the recording's state: {made.get('files', 0)} "
                   f"file(s) of {esc(format_size(made.get('bytes', 0)))} in all, {made.get('dirs', 0)} "
                   "director(ies): their writes are in this run's block figures above, not in the fidelity below "
                   "nor in layer.time.</p>")
    notes = replay.get("notes") or []
    if notes:
        out.append("<p class='sub'>left out of the replay, or added by it: " + esc("; ".join(notes)) + "</p>")
    fidelity = tables.get("replay_fidelity")
    if fidelity is None:
        return "".join(out) + missing("The replay's fidelity", "no replay_fidelity table (run `mobiperf analyze`)")
    out.append(_fidelity_table(fidelity))
    out.append("<p class='sub'>original: the recording's figure; replay: this run's (calls inside the generator's "
               "timed window; block figures from its start, less the files made before it); ratio replay / "
               "original; bound: equal, or within the percentage (analyzers/replay/fidelity.py).</p>")
    return "".join(out)


def _fidelity_table(fidelity: pl.DataFrame) -> str:
    head = "<tr><th>rep</th><th>metric</th><th>original</th><th>replay</th><th>ratio</th><th>bound</th>" \
           "<th>holds</th></tr>"
    rows = []
    for r in fidelity.iter_rows(named=True):
        unit = _unit(r["metric"])
        bound = "equal" if r["tolerance"] == 0 else ("-" if r["tolerance"] is None else f"±{100 * r['tolerance']:g}%")
        holds = {True: "<td class='improvement'>yes</td>", False: "<td class='regression'>NO</td>",
                 None: "<td>not held</td>"}[r["ok"]]
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        rows.append(f"<tr><td class='num'>{r['rep']}</td><td>{esc(r['metric'])}</td>"
                    f"<td class='num'>{esc(format_quantity(r['original'], unit))}</td>"
                    f"<td class='num'>{esc(format_quantity(r['replay'], unit))}</td><td class='num'>{ratio}</td>"
                    f"<td>{bound}</td>{holds}</tr>")
    return f"<div class='scroll'><table>{head}{''.join(rows)}</table></div>"


def _unit(metric: str) -> str:
    if metric == "elapsed":
        return "ns"
    return "B" if metric.endswith("_bytes") else "count"
