"""The rwbs string of block events: one op letter with flag letters around it (blk_fill_rwbs).

Layout on 4.x+ kernels: [F = REQ_PREFLUSH] op [F = REQ_FUA] [A = readahead] [S = sync] [M = meta] [U = atomic],
where op is W (write), R (read), D / DE (discard / secure erase), F (flush), N (none), or a zoned op (ZA, ZR...).
3.x kernels have the same letters with W before D and an `E` for REQ_SECURE; the decoding below accepts both.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

OPS = {"W": "write", "R": "read", "D": "discard", "F": "flush", "N": "other", "Z": "zone"}


@dataclass(frozen=True)
class Rwbs:
    op: str
    is_preflush: bool
    is_fua: bool
    is_readahead: bool
    is_sync: bool
    is_meta: bool


@lru_cache(maxsize=None)
def decode_rwbs(rwbs: str) -> Rwbs:
    i = 0
    preflush = False
    if len(rwbs) > 1 and rwbs[0] == "F" and rwbs[1] in "WRDFNZ":
        preflush, i = True, 1
    op = OPS.get(rwbs[i], "other") if i < len(rwbs) else "other"
    rest = rwbs[i + 1:]
    if op == "zone" or (op == "discard" and rest.startswith("E")):
        rest = rest[1:]  # the second letter of a two-letter op (ZA, ZR, DE)
    return Rwbs(op=op, is_preflush=preflush, is_fua="F" in rest, is_readahead="A" in rest, is_sync="S" in rest,
                is_meta="M" in rest)
