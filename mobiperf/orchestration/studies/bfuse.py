"""Study `bfuse`: seed 000, Jeong & Won, "Buffered FUSE: optimising the Android IO stack for user-level
filesystem", Int. J. Embedded Systems 6(2/3), 2014.

Workload everywhere (the paper's Figs. 6, 10, 13, 14, 16, 17 and Table 3): one sequential buffered write of a
fresh file in 512 KiB records, then fsync of the file, inside the timed command (the paper's 512 MB file; 256 MiB
in the full study here, 32 MiB with --quick). Throughput = file bytes / wall time of that command, in MB/s
(10^6 B/s, the paper's "Mbyte/sec").

Mapping of the paper's configurations to stacks here: CFQ -> bfq, deadline -> mq-deadline, NOOP -> none (the
modern multi-queue successors); legacy FUSE = the `fuse` layer (bfuse daemon, preset legacy: 4 KiB IO unit, one
thread, a pwrite per request); "512 KB IO" = preset nobuf (512 KiB unit, no buffer); bFUSE = preset bfuse (512 KiB
unit, 8 MiB buffer of 2 MiB entries, 10 ms flush thread).

The full study runs on the paper's phone as modelled by the `galaxy-s3-2012` phone profile (mobiperf.stack.phone, where
each value is justified from the paper's sec. 2.3 hardware: Exynos 4412 quad Cortex-A9 1.4 GHz, 2 GB RAM, 32 GB
eMMC): the eMMC is the `emmc-2012` device profile (40 MB/s sequential write, sec. 2.3's raw 39-40 MB/s); the 2 GB
of RAM are a 64 MiB dirty limit on the data device (dirty=64m), so background writeback overlaps a large write as
it did on the phone, instead of the whole file waiting in this host's page cache for its fsync; the Cortex-A9
cores are a quarter of one host core for the writer and its FUSE daemon together (cpu=25%: two cores at about an
eighth of a host core each); and each FUSE request reaches its daemon 0.43 ms late (fuse_wakeup=430us, fitted to
Fig. 6's 7 MB/s at 4 KiB and 30 MB/s at 512 KiB: the phone's per-request wake-up cost, which the host's
microsecond round trip lacks and no CPU share can restore, since it slows every byte alike). One profile for
every cell: the configurations differ only in the stack.
--quick runs on the host's disk with the workload and the FUSE daemon limited to 15 % of one core (cpu=15%, a
phone-class CPU), where FUSE's per-request CPU cost is what separates the configurations as on the paper's phone.
"""

from __future__ import annotations

from mobiperf.orchestration.study import Check, Config, Results, Row, Section, Study, check, ratio
from mobiperf.core.units import parse_size

