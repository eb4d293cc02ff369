"""Study `layers`: seed 004, Kim & Shin, "Cross-layered View on Android Storage IO System".

The paper wrote 256 MB of uniformly random writes of 4 KB to 512 KB (sectors 8 to 1024) from an app and split
each write's latency into platform, kernel and device with ftrace and blktrace (Fig. 3), then turned the
latencies into a throughput per layer (Fig. 4), where "blktrace (App IO)" (device time per application IO) is
far below "blktrace (Pure)" (the device's own bandwidth): the OS adds writes of its own.

Here: random writes of each size, each followed by fsync() (an Android app's durable write), on ext4 over the
`emmc-2012` device profile, a fixed number of writes per size. Per application write: its latency as the app
saw it (Mobibench's per-IO timer), the device time (D2C, issue -> complete, of the block requests and cache
flushes issued inside the timed window), and the OS share = app - device. Per layer throughput = bytes / time at
that layer; the block requests per application write show the OS's additional writes (journal, flushes).
"""

from __future__ import annotations

from mobiperf.orchestration.study import Check, Config, Results, Row, Section, Study, check, ratio
from mobiperf.core.units import parse_size

PAPER = {
    "total_bytes": 256 << 20,                      # sec. II-A: total write size 256 MB, uniform random
    "sizes_sectors": (8, 16, 32, 64, 128, 256, 512, 1024),   # Fig. 3 x-axis: 4 KB .. 512 KB
    "fig3": "OS overhead (platform + kernel) is not negligible, largest relative to the device for small writes",
    "fig4": "blktrace (App IO) bandwidth is much lower than blktrace (Pure): the OS performs additional writes",
    "packed_max_useful": 4,                        # sec. III-B, Fig. 6: gains saturate at 4 packed requests
    "packed_max": 8,                               # 4 MB per eMMC write / 512 KB requests
}

SIZES_FULL = ("4k", "8k", "16k", "32k", "64k", "128k", "256k", "512k")
SIZES_QUICK = ("4k", "64k", "512k")


def _ios(config: Config) -> int:
    return 48 if config.quick else 384


def cells(config: Config) -> list[tuple[str, dict[str, str]]]:
    n = _ios(config)
    out = []
    for size in SIZES_QUICK if config.quick else SIZES_FULL:
        out.append((size, {"access": "rand-write", "sync": "fsync", "record": size, "final_fsync": "off",
                           "file_size": f"{parse_size(size) * n // 1024}k",
                           "image_size": "256m" if config.quick else "1g"}))
    return out


def _layer_figures(res: Results, size: str, ios: int) -> dict[str, float | None]:
    app = res.median(size, "workload.latency.mean")
    d2c_w = res.median(size, "window.block.d2c.sum{op=write}")
    d2c_f = res.median(size, "window.block.d2c.sum{op=flush}") or 0.0
    reqs = res.median(size, "window.block.requests{op=write}")
    flushes = res.median(size, "window.block.requests{op=flush}") or 0.0
    wbytes = res.median(size, "window.block.bytes{op=write}")
    device = None if d2c_w is None else (d2c_w + d2c_f) / ios
    record = parse_size(size)
    return {
        "app_ns": app, "device_ns": device,
        "os_ns": None if app is None or device is None else max(app - device, 0.0),
        "reqs_per_io": None if reqs is None else reqs / ios,
        "flushes_per_io": flushes / ios if reqs is not None else None,
        "app_bw": None if not app else record / (app / 1e9),
        "device_app_bw": None if not device else record / (device / 1e9),
        "device_pure_bw": None if not d2c_w or wbytes is None else wbytes / (d2c_w / 1e9),
        "extra_bytes": None if wbytes is None else wbytes / (record * ios),
    }


def analyse(res: Results, config: Config) -> tuple[list[Section], list[Check]]:
    ios = _ios(config)
    sizes = SIZES_QUICK if config.quick else SIZES_FULL
    figs = {s: _layer_figures(res, s, ios) for s in sizes}
    note = f"{ios} random writes + fsync(); mean per application write"
    sections = [
        Section("Latency per layer per application write (Fig. 3)", "sec. II-A, Fig. 3: " + PAPER["fig3"], "ns", [
            row for s in sizes for row in (
                Row(f"{s}: application (platform + kernel + device)", figs[s]["app_ns"], note=note),
                Row(f"{s}: device (D2C of its requests and flushes)", figs[s]["device_ns"]),
                Row(f"{s}: OS (application - device)", figs[s]["os_ns"]))]),
        Section("Throughput per layer (Fig. 4)", "sec. II-A, Fig. 4: " + PAPER["fig4"], "B/s", [
            row for s in sizes for row in (
                Row(f"{s}: application", figs[s]["app_bw"]),
                Row(f"{s}: blktrace (App IO): app bytes / device time", figs[s]["device_app_bw"]),
                Row(f"{s}: blktrace (Pure): device bytes / device time", figs[s]["device_pure_bw"]))]),
        Section("The OS's additional writes", "sec. II-A: 'OS performs additional write operations'", "x", [
            row for s in sizes for row in (
                Row(f"{s}: block write requests per application write", figs[s]["reqs_per_io"]),
                Row(f"{s}: cache flushes per application write", figs[s]["flushes_per_io"]),
                Row(f"{s}: device bytes / application bytes", figs[s]["extra_bytes"]))], chart=False),
    ]
    small, large = sizes[0], sizes[-1]
    checks = [
        check("the OS adds writes of its own: more than one block write per small application write (Fig. 4)",
              {"per_io": figs[small]["reqs_per_io"]}, lambda per_io: per_io > 1.0,
              f"{small}: {{per_io:.2f}} block write requests per application write"),
        check("blktrace (App IO) is below blktrace (Pure) for small writes (Fig. 4)",
              {"app_io": figs[small]["device_app_bw"], "pure": figs[small]["device_pure_bw"]},
              lambda app_io, pure: app_io < pure,
              lambda app_io, pure: f"{small}: App IO {app_io / 1e6:.2f} MB/s, Pure {pure / 1e6:.2f} MB/s"),
        check("the OS share of a write's latency is larger for small writes than for large ones (Fig. 3)",
              {"small": ratio(figs[small]["os_ns"], figs[small]["app_ns"]),
               "large": ratio(figs[large]["os_ns"], figs[large]["app_ns"])},
              lambda small, large: small > large,
              f"OS / application latency: {small} {{small:.0%}}, {large} {{large:.0%}}"),
    ]
    return sections, checks


STUDY = Study(
    name="layers",
    title="Latency and throughput per layer for random writes of 4 KiB to 512 KiB",
    paper="004: Kim & Shin, Cross-layered View on Android Storage IO System",
    description=__doc__.split("\n\n", 1)[1].strip(),
    cells=cells,
    analyse=analyse,
    metric="workload.iops",
    default_device=lambda config: "emmc-2012",
    repeat=lambda config: 2 if config.quick else 3,
    needs=("mobibench",),
)
