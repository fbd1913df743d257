"""Constant folding: evaluate calls whose arguments are all literals, once, at plan time."""

from __future__ import annotations

import pyarrow as pa

from plansight.engine.errors import PlansightError
from plansight.engine.functions.scalar import evaluate_call, evaluate_cast
from plansight.engine.logical.expr import Call, Cast, Expr, Literal, is_volatile, transform
from plansight.engine.logical.plan import (
    Aggregate,
    Filter,
    Join,
    Limit,
    LogicalPlan,
    Projection,
    Sort,
    Values,
    Window,
    transform_plan,
)
from plansight.engine.optimizer.rewrite import map_expressions


def fold(expr: Expr) -> Expr:
    """``1 + 2`` -> ``3``; ``x AND TRUE`` -> ``x``; ``x + NULL`` -> ``NULL``; errors are
    left for run time.

    Example:
        >>> import pyarrow as pa
        >>> from plansight.engine.logical.expr import Call, Literal
        >>> fold(Call("and", (Literal(True, pa.bool_()), Literal(False, pa.bool_())), pa.bool_()))
        Literal(value=False, type=DataType(bool))
    """
    return transform(expr, _fold_node)


# operators whose result is NULL when any operand is (arithmetic and comparisons)
_STRICT = ("add", "subtract", "multiply", "divide", "integer_divide", "modulo", "negate",
           "eq", "neq", "lt", "lte", "gt", "gte")


def _fold_node(expr: Expr) -> Expr:
    if isinstance(expr, Call) and expr.func in ("and", "or") and len(expr.args) == 2:
        simplified = _simplify_boolean(expr)
        if simplified is not None:
            return simplified
    if not isinstance(expr, (Call, Cast)) or is_volatile(expr):
        return expr
    if isinstance(expr, Call) and expr.func in _STRICT and any(
            isinstance(c, Literal) and c.value is None for c in expr.args):
        # NULL whatever the other operand is, which is then never evaluated (as DuckDB's
        # optimizer does): ``CAST(j AS DECIMAL(12, 2)) + NULL`` raises for no row
        return Literal(None, expr.type)
    if not all(isinstance(c, Literal) for c in expr.children()):
        return expr
    if isinstance(expr, Call) and expr.func in ("random", "uuid", "current_date", "now"):
        return expr

    try:
        args = [pa.scalar(c.value, c.type) for c in expr.children()]
        if isinstance(expr, Cast):
            value = evaluate_cast(args[0], expr.type, expr.safe)
        else:
            value = evaluate_call(expr, args)
        if isinstance(value, pa.Array):
            if len(value) != 1:
                return expr
            value = value[0]
        if isinstance(value, pa.ChunkedArray):
            return expr
        return Literal(value.as_py(), expr.type)
    except (PlansightError, pa.ArrowException, ValueError, TypeError, OverflowError):
        return expr


def _simplify_boolean(expr: Call) -> Expr | None:
    a, b = expr.args
    for x, y in ((a, b), (b, a)):
        if isinstance(x, Literal) and x.value is not None:
            if expr.func == "and":
                return y if x.value is True else Literal(False, pa.bool_())
            return Literal(True, pa.bool_()) if x.value is True else y
    return None


def fold_constants(plan: LogicalPlan) -> LogicalPlan:
    """Fold every expression of every node; a filter that folds to FALSE or NULL (or to a
    conjunction with one) is an empty
    relation (its input is never run, as in DuckDB: nothing below it can fail), and so is
    a node that an empty input leaves without rows (a join with an empty side it needs, a
    projection, filter, sort, limit or window over nothing): its other inputs never run
    either."""

    def visit(node: LogicalPlan) -> LogicalPlan:
        node = map_expressions(node, fold)
        if isinstance(node, Filter) and _never_true(node.predicate):
            return Values(node.columns, ())
        if _empty_from_inputs(node):
            return Values(node.columns, ())
        return node
    return transform_plan(plan, visit)


def _never_true(predicate: Expr) -> bool:
    """Whether a filter predicate is FALSE or NULL for every row: a FALSE or NULL literal, or
    a conjunction with one (``NULL AND x`` is NULL or FALSE, never TRUE)."""
    if isinstance(predicate, Literal):
        return predicate.value is not True
    return isinstance(predicate, Call) and predicate.func == "and" and \
        any(_never_true(arg) for arg in predicate.args)


def _is_empty(node: LogicalPlan) -> bool:
    return isinstance(node, Values) and not node.rows


def _empty_from_inputs(node: LogicalPlan) -> bool:
    """Whether ``node`` has no rows because an input it needs rows from has none. A global
    aggregate (or GROUPING SETS' ()) makes a row from nothing; a DISTINCT (an Aggregate of
    keys alone) makes none, so an EXCEPT whose left operand folds to nothing is empty and
    its right operand never runs, as DuckDB prunes it (seed 9301, query 44903: a SUM past
    BIGINT on the right raised in plansight only)."""
    if isinstance(node, (Filter, Projection, Sort, Limit, Window)):
        return _is_empty(node.input)
    if isinstance(node, Aggregate):
        return bool(node.group_exprs) and not node.aggregates and _is_empty(node.input)
    if isinstance(node, Join):
        left, right = _is_empty(node.left), _is_empty(node.right)
        needs = {"inner": left or right, "cross": left or right, "semi": left or right,
                 "left": left, "anti": left, "right": right, "full": left and right}
        return needs.get(node.kind, False)
    return False
