"""The floor that sequences the others: the pipeline of one run, repetitions until precise, sweeps, studies,
and work spread over a cluster.
"""