# The paper's numbers, as stated in its text (the figures themselves are images; values read off them are not
# used). JB = Android 4.1.2, ICS = Android 4.0.4, both on a Galaxy S3 (Exynos 4412, 32 GB eMMC).
PAPER = {
    "fig2_raw_mbps": {"ICS": 39.0, "JB": 40.0},                  # sec. 2.3: raw device (NOOP) sequential write
    "fig2_drop_vs_raw": {"BLK": {"ICS": 0.07, "JB": 0.05},      # sec. 2.3: CFQ instead of NOOP
                         "EXT4": {"ICS": 0.14, "JB": 0.16}},    # sec. 2.3: EXT4 (with CFQ)
    "fig2_fuse_mbps": 7.0,                                      # sec. 2.3: FUSE, both versions, "< 20 % of raw"
    "fig3_overhead_share_jb": {"FUSE": 0.79, "EXT4": 0.16, "IO scheduler": 0.05},   # sec. 2.3, Fig. 3
    "fig6_mbps": {"4k": 7.0, "512k": 30.0},                     # sec. 3.2, Fig. 6: FUSE IO unit 4 KB vs 512 KB
    "fig7": "context switches decrease as the FUSE IO unit grows",   # sec. 3.2, Fig. 7 (no numbers in text)
    "fig10_flush_thread_gain": 0.08,                            # sec. 4.2, Fig. 10: +8 % with the buffer manager
    "fig11": "8 MB FUSE buffer gives the smallest fraction of random IOs",   # sec. 4.2, Fig. 11
    "fig13_deadline_vs_cfq": 0.06,                              # sec. 5.1, Fig. 13
    "fig13_bfuse_deadline_vs_cfq": 0.12,                        # sec. 5.1: 8 MB buffer + deadline vs CFQ
    "fig14_vs_ext4": {"xfs": 0.17, "f2fs": 0.10, "btrfs_ics": 0.05, "btrfs_jb": -0.20},  # sec. 5.2, no buffer
    "fig16_ext4_steps": {"512 KB IO": 3.50, "deadline": 0.05, "bFUSE": 0.12},  # sec. 6: gains of each step
    "fig17_raw_max_mbps": {"ICS": 38.6, "JB": 39.8},            # sec. 6, Fig. 17
    "fig17_share_of_raw": {"ext4": {"ICS": 0.95, "JB": 0.91}, "xfs": {"ICS": 0.99, "JB": 0.91}},
    "fig17_gain_over_base": {"ICS": 4.70, "JB": 4.19},          # abstract, sec. 6: +470 % / +419 %
    "table3_file_bytes": 512 << 20,                             # Table 3: 512 MB file, 512 KB records
    "table3_pwrite": {"FUSE": 128_000, "Nobuf": 1_000, "bFUSE": 249},
    "table3_io_requests": {"ext4": (1048, 1032, 1030), "xfs": (1121, 1112, 1099), "f2fs": (1044, 1048, 1049),
                           "btrfs": (1041, 1016, 1011), "nilfs2": (1077, 1070, 1059)},
    "table3_meta_journal": {"ext4": (23, 12, 11), "xfs": (11, 12, 6), "f2fs": (26, 33, 35),
                            "btrfs": (15, 9, 9), "nilfs2": (153, 137, 142)},
}

MB = 1e6
PHONE = "galaxy-s3-2012"   # the full study's phone model (mobiperf.stack.phone): device, dirty limit, CPU, FUSE wake-up
QUICK_CPU = "15%"   # --quick: the workload and the FUSE daemon get 15 % of one core (a phone-class CPU)


def _file_size(config: Config) -> str:
    return "32m" if config.quick else "256m"


def cells(config: Config) -> list[tuple[str, dict[str, str]]]:
    base = {"workload": "file", "access": "append", "sync": "buffered", "record": "512k",
            "file_size": _file_size(config), "image_size": "256m" if config.quick else "1g"}
    if config.target != "local":
        return _phone_cells(config, {k: v for k, v in base.items() if k != "image_size"})
    if config.quick:
        # The host's disk, and a phone-class CPU: without it this host's FUSE is as fast as its disk.
        if config.cpu == "host":
            base["cpu"] = QUICK_CPU
        return [
            ("native", {**base, "layer": "native"}),
            ("legacy", {**base, "layer": "fuse"}),
            ("nobuf", {**base, "layer": "bfuse", "preset": "nobuf"}),
            ("bfuse", {**base, "layer": "bfuse", "preset": "bfuse"}),
            ("passthrough", {**base, "layer": "bfuse", "preset": "passthrough"}),
        ]
    cfq, deadline, noop = {"scheduler": "bfq"}, {"scheduler": "mq-deadline"}, {"scheduler": "none"}
    raw = {k: v for k, v in base.items() if k != "image_size"}
    out = [
        ("raw", {**raw, **noop, "fs": "raw"}),              # Fig. 2 NOOP: the bare device (dd, buffered + fsync)
        ("raw/cfq", {**raw, **cfq, "fs": "raw"}),           # Fig. 2 BLK: the bare device with CFQ
        ("native", {**base, **noop, "layer": "native"}),
        ("native/cfq", {**base, **cfq, "layer": "native"}),
        ("legacy", {**base, **cfq, "layer": "fuse"}),
        ("nobuf/cfq", {**base, **cfq, "layer": "bfuse", "preset": "nobuf"}),
        ("nobuf", {**base, **deadline, "layer": "bfuse", "preset": "nobuf"}),
        ("bfuse", {**base, **deadline, "layer": "bfuse", "preset": "bfuse"}),
        ("bfuse/1thread", {**base, **deadline, "layer": "bfuse", "preset": "bfuse", "fuse_threads": "1"}),
        ("passthrough", {**base, **deadline, "layer": "bfuse", "preset": "passthrough"}),
    ]
    for unit in ("16k", "64k", "128k", "512k"):
        out.append((f"unit/{unit}", {**base, **cfq, "layer": "fuse", "io_unit": unit}))
    for flush in ("1ms", "100ms"):
        out.append((f"flush/{flush}", {**base, **deadline, "layer": "bfuse", "preset": "bfuse", "flush_ms": flush}))
    for buf in ("2m", "32m"):
        out.append((f"buffer/{buf}", {**base, **deadline, "layer": "bfuse", "preset": "bfuse", "buffer": buf}))
    for fs in ("xfs", "btrfs", "f2fs"):
        out.append((f"{fs}/nobuf", {**base, **deadline, "fs": fs, "layer": "bfuse", "preset": "nobuf"}))
        out.append((f"{fs}/bfuse", {**base, **deadline, "fs": fs, "layer": "bfuse", "preset": "bfuse"}))
    return out


