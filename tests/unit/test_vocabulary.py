"""The Python vocabulary (mobiperf/core/vocabulary.py) and the C programs speak the same names and codes.

Each name is checked twice where the C allows it: against the C source that defines it (a preset the C gains or
drops, an enum value or a journal mode moved, fails here) and against the built program (the daemon takes every
preset the vocabulary names and refuses one it lacks; the generator's -h says what each code means, and refuses
one past the last). The binaries are run on a source directory that does not exist, so nothing is mounted: a
preset the daemon takes gets as far as that directory, one it lacks stops at the preset."""

from __future__ import annotations

import re
import subprocess

import pytest

from conftest import REFERENCE_IMPL
from mobiperf.core import vocabulary as v
from mobiperf.stack.spec import MKFS

MISSING_DIR = "/nonexistent-mobiperf-vocabulary-test"


def c_source(path: str) -> str:
    return (REFERENCE_IMPL / path).read_text()


def c_function(source: str, name: str) -> str:
    """The body of a C function (from its name to the first line that is a lone closing brace)."""
    m = re.search(rf"^\w[^\n]*\b{name}\([^)]*\)\n{{\n(.*?)^}}\n", source, re.S | re.M)
    assert m, f"no function {name}"
    return m.group(1)


def c_enum(source: str, name: str) -> dict[str, int]:
    m = re.search(rf"enum {name} {{(.*?)}};", source, re.S)
    assert m, f"no enum {name}"
    return {k: int(val) for k, val in re.findall(r"(\w+)\s*=\s*(\d+)", m.group(1))}


