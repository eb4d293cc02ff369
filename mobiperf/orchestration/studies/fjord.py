"""Study `fjord`: seed 001, Kim & Ramachandran, "Fjord: Informed Storage Management for Smartphones".

The paper's six configurations are the Fjord daemon's presets (reference-impl/fjord, a FUSE layer here; the paper
modified the kernel): (i) native, (j) logging, (k) rambuf, (l) both, (m) fjord-ram, (n) fjord-both, with the
paper's 16 MB RAM buffer and 128 MB log. The workload is SQLite inserts (Mobibench, journal TRUNCATE, synchronous
FULL: the RL Benchmark's kind of load) in the whitelisted directory `cache/` (a cloud-backed app's files, whose
fsync() fjord-* relax) and, for contrast, in the critical directory `data/`. Measured: transactions per second
and bytes written: what the daemon wrote to ext4, including what it flushed at unmount (fjord.daemon_pwrite_bytes),
and block write bytes while the workload ran. The device is the `emmc-2012` profile, where a cache flush costs
milliseconds; on the host's disk relaxing fsync() buys little. The paper's figures are run times of the Email app
and the RL Benchmark, so ours are compared as run time relative to the native configuration (native TPS / TPS).
"""

from __future__ import annotations

from mobiperf.orchestration.study import ABSENT, Check, Config, Results, Row, Section, Study, check, ratio

PRESETS = ("native", "logging", "rambuf", "both", "fjord-ram", "fjord-both")
LETTER = dict(zip(PRESETS, "ijklmn"))

# The paper's numbers as stated in its text (the bar charts of Figs. 4 and 5 are images).
PAPER = {
    "ram_buffer_bytes": 16 << 20, "log_bytes": 128 << 20,        # sec. IV
    "email_native_s": {"galaxy_note_emmc": 34.6, "galaxy_note_microsd": 39.9, "nexus_one_microsd": 34.2},
    "email_fjordboth_reduction": {"galaxy_note_emmc": 0.53, "galaxy_note_microsd": 0.55,
                                  "nexus_one_microsd": 0.41},   # sec. IV, Fig. 4: run time -53 %, -55 %, -41 %
    "email_fjord_reduction_range": (0.41, 0.55),                # Fig. 4 caption
    "rl_fjord_reduction_range": (0.59, 0.73),                   # Fig. 5 caption: RL Benchmark (SQLite)
    "email_bytes_written": {"native": 35e6, "fjord-ram": 11e6, "fjord-both": 11e6},  # sec. IV: ~35 MB -> 11 MB
    "rl_rambuf_slower_than_native_on_emmc": True,               # sec. IV, Fig. 5(a)
    "rl_fjordram_equals_fjordboth": True,                       # sec. IV, Fig. 5
}


def _n(config: Config) -> int:
    return 50 if config.quick else 300


def cells(config: Config) -> list[tuple[str, dict[str, str]]]:
    base = {"workload": "sqlite-insert", "journal": "truncate", "sqlite_sync": "full",
            "transactions": str(_n(config)), "layer": "fjord", "whitelist": "cache",
            "image_size": "256m" if config.quick else "1g"}
    presets = ("native", "fjord-ram") if config.quick else PRESETS
    out = [(f"cache/{p}", {**base, "preset": p}) for p in presets]
    if not config.quick:
        out += [(f"data/{p}", {**base, "preset": p, "dir": "data"}) for p in ("native", "fjord-ram")]
        out.append(("plain-ext4", {k: v for k, v in base.items() if k not in ("layer", "whitelist")}))
    return out


