"""Row-count estimates for logical plans, from the sources' column statistics.

    scan      the source's row count (Parquet metadata, memory tables; 1e6 when unknown)
    filter    x selectivity: ranges interpolated between the column's min and max, equality
              1/NDV, IS NULL the null fraction, IN (k values) k/NDV, OR and NOT combined as
              independent events; a predicate of one column those rules cannot judge (LIKE,
              a function of the column, a string range) the fraction of the source's
              column sample it keeps (``sampled_fraction``); a LIKE prefix outside the
              column's min/max nothing; a conjunct nothing is known about keeps ``DEFAULT_*``
    join      |L| x |R| / max(NDV(l), NDV(r)), NDVs over the keys' whole source columns
              (filters shrink |L| and |R|), composite keys with backoff; outer joins
              at least their preserved side; semi |L| x min(1, NDV(r)/NDV(l)), anti the rest
    group by  the product of the keys' distinct counts, at most the input's rows (a computed
              key: at most its columns' counts, extract(year) the years in their range)
    limit     at most fetch;  union  the sum;  anything else  its input's rows

Distinct counts come from the column's source (statistics.py) through projections and group
keys that pass it on, at most the rows of the plan they are asked about. The estimates order
joins (reorder_joins), pick build sides and join modes (physical planner) and are shown by
EXPLAIN beside each operator. Every estimate is at least one row.
"""

from __future__ import annotations

import datetime
import math
import weakref
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import PlansightError
from plansight.engine.logical import plan as lp
from plansight.engine.logical.expr import (
    Call,
    Cast,
    Column,
    Expr,
    Literal,
    is_volatile,
    split_conjunction,
    walk,
)
from plansight.engine.physical.expressions import evaluate_predicate
from plansight.engine.statistics import ColumnStatistics

#: rows of a source that cannot say (a table function, a source without a row count)
DEFAULT_SOURCE_ROWS = 1e6
#: what a conjunct keeps when statistics cannot judge it: System R's textbook guesses
#: (equality 1/10, a range 1/3), DuckDB's and DataFusion's 1/5 for anything else
DEFAULT_SELECTIVITY = {"eq": 0.1, "in_list": 0.2, "lt": 0.33, "lte": 0.33, "gt": 0.33,
                       "gte": 0.33, "like": 0.25, "ilike": 0.25, "is_null": 0.1,
                       "neq": 0.9, "is_not_null": 0.9}
DEFAULT_FILTER_SELECTIVITY = 0.2
#: the fraction of its input a GROUP BY keeps when a key's distinct count is unknown
DEFAULT_GROUP_FRACTION = 0.2
#: the least fraction a filter keeps: an estimate of zero rows would make every plan above
#: it look free
MIN_SELECTIVITY = 1e-4

_FLIPPED = {"lt": "gt", "lte": "gte", "gt": "lt", "gte": "lte", "eq": "eq", "neq": "neq"}
_RANGE = ("lt", "lte", "gt", "gte")
#: functions the statistics judge (ranges, 1/NDV, null counts) or that only combine
#: conjuncts: a conjunct calling any other function is judged on its column's sample
_JUDGED = frozenset({"and", "or", "not", *_FLIPPED, "in_list", "is_null", "is_not_null"})
#: sampled fractions kept per source (key: column name and predicate); bounded
_MAX_SAMPLED = 1024

# estimates of plan nodes (immutable, compared by identity) already computed: the join
# reorderer and the planner ask for every node, and each estimate recurses to the scans
_ROWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def estimate_rows(plan: lp.LogicalPlan) -> float:
    """Estimated output rows of ``plan`` (at least 1).

    Example:
        >>> import pyarrow as pa
        >>> from plansight.engine.catalog import MemorySource
        >>> from plansight.engine.logical.expr import Column
        >>> k = Column(1, "k", pa.int64())
        >>> scan = lp.TableScan("t", MemorySource(pa.table({"k": range(100)})), (k,), ("k",))
        >>> estimate_rows(lp.Filter(scan, Call("lt", (k, Literal(25, pa.int64())), pa.bool_())))
        25.0
    """
    cached = _ROWS.get(plan)
    if cached is None:
        cached = max(_estimate(plan), 1.0)
        _ROWS[plan] = cached
    return cached


