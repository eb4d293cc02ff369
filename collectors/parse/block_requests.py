"""Block events -> one row per block request (the `block_rq` table).

The pairing lives with the analyzers (mobiperf.analyzers.pairing, vectorized; its definitions are in that
module's docstring, and mobiperf.analyzers.pairing_oracle is the event-at-a-time reference). This module keeps
the name derive_tables() imports.
"""

from mobiperf.analyzers.pairing import STALE_AFTER_NS, PairingStats, pair_block_requests

__all__ = ["STALE_AFTER_NS", "PairingStats", "pair_block_requests"]
