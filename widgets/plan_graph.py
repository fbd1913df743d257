"""The plan as a graph: one SVG box per operator, shaded by its share of the query's own
compute and labelled with its rows, memory and spills — the picture Spark's SQL tab and
Polars' ``show_graph()`` draw, rendered here as inline SVG so that it needs no network
asset, works in a live widget and in a saved notebook alike, and updates with the table.

Layout is a tidy tree, root at the top (the order EXPLAIN reads): leaves take successive
columns left to right, a parent sits over the middle of its children, and depth is the row.
Plans are trees (a shared subplan is drawn once per parent), so that is all it takes.
"""

from __future__ import annotations

import html

from plansight.engine.exec.memory_pool import format_bytes
from plansight.engine.physical.plan import displayed_operators, operator_label, referenced_ids

NODE_WIDTH = 176
NODE_HEIGHT = 58
COLUMN_GAP = 14
ROW_GAP = 22
_NAME_CHARS = 26  # characters of the operator's name that fit in a box


def tree_layout(plan) -> list[tuple[object, float, int, int | None]]:
    """(operator, column, depth, parent index) per displayed operator, in EXPLAIN order.

    Leaves take columns 0, 1, 2, ... in order; a parent is centred over its children.

    Example:
        >>> import pyarrow as pa, plansight as ps
        >>> s = ps.Session(target_partitions=1)
        >>> s.register("t", pa.table({"x": [1]}))
        >>> s.register("u", pa.table({"x": [1]}))
        >>> plan = s.sql("SELECT * FROM t JOIN u USING (x)").physical
        >>> for op, column, depth, parent in tree_layout(plan)[-3:]:
        ...     print(op.name, column, depth, parent)
        HashJoinExec 0.5 2 1
        DataSourceExec 0.0 3 2
        DataSourceExec 1.0 3 2
    """
    rows = displayed_operators(plan)
    parents: list[int | None] = []
    open_at_depth: dict[int, int] = {}  # depth -> index of the latest operator at it
    for index, (depth, _) in enumerate(rows):
        parents.append(open_at_depth.get(depth - 1))
        open_at_depth[depth] = index
    children: dict[int, list[int]] = {}
    for index, parent in enumerate(parents):
        if parent is not None:
            children.setdefault(parent, []).append(index)
    columns = [0.0] * len(rows)
    next_leaf = 0
    # leaves in EXPLAIN order take successive columns; parents (visited after their
    # subtree in a post-order) sit over their children's middle
    order: list[int] = []
    stack = [(i, False) for i, parent in reversed(list(enumerate(parents))) if parent is None]
    while stack:
        index, expanded = stack.pop()
        if expanded:
            order.append(index)
            continue
        stack.append((index, True))
        stack.extend((child, False) for child in reversed(children.get(index, [])))
    for index in order:
        kids = children.get(index)
        if kids:
            columns[index] = (columns[kids[0]] + columns[kids[-1]]) / 2
        else:
            columns[index] = float(next_leaf)
            next_leaf += 1
    return [(op, columns[i], depth, parents[i]) for i, (depth, op) in enumerate(rows)]


def _shade(share: float) -> str:
    """White for no own time, deepening to red for the operator that took it all."""
    share = min(1.0, max(0.0, share))
    green_blue = round(255 - 175 * share)
    return f"rgb(255,{green_blue},{green_blue})"


def render_plan_svg(snap, plan, times: dict[int, float], hot: int | None) -> str:
    """The plan graph for one monitor snapshot: boxes shaded by own compute (``times``, the
    monitor's self time per operator; ``hot`` the hottest, outlined in red), each with its
    rows, own time, memory now / peak and spills; hovering a box shows its EXPLAIN line."""
    layout = tree_layout(plan)
    if not layout:
        return ""
    referenced = referenced_ids(plan)
    total = sum(times.values()) or 1.0
    width = (max(column for _, column, _, _ in layout) + 1) * (NODE_WIDTH + COLUMN_GAP)
    height = (max(depth for _, _, depth, _ in layout) + 1) * (NODE_HEIGHT + ROW_GAP)

    def origin(column: float, depth: int) -> tuple[float, float]:
        return (column * (NODE_WIDTH + COLUMN_GAP) + COLUMN_GAP / 2,
                depth * (NODE_HEIGHT + ROW_GAP))

    edges, nodes = [], []
    for op, column, depth, parent in layout:
        x, y = origin(column, depth)
        if parent is not None:
            _, parent_column, parent_depth, _ = layout[parent]
            px, py = origin(parent_column, parent_depth)
            edges.append(f"<line x1='{px + NODE_WIDTH / 2:.0f}' y1='{py + NODE_HEIGHT:.0f}' "
                         f"x2='{x + NODE_WIDTH / 2:.0f}' y2='{y:.0f}' stroke='#999'/>")
        state = snap.operators.get(op.operator_id)
        rows = state.output_rows if state else 0
        own = times.get(op.operator_id, 0.0)
        is_hot = op.operator_id == hot
        name = op.name if len(op.name) <= _NAME_CHARS else op.name[:_NAME_CHARS - 1] + "…"
        facts = f"{rows:,} rows · {own * 1000:.1f} ms"
        memory = (f"mem {format_bytes(state.memory)} / {format_bytes(state.memory_peak)}"
                  if state and state.memory_peak else "")
        spills = (f"⛁ {state.spill_count}× {format_bytes(state.spilled_bytes)} spilled"
                  if state and state.spill_count else "")
        stroke = "stroke='#d62728' stroke-width='2.5'" if is_hot else "stroke='#555'"
        lines = [(name, "font-weight:bold"), (facts, ""), (memory, ""),
                 (spills, "fill:#d62728")]
        text = "".join(
            f"<text x='{x + 6:.0f}' y='{y + 14 + 13 * i:.0f}' style='{style}'>"
            f"{html.escape(line)}</text>" for i, (line, style) in enumerate(lines) if line)
        nodes.append(
            f"<g class='plansight-node{' plansight-node-hot' if is_hot else ''}' "
            f"data-operator-id='{op.operator_id}'>"
            f"<title>{html.escape(operator_label(op, referenced))}</title>"
            f"<rect x='{x:.0f}' y='{y:.0f}' width='{NODE_WIDTH}' height='{NODE_HEIGHT}' rx='4' "
            f"fill='{_shade(own / total)}' {stroke}/>{text}</g>")
    return (f"<svg class='plansight-graph' xmlns='http://www.w3.org/2000/svg' "
            f"width='{width:.0f}' height='{height:.0f}' viewBox='0 0 {width:.0f} {height:.0f}' "
            f"style='font-family:sans-serif;font-size:11px;flex:0 1 auto;max-width:45%;"
            f"height:auto'>"
            f"{''.join(edges)}{''.join(nodes)}</svg>")