def _estimate(plan: lp.LogicalPlan) -> float:
    if isinstance(plan, lp.TableScan):
        rows = plan.source.num_rows()
        rows = DEFAULT_SOURCE_ROWS if rows is None else float(rows)
        return rows if plan.fetch is None else min(rows, plan.fetch)
    if isinstance(plan, lp.Values):
        return float(len(plan.rows))
    if isinstance(plan, lp.Filter):
        return estimate_rows(plan.input) * selectivity(plan.predicate, plan.input)
    if isinstance(plan, lp.Aggregate):
        return _aggregate_rows(plan)
    if isinstance(plan, lp.Limit):
        rows = max(estimate_rows(plan.input) - plan.skip, 1.0)
        return rows if plan.fetch is None else min(rows, plan.fetch)
    if isinstance(plan, lp.Sort):
        rows = estimate_rows(plan.input)
        return rows if plan.fetch is None else min(rows, plan.fetch)
    if isinstance(plan, lp.Join):
        return _join_output(plan)
    if isinstance(plan, lp.Union):
        return sum(estimate_rows(c) for c in plan.union_inputs)
    inputs = plan.inputs()
    return estimate_rows(inputs[0]) if inputs else 1.0


# ----------------------------------------------------------------------------- statistics

def _origin(plan: lp.LogicalPlan, column_id: int) -> tuple[lp.TableScan, str] | None:
    """The scan (and source column name) a column comes from, looking through operators
    that pass it on unchanged: projections of a column, group keys, joins, filters."""
    if isinstance(plan, lp.TableScan):
        for column, name in zip(plan.scan_columns, plan.projection):
            if column.id == column_id:
                return plan, name
        return None
    if isinstance(plan, lp.Projection):
        for expr, out in zip(plan.exprs, plan.outputs):
            if out.id == column_id:
                if isinstance(expr, Column) and expr.id != column_id:
                    return _origin(plan.input, expr.id)
                if not isinstance(expr, Column):
                    return None
        return _origin(plan.input, column_id)
    if isinstance(plan, lp.Aggregate):
        for expr, out in zip(plan.group_exprs, plan.group_outputs):
            if out.id == column_id:
                return _origin(plan.input, expr.id) if isinstance(expr, Column) else None
        return None
    for child in plan.inputs():
        if any(c.id == column_id for c in child.columns):
            return _origin(child, column_id)
    return None


def column_statistics(expr: Expr, plan: lp.LogicalPlan) -> ColumnStatistics | None:
    """The source statistics of the column ``expr``, or None for a computed expression or
    a source that does not know."""
    found = _origin(plan, expr.id) if isinstance(expr, Column) else None
    return None if found is None else found[0].source.column_statistics(found[1])


def _null_fraction(column: Column, plan: lp.LogicalPlan) -> float:
    """The fraction of its source's rows where ``column`` is NULL (0 when unknown)."""
    found = _origin(plan, column.id)
    if found is None:
        return 0.0
    scan, name = found
    stats, rows = scan.source.column_statistics(name), scan.source.num_rows()
    if stats is None or not stats.null_count or not rows:
        return 0.0
    return min(1.0, stats.null_count / rows)


def source_distinct(expr: Expr, plan: lp.LogicalPlan) -> float | None:
    """Distinct values of a column in its whole source table (before any filter); None when
    the column is computed or its source does not know."""
    stats = column_statistics(expr, plan)
    if stats is None or stats.distinct_count is None:
        return None
    return max(1.0, stats.distinct_count)


