"""Sweeps: one workload over a grid of stack and workload parameters, repeated, in a seeded random order,
resumable after an interruption.

A sweep lives in a directory:

    SWEEP/sweep.json        the manifest: the cells (parameter values), the seeded order of the units
                            (cell x repetition), and each unit's status, run directory and metrics
    SWEEP/runs/<unit>/      one `mobiperf run` directory per unit and attempt (c003-r1-a1, ...)
    SWEEP/runs/<unit>.log   what that `mobiperf run` printed
    SWEEP/matrix.html       the matrix report (heatmap + table with confidence intervals)

One concept per module:

    params    the parameter vocabulary (names from mobiperf.core.vocabulary), grids and cells
    plan      a cell -> the `mobiperf run` it is (or why it is skipped here), by kind: raw device, file, SQLite
    manifest  the sweep directory, its manifest (created, resumed, grown) and its lock
    runner    running the units here, each a child `mobiperf run` supervised so that none outlives the sweep
    cluster   running the units as tasks on a Dask cluster (--cluster)
    metrics   what one unit measured, read from its run directory through the run store
    summary   per cell: the values, median and bootstrap CI (mobiperf.core.stats); the matrix as text or page
    versus    each cell against the baseline cell with compare's statistics

The names callers use are re-exported here (`from mobiperf.orchestration import sweep; sweep.plan_cell(...)`).
"""

from mobiperf.orchestration.sweep.manifest import FORMAT_NAME, FORMAT_VERSION, MANIFEST, SweepDefinition, SweepDir
from mobiperf.orchestration.sweep.metrics import (NoRepetition, UnitFailed, counter_metrics, manifest_figures,
                                                  parse_strace_counts, timed_window_metrics, unit_metrics)
from mobiperf.orchestration.sweep.params import (DEFAULTS, FUSE_OPTIONS, PARAMETERS, TARGET_DIR, TARGET_HOST_ONLY,
                                                 Parameter, check_params, describe_parameters, grid_cells,
                                                 parse_grid)
from mobiperf.orchestration.sweep.plan import (CellPlan, dry_run_script, kernel_filesystems, plan_cell, unit_argv,
                                               unit_child, unit_request)
from mobiperf.orchestration.sweep.runner import Progress, run_sweep
from mobiperf.orchestration.sweep.summary import (DEFAULT_METRIC, LEGACY_METRICS, CellSummary, canonical_metric,
                                                  cell_comparisons, format_matrix_text, format_rows, metric_unit,
                                                  status_counts, summarize, summarize_values, sweep_matrix,
                                                  varying_params, write_matrix_page)

__all__ = ["CellPlan", "CellSummary", "DEFAULTS", "DEFAULT_METRIC", "FORMAT_NAME", "FORMAT_VERSION", "FUSE_OPTIONS",
           "LEGACY_METRICS", "MANIFEST", "NoRepetition", "PARAMETERS", "Parameter", "Progress", "SweepDefinition",
           "SweepDir", "TARGET_DIR", "TARGET_HOST_ONLY", "UnitFailed", "canonical_metric", "cell_comparisons",
           "check_params",
           "counter_metrics", "describe_parameters", "dry_run_script", "format_matrix_text", "format_rows",
           "grid_cells", "kernel_filesystems", "manifest_figures", "metric_unit", "parse_grid", "parse_strace_counts",
           "plan_cell", "run_sweep", "status_counts", "summarize", "summarize_values", "sweep_matrix",
           "timed_window_metrics", "unit_argv", "unit_child", "unit_request", "unit_metrics", "varying_params",
           "write_matrix_page"]
