import pytest

from mobiperf.core.errors import UsageError
from mobiperf.core.units import format_duration_ns, format_size, parse_duration_ns, parse_size


@pytest.mark.parametrize("text,expected", [("4096", 4096), ("4k", 4096), ("512K", 512 << 10), ("8M", 8 << 20),
                                           ("1g", 1 << 30), ("4KiB", 4096), ("1.5M", 3 << 19)])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text,expected", [("10ms", 10_000_000), ("2s", 2_000_000_000), ("500us", 500_000),
                                           ("3", 3_000_000_000)])
def test_parse_duration(text, expected):
    assert parse_duration_ns(text) == expected


@pytest.mark.parametrize("bad", ["", "4x", "-1k", "k"])
def test_bad_size_names_examples(bad):
    with pytest.raises(UsageError, match="examples"):
        parse_size(bad)


def test_format():
    assert format_size(4096) == "4 KiB"
    assert format_size(3 << 19) == "1.5 MiB"
    assert format_duration_ns(1_500_000) == "1.5 ms"
