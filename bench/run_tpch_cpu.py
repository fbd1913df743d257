"""TPC-H CPU time of this checkout against a baseline checkout, at 1 and 2 partitions.

For a loaded machine, where wall times drift: every configuration runs in its own worker
process and reports the process's CPU time per query (all threads), and the configurations
are interleaved run by run (query 1 on every configuration, then again, ...). The 2-vs-1
partition speedup needs wall time, so that is reported too, with the warning that it only
means something when the machine is quiet.

The baseline is a source tree of plansight (e.g. ``git archive main | tar -x -C DIR``); it is
imported through ``--baseline-path``, a folder holding ``plansight/`` with ``engine``,
``magic``, ``widgets``, ``profiling`` linked inside (the package-dir mapping of an install).

Usage:
    python bench/run_tpch_cpu.py --data bench/data/sf1 --baseline-path /tmp/base
    python bench/run_tpch_cpu.py --data bench/data/sf1 --queries 1,9,21 --partitions 1,2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")

WORKER = r"""
import json, sys, time
import plansight as ps
from pathlib import Path
data, partitions = sys.argv[1], int(sys.argv[2])
session = ps.Session(target_partitions=partitions)
for table in __TABLES__:
    session.register_parquet(table, f"{data}/{table}.parquet")
queries = Path(ps.__file__).parent / "datasets" / "tpch_queries"
print(json.dumps({"ready": ps.__file__}), flush=True)
for line in sys.stdin:
    q = int(line)
    sql = next(queries.glob(f"[qQ]{q:02d}.sql")).read_text()
    cpu, wall = time.process_time(), time.perf_counter()
    rows = session.sql(sql).to_arrow().num_rows
    print(json.dumps({"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall,
                      "rows": rows}), flush=True)
""".replace("__TABLES__", repr(TABLES))


class Worker:
    def __init__(self, label: str, data: Path, partitions: int, pythonpath: str | None):
        env = dict(os.environ)
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        self.label = label
        self.process = subprocess.Popen([sys.executable, "-c", WORKER, str(data), str(partitions)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env=env, cwd="/")
        print(f"{label}: {json.loads(self.process.stdout.readline())['ready']}", file=sys.stderr)

    def run(self, query: int) -> dict:
        self.process.stdin.write(f"{query}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.label} died on Q{query}")
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--baseline-path", default=None)
    parser.add_argument("--queries", default=",".join(str(q) for q in range(1, 23)))
    parser.add_argument("--partitions", default="1,2")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    queries = [int(q) for q in args.queries.split(",")]
    parts = [int(p) for p in args.partitions.split(",")]
    configs = [("new", p, None) for p in parts]
    if args.baseline_path:
        configs = [("base", p, args.baseline_path) for p in parts] + configs
    workers = {(name, p): Worker(f"{name}@{p}", args.data, p, path) for name, p, path in configs}
    results: dict[tuple, dict[int, list[dict]]] = {key: {} for key in workers}
    try:
        for q in queries:
            for _ in range(args.repeat):
                for key, worker in workers.items():
                    results[key].setdefault(q, []).append(worker.run(q))
            line = "  ".join(f"{n}@{p} cpu {min(r['cpu'] for r in results[(n, p)][q]):6.2f}s"
                             for n, p in workers)
            print(f"Q{q:02d}  {line}", file=sys.stderr, flush=True)
    finally:
        for worker in workers.values():
            worker.close()

    def best(key, q, what):
        return min(r[what] for r in results[key][q])

    def ratio(p, q):
        return best(("new", p), q, "cpu") / best(("base", p), q, "cpu")

    header = ["query"] + [f"{n}@{p} cpu s" for n, p in workers] + \
        [f"{n}@{p} wall s" for n, p in workers]
    if args.baseline_path:
        header += [f"new/base cpu @{p}" for p in parts]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    rows = [[f"Q{q:02d}"] + [f"{best(k, q, 'cpu'):.2f}" for k in workers] +
            [f"{best(k, q, 'wall'):.2f}" for k in workers] +
            ([f"{ratio(p, q):.2f}x" for p in parts] if args.baseline_path else []) for q in queries]
    rows.append(["geomean"] + [f"{geomean([best(k, q, 'cpu') for q in queries]):.3f}"
                               for k in workers] +
                [f"{geomean([best(k, q, 'wall') for q in queries]):.3f}" for k in workers] +
                ([f"{geomean([ratio(p, q) for q in queries]):.2f}x"
                  for p in parts] if args.baseline_path else []))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, best of {args.repeat} "
          f"interleaved runs, load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