def _phone_cells(config: Config, base: dict[str, str]) -> list[tuple[str, dict[str, str]]]:
    """On a phone (-t adb:SERIAL): its own /data, scheduler and filesystem as they are, so the configurations that
    differ only in those (raw device, CFQ vs deadline, XFS/BTRFS/F2FS) are left out; the rest is the same."""
    out = [("native", {**base, "layer": "native"}), ("legacy", {**base, "layer": "fuse"}),
           ("nobuf", {**base, "layer": "bfuse", "preset": "nobuf"}),
           ("bfuse", {**base, "layer": "bfuse", "preset": "bfuse"}),
           ("passthrough", {**base, "layer": "bfuse", "preset": "passthrough"})]
    if config.quick:
        return out
    out.append(("bfuse/1thread", {**base, "layer": "bfuse", "preset": "bfuse", "fuse_threads": "1"}))
    out += [(f"unit/{u}", {**base, "layer": "fuse", "io_unit": u}) for u in ("16k", "64k", "128k", "512k")]
    out += [(f"flush/{f}", {**base, "layer": "bfuse", "preset": "bfuse", "flush_ms": f}) for f in ("1ms", "100ms")]
    out += [(f"buffer/{b}", {**base, "layer": "bfuse", "preset": "bfuse", "buffer": b}) for b in ("2m", "32m")]
    return out


def _aliases(label: str) -> str:
    """Cells that stand for another figure's configuration (the same parameters, measured once)."""
    return {"unit/4k": "legacy", "flush/10ms": "bfuse", "buffer/8m": "bfuse", "ext4/nobuf": "nobuf",
            "ext4/bfuse": "bfuse"}.get(label, label)


def analyse(res: Results, config: Config) -> tuple[list[Section], list[Check]]:
    file_bytes = parse_size(_file_size(config))
    sections = _figure_sections(res, config)
    sections.append(_shares(res, config))
    relative = _relative(res)
    if relative:
        sections.append(Section("Schedulers, buffer and filesystems, relative (Figs. 10, 13, 14)",
                                "sec. 4.2, 5.1, 5.2", "ratio", relative, chart=False))
    sections.append(_table3(res, file_bytes))
    return sections, _throughput_checks(res, config) + _syscall_checks(res, file_bytes)


TPUT = "run.throughput"


def _mbps(res: Results, label: str) -> float | None:
    """The median throughput of a configuration in MB/s (None when it has none)."""
    v = res.median(label, TPUT)
    return None if v is None else v / MB