def run_daemon(binary, preset: str) -> str:
    done = subprocess.run([str(binary), "-o", f"preset={preset}", MISSING_DIR, MISSING_DIR + "-mnt"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    return done.stderr


def bfuse_source_presets() -> list[str]:
    return re.findall(r'strcmp\(name, "([\w-]+)"\)', c_function(c_source("bfuse/bfuse.c"), "bf_preset"))


def fjord_source_presets() -> list[str]:
    m = re.search(r"fj_preset_names\[\] = \{(.*?)NULL", c_source("fjord/fj_policy.c"), re.S)
    assert m
    return re.findall(r'"([\w-]+)"', m.group(1))


@pytest.mark.parametrize("daemon,in_source,presets,foreign", [
    ("bfuse", bfuse_source_presets, v.BFUSE_PRESETS, "fjord-ram"),
    ("fjord", fjord_source_presets, v.FJORD_PRESETS, "legacy")])
def test_daemon_presets_are_the_vocabularys(reference_binary, daemon, in_source, presets, foreign):
    assert sorted(in_source()) == sorted(presets)
    binary = reference_binary(daemon)
    for preset in presets:
        said = run_daemon(binary, preset)
        assert "unknown preset" not in said and "source directory" in said, (preset, said)
    assert f"unknown preset '{foreign}'" in run_daemon(binary, foreign)


def test_fuse_layers_name_built_daemons_and_their_presets(reference_binary):
    for layer, (daemon, default) in v.FUSE_LAYERS.items():
        assert reference_binary(daemon).exists()
        assert default in v.PRESETS[layer], layer


# The meaning of each code: the vocabulary's name -> the C enum constant (mb.h) and words of the generator's -h.
ACCESS_MEANING = {"seq-write": ("MB_A_WRITE", "sequential write"), "rand-write": ("MB_A_RANDWRITE", "random write"),
                  "seq-read": ("MB_A_READ", "sequential read"), "rand-read": ("MB_A_RANDREAD", "random read"),
                  "append": ("MB_A_APPEND", "append")}
SYNC_MEANING = {"buffered": ("MB_Y_NONE", "buffered"), "osync": ("MB_Y_OSYNC", "O_SYNC"),
                "fsync": ("MB_Y_FSYNC", "fsync per write"), "direct": ("MB_Y_DIRECT", "O_DIRECT"),
                "osync-direct": ("MB_Y_SYNC_DIRECT", "O_SYNC|O_DIRECT"), "mmap": ("MB_Y_MMAP", "mmap"),
                "mmap-async": ("MB_Y_MMAP_ASYNC", "mmap+msync(MS_ASYNC)"),
                "mmap-sync": ("MB_Y_MMAP_SYNC", "mmap+msync(MS_SYNC)"), "fdatasync": ("MB_Y_FDATASYNC",
                                                                                    "fdatasync per write")}


@pytest.fixture(scope="module")
def generator_help(reference_binary) -> str:
    done = subprocess.run([str(reference_binary("mobibench")), "-h"], capture_output=True, text=True, timeout=30)
    return " ".join((done.stdout + done.stderr).split())


def help_codes(text: str, option: str, stop: str) -> dict[int, str]:
    """`-a MODE 0 sequential write, 1 random write, ...` -> {0: "sequential write", ...} (a closing parenthesis
    that opened before the first code is dropped: `(0 OFF, 1 NORMAL, 2 FULL default)`)."""
    m = re.search(rf" {option} \w+ (.*?) {stop} ", text)
    assert m, option
    out = {}
    for piece in re.split(r"(?:,\s|\()(?=\d+ )|\s(?=0 )", m.group(1)):
        if re.match(r"\d+ ", piece):
            code, words = piece.split(" ", 1)
            words = words.strip().rstrip(",")
            if words.count(")") > words.count("("):
                words = words[:-1]
            out[int(code)] = words
    return out


@pytest.mark.parametrize("table,meaning,enum,option,stop", [
    ("ACCESS_MODES", ACCESS_MEANING, "mb_access", "-a", "-y"),
    ("SYNC_MODES", SYNC_MEANING, "mb_sync", "-y", "-t")])
def test_generator_modes_mean_what_the_vocabulary_says(generator_help, table, meaning, enum, option, stop):
    codes = getattr(v, table)
    enum_values = c_enum(c_source("mobibench/mb.h"), enum)
    assert set(meaning) == set(codes)
    assert sorted(codes.values()) == sorted(enum_values.values())   # every code the C has is named, and no other
    described = help_codes(generator_help, option, stop)
    for name, code in codes.items():
        constant, words = meaning[name]
        assert enum_values[constant] == code, name
        assert described[code].startswith(words), (name, described)


def test_generator_refuses_the_code_after_the_last(reference_binary):
    mobibench = str(reference_binary("mobibench"))
    for option, codes in (("-a", v.ACCESS_MODES), ("-y", v.SYNC_MODES)):
        past = max(codes.values()) + 1
        done = subprocess.run([mobibench, option, str(past), "-p", MISSING_DIR], capture_output=True, text=True,
                              timeout=30)
        assert done.returncode != 0 and f"must be between 0 and {past - 1}" in done.stderr, (option, done.stderr)


def test_sqlite_codes_are_the_generators(generator_help):
    m = re.search(r"mb_journal_sql\[\] = \{(.*?)\};", c_source("mobibench/mb_db.c"), re.S)
    assert m
    journals = [s.lower() for s in re.findall(r'"(\w+)"', m.group(1))]
    assert sorted(v.SQLITE_JOURNALS, key=v.SQLITE_JOURNALS.get) == journals
    assert v.SQLITE_JOURNALS == {words.split()[0].lower(): code
                                 for code, words in help_codes(generator_help, "-j", "-s").items()}
    sync = help_codes(generator_help, "-s", "-i")
    assert v.SQLITE_SYNC == {words.split()[0].lower(): code for code, words in sync.items()}
    ops = help_codes(generator_help, "-d", "-n")
    assert v.SQLITE_OPS == {f"sqlite-{words.split()[-1]}": code for code, words in ops.items()}


def test_every_filesystem_but_raw_has_its_mkfs():
    assert set(MKFS) == set(v.FILESYSTEMS) - {v.RAW}
