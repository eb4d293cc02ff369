"""Collectors: bring raw traces back from a target (ftrace through a tracefs instance, strace, blktrace).

Installed as mobiperf.collectors. Collectors touch the device; the parsers in parse/ never do.
"""