def _figure_sections(res: Results, config: Config) -> list[Section]:
    """The paper's throughput figures, configuration by configuration (Figs. 2, 6, 7, 10, 11, 16, 14/17)."""
    tput = TPUT
    r = (lambda label, **kw: res.row(_aliases(label), tput, scale=1 / MB, **kw))
    P = PAPER
    raw_jb = P["fig2_raw_mbps"]["JB"]
    return [
        Section("Layer overheads: sequential write throughput per stack (Fig. 2)",
                "sec. 2.3 / Fig. 2 (JB figures; ICS: raw 39, BLK -7 %, EXT4 -14 %, FUSE 7 MB/s)", "MB/s", [
                    r("raw", display="raw device, NOOP (none)", paper=raw_jb,
                      note="the bare loop device on the device model (dd, buffered + fsync)"),
                    r("raw/cfq", display="raw device, CFQ (bfq)",
                      paper=round(raw_jb * (1 - P["fig2_drop_vs_raw"]["BLK"]["JB"]), 1), note="paper: BLK -5 % (JB)"),
                    r("native", display="ext4, NOOP (none)", paper=raw_jb,
                      note="paper: the raw device with NOOP (no ext4 figure with NOOP)"),
                    r("native/cfq", display="ext4, CFQ (bfq)",
                      paper=round(raw_jb * (1 - P["fig2_drop_vs_raw"]["EXT4"]["JB"]), 1),
                      note="paper: EXT4 -16 % vs raw (JB)"),
                    r("legacy", display="legacy FUSE over ext4, CFQ", paper=P["fig2_fuse_mbps"]),
                    r("passthrough", display="FUSE passthrough over ext4 (today's /sdcard)",
                      note="after the paper: Android 12+ serves /sdcard with kernel passthrough (Linux 6.9 "
                           "upstream): no data through the daemon, so nothing to buffer either"),
                ]),
        Section("Throughput vs FUSE IO unit (Fig. 6)", "sec. 3.2 / Fig. 6: 7 MB/s at 4 KB, 30 MB/s at 512 KB",
                "MB/s", [r(f"unit/{u}", display=f"FUSE IO unit {u}", paper=P["fig6_mbps"].get(u))
                         for u in ("4k", "16k", "64k", "128k", "512k")]),
        Section("Context switches of the writer vs FUSE IO unit (Fig. 7)", "sec. 3.2 / Fig. 7 (trend only)",
                "count", [res.row(_aliases(f"unit/{u}"), "workload.ctx_switches", display=f"FUSE IO unit {u}",
                                  paper="decreasing" if u == "4k" else None)
                          for u in ("4k", "16k", "64k", "128k", "512k")]
                + ([res.row("legacy", "workload.ctx_switches", display="legacy (4 KiB)"),
                    res.row("nobuf", "workload.ctx_switches", display="512 KiB, no buffer")] if config.quick else [])),
        Section("Buffer manager thread and flush period (Fig. 10)",
                "sec. 4.2 / Fig. 10: +8 % with the FUSE buffer manager; single-threaded bFUSE is slower", "MB/s", [
                    r("nobuf", display="512 KiB unit, no buffer"),
                    r("bfuse/1thread", display="bFUSE, one daemon thread"),
                    r("flush/1ms", display="bFUSE, flush every 1 ms"),
                    r("flush/10ms", display="bFUSE, flush every 10 ms (paper's choice)",
                      note="paper: +8 % over no buffer manager"),
                    r("flush/100ms", display="bFUSE, flush every 100 ms"),
                ]),
        Section("Random fraction of device writes vs FUSE buffer size (Fig. 11)",
                "sec. 4.2 / Fig. 11: smallest at 8 MB", "ratio", [
                    _random_fraction(res, _aliases(f"buffer/{b}"), f"buffer {b}") for b in ("2m", "8m", "32m")]),
        Section("Combined steps on ext4 (Fig. 16)",
                "sec. 6 / Fig. 16: 512 KB IO +350 %, deadline +5 %, bFUSE +12 % (paper values derived from these "
                "gains on the 7 MB/s base)", "MB/s", [
                    r("legacy", display="base: 4 KiB unit, CFQ", paper=7.0),
                    r("nobuf/cfq", display="512 KB IO, CFQ", paper=round(7.0 * 4.5, 1)),
                    r("nobuf", display="512 KB IO, deadline", paper=round(7.0 * 4.5 * 1.05, 1)),
                    r("bfuse", display="bFUSE (8 MB buffer), deadline", paper=round(7.0 * 4.5 * 1.05 * 1.12, 1)),
                ]),
        Section("Filesystems under FUSE (Figs. 14 and 17)",
                "sec. 5.2: XFS +17 %, F2FS +10 %, BTRFS +5 %/-20 % over EXT4 without buffer; Fig. 17: bFUSE reaches "
                "91-99 % of the raw device", "MB/s",
                [r(f"{fs}/{k}", display=f"{fs}, {k}") for fs in ("ext4", "xfs", "btrfs", "f2fs")
                 for k in ("nobuf", "bfuse")]),
    ]