def _domain(expr: Expr, plan: lp.LogicalPlan) -> tuple[float, bool]:
    """(distinct values of ``expr``'s column in its whole source, before filters, whether
    that is only an upper bound); without statistics (a computed key) every row of
    ``plan``, a bound."""
    stats = column_statistics(expr, plan)
    if stats is None or stats.distinct_count is None:
        return estimate_rows(plan), True
    return max(1.0, stats.distinct_count), stats.distinct_is_bound


def key_domain(a: Expr, left: lp.LogicalPlan, b: Expr, right: lp.LogicalPlan) -> float:
    """The distinct values both keys of ``a = b`` are drawn from (DuckDB's "total domain"):
    the larger of the two columns' distinct counts over their whole sources, so that a
    filter on either side shrinks the join by its selectivity. A count that is only a
    bound (an integer key's range, or the rows) is at most the other key's: containment, a
    foreign key's values are among the primary key's (l_orderkey spans 6M values at SF 1
    but holds the 1.5M of o_orderkey, which has 1.5M rows)."""
    (da, a_bound), (db, b_bound) = _domain(a, left), _domain(b, right)
    if a_bound and b_bound:
        return min(da, db)
    if a_bound:
        da = min(da, db)
    if b_bound:
        db = min(db, da)
    return max(da, db)


def present_distinct(expr: Expr, plan: lp.LogicalPlan) -> float:
    """Distinct values of ``expr`` among ``plan``'s rows: its domain, at most the rows."""
    return max(1.0, min(estimate_rows(plan), _domain(expr, plan)[0]))


# ----------------------------------------------------------------------------- filters

def selectivity(predicate: Expr | None, plan: lp.LogicalPlan | None = None) -> float:
    """The fraction of ``plan``'s rows ``predicate`` keeps: conjuncts as independent, range
    conjuncts on one column intersected first (``a >= x AND a < y`` is one interval); with
    statistics of the columns in ``plan`` where they are known, defaults where not."""
    if predicate is None:
        return 1.0
    fraction = 1.0
    ranges: dict[int, list] = {}  # column id -> [column, low, high, low incl., high incl.]
    for conjunct in _distinct_conjuncts(predicate):
        comparison = _comparison(conjunct)
        if comparison is not None and comparison[1] in _RANGE and plan is not None and \
                column_statistics(comparison[0], plan) is not None:
            column, op, value = comparison
            entry = ranges.setdefault(column.id, [column, None, None, True, True])
            if op in ("gt", "gte"):
                if entry[1] is None or _greater(value, entry[1]):
                    entry[1], entry[3] = value, op == "gte"
            elif entry[2] is None or _greater(entry[2], value):
                entry[2], entry[4] = value, op == "lte"
            continue
        fraction *= _conjunct(conjunct, plan)
    for column, low, high, low_inclusive, high_inclusive in ranges.values():
        fraction *= _range_fraction(column, low, high, low_inclusive, high_inclusive, plan)
    return min(1.0, max(fraction, MIN_SELECTIVITY))


def _distinct_conjuncts(predicate: Expr) -> list[Expr]:
    """The conjuncts, each once: pushing an OR down repeats it (``(a OR b) AND (b OR a)``),
    and a repeated condition keeps no fewer rows."""
    seen: dict[object, Expr] = {}
    for conjunct in split_conjunction(predicate):
        key: object = conjunct
        if isinstance(conjunct, Call) and conjunct.func == "or":
            key = ("or", frozenset(map(str, conjunct.args)))
        seen.setdefault(key, conjunct)
    return list(seen.values())


def _greater(a: Any, b: Any) -> bool:
    try:
        return bool(a > b)
    except TypeError:
        return False


