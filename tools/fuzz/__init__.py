"""A seeded differential fuzzer: random tables and SQL, checked against DuckDB, by ternary
logic partitioning and with the optimizer off vs on; failing queries are reduced.

    python -m tools.fuzz --seed 1 --minutes 30          # a long run
    python -m tools.fuzz --seed 1 --queries 200 --reduce

``run`` is the library entry point (the CI test calls it).

Throughput: a query costs about 40 ms of CPU (seed 9102, 300 queries after a warm-up, two
settings each plus the optimizer-off reference and TLP), most of it plansight planning and
running tiny plans; DuckDB is under a tenth. Each text is parsed and bound once and planned
again per setting (``Query.with_options``): 13.7 -> 11.1 s CPU (median of 3 interleaved
runs, loaded 2-core machine), 488 -> 662 queries per wall minute.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field

from tools.fuzz.generator import QueryGenerator
from tools.fuzz.oracle import BUGS, DuckDBRejects, Engines, Finding, check, draw_settings
from tools.fuzz.reduce import reduce_query
from tools.fuzz.tables import random_tables


@dataclass
class Report:
    generated: int = 0
    rejected_by_duckdb: int = 0
    matched: int = 0
    findings: list[Finding] = field(default_factory=list)
    examples: dict[tuple[str, str], tuple[str, dict]] = field(default_factory=dict)
    interrupted: bool = False  # stopped by Ctrl-C before its queries or minutes were done

    @property
    def valid(self) -> int:
        return self.generated - self.rejected_by_duckdb

    def classes(self) -> Counter:
        return Counter(f.signature for f in self.findings)

    def bugs(self) -> list[Finding]:
        return [f for f in self.findings if f.kind in BUGS]

    def summary(self) -> str:
        share = self.matched / self.valid if self.valid else 1.0
        lines = [(f"queries generated: {self.generated}, valid (DuckDB runs them): "
                  f"{self.valid}, matched: {self.matched} ({share:.2%})"
                  + (" (interrupted)" if self.interrupted else ""))]
        for (kind, detail), count in self.classes().most_common():
            lines.append(f"  {count:5d}  {kind:22s} {detail}")
            example = self.examples.get((kind, detail))
            if example is not None:
                lines.append(f"         e.g. {example[0]}")
        return "\n".join(lines)


def run(seed: int, queries: int | None = None, minutes: float | None = None,
        reduce: bool = False, settings_per_query: int = 2, queries_per_schema: int = 25,
        log=None) -> Report:
    """Generate and check queries until ``queries`` are done or ``minutes`` have passed."""
    rng = random.Random(seed)
    report = Report()
    deadline = time.monotonic() + minutes * 60 if minutes else None
    tables, generator, engines = None, None, None
    while (queries is None or report.generated < queries) and (
            deadline is None or time.monotonic() < deadline):
        if report.generated % queries_per_schema == 0:
            if engines is not None:
                engines.close()
            tables = random_tables(rng)
            generator = QueryGenerator(rng, tables)
            engines = Engines(tables)
        case = generator.case()
        settings = draw_settings(rng, settings_per_query)
        try:
            findings = check(case.sql, engines, settings, case.tlp)
        except DuckDBRejects:
            report.generated += 1
            report.rejected_by_duckdb += 1
            continue
        except KeyboardInterrupt:  # Ctrl-C: the summary of the queries checked so far
            report.interrupted = True
            break
        report.generated += 1
        if not findings:
            report.matched += 1
            continue
        for finding in findings:
            report.findings.append(finding)
            if finding.signature not in report.examples:
                example = (finding.sql, tables)
                if reduce and finding.kind in BUGS:
                    example = _reduce(finding, tables)
                report.examples[finding.signature] = example
                if log is not None:
                    log(f"[{report.generated}] {finding.kind}: {finding.detail}\n"
                        f"    {example[0]}")
    if engines is not None:
        engines.close()
    return report


def replay(seed: int, number: int, settings_per_query: int = 2,
           queries_per_schema: int = 25) -> tuple[str, dict, list[tuple[int, int]]]:
    """The ``number``-th query (1-based, as the run log numbers it) of a run with ``seed``,
    its tables and settings, drawn from the same random sequence as ``run`` without running
    anything (checking a query draws nothing)."""
    rng = random.Random(seed)
    tables, generator = None, None
    for generated in range(number):
        if generated % queries_per_schema == 0:
            tables = random_tables(rng)
            generator = QueryGenerator(rng, tables)
        case = generator.case()
        settings = draw_settings(rng, settings_per_query)
    return case.sql, tables, settings


def _reduce(finding: Finding, tables: dict) -> tuple[str, dict]:
    partitions, batch_size, _ = finding.settings
    settings = [(partitions, batch_size)] if (partitions, batch_size) == (1, 8192) else \
        [(1, 8192), (partitions, batch_size)]

    def fails(sql: str, candidate_tables: dict) -> bool:
        try:
            again = check(sql, candidate_tables, settings, None,
                          optimizer_check=finding.kind == "optimizer")
        except DuckDBRejects:
            return False
        except Exception:  # noqa: BLE001 (a candidate the checker cannot run)
            return False
        return any(f.signature == finding.signature for f in again)

    if finding.kind == "tlp":
        return finding.sql, tables  # the partitioned text is derived, not reducible alone
    return reduce_query(finding.sql, tables, fails)