def _shares(res: Results, config: Config) -> Section:
    """FUSE and bFUSE as shares of native (and of the device profile's bandwidth), beside the paper's (Figs. 2, 17)."""
    P = PAPER
    raw_jb = P["fig2_raw_mbps"]["JB"]
    native, legacy, bfuse = _mbps(res, "native"), _mbps(res, "legacy"), _mbps(res, "bfuse")
    share_rows = [Row("legacy FUSE / native", ratio(legacy, native), n=0, paper=P["fig2_fuse_mbps"] / raw_jb,
                      note="paper: FUSE / raw device (JB)"),
                  Row("bFUSE / native", ratio(bfuse, native), paper=P["fig17_share_of_raw"]["ext4"]["JB"],
                      note="paper: ext4 + bFUSE / raw device (JB; ICS 0.95)"),
                  Row("bFUSE / legacy FUSE", ratio(bfuse, legacy), paper=P["fig17_gain_over_base"]["JB"],
                      note="paper: +419 % (JB), +470 % (ICS) over the base configuration")]
    passthrough = _mbps(res, "passthrough")
    if passthrough is not None:
        share_rows += [Row("passthrough / native", ratio(passthrough, native),
                           note="today's /sdcard (not in the paper)"),
                       Row("bFUSE / passthrough", ratio(bfuse, passthrough),
                           note="user-level buffering against the kernel doing the IO itself")]
    device_bw = _device_bandwidth(config)
    if device_bw:
        share_rows.insert(0, Row("native / device profile bandwidth", ratio(native, device_bw),
                                 paper=P["fig17_raw_max_mbps"]["JB"] / raw_jb,
                                 note=f"profile {config.device}: {device_bw:.0f} MB/s"))
    return Section("Shares (Figs. 2, 17)", "sec. 2.3, sec. 6", "ratio", share_rows)


def _relative(res: Results) -> list[Row]:
    """Schedulers, the buffer and the filesystems as ratios of throughput (Figs. 10, 13, 14); rows without a
    figure are left out, but for a filesystem this kernel lacks."""
    P = PAPER
    rel = (lambda a, b: ratio(res.median(a, TPUT), res.median(b, TPUT)))
    relative = [
        Row("deadline / CFQ, 512 KiB unit, no buffer", rel("nobuf", "nobuf/cfq"), paper=1 + P["fig13_deadline_vs_cfq"],
            note="Fig. 13; here mq-deadline / bfq"),
        Row("bFUSE + deadline / 512 KiB + CFQ", rel("bfuse", "nobuf/cfq"), paper=1 + P["fig13_bfuse_deadline_vs_cfq"],
            note="sec. 5.1: 8 MB buffer and deadline vs CFQ"),
        Row("bFUSE / no buffer (deadline)", rel("bfuse", "nobuf"), paper=1 + P["fig10_flush_thread_gain"],
            note="Fig. 10: the buffer with its manager thread"),
        Row("XFS / EXT4, no buffer", rel("xfs/nobuf", "nobuf"), paper=1 + P["fig14_vs_ext4"]["xfs"], note="Fig. 14"),
        Row("BTRFS / EXT4, no buffer", rel("btrfs/nobuf", "nobuf"), paper=1 + P["fig14_vs_ext4"]["btrfs_jb"],
            note="Fig. 14: JB (ICS +5 %)"),
        Row("F2FS / EXT4, no buffer", rel("f2fs/nobuf", "nobuf"), paper=1 + P["fig14_vs_ext4"]["f2fs"],
            note="Fig. 14" if res.status("f2fs/nobuf") != "skipped" else "skipped: this kernel has no f2fs"),
    ]
    return [r for r in relative if r.ours is not None or r.note.startswith("skipped")]


