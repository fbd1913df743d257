"""Built-in sample data: TPC-H-like tables, the 22 TPC-H queries, window workloads.

Everything here is generated in memory with vectorized numpy; only ``tpch_parquet`` needs
an extra tool (``tpchgen-cli``, a test and benchmark dependency).

Example:
    >>> from plansight.datasets import TPCH_QUERIES, tpch
    >>> sorted(tpch(0.001))[:3], len(TPCH_QUERIES)
    (['customer', 'lineitem', 'nation'], 22)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa

from plansight.datasets.tpch import TPCH_TABLES, tpch
from plansight.datasets.windows import (
    KEY_WIDTH,
    WINDOW_QUERIES,
    WINDOW_WORKLOADS,
    WindowWorkload,
    window_workload,
)
from plansight.errors import PlansightError

__all__ = [
    "KEY_WIDTH",
    "SAMPLES",
    "TPCH_QUERIES",
    "TPCH_TABLES",
    "WINDOW_QUERIES",
    "WINDOW_WORKLOADS",
    "WindowWorkload",
    "load_sample",
    "tpch",
    "tpch_parquet",
    "window_workload",
]

_QUERY_DIR = Path(__file__).with_name("tpch_queries")


def _load_queries() -> dict[int, str]:
    """The texts of q01.sql .. q22.sql: the spec's queries with its validation parameters."""
    queries = {number: (_QUERY_DIR / f"q{number:02d}.sql").read_text() for number in range(1, 23)}
    return {number: text.strip() + "\n" for number, text in queries.items()}


TPCH_QUERIES: dict[int, str] = _load_queries()

# Names accepted by load_sample: "tpch" (eight tables) or a window workload (table "t").
SAMPLES: tuple[str, ...] = ("tpch", *WINDOW_WORKLOADS)


def load_sample(session: Any, name: str = "tpch", scale: float = 0.01,
                seed: int = 0) -> dict[str, pa.Table]:
    """Generate a sample data set and register each of its tables in ``session``.

    Args:
        session: Anything with ``register(name, table)``, such as ``plansight.Session``.
        name: ``"tpch"`` for the eight TPC-H tables (region ... lineitem), or a window
            workload name (see ``WINDOW_WORKLOADS``), registered as table ``t``.
        scale: TPC-H scale factor, or the row multiplier of a window workload.
        seed: Seed of the generator.

    Returns:
        The registered tables by name.

    Example:
        >>> class Catalog:
        ...     def __init__(self):
        ...         self.tables = {}
        ...     def register(self, name, table):
        ...         self.tables[name] = table
        >>> catalog = Catalog()
        >>> sorted(load_sample(catalog, "tpch", scale=0.001)) == sorted(catalog.tables)
        True
        >>> load_sample(catalog, "micro_1_5m", scale=0.001)["t"].num_rows
        1500
    """
    if name == "tpch":
        tables = tpch(scale, seed)
    elif name in WINDOW_WORKLOADS:
        tables = {"t": window_workload(name, scale, seed)}
    else:
        raise PlansightError(
            f"unknown sample {name!r}; expected one of: {', '.join(SAMPLES)}"
        )
    for table_name, table in tables.items():
        session.register(table_name, table)
    return tables


def tpch_parquet(directory: str | os.PathLike[str], scale: float = 1.0) -> Path:
    """Official TPC-H data as Parquet, one file per table, made by ``tpchgen-cli``.

    Writes ``<directory>/<table>.parquet`` for the eight tables unless all of them are
    already there (a cache). Files are generated into a scratch folder first and moved in
    place, so an interrupted run never leaves a partial cache.

    Args:
        directory: Where the files go, e.g. ``bench/data/sf1``.
        scale: TPC-H scale factor.

    Returns:
        ``directory`` as a Path.

    Raises:
        PlansightError: ``tpchgen-cli`` is not installed or failed.
    """
    directory = Path(directory)
    if all((directory / f"{table}.parquet").is_file() for table in TPCH_TABLES):
        return directory
    executable = _tpchgen_executable()
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".tpchgen-", dir=directory) as scratch:
        command = [executable, "parquet", "--scale-factor", _format_scale(scale),
                   "--output-dir", scratch, "--no-progress", "--quiet"]
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            raise PlansightError(
                f"tpchgen-cli failed (exit {completed.returncode}): "
                f"{completed.stderr.strip() or completed.stdout.strip()}"
            )
        for table in TPCH_TABLES:
            os.replace(Path(scratch) / f"{table}.parquet", directory / f"{table}.parquet")
    return directory


def _tpchgen_executable() -> str:
    """tpchgen-cli next to the running interpreter (a virtualenv's bin/), else on PATH."""
    beside = Path(sys.executable).parent / "tpchgen-cli"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("tpchgen-cli")
    if found:
        return found
    raise PlansightError(
        "tpchgen-cli is not installed; it is a test/benchmark dependency: "
        "pip install tpchgen-cli (or pip install 'plansight[bench]')"
    )


def _format_scale(scale: float) -> str:
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    return f"{float(scale):g}"
