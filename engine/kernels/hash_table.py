"""Open-addressing hash tables that number distinct keys densely (0, 1, 2, ...).

    keys ──hash──▶ slot ──linear probing──▶ slots[slot] = id ──▶ uniques[id] == key ?
                                              -1: empty (insert: the next id)

Two key kinds: int64 values (integers, dates, canonical float bits, scaled decimals, and
combined codes of several columns) and variable-length bytes (strings, binary: Arrow's
offsets and data buffers, compared byte by byte after the hash). A table holds only the
distinct keys, so its size follows their number, not the rows': it starts small and
doubles (rehashing the uniques) when half full.

Keys in a narrow range (surrogate keys: order, part, customer numbers) skip the hashing:
``range_factorize`` indexes an array by ``key - min`` instead.

A join builds a table once over the build keys (``factorize``) and probes it with every
probe batch (``lookup``: -1 where the key is absent); ``group_rows`` chains the build rows of
each id (a counting sort: every id's rows in row order) and ``expand`` turns probe ids into
(probe row, build row) pairs. NULL keys get id -1 and never match. Every kernel releases
the GIL (jit.py).
"""

from __future__ import annotations

import numpy as np

from plansight.engine.kernels.jit import kernel

_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_MIN_SLOTS = 16


@kernel
def mix(x):
    """A 64-bit finalizer (MurmurHash3's): every input bit moves every output bit, so
    sequential or strided keys spread over the slots."""
    x ^= x >> _S33
    x *= _M1
    x ^= x >> _S33
    x *= _M2
    x ^= x >> _S33
    return x


@kernel
def hash_int(value):
    return mix(np.uint64(value))


@kernel
def hash_bytes(data, start, end):
    """FNV-1a over data[start:end], then mixed (FNV alone leaves the low bits weak)."""
    h = _FNV_OFFSET
    for i in range(start, end):
        h ^= np.uint64(data[i])
        h *= _FNV_PRIME
    return mix(h ^ np.uint64(end - start))


@kernel
def fnv_each(offsets, data):
    """FNV-1a of each value ``data[offsets[i]:offsets[i + 1]]``, xor its length (so "ab" + ""
    and "a" + "b" differ once combined): the repartition's content hash of strings."""
    n = len(offsets) - 1
    out = np.empty(n, np.uint64)
    for i in range(n):
        h = _FNV_OFFSET
        for j in range(offsets[i], offsets[i + 1]):
            h ^= np.uint64(data[j])
            h *= _FNV_PRIME
        out[i] = h ^ np.uint64(offsets[i + 1] - offsets[i])
    return out


@kernel
def slots_for(count):
    """A power of two at least twice ``count`` (load factor <= 1/2)."""
    size = _MIN_SLOTS
    while size < 2 * count:
        size *= 2
    return size


@kernel
def _rehash(hashes, count, size):
    slots = np.full(size, -1, np.int64)
    mask = np.uint64(size - 1)
    for i in range(count):
        slot = np.int64(hashes[i] & mask)
        while slots[slot] != -1:
            slot = (slot + 1) & (size - 1)
        slots[slot] = i
    return slots


@kernel
def _int_rehash(uniques, count, size):
    table = np.full(2 * size, -1, np.int64)
    mask = size - 1
    for i in range(count):
        slot = np.int64(hash_int(uniques[i]) & np.uint64(mask))
        while table[2 * slot + 1] != -1:
            slot = (slot + 1) & mask
        table[2 * slot] = uniques[i]
        table[2 * slot + 1] = i
    return table