def _table3(res: Results, file_bytes: int) -> Section:
    """The FUSE daemon's pwrite() calls and the block write requests, scaled to the paper's 512 MB (Table 3)."""
    P = PAPER
    scale = P["table3_file_bytes"] / file_bytes
    return Section(
        "System calls of the FUSE daemon, scaled to the paper's 512 MB (Table 3)",
        "sec. 5.3 / Table 3: pwrite() 128,000 (FUSE) / 1,000 (512 KB, no buffer) / 249 (bFUSE)", "count", [
            res.row("legacy", "fuse.daemon_pwrite_calls", scale=scale, display="pwrite(), legacy FUSE",
                    paper=P["table3_pwrite"]["FUSE"]),
            res.row("nobuf", "bfuse.daemon_pwrite_calls", scale=scale, display="pwrite(), 512 KB no buffer",
                    paper=P["table3_pwrite"]["Nobuf"]),
            res.row("bfuse", "bfuse.daemon_pwrite_calls", scale=scale, display="pwrite(), bFUSE",
                    paper=P["table3_pwrite"]["bFUSE"]),
            res.row("legacy", "block.requests{op=write}", scale=scale, display="block write requests, legacy",
                    paper=P["table3_io_requests"]["ext4"][0]),
            res.row("nobuf", "block.requests{op=write}", scale=scale, display="block write requests, no buffer",
                    paper=P["table3_io_requests"]["ext4"][1]),
            res.row("bfuse", "block.requests{op=write}", scale=scale, display="block write requests, bFUSE",
                    paper=P["table3_io_requests"]["ext4"][2],
                    note="the paper's eMMC caps a request at 512 KB; the loop device here allows larger ones"),
        ], chart=False)


def _throughput_checks(res: Results, config: Config) -> list[Check]:
    """What the paper's throughput figures say must hold: legacy FUSE far below bFUSE and native, bFUSE near
    native, native near the device profile's bandwidth."""
    native, legacy, bfuse, nobuf = (_mbps(res, label) for label in ("native", "legacy", "bfuse", "nobuf"))
    device_bw = _device_bandwidth(config)
    checks = [
        check("legacy FUSE is far below bFUSE's 512 KiB IO unit (Fig. 6: 7 -> 30 MB/s; Fig. 16: +350 %)",
              {"legacy": legacy, "nobuf": nobuf}, lambda legacy, nobuf: legacy <= 0.67 * nobuf,
              "legacy (4 KiB) {legacy:.1f} MB/s vs 512 KiB unit without buffer {nobuf:.1f} MB/s"),
        check("legacy FUSE is far below bFUSE (Figs. 16/17: bFUSE +419-470 % over the base)",
              {"legacy": legacy, "bfuse": bfuse}, lambda legacy, bfuse: legacy <= 0.67 * bfuse,
              "legacy {legacy:.1f} MB/s vs bFUSE {bfuse:.1f} MB/s"),
        check("legacy FUSE <= 40 % of native (Fig. 2: FUSE < 20 % of raw)", {"legacy": legacy, "native": native},
              lambda legacy, native: legacy <= 0.40 * native,
              lambda legacy, native: f"legacy {legacy:.1f} MB/s = {100 * legacy / native:.0f} % of native "
                                     f"{native:.1f} MB/s"),
        check("bFUSE >= 90 % of native (Fig. 17: 91-99 % of raw)", {"bfuse": bfuse, "native": native},
              lambda bfuse, native: bfuse >= 0.90 * native,
              lambda bfuse, native: f"bFUSE {bfuse:.1f} MB/s = {100 * bfuse / native:.0f} % of native "
                                    f"{native:.1f} MB/s"),
    ]
    if device_bw:
        checks.insert(0, check("native within 10 % of the device's bandwidth (Fig. 2: raw 39-40 MB/s)",
                               {"native": native, "bandwidth": float(device_bw)},
                               lambda native, bandwidth: abs(native - bandwidth) <= 0.10 * bandwidth,
                               "native {native:.1f} MB/s vs profile {bandwidth:.1f} MB/s"))
    return checks


