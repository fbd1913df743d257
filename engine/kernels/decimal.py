"""Decimals of up to 18 digits as scaled int64: arithmetic with overflow detection.

A decimal128(p <= 18, s) value v is stored as the integer v * 10**s, which fits int64, in
the low word of its 16 bytes. Arrow computes decimal128 arithmetic on 128-bit words and then
needs a cast to DuckDB's result type (a 15-digit price times a 16-digit factor is typed
DECIMAL(18, 4), not Arrow's DECIMAL(32, 4)); on int64 both are one pass. A kernel reports
overflow (a result beyond its type's digits, or an int64 product that would wrap) instead of
wrapping, and the caller then takes Arrow's decimal128 path, which raises the SQL error or
computes the wider result.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.kernels.jit import kernel

#: the largest precision held exactly in int64 (10**18 < 2**63)
MAX_INT64_PRECISION = 18
#: |x * y| below this in double arithmetic means the int64 product does not wrap (the
#: double's relative error is far below the 2.4% margin to 2**63)
_SAFE_PRODUCT = 9.0e18


def fits_int64(t: pa.DataType) -> bool:
    return pa.types.is_decimal128(t) and t.precision <= MAX_INT64_PRECISION


def unscaled(values: pa.Array) -> np.ndarray:
    """The int64 unscaled values of a decimal128(p <= 18) array (arbitrary under NULLs)."""
    if len(values) == 0:
        return np.empty(0, dtype=np.int64)
    words = np.frombuffer(values.buffers()[1], dtype=np.int64)
    return words[2 * values.offset:2 * (values.offset + len(values)):2]


def words(values: pa.Array) -> np.ndarray:
    """A decimal128(p <= 18) array's 16-byte values as contiguous int64 words, the value of
    row i at ``2 * i`` (its sign word next): what the arithmetic and comparison kernels
    read. ``unscaled``'s strided view kept numba from vectorizing their loops (2-3x slower
    on TPC-H's batches)."""
    if len(values) == 0:
        return np.empty(0, dtype=np.int64)
    buffer = np.frombuffer(values.buffers()[1], dtype=np.int64)
    return buffer[2 * values.offset:2 * (values.offset + len(values))]


def values_fit_int64(values: pa.Array | pa.ChunkedArray) -> bool:
    """Whether every non-NULL value of a decimal128 array, whatever its precision, fits int64
    unscaled (its high word is the sign of its low word): the partial sums a final aggregate
    merges are typed DECIMAL(38, s) but rarely need more than 18 digits."""
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    for chunk in chunks:
        if len(chunk) == 0:
            continue
        words = np.frombuffer(chunk.buffers()[1], dtype=np.int64)
        low = words[2 * chunk.offset:2 * (chunk.offset + len(chunk)):2]
        high = words[2 * chunk.offset + 1:2 * (chunk.offset + len(chunk)):2]
        differs = high != (low >> 63)
        if chunk.null_count:
            differs &= np.asarray(chunk.is_valid(), dtype=bool)
        if differs.any():
            return False
    return True


def approximate_unscaled(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Each decimal128 value's unscaled integer as the nearest-ish double (``high * 2**64 +
    low``; arbitrary under NULLs): a shadow that tells a 128-bit sum that wrapped (off by
    2**128) or passed 38 digits from a right one, at any precision."""
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    parts = [np.empty(0, dtype=np.float64)]
    for chunk in chunks:
        if len(chunk) == 0:
            continue
        words = np.frombuffer(chunk.buffers()[1], dtype=np.int64)[
            2 * chunk.offset:2 * (chunk.offset + len(chunk))]
        parts.append(words[1::2].astype(np.float64) * 2.0**64 +
                     words[0::2].view(np.uint64).astype(np.float64))
    return np.concatenate(parts)


def sums_overflow(sums: pa.Array | pa.ChunkedArray, shadow: np.ndarray) -> bool:
    """Whether any of a 128-bit decimal SUM's results is wrong: wrapped (2**128 away from its
    double ``shadow``, the same sum of ``approximate_unscaled`` values) or beyond 38 digits,
    which DuckDB reports as an overflow and Arrow's decimal sum does not check."""
    approx = approximate_unscaled(sums)
    valid = ~np.asarray(sums.is_null(), dtype=bool) if sums.null_count else \
        np.ones(len(approx), dtype=bool)
    with np.errstate(invalid="ignore"):
        if np.any(valid & ~(np.abs(approx - shadow) < 2.0**100)):
            return True
        near = valid & (np.abs(approx) >= 9.9e37)
    if not near.any():
        return False
    values = sums.take(pa.array(np.flatnonzero(near), pa.int64()))
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    words = np.frombuffer(values.buffers()[1], dtype=np.int64)[
        2 * values.offset:2 * (values.offset + len(values))]
    # the few totals this close to the limit, exactly, as Python integers
    return any(abs((int(high) << 64) + int(low)) > 10**38 - 1
               for low, high in zip(words[0::2].view(np.uint64), words[1::2]))


