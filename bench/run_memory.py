"""Memory: time and peak RSS of spilling queries against the memory limit; event-bus overhead.

For each workload and input size (``--sizes`` times the memory limit, in Arrow bytes of a
generated Parquet file in bench/data/memory/) a fresh worker process runs the query once
with the limit and once without one. The result is streamed and counted, not kept, so the
worker's RSS shows what the engine holds, not the answer. Reported per cell: median time,
peak RSS of the worker during the query (the kernel's high-water mark) above its RSS before
it, the pool's peak reservation, and spill count and bytes.

Then the event bus (its own report, ``--bus-output``): queries on the smallest input, with no
observer and with one observer that counts events, interleaved ``--bus-repeat`` times in one
worker; overhead in process CPU time (robust to a loaded machine) and wall time, as the ratio
of the medians and as the median of back-to-back pairs. Besides the spilling sort (few, large
batches), a filter at batch sizes 8192 and 1024: as many batches per second as the engine
makes, the case where per-batch bookkeeping shows most.

Usage:
    python bench/run_memory.py                         # limit 16MB, inputs 5x and 20x, all
    python bench/run_memory.py --limit 32MB --sizes 5 --workloads sort --repeat 3
    python bench/run_memory.py --bus-only --bus-repeat 9   # only the event-bus overhead
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import common
from common import MISSING, QueryFailed, Worker, WorkerError, fmt_mb, markdown_table, median

WORKLOADS = {
    # the baseline: what reading the input costs (Parquet reader, allocator caches)
    "scan": "SELECT k, v, g, s FROM t",
    # external sort: runs spilled, merged in levels
    "sort": "SELECT k, v, s FROM t ORDER BY k, v",
    # window over 1000 partitions: HashWindowAggExec, refused by the pool, sorts (spilling
    # runs) into the streaming executor
    "window": "SELECT g, v, row_number() OVER (PARTITION BY g ORDER BY v) AS r FROM t",
    # one partition larger than memory, whole-partition aggregates: folded while its rows are
    # spilled, broadcast on the read-back
    "window_whole": "SELECT k, v, sum(v) OVER () AS total, max(v) OVER () AS top FROM t",
    # one partition larger than memory, moving frame: sorted (spilling), then streamed
    "window_moving": "SELECT k, v, sum(v) OVER (ORDER BY k ROWS 100 PRECEDING) AS s FROM t",
    # grouped aggregation over many groups (a string key, ~90% of the rows distinct): state
    # runs sorted by the key are spilled, then merged and re-aggregated group by group
    "aggregate": "SELECT s, sum(v) AS total, count(*) AS n, max(k) AS top FROM t GROUP BY s",
    # grace hash join: the build side (the whole input) spills into hash buckets, then the
    # probe side is split the same way and the buckets are joined one at a time
    "join": "SELECT a.k, a.v, b.s FROM t a JOIN t b ON a.k = b.k",
}
PACKAGES = ("plansight", "pyarrow", "numpy")
BYTES_PER_ROW = 8 + 8 + 8 + 4 + 12  # k, v, g, string offsets + ~12 characters
DATA_DIR = common.DATA_DIR / "memory"


# ---------------------------------------------------------------------------- data


def table_path(size_bytes: int) -> Path:
    """A Parquet file of about ``size_bytes`` Arrow bytes (made once, cached)."""
    rows = max(1, size_bytes // BYTES_PER_ROW)
    path = DATA_DIR / f"t_{rows}.parquet"
    if path.exists():
        return path
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    DATA_DIR.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(rows)
    tmp = path.with_suffix(".tmp")
    with pq.ParquetWriter(tmp, pa.schema([("k", pa.int64()), ("v", pa.float64()),
                                          ("g", pa.int64()), ("s", pa.string())])) as writer:
        for start in range(0, rows, 1 << 20):
            n = min(1 << 20, rows - start)
            k = rng.integers(0, 1 << 40, n)
            writer.write_table(pa.table({
                "k": k, "v": rng.random(n), "g": k % 1000,
                "s": pa.array(np.char.add("item-", (k % 10**7).astype(str)))}),
                row_group_size=1 << 16)
    tmp.rename(path)
    return path


# ---------------------------------------------------------------------------- worker side

_state: dict[str, Any] = {}


def _setup(message: dict[str, Any]) -> dict[str, Any]:
    import plansight as ps

    session = ps.Session(target_partitions=message["partitions"],
                         memory_limit=message["limit"] or "1TB",
                         batch_size=message["batch_size"])
    session.register_parquet("t", message["path"])
    _state["session"] = session
    import pyarrow.parquet as pq

    _state["bytes"] = pq.read_metadata(message["path"]).num_rows * BYTES_PER_ROW
    return {"rss": common.current_rss()}


def _stream(query, observer) -> tuple[int, Any]:
    """Run ``query`` like Query.execute, but count the result's rows instead of keeping them."""
    from plansight.engine.exec.context import TaskContext
    from plansight.engine.exec.events import EventBus, ReservationChanged
    from plansight.engine.exec.memory_pool import MemoryPool

    pool = MemoryPool(query.config.memory_limit, query.config.memory_pool_policy)
    bus = EventBus([observer] if observer is not None else [])
    if bus.active:
        pool.listeners.append(lambda r, total: bus.publish(
            ReservationChanged(r.consumer, r.size, total, pool.peak)))
    ctx = TaskContext(query.config, pool, events=bus)
    plan, rows = query.physical, 0
    try:
        for partition in range(plan.output_partitioning().count):
            for batch in plan.execute(partition, ctx):
                rows += batch.num_rows
    finally:
        ctx.cleanup()
        bus.close()  # the flush is part of the cost, as in Query.execute
    return rows, ctx


