"""Column equivalences: sets of columns known to hold the same value in every output row,
and columns known to hold one value in every output row (constants).

After ``WHERE a = b`` or an inner join ``ON a = b``, rows partitioned or sorted by ``a`` are
also partitioned or sorted by ``b``, so EnsureRequirements need not shuffle or sort again
(DataFusion's EquivalenceProperties, kept to plain column classes). After ``WHERE a = 5``
(or ``a IS NULL``) every row has the same ``a``: a sort key on ``a`` orders nothing, so rows
sorted by ``b`` are sorted by ``(a, b)``, and rows equal on ``b`` are equal on ``(a, b)``.
A constant is one value across *all* partitions (the predicate fixes it), and a class with
one constant member is constant throughout. Each operator says how its input's knowledge
reaches its output:

    FilterExec         input + a class per ``x = y`` conjunct (both columns, same type)
                       + a constant per ``x = literal`` / ``x IS NULL`` conjunct
    ProjectionExec     input classes and constants, renamed; two outputs of one input column
                       are equal; a literal output is a constant
    HashJoinExec       both sides' + the key pairs, for inner joins only: an outer join's
                       NULL-extended side is NULL where the preserved side is not, so that
                       side's constants are dropped (its classes survive, see below)
    other operators    one input: its classes restricted to the output columns; several
                       inputs (UNION): none

Only columns of the same Arrow type are joined into a class: hashing and sorting then treat
equal values identically. Two NULLs count as equal here (same hash, same sort position), so
a class survives the NULL-extension of its whole side by an outer join. Floating-point
columns never become constants through ``x = literal``: ``0.0 = -0.0`` holds, yet the two
hash differently.

Constants relax ordering and (non-join) distribution requirements only; a partitioned join
needs both inputs hashed on exactly its keys, so it never accepts Hash(b) for Hash(a, b)
even when ``a`` is constant (the other input is hashed on both columns).
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from plansight.engine.logical.expr import Call, Column, Expr, Literal, SortKey, split_conjunction


class Equivalences:
    """Immutable partition of some columns (by id) into classes of equal columns, and the
    set of columns (by id) holding one value in every row."""

    __slots__ = ("_class_of", "_columns", "_constants")

    def __init__(self, classes: Iterable[Iterable[Column]] = (),
                 constants: Iterable[Column] = ()):
        self._columns: dict[int, Column] = {}
        self._class_of: dict[int, frozenset[int]] = {}
        for members in classes:
            self._add_class(list(members))
        constant_ids: set[int] = set()
        for column in constants:
            self._columns.setdefault(column.id, column)
            constant_ids |= self._class_of.get(column.id, {column.id})
        self._constants = frozenset(constant_ids)

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

    @property
    def constants(self) -> list[Column]:
        return sorted((self._columns[i] for i in self._constants), key=lambda c: c.id)

    def __bool__(self) -> bool:
        return bool(self._class_of) or bool(self._constants)

    def __repr__(self) -> str:
        text = ", ".join("{" + ", ".join(c.field_name for c in cls) + "}"
                         for cls in self.classes)
        if self._constants:
            text += (", " if text else "") + "constants=[" + ", ".join(
                c.field_name for c in self.constants) + "]"
        return "Equivalences(" + text + ")"

    # -- building ---------------------------------------------------------------
    def with_equal(self, pairs: Iterable[tuple[Expr, Expr]]) -> Equivalences:
        """These classes plus ``a = b`` for every pair of same-typed columns."""
        extra = [[a, b] for a, b in pairs if isinstance(a, Column) and isinstance(b, Column)
                 and a.type == b.type]
        if not extra:
            return self
        return Equivalences(self.classes + extra, self.constants)

    def with_constants(self, columns: Iterable[Column]) -> Equivalences:
        """These classes, with ``columns`` (and their classes) known constant."""
        extra = [c for c in columns if c.id not in self._constants]
        if not extra:
            return self
        return Equivalences(self.classes, self.constants + extra)

    def without_constants(self) -> Equivalences:
        """The classes only: rows NULL-extended by an outer join break every constant."""
        if not self._constants:
            return self
        return Equivalences(self.classes)

    def union(self, other: Equivalences) -> Equivalences:
        if not other:
            return self
        if not self:
            return other
        return Equivalences(self.classes + other.classes, self.constants + other.constants)

    def restrict(self, field_names: Iterable[str]) -> Equivalences:
        """Only the columns present in an output (by field name ``name#id``)."""
        names = set(field_names)
        kept = [[c for c in cls if c.field_name in names] for cls in self.classes]
        return Equivalences((cls for cls in kept if len(cls) > 1),
                            (c for c in self.constants if c.field_name in names))

    def project(self, renames: Iterable[tuple[Column, Column]],
                constants: Iterable[Column] = ()) -> Equivalences:
        """Through (input column, output column) renames: outputs of equal inputs are equal,
        outputs of constant inputs constant; ``constants``: outputs computed as literals."""
        by_class: dict[frozenset[int] | int, list[Column]] = {}
        constant_outputs = list(constants)
        for source, output in renames:
            key = self._class_of.get(source.id, source.id)
            by_class.setdefault(key, []).append(output)
            if source.id in self._constants:
                constant_outputs.append(output)
        return Equivalences((outs for outs in by_class.values() if len(outs) > 1),
                            constant_outputs)

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

    def is_constant(self, expr: Expr) -> bool:
        """Whether ``expr`` has one value in every row (across all partitions)."""
        if isinstance(expr, Literal):
            return True
        return isinstance(expr, Column) and expr.id in self._constants

    def significant_keys(self, ordering: Iterable[SortKey]) -> list[SortKey]:
        """The keys of ``ordering`` that order anything: constant keys dropped (every row
        ties on them) and later repeats of a class (once rows are sorted by ``a``, a later
        key on ``a``, or on ``b = a``, orders nothing)."""
        seen, out = set(), []
        for key in ordering:
            if self.is_constant(key.expr):
                continue
            rep = self.representative(key.expr)
            if rep in seen:
                continue
            seen.add(rep)
            out.append(key)
        return out

    def normalize_ordering(self, ordering: Iterable[SortKey]) -> list[tuple]:
        """The significant keys as (representative, descending, nulls_first)."""
        return [(self.representative(key.expr), key.descending, key.nulls_first)
                for key in self.significant_keys(ordering)]

    def normalize_hash_keys(self, exprs: Iterable[Expr]) -> list:
        """Hash keys as representatives, constants dropped: rows equal on the rest are equal
        on all of them. For grouping requirements only, never a join's co-partitioning: a
        partitioning's hash function is over all of its keys, constant or not."""
        return [self.representative(e) for e in exprs if not self.is_constant(e)]


NONE = Equivalences()


def equalities(predicate: Expr | None) -> list[tuple[Expr, Expr]]:
    """The ``x = y`` conjuncts of a predicate (rows passing it have x equal to y)."""
    return [(part.args[0], part.args[1]) for part in split_conjunction(predicate)
            if isinstance(part, Call) and part.func == "eq" and len(part.args) == 2]


def constants(predicate: Expr | None) -> list[Column]:
    """The columns a predicate pins to one value: ``x = literal`` (either side; not for
    floating point or nested types, where distinct values can compare equal) and
    ``x IS NULL``.

    Example:
        >>> x = Column(1, "x", pa.int64())
        >>> [c.name for c in constants(Call("eq", (Literal(5, pa.int64()), x), pa.bool_()))]
        ['x']
    """
    out = []
    for part in split_conjunction(predicate):
        if not isinstance(part, Call):
            continue
        if part.func == "is_null" and len(part.args) == 1 and isinstance(part.args[0], Column):
            out.append(part.args[0])
        elif part.func == "eq" and len(part.args) == 2:
            for column, value in (part.args, part.args[::-1]):
                if isinstance(column, Column) and isinstance(value, Literal) and \
                        value.value is not None and _exact_equality(column.type):
                    out.append(column)
    return out


def _exact_equality(type_: pa.DataType) -> bool:
    """Values of this type that compare equal are identical (hash and sort alike)."""
    return not (pa.types.is_floating(type_) or pa.types.is_nested(type_))
