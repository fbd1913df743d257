"""Distributed execution: a physical plan cut into stages that run as tasks on a cluster.

The modules without Dask (``stages``, ``shuffle``, ``pieces``, ``fragment``, ``task``) are
plain engine code; ``worker`` and ``executor`` import ``distributed`` and are imported only
when a session is given a cluster.
"""
