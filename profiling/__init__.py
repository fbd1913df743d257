"""Profiling of query runs: RSS/CPU sampler, operator timelines, Chrome traces, comparisons.

    >>> import pyarrow as pa, plansight as ps
    >>> from plansight.profiling import profile_query
    >>> s = ps.Session(target_partitions=1)
    >>> s.register("t", pa.table({"x": [3, 1, 2]}))
    >>> profile = profile_query(s.sql("SELECT x FROM t ORDER BY x"))
    >>> profile.timeline.spans[0].operator, profile.timeline.spans[-1].operator
    ('SortExec', 'DataSourceExec')
"""

from __future__ import annotations

from plansight.profiling.compare import Comparison, compare, compare_settings, operator_stats
from plansight.profiling.profile import Profile, profile_query
from plansight.profiling.sampler import Sample, Sampler
from plansight.profiling.timeline import Span, Timeline, TimelineRecorder, build_timeline
from plansight.profiling.trace_export import chrome_trace, trace_events, write_trace

__all__ = [
    "Comparison",
    "Profile",
    "Sample",
    "Sampler",
    "Span",
    "Timeline",
    "TimelineRecorder",
    "build_timeline",
    "chrome_trace",
    "compare",
    "compare_settings",
    "operator_stats",
    "profile_query",
    "trace_events",
    "write_trace",
]
