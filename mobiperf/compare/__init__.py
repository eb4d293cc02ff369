"""Runs against runs: the verdict of a comparison, its statistics per metric, its text/JSON/CSV forms, and the
fleet view of a store.
"""
