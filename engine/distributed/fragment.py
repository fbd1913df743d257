"""A stage's plan as bytes for a worker, and back, refusing a plan of another version.

    client: dumps(plan, tables) ──▶ header (plan format, plansight version) + pickle
    worker: loads(payload, tables) ─▶ the plan, runtime state fresh (ExecutionPlan pickling)

In-memory tables never travel inside a plan: each memory source is pickled as a reference
(its key in ``tables``), and the worker resolves it to the copy the session scattered once
(``tables`` maps the key to the source). Parquet, CSV and IPC sources travel by path and
are read by the workers.
"""

from __future__ import annotations

import copyreg
import functools
import io
import pickle
from importlib import metadata
from typing import Any

import pyarrow as pa

from plansight.engine.catalog import MemorySource
from plansight.engine.errors import ExecutionError
from plansight.engine.physical.plan import ExecutionPlan

#: Bumped whenever a plan pickled by one plansight cannot be read by another.
PLAN_FORMAT = 1


@functools.cache
def plansight_version() -> str:
    try:
        return metadata.version("plansight")
    except metadata.PackageNotFoundError:  # running from a source tree
        return "unknown"


def memory_sources(plan: ExecutionPlan) -> list[MemorySource]:
    """The in-memory sources a plan reads (each once), to be shipped apart from it."""
    found: dict[int, MemorySource] = {}
    for _, op in plan.walk():
        source = getattr(op, "source", None)
        if isinstance(source, MemorySource):
            found[id(source)] = source
    return list(found.values())


def month_day_nano(months: int, days: int, nanoseconds: int) -> pa.MonthDayNano:
    """An interval value (what an unpickled one is made by)."""
    return pa.MonthDayNano((months, days, nanoseconds))


def _month_day_nano(value: pa.MonthDayNano):
    return month_day_nano, (value.months, value.days, value.nanoseconds)


# Arrow's interval value says its class lives in builtins, where pickle cannot find it; plans
# (literals) and sources (cached statistics) hold such values, and Dask pickles both
copyreg.pickle(pa.MonthDayNano, _month_day_nano)


class _Pickler(pickle.Pickler):
    def __init__(self, file, keys: dict[int, str]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.keys = keys

    def persistent_id(self, obj: Any) -> str | None:
        if isinstance(obj, MemorySource):
            key = self.keys.get(id(obj))
            if key is None:
                raise ExecutionError("an in-memory table of the plan was not shipped to the "
                                     "cluster")
            return key
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, tables: dict[str, Any]):
        super().__init__(file)
        self.tables = tables

    def persistent_load(self, key: str) -> Any:
        try:
            return self.tables[key]
        except KeyError:
            raise ExecutionError(f"the worker did not receive table {key!r}") from None


def dumps(plan: ExecutionPlan, keys: dict[int, str] | None = None) -> bytes:
    """``plan`` as bytes; ``keys`` names each memory source (by ``id``) by its table key."""
    body = io.BytesIO()
    _Pickler(body, keys or {}).dump(plan)
    header = pickle.dumps({"format": PLAN_FORMAT, "version": plansight_version()})
    return len(header).to_bytes(4, "little") + header + body.getvalue()


def loads(payload: bytes, tables: dict[str, Any] | None = None) -> ExecutionPlan:
    """The plan ``dumps`` made; ExecutionError when another plansight made it.

    Example:
        >>> import pyarrow as pa, plansight as ps
        >>> s = ps.Session(target_partitions=1)
        >>> s.register("t", pa.table({"x": [1, 2]}))
        >>> plan = s.sql("SELECT x FROM t").physical
        >>> source = memory_sources(plan)[0]
        >>> again = loads(dumps(plan, {id(source): "t1"}), {"t1": source})
        >>> again.operator_id == plan.operator_id
        True
    """
    size = int.from_bytes(payload[:4], "little")
    header = pickle.loads(payload[4:4 + size])
    mine = {"format": PLAN_FORMAT, "version": plansight_version()}
    if header != mine:
        raise ExecutionError(
            f"this worker runs plansight {mine['version']} (plan format {mine['format']}) but "
            f"the client sent a plan from plansight {header.get('version')} (plan format "
            f"{header.get('format')}): install the same plansight on the client and every "
            "worker")
    return _Unpickler(io.BytesIO(payload[4 + size:]), tables or {}).load()
