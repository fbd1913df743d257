"""Integer keys and sort permutations for windows over unsorted input.

A window only needs the rows of each partition together and ordered by the ORDER BY keys;
which partition comes first does not matter. So nothing here compares strings row by row:

    partition keys ── dictionary_encode ──▶ codes 0..k-1        (one hash pass, any type)
    order keys     ── sort_ranks ─────────▶ uint64 ranks        (ints: value - min; floats:
                                                                 order-preserving bit map;
                                                                 others: rank of the sorted
                                                                 dictionary)
    (codes, ranks) ── radix_argsort ──────▶ permutation         (LSD radix, <= 16-bit digits,
                                                                 each digit numpy's O(n)
                                                                 stable radix argsort)

The ranks encode DESC and NULLS FIRST/LAST, and DuckDB's float order (-0.0 == 0.0, NaN
above every number, all NaNs equal), so the permutation sorts exactly like
``ORDER BY (partition keys), order keys``, up to the order of the partitions themselves.
Ties keep their input order (the sort is stable).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import NotSupportedError
from plansight.engine.exec.concurrent import pieces_for, run_concurrently
from plansight.engine.kernels.placement import place_distinct

_SIGN = np.uint64(1 << 63)
_DIGIT_BITS = 16
_MAX_RADIX_PASSES = 5  # beyond this one comparison sort of a 64-bit word is cheaper


def _flat(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks == 1:
            return values.chunk(0)
        return values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    return values


def _bits(largest: int) -> int:
    return max(1, int(largest).bit_length())


def _integer_like(typ: pa.DataType) -> bool:
    """Whether ``_integer_view`` takes values of type ``typ``."""
    return pa.types.is_boolean(typ) or pa.types.is_integer(typ) or pa.types.is_date(typ) or \
        pa.types.is_timestamp(typ) or pa.types.is_time(typ) or pa.types.is_duration(typ)


def _integer_view(values: pa.Array) -> np.ndarray | None:
    """int64 / uint64 numbers ordered like ``values`` (NULL slots hold garbage), or None."""
    typ = values.type
    if pa.types.is_boolean(typ):
        return values.cast(pa.uint8()).fill_null(0).to_numpy().astype(np.int64)
    if pa.types.is_integer(typ):
        numbers = (values.fill_null(0) if values.null_count else values).to_numpy()
        return numbers if numbers.dtype == np.uint64 else numbers.astype(np.int64, copy=False)
    if (pa.types.is_date(typ) or pa.types.is_timestamp(typ) or pa.types.is_time(typ)
            or pa.types.is_duration(typ)):
        storage = pa.int32() if typ.bit_width == 32 else pa.int64()
        return values.view(storage).fill_null(0).to_numpy().astype(np.int64, copy=False)
    return None


def _float_keys(values: pa.Array) -> np.ndarray:
    """uint64 keys ordered like DuckDB orders doubles: -0.0 == 0.0, NaN above +inf."""
    if pa.types.is_float16(values.type):
        values = values.cast(pa.float32())
    numbers = values.fill_null(0.0).to_numpy().astype(np.float64) + 0.0  # -0.0 -> 0.0
    numbers[np.isnan(numbers)] = np.nan  # one canonical (positive) NaN
    bits = numbers.view(np.uint64)
    negative = (bits & _SIGN) != 0
    return np.where(negative, ~bits, bits | _SIGN)


def _unsigned_into(numbers: np.ndarray, out: np.ndarray) -> None:
    """Order-preserving uint64 of int64 or uint64 numbers, written into ``out``."""
    if numbers.dtype == np.uint64:
        out[:] = numbers
    else:
        np.bitwise_xor(numbers.view(np.uint64), _SIGN, out=out)


def sort_ranks(values: pa.Array | pa.ChunkedArray, descending: bool = False,
               nulls_first: bool = False) -> tuple[np.ndarray, int]:
    """uint64 ranks whose ascending order is ``ORDER BY values [DESC] NULLS FIRST|LAST``.

    Equal values (NULL with NULL, NaN with NaN, -0.0 with 0.0) get equal ranks. Returns the
    ranks and the number of bits they use.

    Example:
        >>> ranks, bits = sort_ranks(pa.array([5, None, -2, 5]), descending=True)
        >>> ranks.tolist(), bits
        ([0, 8, 7, 0], 4)
    """
    if isinstance(values, pa.ChunkedArray) and values.null_count == 0 and \
            _integer_like(values.type):
        # chunk by chunk into one array: no combined copy of the column first
        keys = np.empty(len(values), dtype=np.uint64)
        at = 0
        for chunk in values.chunks:
            _unsigned_into(_integer_view(chunk), keys[at:at + len(chunk)])
            at += len(chunk)
        return _ranks_of(keys, None, descending, nulls_first)
    values = _flat(values)
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    n = len(values)
    valid = None
    if values.null_count:
        valid = values.is_valid().to_numpy(zero_copy_only=False)
    if pa.types.is_null(values.type):
        return np.zeros(n, dtype=np.uint64), 1
    numbers = _integer_view(values)
    if numbers is not None:
        keys = np.empty(n, dtype=np.uint64)
        _unsigned_into(numbers, keys)
    elif pa.types.is_floating(values.type):
        keys = _float_keys(values)
    else:
        keys = _dictionary_ranks(values)
    return _ranks_of(keys, valid, descending, nulls_first)


def _ranks_of(keys: np.ndarray, valid: np.ndarray | None, descending: bool,
              nulls_first: bool) -> tuple[np.ndarray, int]:
    """``sort_ranks`` from order-preserving uint64 ``keys`` (a fresh array, overwritten)."""
    n = len(keys)
    if valid is not None:
        if valid.any():
            low, high = keys[valid].min(), keys[valid].max()
        else:
            low = high = np.uint64(0)
    else:
        low, high = (keys.min(), keys.max()) if n else (np.uint64(0), np.uint64(0))
    top = np.uint64(high - low)
    if valid is not None and top == np.uint64(2**64 - 1):  # no spare value for NULL
        dense = np.unique(keys[valid], return_inverse=True)[1].astype(np.uint64)
        keys = _scatter(dense.ravel(), valid)
        low, top = np.uint64(0), np.uint64(dense.max())
    ranks = np.subtract(keys, low, out=keys)  # wraps only in NULL slots, overwritten below
    if descending:
        ranks = np.subtract(top, ranks, out=ranks)
    if valid is not None:
        if nulls_first:
            ranks = np.where(valid, ranks + np.uint64(1), np.uint64(0))
        else:
            ranks = np.where(valid, ranks, top + np.uint64(1))
        top = top + np.uint64(1)
    return ranks.astype(np.uint64, copy=False), _bits(int(top))


def _scatter(compact: np.ndarray, valid: np.ndarray) -> np.ndarray:
    full = np.zeros(len(valid), dtype=compact.dtype)
    full[valid] = compact
    return full


def _dictionary_ranks(values: pa.Array) -> np.ndarray:
    """Dense ranks through the sorted dictionary: only the distinct values are compared."""
    try:
        encoded = pc.dictionary_encode(values)
        dictionary = encoded.dictionary
        order = pc.sort_indices(dictionary).to_numpy()
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as e:
        raise NotSupportedError(
            f"window ORDER BY key of type {values.type} is not supported") from e
    rank_of = np.empty(len(dictionary), dtype=np.uint64)
    rank_of[order] = np.arange(len(dictionary), dtype=np.uint64)
    indices = encoded.indices.fill_null(0).to_numpy().astype(np.int64, copy=False)
    return rank_of[indices] if len(dictionary) else np.zeros(len(values), dtype=np.uint64)


def partition_codes(keys: list[pa.Array | pa.ChunkedArray], num_rows: int, workers: int = 1
                    ) -> tuple[np.ndarray, int]:
    """Dense int64 codes 0..k-1 of the distinct tuples of ``keys`` (NULL is a value).

    Rows get equal codes exactly when all their keys are equal (NULL equals NULL, NaN
    equals NaN, -0.0 equals 0.0), as rows that a sort by the keys would put into one run.
    Returns the codes and k. Hashed keys are encoded in up to ``workers`` row ranges at
    once, their dictionaries merged after (the same partitions; NULL's code may differ).

    Example:
        >>> codes, k = partition_codes([pa.array(["x", None, "x", "y"])], 4)
        >>> codes.tolist(), k
        ([0, 1, 0, 2], 3)
    """
    if not keys:
        return np.zeros(num_rows, dtype=np.int64), 1 if num_rows else 0
    codes, count = _single_codes(keys[0], workers)
    for key in keys[1:]:
        more, more_count = _single_codes(key, workers)
        if count * more_count >= 2**62:
            codes, count = _densify(codes)
        codes = codes * more_count + more
        count *= more_count
        if count > 2 * max(num_rows, 1):
            codes, count = _densify(codes)
    return codes, count


def _densify(codes: np.ndarray) -> tuple[np.ndarray, int]:
    encoded = pc.dictionary_encode(pa.array(codes))
    return encoded.indices.to_numpy().astype(np.int64), len(encoded.dictionary)


def _single_codes(values: pa.Array | pa.ChunkedArray, workers: int
                  ) -> tuple[np.ndarray, int]:
    typ = values.type
    if pa.types.is_dictionary(typ):
        values = _flat(values).dictionary_decode()
        typ = values.type
    if pa.types.is_null(typ):
        return np.zeros(len(values), dtype=np.int64), 1
    if pa.types.is_integer(typ) or pa.types.is_boolean(typ) or pa.types.is_floating(typ) or \
            pa.types.is_date(typ) or pa.types.is_timestamp(typ) or pa.types.is_time(typ) or \
            pa.types.is_duration(typ):
        # ranks are already equal exactly for equal values; small ranges need no hashing
        flat = _flat(values)
        ranks, bits = sort_ranks(flat)
        if bits <= 20:
            return ranks.astype(np.int64), 1 << bits
        return _densify(ranks.view(np.int64))
    try:
        pieces = pieces_for(len(values), workers)
        if pieces > 1:
            return _codes_in_pieces(values, pieces)
        encoded = pc.dictionary_encode(values, null_encoding="encode")
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as e:
        raise NotSupportedError(
            f"window PARTITION BY key of type {typ} is not supported") from e
    if isinstance(encoded, pa.DictionaryArray):
        return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), \
            len(encoded.dictionary)
    chunks = encoded.chunks
    if not chunks:
        return np.zeros(0, dtype=np.int64), 0
    sizes = {len(c.dictionary) for c in chunks}
    if len(sizes) != 1:  # not one shared dictionary: make it one
        encoded = encoded.unify_dictionaries()
        chunks = encoded.chunks
    indices = [c.indices.to_numpy(zero_copy_only=False) for c in chunks]
    return np.concatenate(indices).astype(np.int64), len(chunks[-1].dictionary)


def _codes_in_pieces(values: pa.Array | pa.ChunkedArray, pieces: int
                     ) -> tuple[np.ndarray, int]:
    """Dense codes of ``values`` hashed in ``pieces`` row ranges at once, one thread each
    (hashing wide keys is the costliest step of a window over unsorted input).

    Only the pieces' dictionaries are merged (one encode of their concatenation: a few
    distinct keys per piece), then every row's piece code maps to its merged code through
    an array. Unifying the encoded chunks instead (``unify_dictionaries``) re-hashes one
    dictionary per input batch -- for 300 batches of 16,666 keys that was 3x the CPU of the
    encoding itself. The merge numbers the values in order of first appearance, as one pass
    would; NULL takes the last code."""
    bounds = [len(values) * i // pieces for i in range(pieces + 1)]
    encoded = run_concurrently([
        lambda start=start, end=end: _piece_codes(values.slice(start, end - start))
        for start, end in zip(bounds, bounds[1:])])
    merged = pc.dictionary_encode(pa.concat_arrays([piece[0] for piece in encoded]))
    count = len(merged.dictionary)
    to_merged = merged.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    codes = np.empty(len(values), dtype=np.int64)
    has_null = False
    first = 0
    for (dictionary, indices, nulls), start in zip(encoded, bounds):
        size = len(dictionary)
        # a piece's NULL rows hold code ``size``: the slot after its dictionary maps to NULL's
        lookup = np.append(to_merged[first:first + size], count)
        # mode="clip" (indices are in range): "raise" buffers the output, twice the time
        np.take(lookup, indices, out=codes[start:start + len(indices)], mode="clip")
        has_null = has_null or nulls
        first += size
    return codes, count + (1 if has_null else 0)


def _piece_codes(values: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, np.ndarray, bool]:
    """(dictionary, index per row -- NULL rows ``len(dictionary)``, any NULL) of one
    piece."""
    encoded = pc.dictionary_encode(values)
    chunks = encoded.chunks if isinstance(encoded, pa.ChunkedArray) else [encoded]
    if not chunks:
        return pa.array([], values.type), np.zeros(0, dtype=np.int64), False
    if len({len(c.dictionary) for c in chunks}) != 1:  # not one shared dictionary: make it one
        chunks = pa.chunked_array(chunks, type=chunks[0].type).unify_dictionaries().chunks
    dictionary = chunks[-1].dictionary
    indices = pa.chunked_array([c.indices for c in chunks], type=chunks[0].type.index_type)
    nulls = indices.null_count > 0
    if nulls:
        indices = indices.fill_null(len(dictionary))
    return dictionary, indices.to_numpy(), nulls



def radix_argsort(keys: list[tuple[np.ndarray, int]]) -> np.ndarray:
    """Stable permutation sorting rows by ``keys`` (most significant first).

    Each key is ``(uint64 or int64 values >= 0, bits)``. Keys are packed into as few 64-bit
    words as fit, then sorted least significant digit first with numpy's stable argsort,
    which is a radix sort for 8- and 16-bit digits (O(n) per digit).

    Example:
        >>> codes = np.array([1, 0, 1, 0]); ranks = np.array([5, 9, 2, 9])
        >>> radix_argsort([(codes, 1), (ranks, 4)]).tolist()
        [1, 3, 2, 0]
    """
    words: list[tuple[np.ndarray, int]] = []
    for values, bits in keys:
        values = np.asarray(values).astype(np.uint64, copy=False)
        if words and words[-1][1] + bits <= 64:
            word, used = words[-1]
            words[-1] = ((word << np.uint64(bits)) | values, used + bits)
        else:
            words.append((values, bits))
    if not words:
        raise ValueError("radix_argsort needs at least one key")
    n = len(words[0][0])
    passes = sum(-(-bits // _DIGIT_BITS) for _, bits in words)
    if len(words) == 1 and passes > _MAX_RADIX_PASSES:
        return np.argsort(words[0][0], kind="stable")
    permutation: np.ndarray | None = None
    for word, bits in reversed(words):
        digits = -(-bits // _DIGIT_BITS)
        width = -(-bits // digits)
        mask = np.uint64((1 << width) - 1)
        current = word if permutation is None else word[permutation]
        dtype = np.uint8 if width <= 8 else np.uint16
        for d in range(digits):
            digit = ((current >> np.uint64(d * width)) & mask).astype(dtype)
            order = np.argsort(digit, kind="stable")
            permutation = order if permutation is None else permutation[order]
            if d + 1 < digits:
                current = current[order]
    assert permutation is not None
    return permutation if n else np.zeros(0, dtype=np.int64)


def sort_permutation(keys: list[tuple[np.ndarray, int]]) -> np.ndarray:
    """Stable permutation sorting rows by ``keys`` (most significant first), each key given as
    ``(values in 0..cardinality-1, cardinality)``.

    When the keys combine into a small space (at most a few times the row count) and no two
    rows share a key — e.g. a per-partition sequence number — every row's sorted position is
    known without sorting: scatter row numbers into the key space and read the occupied
    slots in order (O(n + space)). Otherwise, or on the first tie, LSD radix sort.

    Example:
        >>> sort_permutation([(np.array([1, 0, 1, 0]), 2), (np.array([5, 9, 2, 8]), 10)]).tolist()
        [3, 1, 2, 0]
    """
    return sort_permutation_unique(keys)[0]


def sort_permutation_unique(keys: list[tuple[np.ndarray, int]]) -> tuple[np.ndarray, bool]:
    """``sort_permutation`` and whether it found the key tuples all distinct on the way (True
    only when the rows were placed directly; False means "not known", ties or not).

    Example:
        >>> perm, unique = sort_permutation_unique([(np.array([1, 0, 1]), 2),
        ...                                         (np.array([0, 0, 1]), 2)])
        >>> perm.tolist(), unique
        ([1, 0, 2], True)
    """
    n = len(keys[0][0]) if keys else 0
    space = 1
    for _, cardinality in keys:
        space *= max(int(cardinality), 1)
    if keys and space <= 4 * n + 1024:
        # all keys but the last combine into one major key; the kernel adds the last
        major = _signed(keys[0][0])
        for values, cardinality in keys[1:-1]:
            major = major * int(cardinality) + _signed(values)
        minor, cardinality = (_signed(keys[-1][0]), int(keys[-1][1])) if len(keys) > 1 \
            else (major, 0)
        slots = np.full(space, -1, dtype=np.int32 if n < 2**31 - 1 else np.int64)
        permutation, placed = place_distinct(major, minor, cardinality, slots)
        if placed:
            return permutation, True
        combined = major * cardinality + minor if cardinality else major
        return radix_argsort([(combined, _bits(space - 1))]), False
    return radix_argsort([(values, _bits(max(int(cardinality) - 1, 0)))
                          for values, cardinality in keys]), False


def _signed(values: np.ndarray) -> np.ndarray:
    """Small non-negative keys as int64 (uint64 ranks are viewed, not copied)."""
    values = np.asarray(values)
    if values.dtype == np.uint64:
        return values.view(np.int64)
    return values.astype(np.int64, copy=False)


def run_starts(sorted_codes: np.ndarray) -> np.ndarray:
    """Start of every run of equal values in ``sorted_codes``, plus its length.

    Example:
        >>> run_starts(np.array([3, 3, 0, 7, 7])).tolist()
        [0, 2, 3, 5]
    """
    n = len(sorted_codes)
    if n == 0:
        return np.zeros(1, dtype=np.int64)
    change = np.flatnonzero(sorted_codes[1:] != sorted_codes[:-1]) + 1
    return np.concatenate(([0], change, [n])).astype(np.int64)


def reverse_within_runs(permutation: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``permutation`` with every run ``[starts[k], starts[k+1])`` reversed (vectorized).

    Example:
        >>> reverse_within_runs(np.array([4, 2, 0, 1, 3]), np.array([0, 3, 5])).tolist()
        [0, 2, 4, 3, 1]
    """
    n = len(permutation)
    sizes = np.diff(starts)
    first = np.repeat(starts[:-1], sizes)
    last = np.repeat(starts[1:] - 1, sizes)
    positions = np.arange(n, dtype=np.int64)
    return permutation[first + last - positions]
