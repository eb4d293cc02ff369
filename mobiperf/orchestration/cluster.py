"""Work spread over a Dask cluster: which cluster (--cluster), and re-analysing a store's runs, each run a task.

--cluster takes
    local            a distributed.LocalCluster here: one single-threaded worker process per core
    local:N          the same with N worker processes
    tcp://HOST:PORT  a running scheduler (`dask scheduler`), with workers started by `dask worker`
                     (HOST:PORT alone means tcp://); MOBIPERF_CLUSTER_TIMEOUT (s, default 10) bounds
                     the wait for it

Dask is imported here only, and only when a command is given --cluster: without it nothing changes. Scheduling,
retries after a lost worker (a task whose worker dies runs again elsewhere, up to Dask's allowed-failures) and
placement are Dask's; this module only says what a task is.

The store must be reachable from every worker under the same name: a path on a shared filesystem (made absolute
here), or an fsspec URL. A worker analyses a local store's run in place, and a remote one's in a local copy whose
tables, results and run.json (last, so the index sees a finished analysis) it writes back.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from mobiperf.core.errors import MobiperfError, UsageError

CONNECT_TIMEOUT_S = float(os.environ.get("MOBIPERF_CLUSTER_TIMEOUT", "10"))  # seconds to reach a scheduler


@dataclass(frozen=True)
class ClusterSpec:
    """A parsed --cluster value: a LocalCluster of `workers` processes, or a scheduler's address."""

    text: str
    address: str | None = None
    workers: int | None = None

    @property
    def is_local(self) -> bool:
        return self.address is None


def parse_cluster(text: str) -> ClusterSpec:
    """`local`, `local:N`, `tcp://HOST:PORT` or `HOST:PORT`; UsageError naming the forms otherwise."""
    text = text.strip()
    m = re.fullmatch(r"local(?:[:\[](\d+)\]?)?", text)
    if m:
        n = int(m.group(1)) if m.group(1) else (os.cpu_count() or 1)
        if n < 1:
            raise UsageError("--cluster local:N needs at least one worker")
        return ClusterSpec(text, workers=n)
    if re.fullmatch(r"(tcp|tls)://[^\s/:]+:\d+", text):
        return ClusterSpec(text, address=text)
    if re.fullmatch(r"[^\s/:]+:\d+", text):
        return ClusterSpec(text, address=f"tcp://{text}")
    raise UsageError(f"--cluster {text!r}: give local, local:N (N worker processes here) or the scheduler's "
                     "address tcp://HOST:PORT")


def _import_distributed():
    try:
        import distributed
    except ImportError:
        raise UsageError("--cluster needs Dask: pip install 'mobiperf[cluster]'") from None
    return distributed


