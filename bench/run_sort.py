"""Full in-memory sort: plansight beside DuckDB at several sizes, CPU seconds and peak RSS.

``SELECT x, y FROM t ORDER BY x`` over run_parallel.py's table ``t`` (random int64 ``x``,
sorted ``y``) at each ``--rows`` size, interleaved run by run (every engine's run 1, then
every engine's run 2, ...) so drifting load from a shared machine hits all engines alike.
Reports the median wall and CPU time (process CPU, all threads) and the peak RSS during
the query, and each engine's CPU ratio to DuckDB's. A superlinear sort shows as CPU per
million rows growing with the size.

``--baseline-python`` adds the engine ``baseline@1``: plansight at one partition run by
another interpreter, e.g. the venv of a worktree checked out at an older commit, so the
before/after comparison runs interleaved on the same machine state.

Usage:
    python bench/run_sort.py                                   # 1M, 4M, 10M rows, 3 runs
    python bench/run_sort.py --rows 1000000,4000000 --repeat 1
    python bench/run_sort.py --baseline-python /work/venvs/old/bin/python
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import common
from common import PeakRss, QueryFailed, Worker, WorkerError, fmt_mb, fmt_ms, markdown_table
from run_parallel import make_tables

SQL = "SELECT x, y FROM t ORDER BY x"
ENGINES = ["plansight@1", "plansight@2", "duckdb@1", "duckdb"]


def setup_engine(engine: str, rows: int):
    t, _ = make_tables(rows)
    if engine.startswith(("plansight", "baseline")):
        common.ensure_plansight_importable()
        import plansight as ps

        session = ps.Session(target_partitions=int(engine.split("@")[1]))
        session.register("t", t)
        return lambda: session.sql(SQL).to_arrow().num_rows
    if engine.startswith("duckdb"):
        import duckdb

        con = duckdb.connect()
        if "@" in engine:
            con.execute(f"SET threads = {int(engine.split('@')[1])}")
        con.register("t", t)

        def run():
            result = con.sql(SQL).arrow()
            return (result.read_all() if hasattr(result, "read_all") else result).num_rows
        return run
    raise ValueError(engine)


def worker_main(engine: str) -> None:
    state: dict[str, Any] = {}

    def setup(message):
        setup_engine(engine, 1000)()  # imports and first-query costs are not the sort's
        state["run"] = setup_engine(engine, message["rows"])
        return {}

    def run(message):
        with PeakRss() as memory:
            wall, cpu = time.perf_counter(), time.process_time()
            rows = state["run"]()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        return {"wall": wall, "cpu": cpu, "rows": rows, "peak_rss": memory.peak,
                "base_rss": memory.base}

    common.serve({"setup": setup, "run": run})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000000,4000000,10000000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--baseline-python", help="interpreter for the engine baseline@1")
    parser.add_argument("--note", default="", help="a line for the report (machine load)")
    parser.add_argument("--output", default=str(common.RESULTS_DIR / "sort.md"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main(args.worker)
        return 0
    engines = args.engines.split(",")
    if args.baseline_python:
        engines.insert(0, "baseline@1")
    sizes = [int(size) for size in args.rows.split(",")]
    runs: dict[tuple[int, str], list[dict[str, Any]]] = {}
    failures: dict[tuple[int, str], str] = {}
    for rows in sizes:
        workers = {}
        try:
            for engine in engines:
                python = args.baseline_python if engine.startswith("baseline") else \
                    sys.executable
                worker = Worker([python, __file__, "--worker", engine], engine)
                workers[engine] = worker
                try:
                    worker.call({"cmd": "setup", "rows": rows}, args.timeout)
                except (QueryFailed, WorkerError) as error:
                    failures[(rows, engine)] = f"setup failed: {error}"
            for _ in range(args.repeat):
                for engine in engines:
                    if (rows, engine) in failures:
                        continue
                    try:
                        reply = workers[engine].call({"cmd": "run"}, args.timeout)
                    except (QueryFailed, WorkerError) as error:
                        failures[(rows, engine)] = str(error)
                        continue
                    runs.setdefault((rows, engine), []).append(reply)
                    print(f"{rows:>11,} {engine:12} wall {reply['wall']:7.2f} s  "
                          f"cpu {reply['cpu']:7.2f} s  peak {fmt_mb(reply['peak_rss'])} MiB",
                          flush=True)
        finally:
            for worker in workers.values():
                worker.close()

    def median(rows, engine, field):
        values = [run[field] for run in runs.get((rows, engine), [])]
        return common.median(values) if values else None

    def ms(seconds):
        return fmt_ms(seconds) if seconds is not None else common.MISSING

    table = []
    for rows in sizes:
        duck_cpu = median(rows, "duckdb@1", "cpu") if "duckdb@1" in engines else None
        for engine in engines:
            cpu = median(rows, engine, "cpu")
            peak = max((run["peak_rss"] or 0 for run in runs.get((rows, engine), [])),
                       default=None)
            table.append([f"{rows:,}", engine, ms(median(rows, engine, "wall")), ms(cpu),
                          f"{cpu / (rows / 1e6) * 1e3:.0f}" if cpu else common.MISSING,
                          f"{cpu / duck_cpu:.1f}x" if cpu and duck_cpu else common.MISSING,
                          fmt_mb(peak) if peak else common.MISSING])
    lines = [f"# Full sort: `{SQL}`", "",
             (f"Median of {args.repeat} interleaved runs. CPU: process CPU time, all threads. "
              "Peak RSS of the worker during the query (includes the input table, ~24 bytes a "
              "row). `duckdb@1` is DuckDB with `SET threads = 1`."), ""]
    if args.note:
        lines += [args.note, ""]
    lines += [markdown_table(["rows", "engine", "wall ms", "CPU ms", "CPU ms / M rows",
                              "CPU vs duckdb@1", "peak MiB"], table), ""]
    if failures:
        lines += ["Failures:", *[f"- {rows:,} {engine}: {error}"
                                 for (rows, engine), error in failures.items()], ""]
    lines += [common.environment_markdown(["pyarrow", "numpy", "duckdb"]),
              f"Command: `python bench/run_sort.py {shlex.join(sys.argv[1:])}`"]
    text = "\n".join(lines)
    print(text)
    common.write_report(Path(args.output), text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
