"""Filter pushdown: evaluate each conjunct as early as possible.

Conjuncts move through projections (columns substituted), sorts, into the group keys side
of aggregates, into window inputs when they only read partition keys, into each side of a
union, and into joins: conjuncts reading one side go below the join (only on the side whose
rows the join preserves untouched), those reading both become join conditions of inner
joins; equalities between the two sides become equi keys. Simple ``column op literal``
conjuncts are also copied into scans as row-group pruning hints (the Filter stays exact).
"""

from __future__ import annotations

from dataclasses import replace

from plansight.engine.logical import plan as lp
from plansight.engine.logical.estimate import estimate_rows
from plansight.engine.logical.expr import (
    Call,
    Cast,
    Column,
    Expr,
    Literal,
    columns_of,
    conjunction,
    is_volatile,
    replace_columns,
    split_conjunction,
)


def push_down_filters(plan: lp.LogicalPlan) -> lp.LogicalPlan:
    return _push(plan, [])


def _ids(plan: lp.LogicalPlan) -> set[int]:
    return {c.id for c in plan.columns}


def _wrap(plan: lp.LogicalPlan, predicates: list[Expr]) -> lp.LogicalPlan:
    predicate = conjunction(predicates)
    return lp.Filter(plan, predicate) if predicate is not None else plan


def factor_disjunction(expr: Expr) -> list[Expr]:
    """``(a AND b) OR (a AND c)`` -> ``[a, b OR c]``: conjuncts common to every branch of an
    OR become separate conjuncts, so a join key hidden in each branch becomes an equi key."""
    if not (isinstance(expr, Call) and expr.func == "or"):
        return [expr]
    branches = [split_conjunction(b) for b in _split_disjunction(expr)]
    common = [c for c in branches[0] if all(c in b for b in branches[1:])]
    if not common:
        return [expr]
    rests = [conjunction([c for c in b if c not in common]) for b in branches]
    if any(r is None for r in rests):
        return common  # one branch is exactly the common part: the OR is implied
    disjunction = rests[0]
    for r in rests[1:]:
        disjunction = Call("or", (disjunction, r), _bool())
    return common + [disjunction]


def _split_disjunction(expr: Expr) -> list[Expr]:
    if isinstance(expr, Call) and expr.func == "or":
        return [p for arg in expr.args for p in _split_disjunction(arg)]
    return [expr]


def _push(plan: lp.LogicalPlan, predicates: list[Expr]) -> lp.LogicalPlan:
    """``plan`` filtered by ``predicates``, with filters pushed as deep as they can go."""
    if isinstance(plan, lp.Filter):
        conjuncts = [f for c in split_conjunction(plan.predicate) for f in factor_disjunction(c)]
        # the lower filter's conjuncts first: they run first (a FilterExec evaluates each
        # conjunct only on the rows the ones before it keep, errors in written order)
        return _push(plan.input, conjuncts + predicates)
    if isinstance(plan, lp.Projection):
        mapping = {o.id: e for o, e in zip(plan.outputs, plan.exprs)}
        down, stay = [], []
        for p in predicates:
            substituted = replace_columns(p, mapping)
            (stay if is_volatile(substituted) else down).append(substituted)
        return _wrap(replace(plan, input=_push(plan.input, down)), stay)
    if isinstance(plan, lp.Sort) and plan.fetch is None:
        return replace(plan, input=_push(plan.input, predicates))
    if isinstance(plan, lp.Aggregate):
        mapping = {o.id: e for o, e in zip(plan.group_outputs, plan.group_exprs)}
        group_ids = set(mapping)
        down, stay = [], []
        for p in predicates:
            (down if columns_of(p) <= group_ids and plan.group_exprs else stay).append(p)
        down = [replace_columns(p, mapping) for p in down]
        return _wrap(replace(plan, input=_push(plan.input, down)), stay)
    if isinstance(plan, lp.Window):
        common = None
        for w in plan.windows:
            keys = {c for e in w.partition_by for c in columns_of(e)}
            common = keys if common is None else common & keys
        down, stay = [], []
        for p in predicates:
            (down if common and columns_of(p) <= common else stay).append(p)
        return _wrap(replace(plan, input=_push(plan.input, down)), stay)
    if isinstance(plan, lp.Union):
        inputs = []
        for child in plan.union_inputs:
            mapping = {o.id: c for o, c in zip(plan.outputs, child.columns)}
            inputs.append(_push(child, [replace_columns(p, mapping) for p in predicates]))
        return replace(plan, union_inputs=tuple(inputs))
    if isinstance(plan, lp.Join):
        return _push_join(plan, predicates)
    if isinstance(plan, lp.TableScan):
        hints = tuple(p for p in predicates if _pruning_hint(p, plan) is not None)
        if hints:
            plan = replace(plan, filters=tuple(dict.fromkeys(plan.filters + hints)))
        return _wrap(plan, predicates)
    # Limit, Values, Sort with fetch, ...: filters stay above, children are still visited
    inputs = tuple(_push(child, []) for child in plan.inputs())
    if inputs:
        plan = plan.with_inputs(inputs)
    return _wrap(plan, predicates)