@kernel
def int_factorize(values, valid):
    """(id per row or -1 for invalid, table, uniques).

    The table interleaves (key, id) per slot, so a probe touches one cache line; id -1
    marks an empty slot. ``uniques[id]`` is the id's key."""
    n = len(values)
    ids = np.empty(n, np.int64)
    size = _MIN_SLOTS
    table = np.full(2 * size, -1, np.int64)
    uniques = np.empty(8, np.int64)
    count = 0
    previous = -1  # row of the last valid key: runs of one key (clustered data) skip the table
    for i in range(n):
        if not valid[i]:
            ids[i] = -1
            continue
        value = values[i]
        if previous >= 0 and values[previous] == value:
            ids[i] = ids[previous]
            previous = i
            continue
        previous = i
        mask = size - 1
        slot = np.int64(hash_int(value) & np.uint64(mask))
        while True:
            found = table[2 * slot + 1]
            if found == -1:
                if count == len(uniques):
                    uniques = np.concatenate((uniques, np.empty(len(uniques), np.int64)))
                uniques[count] = value
                ids[i] = count
                count += 1
                if 2 * count > size:
                    size *= 2
                    table = _int_rehash(uniques, count, size)
                else:
                    table[2 * slot] = value
                    table[2 * slot + 1] = count - 1
                break
            if table[2 * slot] == value:
                ids[i] = found
                break
            slot = (slot + 1) & mask
    return ids, table, uniques[:count].copy()


@kernel
def int_lookup(values, valid, table):
    """Id of each row's key in a factorized table, -1 when absent or invalid."""
    n = len(values)
    ids = np.empty(n, np.int64)
    mask = len(table) // 2 - 1
    previous = -1
    for i in range(n):
        ids[i] = -1
        if not valid[i]:
            continue
        value = values[i]
        if previous >= 0 and values[previous] == value:
            ids[i] = ids[previous]
            previous = i
            continue
        previous = i
        slot = np.int64(hash_int(value) & np.uint64(mask))
        while True:
            found = table[2 * slot + 1]
            if found == -1:
                break
            if table[2 * slot] == value:
                ids[i] = found
                break
            slot = (slot + 1) & mask
    return ids


@kernel
def range_factorize(values, valid, low, size):
    """int_factorize for keys known to lie in [low, low + size): the table is an array
    indexed by ``value - low`` (a perfect hash), so a key costs one access, in key order
    when the keys are sorted, and the table never grows. Its entries are int32 (``size``
    below 2**31: an id is below it): half the memory of int64, which mattered because the
    table spans the key range, not the keys (TPC-H Q18's final aggregate: 6M slots for
    750K orders per partition, 48 -> 24 MiB each)."""
    n = len(values)
    ids = np.empty(n, np.int64)
    table = np.full(size, -1, np.int32)
    uniques = np.empty(min(n, size), np.int64)
    count = 0
    previous = -1  # as in int_factorize: a run of one key skips the table
    for i in range(n):
        if not valid[i]:
            ids[i] = -1
            continue
        if previous >= 0 and values[previous] == values[i]:
            ids[i] = ids[previous]
            previous = i
            continue
        previous = i
        slot = values[i] - low
        found = table[slot]
        if found == -1:
            found = count
            table[slot] = count
            uniques[count] = values[i]
            count += 1
        ids[i] = found
    return ids, table, uniques[:count].copy()


#: a ``small_range_factorize`` table's most slots (int32 each: 256 KiB, cache resident)
MAX_SMALL_RANGE_SLOTS = 1 << 16


@kernel
def small_range_factorize(values, low, size):
    """(id per row, number of ids) of keys that are all valid and lie in [low, low + size),
    ``size`` at most ``MAX_SMALL_RANGE_SLOTS``: range_factorize without its run check,
    validity or uniques. With a table in cache a key costs one access, while the run check
    is a branch mispredicted wherever keys alternate (TPC-H Q1's two flags change every third
    row: 12 ms instead of 29 for 6M rows)."""
    n = len(values)
    ids = np.empty(n, np.int64)
    table = np.full(size, -1, np.int32)
    count = 0
    for i in range(n):
        slot = values[i] - low
        found = table[slot]
        if found < 0:
            found = count
            table[slot] = count
            count += 1
        ids[i] = found
    return ids, count