def _run(message: dict[str, Any]) -> dict[str, Any]:
    query = _state["session"].sql(message["sql"])
    # warm up the Parquet reader and the allocator's caches, so the peak is the query's
    _stream(_state["session"].sql(WORKLOADS["scan"]), None)
    times, rows, ctx = [], 0, None
    with common.PeakRss() as memory:
        for _ in range(message["repeat"]):
            start = time.perf_counter()
            rows, ctx = _stream(query, None)
            times.append(time.perf_counter() - start)
    spills = {"spill_count": 0, "spilled_bytes": 0}
    for totals in ctx.metrics.snapshot().values():
        for name in spills:
            spills[name] += int(totals.get(name, 0))
    return {"times": times, "rows": rows, "peak_rss": memory.peak, "base_rss": memory.base,
            "pool_peak": ctx.memory_pool.peak, **spills}


BUS_QUERIES = {
    # few large batches, spill and reservation events (with the limit)
    "sort": (WORKLOADS["sort"], None),
    # little work per batch: the session's default batch size, then the bus's worst case,
    # as many events per second as the engine makes small batches
    "filter, batch 8192": ("SELECT k, v FROM t WHERE v > 0.5", 8192),
    "filter, batch 1024": ("SELECT k, v FROM t WHERE v > 0.5", 1024),
}