def _push_join(join: lp.Join, predicates: list[Expr]) -> lp.LogicalPlan:
    left_ids, right_ids = _ids(join.left), _ids(join.right)
    kind = _without_null_extension(join.kind, predicates, left_ids, right_ids)
    conditions = split_conjunction(join.filter) + [
        Call("eq", (a, b), _bool()) for a, b in join.on]
    above, to_left, to_right, join_conditions = [], [], [], []
    # WHERE predicates: for inner/cross joins everything may move into the join
    for p in predicates:
        cols = columns_of(p)
        if _constant(p):
            above.append(p)
        elif cols <= left_ids and kind in ("inner", "cross", "left", "semi", "anti"):
            to_left.append(p)
        elif cols <= right_ids and kind in ("inner", "cross", "right"):
            to_right.append(p)
        elif kind in ("inner", "cross") and not is_volatile(p) and not join.null_equal:
            join_conditions.append(p)
        else:
            # a join whose keys match NULL to NULL (decorrelation's join back on the
            # distinct values) would give a WHERE's x = y its NULL-safe meaning
            above.append(p)
    # an OR over both sides still implies, per side, the OR of that side's parts
    if kind in ("inner", "cross"):
        for c in list(join_conditions) + [c for c in conditions if _is_or(c)]:
            to_left.extend(implied_by_disjunction(c, left_ids))
            to_right.extend(implied_by_disjunction(c, right_ids))
    # ON conditions: one-sided ones go to the side the join does not preserve
    for c in conditions:
        cols = columns_of(c)
        if _constant(c):
            join_conditions.append(c)
        elif cols <= right_ids and kind in ("inner", "cross", "left", "semi", "anti"):
            to_right.append(c)
        elif cols <= left_ids and kind in ("inner", "cross", "right"):
            to_left.append(c)
        else:
            join_conditions.append(c)
    left = _push(join.left, to_left)
    right = _push(join.right, to_right)
    on, residual = split_join_keys(join_conditions, left_ids, right_ids)
    new_kind = "inner" if kind == "cross" and (on or residual) else kind
    new = replace(join, left=left, right=right, kind=new_kind, on=tuple(on),
                  filter=conjunction(residual))
    if new_kind in ("semi", "anti"):
        new = _sink_semi_join(new)
    return _wrap(new, above)


# operators whose result is NULL when any operand is NULL
_NULL_IN_NULL_OUT = ("add", "subtract", "multiply", "divide", "integer_divide", "modulo",
                     "negate", "not", "eq", "neq", "lt", "lte", "gt", "gte")


def _without_null_extension(kind: str, predicates: list[Expr], left_ids: set[int],
                            right_ids: set[int]) -> str:
    """The join kind once a WHERE conjunct that no NULL-extended row passes drops them: a
    LEFT join whose WHERE rejects a NULL right side is an inner join (FULL becomes LEFT,
    RIGHT or inner), as DuckDB and DataFusion simplify it. The inner join's conditions and
    the WHERE's one-sided predicates then filter both sides before the join, and
    reorder_joins may move it."""
    if kind not in ("left", "right", "full"):
        return kind
    drops_null_right = kind in ("left", "full") and any(
        _rejects_nulls_of(p, right_ids) for p in predicates)
    drops_null_left = kind in ("right", "full") and any(
        _rejects_nulls_of(p, left_ids) for p in predicates)
    if kind == "full":
        # dropping the rows whose right side is NULL keeps the right join's rows, and so on
        return {(True, True): "inner", (True, False): "right", (False, True): "left",
                (False, False): "full"}[(drops_null_right, drops_null_left)]
    return "inner" if drops_null_right or drops_null_left else kind


def _rejects_nulls_of(predicate: Expr, side: set[int]) -> bool:
    """Whether ``predicate`` is NULL or FALSE on every row whose ``side`` columns are all
    NULL (conservative: only what certainly is)."""
    if isinstance(predicate, Call) and predicate.func == "and":
        return any(_rejects_nulls_of(a, side) for a in predicate.args)
    if isinstance(predicate, Call) and predicate.func == "or":
        return all(_rejects_nulls_of(a, side) for a in predicate.args)
    if isinstance(predicate, Call) and predicate.func == "is_not_null":
        return _null_when_null(predicate.args[0], side)
    return _null_when_null(predicate, side)


