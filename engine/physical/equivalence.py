"""Column equivalences: sets of columns known to hold the same value in every output row.

After ``WHERE a = b`` or an inner join ``ON a = b``, rows partitioned or sorted by ``a`` are
also partitioned or sorted by ``b``, so EnsureRequirements need not shuffle or sort again
(DataFusion's EquivalenceProperties, kept to plain column classes). Each operator says how
its input's classes reach its output:

    FilterExec         input classes + one per ``x = y`` conjunct (both columns, same type)
    ProjectionExec     input classes, renamed; two outputs of one input column are equal
    HashJoinExec       both sides' classes + the key pairs, for inner joins only: an outer
                       join's NULL-extended side is NULL where the preserved side is not
    other operators    one input: its classes restricted to the output columns; several
                       inputs (UNION): none

Only columns of the same Arrow type are joined into a class: hashing and sorting then treat
equal values identically. Two NULLs count as equal here (same hash, same sort position), so
a class survives the NULL-extension of its whole side by an outer join.
"""

from __future__ import annotations

from collections.abc import Iterable

from plansight.engine.logical.expr import Call, Column, Expr, SortKey, split_conjunction


class Equivalences:
    """Immutable partition of some columns (by id) into classes of equal columns."""

    __slots__ = ("_class_of", "_columns")

    def __init__(self, classes: Iterable[Iterable[Column]] = ()):
        self._columns: dict[int, Column] = {}
        self._class_of: dict[int, frozenset[int]] = {}
        for members in classes:
            self._add_class(list(members))

    def _add_class(self, members: list[Column]) -> None:
        ids = set()
        for column in members:
            self._columns.setdefault(column.id, column)
            ids |= self._class_of.get(column.id, {column.id})
        if len(ids) < 2:
            return
        merged = frozenset(ids)
        for column_id in merged:
            self._class_of[column_id] = merged

    @property
    def classes(self) -> list[list[Column]]:
        seen = {id(c): c for c in self._class_of.values()}
        return [sorted((self._columns[i] for i in members), key=lambda c: c.id)
                for members in seen.values()]

    def __bool__(self) -> bool:
        return bool(self._class_of)

    def __repr__(self) -> str:
        return "Equivalences(" + ", ".join(
            "{" + ", ".join(c.field_name for c in cls) + "}" for cls in self.classes) + ")"

    # -- building ---------------------------------------------------------------
    def with_equal(self, pairs: Iterable[tuple[Expr, Expr]]) -> Equivalences:
        """These classes plus ``a = b`` for every pair of same-typed columns."""
        extra = [[a, b] for a, b in pairs if isinstance(a, Column) and isinstance(b, Column)
                 and a.type == b.type]
        if not extra:
            return self
        return Equivalences(self.classes + extra)

    def union(self, other: Equivalences) -> Equivalences:
        if not other:
            return self
        if not self:
            return other
        return Equivalences(self.classes + other.classes)

    def restrict(self, field_names: Iterable[str]) -> Equivalences:
        """Only the columns present in an output (by field name ``name#id``)."""
        names = set(field_names)
        kept = [[c for c in cls if c.field_name in names] for cls in self.classes]
        return Equivalences(cls for cls in kept if len(cls) > 1)

    def project(self, renames: Iterable[tuple[Column, Column]]) -> Equivalences:
        """Through (input column, output column) renames: outputs of equal inputs are equal."""
        by_class: dict[frozenset[int] | int, list[Column]] = {}
        for source, output in renames:
            key = self._class_of.get(source.id, source.id)
            by_class.setdefault(key, []).append(output)
        return Equivalences(outs for outs in by_class.values() if len(outs) > 1)

    # -- reading ----------------------------------------------------------------
    def members(self, expr: Expr) -> list[Expr]:
        """``expr`` and every column known equal to it (``expr`` first)."""
        if not isinstance(expr, Column) or expr.id not in self._class_of:
            return [expr]
        return [expr] + [self._columns[i] for i in sorted(self._class_of[expr.id])
                         if i != expr.id]

    def representative(self, expr: Expr):
        """A canonical stand-in for ``expr``: the lowest column id of its class."""
        if isinstance(expr, Column):
            members = self._class_of.get(expr.id)
            return ("column", min(members) if members else expr.id)
        return ("expr", expr)

    def same(self, a: Expr, b: Expr) -> bool:
        return a == b or self.representative(a) == self.representative(b)

    def normalize_ordering(self, ordering: Iterable[SortKey]) -> list[tuple]:
        """Sort keys as (representative, descending, nulls_first), later repeats of a class
        dropped: once rows are sorted by ``a``, a later key on ``a`` (or on ``b = a``) orders
        nothing."""
        seen, out = set(), []
        for key in ordering:
            rep = self.representative(key.expr)
            if rep in seen:
                continue
            seen.add(rep)
            out.append((rep, key.descending, key.nulls_first))
        return out


NONE = Equivalences()


def equalities(predicate: Expr | None) -> list[tuple[Expr, Expr]]:
    """The ``x = y`` conjuncts of a predicate (rows passing it have x equal to y)."""
    return [(part.args[0], part.args[1]) for part in split_conjunction(predicate)
            if isinstance(part, Call) and part.func == "eq" and len(part.args) == 2]