def _range_fraction(column: Column, low: Any, high: Any, low_inclusive: bool,
                    high_inclusive: bool, plan: lp.LogicalPlan) -> float:
    stats = column_statistics(column, plan)
    assert stats is not None
    fraction = stats.fraction_between(low, high, low_inclusive, high_inclusive)
    if fraction is None:  # strings: no number line to interpolate on, but perhaps a sample
        sampled = _sampled_range(column, low, high, low_inclusive, high_inclusive, plan)
        if sampled is not None:
            return sampled  # the sample's NULLs are among the rows it rejects
        fraction = DEFAULT_SELECTIVITY["lt"] ** ((low is not None) + (high is not None))
    return fraction * (1.0 - _null_fraction(column, plan))


def _sampled_range(column: Column, low: Any, high: Any, low_inclusive: bool,
                   high_inclusive: bool, plan: lp.LogicalPlan) -> float | None:
    """The fraction of ``column``'s source sample inside the range, or None without one."""
    sample = _column_sample(column, plan)
    if sample is None:
        return None
    try:
        kept = pc.is_valid(sample)
        for value, inclusive, op in ((low, low_inclusive, ("greater", "greater_equal")),
                                     (high, high_inclusive, ("less", "less_equal"))):
            if value is not None:
                bound = pa.scalar(value, sample.type)
                kept = pc.and_kleene(kept, pc.call_function(op[inclusive], [sample, bound]))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    return _sample_fraction(pc.sum(pc.fill_null(kept, False)).as_py() or 0, len(sample))


def _column_sample(column: Column, plan: lp.LogicalPlan) -> pa.ChunkedArray | None:
    """The source's sample of ``column`` (``TableSource.column_sample``), None when the
    column is computed, the source keeps none or it is empty."""
    found = _origin(plan, column.id)
    if found is None:
        return None
    sample = found[0].source.column_sample(found[1])
    return sample if sample is not None and len(sample) else None


def _sample_fraction(kept: int, size: int) -> float:
    """``kept`` of ``size`` sampled rows as a fraction; none kept is read as half a row:
    the sample says the fraction is below about 1/size, not that it is zero."""
    return max(kept, 0.5) / size


def sampled_fraction(conjunct: Expr, plan: lp.LogicalPlan | None) -> float | None:
    """The fraction of rows ``conjunct`` keeps, evaluated on the sample its source keeps of
    the one column it reads (NULLs in the sample count as rejected, as WHERE does), or None
    when it reads several columns or none, is volatile, has a statistics rule (only
    comparisons, IN, IS NULL and their AND/OR/NOT), or no sample exists. A LIKE that a
    constant guessed at 1/4 kept 5.4% of TPC-H Q9's parts ('%green%'): four times too
    many, enough to build a hash join on the 1.5M orders rather than the filtered parts.
    Cached per source, column and predicate: the join reorderer asks again and again."""
    if plan is None or not isinstance(conjunct, Call) or is_volatile(conjunct):
        return None
    nodes = list(walk(conjunct))
    if all(not isinstance(n, Call) or n.func in _JUDGED for n in nodes):
        return None
    columns = {n.id: n for n in nodes if isinstance(n, Column)}
    if len(columns) != 1:
        return None
    column = next(iter(columns.values()))
    found = _origin(plan, column.id)
    if found is None:
        return None
    scan, name = found
    cache = scan.source.__dict__.setdefault("_sampled_fractions", {})
    key = (name, conjunct)
    if key in cache:
        return cache[key]
    sample = _column_sample(column, plan)
    fraction = None
    if sample is not None:
        try:
            mask = evaluate_predicate(conjunct, pa.table({column.field_name: sample}))
            fraction = _sample_fraction(pc.sum(mask).as_py() or 0, len(sample))
        except (PlansightError, pa.ArrowException):
            fraction = None  # e.g. a cast that fails on some value: the defaults judge
    if len(cache) >= _MAX_SAMPLED:
        cache.clear()
    cache[key] = fraction
    return fraction


