"""The run directory: the one place where a run's files live, and its run.json.

    RUNDIR/run.json        format name + version, target facts, stack, command, timings, repetitions, metrics, status
    RUNDIR/raw/rep<i>/     what the collectors brought back (trace text, event format files, per-CPU stats)
    RUNDIR/tables/         typed event tables (Parquet), one file per row type, all repetitions with a `rep` column
    RUNDIR/results/        analyzer output tables (Parquet)
    RUNDIR/report.html     the report

A run directory is never overwritten. It is created with status "incomplete" and only the last stage marks it
"complete" (or "failed" when the workload failed), so an interrupted run stays on disk, labelled for what it is.
run.json is replaced atomically (write to a temporary file, then rename), so a crash never leaves half of it.
While a run collects, RUNDIR/.reserve holds a little space (reserve_space) that is given back when the file system
fills up, so that run.json can still say why the run stopped (mobiperf.core.run_stop).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from mobiperf.core.errors import MissingTableError, UsageError
from mobiperf.core.run_facts import FORMAT_NAME, FORMAT_VERSION, STATUSES, RunMeta  # noqa: F401 (re-exported)
from mobiperf.core.schema import RESULTS, TABLES, Schema

RESERVE_NAME = ".reserve"
RESERVE_BYTES = 1 << 20   # run.json of a stopped run, with room to spare


@dataclass
class RunDir:
    path: Path

    @classmethod
    def create(cls, path: Path, meta: RunMeta | dict[str, Any]) -> "RunDir":
        path = Path(path)
        if path.exists():
            raise UsageError(f"{path} already exists; a run directory is never overwritten (choose another -o)")
        path.mkdir(parents=True)
        for sub in ("raw", "tables", "results"):
            (path / sub).mkdir()
        run = cls(path)
        if not isinstance(meta, RunMeta):  # a header written as a dict (code not yet converted)
            meta = RunMeta.from_dict({"format": FORMAT_NAME, "version": FORMAT_VERSION, "status": "incomplete",
                                      **meta})
        run.write_meta(meta)
        return run

    @classmethod
    def open(cls, path: Path) -> "RunDir":
        """An existing run directory, with its run.json checked; UsageError saying what is wrong otherwise."""
        path = Path(path)
        if not path.is_dir():
            raise UsageError(f"{path}: no such run directory")
        run = cls(path)
        run.read_meta()
        return run

    def reserve_space(self, size: int = RESERVE_BYTES) -> None:
        """Set space aside for the last words of a run whose file system fills up (best effort)."""
        try:
            with open(self.path / RESERVE_NAME, "wb") as f:
                f.write(b"\0" * size)  # written, not sparse: the blocks are really taken
        except OSError:
            pass

    def release_reserve(self) -> None:
        (self.path / RESERVE_NAME).unlink(missing_ok=True)

    @property
    def meta_path(self) -> Path:
        return self.path / "run.json"

    def read_meta(self) -> RunMeta:
        try:
            text = self.meta_path.read_text()
        except FileNotFoundError:
            raise UsageError(f"{self.path} is not a run directory: it has no run.json") from None
        return check_meta(text, self.meta_path)

    def write_meta(self, meta: RunMeta | dict[str, Any]) -> None:
        """run.json replaced atomically; a dict (code not yet converted) goes through the model first, so what is
        written is what the model reads back."""
        data = (meta if isinstance(meta, RunMeta) else RunMeta.from_dict(meta, self.meta_path)).to_json()
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".run.json.")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=False, default=str)
            f.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a run directory is meant to be shared
        os.replace(tmp, self.meta_path)

    def update_meta(self, **changes: Any) -> RunMeta:
        meta = self.read_meta()
        meta.update(changes)
        self.write_meta(meta)
        return meta

    def raw_dir(self, rep: int) -> Path:
        d = self.path / "raw" / f"rep{rep}"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def raw_dirs(self) -> list[tuple[int, Path]]:
        reps = [(int(p.name[3:]), p) for p in (self.path / "raw").glob("rep*") if p.name[3:].isdigit()]
        return sorted(reps)

    # --- tables ---

    def write_table(self, schema: Schema, df: pl.DataFrame) -> Path:
        kind = "tables" if schema.name in TABLES else "results"
        path = self.path / kind / f"{schema.name}.parquet"
        tmp = path.with_suffix(".parquet.tmp")
        try:
            schema.validate(df).write_parquet(tmp)
        except (OSError, pl.exceptions.ComputeError) as e:
            tmp.unlink(missing_ok=True)
            # Polars reports a full or failing disk as a ComputeError ("... (os error 28)"): say it as the OSError
            # it is, so that it ends in one line like any other storage error.
            m = re.search(r"os error (\d+)", str(e))
            if isinstance(e, OSError) or not m:
                raise
            raise OSError(int(m[1]), os.strerror(int(m[1])), str(path)) from None
        os.replace(tmp, path)
        return path

    def has_table(self, name: str) -> bool:
        return self._table_path(name).exists()

    def read_table(self, name: str) -> pl.DataFrame:
        path = self._table_path(name)
        if not path.exists():
            raise MissingTableError(f"{self.path}: no {name} table ({path.relative_to(self.path)} is missing)")
        schema = TABLES.get(name) or RESULTS.get(name)
        df = pl.read_parquet(path)
        return schema.validate(df) if schema else df

    def scan_table(self, name: str) -> pl.LazyFrame:
        """A table as a lazy scan: row counts and column extremes without reading the whole file."""
        path = self._table_path(name)
        if not path.exists():
            raise MissingTableError(f"{self.path}: no {name} table ({path.relative_to(self.path)} is missing)")
        return pl.scan_parquet(path)

    def _table_path(self, name: str) -> Path:
        kind = "tables" if name in TABLES else "results"
        return self.path / kind / f"{name}.parquet"


def check_meta(text: str | bytes, where: Any) -> RunMeta:
    """run.json's text, checked and read into the typed model (mobiperf.core.run_facts.RunMeta.from_json)."""
    return RunMeta.from_json(text, where)