def from_unscaled(ints: np.ndarray, valid: np.ndarray | None, to: pa.DataType) -> pa.Array:
    """A decimal128 array of type ``to`` whose unscaled values are ``ints``."""
    return from_words(to_words(np.asarray(ints, dtype=np.int64)), valid, to)


@kernel
def to_words(ints):
    """decimal128's little-endian 16-byte words: the value, then its sign extension."""
    words = np.empty(2 * len(ints), np.int64)
    for i in range(len(ints)):
        words[2 * i] = ints[i]
        words[2 * i + 1] = ints[i] >> 63
    return words


def from_words(words: np.ndarray, valid: np.ndarray | None, to: pa.DataType) -> pa.Array:
    """A decimal128 array of type ``to`` over ``to_words``-style words (``valid`` None: no
    NULLs), no copy of the words."""
    n = len(words) // 2
    validity, null_count = None, 0
    if valid is not None and not valid.all():
        validity = pa.py_buffer(np.packbits(valid.astype(np.uint8), bitorder="little"))
        null_count = int(n - np.count_nonzero(valid))
    return pa.Array.from_buffers(to, n, [validity, pa.py_buffer(words)], null_count=null_count)


@kernel
def magnitude(values, step, n):
    """The largest |value| of an operand's ``n`` rows (step 0: its one value), as a double
    rounded up a little: a bound on what a product or sum of such values can reach. Rows
    under NULLs count too (their values are arbitrary, so the bound is only safe, not tight)."""
    low = values[0] if len(values) else 0
    high = low
    if step:
        for i in range(n):
            v = values[2 * i]
            low = min(low, v)
            high = max(high, v)
    return max(-float(low), float(high)) * (1.0 + 1e-9)


@kernel
def _zero_nulls(out, valid):
    """Zero the words of the rows under NULLs (empty ``valid``: none), after an unchecked
    loop that computed every row: a test per row kept that loop from vectorizing."""
    for i in range(len(valid)):
        if not valid[i]:
            out[2 * i] = 0
            out[2 * i + 1] = 0


