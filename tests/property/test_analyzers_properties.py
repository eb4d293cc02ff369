"""Property tests of the classification analyzers (hypothesis): every request classified exactly once in each
dimension, a contiguous stream is 100 % sequential, shuffling never raises the sequential share, layer
latencies add up and are non-negative, and results do not depend on the input row order."""

from __future__ import annotations


import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from mobiperf.analyzers.block_io import classify_block_io
from mobiperf.analyzers.file_type import FILE_TYPES
from mobiperf.analyzers.io_class import share_io
from mobiperf.analyzers.locality import LOCALITIES, sequential_share
from mobiperf.analyzers.region import REGIONS
from mobiperf.analyzers.size import SIZE_CLASSES
from mobiperf.analyzers.syscall import classify_syscalls
from mobiperf.core.schema import BLOCK_RQ, SYSCALL_IO

SETTINGS = settings(max_examples=80, deadline=None)
SIZES = st.sampled_from([0, 512, 4096, 8192, 65536, 131072, 262144, 524288, 1 << 20])


def block_rq(requests: list[dict]) -> pl.DataFrame:
    """block_rq rows from dicts with sector, size_bytes, op and a time t (the issue order)."""
    rows = []
    for r in requests:
        t = r["t"] * 1000
        flush = r["op"] == "flush"
        rows.append({"rep": 0, "dev_major": 7, "dev_minor": r.get("dev", 0),
                     "sector": -1 if flush else r["sector"], "size_bytes": 0 if flush else r["size_bytes"],
                     "rwbs": {"write": "WS", "read": "R", "flush": "FF"}[r["op"]], "op": r["op"],
                     "is_sync": r["op"] == "write", "is_meta": r.get("meta", False), "is_fua": False,
                     "is_preflush": False, "is_readahead": False, "queue_ts": None if flush else t,
                     "getrq_ts": None if flush else t + r.get("q2g", 1), "insert_ts": r.get("insert"),
                     "issue_ts": t + 50, "complete_ts": t + 50 + r.get("d2c", 100), "nr_bios": 1, "pid": 1,
                     "comm": r.get("comm", "app"), "error": 0, "is_complete_match": True})
    return BLOCK_RQ.validate(pl.DataFrame(rows, schema_overrides={"insert_ts": pl.Int64, "queue_ts": pl.Int64,
                                                                  "getrq_ts": pl.Int64}))


request = st.fixed_dictionaries({
    "sector": st.integers(0, 1 << 20).map(lambda s: s * 8), "size_bytes": SIZES,
    "op": st.sampled_from(["write", "read", "flush"]), "meta": st.booleans(), "dev": st.integers(0, 1),
    "comm": st.sampled_from(["app", "jbd2/loop0-8"]), "d2c": st.integers(0, 10_000)})


@SETTINGS
@given(st.lists(request, min_size=1, max_size=40))
def test_every_request_classified_exactly_once_in_each_dimension(reqs):
    for i, r in enumerate(reqs):
        r["t"] = i
    rq = block_rq(reqs)
    bio = classify_block_io(rq)
    assert len(bio) == len(rq)
    allowed = {"size_class": {*SIZE_CLASSES, "none"}, "locality": set(LOCALITIES),
               "locality_tolerant": set(LOCALITIES), "locality_global": set(LOCALITIES),
               "sync_mode": {"flush", "fua", "preflush", "sync", "async"}, "region": set(REGIONS),
               "file_type": set(FILE_TYPES)}
    for dim, values in allowed.items():
        assert bio[dim].null_count() == 0, dim
        assert set(bio[dim].unique()) <= values, dim
    # the shares of each dimension add up to 1 per op (locality: over sequential + random only)
    shares = share_io(bio).filter(pl.col("count_share").is_not_null())
    for (op, dim), g in shares.group_by("op", "dimension"):
        assert abs(g["count_share"].sum() - 1.0) < 1e-9, (op, dim)


@SETTINGS
@given(st.lists(SIZES.filter(lambda s: s > 0), min_size=1, max_size=50), st.integers(0, 1 << 24))
def test_contiguous_stream_is_fully_sequential(sizes, start):
    reqs, sector = [], start * 8
    for i, size in enumerate(sizes):
        reqs.append({"sector": sector, "size_bytes": size, "op": "write", "t": i})
        sector += size // 512
    bio = classify_block_io(block_rq(reqs))
    assert bio["locality"].to_list()[0] == "first"
    if len(sizes) > 1:
        assert sequential_share(bio["locality"]) == 1.0
        assert sequential_share(bio["locality_tolerant"]) == 1.0
        assert sequential_share(bio["locality_global"]) == 1.0


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 64), SIZES.filter(lambda s: s > 0)), min_size=2, max_size=30,
                unique_by=lambda x: x[0]), st.randoms(use_true_random=False))
