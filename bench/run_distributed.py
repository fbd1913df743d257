"""Distributed execution: local plansight vs the same plans staged on 1 and 2 Dask workers.

Workloads: a 5M-row aggregate (1M groups), a 5M x 1M-row partitioned join, and TPC-H SF 1
Q1/Q3/Q5/Q9/Q18, all read from Parquet by path (workers read the files themselves). Every
configuration runs at the same ``--partitions``; a worker has ``--threads`` threads, and
local plansight runs its partitions on threads as usual. Rounds are interleaved (round 1:
every workload on local, 1 worker, 2 workers; then round 2 ...) so a machine that gets
busier hurts all configurations alike; the median of the rounds is reported, with the
client's CPU seconds per query. ``dispatch`` is a one-row query: the per-query overhead.

Clusters are LocalClusters of worker processes bound to 127.0.0.1, dashboard off.

Usage:
    python bench/run_distributed.py                      # 5M rows, SF 1, 5 rounds
    python bench/run_distributed.py --rows 200000 --scale 0.01 --rounds 1   # smoke test
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import common
from common import fmt_ms, fmt_ratio, markdown_table, median

PACKAGES = ("plansight", "pyarrow", "dask", "distributed", "tpchgen-cli")
TPCH = (1, 3, 5, 9, 18)
TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")


def synthetic(directory: Path, rows: int) -> None:
    """``facts`` (rows, 1 row in 5 per group: rows / 5 groups) and ``dims`` (rows / 5 keys)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    facts, dims = directory / "facts.parquet", directory / "dims.parquet"
    if facts.exists() and dims.exists() and pq.ParquetFile(facts).metadata.num_rows == rows:
        return
    rng = np.random.default_rng(17)
    keys = max(rows // 5, 1)
    pq.write_table(pa.table({"k": rng.integers(0, keys, rows), "v": rng.random(rows),
                             "q": rng.integers(0, 100, rows)}), facts, row_group_size=250_000)
    pq.write_table(pa.table({"k": np.arange(keys), "w": rng.random(keys),
                             "g": rng.integers(0, 50, keys)}), dims, row_group_size=250_000)


def workloads() -> dict[str, str]:
    from plansight.datasets import TPCH_QUERIES

    found = {
        "dispatch": "SELECT count(*) AS n FROM region",
        "aggregate": "SELECT k, sum(v) AS s, count(*) AS n, max(q) AS m FROM facts GROUP BY k",
        "join": "SELECT d.g, sum(f.v * d.w) AS s, count(*) AS n FROM facts f "
                "JOIN dims d ON f.k = d.k GROUP BY d.g",
    }
    found.update({f"tpch q{n}": TPCH_QUERIES[n] for n in TPCH})
    return found


def session(cluster, partitions: int, tpch: Path, synthetic_dir: Path):
    import plansight as ps

    made = ps.Session(target_partitions=partitions, cluster=cluster)
    if cluster is not None:  # every query to the cluster, the one-row dispatch probe too
        made.set_option("cluster_min_rows", 0)
    # the join hashes both sides (the build has 1M rows: shipping one build to every task
    # would measure broadcast, not the shuffle)
    made.set_option("hash_join_single_partition_threshold_rows", 0)
    for table in TABLES:
        made.register_parquet(table, str(tpch / f"{table}.parquet"))
    made.register_parquet("facts", str(synthetic_dir / "facts.parquet"))
    made.register_parquet("dims", str(synthetic_dir / "dims.parquet"))
    return made


def timed(run) -> tuple[float, float, int]:
    cpu, wall = time.process_time(), time.perf_counter()
    rows = run()
    return time.perf_counter() - wall, time.process_time() - cpu, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000, help="rows of the fact table")
    parser.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median)")
    parser.add_argument("--partitions", type=int, default=4, help="target_partitions")
    parser.add_argument("--threads", type=int, default=2, help="threads per worker")
    parser.add_argument("--output", type=Path, default=None,
                        help="report path (default bench/results/distributed.md)")
    parser.add_argument("--note", default="", help="free text added to the report")
    args = parser.parse_args(argv)

    common.ensure_plansight_importable()
    from distributed import Client, LocalCluster

    from plansight.datasets import tpch_parquet

    tpch = common.DATA_DIR / f"sf{args.scale:g}"
    tpch_parquet(tpch, args.scale)
    synthetic_dir = common.DATA_DIR / f"distributed_{args.rows}"
    synthetic(synthetic_dir, args.rows)
    output = args.output or common.RESULTS_DIR / "distributed.md"

    clusters, sessions = [], {"local": session(None, args.partitions, tpch, synthetic_dir)}
    try:
        for workers in (1, 2):
            cluster = LocalCluster(n_workers=workers, threads_per_worker=args.threads,
                                   processes=True, host="127.0.0.1", dashboard_address=None)
            client = Client(cluster)
            clusters.append((cluster, client))
            sessions[f"{workers} worker{'s' * (workers > 1)}"] = session(
                client, args.partitions, tpch, synthetic_dir)
        names = list(sessions)
        queries = workloads()
        for made in sessions.values():  # warm up: imports, JIT kernels, file metadata
            for sql in queries.values():
                made.sql(sql).to_arrow()
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for round_number in range(args.rounds):
            for label, sql in queries.items():
                rows = set()
                for name in names:
                    wall, cpu, count = timed(
                        lambda s=sessions[name], q=sql: s.sql(q).to_arrow().num_rows)
                    times.setdefault((label, name), []).append((wall, cpu))
                    rows.add(count)
                    print(f"round {round_number + 1} {label:<10} {name:<9} {fmt_ms(wall)}",
                          file=sys.stderr, flush=True)
                if len(rows) != 1:
                    raise SystemExit(f"{label}: row counts differ across configurations: {rows}")
    finally:
        for cluster, client in clusters:
            client.close()
            cluster.close()

    headers = ["workload", *[f"{n} (ms)" for n in names], "client CPU 2w (ms)",
               "2w / local", "1w / 2w"]
    table = []
    for label in queries:
        walls = {n: median([w for w, _ in times[(label, n)]]) for n in names}
        cpu = median([c for _, c in times[(label, names[-1])]])
        table.append([label, *[fmt_ms(walls[n]) for n in names], fmt_ms(cpu),
                      fmt_ratio(walls[names[2]] / walls["local"]),
                      fmt_ratio(walls[names[1]] / walls[names[2]])])
    report = "\n\n".join([
        "# Distributed execution: local vs 1 and 2 Dask workers",
        f"{args.rows:,}-row aggregate and join, TPC-H SF {args.scale:g}; target_partitions="
        f"{args.partitions}, {args.threads} threads per worker, median of {args.rounds} "
        "interleaved rounds after a warm-up round. Wall times; client CPU is the notebook "
        "side of a 2-worker run (dispatch, result transfer).",
        markdown_table(headers, table),
        common.environment_markdown(PACKAGES),
        f"Command: python bench/run_distributed.py {' '.join(argv or sys.argv[1:])}",
        args.note,
    ])
    common.write_report(output, report)
    print(report)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore::UserWarning")
    sys.exit(main())
