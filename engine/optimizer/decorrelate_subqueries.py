"""Decorrelation: IN / EXISTS / scalar subqueries become joins.

    Filter(x IN (SELECT y ... WHERE y.k = x.k))   ->  Join(semi, filter: x = y AND y.k = x.k)
    Filter(NOT EXISTS (SELECT ... WHERE c))       ->  Join(anti, filter: c)
    x < (SELECT avg(v) FROM t WHERE t.k = o.k)    ->  Join(left, o.k = t.k) with
                                                      Aggregate(avg(v) GROUP BY t.k)

Correlated predicates (those reading columns the subquery does not produce) are pulled out of
the subquery's filters, through projections (which then pass the needed inner columns up) and
through aggregates (where an equality ``inner = outer`` becomes a new group key). The join's
filter is split into equi keys and a residual later, by filter pushdown.
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from plansight.engine.errors import NotSupportedError
from plansight.engine.functions.capabilities import capabilities
from plansight.engine.functions.scalar import resolve_operator
from plansight.engine.functions.scalar.conditional import bind_case
from plansight.engine.logical import plan as lp
from plansight.engine.logical.expr import (
    AggregateCall,
    Call,
    Cast,
    Column,
    Expr,
    Literal,
    SubqueryExpr,
    WindowCall,
    columns_of,
    conjunction,
    next_id,
    replace_columns,
    split_conjunction,
    transform,
    walk,
)
from plansight.engine.optimizer.dependent_join import domain_of, push_down, referenced_ids
from plansight.engine.optimizer.fold_constants import fold
from plansight.engine.optimizer.rewrite import fresh_copy, produced_ids


def decorrelate_subqueries(plan: lp.LogicalPlan) -> lp.LogicalPlan:
    return lp.transform_plan(plan, _rewrite_node)


def _has_subquery(expr: Expr) -> bool:
    return any(isinstance(e, SubqueryExpr) for e in walk(expr))


def _rewrite_node(node: lp.LogicalPlan) -> lp.LogicalPlan:
    if isinstance(node, lp.Filter) and _has_subquery(node.predicate):
        node = replace(node, predicate=transform(node.predicate, _in_single_row_as_comparison))
    if isinstance(node, lp.Projection) and any(_has_subquery(e) for e in node.exprs):
        node = replace(node, exprs=tuple(transform(e, _in_single_row_as_comparison)
                                         for e in node.exprs))
    if isinstance(node, lp.Filter) and _has_subquery(node.predicate):
        conjuncts = split_conjunction(node.predicate)
        # plain conjuncts filter the input first (WHERE is a conjunction, order is free):
        # the FROM joins keep their WHERE equalities right above them, where cross-join
        # elimination and filter pushdown find them, below the subquery joins
        plain = conjunction([c for c in conjuncts if not _has_subquery(c)])
        plan = lp.Filter(node.input, plain) if plain is not None else node.input
        remaining = []
        for conjunct in conjuncts:
            if isinstance(conjunct, SubqueryExpr) and conjunct.kind in ("exists", "in"):
                plan = _semi_anti_join(plan, conjunct)
            elif _has_subquery(conjunct):
                remaining.append(conjunct)
        predicate = conjunction(remaining)
        if predicate is not None:  # together: conjuncts may share a subquery (BETWEEN)
            plan, predicate = _replace_scalar_subqueries(plan, predicate)
        return lp.Filter(plan, predicate) if predicate is not None else plan
    if isinstance(node, lp.Projection) and any(_has_subquery(e) for e in node.exprs):
        plan, exprs = _replace_subqueries(node.input, list(node.exprs))
        return lp.Projection(plan, tuple(exprs), node.outputs)
    if isinstance(node, (lp.Aggregate, lp.Window)) and any(
            _has_subquery(e) for e in node.expressions()):
        return _project_subqueries_below(node)
    if isinstance(node, lp.Join) and node.filter is not None and _has_subquery(node.filter):
        return _project_join_subqueries(node)
    for expr in node.expressions():
        if _has_subquery(expr):
            raise NotSupportedError("subqueries are supported in WHERE, HAVING and the SELECT "
                                    f"list; not in {type(node).__name__.lower()} expressions")
    return node


def _project_subqueries_below(node: lp.Aggregate | lp.Window) -> lp.LogicalPlan:
    """GROUP BY keys, aggregate and window arguments (and window keys) holding subqueries
    are computed by a projection under the node (where the projection rule decorrelates
    them) and read as columns."""
    computed: dict[Expr, Column] = {}

    def column_for(expr: Expr) -> Expr:
        if not _has_subquery(expr):
            return expr
        if expr not in computed:
            computed[expr] = Column(next_id(), "__subquery", expr.type)
        return computed[expr]

    def calls(items):
        return tuple(a.with_children(tuple(column_for(c) for c in a.children()))
                     if any(_has_subquery(c) for c in a.children()) else a for a in items)

    if isinstance(node, lp.Window):
        changes = {"windows": calls(node.windows)}
    else:
        changes = {"group_exprs": tuple(column_for(e) for e in node.group_exprs),
                   "aggregates": calls(node.aggregates)}
    below = _rewrite_node(lp.Projection(node.input, node.input.columns + tuple(computed),
                                        node.input.columns + tuple(computed.values())))
    rewritten = replace(node, input=below, **changes)
    if isinstance(node, lp.Window):  # the helper columns stay below: same outputs as before
        return lp.Projection(rewritten, node.columns, node.columns)
    return rewritten


def _project_join_subqueries(node: lp.Join) -> lp.LogicalPlan:
    """An outer join's ON condition with subqueries (an inner join's became a filter over a
    cross join in the binder). A subquery that reads columns of one side only -- or none --
    is computed as a column of that side by a projection (decorrelated as a SELECT list
    is), which adds a column and never changes that side's rows; the condition reads the
    column, and the join's output stays what it was::

        a LEFT JOIN b ON a.k = b.k AND b.v IN (SELECT ...)
          ->  a LEFT JOIN Projection(b, b.*, b.v IN (SELECT ...) AS s) ON a.k = b.k AND s
    """
    left_ids = {c.id for c in node.left.columns}
    right_ids = {c.id for c in node.right.columns}
    computed: tuple[dict[Expr, Column], dict[Expr, Column]] = ({}, {})
    for sub in _outermost_subqueries(node.filter):
        reads = _referenced_ids(sub)
        if reads & left_ids and reads & right_ids:
            return _outer_join_by_distinct_values(node)
        side = computed[1] if reads & right_ids else computed[0]
        side.setdefault(sub, Column(next_id(), "__subquery", sub.type))
    replaced = {sub.plan_key: column for side in computed for sub, column in side.items()}
    condition = transform(node.filter, lambda e: replaced.get(e.plan_key, e)
                          if isinstance(e, SubqueryExpr) else e)

    def with_columns(plan: lp.LogicalPlan, columns: dict[Expr, Column]) -> lp.LogicalPlan:
        if not columns:
            return plan
        return _rewrite_node(lp.Projection(plan, plan.columns + tuple(columns),
                                           plan.columns + tuple(columns.values())))

    joined = replace(node, left=with_columns(node.left, computed[0]),
                     right=with_columns(node.right, computed[1]), filter=condition)
    return lp.Projection(joined, node.columns, node.columns)


def _outer_join_by_distinct_values(node: lp.Join) -> lp.LogicalPlan:
    """An outer join whose ON condition has a subquery reading both sides: the condition is
    evaluated once per pair of distinct values of the columns it reads (Neumann & Kemper's
    duplicate-eliminated sides), as a filter over their cross join, where subqueries
    decorrelate as in WHERE; the preserved sides join those matches back on the values::

        L LEFT JOIN R ON c(L.a, R)
          ->  L' LEFT JOIN Filter(DISTINCT L.a CROSS JOIN R, c)  ON L'.a = a  (NULL = NULL)
        L FULL JOIN R ON c(L.a, R.b)
          ->  M = Filter(DISTINCT L.a CROSS JOIN DISTINCT R.b, c)
              L' LEFT JOIN (M JOIN R' ON b = R'.b) ON L'.a = a
              UNION ALL  (NULLs, R'') ANTI JOIN M' ON R''.b = b

    The distinct relations keep the ids of the columns they group, so the condition (and
    its subqueries' correlation) reads them unchanged; each other use of a side is a
    fresh copy. Grouping and the join back treat NULL = NULL, NaN = NaN and -0.0 = 0.0 as
    one value, as the engine's GROUP BY does.
    """
    left, right = node.left, node.right
    condition = conjunction([Call("eq", (a, b), pa.bool_()) for a, b in node.on] +
                            [node.filter])
    reads = _referenced_ids(condition)
    kind = node.kind

    def distinct(side: lp.LogicalPlan) -> tuple[lp.LogicalPlan, tuple[Column, ...]]:
        keys = tuple(c for c in side.columns if c.id in reads)
        return lp.Aggregate(_distinct_source(side), keys, keys, (), ()), keys

    def copy_of(side: lp.LogicalPlan, keys: tuple[Column, ...]):
        copied = fresh_copy(side)
        at = {c.id: i for i, c in enumerate(side.columns)}
        return copied, tuple(copied.columns[at[k.id]] for k in keys)

    def back(ours: tuple[Column, ...], theirs: tuple[Column, ...]) -> Expr:
        return conjunction([Call("eq", (a, b), pa.bool_()) for a, b in zip(ours, theirs)])

    def matches(left_input: lp.LogicalPlan, right_input: lp.LogicalPlan) -> lp.LogicalPlan:
        return _rewrite_node(lp.Filter(lp.Join(left_input, right_input, "cross"), condition))

    if kind in ("left", "right"):
        preserved, other = (left, right) if kind == "left" else (right, left)
        values, keys = distinct(preserved)
        matched = matches(values, other) if kind == "left" else matches(other, values)
        copied, copied_keys = copy_of(preserved, keys)
        joined = lp.Join(copied, matched, "left", (), back(copied_keys, keys),
                         null_equal=True)
        exprs = copied.columns + other.columns if kind == "left" else \
            other.columns + copied.columns
        return lp.Projection(joined, exprs, node.columns)
    assert kind == "full", kind
    (left_values, left_keys), (right_values, right_keys) = distinct(left), distinct(right)
    matched = matches(left_values, right_values)
    at = {c.id: i for i, c in enumerate(matched.columns)}
    # rows of L, each with its matching rows of R (or none)
    right_copy, right_copy_keys = copy_of(right, right_keys)
    pairs = lp.Join(matched, right_copy, "inner", (), back(right_keys, right_copy_keys),
                    null_equal=True)
    left_copy, left_copy_keys = copy_of(left, left_keys)
    preserved_left = lp.Join(left_copy, pairs, "left", (), back(left_copy_keys, left_keys),
                             null_equal=True)
    first_outputs = tuple(Column(next_id(), c.name, c.type) for c in node.columns)
    first = lp.Projection(preserved_left, left_copy.columns + right_copy.columns,
                          first_outputs)
    # rows of R that match no row of L
    other_matched = fresh_copy(matched)
    other_keys = tuple(other_matched.columns[at[k.id]] for k in right_keys)
    lone_right, lone_right_keys = copy_of(right, right_keys)
    unmatched = lp.Join(lone_right, other_matched, "anti", (),
                        back(lone_right_keys, other_keys), null_equal=True)
    second_outputs = tuple(Column(next_id(), c.name, c.type) for c in node.columns)
    second = lp.Projection(unmatched, tuple(Literal(None, c.type) for c in left.columns) +
                           lone_right.columns, second_outputs)
    return lp.Union((first, second), node.columns)


def _referenced_ids(expr: Expr) -> set[int]:
    """Ids of the columns ``expr`` reads, inside its subqueries' plans too (correlation)."""
    ids: set[int] = set()
    for e in walk(expr):
        if isinstance(e, Column):
            ids.add(e.id)
        elif isinstance(e, SubqueryExpr):
            for inner in _all_expressions(e.plan):
                ids |= _referenced_ids(inner)
    return ids


def _in_single_row_as_comparison(expr: Expr) -> Expr:
    """``x [NOT] IN (S)`` where S returns exactly one row (a global aggregate) is
    ``x = (S)`` / ``x <> (S)``: the scalar path gives an outer row without correlated rows the
    aggregate's empty-group value (SUM NULL, COUNT 0), where a join finds no row (FALSE)."""
    if not (isinstance(expr, SubqueryExpr) and expr.kind == "in" and
            _always_one_row(expr.plan)):
        return expr
    # the same key: BETWEEN repeats its operand, and the one plan is joined once
    value = SubqueryExpr("scalar", expr.plan, expr.plan.columns[0].type,
                         plan_key=expr.plan_key)
    return resolve_operator("neq" if expr.negated else "eq", [expr.needle, value], {})


def _with_plain_needle(plan: lp.LogicalPlan, sub: SubqueryExpr):
    """A scalar subquery inside the left operand of IN joins ``plan`` first."""
    if sub.needle is None or not _has_subquery(sub.needle):
        return plan, sub
    plan, needle = _replace_scalar_subqueries(plan, sub.needle)
    return plan, replace(sub, needle=needle)


def _always_one_row(plan: lp.LogicalPlan) -> bool:
    """An aggregate without GROUP BY (under projections) returns exactly one row, also for
    no input: EXISTS over it is TRUE whatever it correlates with."""
    while isinstance(plan, (lp.Projection, lp.Sort)):
        plan = plan.input
    return isinstance(plan, lp.Aggregate) and not plan.group_exprs


def _semi_anti_join(outer: lp.LogicalPlan, sub: SubqueryExpr) -> lp.LogicalPlan:
    joined = _general(_semi_anti_join_direct, outer, sub)
    return joined if joined.columns == outer.columns else \
        lp.Projection(joined, outer.columns, outer.columns)


def _semi_anti_join_direct(outer: lp.LogicalPlan, sub: SubqueryExpr) -> lp.LogicalPlan:
    outer, sub = _with_plain_needle(outer, sub)
    if sub.kind == "in" and sub.negated and not columns_of(sub.needle):
        # NOT IN with a constant operand has no join key: filter on its three-valued mark
        plan, value = _mark_subquery(outer, sub)
        return lp.Projection(lp.Filter(plan, value), outer.columns, outer.columns)
    inner = decorrelate_subqueries(sub.plan)
    if sub.kind == "exists" and _always_one_row(inner):
        # grouping it by the correlation columns would make EXISTS false for outer rows
        # without correlated rows
        return outer if not sub.negated else lp.Filter(outer, Literal(False, pa.bool_()))
    outer_ids = {c.id for c in outer.columns}
    keep = [inner.columns[0]] if sub.kind == "in" else []
    inner, correlated = _pull_correlated(inner, outer_ids, keep, for_exists=sub.kind == "exists",
                                         outer=outer)
    conditions = list(correlated)
    null_aware = sub.negated and sub.kind == "in"
    if sub.kind == "in":
        match = Call("eq", (sub.needle, inner.columns[0]), pa.bool_())
        if null_aware and correlated:
            # x NOT IN (SELECT y ... WHERE corr) is NOT EXISTS (... WHERE corr AND (x = y OR
            # y IS NULL OR x IS NULL)): a NULL only matters among the rows that correlate,
            # which the null-aware hash join (NULL anywhere in the build side) cannot tell

            match = resolve_operator("or", [
                match, resolve_operator("is_null", [inner.columns[0]], {}),
                resolve_operator("is_null", [sub.needle], {})], {})
            null_aware = False
        # after the correlation: x is computed only for the rows that correlate (AND and a
        # hash join's keys are evaluated lazily when one raises), as DuckDB does
        conditions.append(match)
    kind = "anti" if sub.negated else "semi"
    return lp.Join(outer, inner, kind, (), conjunction(conditions), null_aware=null_aware)


def _replace_scalar_subqueries(plan: lp.LogicalPlan, expr: Expr):
    """Left-join every scalar subquery of ``expr`` to ``plan``; return (plan, rewritten)."""
    plan, (rewritten,) = _replace_subqueries(plan, [expr])
    return plan, rewritten


def _replace_subqueries(plan: lp.LogicalPlan, exprs: list[Expr]):
    """Join every subquery of ``exprs`` to ``plan`` once (a subquery may appear in several
    of them); return (plan, the rewritten expressions)."""
    mapping: dict[int, Expr] = {}
    found: dict[int, SubqueryExpr] = {}
    for expr in exprs:
        for sub in _outermost_subqueries(expr):
            found.setdefault(sub.plan_key, sub)
    for sub in found.values():
        if sub.kind != "scalar":
            plan, mapping[sub.plan_key] = _mark_subquery(plan, sub)
        else:
            plan, mapping[sub.plan_key] = _general(_join_scalar, plan, sub)

    def swap(e: Expr) -> Expr:  # top-down: an IN operand's subquery went with its IN
        if isinstance(e, SubqueryExpr):
            return mapping[e.plan_key]
        children = e.children()
        new = tuple(swap(c) for c in children)
        return e.with_children(new) if any(a is not b for a, b in zip(new, children)) else e
    return plan, [swap(e) for e in exprs]


def _general(direct, plan: lp.LogicalPlan, sub: SubqueryExpr):
    """``direct(plan, sub)``; where that cannot decorrelate ``sub`` (NotSupportedError), the
    same after the dependent join is pushed down into ``sub`` (``_through_domain``)."""
    try:
        if not produced_ids(sub.plan) & produced_ids(plan):
            return direct(plan, sub)
        # the subquery passes an outer column through as its own (SELECT o.x): the direct
        # paths would join two definitions of one id
        raise NotSupportedError("a subquery selecting an outer column")
    except NotSupportedError:
        general = _through_domain(plan, sub)
        if general is None:
            raise
    return direct(*general)


def _through_domain(plan: lp.LogicalPlan, sub: SubqueryExpr):
    """(plan with D's key, ``sub`` correlated by that key alone): D = DISTINCT the outer
    columns ``sub`` reads anywhere, the subquery pushed down to run for every row of D
    (engine/optimizer/dependent_join.py); each outer row finds its D row by a null-equal
    join on the values. None when ``sub`` reads no column of ``plan``'s output."""
    produced = produced_ids(plan)
    reads = referenced_ids(sub.plan) & produced
    outer = [c for c in plan.columns if c.id in reads]
    if not outer or len(outer) < len(reads):
        return None
    domain = domain_of(_distinct_source(plan), outer)
    pushed, mapping, key = push_down(sub.plan, domain)
    keyed = lp.Join(plan, domain.plan, "left", (), conjunction(
        [Call("eq", (o, v), pa.bool_()) for o, v in zip(domain.outer, domain.values)]),
        null_equal=True)
    correlated = lp.Filter(pushed, Call("eq", (key, domain.key), pa.bool_()))
    body = lp.Projection(correlated, tuple(mapping.get(c.id, c) for c in sub.plan.columns),
                         tuple(Column(next_id(), c.name, c.type) for c in sub.plan.columns))
    return keyed, replace(sub, plan=body)


def _join_scalar(plan: lp.LogicalPlan, sub: SubqueryExpr) -> tuple[lp.LogicalPlan, Expr]:
    """Left-join the scalar subquery ``sub`` to ``plan``; return (plan, its value)."""
    inner = decorrelate_subqueries(sub.plan)
    outer_ids = produced_ids(plan)
    value = inner.columns[0]
    grouped: list[lp.Aggregate] = []
    try:
        inner, correlated = _pull_correlated(inner, outer_ids, [value], for_exists=False,
                                             grouped=grouped, outer=plan)
    except NotSupportedError:
        general = _dependent_aggregate(plan, inner, outer_ids)
        if general is None:
            raise
        return general
    if not grouped:
        inner, value, correlated = _at_most_one_row(inner, value, correlated)
    empty = _empty_group_value(inner, value, grouped) if grouped else None
    if correlated and empty is not None:
        # rows without a correlated match get the subquery's value over an empty group
        # (COUNT = 0, coalesce(sum(x), 0) = 0, ...), not the left join's NULL

        marker = Column(next_id(), "__matched", pa.bool_())
        inner = lp.Projection(inner, inner.columns + (Literal(True, pa.bool_()),),
                              inner.columns + (marker,))
        plan = lp.Join(plan, inner, "left", (), conjunction(correlated))
        unmatched = resolve_operator("is_null", [marker], {})
        return plan, bind_case([unmatched], [empty], value)
    if correlated:
        plan = lp.Join(plan, inner, "left", (), conjunction(correlated))
    else:
        # uncorrelated: one value for every row (at most one row: _at_most_one_row)
        plan = lp.Join(plan, inner, "left", (), None)
    return plan, value


def _dependent_aggregate(plan: lp.LogicalPlan, inner: lp.LogicalPlan, outer_ids: set[int]
                         ) -> tuple[lp.LogicalPlan, Expr] | None:
    """A scalar aggregate subquery correlated by any predicates, unnested the general way
    (Neumann & Kemper, "Unnesting Arbitrary Queries"): the aggregate is computed once per
    distinct value of the outer columns it reads, over a join with those values, and joined
    back to the outer rows.

        outer ⟕ (outer cols ≐ D) Aggregate[D; aggs](D ⟕ (predicates[outer := D]) body)
        D = DISTINCT outer cols of ``plan``

    Every outer row finds exactly its D row, so an empty group gives the aggregates' empty
    value by itself (COUNT 0, SUM NULL): every aggregate is filtered on a marker that the
    left join's padding row lacks.
    None when ``inner`` is not projections over a global aggregate.
    """
    projections = []
    node = inner
    while isinstance(node, lp.Projection):
        projections.append(node)
        node = node.input
    if not isinstance(node, lp.Aggregate) or node.group_exprs:
        return None
    body, pulled = _pull_correlated(node.input, outer_ids, [], for_exists=False, outer=plan)
    if not pulled:
        return None
    outer_columns = list({e.id: e for p in pulled for e in walk(p)
                          if isinstance(e, Column) and e.id in outer_ids}.values())
    distinct = tuple(Column(next_id(), c.name, c.type) for c in outer_columns)
    values = lp.Aggregate(_distinct_source(plan), tuple(outer_columns), distinct, (), ())
    to_distinct = {c.id: d for c, d in zip(outer_columns, distinct)}
    marker = Column(next_id(), "__present", pa.bool_())
    marked = lp.Projection(body, body.columns + (Literal(True, pa.bool_()),),
                           body.columns + (marker,))
    joined = lp.Join(values, marked, "left", (),
                     conjunction([replace_columns(p, to_distinct) for p in pulled]))
    # the left join's padding row (a D value without inner rows) is no input row: every
    # aggregate skips it, also one whose argument is not NULL there (sum(2), count(*))
    aggregates = tuple(replace(a, filter=marker if a.filter is None else
                               resolve_operator("and", [a.filter, marker], {}))
                       for a in node.aggregates)
    top: lp.LogicalPlan = lp.Aggregate(joined, distinct, distinct, aggregates,
                                       node.aggregate_outputs)
    for projection in reversed(projections):
        top = lp.Projection(top, projection.exprs + distinct, projection.outputs + distinct)
    back = conjunction([resolve_operator("eq", [c, d], {}) for c, d in
                        zip(outer_columns, distinct)])
    return lp.Join(plan, top, "left", (), back, null_equal=True), inner.columns[0]


def _distinct_source(plan: lp.LogicalPlan) -> lp.LogicalPlan:
    """``plan`` for a duplicate-eliminated relation D of its columns: without the filter
    conjuncts that read columns from further out (which would leave D correlated, and not
    unnestable), where that only adds rows. D may hold extra values: the join back on them
    still finds every row of ``plan`` its own. Dropped only through operators that keep
    every row they are given (filter, projection, inner/cross join, a left join's left
    side); a correlated conjunct anywhere else leaves ``plan`` as it is."""

    def strip(node: lp.LogicalPlan) -> lp.LogicalPlan:
        if isinstance(node, lp.Filter):
            child = strip(node.input)
            inside = produced_ids(child)
            kept = conjunction([c for c in split_conjunction(node.predicate)
                                if columns_of(c) <= inside])
            return lp.Filter(child, kept) if kept is not None else child
        if isinstance(node, lp.Projection):
            return replace(node, input=strip(node.input))
        if isinstance(node, lp.Join) and node.kind in ("inner", "cross"):
            return replace(node, left=strip(node.left), right=strip(node.right))
        if isinstance(node, lp.Join) and node.kind == "left":
            return replace(node, left=strip(node.left))
        return node

    stripped = strip(plan)
    inside = produced_ids(stripped)
    if any(columns_of(e) - inside for e in _all_expressions(stripped)):
        return plan
    return stripped


def _outermost_subqueries(expr: Expr) -> list[SubqueryExpr]:
    """The subqueries of ``expr`` not inside another one's IN operand (the IN rewrite joins
    those), each once: an expression may hold one subquery twice (BETWEEN expands to two
    comparisons of the same operand), and joining it twice would repeat its columns."""
    found: dict[int, SubqueryExpr] = {}

    def visit(e: Expr) -> None:
        if isinstance(e, SubqueryExpr):
            found.setdefault(e.plan_key, e)
            return
        for child in e.children():
            visit(child)
    visit(expr)
    return list(found.values())


def _at_most_one_row(inner: lp.LogicalPlan, value: Column, correlated: list[Expr]):
    """A scalar subquery that may return several rows (per outer row) becomes one row per
    correlation key, with its row count: ``single_row_value`` raises for more than one, where a
    plain left join would repeat the outer row. Returns (plan, value expression, conditions).

    Plans that cannot return two rows are left alone (an aggregate without GROUP BY, LIMIT 1),
    and so are non-equality correlations (not checked yet).
    """

    node = inner
    while isinstance(node, (lp.Projection, lp.Sort)):
        node = node.input
    if (isinstance(node, lp.Aggregate) and not node.group_exprs) or (
            isinstance(node, lp.Limit) and node.fetch is not None and node.fetch <= 1):
        return inner, value, correlated
    inner_ids = produced_ids(inner)
    pairs = []
    for predicate in correlated:
        inner_side = _equality_inner_side(predicate, inner_ids)
        if inner_side is None:
            return inner, value, correlated
        pairs.append((inner_side, next(a for a in predicate.args if a is not inner_side)))
    keys = tuple(Column(next_id(), "__key", i.type) for i, _ in pairs)
    rows = Column(next_id(), "__rows", pa.int64())
    single = Column(next_id(), value.name, value.type)
    counted = lp.Aggregate(inner, tuple(i for i, _ in pairs), keys,
                           (AggregateCall("count_star", (), pa.int64()),
                            AggregateCall("any_value", (value,), value.type)), (rows, single))
    conditions = [Call("eq", (outer, key), pa.bool_()) for (_, outer), key in zip(pairs, keys)]
    return counted, Call("single_row_value", (rows, single), value.type), conditions


def _mark_subquery(plan: lp.LogicalPlan, sub: SubqueryExpr) -> tuple[lp.LogicalPlan, Expr]:
    return _general(_mark_subquery_direct, plan, sub)


def _mark_subquery_direct(plan: lp.LogicalPlan, sub: SubqueryExpr
                          ) -> tuple[lp.LogicalPlan, Expr]:
    """EXISTS / IN as a value (in the SELECT list, under OR, CASE, ...): left joins that
    cannot add rows, and a three-valued result.

        EXISTS (S WHERE i = o)   ->  left join DISTINCT i of S, marked   => marker IS NOT NULL
        x IN (SELECT y FROM S WHERE i = o)
            -> left join DISTINCT (i, y) of S on i = o AND y = x         => matched
               left join (i, count(*) n, count(y) nn) of S on i = o      => n, nn
               CASE WHEN matched THEN TRUE WHEN n is 0 or NULL THEN FALSE
                    WHEN x IS NULL OR n > nn THEN NULL ELSE FALSE END

    Correlation must be through equalities (inner = outer); other shapes raise
    NotSupportedError.
    """

    def op(name: str, *args: Expr) -> Expr:
        return resolve_operator(name, list(args), {})

    plan, sub = _with_plain_needle(plan, sub)
    inner = decorrelate_subqueries(sub.plan)
    if sub.kind == "exists" and _always_one_row(inner):
        return plan, Literal(not sub.negated, pa.bool_())
    keep = [inner.columns[0]] if sub.kind == "in" else []
    inner, correlated = _pull_correlated(inner, produced_ids(plan), keep,
                                         for_exists=sub.kind == "exists", outer=plan)
    inner_ids = produced_ids(inner)
    pairs = []
    for predicate in correlated:
        inner_side = _equality_inner_side(predicate, inner_ids)
        if inner_side is None:  # any other correlation: through counts, unnested in general
            return _mark_by_counts(plan, sub)
        outer_side = next(a for a in predicate.args if a is not inner_side)
        pairs.append((inner_side, outer_side))

    def distinct_of(exprs: list[Expr]) -> tuple[lp.LogicalPlan, list[Column], Column]:
        outputs = [Column(next_id(), "__key", e.type) for e in exprs]
        grouped = lp.Aggregate(inner, tuple(exprs), tuple(outputs), (), ())
        marker = Column(next_id(), "__matched", pa.bool_())
        marked = lp.Projection(grouped, tuple(outputs) + (Literal(True, pa.bool_()),),
                               tuple(outputs) + (marker,))
        return marked, outputs, marker

    def on(keys: list[Column]) -> Expr | None:
        return conjunction([op("eq", outer, key) for (_, outer), key in zip(pairs, keys)])

    if sub.kind == "exists":
        if pairs:
            marked, keys, marker = distinct_of([i for i, _ in pairs])
            plan = lp.Join(plan, marked, "left", (), on(keys))
            value = op("is_not_null", marker)
        else:  # uncorrelated: one count for all rows
            count = Column(next_id(), "__rows", pa.int64())
            counted = lp.Aggregate(inner, (), (), (AggregateCall("count_star", (), pa.int64()),),
                                   (count,))
            plan = lp.Join(plan, counted, "left", (), None)
            value = op("gt", count, Literal(0, pa.int64()))
        return plan, (op("not", value) if sub.negated else value)

    needle, candidate = sub.needle, inner.columns[0]
    marked, keys, marker = distinct_of([i for i, _ in pairs] + [candidate])
    condition = conjunction([c for c in (on(keys[:-1]), op("eq", needle, keys[-1]))
                             if c is not None])
    plan = lp.Join(plan, marked, "left", (), condition)
    rows, values = Column(next_id(), "__rows", pa.int64()), Column(next_id(), "__values",
                                                                   pa.int64())
    group_outputs = tuple(Column(next_id(), "__key", i.type) for i, _ in pairs)
    stats = lp.Aggregate(inner, tuple(i for i, _ in pairs), group_outputs,
                         (AggregateCall("count_star", (), pa.int64()),
                          AggregateCall("count", (candidate,), pa.int64())), (rows, values))
    plan = lp.Join(plan, stats, "left", (), on(list(group_outputs)))
    empty = op("or", op("is_null", rows), op("eq", rows, Literal(0, pa.int64())))
    # a NULL among the values first: then x is not computed (OR evaluates lazily when it raises)
    unknown = op("or", op("gt", rows, values), op("is_null", needle))
    value = bind_case([op("is_not_null", marker), empty, unknown],
                      [Literal(True, pa.bool_()), Literal(False, pa.bool_()),
                       Literal(None, pa.bool_())], Literal(False, pa.bool_()))
    return plan, (op("not", value) if sub.negated else value)


def _mark_by_counts(plan: lp.LogicalPlan, sub: SubqueryExpr) -> tuple[lp.LogicalPlan, Expr]:
    """EXISTS / IN as a value through scalar COUNT subqueries, which decorrelate whatever
    the correlation (``_dependent_aggregate``)::

        EXISTS (S)  ->  (SELECT count(*) FROM S) > 0
        x IN (SELECT y FROM S)  ->  CASE WHEN (SELECT count(*) FROM S WHERE y = x) > 0 THEN TRUE
                                         WHEN (SELECT count(*) FROM S) = 0 THEN FALSE
                                         WHEN x IS NULL OR count(*) > count(y) THEN NULL
                                         ELSE FALSE END
    """
    def op(name: str, *args: Expr) -> Expr:
        return resolve_operator(name, list(args), {})

    def count(source: lp.LogicalPlan, args: tuple[Expr, ...] = ()) -> SubqueryExpr:
        output = Column(next_id(), "__count", pa.int64())
        call = AggregateCall("count" if args else "count_star", args, pa.int64())
        return SubqueryExpr("scalar", lp.Aggregate(source, (), (), (call,), (output,)),
                            pa.int64())

    zero = Literal(0, pa.int64())
    inner = decorrelate_subqueries(sub.plan)
    if sub.kind == "exists":
        value = op("gt", count(inner), zero)
    else:
        # three subqueries over S, each with its own column ids (joined side by side)
        copies = [fresh_copy(inner) for _ in range(3)]
        hits = count(lp.Filter(copies[0], op("eq", sub.needle, copies[0].columns[0])))
        rows, values = count(copies[1]), count(copies[2], (copies[2].columns[0],))
        value = bind_case(
            [op("gt", hits, zero), op("eq", rows, zero),
             op("or", op("gt", rows, values), op("is_null", sub.needle))],
            [Literal(True, pa.bool_()), Literal(False, pa.bool_()), Literal(None, pa.bool_())],
            Literal(False, pa.bool_()))
    plan, value = _replace_scalar_subqueries(plan, value)
    return plan, (op("not", value) if sub.negated else value)


def _pull_correlated(plan: lp.LogicalPlan, outer_ids: set[int], keep: list[Column],
                     for_exists: bool, grouped: list[lp.Aggregate] | None = None,
                     outer: lp.LogicalPlan | None = None
                     ) -> tuple[lp.LogicalPlan, list[Expr]]:
    """Remove correlated predicates from ``plan``; return the plan and those predicates.

    An aggregate without GROUP BY that correlates becomes grouped by the correlation
    columns; with ``grouped`` given (scalar subqueries), such aggregates are appended to it and
    the caller supplies the empty-group value, else COUNT raises NotSupportedError.
    ``outer`` (the plan producing ``outer_ids``) lets a LIMIT correlated by any predicate be
    computed per distinct outer value (``_limit_per_outer_value``).
    """
    inner_ids = produced_ids(plan)

    def is_correlated(e: Expr) -> bool:
        return bool(columns_of(e) - inner_ids)

    def pull(node: lp.LogicalPlan) -> tuple[lp.LogicalPlan, list[Expr]]:
        if isinstance(node, lp.Filter):
            child, pulled = pull(node.input)
            local, corr = [], []
            for c in split_conjunction(node.predicate):
                (corr if is_correlated(c) else local).append(c)
            predicate = conjunction(local)
            node = lp.Filter(child, predicate) if predicate is not None else child
            return node, pulled + corr
        if isinstance(node, lp.Projection):
            child, pulled = pull(node.input)
            if not pulled:
                return replace(node, input=child), []
            if for_exists:
                return child, pulled  # EXISTS ignores the select list
            have = {o.id for o in node.outputs}
            needed = [c for p in pulled for c in _inner_columns(p, inner_ids)
                      if c.id not in have]
            needed = list({c.id: c for c in needed}.values())
            return lp.Projection(child, node.exprs + tuple(needed),
                                 node.outputs + tuple(needed)), pulled
        if isinstance(node, lp.Aggregate):
            child, pulled = pull(node.input)
            if not pulled:
                return replace(node, input=child), []
            groups, outputs = list(node.group_exprs), list(node.group_outputs)
            for p in pulled:
                inner_side = _equality_inner_side(p, inner_ids)
                if inner_side is None:
                    raise NotSupportedError(
                        "a correlated subquery with an aggregate may only correlate through "
                        f"equality conditions (inner = outer); found: {p}")
                for column in _inner_columns(p, inner_ids):
                    if column.id not in {o.id for o in outputs}:
                        groups.append(column)
                        outputs.append(column)
            scalar = not node.group_exprs and node.aggregates
            if scalar and grouped is None:
                # an empty correlated group must still yield COUNT = 0 / SUM = NULL; a join
                # drops the row instead, which differs for COUNT
                if any(capabilities(a.func).count_like for a in node.aggregates):
                    raise NotSupportedError("correlated IN / EXISTS subqueries with COUNT are "
                                            "not supported yet")
            new_node = replace(node, input=child, group_exprs=tuple(groups),
                               group_outputs=tuple(outputs))
            if scalar and grouped is not None:
                grouped.append(new_node)
            return new_node, pulled
        if isinstance(node, (lp.Sort,)):
            child, pulled = pull(node.input)
            return replace(node, input=child), pulled
        if isinstance(node, lp.Limit):
            return pull_limit(node)
        if isinstance(node, lp.Join) and node.kind in ("inner", "cross"):
            left, pl = pull(node.left)
            right, pr = pull(node.right)
            return replace(node, left=left, right=right), pl + pr
        if isinstance(node, lp.Join) and node.kind in ("semi", "anti", "left"):
            # these joins pass left rows through (filtered or extended): a predicate on the
            # left input commutes with them
            left, pl = pull(node.left)
            return replace(node, left=left), pl
        return node, []

    def pull_limit(node: lp.Limit) -> tuple[lp.LogicalPlan, list[Expr]]:
        """LIMIT (after ORDER BY) per correlated group: ``row_number() OVER (PARTITION BY
        the inner sides of the correlating equalities ORDER BY ...)`` within the limit."""
        below = node.input
        sort = below if isinstance(below, lp.Sort) and below.fetch is None else None
        child, pulled = pull(sort.input if sort is not None else below)
        if not pulled:
            rebuilt = replace(sort, input=child) if sort is not None else child
            return replace(node, input=rebuilt), []
        partition = []
        for p in pulled:
            if not columns_of(p) & inner_ids:
                continue  # outer columns only: the same for every inner row
            inner_side = _equality_inner_side(p, inner_ids)
            if inner_side is None:
                return limit_per_outer_value(node, sort, child, pulled)
            partition.append(inner_side)
        return numbered(node, sort, child, tuple(partition)), pulled

    def numbered(node: lp.Limit, sort: lp.Sort | None, child: lp.LogicalPlan,
                 partition: tuple[Expr, ...]) -> lp.LogicalPlan:
        number = Column(next_id(), "__row", pa.int64())
        window = lp.Window(child, (WindowCall("row_number", (), pa.int64(), tuple(partition),
                                              sort.keys if sort is not None else ()),),
                           (number,))
        bounds = [resolve_operator("gt", [number, Literal(node.skip, pa.int64())], {})]
        if node.fetch is not None:
            bounds.append(resolve_operator(
                "lte", [number, Literal(node.skip + node.fetch, pa.int64())], {}))
        kept = lp.Filter(window, conjunction(bounds))
        return lp.Projection(kept, child.columns, child.columns)

    def limit_per_outer_value(node: lp.Limit, sort: lp.Sort | None, child: lp.LogicalPlan,
                              pulled: list[Expr]) -> tuple[lp.LogicalPlan, list[Expr]]:
        """A LIMIT correlated by any predicate (``i.x < o.y``): the dependent join pushed
        down to it (Neumann & Kemper), with D = DISTINCT outer columns the predicates read::

            Limit(n, Sort(k, Filter(body, p(i, o))))
              ->  row_number() OVER (PARTITION BY D ORDER BY k) <= n over
                  Join(D, body, p(i, D)),  correlated by o = D

        The join back is a plain equality: it is exact when every predicate is NULL on a
        NULL outer column (a comparison with the bare column), as then an outer row with a
        NULL matches no inner row either way; other predicates stay NotSupportedError.
        """
        local = [p for p in pulled if columns_of(p) & inner_ids]
        rest = [p for p in pulled if not columns_of(p) & inner_ids]
        reads = {c.id: c for p in local for c in walk(p)
                 if isinstance(c, Column) and c.id not in inner_ids}
        if outer is None or not set(reads) <= outer_ids or not all(
                _null_on_null_outer(p, inner_ids) for p in local):
            raise NotSupportedError("a correlated subquery with LIMIT may only correlate "
                                    f"through equality or comparison conditions; found: "
                                    f"{conjunction(local)}")
        outer_columns = list(reads.values())
        distinct = tuple(Column(next_id(), c.name, c.type) for c in outer_columns)
        values = lp.Aggregate(_distinct_source(outer), tuple(outer_columns), distinct, (), ())
        to_distinct = {c.id: d for c, d in zip(outer_columns, distinct)}
        joined = lp.Join(values, child, "inner", (),
                         conjunction([replace_columns(p, to_distinct) for p in local]))
        limited = numbered(node, sort, joined, distinct)
        inner_ids.update(d.id for d in distinct)  # read by the pulled equalities
        back = [resolve_operator("eq", [c, d], {}) for c, d in zip(outer_columns, distinct)]
        return limited, rest + back

    new_plan, pulled = pull(plan)
    leftover = produced_ids(new_plan)
    for node_expr in _all_expressions(new_plan):
        if columns_of(node_expr) - leftover - inner_ids:
            raise NotSupportedError(
                "this correlated subquery is not supported: outer columns may only be "
                f"referenced in its WHERE conditions (found {node_expr})")
    return new_plan, pulled


def _empty_group_value(plan: lp.LogicalPlan, value: Column, grouped: list[lp.Aggregate]
                       ) -> Expr | None:
    """The value of a decorrelated scalar subquery for an outer row without correlated rows:
    its select expression over the aggregates of an empty group (COUNT 0, others NULL).
    None when that is NULL (the left join's NULL is then right)."""

    counts = any(capabilities(a.func).count_like for g in grouped for a in g.aggregates)
    expr: Expr = value
    node = plan
    while isinstance(node, lp.Projection):
        expr = replace_columns(expr, {o.id: e for o, e in zip(node.outputs, node.exprs)})
        node = node.input
    if not (isinstance(node, lp.Aggregate) and any(node is g for g in grouped)):
        if counts:
            raise NotSupportedError("correlated scalar subqueries with COUNT under HAVING, "
                                    "ORDER BY or LIMIT are not supported yet")
        return None
    empty: dict[int, Expr] = {o.id: Literal(None, o.type) for o in node.group_outputs}
    for call, output in zip(node.aggregates, node.aggregate_outputs):
        empty[output.id] = Literal(0, output.type) if capabilities(call.func).count_like \
            else Literal(None, output.type)
    expr = fold(replace_columns(expr, empty))
    if columns_of(expr):
        return None if not counts else _not_supported_empty_value(expr)
    if isinstance(expr, Literal) and expr.value is None:
        return None
    return expr


def _not_supported_empty_value(expr: Expr):
    raise NotSupportedError("this correlated scalar subquery with COUNT is not supported yet: "
                            f"its value for an empty group depends on {expr}")


def _all_expressions(plan: lp.LogicalPlan):
    yield from plan.expressions()
    for child in plan.inputs():
        yield from _all_expressions(child)


def _inner_columns(expr: Expr, inner_ids: set[int]) -> list[Column]:
    return [e for e in walk(expr) if isinstance(e, Column) and e.id in inner_ids]


_COMPARISONS = ("eq", "neq", "lt", "lte", "gt", "gte")


def _null_on_null_outer(expr: Expr, inner_ids: set[int]) -> bool:
    """``expr`` is a comparison whose outer operands are columns (under casts): NULL (so not
    TRUE) whenever one of those columns is NULL."""
    if not (isinstance(expr, Call) and expr.func in _COMPARISONS):
        return False

    def strict(a: Expr) -> bool:
        while isinstance(a, Cast):
            a = a.expr
        return isinstance(a, Column)
    return all(strict(a) or not (columns_of(a) - inner_ids) for a in expr.args)


def _equality_inner_side(expr: Expr, inner_ids: set[int]) -> Expr | None:
    if isinstance(expr, Call) and expr.func == "eq":
        a, b = expr.args
        if columns_of(a) <= inner_ids and not (columns_of(b) & inner_ids):
            return a
        if columns_of(b) <= inner_ids and not (columns_of(a) & inner_ids):
            return b
    return None