@kernel
def valid_span(values, valid):
    """(low, high, valid rows) of the valid ``values`` in one pass ((0, 0, 0) when none):
    numpy's all/min/max took a pass each, and a boolean index copied the valid ones first."""
    low, high, count = np.iinfo(np.int64).max, np.iinfo(np.int64).min, 0
    for i in range(len(values)):
        if valid[i]:
            v = values[i]
            low = min(low, v)
            high = max(high, v)
            count += 1
    if count == 0:
        return 0, 0, 0
    return low, high, count


@kernel
def add_joint_codes(combined, values, valid, low, width, first):
    """One key column's step of a joint range code, in place: ``combined * width + (value -
    low)``, NULL the last code of the column (``width - 1``); the first column sets
    ``combined``. One pass instead of numpy's subtract, mask, multiply and add, each
    allocating an array (TPC-H Q1's two flags: ~40 ms of its ~1 s)."""
    for i in range(len(values)):
        code = values[i] - low if valid[i] else width - 1
        combined[i] = code if first else combined[i] * width + code


@kernel
def range_lookup(values, valid, table, low):
    """Id of each row's key in a range_factorize table, -1 when absent or invalid."""
    n = len(values)
    ids = np.empty(n, np.int64)
    size = len(table)
    for i in range(n):
        ids[i] = -1
        if valid[i]:
            slot = values[i] - low
            if slot >= 0 and slot < size:
                ids[i] = table[slot]
    return ids


@kernel
def _same_bytes(a, a_start, a_end, b, b_start, b_end):
    if a_end - a_start != b_end - b_start:
        return False
    for k in range(a_end - a_start):
        if a[a_start + k] != b[b_start + k]:
            return False
    return True


#: the longest bytes ``pack_short_bytes`` packs: 7 bytes and a 3-bit length fill 59 bits
MAX_PACKED_BYTES = 7


@kernel
def pack_short_bytes(offsets, data, valid):
    """Each key of at most ``MAX_PACKED_BYTES`` bytes as one int64: its bytes from bit 3 up
    (the first byte lowest), its length in the low 3 bits -- distinct keys give distinct
    integers, so they number like any int64 key (0 under invalid rows). Short strings
    (flags, modes, country codes, priorities) then take the integer tables: one-character
    flags fall in a range of a few thousand values, numbered by an array, no hashing.
    Returns (packed, True), or (unfinished, False) at the first longer valid key."""
    n = len(offsets) - 1
    out = np.zeros(n, np.int64)
    for i in range(n):
        if valid[i]:
            start, end = offsets[i], offsets[i + 1]
            if end - start > MAX_PACKED_BYTES:
                return out, False
            packed = np.int64(end - start)
            for k in range(end - start):
                packed |= np.int64(data[start + k]) << (8 * k + 3)
            out[i] = packed
    return out, True


@kernel
def common_width(offsets):
    """The length of every value when all are equally long, else -1 (-1 for no rows too):
    one pass over the offsets. A column of one-byte flags is then its data buffer, a byte
    per row, with nothing to pack (keys.py ``one_byte_values``)."""
    n = len(offsets) - 1
    if n <= 0:
        return -1
    width = offsets[1] - offsets[0]
    differ = 0
    for i in range(2, n + 1):  # no early exit: the loop vectorizes (2.5x faster)
        differ |= (offsets[i] - offsets[i - 1]) ^ width
    return -1 if differ else width


@kernel
def longest_bytes(offsets):
    """The longest value's length (0 for none): one pass over the offsets, no temporary
    array of lengths."""
    longest = 0
    for i in range(len(offsets) - 1):
        length = offsets[i + 1] - offsets[i]
        if length > longest:
            longest = length
    return longest


