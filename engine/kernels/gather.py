"""Gather and scatter of fixed-width numbers by a row permutation, into arrays the caller
allocates.

A window over unsorted input gathers each argument into (partition, order) order and
scatters each result back: both are one random access a row. Past the caches that access
costs what its TLB miss costs: a gather from 64 MiB of 4 KiB pages took 18 ns a row, from
huge pages 9 ns, and 5 ns either way from 16 MiB -- so at 8M rows a moving SUM cost 4.9x
its 2M-row time. numpy madvises its large allocations for transparent huge pages and
Arrow's pool does not, so the caller allocates ``out`` with numpy; these loops then do the
accesses (numpy's fancy indexing took twice as long a row as this loop at 2M rows).
"""

from __future__ import annotations

from plansight.engine.kernels.jit import kernel


@kernel
def gather_into(values, indices, out):
    """``out[i] = values[indices[i]]`` (indices in range)."""
    for i in range(len(indices)):
        out[i] = values[indices[i]]


@kernel
def scatter_into(values, rows, out):
    """``out[rows[i]] = values[i]`` (rows in range)."""
    for i in range(len(rows)):
        out[rows[i]] = values[i]
