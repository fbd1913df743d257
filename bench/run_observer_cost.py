"""What watching a query costs: CPU time of one query with no observer, with the monitor's
event reducer, and with the reducer plus a live redraw every 0.2 s (snapshot + HTML, what
the widget does in a notebook) — the monitor must cost under 5% CPU even on a query of many
small batches, where events are most frequent.

The query (a scan, a filter and a projection over ``--rows`` rows at ``--batch-size``: a
streaming plan, whose scan is not widened as one feeding an aggregate is) makes about one
event per operator and batch; modes are interleaved round by round so drifting
load hits them alike. CPU time is the process's (all threads), not wall time.

Usage:
    python bench/run_observer_cost.py                  # 2M rows, batches of 256, 7 rounds
    python bench/run_observer_cost.py --rows 500000 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import common

SQL = "SELECT g, x + 1 AS y FROM t WHERE x % 7 <> 0"
MODES = ("no observer", "reducer", "reducer + redraw 5/s")


def run_once(session, mode: str) -> tuple[float, int]:
    """CPU seconds of one run of ``SQL`` in ``mode``, and the events the monitor saw."""
    from plansight.widgets.plan_view import QueryMonitor, render_html

    query = session.sql(SQL)
    start = time.process_time()
    if mode == "no observer":
        query.execute()
        return time.process_time() - start, 0
    monitor = QueryMonitor(query, live=False, show=False)
    stop = threading.Event()

    def redraw():  # the cell thread's loop: snapshot and render at most 5 times a second
        while not stop.wait(0.2):
            render_html(monitor.snapshot(), query.physical)

    drawer = threading.Thread(target=redraw, daemon=True)
    if mode.endswith("5/s"):
        drawer.start()
    try:
        monitor.run()
    finally:
        stop.set()
        if drawer.is_alive():
            drawer.join()
    render_html(monitor.snapshot(), query.physical)  # the final refresh
    return time.process_time() - start, monitor.snapshot().version


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    common.ensure_plansight_importable()
    import numpy as np
    import pyarrow as pa

    import plansight as ps

    rng = np.random.default_rng(0)
    x = rng.integers(0, 1_000_000, args.rows)
    session = ps.Session(target_partitions=args.partitions, batch_size=args.batch_size)
    session.register("t", pa.table({"x": x, "g": x % 1000}))
    run_once(session, "reducer")  # warm up: compile kernels, fill caches
    cpu: dict[str, list[float]] = {mode: [] for mode in MODES}
    events = 0
    for _ in range(args.rounds):
        for mode in MODES:
            seconds, seen = run_once(session, mode)
            cpu[mode].append(seconds)
            events = max(events, seen)
    base = statistics.median(cpu["no observer"])
    rows = [[mode, f"{statistics.median(cpu[mode]) * 1000:,.0f}",
             f"{(statistics.median(cpu[mode]) / base - 1) * 100:+.1f}%"] for mode in MODES]
    report = [
        f"# Observer cost ({common.machine_info()['date']})", "",
        f"`{SQL}` over {args.rows:,} rows, batches of {args.batch_size}, "
        f"{args.partitions} partitions: {events:,} events; median CPU time of "
        f"{args.rounds} interleaved rounds.", "",
        common.markdown_table(["mode", "CPU ms", "vs no observer"], rows),
    ]
    text = "\n".join(report)
    print(text)
    common.RESULTS_DIR.mkdir(exist_ok=True)
    (common.RESULTS_DIR / "observer_cost.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
