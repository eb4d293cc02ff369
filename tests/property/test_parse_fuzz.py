"""Fuzzing every parser (a small count here; bench/fuzz_parsers.py runs >= 100k inputs): only ParseError escapes.
Truncated files keeping every complete record is tested with each parser."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from parser_fuzz_inputs import PARSERS, input_name, mutated, parse_or_parse_error


def check(kind: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        parse_or_parse_error(kind, Path(d) / input_name(kind), data)


@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_only_parse_errors_escape(kind):
    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(mutated(kind))
    def run(data):
        check(kind, data)

    run()
