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


def fingerprint(plan: lp.LogicalPlan) -> tuple | None:
    """The subplan's key (hashable), or None when it cannot be compared.

    Example:
        >>> import pyarrow as pa
        >>> from plansight.engine.catalog import MemorySource
        >>> source = MemorySource(pa.table({"a": [1, 2]}))
        >>> def scan(column_id):
        ...     return lp.TableScan("t", source, (Column(column_id, "a", pa.int64()),), ("a",))
        >>> fingerprint(scan(1)) == fingerprint(scan(7))
        True
    """
    walk = _Walk()
    try:
        key = walk.key(plan)
    except _NoFingerprint:
        return None
    if walk.referenced - walk.defined:
        return None  # reads a column from outside: its value depends on where it sits
    return key


class _Walk:
    def __init__(self):
        self.ids: dict[int, int] = {}  # column id -> its number in walk order
        self.defined: set[int] = set()
        self.referenced: set[int] = set()

    def key(self, value) -> object:
        if isinstance(value, Column):
            self.referenced.add(value.id)
            number = self.ids.setdefault(value.id, len(self.ids))
            return ("column", number, str(value.type), value.nullable)
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
    found: dict[int, tuple] = {}
    counts: dict[tuple, int] = {}
    # A fingerprint walks the whole subtree, so one per Aggregate costs O(nodes x depth)
    # (16 s of a 300-query fuzzer run). Equal fingerprints need equal shapes (subtree size,
    # output types): only Aggregates whose shape another one shares are fingerprinted.
    shapes: dict[tuple, list[lp.LogicalPlan]] = {}

    def size(node: lp.LogicalPlan) -> int:
        total = 1 + sum(size(child) for child in node.inputs())
        if isinstance(node, lp.Aggregate):
            shape = (total, tuple(str(c.type) for c in node.columns))
            shapes.setdefault(shape, []).append(node)
        return total

    size(plan)
    for nodes in shapes.values():
        if len(nodes) < 2:
            continue
        for node in nodes:
            key = fingerprint(node)
            if key is not None:
                found[id(node)] = key
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
    return {node: key for node, key in outermost.items() if readers[key] >= 2}
