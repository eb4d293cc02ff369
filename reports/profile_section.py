"""The compare page's "Where the time moved" section: each NEW's headline (the total and its three largest
movers), the top movers in one sortable table with a column per NEW, and each NEW's icicle
(reports/profile_figures.py)."""

from __future__ import annotations

import math

from mobiperf.compare.profile import ProfileDiff
from mobiperf.compare.profile_format import COUNT_NOUNS, call_name, mover_sentence, signed_ns
from mobiperf.core.units import format_duration_ns
from mobiperf.reports.html import esc, figure_div, missing, sortable_table
from mobiperf.reports.profile_figures import FOLD_SHARE, fig_profile_icicle

TABLE_MOVERS = 15   # per NEW; the table shows the union


def latency_section(lc) -> str:
    """The CDFs per layer and op, every side overlaid, and the shifts of every NEW in a sortable table."""
    if lc is None:
        return ""
    from mobiperf.compare.latency_shift import ci_text
    from mobiperf.reports.shift_figures import fig_latency_cdfs

    several = len(lc.news) > 1
    rows = []
    for k, new in enumerate(lc.news):
        for s in lc.shifts[k]:
            c = s.result
            cls = c.verdict.replace(" ", "-")
            rows.append(([(esc(new.label), None)] if several else []) + [
                (esc(call_name(s.layer, s.op)), None), (s.quantile, None),
                (format_duration_ns(c.base_median), c.base_median), (format_duration_ns(c.new_median), c.new_median),
                (esc(signed_ns(s.shift_ns)) if math.isfinite(s.shift_ns) else "-",
                 s.shift_ns if math.isfinite(s.shift_ns) else None),
                (esc(ci_text(s.ci.low, s.ci.high)) if s.ci.usable else "-", None),
                ("-" if math.isnan(c.p_value) else f"{c.p_value:.2g}", None if math.isnan(c.p_value) else c.p_value),
                (f"<span class='{cls}'>{esc(c.verdict)}</span>", None),
                (f"<small>{esc('; '.join(s.warnings + ([s.ci.note] if s.ci.note else [])))}</small>", None)])
    headers = (["NEW"] if several else []) + ["layer op", "percentile", "BASE", "NEW", "shift", "CI", "p", "verdict",
                                              "notes"]
    return ("<h3>Latency by layer and op</h3><p class='sub'>Each repetition's p50 and p99 of the spans of a layer and "
            "op; the shift is the median of NEW's repetitions less BASE's, with a bootstrap confidence interval "
            "(repetitions resampled); the verdict is compare's (Mann-Whitney U, minimum effect, lower is "
            "better).</p>" + figure_div(fig_latency_cdfs(lc), "fig-latency-cdfs")
            + "<div class='scroll'>" + sortable_table("shifts-table", headers, rows) + "</div>")


def profile_section(diff: ProfileDiff | None, note: str) -> str:
    if diff is None:
        return missing("The differential profile", note or "no run has an io_span result")
    several = len(diff.news) > 1
    parts = [f"<p class='sub'>The workload's calls, every instant given to the deepest layer's span active then "
             f"(analyzers/time_profile.py), per repetition: the mean of {diff.base.samples} BASE repetitions "
             f"against each NEW's. * beyond noise (Mann-Whitney U on the repetitions, alpha {diff.alpha:g}, "
             f"minimum effect {100 * diff.min_effect:g}%), ? undecided (too few repetitions).</p>"]
    for k, new in enumerate(diff.news):
        ch, tree = diff.tree.changes[k], diff.tree
        order = [i for i in diff.mover_order(k) if diff.movers.changes[k].diff_ns[i] != 0][:3]
        who = f"{esc(new.label)}: " if several else ""
        parts.append(f"<p class='verdict'>{who}all calls {format_duration_ns(tree.base.mean_time[0])} → "
                     f"{format_duration_ns(ch.figures.mean_time[0])} per repetition ({esc(signed_ns(ch.diff_ns[0]))})"
                     + "".join(f"; {esc(mover_sentence(diff.movers, k, i))}" for i in order) + "</p>")
    for k in range(len(diff.news)):
        parts.append(figure_div(fig_profile_icicle(diff, k), f"fig-icicle-{k}"))
    parts.append(f"<p class='sub'>Width: the larger of BASE's and NEW's time; colour: NEW − BASE (red more time, "
                 f"blue less); top to bottom: layer, call, process, thread, file. Click a box to zoom in, the top bar "
                 f"to zoom out. Boxes under {100 * FOLD_SHARE:g}% of the whole are folded into one per parent.</p>")
    parts.append("<h3>Top movers</h3><p class='sub'>By layer, call, process and file (threads summed), the largest "
                 "changes of each NEW; click a header to sort.</p>")
    parts.append("<div class='scroll tall'>" + _movers_table(diff) + "</div>")
    parts.append(_background_table(diff))
    return "".join(parts)