def analyse(res: Results, config: Config) -> tuple[list[Section], list[Check]]:
    tps = "workload.tps"
    native_tps = res.median("cache/native", tps)
    reduction = PAPER["rl_fjord_reduction_range"]
    rows, time_rows, byte_rows = [], [], []
    for p in PRESETS:
        label = f"cache/{p}"
        rows.append(res.row(label, tps, display=f"({LETTER[p]}) {p}"))
        paper_time = None
        if p in ("fjord-ram", "fjord-both"):
            paper_time = f"{1 - reduction[1]:.2f}-{1 - reduction[0]:.2f} (RL Benchmark)"
        elif p in ("rambuf", "both"):
            paper_time = "> 1 on the eMMC (RL Benchmark)"
        time_rows.append(Row(f"({LETTER[p]}) {p}", ratio(native_tps, res.median(label, tps)), paper=paper_time,
                             note="native TPS / TPS" if res.cell(label) else ABSENT))
        byte_rows.append(res.row(label, "fjord.daemon_pwrite_bytes", display=f"({LETTER[p]}) {p}, daemon -> ext4",
                                 paper=PAPER["email_bytes_written"].get(p),
                                 note="paper: Email app on the Galaxy Note" if p in PAPER["email_bytes_written"]
                                 else ""))
        byte_rows.append(res.row(label, "block.bytes{op=write}", display=f"({LETTER[p]}) {p}, block writes"))
    rows += [res.row("data/native", tps, display="native, critical dir data/"),
             res.row("data/fjord-ram", tps, display="fjord-ram, critical dir data/",
                     note="not whitelisted: fsync kept"),
             res.row("plain-ext4", tps, display="ext4 without FUSE")]
    sections = [
        Section("SQLite inserts per second, whitelisted directory", "sec. IV, Fig. 5 (RL Benchmark: SQLite)", "tx/s",
                rows),
        Section("Run time relative to native", "Fig. 4/5 captions: Fjord eliminates 41-55 % (Email), 59-73 % (RL "
                "Benchmark) of the execution time", "ratio", time_rows),
        Section("Bytes written", "sec. IV: written data 35 MB -> 11 MB for FjordRAM and FjordBoth (Email, Galaxy "
                "Note)", "B", byte_rows),
    ]
    ram_tps = res.median("cache/fjord-ram", tps)
    checks = [
        check("fjord-ram above native TPS in a whitelisted directory (Fig. 5: 59-73 % less run time)",
              {"native": native_tps, "fjord_ram": ram_tps}, lambda native, fjord_ram: fjord_ram > native,
              lambda native, fjord_ram: f"native {native:.1f} tx/s, fjord-ram {fjord_ram:.1f} tx/s "
                                        f"(run time x{native / fjord_ram:.2f})"),
        check("fjord-ram writes less than native (sec. IV: 35 MB -> 11 MB)",
              {"native": res.median("cache/native", "fjord.daemon_pwrite_bytes"),
               "fjord_ram": res.median("cache/fjord-ram", "fjord.daemon_pwrite_bytes")},
              lambda native, fjord_ram: fjord_ram < native,
              lambda native, fjord_ram: f"daemon -> ext4: native {native / 1e6:.2f} MB, fjord-ram "
                                        f"{fjord_ram / 1e6:.2f} MB"),
        check("FjordRAM and FjordBoth run about equally fast (Fig. 5)",
              {"ram": ram_tps, "both": res.median("cache/fjord-both", tps)},
              lambda ram, both: 0.75 <= both / ram <= 1.33, "fjord-ram {ram:.1f} tx/s, fjord-both {both:.1f} tx/s"),
        check("a critical (not whitelisted) file keeps its fsync(): no fjord-ram gain in data/ (sec. III-B)",
              {"native": res.median("data/native", tps), "fjord_ram": res.median("data/fjord-ram", tps)},
              lambda native, fjord_ram: fjord_ram <= 1.5 * native,
              "data/: native {native:.1f} tx/s, fjord-ram {fjord_ram:.1f} tx/s"),
    ]
    return sections, checks


STUDY = Study(
    name="fjord",
    title="Fjord's six configurations: SQLite TPS and bytes written, whitelisted vs critical files",
    paper="001: Kim & Ramachandran, Fjord: Informed Storage Management for Smartphones",
    description=__doc__.split("\n\n", 1)[1].strip(),
    cells=cells,
    analyse=analyse,
    metric="workload.tps",
    default_device=lambda config: "emmc-2012",
    repeat=lambda config: 2 if config.quick else 3,
    needs=("fjord", "mobibench"),
)