def _syscall_checks(res: Results, file_bytes: int) -> list[Check]:
    """Table 3's pwrite() counts and Fig. 7's context switches."""
    per_4k = res.median("legacy", "fuse.daemon_pwrite_calls")
    nobuf_calls = res.median("nobuf", "bfuse.daemon_pwrite_calls")
    bfuse_calls = res.median("bfuse", "bfuse.daemon_pwrite_calls")
    return [
        check("Table 3: the legacy daemon writes 4 KiB per pwrite() (128,000 for 512 MB)",
              {"calls": per_4k}, lambda calls: abs(calls - file_bytes / 4096) <= 0.02 * file_bytes / 4096,
              f"{{calls:.0f}} pwrite() for {file_bytes // 4096} pages"),
        check("Table 3: a 512 KB IO unit cuts pwrite() x128; the buffer cuts it about x4 more",
              {"legacy": per_4k, "nobuf": nobuf_calls, "bfuse": bfuse_calls},
              lambda legacy, nobuf, bfuse: nobuf <= legacy / 100 and bfuse <= nobuf / 2,
              "pwrite(): legacy {legacy:.0f}, 512 KiB {nobuf:.0f}, bFUSE {bfuse:.0f}"),
        check("Fig. 7: fewer context switches with a larger FUSE IO unit",
              {"at_4k": res.median("legacy", "workload.ctx_switches"),
               "at_512k": res.median("nobuf", "workload.ctx_switches")},
              lambda at_4k, at_512k: at_512k < at_4k, "writer's context switches: 4 KiB {at_4k:.0f}, "
              "512 KiB {at_512k:.0f}"),
    ]


def _random_fraction(res: Results, label: str, display: str) -> Row:
    row = res.row(label, "device.write.seq_fraction", display=display)
    if row.ours is None:
        row.note = row.note or "needs the device model (a device profile) for its request counts"
        return row
    ci = (None, None) if row.ci_low is None else (1 - row.ci_high, 1 - row.ci_low)
    return Row(display, 1 - row.ours, ci[0], ci[1], row.n, None, "random = not sequential at the device model")


def _device_bandwidth(config: Config) -> float | None:
    if not config.device or config.device == "none":
        return None
    from mobiperf.stack.device_model import resolve_profile

    return float(resolve_profile(config.device).write_bw_bytes_per_s) / MB or None


STUDY = Study(
    name="bfuse",
    title="Buffered FUSE: layer overheads, FUSE IO unit, buffer and flush thread, filesystems, Table 3",
    paper="000: Jeong & Won, Buffered FUSE, Int. J. Embedded Systems 6(2/3), 2014",
    description=__doc__.split("\n\n", 1)[1].strip(),
    cells=cells,
    analyse=analyse,
    default_device=lambda config: None if config.quick else "emmc-2012",
    default_phone=lambda config: None if config.quick else PHONE,
    repeat=lambda config: 2 if config.quick else 3,
    needs=("bfuse", "mobibench"),
)
