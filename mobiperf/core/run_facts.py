"""run.json as a typed, versioned model, read and written in one place: RunMeta (a run: what was asked, where, the
repetitions, the metrics, the stages' summaries), Repetition (one collection), Metric (a named number with its
unit and labels: the currency of run.json, `show`, `compare`, sweeps and the store).

    RunMeta.from_json(text, where)   check and read: the format name, a version this mobiperf reads (older ones
                                     are brought up to date by MIGRATIONS), a known status; UsageError otherwise
    meta.to_json()                   the dict json.dump writes (RunDir.write_meta)
    new_run_meta(...)                the header of a new run: what every run directory starts with (`mobiperf
                                     run` and `mobiperf ingest` alike)

Keys a version does not model (a collector's summary in a repetition, a newer mobiperf's additions) are kept as
they were, in `extra`, and written back: a run directory read and rewritten loses nothing. Old run directories
load: the golden runs of tests/fixtures are read through this model unchanged (tests/unit/test_run_facts.py).

Compatibility: code written against the run.json dicts keeps working while it is converted: RunMeta, Repetition
and Metric answer meta["stack"], meta.get("scope"), meta["repetitions"][0]["exit_code"], m["value"] (a modelled
field, or an extra key), and meta["key"] = value, setdefault, update (a modelled field is type-checked when the
record is next encoded or validated). New code uses the attributes.
"""

from __future__ import annotations

import json
import platform
from datetime import datetime, timezone
from typing import Any, Callable, ClassVar

import msgspec

from mobiperf.core.errors import UsageError
from mobiperf.core.version import VERSION

FORMAT_NAME = "mobiperf-run"
FORMAT_VERSION = 1
STATUSES = ("incomplete", "complete", "failed")


