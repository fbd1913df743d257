"""The terminal entry point: run SQL against built-in sample data and print the result.

    plansight "SELECT count(*) FROM lineitem"          # TPC-H sample at scale 0.01
    plansight --tpch 5                                 # run TPC-H query 5
    plansight -f query.sql --sample micro_1_5m --scale 0.1
    plansight --demo                                   # a short tour
"""

from __future__ import annotations

import argparse
import sys
import time

import pyarrow as pa

DEMO = [
    ("Revenue by order priority (TPC-H Q4 style)",
     "SELECT o_orderpriority, count(*) AS orders FROM orders "
     "WHERE o_orderdate >= DATE '1993-07-01' AND o_orderdate < DATE '1993-10-01' "
     "GROUP BY o_orderpriority ORDER BY o_orderpriority"),
    ("Top customers by revenue, with a join and top-k",
     "SELECT c_name, sum(o_totalprice) AS revenue FROM customer "
     "JOIN orders ON c_custkey = o_custkey GROUP BY c_name ORDER BY revenue DESC LIMIT 5"),
    ("Pricing summary (TPC-H Q1)", None),
]


NEXT_STEPS = """
-- Try next
  plansight --tpch 5 --analyze               a six-table join, with per-operator metrics
  plansight "SELECT ... FROM lineitem"       your own SQL on the sample (tables: region, nation,
                                             supplier, customer, part, partsupp, orders, lineitem)
  plansight --explain -f query.sql           the plan of a query in a file, without running it
  In Jupyter:  %load_ext plansight
               %query CALL dbgen(sf = 0.01)
               %%query --analyze             a live monitor while the query runs
  Tutorials:   examples/01_tour.ipynb ... 05_topk_and_limit.ipynb"""


def format_table(table: pa.Table, max_rows: int = 40) -> str:
    """A plain-text grid of ``table`` (head and tail when long). Only the rows shown are
    converted to Python, so a result of millions of rows prints as fast as a small one.

    Example:
        >>> print(format_table(pa.table({"x": list(range(100))}), max_rows=4).splitlines()[3:7])
        ['|  0 |', '|  1 |', '| …  |', '| 98 |']
    """
    names = table.column_names
    n = table.num_rows
    if n <= max_rows:
        shown = table.to_pylist()
    else:
        half = max_rows // 2
        shown = table.slice(0, half).to_pylist() + [None] + table.slice(n - half).to_pylist()
    cells = [[_cell(r[n]) if isinstance(r, dict) else "…" for n in names] if r is not None
             else ["…"] * len(names) for r in shown]
    widths = [max([len(n)] + [len(c[i]) for c in cells]) for i, n in enumerate(names)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line, "| " + " | ".join(n.ljust(w) for n, w in zip(names, widths)) + " |", line]
    for c in cells:
        out.append("| " + " | ".join(v.rjust(w) if _numeric(v) else v.ljust(w)
                                     for v, w in zip(c, widths)) + " |")
    out.append(line)
    out.append(f"{table.num_rows} row{'s' if table.num_rows != 1 else ''}")
    return "\n".join(out)


def _cell(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _numeric(text: str) -> bool:
    return text.replace(".", "", 1).replace("-", "", 1).replace("e", "", 1).isdigit()


def main(argv: list[str] | None = None) -> int:
    import plansight as ps
    from plansight.datasets import SAMPLES, TPCH_QUERIES, load_sample

    parser = argparse.ArgumentParser(prog="plansight",
                                     description="Run SQL on plansight's engine over sample data.")
    parser.add_argument("sql", nargs="?", help="the SQL text to run")
    parser.add_argument("-f", "--file", help="read the SQL from this file")
    parser.add_argument("--tpch", type=int, metavar="N", help="run TPC-H query N (1-22)")
    parser.add_argument("--sample", default="tpch", choices=SAMPLES, help="sample data set")
    parser.add_argument("--scale", type=float, default=0.01, help="scale factor (default 0.01)")
    parser.add_argument("--partitions", type=int, default=None, help="target partitions")
    parser.add_argument("--memory-limit", default=None, help="e.g. 512MB")
    parser.add_argument("--explain", action="store_true",
                        help="print the physical plan without running the query")
    parser.add_argument("--analyze", action="store_true", help="run and print plan metrics")
    parser.add_argument("--demo", action="store_true", help="run a short tour of queries")
    args = parser.parse_args(argv)

    if args.tpch is not None and not 1 <= args.tpch <= 22:
        parser.error("--tpch takes a query number from 1 to 22")
    if args.file:
        try:
            with open(args.file) as handle:
                sql = handle.read()
        except OSError as e:
            parser.error(f"cannot read {args.file}: {e.strerror}")
    elif args.tpch is not None:
        sql = TPCH_QUERIES[args.tpch]
    else:
        sql = args.sql
    if not sql and not args.demo:
        args.demo = True

    try:
        session = ps.Session(target_partitions=args.partitions, memory_limit=args.memory_limit)
        started = time.perf_counter()
        tables = load_sample(session, args.sample, args.scale)
        rows = sum(t.num_rows for t in tables.values())
        print(f"sample '{args.sample}' at scale {args.scale}: {len(tables)} tables, {rows:,} rows "
              f"generated in {time.perf_counter() - started:.2f}s")
        queries = [(None, sql)] if not args.demo else \
            [(title, q or TPCH_QUERIES[1]) for title, q in DEMO]
        for title, text in queries:
            if title:
                print(f"\n-- {title}")
            query = session.sql(text)
            if args.explain and not args.analyze:  # the plan only: nothing runs
                print(query.explain())
                continue
            started = time.perf_counter()
            run = query.execute()
            elapsed = time.perf_counter() - started
            print(format_table(run.result))
            print(f"({elapsed * 1000:.1f} ms)")
            if args.analyze or (args.demo and text is queries[-1][1]):
                if args.demo:
                    print("\n-- How it ran: the plan, each operator with its metrics "
                          "(EXPLAIN ANALYZE)")
                print(run.explain_analyze())
        if args.demo:
            print(NEXT_STEPS)
    except ps.PlansightError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