@kernel
def add_scaled(a, a_step, a_factor, b, b_step, b_factor, valid, bound):
    """(a * a_factor + b * b_factor per row as decimal128 words -- the value, then its sign
    -- no overflow). An operand is ``words`` of a decimal array (``a_step`` 1: row i's value
    at ``2 * i``) or, ``a_step`` 0, a one-element array holding a constant's value;
    ``valid`` empty means every row is (no mask to read or make); ``bound`` 0 means no
    digit limit. The caller makes sure the rescaled operands fit int64 (from their types).
    Writing the words here saves the separate ``to_words`` pass over the result.

    When the operands' magnitudes bound every result below ``bound`` (TPC-H's ``1 - l_discount``
    and ``1 + l_tax`` always), no row can overflow: a loop without checks, which vectorizes,
    runs instead of the checked one (2-2.5x faster on TPC-H Q1's batches)."""
    n = max(len(a) // 2 * a_step, len(b) // 2 * b_step) if len(valid) == 0 else len(valid)
    limit = float(bound) if bound else 9.0e18
    reach = magnitude(a, a_step, n) * abs(float(a_factor)) + \
        magnitude(b, b_step, n) * abs(float(b_factor))
    if reach < limit * 0.999 and (a_step or b_step):  # both constant: the checked loop
        out = np.empty(2 * n, np.int64)
        if a_step and b_step:
            for i in range(n):
                r = a[2 * i] * a_factor + b[2 * i] * b_factor
                out[2 * i] = r
                out[2 * i + 1] = r >> 63
        elif a_step:
            c = b[0] * b_factor
            for i in range(n):
                r = a[2 * i] * a_factor + c
                out[2 * i] = r
                out[2 * i + 1] = r >> 63
        else:
            c = a[0] * a_factor
            for i in range(n):
                r = c + b[2 * i] * b_factor
                out[2 * i] = r
                out[2 * i + 1] = r >> 63
        _zero_nulls(out, valid)
        return out, True
    masked = len(valid) > 0
    out = np.zeros(2 * n, np.int64)
    for i in range(n):
        if masked and not valid[i]:
            continue
        r = a[2 * i * a_step] * a_factor + b[2 * i * b_step] * b_factor
        if bound and (r >= bound or r <= -bound):
            return out, False
        out[2 * i] = r
        out[2 * i + 1] = r >> 63
    return out, True


@kernel
def multiply_scaled(a, a_step, b, b_step, valid, bound, check_product):
    """(a * b per row as decimal128 words, no overflow); see add_scaled, whose unchecked
    loop this shares when the operands' magnitudes keep every product below ``bound`` and
    int64's range (TPC-H's prices times discount factors)."""
    n = max(len(a) // 2 * a_step, len(b) // 2 * b_step) if len(valid) == 0 else len(valid)
    limit = min(float(bound), _SAFE_PRODUCT) if bound else _SAFE_PRODUCT
    if magnitude(a, a_step, n) * magnitude(b, b_step, n) < limit * 0.999 and \
            (a_step or b_step):
        out = np.empty(2 * n, np.int64)
        if a_step and b_step:
            for i in range(n):
                r = a[2 * i] * b[2 * i]
                out[2 * i] = r
                out[2 * i + 1] = r >> 63
        elif a_step:
            c = b[0]
            for i in range(n):
                r = a[2 * i] * c
                out[2 * i] = r
                out[2 * i + 1] = r >> 63
        else:
            c = a[0]
            for i in range(n):
                r = c * b[2 * i]
                out[2 * i] = r
                out[2 * i + 1] = r >> 63
        _zero_nulls(out, valid)
        return out, True
    masked = len(valid) > 0
    out = np.zeros(2 * n, np.int64)
    for i in range(n):
        if masked and not valid[i]:
            continue
        x = a[2 * i * a_step]
        y = b[2 * i * b_step]
        if check_product and abs(float(x) * float(y)) >= _SAFE_PRODUCT:
            return out, False
        r = x * y
        if bound and (r >= bound or r <= -bound):
            return out, False
        out[2 * i] = r
        out[2 * i + 1] = r >> 63
    return out, True


#: comparison operators by their code in ``compare_scaled``
COMPARISONS = {"eq": 0, "neq": 1, "lt": 2, "lte": 3, "gt": 4, "gte": 5}


@kernel
def _compare_rows(a, b, b_step, n, base, flags):
    """flags[i] = a's row i == / < / <= b's (``base`` 0 / 2 / 3); a is ``words``, b too or,
    b_step 0, a one-element constant: one plain loop each."""
    if b_step:
        if base == 0:
            for i in range(n):
                flags[i] = a[2 * i] == b[2 * i]
        elif base == 2:
            for i in range(n):
                flags[i] = a[2 * i] < b[2 * i]
        else:
            for i in range(n):
                flags[i] = a[2 * i] <= b[2 * i]
    else:
        c = b[0]
        if base == 0:
            for i in range(n):
                flags[i] = a[2 * i] == c
        elif base == 2:
            for i in range(n):
                flags[i] = a[2 * i] < c
        else:
            for i in range(n):
                flags[i] = a[2 * i] <= c


@kernel
def compare_scaled(a, a_step, b, b_step, n, op):
    """``a op b`` per row of two equally scaled decimals' int64 values, as Arrow's boolean
    bits (little-endian, the first row lowest). Arrow compares decimal128 on 128-bit words
    (about 9x a date comparison); Q6's and Q19's ranges on discount and quantity are these.
    ``op`` is a ``COMPARISONS`` code; operands and steps as in add_scaled.

    The rows are compared into one byte each by a loop per operator and operand shape (a
    constant first is mirrored to come second), which vectorizes, then packed 8 bytes to a
    bit byte: a single loop that tested the operator per row and shifted each result into
    place ran 5-8x slower."""
    if a_step == 0:  # the constant second: x op y is y mirror(op) x
        a, b = b, a
        a_step, b_step = b_step, a_step
        op = (0, 1, 4, 5, 2, 3)[op]
    # gt, gte and neq are the negations of lte, lt and eq
    base = (0, 0, 2, 3, 3, 2)[op]
    negate = op == 1 or op == 4 or op == 5
    flags = np.empty(n, np.uint8)
    _compare_rows(a, b, b_step, n, base, flags)
    out = np.zeros((n + 7) // 8, np.uint8)
    full = n - n % 8
    for start in range(0, full, 8):
        byte = 0
        for k in range(8):
            byte |= np.int64(flags[start + k]) << k
        out[start >> 3] = np.uint8(byte ^ (255 if negate else 0))
    if full < n:
        byte = 0
        for k in range(n - full):
            byte |= np.int64(flags[full + k] ^ (1 if negate else 0)) << k
        out[full >> 3] = np.uint8(byte)
    return out


#: below this an integer converts to double exactly
_EXACT_DOUBLE_INT = 2 ** 53
#: 2**64 - 1: DuckDB converts a HUGEINT to floating point as ``lower + upper * (2**64 - 1)``
_UINT64_MAX = 2.0 ** 64 - 1


def to_double(values: pa.Array) -> np.ndarray:
    """The nearest double to each value of a decimal128 array (arbitrary under NULLs), as
    DuckDB's CAST(DECIMAL AS DOUBLE) gives it. ``unscaled / 10**scale`` is one correctly
    rounded division while both operands are exact doubles (|unscaled| <= 2**53, scale <=
    22); Arrow's own cast is off by an ulp for about 1 value in 40 of 18 digits. Wider
    values go through their decimal text, which Arrow parses to the nearest double."""
    n = len(values)
    if n == 0:
        return np.empty(0, dtype=np.float64)
    words = np.frombuffer(values.buffers()[1], dtype=np.int64)[
        2 * values.offset:2 * (values.offset + n)]
    low, high = words[0::2], words[1::2]
    scale = values.type.scale
    result = low.astype(np.float64) / (10.0 ** scale)
    exact = (high == (low >> 63)) & (np.abs(low) <= _EXACT_DOUBLE_INT) & (scale <= 22)
    if values.null_count:
        exact |= ~np.asarray(values.is_valid(), dtype=bool)
    if not exact.all():
        rows = np.flatnonzero(~exact)
        text = pc.cast(values.take(pa.array(rows, pa.int64())), pa.string())
        result[rows] = np.asarray(pc.cast(text, pa.float64()).to_numpy(zero_copy_only=False))
    return result


def average(sums: pa.Array, counts: pa.Array, mode: str) -> pa.Array:
    """AVG from its exact sum and count, divided once as DuckDB (2.0) divides; NULL where
    the count is 0. ``sums``: decimal128 of any precision (the AVG argument's scale);
    ``counts``: int64.

    One division of the exact total makes the mean independent of how rows were split into
    partitions and batches; dividing each partial sum, or summing doubles, is not (AVG of
    seven 3.33 came out 3.3300000000000005 at some partition counts, 3.33 at others).
    DuckDB's own rounding depends on its plan, and ``mode`` follows it:

    - "double sum": an ungrouped AVG without FILTER or DISTINCT, which DuckDB computes as
      CAST(SUM(x) AS DOUBLE) / COUNT(x): the sum to the nearest double, then one division;
    - "long double": its AVG aggregate for INTEGER, BIGINT and DECIMAL(p > 4), a HUGEINT
      sum divided by ``count * 10**scale`` in long double (``np.longdouble`` is the same C
      type, so the rounding is DuckDB's on the same platform);
    - "double": the same for SMALLINT, TINYINT and DECIMAL(p <= 4), whose int64 sum is
      divided in double.
    """
    n = len(sums)
    count = np.asarray(counts.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if mode == "double sum":
            result = to_double(sums) / count.astype(np.float64)
        else:
            words = np.frombuffer(sums.buffers()[1], dtype=np.uint64)[
                2 * sums.offset:2 * (sums.offset + n)] if n else np.empty(0, np.uint64)
            lower, upper = words[0::2], words[1::2].view(np.int64)
            signed = lower.view(np.int64)
            real = np.longdouble if mode == "long double" else np.float64
            # Hugeint::Cast: exact below 2**64 in long double (a 64-bit mantissa); upper =
            # -1 (a negative value that fits 64 bits) taken as -(2**64 - 1 - lower) - 1
            value = np.where(
                upper == 0, lower.astype(real),
                np.where(upper == -1, -(np.uint64(2 ** 64 - 1) - lower).astype(real) - real(1),
                         lower.astype(real) + upper.astype(real) * real(_UINT64_MAX)))
            if real is np.float64:  # the int64 state of the double path: double(int64)
                value = np.where(upper == (signed >> 63), signed.astype(np.float64), value)
            divisor = count.astype(real) * real(float(10 ** sums.type.scale))
            result = (value / divisor).astype(np.float64)
    valid = count > 0
    if sums.null_count:
        valid &= np.asarray(sums.is_valid(), dtype=bool)
    return pa.array(result, pa.float64(), mask=~valid)
