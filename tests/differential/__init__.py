"""Differential tests: plansight against DuckDB on the same Arrow tables.

Other suites reuse the helpers::

    from tests.differential.harness import check, run_both, assert_same
    from tests.differential.tables import SMALL, BIG, ALL

    check("SELECT k, sum(v) FROM t GROUP BY k", SMALL, batch_size=3, target_partitions=2)

``corpus.py`` holds the queries by feature, ``test_corpus.py`` runs them over several batch
sizes and partition counts, ``test_file_sources.py`` over Parquet / IPC / CSV files.
"""