def _null_when_null(expr: Expr, side: set[int]) -> bool:
    """Whether ``expr`` is NULL when the ``side`` columns are."""
    if isinstance(expr, Column):
        return expr.id in side
    if isinstance(expr, Cast):
        return _null_when_null(expr.expr, side)
    if isinstance(expr, Call) and expr.func in _NULL_IN_NULL_OUT:
        return any(_null_when_null(a, side) for a in expr.args)
    return False


def _constant(predicate: Expr) -> bool:
    """Whether ``predicate`` reads no column yet is no literal: constant folding left it
    because evaluating it raises (``CAST(2147483647 AS INTEGER) + 1 > 0``) or it is volatile.
    It stays where it was written, above the join (a WHERE) or on the joined pairs (an ON):
    pushed to one side it would run on that side's rows though the join has no row (DuckDB
    returns no rows, no error)."""
    return not isinstance(predicate, Literal) and not columns_of(predicate)


def _sink_semi_join(join: lp.Join) -> lp.LogicalPlan:
    """Semi(Inner(A, B), S) on A's columns only -> Inner(Semi(A, S), B).

    A semi or anti join only removes rows of its left input; when its condition reads one
    side of an inner join below, it removes them there, before the inner join multiplies rows.
    """
    inner = join.left
    if not (isinstance(inner, lp.Join) and inner.kind in ("inner", "cross")):
        return join
    right_ids = _ids(join.right)
    used = set()
    for expr in join.expressions():
        used |= columns_of(expr)
    used -= right_ids
    for side in ("left", "right"):
        child = getattr(inner, side)
        # the semi join builds on the same input either way and probes ``child`` instead of
        # the inner join's output: worth it when that is fewer rows (a join that
        # multiplies, as orders -> lineitem); when the inner join filters (a selective
        # dimension), the semi join probes its smaller output above it
        if used <= _ids(child) and estimate_rows(child) <= estimate_rows(inner):
            sunk = _sink_semi_join(replace(join, left=child))
            return replace(inner, **{side: sunk})
    return join


def _is_or(expr: Expr) -> bool:
    return isinstance(expr, Call) and expr.func == "or"


def implied_by_disjunction(expr: Expr, side_ids: set[int]) -> list[Expr]:
    """``(a1 AND b1) OR (a2 AND b2)`` with a* on one side implies ``a1 OR a2`` there.

    The derived predicate only pre-filters; the original stays, so it is always safe.
    It applies when every branch has a conjunct reading only ``side_ids``.
    """
    if not _is_or(expr) or columns_of(expr) <= side_ids:
        return []
    parts = []
    for branch in _split_disjunction(expr):
        mine = [c for c in split_conjunction(branch)
                if columns_of(c) and columns_of(c) <= side_ids and not is_volatile(c)]
        if not mine:
            return []
        parts.append(conjunction(mine))
    implied = parts[0]
    for part in parts[1:]:
        implied = Call("or", (implied, part), _bool())
    return [implied]


def split_join_keys(conditions: list[Expr], left_ids: set[int], right_ids: set[int]):
    """Equalities with one side per input become equi keys; the rest is the residual."""
    on, residual = [], []
    for c in conditions:
        if isinstance(c, Call) and c.func == "eq":
            a, b = c.args
            ca, cb = columns_of(a), columns_of(b)
            if ca and cb and ca <= left_ids and cb <= right_ids:
                on.append((a, b))
                continue
            if ca and cb and ca <= right_ids and cb <= left_ids:
                on.append((b, a))
                continue
        residual.append(c)
    return on, residual


def _bool():
    import pyarrow as pa

    return pa.bool_()


def column_comparison(predicate: Expr) -> tuple[Column, str, object] | None:
    """``(column, op, value)`` for ``column op literal`` (either way round), op in
    eq/lt/lte/gt/gte, the literal non-NULL and of the column's type; else None."""
    if not isinstance(predicate, Call) or predicate.func not in ("eq", "lt", "lte", "gt", "gte"):
        return None
    a, b = predicate.args
    op = predicate.func
    if isinstance(b, Column) and isinstance(a, Literal):
        a, b = b, a
        op = {"lt": "gt", "lte": "gte", "gt": "lt", "gte": "lte", "eq": "eq"}[op]
    if not isinstance(a, Column) or not isinstance(b, Literal) or b.value is None:
        return None
    if a.type != b.type:
        return None
    return a, op, b.value


def _pruning_hint(predicate: Expr, scan: lp.TableScan):
    """(source column, op, value) for ``column op literal`` predicates on a scan column."""
    comparison = column_comparison(predicate)
    if comparison is None:
        return None
    a, op, value = comparison
    for column, name in zip(scan.scan_columns, scan.projection):
        if column.id == a.id:
            return (name, op, value)
    return None


pruning_hint = _pruning_hint
