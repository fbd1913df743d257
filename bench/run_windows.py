"""Window functions: the partition-streaming RFC's workloads on five engines, side by side.

Five workloads (plansight.datasets.WINDOW_WORKLOADS) x five queries (running COUNT,
101-row moving SUM and MIN, RANK + LAG, whole-partition SUM) on plansight, DuckDB,
DataFusion, Polars (expressions API with ``.over()``) and pandas (groupby / rolling /
transform). For each workload every engine gets one worker process that generates the
same table in memory; queries go round the engines one at a time, each run ``--repeat``
times (median reported), results fully materialized (Arrow tables; a DataFrame for
pandas). Peak RSS is measured per query inside each worker (the kernel's high-water
mark, reset before the query), so it includes the input table.

``--scaling`` instead runs the moving-frame queries (SUM and MIN over ROWS BETWEEN F-1
PRECEDING AND CURRENT ROW) on one workload at 1x/2x/4x rows (F = 101) and with frame sizes
F = 101/1001/10001 (1x rows), to show whether cost grows with the frame.

Usage:
    python bench/run_windows.py                         # all workloads, scale 1, 5 runs
    python bench/run_windows.py --scale 0.1 --engines duckdb,pandas --workloads small_1m
    python bench/run_windows.py --scaling --workloads large_2m
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import common
from common import (
    MISSING,
    QueryFailed,
    Worker,
    WorkerError,
    WorkerTimeout,
    fmt_mb,
    fmt_ms,
    fmt_ratio,
    geomean,
    markdown_table,
    median,
)

ENGINES = ("plansight", "duckdb", "datafusion", "polars", "pandas")
# opt-in: plansight with target_partitions=1 (one thread: no hash repartition below windows);
# plansight_baseline: the plansight source tree at $PLANSIGHT_BASELINE (an older commit, with
# symlinks plansight/{engine,magic,widgets,profiling} -> ../<dir>), for before/after runs
# interleaved query by query
EXTRA_ENGINES = ("plansight_1p", "plansight_baseline")
PACKAGES = ("plansight", "pyarrow", "duckdb", "datafusion", "polars", "pandas", "numpy")


class WindowQuery(NamedTuple):
    """A query as SQL (for SQL engines) and as a kind + parameters (for DataFrame engines)."""

    name: str
    kind: str  # count_running | moving | rank_lag | sum_partition
    aggregate: str = ""  # sum | min, for "moving"
    frame: int = 0  # rows in the frame, for "moving"

    @property
    def sql(self) -> str:
        over = "OVER (PARTITION BY c1 ORDER BY sn)"
        if self.kind == "count_running":
            return f"SELECT c1, sn, v, COUNT(sn) {over} FROM t"
        if self.kind == "moving":
            return (f"SELECT c1, sn, v, {self.aggregate.upper()}(v) OVER (PARTITION BY c1 "
                    f"ORDER BY sn ROWS BETWEEN {self.frame - 1} PRECEDING AND CURRENT ROW) "
                    f"FROM t")
        if self.kind == "rank_lag":
            return f"SELECT c1, sn, v, RANK() {over}, LAG(v) {over} FROM t"
        if self.kind == "sum_partition":
            return "SELECT c1, sn, v, SUM(v) OVER (PARTITION BY c1) FROM t"
        raise ValueError(self.kind)


QUERIES = (
    WindowQuery("count_running", "count_running"),
    WindowQuery("sum_rows_100", "moving", "sum", 101),
    WindowQuery("min_rows_100", "moving", "min", 101),
    WindowQuery("rank_lag", "rank_lag"),
    WindowQuery("sum_partition", "sum_partition"),
)


# ---------------------------------------------------------------------------- engines
# Each setup takes the workload table and returns run(query) -> materialized row count.


def _setup_plansight(table: Any, target_partitions: int | None = None
                     ) -> Callable[[WindowQuery], int]:
    import plansight as ps

    session = ps.Session(target_partitions=target_partitions)
    session.register("t", table)
    return lambda query: session.sql(query.sql).to_arrow().num_rows


def _setup_plansight_1p(table: Any) -> Callable[[WindowQuery], int]:
    return _setup_plansight(table, target_partitions=1)


def _setup_duckdb(table: Any) -> Callable[[WindowQuery], int]:
    import duckdb

    connection = duckdb.connect()
    connection.register("t", table)

    def run(query: WindowQuery) -> int:
        relation = connection.sql(query.sql)
        to_arrow = getattr(relation, "to_arrow_table", None) or relation.fetch_arrow_table
        return to_arrow().num_rows

    return run


def _setup_datafusion(table: Any) -> Callable[[WindowQuery], int]:
    import datafusion

    context = datafusion.SessionContext()
    # One input partition per core, as a Parquet scan would give.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    size = max(1, math.ceil(table.num_rows / (cores or 1)))
    context.register_record_batches("t", [[b] for b in table.to_batches(max_chunksize=size)])
    return lambda query: context.sql(query.sql).to_arrow_table().num_rows


def _setup_polars(table: Any) -> Callable[[WindowQuery], int]:
    import polars as pl

    frame = pl.from_arrow(table)

    def expression(query: WindowQuery) -> list[Any]:
        if query.kind == "count_running":
            return [pl.col("sn").cum_count().over("c1", order_by="sn").alias("count")]
        if query.kind == "moving":
            rolling = getattr(pl.col("v"), f"rolling_{query.aggregate}")
            return [rolling(window_size=query.frame, min_samples=1)
                    .over("c1", order_by="sn").alias(query.aggregate)]
        if query.kind == "rank_lag":
            return [pl.col("sn").rank("min").over("c1").alias("rank"),
                    pl.col("v").shift(1).over("c1", order_by="sn").alias("lag")]
        if query.kind == "sum_partition":
            return [pl.col("v").sum().over("c1").alias("sum")]
        raise ValueError(query.kind)

    return lambda query: frame.select("c1", "sn", "v", *expression(query)).to_arrow().num_rows


def _setup_pandas(table: Any) -> Callable[[WindowQuery], int]:
    frame = table.to_pandas()

    def run(query: WindowQuery) -> int:
        if query.kind == "sum_partition":
            result = frame[["c1", "sn", "v"]].copy()
            result["sum"] = frame.groupby("c1", sort=False)["v"].transform("sum")
            return len(result)
        result = frame.sort_values(["c1", "sn"], kind="stable")
        groups = result.groupby("c1", sort=False)
        if query.kind == "count_running":
            result["count"] = groups.cumcount() + 1
        elif query.kind == "moving":
            rolling = groups["v"].rolling(query.frame, min_periods=1)
            result[query.aggregate] = getattr(rolling, query.aggregate)().droplevel(0)
        elif query.kind == "rank_lag":
            result["rank"] = groups["sn"].rank(method="min")
            result["lag"] = groups["v"].shift(1)
        else:
            raise ValueError(query.kind)
        return len(result)

    return run


SETUPS: dict[str, Callable[[Any], Callable[[WindowQuery], int]]] = {
    "plansight": _setup_plansight,
    "plansight_1p": _setup_plansight_1p,
    "plansight_baseline": _setup_plansight,
    "duckdb": _setup_duckdb,
    "datafusion": _setup_datafusion,
    "polars": _setup_polars,
    "pandas": _setup_pandas,
}


def worker_main(engine: str) -> None:
    if engine == "plansight_baseline":
        sys.path.insert(0, os.environ["PLANSIGHT_BASELINE"])
    common.ensure_plansight_importable()
    from plansight.datasets import window_workload

    state: dict[str, Any] = {}

    def setup(message: dict[str, Any]) -> dict[str, Any]:
        table = window_workload(message["workload"], message["scale"], message.get("seed", 0))
        state["run"] = SETUPS[engine](table)
        return {"rss": common.current_rss()}

    def run(message: dict[str, Any]) -> dict[str, Any]:
        query = WindowQuery(**message["query"])
        return common.timed_runs(lambda: state["run"](query), message["repeat"])

    common.serve({"setup": setup, "run": run,
                  "max_rss": lambda _: {"max_rss": common.max_rss()}})


# ---------------------------------------------------------------------------- parent


class Case(NamedTuple):
    """One data set: a workload at a row scale."""

    workload: str
    scale: float


def run_case(case: Case, queries: list[WindowQuery], engines: list[str], repeat: int,
             timeout: float) -> tuple[dict[str, dict[str, dict[str, Any]]], dict[str, Any]]:
    """All queries on all engines for one data set; returns cells and per-engine facts."""
    cells: dict[str, dict[str, dict[str, Any]]] = {q.name: {} for q in queries}
    facts: dict[str, Any] = {}
    workers: dict[str, Worker | None] = {}
    setup_errors: dict[str, str] = {}

    def start(engine: str) -> Worker | None:
        worker = Worker([sys.executable, __file__, "--worker", engine], engine)
        try:
            reply = worker.call({"cmd": "setup", "workload": case.workload,
                                 "scale": case.scale}, max(600.0, timeout))
            facts.setdefault(engine, {})["data_rss"] = reply["rss"]
            return worker
        except (QueryFailed, WorkerError) as error:
            setup_errors[engine] = f"setup failed: {error}"
            worker.kill()
            worker.close()
            return None

    try:
        for engine in engines:
            workers[engine] = start(engine)
        for query in queries:
            for engine in engines:
                worker = workers.get(engine)
                if engine in setup_errors:
                    cells[query.name][engine] = {"failure": setup_errors[engine]}
                    continue
                if worker is None:  # killed after a timeout: a fresh one
                    worker = workers[engine] = start(engine)
                    if worker is None:
                        cells[query.name][engine] = {"failure": setup_errors[engine]}
                        continue
                try:
                    reply = worker.call({"cmd": "run", "query": query._asdict(),
                                         "repeat": repeat}, timeout * repeat)
                    cell = {"seconds": median(reply["times"]), "rows": reply["rows"],
                            "cpu": median(reply["cpu"]), "peak_rss": reply["peak_rss"]}
                except WorkerTimeout:
                    workers[engine] = None
                    cell = {"failure": f"timeout (> {timeout:g} s per run)"}
                except (QueryFailed, WorkerError) as error:
                    if not isinstance(error, QueryFailed):
                        workers[engine] = None
                    cell = {"failure": str(error)}
                cells[query.name][engine] = cell
                shown = fmt_ms(cell["seconds"]) if "seconds" in cell else cell["failure"]
                print(f"{case.workload} x{case.scale:g} {query.name:<16} {engine:<10} {shown}",
                      file=sys.stderr, flush=True)
    finally:
        for engine, worker in workers.items():
            if worker is None:
                continue
            try:
                facts.setdefault(engine, {})["max_rss"] = worker.call({"cmd": "max_rss"},
                                                                      10)["max_rss"]
            except (QueryFailed, WorkerError):
                pass
            worker.close()
    return cells, facts


def table_for(cells: dict[str, dict[str, dict[str, Any]]], row_labels: list[tuple[str, ...]],
              label_headers: list[str], engines: list[str]) -> str:
    """Rows of (labels..., wall ms per engine, CPU ms per engine, plansight/duckdb and
    plansight/polars wall and CPU for every plansight variant, peak MiB per engine)."""
    headers = [*label_headers, *(f"{e} ms" for e in engines), *(f"{e} CPU ms" for e in engines)]
    ratios = [(mine, other) for mine in engines if mine.startswith("plansight")
              for other in ("duckdb", "polars") if other in engines]
    headers += [f"{mine}/{other}" for mine, other in ratios]
    headers += [f"{mine}/{other} CPU" for mine, other in ratios]
    headers += [f"{e} MiB" for e in engines]

    def ratio(key: str, mine: str, other: str, measure: str = "seconds") -> float | None:
        a, b = cells[key][mine].get(measure), cells[key][other].get(measure)
        return a / b if a and b else None

    rows = []
    for key, labels in row_labels:
        by_engine = cells[key]
        row = list(labels)
        row += [fmt_ms(by_engine[e].get("seconds")) for e in engines]
        row += [fmt_ms(by_engine[e].get("cpu")) for e in engines]
        row += [fmt_ratio(ratio(key, mine, other)) for mine, other in ratios]
        row += [fmt_ratio(ratio(key, mine, other, "cpu")) for mine, other in ratios]
        row += [fmt_mb(by_engine[e].get("peak_rss")) for e in engines]
        rows.append(row)
    geo = ["geomean", *[""] * (len(label_headers) - 1)]
    geo += [fmt_ms(geomean(cells[k][e].get("seconds") for k, _ in row_labels)) for e in engines]
    geo += [fmt_ms(geomean(cells[k][e].get("cpu") for k, _ in row_labels)) for e in engines]
    for measure in ("seconds", "cpu"):
        geo += [fmt_ratio(geomean(r for k, _ in row_labels
                                  if (r := ratio(k, mine, other, measure)) is not None))
                for mine, other in ratios]
    geo += [""] * len(engines)
    rows.append(geo)
    return markdown_table(headers, rows, right_align_from=len(label_headers))


def failures_of(cells: dict[str, dict[str, dict[str, Any]]], prefix: str) -> list[str]:
    """One line per (engine, message), listing the queries that failed with it."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for key, by_engine in cells.items():
        for engine, cell in by_engine.items():
            if cell.get("failure"):
                grouped.setdefault((engine, cell["failure"]), []).append(key)
    return [f"- {prefix}{engine} ({', '.join(keys)}): {failure}"
            for (engine, failure), keys in grouped.items()]


