"""Targets: a transport to reach a device plus the facts probed about it."""
