"""mobiperf: where does a phone's storage IO time go, layer by layer, and did a change help?"""

from mobiperf.core.version import VERSION

__version__ = VERSION


def load_store(path):
    """A store's runs and tables as lazy Polars frames, for notebooks (mobiperf.core.store_query.load_store)."""
    from mobiperf.core.store_query import load_store as load

    return load(path)
