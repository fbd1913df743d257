"""SVG charts of a profiled run: an operator Gantt chart and the memory/CPU curve.

Plain SVG strings, no plotting library: they render in JupyterLab, classic Notebook, VS Code,
on GitHub and nbviewer, and cost nothing to import. Both charts share the left margin and
the time axis, so a memory bump sits straight under the operator that caused it.

    ┌ labels ─┬─ time axis (ms from query start) ─────────────────┐
    │ SortExec│ ██████████████████████████████                   │  Gantt
    │ Scan p0 │ ███████                                          │
    ├─────────┼──────────────────────────────────────────────────┤
    │ MB      │ ╱‾‾‾‾‾‾╲___ RSS   ▁▁▁▇▇▇▁▁ pool reserved   ·· CPU │  memory
    └─────────┴──────────────────────────────────────────────────┘
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from plansight.profiling.sampler import Sample
from plansight.profiling.timeline import Timeline

LABEL_WIDTH = 220  # px of the operator-name column
RIGHT_MARGIN = 48  # px: room for the CPU axis labels
MAX_LANES = 48  # above this, one row per operator instead of per operator partition
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")
_FONT = "font-family='sans-serif' font-size='11'"
_MB = 1024 * 1024


def nice_ticks(high: float, count: int = 6) -> list[float]:
    """Round tick values from 0 to at least ``high``: steps of 1, 2 or 5 times a power of 10.

    Example:
        >>> nice_ticks(37)
        [0, 10, 20, 30, 40]
        >>> nice_ticks(0)
        [0, 1]
    """
    if not high > 0:
        return [0, 1]
    raw = high / max(1, count - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    ticks = [0]
    while ticks[-1] < high:
        ticks.append(ticks[-1] + step)
    return [int(t) if float(t).is_integer() else round(t, 10) for t in ticks]


def time_range(timeline: Timeline, samples: Sequence[Sample] = ()) -> tuple[float, float]:
    """(origin, end) in perf_counter seconds: the query plus its samples."""
    origin = timeline.start
    end = max([timeline.end] + [s.end for s in timeline.spans])
    if samples:
        end = max(end, samples[-1].time)
    return origin, max(end, origin + 1e-6)


def _svg_open(css_class: str, width: int, height: int) -> str:
    return (f"<svg xmlns='http://www.w3.org/2000/svg' class='{css_class}' width='{width}' "
            f"height='{height}' viewBox='0 0 {width} {height}'>")


def _axis(x0: float, width: float, span_ms: float, y: float, height: float) -> list[str]:
    ticks = nice_ticks(span_ms)
    scale = width / ticks[-1]
    parts = [f"<line x1='{x0}' y1='{y}' x2='{x0 + width}' y2='{y}' stroke='#999'/>"]
    for tick in ticks:
        x = x0 + tick * scale
        parts.append(f"<line x1='{x:.1f}' y1='{y - height}' x2='{x:.1f}' y2='{y}' "
                     "stroke='#eee'/>")
        parts.append(f"<text x='{x:.1f}' y='{y + 12}' text-anchor='middle' {_FONT} "
                     f"fill='#555'>{tick:g}</text>")
    parts.append(f"<text x='{x0 + width}' y='{y + 24}' text-anchor='end' {_FONT} "
                 "fill='#555'>ms</text>")
    return parts


def gantt_svg(timeline: Timeline, samples: Sequence[Sample] = (), width: int = 760) -> str:
    """One bar per operator partition run, operators in EXPLAIN order (root on top).

    A pale bar spans the run (start to end, children included); solid marks are the
    operator's own compute (children and waits excluded), so a parent's solid marks never
    cover its children's: the hot operator is the one with the most solid.
    """
    origin, end = time_range(timeline, samples)
    lanes = timeline.lanes()
    per_partition = len(lanes) <= MAX_LANES
    if per_partition:
        rows = [(operator_id, f"{timeline.names.get(operator_id, '?')} #{operator_id} p{partition}",
                 lane) for operator_id, partition, lane in lanes]
    else:
        rows = []
        for operator_id in timeline.order:
            spans = timeline.for_operator(operator_id)
            if spans:
                name = timeline.names.get(operator_id, "?")
                rows.append((operator_id, f"{name} #{operator_id} ({len(spans)} runs)", spans))
    row_height, top = 16, 20
    plot_width = width - LABEL_WIDTH - RIGHT_MARGIN
    span_ms = (end - origin) * 1000
    scale_ms = nice_ticks(span_ms)[-1]
    height = top + row_height * max(1, len(rows)) + 30
    colour = {op: PALETTE[i % len(PALETTE)] for i, op in enumerate(timeline.order)}
    parts = [_svg_open("plansight-gantt", width, height),
             f"<text x='0' y='12' {_FONT} font-weight='bold'>operator timeline</text>",
             (f"<text x='{LABEL_WIDTH}' y='12' {_FONT} fill='#777'>one bar per operator "
              "partition: pale while it runs, solid where it computes itself (children "
              "excluded)</text>")]
    parts += _axis(LABEL_WIDTH, plot_width, scale_ms, top + row_height * max(1, len(rows)),
                   row_height * max(1, len(rows)))
    opacity = "1" if per_partition else "0.45"
    for i, (operator_id, label, spans) in enumerate(rows):
        y = top + i * row_height
        short = label if len(label) <= 34 else label[:33] + "…"
        parts.append(f"<text x='{LABEL_WIDTH - 6}' y='{y + 12}' text-anchor='end' {_FONT}>"
                     f"{html.escape(short)}<title>{html.escape(label)}</title></text>")
        for span in spans:
            x = LABEL_WIDTH + (span.start - origin) * 1000 / scale_ms * plot_width
            w = max(1.0, span.duration * 1000 / scale_ms * plot_width)
            first = span.end if span.first_output is None else span.first_output
            tip = (f"{span.operator} #{span.operator_id} partition {span.partition}: "
                   f"own compute {span.compute * 1000:.2f} ms of {span.duration * 1000:.2f} ms "
                   f"wall, {span.rows:,} rows, {span.batches:,} batches, first output after "
                   f"{(first - span.start) * 1000:.2f} ms"
                   + ("" if span.finished else " (not finished)"))
            parts.append(f"<g><title>{html.escape(tip)}</title>"
                         f"<rect x='{x:.1f}' y='{y + 2}' width='{w:.1f}' "
                         f"height='{row_height - 4}' rx='2' fill='{colour.get(operator_id)}' "
                         f"fill-opacity='{float(opacity) * 0.25:.2f}'/>")
            for busy_start, busy_end in span.busy:  # own compute only
                bx = LABEL_WIDTH + (busy_start - origin) * 1000 / scale_ms * plot_width
                bw = (busy_end - busy_start) * 1000 / scale_ms * plot_width
                if bw >= 0.2:
                    parts.append(f"<rect class='plansight-self' x='{bx:.1f}' y='{y + 2}' "
                                 f"width='{bw:.1f}' height='{row_height - 4}' "
                                 f"fill='{colour.get(operator_id)}' fill-opacity='{opacity}'/>")
            parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def memory_svg(timeline: Timeline, samples: Sequence[Sample] = (), width: int = 760,
               height: int = 150) -> str:
    """Process RSS growth (sampler), the pool's reserved bytes (events) and CPU %, over time.

    RSS is drawn above its value when sampling started, so the interpreter and the loaded
    tables do not dwarf what the query itself added; the headline gives the absolute peak.
    """
    origin, end = time_range(timeline, samples)
    top, bottom = 20, height - 30
    plot_width = width - LABEL_WIDTH - RIGHT_MARGIN
    scale_ms = nice_ticks((end - origin) * 1000)[-1]

    def x_of(t: float) -> float:
        return LABEL_WIDTH + max(0.0, (t - origin) * 1000) / scale_ms * plot_width

    base = samples[0].rss if samples else 0
    rss = [(s.time, max(0, s.rss - base) / _MB) for s in samples]
    pool = [(origin, 0.0)] + [(t, total / _MB) for t, total in timeline.pool]
    mb_ticks = nice_ticks(max([v for _, v in rss + pool] + [1.0]), 5)
    cpu_ticks = nice_ticks(max([s.cpu_percent for s in samples] + [100.0]), 5)

    def y_of(value: float, ticks: list[float]) -> float:
        return bottom - value / ticks[-1] * (bottom - top)

    parts = [_svg_open("plansight-memory", width, height),
             f"<text x='0' y='12' {_FONT} font-weight='bold'>memory and CPU</text>"]
    parts += _axis(LABEL_WIDTH, plot_width, scale_ms, bottom, bottom - top)
    for tick in mb_ticks:
        y = y_of(tick, mb_ticks)
        parts.append(f"<text x='{LABEL_WIDTH - 6}' y='{y + 4:.1f}' text-anchor='end' {_FONT} "
                     f"fill='#555'>{tick:g} MB</text>")
    for tick in cpu_ticks:
        y = y_of(tick, cpu_ticks)
        parts.append(f"<text x='{width - RIGHT_MARGIN + 4}' y='{y + 4:.1f}' {_FONT} "
                     f"fill='#999'>{tick:g}%</text>")
    if len(samples) > 1:
        cpu = " ".join(f"{x_of(s.time):.1f},{y_of(s.cpu_percent, cpu_ticks):.1f}"
                       for s in samples)
        parts.append(f"<polyline points='{cpu}' fill='none' stroke='#999' "
                     "stroke-dasharray='3,2'><title>CPU %</title></polyline>")
    if pool:
        points, previous = [], 0.0
        for t, value in pool + [(end, None)]:  # a step line: reservations jump
            points.append(f"{x_of(t):.1f},{y_of(previous, mb_ticks):.1f}")
            if value is not None:
                points.append(f"{x_of(t):.1f},{y_of(value, mb_ticks):.1f}")
                previous = value
        parts.append(f"<polyline points='{' '.join(points)}' fill='none' stroke='#ff7f0e' "
                     "stroke-width='1.5'><title>memory pool reserved</title></polyline>")
    if rss:
        points = " ".join(f"{x_of(t):.1f},{y_of(v, mb_ticks):.1f}" for t, v in rss)
        parts.append(f"<polyline points='{points}' fill='none' stroke='#1f77b4' "
                     "stroke-width='1.5'><title>process RSS growth</title></polyline>")
    for spill in timeline.spills:
        x = x_of(spill.time)
        parts.append(f"<line x1='{x:.1f}' y1='{top}' x2='{x:.1f}' y2='{bottom}' stroke='#d62728' "
                     f"stroke-width='1'><title>{html.escape(spill.operator)} spilled "
                     f"{spill.rows:,} rows</title></line>")
    legend = [("#1f77b4", "process RSS growth"), ("#ff7f0e", "memory pool reserved"),
              ("#999", "CPU % (right axis)")] + ([("#d62728", "spill")] if timeline.spills else [])
    x = LABEL_WIDTH
    for colour, name in legend:
        parts.append(f"<rect x='{x}' y='4' width='10' height='10' fill='{colour}'/>"
                     f"<text x='{x + 14}' y='13' {_FONT}>{name}</text>")
        x += 24 + 7 * len(name)
    parts.append("</svg>")
    return "".join(parts)
