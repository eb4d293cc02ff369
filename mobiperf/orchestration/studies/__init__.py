"""The bundled studies, one module per paper experiment; each module defines STUDY (a
mobiperf.orchestration.study.Study) and its paper's numbers as data (PAPER), with the table/figure/section they come
from."""

from __future__ import annotations

import importlib
import pkgutil


def all_studies() -> dict:
    studies = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        study = getattr(module, "STUDY", None)
        if study is not None:
            studies[study.name] = study
    return studies