class _Record(msgspec.Struct, kw_only=True, dict=True):
    """A record of run.json with its unmodelled keys (extra), readable and writable as the dict it once was. A
    field written only when it has a value (_OMIT_NONE) that run.json held as null is written back as null (the
    instance remembers it in _nulls): what is read is what is written."""

    extra: dict[str, Any] = {}
    _OMIT_NONE: ClassVar[frozenset[str]] = frozenset()  # modelled keys written only when they have a value
    _NESTED: ClassVar[dict[str, type[_Record]]] = {}  # list fields of records: field -> record class

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: Any = "run.json"):
        if not isinstance(data, dict):
            raise UsageError(f"{where}: a {cls.__name__} is not an object")
        fields = set(cls.__struct_fields__) - {"extra"}
        known = {k: v for k, v in data.items() if k in fields}
        for name, record in cls._NESTED.items():
            if isinstance(known.get(name), list):
                known[name] = [record.from_dict(x, where) for x in known[name]]
        try:
            out = msgspec.convert(known, cls, strict=False)
        except msgspec.ValidationError as e:
            raise UsageError(f"{where}: {cls.__name__}: {e}") from None
        out.extra = {k: v for k, v in data.items() if k not in fields}
        out._nulls = {k for k in cls._OMIT_NONE if k in data and data[k] is None}
        return out

    def to_json(self) -> dict[str, Any]:
        out = {}
        for name in self.__struct_fields__:
            if name == "extra":
                continue
            value = getattr(self, name)
            if value is None and name in self._OMIT_NONE and name not in self._null_keys():
                continue
            out[name] = _plain(value)
        out.update(self.extra)
        return out

    # --- the old dict access, while code is converted ---

    def _modelled(self, key: str) -> bool:
        return key != "extra" and key in self.__struct_fields__

    def _null_keys(self) -> set[str]:
        if not hasattr(self, "_nulls"):
            self._nulls: set[str] = set()
        return self._nulls

    def _absent(self, key: str) -> bool:
        """A modelled key run.json would not hold: no value, omitted when it has none, not an explicit null."""
        return getattr(self, key) is None and key in self._OMIT_NONE and key not in self._null_keys()

    def __getitem__(self, key: str) -> Any:
        # a modelled field answers even when it has no value (None): run.json may hold it as null
        return getattr(self, key) if self._modelled(key) else self.extra[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if self._modelled(key):
            record = self._NESTED.get(key)
            if record is not None and isinstance(value, list):
                value = [x if isinstance(x, record) else record.from_dict(x) for x in value]
            setattr(self, key, value)
            if key in self._OMIT_NONE:  # dict code setting None means null
                (self._null_keys().add if value is None else self._null_keys().discard)(key)
        else:
            self.extra[key] = value

    def __contains__(self, key: str) -> bool:
        if self._modelled(key):
            return not self._absent(key)
        return key in self.extra

    def get(self, key: str, default: Any = None) -> Any:
        if self._modelled(key):
            return default if self._absent(key) else getattr(self, key)
        return self.extra.get(key, default)

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self or (self._modelled(key) and getattr(self, key) is None):
            self[key] = default
        return self[key]

    def update(self, changes: dict[str, Any] | None = None, **more: Any) -> None:
        for key, value in {**(changes or {}), **more}.items():
            self[key] = value

    def pop(self, key: str, *default: Any) -> Any:
        if self._modelled(key):
            value = self.get(key, *default) if default else self[key]
            setattr(self, key, None if key in self._OMIT_NONE else _default_of(type(self), key))
            self._null_keys().discard(key)
            return value
        return self.extra.pop(key, *default)

    def keys(self):
        return self.to_json().keys()

    def items(self):
        return self.to_json().items()


def _default_of(record: type[_Record], name: str) -> Any:
    """A field's default value (a fresh copy of a mutable one); None for a required field."""
    for f in msgspec.structs.fields(record):
        if f.name == name:
            if f.default_factory is not msgspec.NODEFAULT:
                return f.default_factory()
            return None if f.default is msgspec.NODEFAULT else f.default
    return None


def _plain(value: Any) -> Any:
    if isinstance(value, _Record):
        return value.to_json()
    if isinstance(value, list):
        return [_plain(x) for x in value]
    if isinstance(value, tuple):
        return [_plain(x) for x in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


# Metric names as older run directories store them -> today's (read as today's: a run analysed before a rename
# compares with one analysed after it).
RENAMED_METRICS = {
    "latency.syscall.syscall.p50": "latency.syscall.p50",
    "latency.syscall.syscall.p99": "latency.syscall.p99",
}


class Metric(_Record):
    """A named number: `latency.d2c.p99{op=write}` = 812345.0 ns. n: how many repetitions a run's median is of.
    A name an older mobiperf gave it (RENAMED_METRICS) is read as today's."""

    name: str
    labels: dict[str, str] = {}
    value: float | None = None
    unit: str = ""
    n: int | None = None
    _OMIT_NONE: ClassVar[frozenset[str]] = frozenset({"n"})

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: Any = "run.json"):
        if isinstance(data, dict) and data.get("name") in RENAMED_METRICS:
            data = {**data, "name": RENAMED_METRICS[data["name"]]}
        return super().from_dict(data, where)

    @property
    def key(self) -> str:
        """name{label=value,...}, labels sorted: what identifies a metric among a run's."""
        labels = ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        return f"{self.name}{{{labels}}}" if labels else self.name


class Repetition(_Record):
    """One collection of the workload: its index, exit status, time, and (after analysis) its metrics; every
    collector's summary (ftrace, syscalls, layout, facts, stack, counters, notes) is kept under its own key."""

    index: int
    exit_code: int | None = None
    workload_ns: int | None = None
    workload_window: str | None = None
    metrics: list[Metric] | None = None
    _OMIT_NONE: ClassVar[frozenset[str]] = frozenset({"exit_code", "workload_ns", "workload_window", "metrics"})
    _NESTED: ClassVar[dict[str, type[_Record]]] = {"metrics": Metric}


class RunMeta(_Record):
    """A run: what was asked (stack, command, options), on which target, its repetitions, its metrics (the
    median over repetitions), and the stages' records (parse, analysis, timings, stopped, reanalysis)."""

    format: str = FORMAT_NAME
    version: int = FORMAT_VERSION
    status: str = "incomplete"
    id: str = ""
    created: str = ""
    mobiperf: str = ""
    host: str = ""
    target: dict[str, Any] = {}
    stack: str = ""
    scheduler: str | None = None
    command: list[str] = []
    repetitions: list[Repetition] = []
    warnings: list[str] | None = None
    metrics: list[Metric] | None = None
    _OMIT_NONE: ClassVar[frozenset[str]] = frozenset({"warnings", "metrics"})
    _NESTED: ClassVar[dict[str, type[_Record]]] = {"repetitions": Repetition, "metrics": Metric}

    @classmethod
    def from_json(cls, text: str | bytes, where: Any = "run.json") -> "RunMeta":
        """run.json's text, checked and read (see the module docstring); UsageError naming `where` otherwise."""
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise UsageError(f"{where} is corrupt: {e}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
            raise UsageError(f"{where} is not a mobiperf run description (format is not {FORMAT_NAME!r})")
        version = data.get("version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise UsageError(
                f"{where} has format version {version!r}; this mobiperf reads up to {FORMAT_VERSION} (upgrade mobiperf)"
            )
        for old in range(version, FORMAT_VERSION):
            data = MIGRATIONS[old](data)
        if data.get("status") not in STATUSES:
            raise UsageError(f"{where}: status {data.get('status')!r} is not one of {STATUSES}")
        return cls.from_dict(data, where)

    def repetition(self, index: int) -> Repetition | None:
        return next((r for r in self.repetitions if r.index == index), None)


# version -> a function bringing a run.json dict of that version to the next one
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def new_run_meta(
    out_name: str, *, target: dict[str, Any], stack: str, command: list[str], scheduler: str | None = None, **facts: Any
) -> RunMeta:
    """The header of a new run directory: its id, when and where it was made, by which mobiperf, on which target,
    with which stack and command; facts: the run's other options (device, scope, sources ...), kept as given."""
    meta = RunMeta(
        id=out_name,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        mobiperf=VERSION,
        host=platform.node(),
        target=target,
        stack=stack,
        scheduler=scheduler,
        command=list(command),
    )
    meta.update(facts)
    return meta