def _prefix_outside(conjunct: Call, stats: ColumnStatistics) -> bool:
    """Whether ``column LIKE 'abc%'`` can keep no row: no string starting with the pattern's
    literal prefix lies between the column's min and max."""
    if conjunct.func != "like" or len(conjunct.args) < 2 or \
            not isinstance(conjunct.args[1], Literal) or \
            not isinstance(conjunct.args[1].value, str) or \
            not isinstance(stats.min, str) or not isinstance(stats.max, str):
        return False
    pattern = conjunct.args[1].value
    cut = min((i for i in (pattern.find(c) for c in "%_\\") if i >= 0), default=len(pattern))
    prefix = pattern[:cut]
    if not prefix:
        return False
    # strings starting with prefix are >= prefix, and their first len(prefix) characters equal it
    return prefix > stats.max or stats.min[:len(prefix)] > prefix


def _conjunct(conjunct: Expr, plan: lp.LogicalPlan | None) -> float:
    if not isinstance(conjunct, Call):
        return DEFAULT_FILTER_SELECTIVITY
    func = conjunct.func
    if func == "and":
        return selectivity(conjunct, plan)
    sampled = sampled_fraction(conjunct, plan)
    if sampled is not None:
        return sampled
    if func == "or":
        kept = 1.0
        for arg in conjunct.args:
            kept *= 1.0 - selectivity(arg, plan)
        return 1.0 - kept
    if func == "not":
        return 1.0 - selectivity(conjunct.args[0], plan)
    comparison = _comparison(conjunct)
    column = comparison[0] if comparison is not None else \
        (conjunct.args[0] if conjunct.args else None)
    stats = column_statistics(column, plan) if plan is not None and column is not None \
        else None
    if stats is None:
        return DEFAULT_SELECTIVITY.get(func, DEFAULT_FILTER_SELECTIVITY)
    if _prefix_outside(conjunct, stats):
        return MIN_SELECTIVITY
    if func in ("is_null", "is_not_null") and stats.null_count is not None:
        nulls = _null_fraction(column, plan)
        return nulls if func == "is_null" else 1.0 - nulls
    if comparison is not None and comparison[1] in ("eq", "neq") and stats.distinct_count:
        value = comparison[2]
        inside = stats.fraction_between(value, value)
        equal = 0.0 if inside == 0.0 else 1.0 / max(stats.distinct_count, 1.0)
        if comparison[1] == "neq":
            return (1.0 - equal) * (1.0 - _null_fraction(column, plan))
        return equal
    if func == "in_list" and stats.distinct_count and \
            all(isinstance(a, Literal) for a in conjunct.args[1:]):
        return min(1.0, (len(conjunct.args) - 1) / max(stats.distinct_count, 1.0))
    return DEFAULT_SELECTIVITY.get(func, DEFAULT_FILTER_SELECTIVITY)


def _comparison(predicate: Expr) -> tuple[Column, str, Any] | None:
    """``(column, op, value)`` for ``column op literal`` either way round, the literal not
    NULL (a cast column is not: its values are not the source's)."""
    if not isinstance(predicate, Call) or predicate.func not in _FLIPPED or \
            len(predicate.args) != 2:
        return None
    a, b = predicate.args
    op = predicate.func
    if isinstance(a, Literal):
        a, b, op = b, a, _FLIPPED[op]
    if not isinstance(a, Column) or not isinstance(b, Literal) or b.value is None:
        return None
    return a, op, b.value


# ----------------------------------------------------------------------------- joins

def join_rows(left: lp.LogicalPlan, right: lp.LogicalPlan,
              on: tuple[tuple[Expr, Expr], ...]) -> float:
    """Inner equi-join output, textbook style: |L| x |R| / max(NDV(l), NDV(r)), NDVs as
    ``key_domain``, several key pairs combined as ``combined_domain``."""
    left_rows, right_rows = estimate_rows(left), estimate_rows(right)
    if not on:
        return left_rows * right_rows
    return max(1.0, left_rows * right_rows / join_domain(on, left, right))


