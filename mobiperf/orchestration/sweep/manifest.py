"""The sweep directory and its manifest, SWEEP/sweep.json: the cells (parameter values, or why a cell is skipped
here), the seeded order of the units (cell x repetition) and each unit's status, run directory and metrics. Every
change is written atomically at once (a temporary file renamed over it), so a sweep killed at any moment leaves a
manifest it resumes from; one sweep process per directory holds its lock.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from mobiperf.core.errors import UsageError
from mobiperf.orchestration.sweep.params import check_params
from mobiperf.orchestration.sweep.plan import kernel_filesystems, plan_cell
from mobiperf.orchestration.sweep.summary import DEFAULT_METRIC

FORMAT_NAME = "mobiperf-sweep"
FORMAT_VERSION = 1
MANIFEST = "sweep.json"


@dataclass
class SweepDefinition:
    """What a sweep measures: the cells, repetitions and the seed of the order."""

    cells: list[dict[str, str]]
    repeat: int = 3
    seed: int = 0
    metric: str = DEFAULT_METRIC
    name: str = "sweep"
    timeout_s: float = 1800.0

    def __post_init__(self) -> None:
        if not self.cells:
            raise UsageError("a sweep needs at least one cell")
        if self.repeat < 1:
            raise UsageError("a sweep needs at least one repetition (-n 1)")
        self.cells = [check_params(c) for c in self.cells]


class SweepDir:
    """The sweep directory and its manifest; every change is written atomically at once."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.manifest_path = self.path / MANIFEST

    def exists(self) -> bool:
        return self.manifest_path.exists()

    def read(self) -> dict:
        try:
            data = json.loads(self.manifest_path.read_text())
        except FileNotFoundError:
            raise UsageError(f"{self.path}: no sweep here ({MANIFEST} is missing)") from None
        except ValueError as e:
            raise UsageError(f"{self.manifest_path}: unreadable manifest: {e}") from None
        if data.get("format") != FORMAT_NAME:
            raise UsageError(f"{self.manifest_path} is not a mobiperf sweep manifest")
        return data

    def write(self, data: dict) -> None:
        tmp = self.manifest_path.with_name(f".{MANIFEST}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, self.manifest_path)

    def create_or_resume(self, definition: SweepDefinition | None, *, grow: bool = False) -> dict:
        """The manifest: created from `definition`, or the existing one when it holds the same cells and
        repetitions (a resume). `definition=None` resumes whatever is there. With `grow`, a definition that has
        every stored cell and more (a study that gained configurations) adds the new cells and their units,
        keeping what was measured."""
        if self.exists():
            data = self.read()
            if definition is not None:
                stored = [c["params"] for c in data["cells"]]
                new = [c for c in definition.cells if c not in stored]
                same_runs = data["repeat"] == definition.repeat and data["seed"] == definition.seed
                if grow and same_runs and all(c in definition.cells for c in stored):
                    if new:
                        self._add_cells(data, new)
                elif stored != definition.cells or not same_runs:
                    raise UsageError(f"{self.path} holds a different sweep ({len(stored)} cells, -n "
                                     f"{data['repeat']}, seed {data['seed']}); resume it without parameters or "
                                     "choose another -o")
            return data
        if definition is None:
            raise UsageError(f"{self.path}: no sweep to resume; give its parameters (-p NAME=V1,V2)")
        self.path.mkdir(parents=True, exist_ok=True)
        cells = _planned_cells(definition.cells, 0)
        units = [(c["id"], r) for c in cells if c["status"] == "planned" for r in range(definition.repeat)]
        random.Random(definition.seed).shuffle(units)
        data = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "name": definition.name,
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "repeat": definition.repeat, "seed": definition.seed, "metric": definition.metric,
                "timeout_s": definition.timeout_s, "cells": cells,
                "units": [_pending_unit(cid, r) for cid, r in units]}
        self.write(data)
        return data

    def _add_cells(self, data: dict, new: list[dict[str, str]]) -> None:
        first = len(data["cells"])
        cells = _planned_cells(new, first)
        data["cells"] += cells
        units = [(c["id"], r) for c in cells if c["status"] == "planned" for r in range(data["repeat"])]
        random.Random(data["seed"] + first).shuffle(units)
        data["units"] += [_pending_unit(cid, r) for cid, r in units]
        data.pop("finished", None)
        self.write(data)


def _planned_cells(cells: list[dict[str, str]], first: int) -> list[dict]:
    """The manifest's cells c<first>, c<first+1>, ...: planned, or skipped with the reason (planned on this host)."""
    available = kernel_filesystems()
    out = []
    for i, params in enumerate(cells, first):
        plan = plan_cell(params, available_fs=available)
        out.append({"id": f"c{i:03d}", "params": params, "status": "skipped" if plan.skip else "planned",
                    "reason": plan.skip})
    return out


def _pending_unit(cell: str, rep: int) -> dict:
    """A unit not run yet: repetition `rep` of `cell`."""
    return {"cell": cell, "rep": rep, "status": "pending", "attempts": 0, "run": None, "metrics": {}, "error": None,
            "notes": []}


def lock_sweep(sweep: SweepDir):
    """One sweep process per directory: a second one would run the same units twice."""
    import fcntl

    lock = open(sweep.path / ".lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise UsageError(f"another mobiperf sweep is running in {sweep.path}; wait for it or stop it") from None
    return lock