def _background_table(diff: ProfileDiff) -> str:
    """The IO no call caused, per layer, call and process: apart from the calls' time (its spans' summed time)."""
    from mobiperf.compare.profile_format import _count, background_order
    from mobiperf.core.units import format_size

    bg = diff.background
    if bg is None:
        return ""
    rows = []
    for i in list(dict.fromkeys(i for k in range(len(diff.news)) for i in background_order(diff, k)))[:TABLE_MOVERS]:
        layer, call, process = bg.keys[i]
        noun = COUNT_NOUNS.get(layer, "spans")
        cells = [(esc(call_name(layer, call)), None), (esc(process), None),
                 (f"{_count(bg.base.mean_count[i])} {noun}<br><small>{format_size(bg.base.mean_bytes[i])}</small>",
                  float(bg.base.mean_count[i]))]
        for ch in bg.changes:
            mark = {True: " *", False: "", None: " ?"}[ch.significant(i)]
            cells.append((f"{_count(ch.figures.mean_count[i])} {noun}<br><small>{format_size(ch.figures.mean_bytes[i])}"
                          f" · {esc(signed_ns(ch.diff_ns[i]))}{mark}</small>", float(ch.figures.mean_count[i])))
        rows.append(cells)
    if not rows:
        return ""
    headers = ["IO no call caused", "process", "BASE"] + [f"NEW {n.label}" if len(diff.news) > 1 else "NEW"
                                                          for n in diff.news]
    return ("<h3>IO no call caused</h3><p class='sub'>Per repetition, apart from the calls' time: a FUSE daemon's "
            "own flush thread, writeback, periodic journal commits (io_background); the time is the spans' summed "
            "durations.</p><div class='scroll'>" + sortable_table("background-table", headers, rows) + "</div>")


def _movers_table(diff: ProfileDiff) -> str:
    table = diff.movers
    rows_at = list(dict.fromkeys(i for k in range(len(diff.news))
                                 for i in diff.mover_order(k)[:TABLE_MOVERS] if table.changes[k].diff_ns[i] != 0))
    headers = ["mover", "process", "file", "BASE"] + [f"NEW {n.label}" if len(diff.news) > 1 else "NEW"
                                                      for n in diff.news] + ["change" if len(diff.news) == 1 else
                                                                             f"change {n.label}" for n in diff.news]
    rows = []
    for i in rows_at:
        layer, call, process, file = table.keys[i]
        noun = COUNT_NOUNS.get(layer, "spans")
        cells = [(esc(call_name(layer, call)), None), (esc(process), None), (esc(file), None),
                 (f"{format_duration_ns(table.base.mean_time[i])}<br><small>{table.base.mean_count[i]:,.0f} "
                  f"{noun}</small>", float(table.base.mean_time[i]))]
        for ch in table.changes:
            cells.append((f"{format_duration_ns(ch.figures.mean_time[i])}<br><small>{ch.figures.mean_count[i]:,.0f} "
                          f"{noun}</small>", float(ch.figures.mean_time[i])))
        for ch in table.changes:
            mark = {True: " *", False: "", None: " ?"}[ch.significant(i)]
            share = "" if math.isnan(ch.share_of_diff[i]) else f" · {100 * ch.share_of_diff[i]:.0f}% of the change"
            cls = "regression" if ch.diff_ns[i] > 0 and mark == " *" else (
                "improvement" if mark == " *" else "not-significant")
            cells.append((f"<span class='{cls}'>{esc(signed_ns(ch.diff_ns[i]))}{mark}</span><br><small>"
                          f"{esc(share.lstrip(' ·'))}</small>", float(ch.diff_ns[i])))
        rows.append(cells)
    if not rows:
        return "<p class='sub'>No call, layer, process or file moved.</p>"
    return sortable_table("movers-table", headers, rows)
