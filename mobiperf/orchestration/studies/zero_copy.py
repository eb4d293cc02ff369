"""Study `zero-copy`: seed 003, Song & Shin, "Performance Improvement with Zero Copy Technique on FUSE-based
Consumer Devices".

The paper moved FUSE write data between the kernel's buffers with splice/vmsplice instead of copying it through
the daemon, with big_writes on, and measured IOzone (20 MB file, 128 KB IO) and the Quick benchmark (9 MB file,
1 MB IO) on a 16 GB-eMMC smartphone: up to 25 % faster. Here: the bfuse daemon without its buffer (512 KiB-class
FUSE IO unit = big_writes) with splice off (preset nobuf: read the request, pwrite it) and on (preset zerocopy),
max_write 128 KiB (1 MiB writes fall back to copying in libfuse, whose splice buffer must fit the 1 MiB pipe
limit: specs/fuse-notes.md), sequential writes of the paper's two shapes, on the host's disk (the CPU-bound regime
where a copy costs; on a throttled device the device hides it). Splice calls are counted, so a silent fallback
to copying shows.
"""

from __future__ import annotations

from mobiperf.orchestration.study import Check, Config, Results, Row, Section, Study, check, ratio

PAPER = {
    "max_gain": 0.25,                                     # abstract and sec. IV: "up to 25 %"
    "iozone": {"file_bytes": 20 << 20, "record": 128 << 10},    # Fig. 3: 20 MB file, 128 KB IO
    "quick_benchmark": {"file_bytes": 9 << 20, "record": 1 << 20},  # Fig. 4: 9 MB file, 1 MB IO
    "options": ("big_writes", "vmsplice"),                # sec. III
}

SHAPES = {"iozone": ("128k", "20m"), "quick": ("1m", "9m")}


def cells(config: Config) -> list[tuple[str, dict[str, str]]]:
    shapes = ("iozone",) if config.quick else ("iozone", "quick")
    out = []
    for shape in shapes:
        record, size = SHAPES[shape]
        base = {"layer": "bfuse", "io_unit": "128k", "access": "append", "record": record, "file_size": size,
                "image_size": "256m"}
        out.append((f"{shape}/copy", {**base, "preset": "nobuf"}))
        out.append((f"{shape}/splice", {**base, "preset": "zerocopy"}))
        if not config.quick:
            out.append((f"{shape}/native", {k: v for k, v in base.items() if k not in ("layer", "io_unit")}))
    return out


def analyse(res: Results, config: Config) -> tuple[list[Section], list[Check]]:
    MB = 1e6
    sections, checks = [], []
    for shape, title in (("iozone", "IOzone shape: 20 MB file, 128 KB writes (Fig. 3)"),
                         ("quick", "Quick benchmark shape: 9 MB file, 1 MB writes (Fig. 4)")):
        if res.cell(f"{shape}/copy") is None:
            continue  # not in this study's size
        copy = res.median(f"{shape}/copy", "run.throughput")
        splice = res.median(f"{shape}/splice", "run.throughput")
        sections.append(Section(title, "sec. III, Figs. 3-4: zero copy up to +25 %", "MB/s", [
            res.row(f"{shape}/native", "run.throughput", scale=1 / MB, display="ext4 without FUSE"),
            res.row(f"{shape}/copy", "run.throughput", scale=1 / MB, display="FUSE, copying (read + pwrite)"),
            res.row(f"{shape}/splice", "run.throughput", scale=1 / MB, display="FUSE, zero copy (splice)",
                    paper="up to +25 % over copying"),
        ]))
        sections.append(Section(f"{title.split(':')[0]}: zero copy / copying", "abstract: up to +25 %", "ratio", [
            Row("splice / copy", ratio(splice, copy), paper=1 + PAPER["max_gain"], note="ratio of medians")],
            chart=False))
        sections.append(Section(f"{title.split(':')[0]}: how the daemon wrote", "counters of the bfuse daemon",
                                "count", [
            res.row(f"{shape}/copy", "bfuse.daemon_pwrite_calls", display="copying: pwrite() calls"),
            res.row(f"{shape}/splice", "bfuse.daemon_splice_write_calls", display="zero copy: splice() writes"),
            res.row(f"{shape}/splice", "bfuse.daemon_pwrite_calls", display="zero copy: pwrite() calls"),
        ], chart=False))
        checks.append(check(f"{shape}: the zero-copy daemon really splices (no silent fallback to copying)",
                            {"splices": res.median(f"{shape}/splice", "bfuse.daemon_splice_write_calls"),
                             "pwrites": res.median(f"{shape}/splice", "bfuse.daemon_pwrite_calls")},
                            lambda splices, pwrites: splices > 0 and pwrites == 0,
                            "splice writes {splices:.0f}, pwrite() {pwrites:.0f}"))
        checks.append(check(f"{shape}: zero copy is faster than copying (paper: up to +25 %)",
                            {"copy": copy, "splice": splice}, lambda copy, splice: splice > copy,
                            lambda copy, splice: f"copying {copy / MB:.1f} MB/s, splice {splice / MB:.1f} MB/s "
                                                 f"({100 * (splice / copy - 1):+.0f} %)"))
    return sections, checks


STUDY = Study(
    name="zero-copy",
    title="Zero copy (splice) in the FUSE daemon vs copying",
    paper="003: Song & Shin, Performance Improvement with Zero Copy Technique on FUSE-based Consumer Devices",
    description=__doc__.split("\n\n", 1)[1].strip(),
    cells=cells,
    analyse=analyse,
    default_device=lambda config: None,
    repeat=lambda config: 3 if config.quick else 5,
    needs=("bfuse", "mobibench"),
)
