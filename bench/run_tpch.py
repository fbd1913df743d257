"""TPC-H: the 22 queries on plansight, DuckDB, DataFusion and Polars, side by side.

All engines read the same Parquet files (made by tpchgen-cli into bench/data/sf{N}/). Each
engine runs in its own worker process; queries go round the engines one query at a time
(query 1 on every engine, then query 2, ...), each run ``--repeat`` times, and the median
is reported. Results are fully materialized as Arrow tables. An engine that errors on a
query, or exceeds ``--timeout`` seconds on one run, gets "—" for it.

Usage:
    python bench/run_tpch.py                       # SF 1, all engines, 3 runs per query
    python bench/run_tpch.py --scale 0.1 --engines duckdb,datafusion --queries 1,3,18
    python bench/run_tpch.py --engines plansight@1,plansight@2   # 2 partitions vs 1

``plansight@N`` is plansight with ``target_partitions=N`` (plain ``plansight`` keeps the
session default, one partition per core); ``duckdb@N`` is DuckDB with ``threads=N`` and
``datafusion@N`` DataFusion with ``target_partitions=N``: what N cores give an engine on this
machine. The ratio columns divide the first plansight engine's time by each other engine's,
so ``plansight@1/plansight@2`` is the speedup.

Memory: the whole-run peak RSS per engine is the highest of its queries' peaks (the
worker's ru_maxrss alone covers only the last query: each query's measurement resets the
kernel's high-water mark). A second table has each query's peak RSS per engine (the
process's high-water mark while the query ran: what it still held from earlier queries
counts too) and plansight's memory-pool peak reservation (what its operators accounted for).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

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

ENGINES = ("plansight", "duckdb", "datafusion", "polars")
PACKAGES = ("plansight", "pyarrow", "duckdb", "datafusion", "polars", "tpchgen-cli")
TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")


# ---------------------------------------------------------------------------- engines
# Each returns a function that runs one SQL text and returns the materialized row count.

_POOL_PEAK: dict[str, int] = {}  # plansight's last query: its memory pool's peak reservation


def _setup_plansight(data: Path, memory_limit: str | None,
                     partitions: int | None = None) -> Callable[[str], int]:
    import plansight as ps

    options: dict[str, Any] = {}
    if memory_limit:
        options["memory_limit"] = memory_limit
    if partitions:
        options["target_partitions"] = partitions
    session = ps.Session(**options)
    for table in TABLES:
        session.register_parquet(table, str(data / f"{table}.parquet"))
    def run(sql: str) -> int:
        query = session.sql(sql)
        rows = query.to_arrow().num_rows
        _POOL_PEAK["plansight"] = query.context.memory_pool.peak if query.context else 0
        return rows

    return run


def _setup_duckdb(data: Path, memory_limit: str | None,
                  threads: int | None = None) -> Callable[[str], int]:
    import duckdb

    connection = duckdb.connect()
    if threads:
        connection.execute(f"SET threads = {threads}")
    for table in TABLES:
        connection.sql(f"CREATE VIEW {table} AS SELECT * FROM "
                       f"read_parquet('{data / f'{table}.parquet'}')")

    def run(sql: str) -> int:
        relation = connection.sql(sql)
        to_arrow = getattr(relation, "to_arrow_table", None) or relation.fetch_arrow_table
        return to_arrow().num_rows

    return run


def _setup_datafusion(data: Path, memory_limit: str | None,
                      partitions: int | None = None) -> Callable[[str], int]:
    import datafusion

    config = datafusion.SessionConfig()
    if partitions:
        config = config.with_target_partitions(partitions)
    context = datafusion.SessionContext(config)
    for table in TABLES:
        context.register_parquet(table, str(data / f"{table}.parquet"))
    return lambda sql: context.sql(sql).to_arrow_table().num_rows


def _setup_polars(data: Path, memory_limit: str | None) -> Callable[[str], int]:
    import polars as pl

    context = pl.SQLContext(
        {table: pl.scan_parquet(data / f"{table}.parquet") for table in TABLES}
    )
    return lambda sql: context.execute(sql).collect().to_arrow().num_rows


# memory_limit: plansight's session limit (--memory-limit); the others keep their defaults
SETUPS: dict[str, Callable[[Path, str | None], Callable[[str], int]]] = {
    "plansight": _setup_plansight,
    "duckdb": _setup_duckdb,
    "datafusion": _setup_datafusion,
    "polars": _setup_polars,
}


# engines whose name takes @N: plansight's target_partitions, DuckDB's threads, DataFusion's
# target_partitions (N-way parallelism each, for the machine's own 2-vs-1 ceiling)
THREADED = ("plansight", "duckdb", "datafusion")


def engine_base(engine: str) -> str:
    """``plansight@2`` -> ``plansight``: the engine a name runs."""
    return engine.split("@", 1)[0]


def worker_main(engine: str) -> None:
    state: dict[str, Any] = {}

    def setup(message: dict[str, Any]) -> dict[str, Any]:
        base, _, partitions = engine.partition("@")
        extra = (int(partitions),) if partitions else ()
        state["run"] = SETUPS[base](Path(message["data"]), message.get("memory_limit"), *extra)
        return {}

    def run(message: dict[str, Any]) -> dict[str, Any]:
        reply = common.timed_runs(lambda: state["run"](message["sql"]), message["repeat"])
        if engine_base(engine) in _POOL_PEAK:
            reply["pool_peak"] = _POOL_PEAK[engine_base(engine)]
        return reply

    common.serve({"setup": setup, "run": run,
                  "max_rss": lambda _: {"max_rss": common.max_rss()}})


# ---------------------------------------------------------------------------- parent


class EngineRunner:
    """An engine's worker, restarted after a timeout or crash; remembers a failed setup."""

    def __init__(self, engine: str, data: Path, setup_timeout: float,
                 memory_limit: str | None = None):
        self.engine = engine
        self.data = data
        self.memory_limit = memory_limit
        self.setup_timeout = setup_timeout
        self.worker: Worker | None = None
        self.setup_error: str | None = None
        self.max_rss = 0

    def run(self, sql: str, repeat: int, timeout: float) -> dict[str, Any]:
        """One query ``repeat`` times, each run within ``timeout``; raises on failure."""
        if self.setup_error:
            raise QueryFailed(f"setup failed: {self.setup_error}")
        times: list[float] = []
        peak_rss, pool_peak = 0, None
        for _ in range(repeat):
            if self.worker is None:
                self._start()
            try:
                reply = self.worker.call({"cmd": "run", "sql": sql, "repeat": 1}, timeout)
            except WorkerError:
                self.worker.kill()
                self.worker = None  # killed (timeout) or crashed: a fresh one next time
                raise
            times += reply["times"]
            peak_rss = max(peak_rss, reply.get("peak_rss") or 0)
            self.max_rss = max(self.max_rss, peak_rss)
            if reply.get("pool_peak") is not None:
                pool_peak = max(pool_peak or 0, reply["pool_peak"])
        return {"times": times, "rows": reply["rows"], "peak_rss": peak_rss or None,
                "pool_peak": pool_peak}

    def _start(self) -> None:
        self.worker = Worker([sys.executable, __file__, "--worker", self.engine], self.engine)
        try:
            self.worker.call({"cmd": "setup", "data": str(self.data),
                              "memory_limit": self.memory_limit}, self.setup_timeout)
        except (QueryFailed, WorkerError) as error:
            self.setup_error = str(error)
            self.worker.close()
            self.worker = None
            raise QueryFailed(f"setup failed: {error}") from error

    def close(self) -> None:
        # ru_maxrss alone is not the run's peak: each query's measurement (PeakRss) resets the
        # kernel's high-water mark, so it covers only the time since the last query started
        if self.worker is not None:
            try:
                self.max_rss = max(self.max_rss,
                                   self.worker.call({"cmd": "max_rss"}, 10)["max_rss"])
            except (QueryFailed, WorkerError):
                pass
            self.worker.close()
            self.worker = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor")
    parser.add_argument("--engines", default=",".join(ENGINES),
                        help=f"comma-separated subset of {','.join(ENGINES)}; "
                             "plansight@N / datafusion@N run at target_partitions=N, "
                             "duckdb@N with threads=N")
    parser.add_argument("--queries", default="1-22", help="e.g. 1-22 or 1,3,18")
    parser.add_argument("--repeat", type=int, default=3, help="runs per query (median)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="Parquet folder (default bench/data/sf{N})")
    parser.add_argument("--output", type=Path, default=None,
                        help="report path (default bench/results/tpch_sf{N}.md)")
    parser.add_argument("--memory-limit", default=None,
                        help="plansight's session memory_limit, e.g. 8GB (others: defaults)")
    parser.add_argument("--note", default="", help="free text added to the report")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main(args.worker)
        return 0

    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = {e for e in engines if engine_base(e) not in ENGINES or "@" in e and not (
        engine_base(e) in THREADED and e.partition("@")[2].isdigit())}
    if unknown:
        parser.error(f"unknown engines: {', '.join(sorted(unknown))}")
    numbers = parse_queries(args.queries)
    label = f"sf{args.scale:g}"
    data = args.data_dir or common.DATA_DIR / label
    output = args.output or common.RESULTS_DIR / f"tpch_{label}.md"

    common.ensure_plansight_importable()
    from plansight.datasets import TPCH_QUERIES, tpch_parquet

    print(f"TPC-H {label}: Parquet in {data}", file=sys.stderr)
    tpch_parquet(data, args.scale)

    runners = {e: EngineRunner(e, data, setup_timeout=max(600.0, args.timeout),
                               memory_limit=args.memory_limit) for e in engines}
    results: dict[int, dict[str, dict[str, Any]]] = {}
    try:
        for number in numbers:
            results[number] = {}
            for engine, runner in runners.items():
                cell: dict[str, Any]
                try:
                    reply = runner.run(TPCH_QUERIES[number], args.repeat, args.timeout)
                    cell = {"seconds": median(reply["times"]), "rows": reply["rows"],
                            "peak_rss": reply["peak_rss"], "pool_peak": reply["pool_peak"]}
                except WorkerTimeout:
                    cell = {"failure": f"timeout (> {args.timeout:g} s)"}
                except (QueryFailed, WorkerError) as error:
                    cell = {"failure": str(error)}
                results[number][engine] = cell
                print(f"q{number:02d} {engine:<10} "
                      f"{fmt_ms(cell.get('seconds')) if 'seconds' in cell else cell['failure']}",
                      file=sys.stderr, flush=True)
    finally:
        for runner in runners.values():
            runner.close()

    report = render(args, label, engines, numbers, results, runners)
    print(report)
    common.write_report(output, report)
    print(f"written to {output}", file=sys.stderr)
    return 0


def parse_queries(text: str) -> list[int]:
    numbers: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            low, high = part.split("-")
            numbers.extend(range(int(low), int(high) + 1))
        elif part:
            numbers.append(int(part))
    if not numbers or any(not 1 <= n <= 22 for n in numbers):
        raise SystemExit(f"queries must be within 1-22: {text}")
    return numbers


def memory_section(engines: list[str], numbers: list[int],
                   results: dict[int, dict[str, dict[str, Any]]]) -> list[str]:
    """Per query: each engine's peak RSS while it ran, plansight's pool peak reservation."""
    headers = ["query", *(f"{e} peak RSS" for e in engines)]
    pool = next((e for e in engines if engine_base(e) == "plansight"), None)
    if pool:
        headers.append(f"{pool} pool peak")
    rows = []
    for number in numbers:
        cells = results[number]
        row = [f"Q{number:02d}", *(fmt_mb(cells[e].get("peak_rss")) for e in engines)]
        if pool:
            row.append(fmt_mb(cells[pool].get("pool_peak")))
        rows.append(row)
    return ["## Peak memory per query (MiB)", "",
            "The process's RSS high-water mark while the query ran (its runs, repeated), "
            "memory kept from earlier queries included; the pool peak is what plansight's "
            "operators reserved.", "", markdown_table(headers, rows), ""]


def render(args: argparse.Namespace, label: str, engines: list[str], numbers: list[int],
           results: dict[int, dict[str, dict[str, Any]]],
           runners: dict[str, EngineRunner]) -> str:
    reference = next((e for e in engines if engine_base(e) == "plansight"), None)
    others = [e for e in engines if e != reference]
    headers = ["query", *(f"{e} ms" for e in engines)]
    if reference:
        headers += [f"{reference}/{e}" for e in others]

    def seconds(number: int, engine: str) -> float | None:
        return results[number][engine].get("seconds")

    # A row count that differs from DuckDB's (the oracle) is flagged with "*".
    oracle = "duckdb" if "duckdb" in engines else None
    rows = []
    failures: dict[str, list[str]] = {}
    for number in numbers:
        row = [f"Q{number:02d}"]
        for engine in engines:
            cell = results[number][engine]
            if "failure" in cell:
                failures.setdefault(engine, []).append(f"Q{number:02d}: {cell['failure']}")
                row.append(MISSING)
                continue
            mark = ""
            if oracle and engine != oracle and "rows" in results[number][oracle] \
                    and cell["rows"] != results[number][oracle]["rows"]:
                mark = "*"
            row.append(fmt_ms(cell["seconds"]) + mark)
        if reference:
            for engine in others:
                mine, theirs = seconds(number, reference), seconds(number, engine)
                row.append(fmt_ratio(mine / theirs if mine and theirs else None))
        rows.append(row)

    # Geometric means: over the queries every engine finished (when there are any), and per
    # engine over the queries it finished; ratios are geometric means of per-query ratios.
    common_queries = [n for n in numbers if all(seconds(n, e) for e in engines)]
    if common_queries:
        row = [f"geomean ({len(common_queries)} q all ran)"]
        row += [fmt_ms(geomean(seconds(n, e) for n in common_queries)) for e in engines]
        if reference:
            row += [fmt_ratio(geomean(seconds(n, reference) / seconds(n, e)
                                      for n in common_queries)) for e in others]
        rows.append(row)
    row = ["geomean (each engine's own)"]
    row += [fmt_ms(geomean(seconds(n, e) for n in numbers)) for e in engines]
    if reference:
        row += [fmt_ratio(geomean(seconds(n, reference) / seconds(n, e) for n in numbers
                                  if seconds(n, reference) and seconds(n, e))) for e in others]
    rows.append(row)
    row = ["queries finished"]
    row += [str(sum(1 for n in numbers if seconds(n, e))) + f"/{len(numbers)}" for e in engines]
    if reference:
        row += [""] * len(others)
    rows.append(row)

    lines = [
        f"# TPC-H {label.upper()} — {', '.join(engines)}",
        "",
        f"Median of {args.repeat} runs per query, in milliseconds, results materialized as "
        f"Arrow; one worker process per engine; engines interleaved query by query; "
        f"timeout {args.timeout:g} s per run. Data: tpchgen-cli Parquet, scale factor "
        f"{args.scale:g}. `{MISSING}` = failed or timed out (see below)"
        + ("; `*` = row count differs from DuckDB's." if oracle else "."),
        *(["", f"plansight ran with memory_limit={args.memory_limit}; the other engines with "
               "their defaults."] if args.memory_limit else []),
        *(["", f"Note: {args.note}"] if args.note else []),
        "",
        markdown_table(headers, rows),
        "",
        "Peak RSS per engine process (MiB): "
        + ", ".join(f"{e} {fmt_mb(runners[e].max_rss or None)}" for e in engines),
        "",
        *memory_section(engines, numbers, results),
        "## Machine",
        "",
        common.environment_markdown(PACKAGES),
        "",
        f"Command: `python bench/run_tpch.py {shlex.join(sys.argv[1:])}`",
    ]
    if failures:
        lines += ["", "## Failures", ""]
        for engine, items in failures.items():
            grouped: dict[str, list[str]] = {}
            for item in items:
                query, failure = item.split(": ", 1)
                grouped.setdefault(failure, []).append(query)
            lines += [f"- {engine} ({', '.join(queries)}): {failure}"
                      for failure, queries in grouped.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
