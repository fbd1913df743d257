"""Profile: one query run observed closely — its events as a timeline, plus RSS/CPU samples.

``profile_query`` runs a query with a ``TimelineRecorder`` among its observers while a
``Sampler`` measures the process. The Profile displays as a Gantt chart and a memory curve
(``%%query --profile``), exports a Chrome trace, and compares with another Profile.
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from plansight.profiling.sampler import DEFAULT_INTERVAL, Sample, Sampler
from plansight.profiling.timeline import Timeline, TimelineRecorder


@dataclass
class Profile:
    """What one profiled run did: ``timeline`` (operator spans, pool), ``samples`` (RSS, CPU)."""

    sql: str
    run: Any  # plansight.QueryRun
    timeline: Timeline
    samples: list[Sample]
    settings: dict[str, Any] = field(default_factory=dict)
    label: str = ""

    def __post_init__(self):
        if not self.label:
            self.label = _short_label(self.sql, self.settings)

    @property
    def plan(self):
        return self.run.plan if self.run is not None else None

    @property
    def peak_rss(self) -> int:
        return max((s.rss for s in self.samples), default=0)

    @property
    def pool_peak(self) -> int:
        return self.timeline.pool_peak

    def summary(self) -> dict[str, Any]:
        """Headline numbers: wall time, memory peaks and CPU use over the run."""
        cpu = [s.cpu_percent for s in self.samples[1:]]  # the first reading is a primer
        start_rss = self.samples[0].rss if self.samples else 0
        return {"elapsed_ms": self.timeline.duration * 1000,
                "operator_partitions": len(self.timeline.spans),
                "pool_peak_bytes": self.pool_peak,
                "rss_peak_bytes": self.peak_rss,
                "rss_growth_bytes": self.peak_rss - start_rss,
                "cpu_mean_percent": sum(cpu) / len(cpu) if cpu else 0.0,
                "cpu_max_percent": max(cpu, default=0.0),
                "samples": len(self.samples),
                "spills": len(self.timeline.spills)}

    # -- export -----------------------------------------------------------------
    def to_chrome_trace(self) -> dict[str, Any]:
        from plansight.profiling.trace_export import chrome_trace

        return chrome_trace(self)

    def write_trace(self, path: str | os.PathLike[str]) -> str:
        """Write the Chrome trace JSON (open it in https://ui.perfetto.dev)."""
        from plansight.profiling.trace_export import write_trace

        return write_trace(path, self)

    # -- display ----------------------------------------------------------------
    def gantt_svg(self, width: int = 760) -> str:
        from plansight.profiling.plots import gantt_svg

        return gantt_svg(self.timeline, self.samples, width)

    def memory_svg(self, width: int = 760) -> str:
        from plansight.profiling.plots import memory_svg

        return memory_svg(self.timeline, self.samples, width)

    def _headline(self) -> str:
        s = self.summary()
        mb = 1024 * 1024
        return (f"{s['elapsed_ms']:.1f} ms · {s['operator_partitions']} operator partitions · "
                f"pool peak {s['pool_peak_bytes'] / mb:.1f} MB · RSS peak "
                f"{s['rss_peak_bytes'] / mb:.1f} MB (+{s['rss_growth_bytes'] / mb:.1f}) · "
                f"CPU mean {s['cpu_mean_percent']:.0f}%, max {s['cpu_max_percent']:.0f}% · "
                f"{s['samples']} samples · spills {s['spills']}")

    def _repr_html_(self) -> str:
        return (f"<div class='plansight-profile'><div style='font-size:12px;font-weight:bold'>"
                f"profile: {html.escape(self._headline())}</div>"
                f"{self.gantt_svg()}<br>{self.memory_svg()}</div>")

    def __repr__(self) -> str:
        lines = [f"profile: {self._headline()}"]
        for operator_id in self.timeline.order:
            spans = self.timeline.for_operator(operator_id)
            if spans:
                lines.append(f"  {self.timeline.names[operator_id]} #{operator_id}: "
                             f"{len(spans)} partition run(s), wall "
                             f"{self.timeline.operator_wall(operator_id) * 1000:.1f} ms, "
                             f"rows {sum(s.rows for s in spans):,}")
        return "\n".join(lines)


def profile_query(query, execute: Callable[[Sequence], Any] | None = None,
                  interval: float = DEFAULT_INTERVAL, label: str = "") -> Profile:
    """Run ``query`` under a timeline recorder and an RSS/CPU sampler.

    Args:
        query: A ``plansight.Query``.
        execute: Runs the query given a list of extra observers and returns its QueryRun
            (e.g. under a live monitor); default ``query.execute(observer=observers)``.
        interval: Seconds between samples.
        label: The run's name in traces and comparisons (default: settings and SQL).

    Example:
        >>> import pyarrow as pa, plansight as ps
        >>> s = ps.Session(target_partitions=2)
        >>> s.register("t", pa.table({"k": [1, 2, 1, 2], "v": [1, 2, 3, 4]}))
        >>> profile = profile_query(s.sql("SELECT k, sum(v) AS s FROM t GROUP BY k"))
        >>> profile.run.result.num_rows, len(profile.samples) >= 2
        (2, True)
    """
    recorder = TimelineRecorder()
    if execute is None:
        def execute(observers):
            return query.execute(observer=list(observers))
    with Sampler(interval) as sampler:
        run = execute([recorder])
    config = query.config
    settings = {"target_partitions": config.target_partitions,
                "memory_limit": config.memory_limit, "batch_size": config.batch_size}
    profile = Profile(query.sql, run, recorder.timeline(run.plan), sampler.samples, settings,
                      label)
    run.profile = profile
    return profile


def _short_label(sql: str, settings: dict[str, Any]) -> str:
    text = " ".join(sql.split())
    text = text if len(text) <= 60 else text[:59] + "…"
    options = []
    if settings.get("target_partitions") is not None:
        options.append(f"partitions={settings['target_partitions']}")
    if settings.get("memory_limit") is not None:
        options.append(f"memory_limit={settings['memory_limit']}")
    return f"[{', '.join(options)}] {text}" if options else text
