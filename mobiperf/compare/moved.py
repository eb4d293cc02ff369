"""Where the time moved, added to a comparison: the differential profile (compare.profile) and the latency shifts
per layer and op (compare.latency_shift) of BASE against every NEW, at the comparison's alpha and minimum effect.
What `mobiperf compare` prints and draws, and what any caller comparing runs (a replay's what-if) can add."""

from __future__ import annotations

from mobiperf.compare.latency_shift import compare_latency
from mobiperf.compare.profile import ProfileUnavailable, profile_groups


def attach_profile(result) -> None:
    """Where the time moved, added to a comparison (compare.runs.CompareResult): its profile and latency shifts,
    at its alpha and minimum effect, or profile_note saying why there is none."""
    groups, options = [result.base, *(p.new for p in result.pairs)], result.options
    try:
        result.profile = profile_groups(groups[0], groups[1:], alpha=options.alpha, min_effect=options.min_effect)
    except ProfileUnavailable as e:
        result.profile_note = str(e)
        return
    result.latency = compare_latency(groups[0], groups[1:], alpha=options.alpha, min_effect=options.min_effect)