def test_shuffling_never_raises_the_sequential_share(slots, rnd):
    """Non-overlapping extents (slot k starts at sector k * 2048): issuing them in address order gives the
    highest strict sequential share any order can have."""
    extents = [(k * 2048, size) for k, size in sorted(slots)]
    ordered = [{"sector": s, "size_bytes": n, "op": "write", "t": i} for i, (s, n) in enumerate(extents)]
    shuffled_extents = extents[:]
    rnd.shuffle(shuffled_extents)
    shuffled = [{"sector": s, "size_bytes": n, "op": "write", "t": i} for i, (s, n) in enumerate(shuffled_extents)]
    best = sequential_share(classify_block_io(block_rq(ordered))["locality"]) or 0.0
    other = sequential_share(classify_block_io(block_rq(shuffled))["locality"]) or 0.0
    assert other <= best


@SETTINGS
@given(st.lists(st.fixed_dictionaries({"q2g": st.integers(0, 100), "gi": st.integers(0, 500),
                                       "id": st.integers(0, 500), "dc": st.integers(0, 5000),
                                       "insert": st.booleans()}), min_size=1, max_size=30))
def test_phases_add_up_and_are_non_negative(phases):
    rows = []
    for i, p in enumerate(phases):
        q = i * 100_000
        g = q + p["q2g"]
        ins = g + p["gi"] if p["insert"] else None
        d = (ins if ins is not None else g) + p["id"]
        rows.append({"rep": 0, "dev_major": 7, "dev_minor": 0, "sector": i * 8, "size_bytes": 4096, "rwbs": "W",
                     "op": "write", "is_sync": False, "is_meta": False, "is_fua": False, "is_preflush": False,
                     "is_readahead": False, "queue_ts": q, "getrq_ts": g, "insert_ts": ins, "issue_ts": d,
                     "complete_ts": d + p["dc"], "nr_bios": 1, "pid": 1, "comm": "a", "error": 0,
                     "is_complete_match": True})
    bio = classify_block_io(BLOCK_RQ.validate(pl.DataFrame(rows, schema_overrides={"insert_ts": pl.Int64})))
    for phase in ("q2g", "g2i", "i2d", "d2c", "q2c"):
        assert (bio[f"{phase}_ns"].drop_nulls() >= 0).all()
    full = bio.filter(pl.col("g2i_ns").is_not_null())
    assert (full["q2c_ns"] == full["q2g_ns"] + full["g2i_ns"] + full["i2d_ns"] + full["d2c_ns"]).all()


@SETTINGS
@given(st.lists(request, min_size=1, max_size=40), st.integers(0, 10_000))
def test_block_classification_independent_of_row_order(reqs, seed):
    for i, r in enumerate(reqs):
        r["t"] = i
    rq = block_rq(reqs)
    shuffled = rq.sample(fraction=1.0, shuffle=True, seed=seed)
    a, b = classify_block_io(rq), classify_block_io(shuffled)
    assert a.sort(a.columns, nulls_last=True).equals(b.sort(b.columns, nulls_last=True))


def syscalls(calls: list[tuple]) -> pl.DataFrame:
    rows = [{"rep": 0, "ts": i * 1000, "dur": 10, "pid": pid, "comm": "app", "syscall": name, "fd": 3,
             "path": path, "request_bytes": size, "offset_bytes": off, "ret": size, "errno": "", "source": "strace"}
            for i, (pid, name, path, size, off) in enumerate(calls)]
    return SYSCALL_IO.validate(pl.DataFrame(rows))


