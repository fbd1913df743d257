"""Integer keys that collide in the compiled hash tables, for the kernel tests."""

from __future__ import annotations

import numpy as np

from plansight.engine.kernels import hash_table as ht


def colliding_keys(count: int, seed: int) -> list[int]:
    """``count`` keys whose hashes share their low 10 bits: one probe chain in every small
    table (different ``seed``s give different chains)."""
    rng = np.random.default_rng(seed)
    found: dict[int, list[int]] = {}
    while True:
        for value in rng.integers(-(1 << 40), 1 << 40, 4096).tolist():
            bucket = found.setdefault(int(ht.hash_int(value)) & 1023, [])
            bucket.append(value)
            if len(bucket) == count:
                return bucket