@kernel
def bytes_factorize(offsets, data, valid):
    """(id per row or -1, slots, first row of each id, hashes of the ids' keys).

    A key is ``data[offsets[i]:offsets[i + 1]]``; an id's bytes stay in the caller's
    buffers, found through its first row."""
    n = len(offsets) - 1
    ids = np.empty(n, np.int64)
    size = _MIN_SLOTS
    slots = np.full(size, -1, np.int64)
    first = np.empty(8, np.int64)
    hashes = np.empty(8, np.uint64)
    count = 0
    for i in range(n):
        if not valid[i]:
            ids[i] = -1
            continue
        start, end = offsets[i], offsets[i + 1]
        h = hash_bytes(data, start, end)
        mask = size - 1
        slot = np.int64(h & np.uint64(mask))
        while True:
            found = slots[slot]
            if found == -1:
                if count == len(first):
                    first = np.concatenate((first, np.empty(len(first), np.int64)))
                    hashes = np.concatenate((hashes, np.empty(len(hashes), np.uint64)))
                first[count] = i
                hashes[count] = h
                ids[i] = count
                count += 1
                if 2 * count > size:
                    size *= 2
                    slots = _rehash(hashes, count, size)
                else:
                    slots[slot] = count - 1
                break
            row = first[found]
            if hashes[found] == h and _same_bytes(data, offsets[row], offsets[row + 1],
                                                  data, start, end):
                ids[i] = found
                break
            slot = (slot + 1) & mask
    return ids, slots, first[:count].copy(), hashes[:count].copy()


@kernel
def bytes_lookup(offsets, data, valid, slots, first, hashes, build_offsets, build_data):
    """Id of each probe row's bytes in a table factorized over the build buffers."""
    n = len(offsets) - 1
    ids = np.empty(n, np.int64)
    mask = len(slots) - 1
    for i in range(n):
        ids[i] = -1
        if not valid[i]:
            continue
        start, end = offsets[i], offsets[i + 1]
        h = hash_bytes(data, start, end)
        slot = np.int64(h & np.uint64(mask))
        while True:
            found = slots[slot]
            if found == -1:
                break
            row = first[found]
            if hashes[found] == h and _same_bytes(build_data, build_offsets[row],
                                                  build_offsets[row + 1], data, start, end):
                ids[i] = found
                break
            slot = (slot + 1) & mask
    return ids


@kernel
def group_rows(ids, groups):
    """(starts, counts, order): id g's rows are order[starts[g]:starts[g] + counts[g]], in
    row order; rows with id -1 are left out."""
    counts = np.zeros(groups, np.int64)
    for i in range(len(ids)):
        if ids[i] >= 0:
            counts[ids[i]] += 1
    starts = np.empty(groups, np.int64)
    total = 0
    for g in range(groups):
        starts[g] = total
        total += counts[g]
    order = np.empty(total, np.int64)
    cursor = starts.copy()
    for i in range(len(ids)):
        g = ids[i]
        if g >= 0:
            order[cursor[g]] = i
            cursor[g] += 1
    return starts, counts, order


@kernel
def expand(probe_ids, starts, counts, order):
    """(probe row, build row) for every build row sharing each probe row's id (-1: none),
    probe rows in order, each one's build rows in build row order."""
    total = 0
    for i in range(len(probe_ids)):
        if probe_ids[i] >= 0:
            total += counts[probe_ids[i]]
    probe_rows = np.empty(total, np.int64)
    build_rows = np.empty(total, np.int64)
    k = 0
    for i in range(len(probe_ids)):
        g = probe_ids[i]
        if g >= 0:
            start = starts[g]
            for j in range(counts[g]):
                probe_rows[k] = i
                build_rows[k] = order[start + j]
                k += 1
    return probe_rows, build_rows


@kernel
def match_counts(probe_ids, counts):
    """How many build rows each probe row matches."""
    out = np.zeros(len(probe_ids), np.int64)
    for i in range(len(probe_ids)):
        if probe_ids[i] >= 0:
            out[i] = counts[probe_ids[i]]
    return out
