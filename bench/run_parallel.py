"""Parallelism and top-k: plansight at 1 and 2 partitions beside DuckDB, DataFusion, Polars.

One generated table ``t`` (``--rows``, default 10M: ``x`` random int64, ``y`` sorted int64,
``g`` = x % 1000) and a 1,000-row dimension ``d``; every engine gets its own worker process
holding the same data in memory. Queries: a grouped aggregate, a join + aggregate, a full
sort, a top-k (ORDER BY x LIMIT 10, the same sort with a fetch) and a moving-frame window.
Reports the median time, the peak RSS during the query, and plansight's 2-vs-1-partition
speedup and top-k vs full-sort ratio.

Usage:
    python bench/run_parallel.py                      # 10M rows, 3 runs
    python bench/run_parallel.py --rows 2000000 --repeat 1
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

import common
from common import QueryFailed, Worker, WorkerError, fmt_mb, fmt_ms, fmt_ratio, markdown_table

QUERIES = {
    "aggregate": "SELECT g, sum(x) AS s, count(*) AS c FROM t GROUP BY g",
    "join": "SELECT d.name, sum(t.x) AS s FROM t JOIN d ON t.g = d.g GROUP BY d.name",
    "sort": "SELECT x, y FROM t ORDER BY x",
    "top-k": "SELECT x, y FROM t ORDER BY x LIMIT 10",
    "window": "SELECT g, y, sum(x) OVER (PARTITION BY g ORDER BY y ROWS BETWEEN 10 PRECEDING "
              "AND CURRENT ROW) AS w FROM t",
}
ENGINES = ["plansight@1", "plansight@2", "duckdb", "datafusion", "polars"]


def make_tables(rows: int):
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(42)
    x = rng.integers(0, 1 << 40, rows)
    t = pa.table({"x": x, "y": np.arange(rows), "g": x % 1000})
    d = pa.table({"g": np.arange(1000), "name": [f"name{i % 50}" for i in range(1000)]})
    return t, d


def setup_engine(engine: str, rows: int):
    t, d = make_tables(rows)
    if engine.startswith("plansight"):
        common.ensure_plansight_importable()
        import plansight as ps

        session = ps.Session(target_partitions=int(engine.split("@")[1]))
        session.register("t", t)
        session.register("d", d)
        return lambda sql: session.sql(sql).to_arrow().num_rows
    if engine == "duckdb":
        import duckdb

        con = duckdb.connect()
        con.register("t", t)
        con.register("d", d)

        def run(sql):
            result = con.sql(sql).arrow()
            return (result.read_all() if hasattr(result, "read_all") else result).num_rows
        return run
    if engine == "datafusion":
        import datafusion

        ctx = datafusion.SessionContext()
        ctx.from_arrow(t, "t")
        ctx.from_arrow(d, "d")
        return lambda sql: ctx.sql(sql).to_arrow_table().num_rows
    if engine == "polars":
        import polars as pl

        context = pl.SQLContext(frames={"t": pl.from_arrow(t), "d": pl.from_arrow(d)})
        return lambda sql: context.execute(sql).collect().to_arrow().num_rows
    raise ValueError(engine)


def worker_main(engine: str) -> None:
    state: dict[str, Any] = {}

    def setup(message):
        state["run"] = setup_engine(engine, message["rows"])
        return {}

    def run(message):
        return common.timed_runs(lambda: state["run"](message["sql"]), message["repeat"])

    common.serve({"setup": setup, "run": run})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--output", default=str(Path(__file__).parent / "results" /
                                                 "parallel.md"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main(args.worker)
        return 0
    engines = args.engines.split(",")
    results: dict[tuple[str, str], dict[str, Any] | str] = {}
    for engine in engines:
        with Worker([sys.executable, __file__, "--worker", engine], engine) as worker:
            try:
                worker.call({"cmd": "setup", "rows": args.rows}, args.timeout)
            except (QueryFailed, WorkerError) as error:
                for name in QUERIES:
                    results[(engine, name)] = f"setup failed: {error}"
                continue
            for name, sql in QUERIES.items():
                try:
                    reply = worker.call({"cmd": "run", "sql": sql, "repeat": args.repeat},
                                        args.timeout * args.repeat)
                    results[(engine, name)] = reply
                    print(f"{engine:12} {name:10} {fmt_ms(common.median(reply['times']))} ms",
                          flush=True)
                except (QueryFailed, WorkerError) as error:
                    results[(engine, name)] = str(error)
                    print(f"{engine:12} {name:10} failed: {error}", flush=True)

    def cell(engine, name, field="time"):
        value = results.get((engine, name))
        if not isinstance(value, dict):
            return "—"
        if field == "time":
            return fmt_ms(common.median(value["times"]))
        return fmt_mb(value["peak_rss"])

    def seconds(engine, name):
        value = results.get((engine, name))
        return common.median(value["times"]) if isinstance(value, dict) else None

    headers = ["query"] + [f"{e} ms" for e in engines] + [f"{e} peak MiB" for e in engines]
    rows = [[name] + [cell(e, name) for e in engines] + [cell(e, name, "rss") for e in engines]
            for name in QUERIES]
    lines = [f"# Parallelism and top-k ({args.rows:,} rows)", "",
             f"Median of {args.repeat} runs, ms; peak RSS of the worker during the query, MiB "
             "(includes the input table). One worker process per engine.", "",
             markdown_table(headers, rows), ""]
    if "plansight@1" in engines and "plansight@2" in engines:
        speedups = []
        for name in QUERIES:
            one, two = seconds("plansight@1", name), seconds("plansight@2", name)
            speedups.append([name, fmt_ratio(one / two if one and two else None)])
        lines += ["plansight speedup, 2 partitions vs 1:", "",
                  markdown_table(["query", "speedup"], speedups), ""]
        for engine in ("plansight@1", "plansight@2"):
            sort, topk = seconds(engine, "sort"), seconds(engine, "top-k")
            if sort and topk:
                lines.append(f"- {engine}: top-k is {sort / topk:.1f}x faster than the full "
                             f"sort ({cell(engine, 'top-k', 'rss')} vs "
                             f"{cell(engine, 'sort', 'rss')} MiB peak)")
    failures = [f"- {e} {n}: {v}" for (e, n), v in results.items() if isinstance(v, str)]
    if failures:
        lines += ["", "Failures:", *failures]
    lines += ["", common.environment_markdown(["pyarrow", "duckdb", "datafusion", "polars"]),
              f"Command: `python bench/run_parallel.py {shlex.join(sys.argv[1:])}`"]
    text = "\n".join(lines)
    print(text)
    common.write_report(Path(args.output), text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
