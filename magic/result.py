"""QueryResult: what a ``%%query`` cell returns — an Arrow table with compact HTML and text views.

Rendering never converts more than ``HEAD + TAIL`` rows to Python, so a result of millions
of rows displays as fast as a small one.

Example:
    >>> import pyarrow as pa
    >>> result = QueryResult(pa.table({"x": [1, 2], "s": ["a", "<b>"]}))
    >>> print(repr(result))
    x      s
    int64  string
    -----  ------
    1      a
    2      <b>
    (2 rows)
    >>> "&lt;b&gt;" in result._repr_html_()
    True
"""

from __future__ import annotations

import html
from typing import Any

import pyarrow as pa

HEAD = 10  # rows shown from the start when the result is long
TAIL = 10  # rows shown from the end when the result is long
MAX_CELL = 80  # characters of one value before it is cut with an ellipsis


class QueryResult:
    """The result of one query: ``.table`` is the Arrow table; displays as a compact table.

    ``.profile`` is the run's ``plansight.profiling.Profile`` after ``%%query --profile``.
    """

    def __init__(self, table: pa.Table, elapsed: float | None = None, profile=None,
                 display_limit: int | None = HEAD + TAIL):
        self.table = table
        self.elapsed = elapsed
        self.profile = profile
        # rows shown: the first half and the last half of the limit; 0 or None: all
        limit = display_limit or table.num_rows
        self._head, self._tail = limit - limit // 2, limit // 2

    # -- access ---------------------------------------------------------------
    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    @property
    def column_names(self) -> list[str]:
        return self.table.column_names

    def to_arrow(self) -> pa.Table:
        return self.table

    def to_pandas(self):
        return self.table.to_pandas()

    def to_polars(self):
        import polars as pl

        return pl.from_arrow(self.table)

    def to_pylist(self) -> list[dict[str, Any]]:
        return self.table.to_pylist()

    def __len__(self) -> int:
        return self.table.num_rows

    def __eq__(self, other) -> bool:
        if isinstance(other, QueryResult):
            return self.table.equals(other.table)
        if isinstance(other, pa.Table):
            return self.table.equals(other)
        return NotImplemented

    __hash__ = None  # mutable-looking container semantics; equality is by content

    # -- rendering ------------------------------------------------------------
    def _visible_rows(self) -> tuple[list[list[str]], list[list[str]]]:
        """Head and tail rows as strings; the tail is empty when everything fits."""
        n = self.table.num_rows
        if n <= self._head + self._tail:
            return _rows_as_text(self.table), []
        tail = self.table.slice(n - self._tail) if self._tail else self.table.slice(0, 0)
        return _rows_as_text(self.table.slice(0, self._head)), _rows_as_text(tail)

    def _summary(self) -> str:
        n = self.table.num_rows
        text = f"{n:,} row{'s' if n != 1 else ''}"
        if n > self._head + self._tail:
            text += f" (showing first {self._head} and last {self._tail})"
        if self.elapsed is not None:
            text += f" in {self.elapsed * 1000:.1f} ms"
        return text

    def _repr_html_(self) -> str:
        head, tail = self._visible_rows()
        esc = html.escape
        # numbers right-aligned, everything else left, headers with their column
        align = ["right" if pa.types.is_integer(f.type) or pa.types.is_floating(f.type) or
                 pa.types.is_decimal(f.type) else "left" for f in self.table.schema]
        header = "".join(
            f"<th style='text-align:{a}'>{esc(field.name)}<br>"
            f"<span style='font-weight:normal;color:#888'>{esc(str(field.type))}</span></th>"
            for field, a in zip(self.table.schema, align))

        def cells(row) -> str:
            return "".join(f"<td style='text-align:{a}'>{esc(v)}</td>" for v, a in zip(row, align))

        body = [f"<tr>{cells(row)}</tr>" for row in head]
        if tail:
            body.append(f"<tr><td colspan='{max(1, self.table.num_columns)}' "
                        "style='text-align:center;color:#888'>&vellip;</td></tr>")
            body += [f"<tr>{cells(row)}</tr>" for row in tail]
        return ("<div class='plansight-result'><table class='dataframe'>"
                f"<thead><tr>{header}</tr></thead><tbody>{''.join(body)}</tbody></table>"
                f"<small style='color:#888'>{esc(self._summary())}</small></div>")

    def __repr__(self) -> str:
        head, tail = self._visible_rows()
        names = self.table.column_names
        types = [str(f.type) for f in self.table.schema]
        rows = head + ([["..."] * len(names)] if tail else []) + tail
        widths = [max([len(names[i]), len(types[i]), 3] + [len(r[i]) for r in rows])
                  for i in range(len(names))]

        def line(cells):
            return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

        lines = [line(names), line(types), line(["-" * w for w in widths])]
        lines += [line(r) for r in rows]
        n = self.table.num_rows
        lines.append(f"({n:,} row{'s' if n != 1 else ''})")
        return "\n".join(lines)


def _rows_as_text(table: pa.Table) -> list[list[str]]:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [[_format_value(column[r]) for column in columns] for r in range(table.num_rows)]


def _format_value(value: Any) -> str:
    text = "NULL" if value is None else str(value)
    return text if len(text) <= MAX_CELL else text[:MAX_CELL - 1] + "…"
