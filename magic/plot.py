"""``%%query --plot KIND X [Y]``: a quick matplotlib chart of a result, to look rather than read.

matplotlib is imported on first use only (``import plansight`` and the magic do not need it).
Only the plotted columns are converted, to numpy; kinds: ``bar`` and ``line`` and ``scatter``
(X against Y), ``hist`` (the distribution of X).
"""

from __future__ import annotations

import pyarrow as pa
from IPython.core.error import UsageError

KINDS = ("bar", "line", "scatter", "hist")
MAX_BARS = 1000  # more bars than this are unreadable: say so rather than draw a black block


def plot_result(table: pa.Table, words: list[str]):
    """A matplotlib Figure of ``table`` for ``--plot`` arguments ``KIND X [Y]``."""
    kind, columns = (words[0].lower() if words else ""), words[1:]
    if kind not in KINDS:
        raise UsageError(f"--plot {' '.join(words)}: use --plot bar|line|scatter X Y or "
                         "--plot hist X")
    needed = 1 if kind == "hist" else 2
    if len(columns) != needed:
        raise UsageError(f"--plot {kind} takes {'X' if needed == 1 else 'X Y'}: the column "
                         f"name{'s' if needed > 1 else ''} to plot")
    lowered = {name.lower(): name for name in table.column_names}
    missing = [c for c in columns if c.lower() not in lowered]
    if missing:
        raise UsageError(f"--plot: the result has no column {missing[0]!r}; its columns: "
                         f"{', '.join(table.column_names)}")
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install matplotlib") from None
    names = [lowered[c.lower()] for c in columns]
    values = [_numpy(table.column(name)) for name in names]
    figure = Figure(figsize=(7, 3.6), layout="constrained")
    axes = figure.add_subplot()
    if kind == "hist":
        axes.hist(values[0][~_missing(values[0])], bins="auto")
        axes.set_xlabel(names[0])
        axes.set_ylabel("rows")
    else:
        x, y = values
        if kind == "bar":
            if len(x) > MAX_BARS:
                raise UsageError(f"--plot bar: {len(x):,} bars; aggregate or LIMIT the query "
                                 f"to at most {MAX_BARS}")
            axes.bar([str(v) for v in x], y)
            axes.tick_params(axis="x", labelrotation=45 if len(x) > 8 else 0)
        elif kind == "line":
            axes.plot(x, y)
        else:
            axes.scatter(x, y, s=8)
        axes.set_xlabel(names[0])
        axes.set_ylabel(names[1])
    return figure


def _numpy(column: pa.ChunkedArray):
    import numpy as np

    if pa.types.is_decimal(column.type):
        column = column.cast(pa.float64())
    return np.asarray(column.to_numpy(zero_copy_only=False))


def _missing(values):
    import numpy as np

    if values.dtype.kind == "f":
        return np.isnan(values)
    return np.array([v is None for v in values]) if values.dtype == object else \
        np.zeros(len(values), dtype=bool)
