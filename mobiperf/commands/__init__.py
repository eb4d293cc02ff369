"""Subcommands beyond the core (run, analyze, report, show, targets), one module per area.

Each module defines its Click commands and a `register(group)` function; the CLI registers every module found
here, so an area adds commands without editing cli.py.
"""

from __future__ import annotations

import importlib
import pkgutil

import click


def register_all(group: click.Group) -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        importlib.import_module(f"{__name__}.{info.name}").register(group)
