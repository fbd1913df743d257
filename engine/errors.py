"""The one exception hierarchy of plansight.

Every error a user can cause is a ``PlansightError`` subclass whose message says what is
wrong and where; the magic prints these without a traceback. ``InternalError`` is a bug.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable


class PlansightError(Exception):
    """Base of every error plansight raises on purpose."""


class SqlSyntaxError(PlansightError):
    """The SQL text does not parse; carries line, column and a caret snippet."""

    def __init__(self, message: str, sql: str = "", line: int | None = None,
                 column: int | None = None):
        self.sql, self.line, self.column = sql, line, column
        snippet = caret_snippet(sql, line, column) if sql and line else ""
        where = f" at line {line}, column {column}" if line else ""
        super().__init__(f"{message}{where}" + (f"\n{snippet}" if snippet else ""))


class PlanError(PlansightError):
    """The query is well-formed but wrong: unknown name, type mismatch, bad option."""


class NotSupportedError(PlansightError):
    """Valid SQL that plansight does not implement yet; the message names the feature."""


class ExecutionError(PlansightError):
    """A failure while running a plan; names the operator and partition."""


class ResourcesExhausted(ExecutionError):
    """The memory pool refused a reservation and the consumer cannot spill."""


class WorkerLost(ExecutionError):
    """A cluster worker died or restarted during the query and took data the query needs
    with it (a scattered table, a stage's pieces). Nothing wrong with the query: the session
    ships its tables again and runs it once more before raising this."""


class Cancelled(PlansightError):
    """The query was cancelled (Query.cancel() or a kernel interrupt)."""


class InternalError(PlansightError):
    """A bug in plansight: please report it with the query."""


def internal_error(error: BaseException, doing: str) -> InternalError:
    """``error``, not a PlansightError, as the InternalError a user sees: the original type
    and message, what plansight was doing, and the original as ``original`` and cause.

    Example:
        >>> error = internal_error(IndexError("index -1 is out of bounds"), "planning")
        >>> str(error).split(";")[0], type(error.original).__name__
        ('IndexError: index -1 is out of bounds (while planning)', 'IndexError')
    """
    wrapped = InternalError(f"{type(error).__name__}: {error} (while {doing}); this is a bug "
                            "in plansight, please report it with the query")
    wrapped.original = error
    wrapped.__cause__ = error
    return wrapped


def bigint_sum_overflow(what: str) -> ExecutionError:
    """A sum kept on int64 (a COUNT's merged partial counts; SUM of integers is a HUGEINT,
    exact on 128 bits) whose total is beyond BIGINT: an error, never a wrapped value."""
    return ExecutionError(
        f"Overflow in {what}: the total is beyond the BIGINT range (-2^63 .. 2^63-1)")


def caret_snippet(sql: str, line: int | None, column: int | None) -> str:
    """The offending line of ``sql`` with a caret under ``column`` (both 1-based)."""
    lines = sql.splitlines() or [""]
    if not line or line > len(lines):
        return ""
    text = lines[line - 1]
    col = max(1, min(column or 1, len(text) + 1))
    return f"  {text}\n  {' ' * (col - 1)}^"


_POSITION = re.compile(r"\(line (\d+), column (\d+)\)")


def add_caret(error: PlansightError, sql: str) -> PlansightError:
    """Put the caret snippet under an error whose message names ``(line L, column C)``.

    The binder knows where a name was written but not the text; the query knows both.

    Example:
        >>> print(add_caret(PlanError("column 'y' does not exist (line 1, column 8)"),
        ...                 "SELECT y FROM t"))
        column 'y' does not exist (line 1, column 8)
          SELECT y FROM t
                 ^
    """
    message = str(error)
    match = _POSITION.search(message)
    if match and sql and "\n" not in message:
        snippet = caret_snippet(sql, int(match.group(1)), int(match.group(2)))
        if snippet:
            error.args = (f"{message}\n{snippet}", *error.args[1:])
    return error


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """A ' Did you mean ...?' suffix naming the closest candidates, or ''."""
    candidates = sorted(set(candidates))
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in candidates}
        close = [lowered[n] for n in difflib.get_close_matches(name.lower(), list(lowered), 3, 0.6)]
    return f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
