"""The embedded default: runs as processes on this machine, with the cluster's semantics.

Kept free of imports: the run's own process starts from ``runplane.runtimes.local.child``,
which must load nothing it does not need.
"""
