"""The plan's closed vocabularies: join types, aggregate modes, distribution kinds, repartition
modes.

Each is an Enum whose members are also the strings they stand for (``JoinType.LEFT ==
"left"``), so plans print and pickle as before and a comparison with a misspelt member fails
at import time instead of silently never matching. Operators convert what they are given on
construction (``JoinType.of(value)``), so a bad value is a PlanError naming the choices.

Example:
    >>> JoinType.of("left_semi") is JoinType.LEFT_SEMI, f"{AggregateMode.PARTIAL}"
    (True, 'Partial')
"""

from __future__ import annotations

from enum import Enum

from plansight.engine.errors import PlanError


class Vocabulary(str, Enum):
    """A closed set of names; members print as their value."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @classmethod
    def of(cls, value: str) -> Vocabulary:
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(member.value for member in cls)
            raise PlanError(f"invalid {cls.__name__} {value!r}: use one of {choices}") from None


class JoinType(Vocabulary):
    """Which rows a physical join emits; semi and anti joins emit one side's rows only."""

    INNER = "inner"
    LEFT = "left"
    RIGHT = "right"
    FULL = "full"
    LEFT_SEMI = "left_semi"
    LEFT_ANTI = "left_anti"
    RIGHT_SEMI = "right_semi"
    RIGHT_ANTI = "right_anti"

    @property
    def emits_left_only(self) -> bool:
        return self in (JoinType.LEFT_SEMI, JoinType.LEFT_ANTI)

    @property
    def emits_right_only(self) -> bool:
        return self in (JoinType.RIGHT_SEMI, JoinType.RIGHT_ANTI)


class AggregateMode(Vocabulary):
    """Partial and Final are the two phases around a hash repartition; Single does both."""

    PARTIAL = "Partial"
    FINAL = "Final"
    SINGLE = "Single"


class DistributionKind(Vocabulary):
    """What an operator requires of how its input's rows are spread over partitions."""

    UNSPECIFIED = "unspecified"
    SINGLE = "single"
    HASH = "hash"


class RepartitionMode(Vocabulary):
    """How RepartitionExec routes rows: by a hash of key columns, or batches round robin."""

    HASH = "hash"
    ROUND_ROBIN = "round_robin"