def join_domain(on, left: lp.LogicalPlan, right: lp.LogicalPlan) -> float:
    """The domain of an equi-join's whole key: its pairs' (``key_domain``) combined with
    backoff. A composite key that on each side comes from one table has at most the smaller
    table's rows: two tables joined on several columns are usually a composite foreign key
    and the key it references, (l_partkey, l_suppkey) among partsupp's rows (containment,
    as for single keys). A side whose columns come from several tables (TPC-H Q5's
    (o_orderkey, s_suppkey)) spans their product: no cap."""
    domain = combined_domain([key_domain(a, left, b, right) for a, b in on])
    if len(on) > 1:
        caps = [_one_table_rows([a for a, _ in on], left),
                _one_table_rows([b for _, b in on], right)]
        if None not in caps:
            domain = min(domain, max(min(caps), 1.0))
    return domain


def _one_table_rows(keys: list[Expr], plan: lp.LogicalPlan) -> float | None:
    """The source rows of the one scan every key column comes from, or None."""
    scans = set()
    for key in keys:
        found = _origin(plan, key.id) if isinstance(key, Column) else None
        if found is None:
            return None
        scans.add(found[0])
    if len(scans) != 1:
        return None
    rows = next(iter(scans)).source.num_rows()
    return None if rows is None else float(rows)


def combined_domain(domains: list[float]) -> float:
    """The domain of a composite key from its parts', with exponential backoff (the largest
    whole, the next square-rooted, the next fourth-rooted, ...): the parts of a real key are
    correlated (TPC-H's (ps_partkey, ps_suppkey) holds 4 suppliers per part, not all 100),
    so their product would promise far fewer rows than join.

    Example:
        >>> combined_domain([100.0, 2000.0])
        20000.0
    """
    total = 1.0
    for position_, domain in enumerate(sorted(domains, reverse=True)):
        total *= domain ** (0.5 ** position_)
    return total


def _join_output(join: lp.Join) -> float:
    left, right = estimate_rows(join.left), estimate_rows(join.right)
    if join.kind in ("semi", "anti"):
        matched = left * _semi_fraction(join)
        if join.filter is not None:
            # a residual condition decides among the key matches: as likely either way
            matched = left * _semi_fraction(join) * 0.5
        return matched if join.kind == "semi" else max(left - matched, 1.0)
    # a residual condition often repeats filters already applied below (an OR split and
    # pushed into both sides, as TPC-H Q7's nation names): the statistics, which know the
    # columns before those filters, would count them twice; at least the default is kept
    residual = 1.0 if join.filter is None else \
        max(selectivity(join.filter, join), DEFAULT_FILTER_SELECTIVITY)
    inner = join_rows(join.left, join.right, join.on) * residual
    if join.kind == "left":
        return max(inner, left)
    if join.kind == "right":
        return max(inner, right)
    if join.kind == "full":
        return max(inner, left, right)
    return inner


def _semi_fraction(join: lp.Join) -> float:
    """The fraction of left rows with a key among the right's: their distinct counts'
    ratio (containment: the smaller key set is inside the larger), 1/2 without keys."""
    if not join.on:
        return 0.5
    fraction = 1.0
    for a, b in join.on:
        fraction = min(fraction, present_distinct(b, join.right) /
                       present_distinct(a, join.left))
    return fraction


# ----------------------------------------------------------------------------- group by

def _aggregate_rows(plan: lp.Aggregate) -> float:
    rows = estimate_rows(plan.input)
    if not plan.group_exprs:
        return 1.0
    groups, unknown = 1.0, False
    for expr in plan.group_exprs:
        ndv = expression_distinct(expr, plan.input)
        if ndv is None:
            unknown = True
        else:
            groups *= min(ndv, rows)
    if unknown:
        groups = max(groups, rows * DEFAULT_GROUP_FRACTION)
    return min(groups, rows) if math.isfinite(groups) else rows


