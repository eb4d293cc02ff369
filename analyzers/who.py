"""Who: the owners, threads and files the IO time went to, and the threads that waited on it, ranked (the first
tables `mobiperf analyze` prints and the report shows).

top_files     per (process, thread, file) of io_by_owner, over every repetition: time_ns (the exclusive times of
              all layers added up: the time the owner's calls or file operations on the file took, or its
              background requests), block_bytes, and the layer that took most of it with its share; the top N by
              time, then one row `(N more)` holding the rest
top_blocked   per thread of blocked: io_ns (its time in D waiting on IO: on its own nests' requests, commits and
              FUSE replies, or in a kernel IO wait, io:FUNC), blocked_ns (all its time in D), the cause that took
              most of it with its share,
              and its role: `main` (tid == pid, not a kernel thread: an app's main thread draws its frames), `ui`
              (RenderThread, hwuiTask), else empty; the top N by IO wait, then the rest folded
The workload's rows come first (a run's workload, a recorded app's processes), then the rest, each by time; the
scope column says whose each row is (workload, fuse_daemon, kernel, other, mobiperf). as_text() puts each
name beside its id (a process's main thread in the file table: `main`) and the dominant layer beside its share,
for a terminal's width.
"""

from __future__ import annotations

import polars as pl

TOP_N = 10
# The workload's rows first (a run's workload, a recorded app's processes), then the rest, each by time.
_background = pl.col("scope") != "workload"
OWNER = ["scope", "process", "pid", "thread", "tid"]
UI_THREADS = ("RenderThread", "hwuiTask0", "hwuiTask1")
# What blocked names that is IO: the layers of a thread's own nests, and the kernel's IO waits (io:FUNC)
IO_WAITS = ("block", "journal", "fs", "file", "fuse")


def top_files(io_by_owner: pl.DataFrame, n: int = TOP_N) -> pl.DataFrame:
    keys = [*OWNER, "path"]
    per_layer = io_by_owner.group_by(*keys, "layer").agg(pl.col("self_ns").sum(), pl.col("block_bytes").sum())
    total = per_layer.group_by(keys).agg(
        time_ns=pl.col("self_ns").sum(), block_bytes=pl.col("block_bytes").sum(),
        top_layer=pl.col("layer").sort_by("self_ns", descending=True).first(),
        _top=pl.col("self_ns").max())
    total = total.with_columns(top_layer_share=pl.when(pl.col("time_ns") > 0).then(pl.col("_top") / pl.col("time_ns")))
    ranked = total.sort([_background, "time_ns", "block_bytes", "tid", "path"],
                        descending=[False, True, True, False, False], nulls_last=True).select(
        *keys, "time_ns", "block_bytes", "top_layer", "top_layer_share")
    return _fold(ranked, n, ["time_ns", "block_bytes"], "path")


def top_blocked(blocked: pl.DataFrame, n: int = TOP_N) -> pl.DataFrame:
    per = blocked.group_by(*OWNER, "waited_on").agg(pl.col("blocked_ns").sum(), pl.col("count").sum())
    on_io = pl.col("waited_on").is_in(list(IO_WAITS)) | pl.col("waited_on").str.starts_with("io:")
    total = per.group_by(OWNER).agg(
        blocked_ns=pl.col("blocked_ns").sum(), io_ns=pl.col("blocked_ns").filter(on_io).sum(),
        count=pl.col("count").sum(),
        waited_on=pl.col("waited_on").sort_by("blocked_ns", descending=True).first(),
        _top=pl.col("blocked_ns").max())
    role = (pl.when((pl.col("tid") == pl.col("pid")) & (pl.col("scope") != "kernel")).then(pl.lit("main"))
            .when(pl.col("thread").is_in(list(UI_THREADS))).then(pl.lit("ui")).otherwise(pl.lit("")))
    ranked = total.with_columns(role=role, waited_on_share=pl.col("_top") / pl.col("blocked_ns")).sort(
        [_background, "io_ns", "blocked_ns", "tid"], descending=[False, True, True, False]).select(
        *OWNER, "role", "io_ns", "blocked_ns", "count", "waited_on", "waited_on_share")
    return _fold(ranked, n, ["io_ns", "blocked_ns", "count"], "thread")


def _fold(ranked: pl.DataFrame, n: int, sums: list[str], label: str) -> pl.DataFrame:
    """The first n rows, and one row summing the rest (label column `(K more)`) when there is a rest."""
    if ranked.height <= n:
        return ranked
    rest = ranked.slice(n)
    folded = {c: None for c in ranked.columns} | {c: rest[c].sum() for c in sums} | {label: f"({rest.height} more)"}
    return pl.concat([ranked.head(n), pl.DataFrame([folded], schema=ranked.schema)])


def as_text(who: pl.DataFrame) -> pl.DataFrame:
    """A who table with `name (id)` columns and the dominant layer or cause with its share: fewer, readable
    columns (the numbers stay numbers, for their units)."""
    def named(name: str, ident: str) -> pl.Expr:
        return pl.when(pl.col(ident).is_not_null()).then(pl.col(name).fill_null("?") + " (" + pl.col(ident).cast(
            pl.Utf8) + ")").otherwise(pl.col(name))

    def mostly(what: str, share: str) -> pl.Expr:
        return pl.col(what) + " " + (pl.col(share) * 100).round(0).cast(pl.Int64).cast(pl.Utf8) + "%"

    if "path" in who.columns:  # an app's main thread is "main" (its name and id are the process's own); a kernel
        # thread is a process of one thread, named as itself
        main = (pl.col("tid") == pl.col("pid")) & (pl.col("scope") != "kernel")
        thread = pl.when(main).then(pl.lit("main")).otherwise(named("thread", "tid"))
        return who.select("scope", named("process", "pid").alias("process"), thread.alias("thread"),
                          pl.col("path").fill_null("(no file)").alias("file"), "time_ns", "block_bytes",
                          mostly("top_layer", "top_layer_share").alias("mostly"))
    return who.select("scope", named("process", "pid").alias("process"), named("thread", "tid").alias("thread"),
                      "role", "io_ns", "blocked_ns", "count",
                      mostly("waited_on", "waited_on_share").alias("mostly_on"))


def data_file_share(io_span: pl.DataFrame, span_owner: pl.DataFrame) -> float | None:
    """The share of the data requests (block reads and writes of region data, or of every region on a trace
    without a layout) whose owner has a file: what `make demo` promises at least 95 % of."""
    blocks = io_span.filter((pl.col("layer") == "block") & pl.col("op").is_in(["read", "write"])
                            & pl.col("is_primary").fill_null(True))
    if blocks.filter(pl.col("region") == "data").height:
        blocks = blocks.filter(pl.col("region") == "data")
    if not blocks.height:
        return None
    owned = blocks.join(span_owner.select("rep", "span_id", pl.col("path").alias("_owner_path")),
                        on=["rep", "span_id"], how="left")
    return owned["_owner_path"].is_not_null().sum() / owned.height
