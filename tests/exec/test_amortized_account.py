"""AmortizedAccount: chunked pool grants that refuse exactly what exact grants would refuse."""

import pytest

from plansight.engine.exec.memory_pool import GRANT_CHUNK, AmortizedAccount, MemoryPool
from plansight.errors import ResourcesExhausted


def test_small_adds_cost_one_grant_per_chunk():
    pool = MemoryPool(None)
    granted = []
    pool.listeners.append(lambda r, total: granted.append(total))
    account = AmortizedAccount(pool.register("agg"))
    for _ in range(100):
        assert account.try_add(10_000)
    assert account.used == 1_000_000
    assert len(granted) == 1 and pool.reserved == GRANT_CHUNK >= account.used
    account.add(3 * GRANT_CHUNK)  # more than a chunk missing: grows by exactly that
    assert account.used == 1_000_000 + 3 * GRANT_CHUNK == pool.reserved
    assert len(granted) == 2
    account.reset()
    assert (account.used, pool.reserved) == (0, 0)


def test_tight_pool_falls_back_to_the_exact_size_and_never_exceeds_its_limit():
    pool = MemoryPool(64_000)  # chunk: 1,000 bytes
    other = pool.register("other")
    other.grow(63_500)
    account = AmortizedAccount(pool.register("agg"))
    assert account.try_add(400)  # the 1,000-byte chunk does not fit, 400 bytes do
    assert (account.used, pool.reserved) == (400, 63_900)
    assert not account.try_add(200)  # refused: nothing changes
    assert (account.used, pool.reserved) == (400, 63_900)
    with pytest.raises(ResourcesExhausted, match="could not reserve"):
        account.add(200)
    assert pool.peak <= pool.limit
