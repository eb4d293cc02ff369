"""Collectors: bring raw traces back from a target (ftrace through a tracefs instance, strace, blktrace, ...).

Installed as mobiperf.collectors. Collectors touch the device; the parsers in parse/ never do.

Every collector follows one protocol, so the pipeline runs any set of them the same way:

    with collector:                       # set up (nothing recorded yet); __exit__ restores the device
        env.update(collector.workload_env())
        argv = collector.wrap_command(argv)   # e.g. strace prefixes the workload
        collector.start()
        ... the workload runs ...
        summary = collector.stop()        # a JSON-able dict for run.json; raw files are in its out_dir

collector.py holds the protocol's base class; plan.py's plan_collectors() decides which collectors a run gets
from what the target offers and what was asked.
"""
