"""A filter right above a scan lends it its cheap conjuncts, to apply before the scan decodes
dictionary-encoded strings.

Parquet string columns with small dictionaries (flags, modes, priorities) are read as
dictionary indices and decoded into plain strings by one ``take`` per batch, for every row
read (catalog.py). A FilterExec above then drops most of those rows again: TPC-H Q12's date
conditions keep 108K of lineitem's 6M rows (its ``l_shipmode IN (...)`` runs on those), yet
l_shipmode was decoded for all 6M (~60 ms of Q12's ~300 ms). With the filter's cheap
stage (comparisons of numbers and dates, filter.py) the scan drops rows while the strings
are still indices, then decodes the rest.

The filter still evaluates its whole predicate: the scan's is an early, partial pass, so a
row it keeps is judged as before. It may only drop rows the filter would drop (a cheap
conjunct false or NULL); should the cheap stage raise (an overflow the written order might
never reach), the scan keeps the batch whole and the filter decides, as without it. Not
under a LIMIT in the scan (which rows are read would change). The scan stops the pass when
it keeps nearly every row (every row, when the cheap conjuncts are the whole predicate: the
filter above then copies nothing), and skips small batches (scan.py, ``_Prefilter``).
EXPLAIN ANALYZE counts the rows it drops as the scan's ``rows_skipped_prefilter``.
"""

from __future__ import annotations

from plansight.engine.logical.expr import split_conjunction
from plansight.engine.physical.filter import FilterExec, cheap_conjuncts
from plansight.engine.physical.plan import ExecutionPlan
from plansight.engine.physical.scan import DataSourceExec


def prefilter_scans(plan: ExecutionPlan) -> ExecutionPlan:
    """Set ``prefilter`` on the scans right below a filter with cheap conjuncts (in place:
    the scans are this plan's own)."""
    for _, node in plan.walk():
        if isinstance(node, FilterExec) and isinstance(node.input, DataSourceExec) and \
                node.input.fetch is None:
            node.input.prefilter = cheap = cheap_conjuncts(node.predicate)
            node.input.prefilter_whole = cheap is not None and \
                len(split_conjunction(cheap)) == len(split_conjunction(node.predicate))
    return plan