#: date parts with a fixed number of values whatever the dates (extract(month) has 12)
_DATE_PART_VALUES = {"month": 12.0, "quarter": 4.0, "dayofweek": 7.0, "dow": 7.0,
                     "isodow": 7.0, "day": 31.0, "dayofmonth": 31.0, "hour": 24.0,
                     "minute": 60.0, "dayofyear": 366.0, "doy": 366.0, "week": 53.0}


def expression_distinct(expr: Expr, plan: lp.LogicalPlan) -> float | None:
    """Distinct values of ``expr`` over ``plan``'s source columns, or None when nothing is
    known. A source column has its statistics' count; a deterministic function of columns
    has at most the product of its arguments' counts (a function maps equal arguments to
    equal values) -- and extract(year) of a date or timestamp at most the years between
    its column's min and max, extract(month) at most 12, x % c at most 2|c| (NULL too).
    Without this a computed group key made a GROUP BY keep a fifth of its input: TPC-H
    Q9's (nation, extract(year from o_orderdate)) was estimated at 299,613 groups for its
    175."""
    if isinstance(expr, Literal):
        return 1.0
    if isinstance(expr, Column):
        known = source_distinct(expr, plan)
        if known is not None:
            return known
        defined = _definition(plan, expr.id)
        return None if defined is None else expression_distinct(*defined)
    if isinstance(expr, Cast):
        return expression_distinct(expr.expr, plan)
    if not isinstance(expr, Call) or is_volatile(expr) or \
            not any(isinstance(e, Column) for e in walk(expr)):
        return None
    bound = None
    if expr.func == "date_part" and len(expr.args) == 2 and \
            isinstance(expr.args[0], Literal) and isinstance(expr.args[0].value, str):
        unit = expr.args[0].value.lower()
        bound = _DATE_PART_VALUES.get(unit)
        stats = column_statistics(expr.args[1], plan)
        if unit in ("year", "years") and stats is not None and \
                isinstance(stats.min, datetime.date) and isinstance(stats.max, datetime.date):
            bound = float(stats.max.year - stats.min.year + 1)
        if bound is not None and isinstance(expr.args[1], Column):
            bound += _null_fraction(expr.args[1], plan) > 0  # NULL is a group too
        elif bound is not None:
            bound += 1  # a computed argument's NULLs are not known: one more, a group
    elif expr.func in ("modulo", "mod") and len(expr.args) == 2 and \
            isinstance(expr.args[1], Literal) and isinstance(expr.args[1].value, int) and \
            not isinstance(expr.args[1].value, bool) and expr.args[1].value != 0:
        # the remainders -(|c| - 1) .. |c| - 1, and NULL
        bound = 2.0 * abs(expr.args[1].value)
    product = 1.0
    for arg in expr.args:
        ndv = expression_distinct(arg, plan)
        if ndv is None:
            product = math.inf
            break
        product *= ndv
    if bound is not None:
        product = min(product, bound)
    return product if math.isfinite(product) else None


def _definition(plan: lp.LogicalPlan, column_id: int) -> tuple[Expr, lp.LogicalPlan] | None:
    """(the expression a projection computes ``column_id`` from, the plan it reads), found
    through the operators that pass columns on (as ``_origin``), or None."""
    if isinstance(plan, lp.TableScan):
        return None
    if isinstance(plan, lp.Projection):
        for expr, out in zip(plan.exprs, plan.outputs):
            if out.id == column_id:
                if isinstance(expr, Column) and expr.id == column_id:
                    break
                return expr, plan.input
        return _definition(plan.input, column_id)
    if isinstance(plan, lp.Aggregate):
        for expr, out in zip(plan.group_exprs, plan.group_outputs):
            if out.id == column_id:
                return (expr, plan.input) if expr is not out else None
        return None
    for child in plan.inputs():
        if any(c.id == column_id for c in child.columns):
            return _definition(child, column_id)
    return None
