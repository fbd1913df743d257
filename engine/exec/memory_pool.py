"""The session's memory pool: named consumers grow reservations before holding data.

    consumer ──try_grow(n)──▶ pool ──ok──▶ reservation.size += n
                                  └─no──▶ consumer spills, or grow() raises ResourcesExhausted

Accounting uses Arrow buffer sizes (``nbytes``). A reservation is released when its owner is
done: ``with pool.register(name, metrics=m) as reservation:`` frees it on exit (also on error
or cancellation, when the operator's generator is closed) and records its peak as the
operator partition's ``peak_mem``, as DataFusion frees a reservation when it is dropped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from plansight.engine.errors import ResourcesExhausted
from plansight.engine.exec.metrics import PartitionMetrics, format_bytes


def parse_memory_limit(value: int | float | str | None) -> int | None:
    """``"2GB"`` / ``"512MiB"`` / ``1_000_000`` -> bytes; None stays None (no limit).

    Example:
        >>> parse_memory_limit("1.5KB"), parse_memory_limit("2MiB"), parse_memory_limit(10)
        (1500, 2097152, 10)
    """
    if value is None or isinstance(value, (int, float)) and not isinstance(value, bool):
        if value is not None and value <= 0:
            raise ValueError(f"memory limit must be positive, got {value}")
        return None if value is None else int(value)
    text = str(value).strip().replace(" ", "").upper()
    units = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
             "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40, "K": 10**3, "M": 10**6,
             "G": 10**9}
    number = text.rstrip("KMGTIB")
    unit = text[len(number):]
    try:
        amount = float(number)
    except ValueError:
        amount = -1.0
    if unit not in units or amount <= 0:
        raise ValueError(f"invalid memory limit {value!r}: use bytes or a size like '512MB', "
                         "'2GB', '1GiB'")
    return int(amount * units[unit])


# ----------------------------------------------------------------------------- memory policy
#
# Every share of the limit that an operator takes is named here, so one page shows how a
# query's budget is divided. Each function answers for a pool without a limit too (no cap).
#
#   limit ─┬─ working floor   1/16 per partition   consumers that cannot spill (windows, NLJ)
#          ├─ merge budget    1/4 among siblings   merging spilled runs (sort, aggregate)
#          ├─ buffer cap      1/siblings - merge   what one sort / aggregate partition buffers
#          ├─ build share     1/2 among builds     hash-join build sides before they spill
#          ├─ partial flush   1/4 per partition    a partial aggregate flushes downstream
#          ├─ sort headroom   1/8                  sorts feeding window stages leave them this
#          └─ oversized piece 1/32                 a window partition larger than memory
#                                                  streams through in pieces of this size

#: Consumers that cannot spill hold 1/WORKING_SHARE of the limit (split among sibling
#: partitions) from their start: see ``MemoryReservation.reserve_floor``.
WORKING_SHARE = 16
#: Merging spilled runs is budgeted 1/MERGE_SHARE of the limit, split among sibling partitions.
MERGE_SHARE = 4
#: Concurrent hash-join build sides hold at most this fraction of the limit together: their
#: children are still running and need memory too (an aggregate below the join loads its
#: spilled buckets then), so a build spills before it has taken the whole pool.
BUILD_SHARE = 0.5
#: A partial aggregate flushes its states downstream past 1/PARTIAL_FLUSH_SHARE per partition.
PARTIAL_FLUSH_SHARE = 4
#: Sorts chained through window stages (which cannot spill) leave 1/SORT_HEADROOM_SHARE free.
SORT_HEADROOM_SHARE = 8
#: A window partition too large for memory streams in pieces of 1/OVERSIZED_PIECES.
OVERSIZED_PIECES = 32
#: The smallest merge budget, so that a merge under a tiny limit still makes progress.
MIN_MERGE_BUDGET = 16 * 1024
#: A consumer that cannot spill but may wait for memory (``MemoryReservation.grow(...,
#: wait=True)``) gives up once nothing in the pool was released for this long: whoever holds
#: the memory is stuck (behind the waiter's own output, say), not just slower.
WAIT_IDLE_SECONDS = 5.0
#: How often a waiting consumer looks again without being woken (a release it missed).
WAIT_SLICE_SECONDS = 0.05


def merge_budget(pool: MemoryPool, siblings: int = 1) -> int:
    """Bytes one of ``siblings`` partitions reserves to merge its spilled runs.

    Example:
        >>> merge_budget(MemoryPool(8 << 20), siblings=2)
        1048576
    """
    return max(MIN_MERGE_BUDGET, (pool.limit or 0) // (MERGE_SHARE * max(1, siblings)))


def buffer_cap(pool: MemoryPool, siblings: int = 1, set_aside: int = 0) -> float:
    """Bytes one of ``siblings`` partitions may buffer before it spills, after ``set_aside``
    (its merge budget): a greedy sibling must not starve the others' merges.

    Example:
        >>> buffer_cap(MemoryPool(1000), 2, set_aside=100), buffer_cap(MemoryPool(None))
        (400, inf)
    """
    if pool.limit is None:
        return float("inf")
    return max(1, pool.limit // max(1, siblings) - set_aside)


def build_share(pool: MemoryPool, builds: int = 1) -> int | None:
    """Bytes one of ``builds`` concurrent hash-join build sides may hold before it spills."""
    return None if pool.limit is None else int(pool.limit * BUILD_SHARE / max(1, builds))


def partial_flush_bytes(pool: MemoryPool, partitions: int = 1) -> int | None:
    """Bytes a partial aggregate partition holds before flushing its states downstream."""
    return pool.limit // (PARTIAL_FLUSH_SHARE * max(1, partitions)) if pool.limit else None


def sort_headroom(pool: MemoryPool) -> int:
    """Bytes sorts that feed window stages leave free for those stages."""
    return 0 if pool.limit is None else pool.limit // SORT_HEADROOM_SHARE


def oversized_piece_bytes(pool: MemoryPool) -> float:
    """Bytes per piece in which a window partition larger than memory streams through."""
    return float("inf") if pool.limit is None else pool.limit / OVERSIZED_PIECES


def nearly_full(pool: MemoryPool) -> bool:
    """Less than a quarter of the limit is free: whoever consumes a spilling operator's output
    (a sibling's merge, a join build) will need memory too, so its last rows go to disk."""
    return pool.limit is not None and pool.limit - pool.reserved < pool.limit // 4


def leaves_headroom(pool: MemoryPool, additional: int, headroom: int) -> bool:
    """Whether granting ``additional`` bytes still leaves ``headroom`` bytes free."""
    return not headroom or pool.limit is None or \
        pool.limit - pool.reserved - additional >= headroom


class MemoryPool:
    """A shared budget in bytes; ``limit=None`` tracks without limiting.

    Example:
        >>> pool = MemoryPool(1000)
        >>> r = pool.register("SortExec[0]", can_spill=True)
        >>> r.try_grow(800), r.try_grow(300), pool.reserved
        (True, False, 800)
        >>> r.free(); pool.reserved
        0
    """

    def __init__(self, limit: int | None = None, policy: str = "greedy"):
        if policy not in ("greedy", "fair"):
            raise ValueError(f"unknown memory pool policy {policy!r}: use 'greedy' or 'fair'")
        self.limit = limit
        self.policy = policy
        self.reserved = 0
        self.peak = 0
        self._consumers: dict[int, MemoryReservation] = {}
        self._lock = threading.Lock()
        self.listeners: list[Callable[[MemoryReservation, int], None]] = []
        # consumers waiting for memory (grow_waiting) and the releases that wake them
        self._released = threading.Condition()
        self._waiting: set[int] = set()
        self._releases = 0

    def register(self, consumer: str, can_spill: bool = False,
                 metrics: PartitionMetrics | None = None) -> MemoryReservation:
        """A new reservation of size 0; with ``metrics``, freeing it records its peak there."""
        reservation = MemoryReservation(self, consumer, can_spill, metrics)
        with self._lock:
            self._consumers[id(reservation)] = reservation
        return reservation

    def consumers(self) -> list[MemoryReservation]:
        with self._lock:
            return sorted(self._consumers.values(), key=lambda r: -r.size)

    def _grant(self, reservation: MemoryReservation, additional: int) -> bool:
        with self._lock:
            if self.limit is not None and additional > 0:
                if self.reserved + additional > self.limit:
                    return False
                if self.policy == "fair" and reservation.can_spill:
                    spillers = sum(1 for r in self._consumers.values() if r.can_spill) or 1
                    unspillable = sum(r.size for r in self._consumers.values() if not r.can_spill)
                    if reservation.size + additional > (self.limit - unspillable) / spillers:
                        return False
            self.reserved += additional
            reservation.size += additional
            reservation.peak = max(reservation.peak, reservation.size)
            self.peak = max(self.peak, self.reserved)
            total = self.reserved
        if additional < 0:
            self._notify_release()
        for listener in self.listeners:
            listener(reservation, total)
        return True

    def _unregister(self, reservation: MemoryReservation) -> None:
        with self._lock:
            self._consumers.pop(id(reservation), None)
        self._notify_release()

    def _notify_release(self) -> None:
        with self._released:
            self._releases += 1
            if self._waiting:
                self._released.notify_all()

    def grow_waiting(self, reservation: MemoryReservation, additional: int) -> bool:
        """Grant ``additional`` bytes, waiting for other consumers to release memory while
        one that is not itself waiting holds some; False when none does (waiting cannot
        help: the waiters hold it all) or nothing was released for WAIT_IDLE_SECONDS.

        For consumers that cannot spill but whose need is brief: the sibling partitions of
        a spilled aggregate merge their runs at about the same time, and under a tiny limit
        the last to start found its siblings' merges holding the pool (the 3-partition
        EXCEPT of tests/spill/test_spill_join.py failed 8 runs in 500). Their merges end and
        free their memory; failing the query instead was the wrong answer to being late.
        """
        if self._grant(reservation, additional):
            return True
        key = id(reservation)
        with self._released:
            self._waiting.add(key)
            seen, quiet_since = self._releases, time.monotonic()
        try:
            while True:
                with self._released:
                    if not self._others_hold_memory(reservation):
                        return False
                    self._released.wait(WAIT_SLICE_SECONDS)
                    if self._releases != seen:
                        seen, quiet_since = self._releases, time.monotonic()
                    elif time.monotonic() - quiet_since > WAIT_IDLE_SECONDS:
                        return False
                if self._grant(reservation, additional):
                    return True
        finally:
            with self._released:
                self._waiting.discard(key)

    def _others_hold_memory(self, reservation: MemoryReservation) -> bool:
        """Whether a consumer other than ``reservation`` that is not waiting holds memory
        (called holding ``_released``)."""
        with self._lock:
            return any(r.size > 0 and key not in self._waiting and r is not reservation
                       for key, r in self._consumers.items())

    @property
    def waiting(self) -> int:
        """How many consumers are waiting for memory (grow_waiting)."""
        with self._released:
            return len(self._waiting)

    def exhausted_error(self, reservation: MemoryReservation, requested: int) -> ResourcesExhausted:
        top = ", ".join(f"{r.consumer}={format_bytes(r.size)}" for r in self.consumers()[:3])
        return ResourcesExhausted(
            f"{reservation.consumer} could not reserve {format_bytes(requested)} more "
            f"(it holds {format_bytes(reservation.size)}; pool {format_bytes(self.reserved)} "
            f"reserved of limit {format_bytes(self.limit or 0)}). Largest consumers: {top}. "
            "Raise the memory limit (SET memory_limit = '4GB') or reduce the data.")


class MemoryReservation:
    """One consumer's share of the pool; a context manager that frees it on exit.

    Example:
        >>> pool = MemoryPool(1000)
        >>> with pool.register("SortExec[0]") as r:
        ...     r.grow(600); r.shrink(200); pool.reserved
        400
        >>> pool.reserved, r.peak
        (0, 600)
    """

    def __init__(self, pool: MemoryPool, consumer: str, can_spill: bool,
                 metrics: PartitionMetrics | None = None):
        self.pool, self.consumer, self.can_spill = pool, consumer, can_spill
        self.metrics = metrics
        self.size = 0
        self.peak = 0

    def __enter__(self) -> MemoryReservation:
        return self

    def __exit__(self, *exc_info) -> None:
        self.free()

    def try_grow(self, additional: int) -> bool:
        return self.pool._grant(self, int(additional))

    def grow(self, additional: int, wait: bool = False) -> None:
        """Grow or raise ResourcesExhausted (for consumers that cannot spill); with ``wait``,
        first wait for others to release memory (``MemoryPool.grow_waiting``)."""
        granted = self.pool.grow_waiting(self, int(additional)) if wait else \
            self.try_grow(additional)
        if not granted:
            raise self.pool.exhausted_error(self, int(additional))

    def shrink(self, amount: int) -> None:
        self.pool._grant(self, -min(int(amount), self.size))

    def try_resize(self, new_size: int) -> bool:
        """Grow or shrink to exactly ``new_size``; False (and no change) if the pool refuses."""
        if new_size > self.size:
            return self.try_grow(new_size - self.size)
        self.shrink(self.size - new_size)
        return True

    def reserve_floor(self, partitions: int = 1) -> int:
        """Hold ``limit / (WORKING_SHARE * partitions)`` bytes if the pool has them; returns the
        bytes held (0 without a limit or when refused).

        For consumers that cannot spill: taken before reading any input, it keeps consumers
        that spill (a sort or an aggregate around them, which grow until the pool says no) from
        taking every byte first. The owner keeps its size at ``max(floor, what it holds)``.

        Example:
            >>> pool = MemoryPool(1600)
            >>> r = pool.register("WindowAggExec[0]")
            >>> r.reserve_floor(), r.try_resize(2000), r.try_resize(700), pool.reserved
            (100, False, True, 700)
        """
        limit = self.pool.limit
        if limit is None:
            return 0
        floor = limit // (WORKING_SHARE * max(1, partitions))
        return floor if floor and self.try_grow(floor) else 0

    def resize(self, new_size: int, wait: bool = False) -> None:
        """Grow or shrink to exactly ``new_size`` (grow may wait, see ``grow``, and raise)."""
        if new_size > self.size:
            self.grow(new_size - self.size, wait)
        elif new_size < self.size:
            self.shrink(self.size - new_size)

    def free(self) -> None:
        """Give everything back (idempotent); record the peak in the owner's metrics."""
        if self.metrics is not None:
            self.metrics.set_max("peak_mem", self.peak)
        if self.size:
            self.pool._grant(self, -self.size)
        self.pool._unregister(self)


GRANT_CHUNK = 1 << 20  # bytes an AmortizedAccount asks the pool for at a time


class AmortizedAccount:
    """Counts the bytes a consumer holds batch by batch, asking the pool only in chunks.

    A locked pool grant (and a ReservationChanged event) per 8K-row batch is GIL-held Python
    that two partitions take turns on. Here the reservation grows by max(missing, chunk) and
    the bytes really held (``used``) are counted locally, so most batches cost one addition.
    The reservation is never smaller than ``used`` and the pool never exceeds its limit; the
    chunk is at most 1/64 of the limit, and a refused chunk is retried at the exact size, so
    a tight pool refuses the same batches it would without chunking.

    Example:
        >>> pool = MemoryPool(10 * GRANT_CHUNK)
        >>> account = AmortizedAccount(pool.register("agg"))
        >>> account.try_add(1000), account.used, pool.reserved == pool.limit // 64
        (True, 1000, True)
        >>> account.reset(); account.used, pool.reserved
        (0, 0)
    """

    def __init__(self, reservation: MemoryReservation):
        limit = reservation.pool.limit
        self.reservation = reservation
        self.chunk = GRANT_CHUNK if limit is None else max(1, min(GRANT_CHUNK, limit // 64))
        self.used = 0

    def try_add(self, nbytes: int) -> bool:
        """Account ``nbytes`` more, or return False (nothing changed) if the pool refuses."""
        used = self.used + int(nbytes)
        missing = used - self.reservation.size
        if missing > 0 and not self.reservation.try_grow(max(missing, self.chunk)) and (
                missing >= self.chunk or not self.reservation.try_grow(missing)):
            return False
        self.used = used
        return True

    def add(self, nbytes: int) -> None:
        """Account ``nbytes`` more or raise ResourcesExhausted (for data that must be held)."""
        if not self.try_add(nbytes):
            raise self.reservation.pool.exhausted_error(self.reservation, int(nbytes))

    def remove(self, nbytes: int) -> None:
        """Account ``nbytes`` fewer; the reservation gives memory back only once more than two
        chunks of it are unused, so a batch in and a batch out cost no pool call."""
        self.used = max(0, self.used - int(nbytes))
        spare = self.reservation.size - self.used
        if spare > 2 * self.chunk:
            self.reservation.shrink(spare - self.chunk)

    def reset(self) -> None:
        """Everything held was released: give the whole reservation back."""
        self.used = 0
        self.reservation.resize(0)
