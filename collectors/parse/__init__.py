"""Parsers: raw trace files -> typed tables. Pure functions of their input files; they never touch a device."""