@SETTINGS
@given(st.lists(SIZES.filter(lambda s: s > 0), min_size=2, max_size=30), st.booleans())
def test_syscall_contiguous_writes_are_sequential_and_syncs_have_their_mode(sizes, positional):
    calls, off = [], 0
    for size in sizes:
        calls.append((1, "pwrite64" if positional else "write", "/data/app/test.db", size,
                      off if positional else -1))
        off += size
    calls.append((1, "fdatasync", "/data/app/test.db", 0, -1))
    sc = classify_syscalls(syscalls(calls))
    writes = sc.filter(pl.col("op") == "write")
    assert sequential_share(writes["locality"]) == 1.0
    assert writes["offset_bytes"].to_list() == [sum(sizes[:i]) for i in range(len(sizes))]
    assert set(writes["file_type"]) == {"db"}
    assert sc.filter(pl.col("op") == "sync")["sync_mode"].to_list() == ["fdatasync"]
    assert set(writes["sync_mode"]) == {"buffered"}


def test_syscall_lseek_moves_the_position():
    calls = [(1, "write", "/f", 4096, -1), (1, "lseek", "/f", 0, -1), (1, "write", "/f", 4096, -1),
             (1, "lseek", "/f", 65536, -1), (1, "write", "/f", 4096, -1)]
    df = syscalls(calls).with_columns(ret=pl.Series([4096, 0, 4096, 65536, 4096]))
    sc = classify_syscalls(df)
    assert sc["offset_bytes"].to_list() == [0, 0, 65536]
    assert sc["locality"].to_list() == ["first", "random", "random"]


def test_region_rules_without_layout():
    reqs = [{"sector": 8, "size_bytes": 4096, "op": "write", "t": 0, "comm": "jbd2/loop0-8"},
            {"sector": 16, "size_bytes": 4096, "op": "write", "t": 1, "meta": True},
            {"sector": 24, "size_bytes": 4096, "op": "write", "t": 2},
            {"sector": 0, "size_bytes": 0, "op": "flush", "t": 3}]
    assert classify_block_io(block_rq(reqs))["region"].to_list() == ["journal", "metadata", "data", "none"]


def test_region_and_file_type_from_the_layout_snapshot():
    layout = pl.DataFrame({
        "rep": [0, 0, 0, 0], "region": ["journal", "metadata", "file", "file"],
        "path": ["ext4 journal", "group 0 inode table", "/d/test.db-wal", "/d/movie.mp4"],
        "logical_bytes": [0, 0, 0, 0], "physical_bytes": [1 << 20, 4 << 20, 8 << 20, 16 << 20],
        "length_bytes": [1 << 20, 1 << 20, 1 << 20, 1 << 20], "dev_major": [7] * 4, "dev_minor": [0] * 4,
        "flags": [""] * 4}, schema_overrides={"rep": pl.Int32, "dev_major": pl.Int32, "dev_minor": pl.Int32})
    reqs = [{"sector": (1 << 20) // 512 + 8, "size_bytes": 4096, "op": "write", "t": 0},
            {"sector": (4 << 20) // 512, "size_bytes": 4096, "op": "write", "t": 1},
            {"sector": (8 << 20) // 512 + 16, "size_bytes": 4096, "op": "write", "t": 2},
            {"sector": (16 << 20) // 512, "size_bytes": 65536, "op": "write", "t": 3},
            {"sector": (32 << 20) // 512, "size_bytes": 4096, "op": "write", "t": 4, "comm": "jbd2/loop0-8"}]
    bio = classify_block_io(block_rq(reqs), layout)
    assert bio["region"].to_list() == ["journal", "metadata", "data", "data", "data"]
    assert bio["file_type"].to_list() == ["unknown", "unknown", "db-wal", "media", "unknown"]
    assert bio["path"].to_list()[2] == "/d/test.db-wal"


def test_strace_times_move_to_the_trace_clock_through_the_markers():
    from mobiperf.analyzers.syscall import align_to_trace_clock

    wall = 1_795_000_000_000_000_000
    calls = syscalls([(1, "write", "/sys/kernel/tracing/instances/x/trace_marker", 22, -1),
                      (1, "pwrite64", "/d/test.db", 4096, 0),
                      (1, "write", "/sys/kernel/tracing/instances/x/trace_marker", 20, -1)])
    calls = calls.with_columns(ts=pl.col("ts") + wall)
    markers = pl.DataFrame({"rep": [0, 0], "ts": [5_000_004, 5_002_006], "pid": [1, 1],
                            "text": ["mobibench: timed_start", "mobibench: timed_end"]},
                           schema_overrides={"rep": pl.Int32, "pid": pl.Int32})
    aligned = align_to_trace_clock(calls, markers)
    assert aligned["ts"].to_list() == [5_000_005, 5_001_005, 5_002_005]  # median of the two differences
