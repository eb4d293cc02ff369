"""The ground floor: errors, units, table schemas, metrics, the run directory and the run store, statistics,
and the process plumbing (signals, lifelines, progress) every floor above may use. Imports nothing of mobiperf above it.
"""
