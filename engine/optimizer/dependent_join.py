"""The dependent join pushed down (Neumann & Kemper, "Unnesting Arbitrary Queries", BTW 2015).

A subquery that reads outer columns O anywhere (its SELECT list, an aggregate's argument, a
LIMIT's correlation by a predicate that holds for NULL, a nested subquery reading two levels
up) is computed once per distinct value of O. D = DISTINCT O, each row numbered by a
non-NULL key ``__domain``; ``push_down`` rewrites the subquery so that it runs for every row
of D at once, reading D's columns instead of the outer ones, and outputs D's key next to
its own columns::

    Filter(p(o), T)          ->  Filter(p(d), D x T)
    Aggregate(aggs, S(o))    ->  Aggregate[d, key](aggs over D LEFT JOIN S(d) ON key)
    Limit(n, Sort(k, S(o)))  ->  row_number() OVER (PARTITION BY key ORDER BY k) <= n
    S(o) JOIN T(o)           ->  S(d) JOIN T(d) ON ... AND key = key

The result is correlated with the outer rows by ``key = outer key`` only, a plain equality
the equality paths of decorrelation handle; the outer rows find their key by a null-equal
join with D on O. D is a fresh copy (new column ids) wherever a leaf needs it; its numbering
orders by every column, so every copy numbers each value alike.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pyarrow as pa

from plansight.engine.errors import NotSupportedError
from plansight.engine.functions.scalar import resolve_operator
from plansight.engine.logical import plan as lp
from plansight.engine.logical.expr import (
    Call,
    Column,
    Expr,
    Literal,
    SortKey,
    SubqueryExpr,
    WindowCall,
    conjunction,
    next_id,
    transform,
    walk,
)
from plansight.engine.optimizer.rewrite import fresh_copy, map_expressions


@dataclass(frozen=True)
class Domain:
    """D: ``plan`` outputs ``values`` (one per outer column, in ``outer`` order) and ``key``."""

    plan: lp.LogicalPlan
    outer: tuple[Column, ...]
    values: tuple[Column, ...]
    key: Column


def domain_of(source: lp.LogicalPlan, outer: list[Column]) -> Domain:
    """DISTINCT ``outer`` of ``source``, numbered in the order of all its columns."""
    values = tuple(Column(next_id(), c.name, c.type) for c in outer)
    distinct = lp.Aggregate(source, tuple(outer), values, (), ())
    key = Column(next_id(), "__domain", pa.int64())
    order = tuple(SortKey(v, False, False) for v in values)
    numbered = lp.Window(distinct, (WindowCall("row_number", (), pa.int64(), (), order),),
                         (key,))
    return Domain(numbered, tuple(outer), values, key)


def referenced_ids(plan: lp.LogicalPlan) -> set[int]:
    """Ids of the columns any expression of ``plan`` reads, nested subqueries included."""
    ids: set[int] = set()
    for node in _nodes(plan):
        for expr in node.expressions():
            for e in walk(expr):
                if isinstance(e, Column):
                    ids.add(e.id)
                elif isinstance(e, SubqueryExpr):
                    ids |= referenced_ids(e.plan)
    return ids


def _nodes(plan: lp.LogicalPlan):
    yield plan
    for child in plan.inputs():
        yield from _nodes(child)


def remap_plan(plan: lp.LogicalPlan, mapping: dict[int, Column]) -> lp.LogicalPlan:
    """``plan`` reading ``mapping[id]`` for each column id it maps, in nested subqueries too."""
    return lp.transform_plan(plan, lambda n: map_expressions(n, lambda e: remap(e, mapping)))


def remap(expr: Expr, mapping: dict[int, Column]) -> Expr:
    def fn(e: Expr) -> Expr:
        if isinstance(e, Column):
            return mapping.get(e.id, e)
        if isinstance(e, SubqueryExpr):
            return replace(e, plan=remap_plan(e.plan, mapping))
        return e
    return transform(expr, fn)


# A pushed-down plan: the plan, where each outer column id is read from now, and D's key.
Pushed = tuple[lp.LogicalPlan, dict[int, Column], Column]


def push_down(plan: lp.LogicalPlan, domain: Domain) -> Pushed:
    """``plan`` computed for every row of D (see the module docstring)."""
    outer_ids = {c.id for c in domain.outer}
    return _Pusher(domain, outer_ids).push(plan)


class _Pusher:
    def __init__(self, domain: Domain, outer_ids: set[int]):
        self.domain, self.outer_ids = domain, outer_ids

    def reads_outer(self, plan: lp.LogicalPlan) -> bool:
        return bool(referenced_ids(plan) & self.outer_ids)

    def renamed(self, outputs: tuple[Column, ...]) -> tuple[Column, ...]:
        """An outer column passed through as an output (``SELECT o.x``) gets a new id: the
        subquery's plan may not define an id the outer plan defines; references to it above
        read D's column, which holds the same value."""
        return tuple(Column(next_id(), c.name, c.type) if c.id in self.outer_ids else c
                     for c in outputs)

    def copy_domain(self) -> Pushed:
        """A copy of D with new column ids (a plan may hold D several times)."""
        copy = fresh_copy(self.domain.plan)
        at = {c.id: i for i, c in enumerate(self.domain.plan.columns)}
        mapping = {o.id: copy.columns[at[v.id]] for o, v in zip(self.domain.outer,
                                                                 self.domain.values)}
        return copy, mapping, copy.columns[at[self.domain.key.id]]

    def cross(self, plan: lp.LogicalPlan) -> Pushed:
        copy, mapping, key = self.copy_domain()
        return lp.Join(copy, plan, "cross"), mapping, key

    def push(self, node: lp.LogicalPlan) -> Pushed:
        if not self.reads_outer(node):
            return self.cross(node)
        if isinstance(node, lp.Filter):
            child, mapping, key = self.push(node.input)
            return lp.Filter(child, remap(node.predicate, mapping)), mapping, key
        if isinstance(node, lp.Projection):
            child, mapping, key = self.push(node.input)
            carried = tuple(mapping.values()) + (key,)
            return (lp.Projection(child, tuple(remap(e, mapping) for e in node.exprs) + carried,
                                  self.renamed(node.outputs) + carried), mapping, key)
        if isinstance(node, lp.Aggregate):
            return self.aggregate(node)
        if isinstance(node, lp.Window):
            child, mapping, key = self.push(node.input)
            windows = tuple(remap(call, mapping) for call in node.windows)
            windows = tuple(replace(w, partition_by=w.partition_by + (key,)) for w in windows)
            return lp.Window(child, windows, node.window_outputs), mapping, key
        if isinstance(node, lp.Sort) and node.fetch is None:
            child, mapping, key = self.push(node.input)
            return replace(node, input=child, keys=tuple(
                SortKey(remap(k.expr, mapping), k.descending, k.nulls_first)
                for k in node.keys)), mapping, key
        if isinstance(node, lp.Sort):
            return self.limit(node.input, node.keys, 0, node.fetch)
        if isinstance(node, lp.Limit):
            below = node.input
            if isinstance(below, lp.Sort) and below.fetch is None:
                return self.limit(below.input, below.keys, node.skip, node.fetch)
            return self.limit(below, (), node.skip, node.fetch)
        if isinstance(node, lp.Join):
            return self.join(node)
        if isinstance(node, lp.Union):
            return self.union(node)
        raise NotSupportedError(f"an outer reference inside a {type(node).__name__} of a "
                                "correlated subquery is not supported")

    def aggregate(self, node: lp.Aggregate) -> Pushed:
        child, mapping, key = self.push(node.input)
        aggregates = tuple(remap(a, mapping) for a in node.aggregates)
        groups = tuple(remap(g, mapping) for g in node.group_exprs)
        carried = tuple(mapping.values()) + (key,)
        if node.group_exprs:
            return (lp.Aggregate(child, groups + carried,
                                 self.renamed(node.group_outputs) + carried,
                                 aggregates, node.aggregate_outputs), mapping, key)
        # a global aggregate has one row per D value, also for no input rows: D LEFT JOIN
        # the input, each aggregate skipping the padding row (COUNT 0, SUM NULL)
        marker = Column(next_id(), "__present", pa.bool_())
        marked = lp.Projection(child, child.columns + (Literal(True, pa.bool_()),),
                               child.columns + (marker,))
        domain, domain_mapping, domain_key = self.copy_domain()
        joined = lp.Join(domain, marked, "left", ((domain_key, key),))
        filtered = tuple(replace(a, filter=marker if a.filter is None else
                                 resolve_operator("and", [a.filter, marker], {}))
                         for a in aggregates)
        carried = tuple(domain_mapping.values()) + (domain_key,)
        return (lp.Aggregate(joined, carried, carried, filtered, node.aggregate_outputs),
                domain_mapping, domain_key)

    def limit(self, below: lp.LogicalPlan, keys: tuple[SortKey, ...], skip: int,
              fetch: int | None) -> Pushed:
        child, mapping, key = self.push(below)
        number = Column(next_id(), "__row", pa.int64())
        order = tuple(SortKey(remap(k.expr, mapping), k.descending, k.nulls_first)
                      for k in keys)
        window = lp.Window(child, (WindowCall("row_number", (), pa.int64(), (key,), order),),
                           (number,))
        bounds = [resolve_operator("gt", [number, Literal(skip, pa.int64())], {})]
        if fetch is not None:
            bounds.append(resolve_operator("lte", [number, Literal(skip + fetch, pa.int64())],
                                           {}))
        kept = lp.Filter(window, conjunction(bounds))
        return lp.Projection(kept, child.columns, child.columns), mapping, key

    def join(self, node: lp.Join) -> Pushed:
        left_reads, right_reads = self.reads_outer(node.left), self.reads_outer(node.right)
        kind = node.kind
        both = (left_reads and right_reads) or kind == "full" or \
            (right_reads and kind in ("left", "semi", "anti")) or (left_reads and kind == "right")
        if both and node.null_aware:
            raise NotSupportedError("NOT IN reading outer columns on both sides is not "
                                    "supported")
        if both:
            left, left_mapping, left_key = self.push(node.left)
            right, right_mapping, right_key = self.push(node.right)
            if kind == "cross":
                kind = "inner"
        elif right_reads or kind == "right":
            left, left_mapping, left_key = node.left, None, None
            right, right_mapping, right_key = self.push(node.right)
        else:
            left, left_mapping, left_key = self.push(node.left)
            right, right_mapping, right_key = node.right, None, None
        mapping = left_mapping if left_mapping is not None else right_mapping
        on = tuple((remap(a, mapping), remap(b, mapping)) for a, b in node.on)
        if both:
            on += ((left_key, right_key),)
        condition = remap(node.filter, mapping) if node.filter is not None else None
        joined = replace(node, left=left, right=right, kind=kind, on=on, filter=condition)
        if kind != "full":
            if left_mapping is None or kind == "right" and both:
                return joined, right_mapping, right_key
            return joined, left_mapping, left_key
        # FULL: a row of one side only carries its D value on that side
        carried_left = tuple(left_mapping.values()) + (left_key,)
        carried_right = tuple(right_mapping[i] for i in left_mapping) + (right_key,)
        outputs = tuple(Column(next_id(), c.name, c.type) for c in carried_left)
        merged = tuple(Call("coalesce", (a, b), a.type)
                       for a, b in zip(carried_left, carried_right))
        projected = lp.Projection(joined, node.columns + merged, node.columns + outputs)
        return projected, dict(zip(left_mapping, outputs)), outputs[-1]

    def union(self, node: lp.Union) -> Pushed:
        inputs, first = [], None
        for child in node.union_inputs:
            pushed, mapping, key = self.push(child)
            carried = tuple(mapping[o.id] for o in self.domain.outer) + (key,)
            inputs.append(lp.Projection(pushed, tuple(remap(c, mapping) for c in child.columns)
                                        + carried,
                                        tuple(Column(next_id(), c.name, c.type)
                                              for c in child.columns + carried)))
            first = first or carried
        outputs = tuple(Column(next_id(), c.name, c.type) for c in first)
        mapping = {o.id: c for o, c in zip(self.domain.outer, outputs)}
        return lp.Union(tuple(inputs), node.outputs + outputs), mapping, outputs[-1]