def main(argv: list[str] | None = None) -> int:
    common.ensure_plansight_importable()
    from plansight.datasets import WINDOW_WORKLOADS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="row multiplier")
    parser.add_argument("--engines", default=",".join(ENGINES),
                        help=f"comma-separated subset of {','.join(ENGINES + EXTRA_ENGINES)}")
    parser.add_argument("--workloads", default=None,
                        help=f"comma-separated subset of {','.join(WINDOW_WORKLOADS)} "
                             "(default: all; with --scaling: large_2m)")
    parser.add_argument("--queries", default=",".join(q.name for q in QUERIES),
                        help="comma-separated subset of the five queries")
    parser.add_argument("--repeat", type=int, default=5, help="runs per query (median)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    parser.add_argument("--scaling", action="store_true",
                        help="moving frames at 1x/2x/4x rows and frame sizes 101/1001/10001")
    parser.add_argument("--output", type=Path, default=None,
                        help="report path (default bench/results/windows.md, "
                             "windows_scaling.md with --scaling)")
    parser.add_argument("--note", default="", help="free text added to the report")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main(args.worker)
        return 0

    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    known = set(ENGINES + EXTRA_ENGINES)
    if set(engines) - known:
        parser.error(f"unknown engines: {', '.join(sorted(set(engines) - known))}")
    default_workloads = "large_2m" if args.scaling else ",".join(WINDOW_WORKLOADS)
    workloads = [w.strip() for w in (args.workloads or default_workloads).split(",")]
    if set(workloads) - set(WINDOW_WORKLOADS):
        parser.error(f"unknown workloads: {', '.join(set(workloads) - set(WINDOW_WORKLOADS))}")

    if args.scaling:
        body = run_scaling(args, engines, workloads)
        default_output = common.RESULTS_DIR / "windows_scaling.md"
        title = "Window functions — moving-frame scaling"
    else:
        selected = [q for q in QUERIES if q.name in args.queries.split(",")]
        body = run_workloads(args, engines, workloads, selected)
        default_output = common.RESULTS_DIR / "windows.md"
        title = "Window functions — partition-streaming RFC workloads"
    report = "\n".join([
        f"# {title}",
        "",
        (f"Median of {args.repeat} runs, milliseconds; results fully materialized (Arrow, or "
         f"a DataFrame for pandas); one worker process per engine per data set; timeout "
         f"{args.timeout:g} s per run (a query's runs share repeat × timeout). MiB = peak RSS "
         f"of the engine's process while the query ran (includes the input table). "
         f"`{MISSING}` = failed or timed out (see Failures)."),
        *(["", f"Note: {args.note}"] if args.note else []),
        "",
        body,
        "## Machine",
        "",
        common.environment_markdown(PACKAGES),
        "",
        f"Command: `python bench/run_windows.py {shlex.join(sys.argv[1:])}`",
    ])
    print(report)
    output = args.output or default_output
    common.write_report(output, report)
    print(f"written to {output}", file=sys.stderr)
    return 0


