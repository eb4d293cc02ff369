"""Which source made each layer of a run, in one line each, from run.json's parse summary: what `mobiperf run`,
`show` and `analyze` print and the report's summary shows.

  FUSE layer  collectors/parse/fuse_layer.py's note: FUSE events paired by id, by order (sends without ids), through
              the daemon's request log, the log alone, the daemon's /dev/fuse calls, or why there is none
  call layer  said where raw_syscalls were read (collectors/parse/__init__.py: decoded by the device's ABI, or beside
              the syscalls events and not used)
"""

from __future__ import annotations


def layer_sources(meta: dict) -> list[tuple[str, str]]:
    """[(layer, the line saying its source)] for the layers whose source is worth a line."""
    parse = meta.get("parse") or {}
    out = []
    fuse = ((parse.get("derived") or {}).get("fuse_pairing") or {}).get("note")
    if fuse and fuse != "no FUSE layer in this stack":
        out.append(("FUSE layer", fuse.removeprefix("FUSE layer ")))
    calls = sorted({str(s.get("call_layer")) for s in (parse.get("repetitions") or {}).values()
                    if isinstance(s, dict) and s.get("call_layer")})
    if calls:
        out.append(("call layer", "; ".join(c.removeprefix("call layer ") for c in calls)))
    return out
