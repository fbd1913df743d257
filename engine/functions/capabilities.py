"""What each aggregate and window function can do, as data.

Operators and rules ask a function's ``Capabilities`` instead of comparing its name with a
list of their own (DataFusion's ``AggregateUDFImpl`` / ``PartitionEvaluator`` flags are the
model), so adding a function, or teaching an old one a trick, touches ``functions/`` only:

    decomposable    state splits into partials merged later: two-phase aggregation, spilled
                    aggregate states, folding a window partition larger than memory
    order_free      the value over a frame does not depend on the order of the frame's rows:
                    a whole-partition frame needs no ORDER BY
    frameless       ignores the frame clause (ranking, lag/lead)
    streams         BoundedWindowAggExec can emit it as soon as a row's frame is complete:
                    "running" (an aggregate carried over dropped rows), "rank" (counted per
                    peer group), "offset" (lag/lead a constant number of rows away) or
                    "frame_value" (first/last/nth value inside the frame)
    broadcasts      a whole-partition value computed once per partition on group codes
                    (window_hash_agg) and broadcast to its rows
    reads_order     the kernel reads the ORDER BY values (peer groups), not only the row order
    count_like      over no rows it is 0, not NULL (the COUNT bug of decorrelation)

Example:
    >>> capabilities("sum").decomposable, capabilities("rank").frameless
    (True, True)
    >>> capabilities("median").decomposable, capabilities("lag").streams
    (False, 'offset')
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Capabilities:
    name: str
    decomposable: bool = False
    order_free: bool = False
    frameless: bool = False
    streams: str | None = None
    broadcasts: bool = False
    reads_order: bool = True
    count_like: bool = False


def _define(*entries: Capabilities) -> dict[str, Capabilities]:
    return {entry.name: entry for entry in entries}


_RUNNING = dict(decomposable=True, order_free=True, streams="running", broadcasts=True)
_VARIANCE = dict(order_free=True)

FUNCTIONS: dict[str, Capabilities] = _define(
    # aggregates
    Capabilities("count_star", count_like=True, **_RUNNING),
    Capabilities("count", count_like=True, **_RUNNING),
    Capabilities("sum", **_RUNNING),
    Capabilities("avg", **_RUNNING),
    Capabilities("mean", decomposable=True),
    Capabilities("min", **_RUNNING),
    Capabilities("max", **_RUNNING),
    Capabilities("bool_and", decomposable=True, order_free=True),
    Capabilities("bool_or", decomposable=True, order_free=True),
    Capabilities("every", decomposable=True),
    Capabilities("any_value", decomposable=True),
    Capabilities("first", decomposable=True),
    Capabilities("arbitrary", decomposable=True),
    # bit_and and bit_or are idempotent (a sparse table answers frames); bit_xor is its own
    # inverse (prefix xors answer frames)
    *(Capabilities(name, decomposable=True, order_free=True) for name in (
        "bit_and", "bit_or", "bit_xor")),
    # two-variable statistics: a co-moment state, merged with Chan's formula
    Capabilities("regr_count", decomposable=True, order_free=True, count_like=True),
    *(Capabilities(name, decomposable=True, order_free=True) for name in (
        "corr", "covar_pop", "covar_samp", "regr_slope", "regr_intercept", "regr_r2",
        "regr_avgx", "regr_avgy", "regr_sxx", "regr_syy", "regr_sxy")),
    *(Capabilities(name, **_VARIANCE) for name in (
        "stddev", "stddev_samp", "stddev_pop", "var_samp", "variance", "var_pop")),
    *(Capabilities(name) for name in (
        "string_agg", "group_concat", "listagg", "median", "quantile_cont", "quantile_disc",
        "quantile", "product", "list", "array_agg")),
    # ranking: the frame is ignored; row_number and ntile need only the rows' order
    Capabilities("row_number", frameless=True, streams="rank", reads_order=False),
    Capabilities("rank", frameless=True, streams="rank"),
    Capabilities("dense_rank", frameless=True, streams="rank"),
    Capabilities("percent_rank", frameless=True),
    Capabilities("cume_dist", frameless=True),
    Capabilities("ntile", frameless=True, reads_order=False),
    # navigation
    Capabilities("lag", frameless=True, streams="offset", reads_order=False),
    Capabilities("lead", frameless=True, streams="offset", reads_order=False),
    Capabilities("first_value", streams="frame_value"),
    Capabilities("last_value", streams="frame_value"),
    Capabilities("nth_value", streams="frame_value"),
)

_UNKNOWN = Capabilities("")


def capabilities(name: str) -> Capabilities:
    """The capabilities of function ``name``; an unknown name can do nothing special."""
    return FUNCTIONS.get(name.lower(), _UNKNOWN)