def run_workloads(args: argparse.Namespace, engines: list[str], workloads: list[str],
                  queries: list[WindowQuery]) -> str:
    from plansight.datasets import WINDOW_WORKLOADS

    parts: list[str] = []
    failures: list[str] = []
    sql_lines = [f"- `{q.name}`: `{q.sql}`" for q in queries]
    for workload in workloads:
        spec = WINDOW_WORKLOADS[workload]
        rows = max(1, round(spec.rows * args.scale))
        cells, facts = run_case(Case(workload, args.scale), queries, engines, args.repeat,
                                args.timeout)
        parts += [
            f"## {workload}: {rows:,} rows, {min(spec.partitions, rows):,} partitions",
            "",
            table_for(cells, [(q.name, (q.name,)) for q in queries], ["query"], engines),
            "",
            _facts_line(facts, engines),
            "",
        ]
        failures += failures_of(cells, f"{workload}: ")
    parts += ["## Queries", "", *sql_lines, ""]
    if failures:
        parts += ["## Failures", "", *failures, ""]
    return "\n".join(parts)


def run_scaling(args: argparse.Namespace, engines: list[str], workloads: list[str]) -> str:
    from plansight.datasets import WINDOW_WORKLOADS

    parts: list[str] = []
    failures: list[str] = []
    for workload in workloads:
        spec = WINDOW_WORKLOADS[workload]
        # (row multiplier, frame): rows sweep at frame 101, frame sweep at 1x rows.
        configurations = [(1, 101), (2, 101), (4, 101), (1, 1001), (1, 10001)]
        merged: dict[str, dict[str, dict[str, Any]]] = {}
        labels: list[tuple[str, tuple[str, ...]]] = []
        for multiplier in (1, 2, 4):
            frames = sorted({f for m, f in configurations if m == multiplier})
            queries = [WindowQuery(f"{aggregate}_frame_{frame}", "moving", aggregate, frame)
                       for frame in frames for aggregate in ("sum", "min")]
            scale = args.scale * multiplier
            cells, _ = run_case(Case(workload, scale), queries, engines, args.repeat,
                                args.timeout)
            rows = max(1, round(spec.rows * scale))
            for query in queries:
                key = f"x{multiplier} {query.name}"
                merged[key] = cells[query.name]
                labels.append((key, (f"{rows:,}", f"{multiplier}×", f"{query.frame:,}",
                                     query.aggregate.upper())))
            failures += failures_of(cells, f"{workload} x{multiplier}: ")
        labels.sort(key=lambda item: (item[1][3], item[1][2] != "101",
                                      int(item[1][1].rstrip("×")), item[1][2]))
        parts += [
            f"## {workload} ({spec.partitions:,} partitions)",
            "",
            ("`SELECT c1, sn, v, AGG(v) OVER (PARTITION BY c1 ORDER BY sn ROWS BETWEEN F-1 "
             "PRECEDING AND CURRENT ROW) FROM t`"),
            "",
            table_for(merged, labels, ["rows", "scale", "frame F", "agg"], engines),
            "",
        ]
    if failures:
        parts += ["## Failures", "", *failures, ""]
    return "\n".join(parts)


def _facts_line(facts: dict[str, Any], engines: list[str]) -> str:
    data = ", ".join(f"{e} {fmt_mb(facts.get(e, {}).get('data_rss'))}" for e in engines)
    peak = ", ".join(f"{e} {fmt_mb(facts.get(e, {}).get('max_rss'))}" for e in engines)
    return f"RSS after loading the table (MiB): {data}. Peak RSS per process (MiB): {peak}."


if __name__ == "__main__":
    raise SystemExit(main())
