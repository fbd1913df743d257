"""Where a query's CPU goes at target_partitions 1 and 2: Arrow/numpy kernels (which release
the GIL, so two partitions can overlap them) versus plansight's own Python per batch (which
holds it, so two partitions take turns).

Every thread the query starts is profiled with cProfile on its own CPU clock
(``time.thread_time``), so the load of other processes does not count and time spent waiting
for the GIL does not either. Wall time is printed too, but only means something on an idle
machine. cProfile's own per-call cost inflates the Python share somewhat.

Usage:
    python bench/profile_cpu.py                          # the bench's grouped aggregate
    python bench/profile_cpu.py --batch-size 65536 --rows 2000000
    python bench/profile_cpu.py --sql "SELECT ... FROM t ..."   (t as in run_parallel.py)
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import threading
import time
from collections import defaultdict

import run_parallel
from common import ensure_plansight_importable

DEFAULT_SQL = run_parallel.QUERIES["aggregate"]


def _category(key: tuple[str, int, str]) -> str:
    filename, _, function = key
    if "pyarrow" in filename or "pyarrow" in function:
        return "arrow kernels (GIL released)"
    if "numpy" in filename or "numpy" in function:
        return "numpy (GIL released for large arrays)"
    if "/plansight/" in filename or "/engine/" in filename or "/wt/" in filename:
        return "plansight Python (holds the GIL)"
    return "other Python and builtins (holds the GIL)"


class _ThreadProfiles:
    """Profile every thread started while active, each on its own CPU clock."""

    def __init__(self):
        self.profiles: list[cProfile.Profile] = []
        self._run = threading.Thread.run

    def __enter__(self):
        profiles, original = self.profiles, self._run

        def run(thread):
            profile = cProfile.Profile(time.thread_time)
            profiles.append(profile)
            profile.enable()
            try:
                original(thread)
            finally:
                profile.disable()

        threading.Thread.run = run
        return self

    def __exit__(self, *exc):
        threading.Thread.run = self._run


def profile_query(sql: str, rows: int, partitions: int, batch_size: int, top: int) -> None:
    ensure_plansight_importable()
    import plansight as ps

    t, d = run_parallel.make_tables(rows)
    session = ps.Session(target_partitions=partitions, batch_size=batch_size)
    session.register("t", t)
    session.register("d", d)
    query = session.sql(sql)
    query.to_arrow()  # warm up
    main = cProfile.Profile(time.thread_time)
    with _ThreadProfiles() as threads:
        start = time.perf_counter()
        main.enable()
        query.to_arrow()
        main.disable()
        wall = time.perf_counter() - start
    stats = pstats.Stats(main)
    for profile in threads.profiles:
        stats.add(profile)
    by_category: dict[str, float] = defaultdict(float)
    for key, (_, _, own, _, _) in stats.stats.items():
        by_category[_category(key)] += own
    total = sum(by_category.values())
    print(f"== target_partitions={partitions}, batch_size={batch_size}, rows={rows:,}: "
          f"CPU {total * 1e3:.0f} ms in {len(threads.profiles) + 1} threads, "
          f"wall {wall * 1e3:.0f} ms")
    for category, seconds in sorted(by_category.items(), key=lambda kv: -kv[1]):
        print(f"   {seconds * 1e3:8.0f} ms  {seconds / total:5.1%}  {category}")
    stats.sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sql", default=DEFAULT_SQL)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--batch-size", type=int, default=8192)
    parser.add_argument("--partitions", default="1,2")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    for partitions in map(int, args.partitions.split(",")):
        profile_query(args.sql, args.rows, partitions, args.batch_size, args.top)


if __name__ == "__main__":
    main()