def _bus(message: dict[str, Any]) -> dict[str, Any]:
    session = _state["session"]
    sql, batch_size = BUS_QUERIES[message["query"]]
    default_batch_size = session.config.batch_size
    if batch_size:
        session.set_option("batch_size", batch_size)
    query = session.sql(sql)
    session.set_option("batch_size", default_batch_size)
    delivered = {"events": 0, "batch_events": 0}

    def observer(event) -> None:
        delivered["events"] += 1
        if type(event).__name__ == "BatchProduced":
            delivered["batch_events"] += 1

    times: dict[str, list[float]] = {"none": [], "one": []}
    cpu: dict[str, list[float]] = {"none": [], "one": []}
    _stream(query, None)  # warm-up
    variants = [("none", None), ("one", observer)]
    batches = 0
    for i in range(message["repeat"]):
        # alternate which variant goes first: load from other processes hits both alike
        for name, chosen in variants[::1 if i % 2 else -1]:
            start, start_cpu = time.perf_counter(), time.process_time()
            _, ctx = _stream(query, chosen)
            times[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
        batches = int(sum(t.get("output_batches", 0) for t in ctx.metrics.snapshot().values()))
    repeat = message["repeat"]
    return {"times": times, "cpu": cpu, "batches": batches,
            "delivered": delivered["events"] // repeat,
            "batch_events": delivered["batch_events"] // repeat}


# ---------------------------------------------------------------------------- parent side


def _worker(args: argparse.Namespace, path: Path, limit: int | None) -> Worker:
    worker = Worker([sys.executable, __file__, "--worker"], "plansight")
    worker.call({"cmd": "setup", "path": str(path), "limit": limit,
                 "partitions": args.partitions, "batch_size": args.batch_size}, args.timeout)
    return worker


def measure(args: argparse.Namespace, limit: int) -> tuple[list[list[str]], list[str]]:
    rows, failures = [], []
    for workload in args.workloads:
        for factor in args.sizes:
            path = table_path(factor * limit)
            for label, pool_limit in (("limit", limit), ("none", None)):
                cells = [workload, f"{factor}×", label]
                try:
                    with _worker(args, path, pool_limit) as worker:
                        reply = worker.call({"cmd": "run", "sql": WORKLOADS[workload],
                                             "repeat": args.repeat}, args.timeout)
                        worker.close()
                except (QueryFailed, WorkerError) as error:
                    failures.append(f"{workload} {factor}× ({label}): {error}")
                    rows.append(cells + [MISSING] * 6)
                    continue
                held = reply["peak_rss"] - reply["base_rss"] \
                    if reply["peak_rss"] and reply["base_rss"] else None
                rows.append(cells + [
                    f"{median(reply['times']):.2f}", fmt_mb(held), fmt_mb(reply["peak_rss"]),
                    fmt_mb(reply["pool_peak"]), str(reply["spill_count"]),
                    fmt_mb(reply["spilled_bytes"])])
                print(" | ".join(rows[-1]), file=sys.stderr)
    return rows, failures


def _overheads(none: list[float], one: list[float]) -> tuple[float, float]:
    """The ratio of the medians and the median of the per-repeat ratios (each pair ran back
    to back, so it shares the machine's load of that moment), both minus one."""
    paired = median([b / a for a, b in zip(none, one)])
    return median(one) / median(none) - 1, paired - 1


def bus_overhead(args: argparse.Namespace, limit: int) -> list[list[str]]:
    rows = []
    path = table_path(min(args.sizes) * limit)
    for query, pool_limit in (("sort", limit), ("sort", None), ("filter, batch 8192", None),
                              ("filter, batch 1024", None)):
        with _worker(args, path, pool_limit) as worker:
            reply = worker.call({"cmd": "bus", "query": query, "repeat": args.bus_repeat},
                                args.timeout * args.bus_repeat)
            worker.close()
        cells = [f"{query}, {min(args.sizes)}× ({'limit' if pool_limit else 'no limit'})"]
        for kind in ("cpu", "times"):
            none, one = reply[kind]["none"], reply[kind]["one"]
            of_medians, paired = _overheads(none, one)
            cells += [f"{median(none):.3f}", f"{median(one):.3f}", f"{of_medians * 100:+.1f}%",
                      f"{paired * 100:+.1f}%"]
        cells += [f"{reply['batches']:,}", f"{reply['batch_events']:,}",
                  f"{reply['delivered']:,}"]
        rows.append(cells)
        print(" | ".join(cells), file=sys.stderr)
    return rows


def bus_report(args: argparse.Namespace, rows: list[list[str]], command: list[str]) -> str:
    return "\n".join([
        "# Event bus: one observer vs none",
        "",
        f"Command: `python bench/run_memory.py {shlex.join(command)}`",
        "",
        (f"Input {min(args.sizes)}× the {args.limit} limit (Parquet), "
         f"target_partitions={args.partitions}; {args.bus_repeat} runs of each variant "
         "interleaved in one worker (which goes first alternates). CPU is "
         "`time.process_time()` of the worker: all its threads, the observer's delivery "
         "thread included, and unlike wall time it hardly moves when other processes load "
         "the machine. *overhead* is the ratio of the medians; *paired* the median of the "
         "per-repeat ratios (the two variants of a repeat ran back to back). The observer "
         "counts events on its delivery thread. *batches*: batches all operators produced "
         "per run; the engine makes no event for them, only counts; the delivery thread "
         "synthesizes *BatchProduced* from the counts every 20 ms and at each operator "
         "partition's finish; *delivered*: all events the observer got per run."),
        "",
        markdown_table(["query", "CPU: none s", "one observer s", "overhead", "paired",
                        "wall: none s", "one observer s", "overhead", "paired", "batches",
                        "BatchProduced", "delivered"], rows),
        "",
        "Load average (1, 5, 15 min) when the runs ended: "
        + ", ".join(f"{load:.1f}" for load in os.getloadavg())
        + f" on {os.cpu_count()} CPUs (other processes share the machine: trust CPU over wall).",
        "",
        "## Environment",
        "",
        common.environment_markdown(PACKAGES),
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", default="16MB", help="memory limit (default 16MB)")
    parser.add_argument("--sizes", default="5,20",
                        help="input sizes as multiples of the limit (default 5,20)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated, of {', '.join(WORKLOADS)} "
                        "(default: all)")
    parser.add_argument("--partitions", type=int, default=2, help="target_partitions")
    parser.add_argument("--batch-size", type=int, default=65536)
    parser.add_argument("--repeat", type=int, default=1, help="runs per cell (median)")
    parser.add_argument("--bus-repeat", type=int, default=5,
                        help="runs of each event-bus variant (median)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per request")
    parser.add_argument("--output", type=Path, default=common.RESULTS_DIR / "memory.md")
    parser.add_argument("--bus-output", type=Path,
                        default=common.RESULTS_DIR / "event_bus.md")
    parser.add_argument("--bus-only", action="store_true",
                        help="measure only the event-bus overhead")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        common.ensure_plansight_importable()
        common.serve({"setup": _setup, "run": _run, "bus": _bus})
        return 0
    common.ensure_plansight_importable()
    from plansight.engine.exec.memory_pool import format_bytes, parse_memory_limit

    limit = parse_memory_limit(args.limit)
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.workloads = [w.strip() for w in args.workloads.split(",")]
    unknown = set(args.workloads) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads {sorted(unknown)}; choose from {list(WORKLOADS)}")

    command = sys.argv[1:] if argv is None else argv
    bus_text = bus_report(args, bus_overhead(args, limit), command)
    print(bus_text)
    common.write_report(args.bus_output, bus_text)
    if args.bus_only:
        return 0
    rows, failures = measure(args, limit)
    report = [
        f"# Memory: spilling under a {args.limit} ({format_bytes(limit)}) limit",
        "",
        f"Command: `python bench/run_memory.py {shlex.join(command)}`",
        "",
        (f"Inputs are {', '.join(f'{s}×' for s in args.sizes)} the limit in Arrow bytes "
         f"(Parquet, read by row group); target_partitions={args.partitions}, "
         f"batch_size={args.batch_size}. Each cell is a fresh worker process; the result is "
         "streamed and counted, not kept. *held* is the worker's peak RSS during the query "
         "minus its RSS before it (after a warm-up scan); *pool peak* is the memory pool's "
         "largest reserved total; *spilled* is compressed bytes written."),
        "",
        markdown_table(["workload", "input", "pool", "time s", "held MiB", "peak RSS MiB",
                        "pool peak MiB", "spills", "spilled MiB"], rows, right_align_from=3),
        "",
        f"The event-bus overhead is in `{args.bus_output.name}` (same command).",
        "",
    ]
    if failures:
        report += ["## Failures", "", *[f"- {failure}" for failure in failures], ""]
    report += ["## Environment", "", common.environment_markdown(PACKAGES)]
    text = "\n".join(report)
    print(text)
    common.write_report(args.output, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