@contextlib.contextmanager
def open_client(spec: ClusterSpec, *, resources: dict[str, float] | None = None,
                connect_timeout_s: float | None = None) -> Iterator[Any]:
    """A distributed.Client on the cluster; a LocalCluster is started here and stopped on the way out.
    MobiperfError in one line when the scheduler cannot be reached."""
    distributed = _import_distributed()
    connect_timeout_s = connect_timeout_s or CONNECT_TIMEOUT_S
    if spec.is_local:
        # One task per worker process at a time, and one core each: Polars' and numba's own thread pools would
        # otherwise put N workers x all cores threads on the cores.
        env = {"POLARS_MAX_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
        with distributed.LocalCluster(n_workers=spec.workers, threads_per_worker=1, processes=True,
                                      dashboard_address=None, resources=resources, env=env) as cluster, \
                distributed.Client(cluster) as client:
            yield client
        return
    try:
        client = distributed.Client(spec.address, timeout=connect_timeout_s)
    except (OSError, TimeoutError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        why = f"no answer within {connect_timeout_s:g} s" if "timed out" in reason.lower() else reason
        raise MobiperfError(f"cannot reach the Dask scheduler at {spec.address}: {why}; start it with "
                            "`dask scheduler`, or use --cluster local") from None
    try:
        yield client
    finally:
        client.close()


def worker_name() -> str | None:
    """The name of the Dask worker running the current task; None outside a worker (where Dask, not imported,
    stays so)."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        return str(distributed.get_worker().name)
    except ValueError:
        return None


# --- analysis of a store, one run per task ------------------------------------------------------------------------

@contextlib.contextmanager
def local_run_dir(store, run_id: str) -> Iterator[Path]:
    """The run directory as a local path: itself in a local store, a copy written back afterwards otherwise."""
    if store.is_local:
        yield Path(store.path(run_id))
        return
    with tempfile.TemporaryDirectory(prefix="mobiperf-run-") as tmp:
        local = Path(tmp) / "run"
        store.fs.get(store.path(run_id) + "/", str(local) + "/", recursive=True)
        yield local
        for sub in ("tables", "results"):
            for path in sorted((local / sub).glob("*.parquet")):
                store.fs.put_file(str(path), store.path(run_id, sub, path.name))
        store.fs.put_file(str(local / "run.json"), store.path(run_id, "run.json"))


def analyze_store_run(store_url: str, run_id: str) -> dict[str, Any]:
    """One task: re-parse and re-analyse one run of the store, results written back to its directory.
    {"run_id", "error" (None when it worked), "worker", "seconds", "cpu_seconds"}; never raises for a bad run."""
    from mobiperf.orchestration import pipeline
    from mobiperf.core.runstore import RunDir
    from mobiperf.core.store import Store

    started, cpu = time.perf_counter(), time.process_time()
    error = None
    try:
        store = Store.open(store_url)
        with local_run_dir(store, run_id) as path:
            for sub in ("tables", "results"):   # a copied run may lack the empty ones (git keeps no empty dirs)
                (path / sub).mkdir(exist_ok=True)
            pipeline.analyze(RunDir.open(path), reparse=True)
    except MobiperfError as e:
        error = str(e).splitlines()[0]
    except Exception as e:  # noqa: BLE001 - one bad run must not take the others down; its reason is kept
        error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return {"run_id": run_id, "error": error, "worker": worker_name(),
            "seconds": round(time.perf_counter() - started, 3), "cpu_seconds": round(time.process_time() - cpu, 3)}


def store_url_for_workers(url: str | os.PathLike) -> str:
    """The store as workers must name it: a local path made absolute (a shared filesystem), URLs as given."""
    text = os.fspath(url)
    return text if "://" in text else os.path.abspath(text)


def analyze_store(url: str | os.PathLike, client: Any = None, *, run_ids: list[str] | None = None,
                  on_done: Callable[[dict, int, int], None] | None = None) -> list[dict[str, Any]]:
    """Re-analyse every run of the store (or `run_ids`), each run a task on the client's cluster, or one after
    another here without a client. Returns one outcome per run (see analyze_store_run), in run order; the index
    is brought up to date afterwards."""
    from mobiperf.core.store import Store, discover_runs, update_index

    store_url = store_url_for_workers(url)
    store = Store.open(store_url)
    ids = sorted(run_ids if run_ids is not None else discover_runs(store))
    outcomes: dict[str, dict] = {}
    if client is None:
        for i, run_id in enumerate(ids, 1):
            outcomes[run_id] = analyze_store_run(store_url, run_id)
            if on_done:
                on_done(outcomes[run_id], i, len(ids))
    else:
        outcomes = _analyze_on_cluster(client, store_url, ids, on_done)
    update_index(store)
    return [outcomes[r] for r in ids]


def _analyze_on_cluster(client: Any, store_url: str, ids: list[str],
                        on_done: Callable[[dict, int, int], None] | None) -> dict[str, dict]:
    from distributed import as_completed

    futures = client.map(analyze_store_run, [store_url] * len(ids), ids, pure=False,
                         key=[f"mobiperf-analyze-{i}-{os.getpid()}-{time.monotonic_ns()}" for i in range(len(ids))])
    by_key = {f.key: run_id for f, run_id in zip(futures, ids)}
    outcomes: dict[str, dict] = {}
    try:
        for i, future in enumerate(as_completed(futures), 1):
            run_id = by_key[future.key]
            try:
                outcomes[run_id] = future.result()
            except Exception as e:  # noqa: BLE001 - a task Dask gave up on (KilledWorker after repeated deaths)
                outcomes[run_id] = {"run_id": run_id, "error": f"{type(e).__name__}: {e}", "worker": None,
                                    "seconds": None, "cpu_seconds": None}
            if on_done:
                on_done(outcomes[run_id], i, len(ids))
    finally:
        client.cancel([f for f in futures if not f.done()])
    return outcomes
