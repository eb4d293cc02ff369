"""Every path of a recording lands under the replay's root, never outside it (analyzers/replay/paths.py)."""

from __future__ import annotations

import polars as pl
import pytest

from mobiperf.analyzers.replay.paths import DROP_CACHES, escape_path, is_safe, map_path, map_paths, parents

WORKDIR = "/var/tmp/mobiperf/stack-1-ab/data"


@pytest.mark.parametrize("path,kind,rel", [
    (f"{WORKDIR}/test.db", "inside", "test.db"),
    (f"{WORKDIR}/sub/./x//y", "inside", "sub/x/y"),
    (WORKDIR, "inside", "."),
    (f"{WORKDIR}/../../../../etc/passwd", "outside", ""),     # normalised first: it is outside, left out
    ("/usr/lib/x86_64-linux-gnu/libc.so.6", "outside", ""),
    ("/proc/stat", "pseudo", ""), ("/dev/null", "pseudo", ""), ("pipe:[1234]", "pseudo", ""),
    ("socket:[99]", "pseudo", ""), ("anon_inode:[eventfd]", "pseudo", ""),
    (DROP_CACHES, "inside", DROP_CACHES), ("", "none", ""),
])
def test_a_runs_paths_are_its_stack_directorys(path, kind, rel):
    assert map_path(path, WORKDIR) == (kind, rel)


def test_a_stack_directory_under_dev_shm_is_storage():
    workdir = "/dev/shm/mobiperf/stack-2-cd/data"
    assert map_path(f"{workdir}/f", workdir) == ("inside", "f")
    assert map_path("/dev/shm/other", workdir) == ("pseudo", "")


@pytest.mark.parametrize("path,kind,rel", [
    ("/data/data/com.example/databases/notes.db", "inside", "data/data/com.example/databases/notes.db"),
    ("/../../etc/passwd", "inside", "etc/passwd"),          # an absolute path cannot climb above /
    ("//x", "inside", "x"), ("/", "inside", "."),
    ("../../outside", "climbed", "outside"),                # a relative one has its leading .. dropped
    ("a/../../b", "climbed", "b"), ("a/./b", "inside", "a/b"),
])
def test_a_trace_from_elsewhere_keeps_its_paths_under_the_root(path, kind, rel):
    got = map_path(path, None)
    assert got == (kind, rel)
    assert is_safe(got[1]) or kind == "none"


def test_map_paths_works_each_path_out_once_in_the_order_given():
    df = map_paths(pl.Series(["/a/b", None, "/proc/x", "/a/b"]), None)
    assert df.to_dicts() == [{"kind": "inside", "rel": "a/b"}, {"kind": "none", "rel": ""},
                             {"kind": "pseudo", "rel": ""}, {"kind": "inside", "rel": "a/b"}]


def test_escaped_paths_are_one_word_and_decode_to_the_same_bytes():
    for path in ("plain/file.db", "with space/a b", "per%cent", "tab\there", "utf8/é名", "quote\"s"):
        word = escape_path(path)
        assert " " not in word and "\t" not in word and all(0x21 <= ord(c) < 0x7f for c in word)
        decoded, i = bytearray(), 0
        while i < len(word):
            if word[i] == "%":
                decoded.append(int(word[i + 1:i + 3], 16))
                i += 3
            else:
                decoded.append(ord(word[i]))
                i += 1
        assert bytes(decoded) == path.encode()
    assert escape_path("a b") == "a%20b" and escape_path("100%") == "100%25"


@pytest.mark.parametrize("rel,safe", [("a/b", True), (".", True), ("../a", False), ("a/../b", False),
                                      ("/etc/passwd", False), ("a\0b", False), ("", False), (DROP_CACHES, True),
                                      ("a..b/c", True)])
def test_what_the_generator_accepts(rel, safe):
    assert is_safe(rel) is safe


def test_parents_outermost_first():
    assert parents("a/b/c") == ["a", "a/b"] and parents("f") == []
