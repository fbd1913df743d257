"""Fingerprints of logical subplans: equal for two subplans that compute the same rows into
the same columns, whatever ids their columns were bound with.

A CTE named twice (TPC-H Q15's ``revenue0``: once joined to supplier, once under
``max(total_revenue)``) is bound twice, with fresh column ids each time; after optimization
the two copies are the same plan but for those ids (and for the scans' pruning hints, which
only skip row groups no row of them could pass). Numbering the columns in the order a walk
of the plan meets them makes the copies' fingerprints equal, so the physical planner can run
the subplan once (``SharedExec``).

Conservative by construction: a value the walk does not know (a source, a scalar object) is
compared by identity, so only the very same object matches; a subplan reading a column it
does not define (an outer reference) or calling a volatile function has no fingerprint.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal

import pyarrow as pa

from plansight.engine.logical import plan as lp
from plansight.engine.logical.expr import Column, Expr, is_volatile


class _NoFingerprint(Exception):
    pass


def fingerprint(plan: lp.LogicalPlan, loose: bool = False) -> tuple | None:
    """The subplan's key (hashable), or None when it cannot be compared.

    ``loose``: the key of a tree of joins, filters, scans and column selections
    (``is_selection``) whatever columns its scans read and its selections keep (see
    ``repeated_subplans``); None for a tree with any other node.

    Example:
        >>> import pyarrow as pa
        >>> from plansight.engine.catalog import MemorySource
        >>> source = MemorySource(pa.table({"a": [1, 2]}))
        >>> def scan(column_id):
        ...     return lp.TableScan("t", source, (Column(column_id, "a", pa.int64()),), ("a",))
        >>> fingerprint(scan(1)) == fingerprint(scan(7))
        True
    """
    walk = _Walk(loose)
    try:
        key = walk.key(plan)
    except _NoFingerprint:
        return None
    if walk.referenced - walk.defined:
        return None  # reads a column from outside: its value depends on where it sits
    return key


# what a loose key walks through: every output column of these comes from a scan below
_LOOSE_NODES = (lp.Join, lp.Filter, lp.TableScan, lp.Projection)


def is_selection(node: lp.LogicalPlan) -> bool:
    """A projection that passes some of its input's columns through unchanged (what
    projection pushdown puts above a filter whose column nothing else reads)."""
    return isinstance(node, lp.Projection) and all(
        isinstance(e, Column) and e.id == o.id for e, o in zip(node.exprs, node.outputs))


class _Walk:
    def __init__(self, loose: bool = False):
        self.ids: dict[int, object] = {}  # column id -> its number in walk order
        self.defined: set[int] = set()
        self.referenced: set[int] = set()
        self.loose = loose
        self.scans = 0

    def key(self, value) -> object:
        if isinstance(value, Column):
            self.referenced.add(value.id)
            number = self.ids.setdefault(value.id, len(self.ids))
            return ("column", number, str(value.type), value.nullable)
        if self.loose and isinstance(value, lp.LogicalPlan):
            if not isinstance(value, _LOOSE_NODES) or \
                    isinstance(value, lp.Projection) and not is_selection(value):
                raise _NoFingerprint
            if isinstance(value, lp.Projection):  # whichever columns it keeps
                return ("Selection", self.key(value.input))
            if isinstance(value, lp.TableScan):
                # a column is (which scan of the walk, which source column): two copies
                # that read more or fewer columns of a scan still match
                self.scans += 1
                for column, name in zip(value.scan_columns, value.projection):
                    self.defined.add(column.id)
                    self.ids[column.id] = ("scan", self.scans, name)
                return ("TableScan", value.table, ("object", id(value.source)), value.fetch)
        if isinstance(value, lp.LogicalPlan):
            self.defined.update(c.id for c in value.columns)
            return (type(value).__name__,) + tuple(
                self.key(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not (isinstance(value, lp.TableScan) and f.name == "filters"))
        if isinstance(value, Expr) and is_volatile(value):
            raise _NoFingerprint
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return (type(value).__name__,) + tuple(
                self.key(getattr(value, f.name)) for f in dataclasses.fields(value))
        if isinstance(value, (tuple, list)):
            return ("seq",) + tuple(self.key(v) for v in value)
        if isinstance(value, float):
            return ("float", repr(value))  # -0.0 and 0.0 differ; NaN equals itself
        if isinstance(value, decimal.Decimal):
            return ("decimal", str(value))  # 1.0 and 1.00 are equal, not the same literal
        if value is None or isinstance(value, (bool, int, str, bytes,
                                               datetime.date, datetime.time,
                                               datetime.timedelta)):
            return (type(value).__name__, value)
        if isinstance(value, pa.DataType):
            return ("type", str(value))
        return ("object", id(value))  # the same object only (sources, anything else)


def repeated_aggregates(plan: lp.LogicalPlan) -> dict[int, tuple]:
    """The Aggregate nodes of ``plan`` (by ``id``) that compute the same rows as another
    one, each with its fingerprint; outermost only (what a repeated aggregate reads is run
    once with it)."""
    return {node: key for node, (key, _) in repeated_subplans(plan).items()}


def repeated_subplans(plan: lp.LogicalPlan, small=None
                      ) -> dict[int, tuple[tuple, lp.LogicalPlan]]:
    """The subplans of ``plan`` (by ``id``) that another place of it computes too, each with
    its key and node; outermost only (what a repeated subplan reads is run once with it).

    Aggregates match by ``fingerprint``. With ``small`` (a node -> bool the planner
    answers from its estimates), so do joins of scans whose output it calls small, by their
    loose key (key ``("loose", ...)``): TPC-H Q11 joins partsupp, supplier and GERMANY once
    under its GROUP BY and once in its HAVING's subquery, which projection pushdown left
    reading one column fewer of partsupp; the planner runs one join reading the union.
    """
    found: dict[int, tuple] = {}
    nodes: dict[int, lp.LogicalPlan] = {}
    counts: dict[tuple, int] = {}
    # A fingerprint walks the whole subtree, so one per Aggregate costs O(nodes x depth)
    # (16 s of a 300-query fuzzer run). Equal fingerprints need equal shapes (subtree size,
    # output types; a join's size and scans): only nodes whose shape another one shares
    # are fingerprinted.
    shapes: dict[tuple, list[lp.LogicalPlan]] = {}

    def size(node: lp.LogicalPlan) -> tuple[int, tuple]:
        total, scans = 1, ()
        for child in node.inputs():
            child_total, child_scans = size(child)
            total, scans = total + child_total, scans + child_scans
        if isinstance(node, lp.TableScan):
            scans = (id(node.source),)
        if isinstance(node, lp.Aggregate):
            shape = ("exact", total, tuple(str(c.type) for c in node.columns))
            shapes.setdefault(shape, []).append(node)
        elif small is not None and isinstance(node, lp.Join):
            shapes.setdefault(("loose", total, scans), []).append(node)
        return total, scans

    size(plan)
    for shape, group in shapes.items():
        if len(group) < 2:
            continue
        loose = shape[0] == "loose"
        for node in group:
            key = fingerprint(node, loose=loose)
            if key is None or (loose and not small(node)):
                continue
            key = ("loose",) + key if loose else key
            found[id(node)], nodes[id(node)] = key, node
            counts[key] = counts.get(key, 0) + 1
    outermost: dict[int, tuple] = {}

    def mark(node: lp.LogicalPlan) -> None:
        key = found.get(id(node))
        if key is not None and counts[key] >= 2:
            outermost[id(node)] = key
            return
        for child in node.inputs():
            mark(child)

    mark(plan)
    readers: dict[tuple, int] = {}
    for key in outermost.values():
        readers[key] = readers.get(key, 0) + 1
    return {node: (key, nodes[node]) for node, key in outermost.items() if readers[key] >= 2}
