"""Compiled kernels (numba, nogil) for the loops Arrow has no kernel for; see jit.py."""
