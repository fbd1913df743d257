"""python -m tools.fuzz --seed N [--queries N | --minutes M] [--reduce] [--show N]"""

from __future__ import annotations

import argparse
import sys

from tools.fuzz import replay, run
from tools.fuzz.reduce import table_literal


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.fuzz", description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--queries", type=int, default=None)
    parser.add_argument("--minutes", type=float, default=None)
    parser.add_argument("--reduce", action="store_true",
                        help="reduce the first failing query of each class")
    parser.add_argument("--tables", action="store_true",
                        help="print the (reduced) tables of each class's example")
    parser.add_argument("--show", type=int, default=None, metavar="N",
                        help="print the N-th query of the run (as logged), its settings and "
                             "tables, without running anything")
    args = parser.parse_args(argv)
    if args.show is not None:
        sql, tables, settings = replay(args.seed, args.show)
        print(f"-- settings (partitions, batch size): {settings}\n{sql}\n"
              f"{table_literal(tables)}")
        return 0
    if args.queries is None and args.minutes is None:
        args.minutes = 1.0
    report = run(args.seed, queries=args.queries, minutes=args.minutes, reduce=args.reduce,
                 log=lambda text: print(text, file=sys.stderr, flush=True))
    print(report.summary())
    if args.tables:
        for (kind, detail), (sql, tables) in report.examples.items():
            print(f"\n-- {kind}: {detail}\n{sql}\n{table_literal(tables)}")
    return 1 if report.bugs() else 0


if __name__ == "__main__":
    sys.exit(main())
