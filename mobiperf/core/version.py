"""mobiperf's version: where the package, the wheel's metadata (setup.cfg) and every new run.json read it."""

VERSION = "0.1.0"
