"""sqlglot AST -> bound logical plan: name resolution, types, aggregates, windows, subqueries.

The binder never parses. Each SELECT binds in this order, which is SQL's logical order:

    FROM/JOIN -> WHERE -> GROUP BY + aggregates -> HAVING -> windows -> QUALIFY
              -> SELECT list -> DISTINCT -> ORDER BY -> LIMIT/OFFSET

Names resolve against a scope (the FROM clause's columns, with table qualifiers) and then
against enclosing scopes: a reference to an outer column is a *correlated* reference, left in
place for the decorrelation rule. Scalar expressions are typed by the scalar layer
(engine/sql/functions.py); aggregates and windows are collected here and replaced by the
columns that their Aggregate / Window nodes produce.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import Any

import pyarrow as pa
from sqlglot import exp

from plansight.engine.catalog import View
from plansight.engine.errors import ExecutionError, NotSupportedError, PlanError, did_you_mean
from plansight.engine.functions import window as wf
from plansight.engine.functions.aggregate import BITWISE, aggregate_return_type
from plansight.engine.functions.comoments import BIVARIATE
from plansight.engine.functions.scalar import (
    cast_expr,
    common_supertype,
    resolve_function,
    resolve_operator,
)
from plansight.engine.functions.scalar.conditional import bind_case
from plansight.engine.functions.scalar.types import integer_literal_type, is_null_type, type_name
from plansight.engine.logical import plan as lp
from plansight.engine.logical.expr import (
    AggregateCall,
    Call,
    Column,
    Expr,
    Literal,
    SortKey,
    SubqueryExpr,
    WindowCall,
    next_id,
    walk,
)
from plansight.engine.optimizer.fold_constants import fold
from plansight.engine.optimizer.rewrite import map_expressions
from plansight.engine.sql.functions import bind_scalar_node
from plansight.engine.sql.table_functions import file_kind, open_files, table_function_source

# sqlglot aggregate node classes -> our aggregate names
_AGGREGATE_NODES: dict[type, str] = {
    exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max",
    exp.Stddev: "stddev", exp.StddevSamp: "stddev_samp", exp.StddevPop: "stddev_pop",
    exp.Variance: "var_samp", exp.VariancePop: "var_pop", exp.LogicalAnd: "bool_and",
    exp.LogicalOr: "bool_or", exp.GroupConcat: "string_agg", exp.Median: "median",
    exp.PercentileCont: "quantile_cont", exp.PercentileDisc: "quantile_disc",
    exp.AnyValue: "any_value", exp.ArrayAgg: "list", exp.First: "first",
    exp.Corr: "corr", exp.CovarPop: "covar_pop", exp.CovarSamp: "covar_samp",
    exp.RegrSlope: "regr_slope", exp.RegrIntercept: "regr_intercept",
    exp.RegrCount: "regr_count", exp.RegrR2: "regr_r2", exp.RegrAvgx: "regr_avgx",
    exp.RegrAvgy: "regr_avgy", exp.RegrSxx: "regr_sxx", exp.RegrSyy: "regr_syy",
    exp.RegrSxy: "regr_sxy", exp.BitwiseAndAgg: "bit_and", exp.BitwiseOrAgg: "bit_or",
    exp.BitwiseXorAgg: "bit_xor",
}
_AGGREGATE_NAMES = {"string_agg": "string_agg", "listagg": "string_agg",
                    "group_concat": "string_agg", "bool_and": "bool_and", "bool_or": "bool_or",
                    "every": "bool_and", "product": "product", "quantile": "quantile_cont",
                    "quantile_cont": "quantile_cont", "quantile_disc": "quantile_disc",
                    "first": "first", "arbitrary": "any_value", "count_star": "count_star",
                    "var_samp": "var_samp", "var_pop": "var_pop", "variance": "var_samp",
                    "stddev_samp": "stddev_samp", "stddev_pop": "stddev_pop", "list": "list",
                    "mean": "avg", "any_value": "any_value",
                    **{name: name for name in BIVARIATE + BITWISE}}
_WINDOW_NODES: dict[type, str] = {
    exp.RowNumber: "row_number", exp.Lag: "lag", exp.Lead: "lead",
    exp.FirstValue: "first_value", exp.LastValue: "last_value", exp.NthValue: "nth_value",
}
_WINDOW_NAMES = {"rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "row_number",
                 "lag", "lead", "first_value", "last_value", "nth_value"}


# ----------------------------------------------------------------------------- scopes

@dataclass
class ScopeEntry:
    qualifier: str | None
    name: str
    column: Column
    hidden: bool = False  # USING duplicates: resolvable when qualified, not in SELECT *


@dataclass
class Scope:
    entries: list[ScopeEntry] = field(default_factory=list)
    parent: Scope | None = None
    correlated: set[int] = field(default_factory=set)  # outer ids referenced from here

    def resolve(self, name: str, qualifier: str | None, node: exp.Expression | None = None
                ) -> Column | None:
        """The column named ``name`` (optionally of table ``qualifier``), searching outward."""
        scope, depth = self, 0
        while scope is not None:
            found = scope._local(name, qualifier)
            if found is not None:
                if depth:
                    inner = self
                    while inner is not scope:
                        inner.correlated.add(found.id)
                        inner = inner.parent
                return found
            scope, depth = scope.parent, depth + 1
        return None

    def _local(self, name: str, qualifier: str | None) -> Column | None:
        lname = name.lower()
        lq = qualifier.lower() if qualifier else None
        matches = [e for e in self.entries if e.name.lower() == lname
                   and (lq is None or (e.qualifier or "").lower() == lq)]
        if lq is None:
            visible = [e for e in matches if not e.hidden]
            matches = visible or matches
        ids = {e.column.id for e in matches}
        if len(ids) > 1:
            tables = sorted({e.qualifier for e in matches if e.qualifier})
            unnamed = any(not e.qualifier for e in matches)
            where = ", ".join(tables + (["a subquery without an alias"] if unnamed else []))
            hint = f"qualify it, e.g. {tables[0]}.{name}" if tables else \
                "give the subqueries aliases and qualify it"
            if unnamed and tables:
                hint += " (give the subquery an alias to name its column)"
            raise PlanError(f"column reference {name!r} is ambiguous: it exists in {where}; "
                            f"{hint}")
        return matches[0].column if matches else None

    def candidates(self) -> list[str]:
        names, scope = [], self
        while scope is not None:
            names += [e.name for e in scope.entries]
            names += [f"{e.qualifier}.{e.name}" for e in scope.entries if e.qualifier]
            scope = scope.parent
        return names


def _is_outer(column: Column, plan: lp.LogicalPlan) -> bool:
    return column.id not in {c.id for c in plan.columns}


# ----------------------------------------------------------------------------- the binder

@dataclass
class _SelectClauses:
    """A SELECT's list and the clauses bound over it, while its plan is built step by step."""

    items: list[tuple[str, Expr, exp.Expression]]  # (output name, bound, source node)
    group_by: bool
    group_exprs: list[Expr]
    grouping_sets: list[list[int]] | None
    having: Expr | None
    qualify: Expr | None
    order_keys: list[tuple[SortKey, int | None]]  # (key, select-list position if any)
    on_keys: list[tuple[SortKey, int | None]]  # DISTINCT ON
    distinct: bool

    def rewrite(self, rewrite) -> None:
        """Every expression read through ``rewrite`` (onto an aggregate's outputs)."""
        self.items = [(n, rewrite(b), s) for n, b, s in self.items]
        self.order_keys = [(SortKey(rewrite(k.expr), k.descending, k.nulls_first), pos)
                           for k, pos in self.order_keys]
        self.on_keys = [(SortKey(rewrite(k.expr), k.descending, k.nulls_first), pos)
                        for k, pos in self.on_keys]
        if self.having is not None:
            self.having = rewrite(self.having)
        if self.qualify is not None:
            self.qualify = rewrite(self.qualify)


class Binder:
    """Binds one statement against ``catalog`` (name -> TableSource) and session options."""

    def __init__(self, catalog: Mapping[str, Any], options: Mapping[str, Any],
                 params: Mapping[str, Any] | None = None,
                 run_plan: Callable[[lp.LogicalPlan], pa.Table] | None = None):
        self.catalog = catalog
        self.options = options
        self.params = dict(params or {})
        # runs an uncorrelated subquery whose value the plan itself needs (a frame offset);
        # the caller (the Query) owns execution, the binder never runs anything by itself
        self.run_plan = run_plan
        self.offset_values: dict[str, Expr] = {}  # frame offsets computed by subqueries
        self.ctes: list[dict[str, exp.Expression]] = []
        # scalar subqueries by (scope, SQL text): one subquery written twice (in SELECT and
        # GROUP BY) binds to one expression, so the two compare equal
        self._scalar_subqueries: dict[tuple[int, str], tuple[Scope, SubqueryExpr]] = {}
        # EXISTS / IN subqueries of a SELECT list, which a GROUP BY naming the same subquery
        # reuses (so the key and the item match); only there: the same correlated EXISTS
        # bound once for WHERE and HAVING would be decorrelated twice over one plan
        self._select_subqueries: dict = {}
        self._recursive_ctes: set[int] = set()  # ids of the CTE nodes under WITH RECURSIVE
        self._work_tables: dict[str, lp.WorkTable] = {}  # recursive terms being bound

    # -- statements -----------------------------------------------------------
    def bind_statement(self, node: exp.Expression) -> lp.LogicalPlan:
        if isinstance(node, (exp.Select, exp.SetOperation, exp.Subquery, exp.Values)):
            plan = self.bind_query(node, None)
            return plan
        if isinstance(node, exp.Describe) and not node.meta.get("explain"):
            return self._describe(node.this)
        if isinstance(node, exp.Show) and str(node.name).upper() == "TABLES":
            names = sorted(self.catalog, key=str.lower)
            return _constant_table(["name"], [(name,) for name in names], [pa.string()])
        kind = type(node).__name__.upper()
        raise NotSupportedError(f"{kind} statements are not supported; plansight runs queries "
                                "(SELECT, WITH, VALUES, set operations), SET and EXPLAIN")

    def _describe(self, target: exp.Expression) -> lp.LogicalPlan:
        """DESCRIBE table / DESCRIBE query: one row per output column, in DuckDB's layout."""

        query = exp.select("*").from_(target) if isinstance(target, exp.Table) else target
        columns = self.bind_query(query, None).columns
        names = ["column_name", "column_type", "null", "key", "default", "extra"]
        rows = [(c.name, type_name(c.type), "YES", None, None, None) for c in columns]
        return _constant_table(names, rows, [pa.string()] * len(names))

    def bind_query(self, node: exp.Expression, outer: Scope | None) -> lp.LogicalPlan:
        with_ = node.args.get("with_") or node.args.get("with")
        if with_ is not None:
            frame: dict[str, exp.Expression] = {}
            self.ctes.append(frame)
            try:
                for cte in with_.expressions:
                    frame[cte.alias_or_name.lower()] = cte
                    if with_.args.get("recursive"):
                        self._recursive_ctes.add(id(cte))
                node = node.copy()
                node.set("with_", None)
                node.set("with", None)
                return self.bind_query(node, outer)
            finally:
                self.ctes.pop()
        if isinstance(node, exp.Subquery):
            plan = self.bind_query(node.this, outer)
            return self._order_limit_only(node, plan, outer)
        if isinstance(node, exp.SetOperation):
            return self.bind_set_operation(node, outer)
        if isinstance(node, exp.Values):
            return self.bind_values(node)
        if isinstance(node, exp.Select):
            return self.bind_select(node, outer)
        raise NotSupportedError(f"{type(node).__name__} is not supported as a query")

    # -- FROM -----------------------------------------------------------------
    def bind_from(self, select: exp.Select, outer: Scope | None) -> tuple[lp.LogicalPlan, Scope]:
        from_ = select.args.get("from_") or select.args.get("from")
        scope = Scope(parent=outer)
        if from_ is None:
            return lp.Values((), ((),)), scope
        # an explicit JOIN binds tighter than the comma: FROM a, b RIGHT JOIN c is
        # a CROSS JOIN (b RIGHT JOIN c), so each comma item and its JOINs are one group
        plan = self.bind_relation(from_.this, scope, outer)
        group, group_start = None, 0
        for join in select.args.get("joins") or []:
            if _is_comma(join):
                if group is not None:
                    plan = lp.Join(plan, group, "cross")
                group_start = len(scope.entries)
                group = self.bind_relation(join.this, scope, outer)
            elif group is None:
                plan = self.bind_join(plan, join, scope, outer)
            else:
                group = self.bind_join(group, join, scope, outer, group_start)
        if group is not None:
            plan = lp.Join(plan, group, "cross")
        return plan, scope

    def bind_relation(self, node: exp.Expression, scope: Scope, outer: Scope | None
                      ) -> lp.LogicalPlan:
        alias = node.alias_or_name if not isinstance(node, exp.Subquery) else node.alias
        column_aliases = [c.name for c in node.args["alias"].columns] \
            if node.args.get("alias") is not None and node.args["alias"].columns else []
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            name = node.name
            if node.args.get("db"):
                name = f"{node.args['db'].name}.{name}"
            cte = self._find_cte(name)
            if cte is not None:
                cte_aliases = [c.name for c in cte.args["alias"].columns] \
                    if cte.args.get("alias") is not None and cte.args["alias"].columns else []
                work = self._work_tables.get(name.lower())
                if work is not None:  # the recursive term reads the previous iteration
                    plan = self._rename(work, column_aliases)
                    return self._add_scope(plan, scope, node.alias or name)
                if id(cte) in self._recursive_ctes:
                    plan = self._bind_recursive(cte, name.lower(), cte_aliases)
                else:
                    plan = self.bind_query(cte.this, None)
                plan = self._rename(plan, column_aliases or cte_aliases)
                return self._add_scope(plan, scope, node.alias or name)
            source = self._lookup_table(name, node)
            if isinstance(source, View):
                plan = self._bind_view(source)
                plan = self._rename(plan, column_aliases)
                return self._add_scope(plan, scope, node.alias or name)
            columns = tuple(Column(next_id(), f.name, f.type) for f in source.schema)
            plan = lp.TableScan(name, source, columns, tuple(f.name for f in source.schema))
            plan = self._rename(plan, column_aliases)
            return self._add_scope(plan, scope, node.alias or name)
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Anonymous | exp.Func):
            source = table_function_source(node.this)
            name = node.this.sql_name().lower() if not isinstance(node.this, exp.Anonymous) \
                else str(node.this.this).lower()
            return self._scan_source(source, name, node, column_aliases, scope)
        if isinstance(node, exp.Subquery):
            inner = node.this
            # a derived table sees the enclosing queries (correlation), not its FROM siblings
            plan = self.bind_query(inner, outer)
            plan = self._order_limit_only(node, plan, None)
            plan = self._rename(plan, column_aliases)
            return self._add_scope(plan, scope, alias or None)
        if isinstance(node, exp.Values):
            plan = self.bind_values(node)
            plan = self._rename(plan, column_aliases)
            return self._add_scope(plan, scope, alias or None)
        raise NotSupportedError(f"FROM item {node.sql()!r} is not supported")

    def _scan_source(self, source, name: str, node: exp.Expression, column_aliases, scope
                     ) -> lp.LogicalPlan:
        columns = tuple(Column(next_id(), f.name, f.type) for f in source.schema)
        plan = lp.TableScan(name, source, columns, tuple(f.name for f in source.schema))
        plan = self._rename(plan, column_aliases)
        return self._add_scope(plan, scope, node.alias or name)

    def _bind_view(self, view: View) -> lp.LogicalPlan:
        """A view's query, bound on its own (the CTEs around the reference do not apply)."""
        saved, self.ctes = self.ctes, []
        try:
            return self.bind_query(view.query, None)
        finally:
            self.ctes = saved

    def _bind_recursive(self, cte: exp.Expression, name: str, aliases: list[str]
                        ) -> lp.LogicalPlan:
        """A CTE of WITH RECURSIVE: ``anchor UNION [ALL] recursive term``, where the
        recursive term names the CTE (the previous iteration's rows). A CTE that does not
        name itself is an ordinary one."""
        body = cte.this
        refers = any(isinstance(t, exp.Table) and t.name.lower() == name
                     for t in body.expression.find_all(exp.Table)) \
            if isinstance(body, exp.Union) else False
        if not refers:
            return self.bind_query(body, None)
        if name in self._work_tables:
            raise NotSupportedError(f"recursive CTE {name!r} nested in its own recursion")
        anchor = self._rename(self.bind_query(body.this, None), aliases)
        work = lp.WorkTable(name, tuple(Column(next_id(), c.name, c.type)
                                        for c in anchor.columns))
        self._work_tables[name] = work
        try:
            recursive = self.bind_query(body.expression, None)
        finally:
            del self._work_tables[name]
        if len(recursive.columns) != len(anchor.columns):
            raise PlanError(f"recursive CTE {name!r}: the recursive term returns "
                            f"{len(recursive.columns)} columns, the anchor "
                            f"{len(anchor.columns)}")
        types = [c.type for c in anchor.columns]
        recursive = self._cast_columns(recursive, types, cast_expr)
        outputs = tuple(Column(next_id(), c.name, c.type) for c in anchor.columns)
        distinct = body.args.get("distinct", True) is not False
        return lp.RecursiveCTE(anchor, recursive, work, outputs, distinct)

    def _find_cte(self, name: str) -> exp.Expression | None:
        for frame in reversed(self.ctes):
            if name.lower() in frame:
                return frame[name.lower()]
        return None

    def _lookup_table(self, name: str, node: exp.Expression):
        lowered = {k.lower(): v for k, v in self.catalog.items()}
        if name.lower() in lowered:
            return lowered[name.lower()]
        kind = file_kind(name)
        if kind is not None and isinstance(node, exp.Table) and node.this.quoted:
            return open_files(kind, name)  # FROM 'data/*.parquet', as DuckDB reads it
        ctes = [k for frame in self.ctes for k in frame]
        raise PlanError(f"table {name!r} does not exist." +
                        did_you_mean(name, list(self.catalog) + ctes) +
                        _where(node))

    def _rename(self, plan: lp.LogicalPlan, names: list[str]) -> lp.LogicalPlan:
        if not names:
            return plan
        columns = plan.columns
        if len(names) > len(columns):
            raise PlanError(f"{len(names)} column aliases given for {len(columns)} columns")
        outputs = tuple(Column(next_id(), names[i], c.type) if i < len(names) else c
                        for i, c in enumerate(columns))
        return lp.Projection(plan, columns, outputs)

    def _add_scope(self, plan: lp.LogicalPlan, scope: Scope, qualifier: str | None
                   ) -> lp.LogicalPlan:
        for column in plan.columns:
            scope.entries.append(ScopeEntry(qualifier, column.name, column))
        return plan

    def bind_join(self, left: lp.LogicalPlan, join: exp.Join, scope: Scope, outer: Scope | None,
                  left_start: int = 0) -> lp.LogicalPlan:
        """``left`` JOIN ``join.this``; ``left``'s names are scope.entries[left_start:] (the
        comma item the JOIN belongs to)."""
        side = (join.args.get("side") or "").lower()
        kind = (join.args.get("kind") or "").lower()
        method = (join.args.get("method") or "").lower()
        if method and method != "natural":
            raise NotSupportedError(f"{method.upper()} joins are not supported")
        left_entries = len(scope.entries)
        right = self.bind_relation(join.this, scope, outer)
        join_kind = {"left": "left", "right": "right", "full": "full"}.get(side, "inner")
        if kind in ("semi", "anti"):
            join_kind = kind
        using = [ident.name if hasattr(ident, "name") else str(ident)
                 for ident in join.args.get("using") or []]
        if method == "natural":  # USING every column name both sides have, in left order
            right_names = {e.name.lower() for e in scope.entries[left_entries:]}
            using = list(dict.fromkeys(e.name for e in scope.entries[left_start:left_entries]
                                       if not e.hidden and e.name.lower() in right_names))
            if not using:
                raise PlanError("NATURAL JOIN: the two sides have no column name in common; "
                                "use CROSS JOIN for a cross product" + _where(join))
        if kind == "cross" or (not join.args.get("on") and not using):
            if join_kind in ("left", "right", "full") and not join.args.get("on"):
                raise PlanError(f"{side.upper()} JOIN needs an ON or USING condition"
                                + _where(join))
            return lp.Join(left, right, "cross" if join_kind == "inner" else join_kind)
        merged: list[tuple[ScopeEntry, Column, Column]] = []
        if using:
            conditions = []
            right_ids = {c.id for c in right.columns}
            for name in using:
                left_entries_matching = [e for e in scope.entries[left_start:left_entries]
                                         if e.name.lower() == name.lower() and not e.hidden]
                right_entry = [e for e in scope.entries[left_entries:]
                               if e.name.lower() == name.lower() and e.column.id in right_ids]
                if not left_entries_matching or not right_entry:
                    raise PlanError(f"column {name!r} named in USING is not in both sides"
                                    + _where(join))
                lcol, rcol = left_entries_matching[0].column, right_entry[0].column
                conditions.append(self._typed_call("eq", [lcol, rcol]))
                if join_kind in ("inner", "left"):
                    right_entry[0].hidden = True
                elif join_kind == "right":
                    for e in left_entries_matching:
                        e.hidden = True
                elif join_kind == "full":  # the USING column is COALESCE(left, right)
                    for e in left_entries_matching + right_entry:
                        e.hidden = True
                    merged.append((left_entries_matching[0], lcol, rcol))
            condition = conditions[0]
            for c in conditions[1:]:
                condition = Call("and", (condition, c), pa.bool_())
        else:
            condition = self.bind_expr(join.args["on"], scope)
            self._no_aggregates(condition, "JOIN conditions")
        if any(isinstance(e, SubqueryExpr) for e in walk(condition)):
            if join_kind == "inner":  # a filter over the cross product, where subqueries
                # are decorrelated like in WHERE
                plan = lp.Filter(lp.Join(left, right, "cross"),
                                 self._boolean(condition, "JOIN ... ON"))
                return self._merge_using_columns(plan, merged, scope) if merged else plan
            # an outer join keeps them in its condition: decorrelation computes each on the
            # side whose columns it reads
        plan = lp.Join(left, right, join_kind, (), condition)
        if merged:
            plan = self._merge_using_columns(plan, merged, scope)
        return plan

    def _merge_using_columns(self, plan: lp.LogicalPlan, merged, scope: Scope
                             ) -> lp.LogicalPlan:
        """FULL JOIN ... USING: each USING column becomes COALESCE(left, right), visible
        unqualified (and in SELECT *) where the left column was; t.k / u.k stay resolvable."""

        exprs, outputs = list(plan.columns), list(plan.columns)
        for entry, lcol, rcol in merged:
            value = resolve_function("coalesce", [lcol, rcol], self.options)
            column = Column(next_id(), entry.name, value.type)
            exprs.append(value)
            outputs.append(column)
            scope.entries.insert(scope.entries.index(entry), ScopeEntry(None, entry.name, column))
        return lp.Projection(plan, tuple(exprs), tuple(outputs))

    # -- SELECT ---------------------------------------------------------------
    def bind_select(self, select: exp.Select, outer: Scope | None) -> lp.LogicalPlan:
        """One step per clause, in SQL's logical order: FROM, WHERE, (the SELECT list and
        the clauses that refer to it), GROUP BY + aggregates + HAVING, windows + QUALIFY,
        then the projection with DISTINCT [ON], ORDER BY and LIMIT."""
        plan, scope = self.bind_from(select, outer)
        plan = self._bind_where(select, plan, scope)
        named_windows = {w.name.lower(): w for w in select.args.get("windows") or []}
        collector = _Collector(self, scope, named_windows)
        clauses = self._bind_clauses(select, scope, collector)
        plan = self._plan_grouping(plan, clauses, collector)
        plan = self._plan_window_clauses(plan, clauses, collector)
        return self._plan_output(select, plan, clauses)

    def _bind_where(self, select: exp.Select, plan: lp.LogicalPlan,
                    scope: Scope) -> lp.LogicalPlan:
        where = select.args.get("where")
        if where is None:
            return plan
        predicate = self.bind_expr(where.this, scope)
        self._no_aggregates(predicate, "WHERE")
        return lp.Filter(plan, self._boolean(predicate, "WHERE"))

    def _bind_clauses(self, select: exp.Select, scope: Scope,
                      collector: _Collector) -> _SelectClauses:
        """The SELECT list (stars expanded) and every clause that may name its aliases,
        bound with aggregates and windows as placeholders of ``collector``."""
        items: list[tuple[str, Expr, exp.Expression]] = []
        outer_subqueries = self._select_subqueries
        self._select_subqueries = {"record": True}
        try:
            for node in select.expressions:
                items.extend(self._expand_select_item(node, scope, collector))
            aliases = {name.lower(): bound for name, bound, source in items
                       if isinstance(source, exp.Alias)}
            collector.aliases = aliases
            group = select.args.get("group")
            self._select_subqueries["record"] = False
            self._select_subqueries["reuse"] = True
            group_exprs, grouping_sets = self._bind_group_by(group, items, aliases, scope,
                                                             collector)
        finally:
            self._select_subqueries = outer_subqueries
        having = select.args.get("having")
        having_expr = collector.bind(having.this) if having is not None else None
        qualify = select.args.get("qualify")
        qualify_expr = collector.bind(qualify.this) if qualify is not None else None
        order = select.args.get("order")
        distinct = select.args.get("distinct")
        order_keys = self._bind_order(order, items, aliases, collector) if order else []
        on_keys = []  # DISTINCT ON (...): bound like ORDER BY items (ordinals, aliases)
        if distinct is not None and distinct.args.get("on"):
            on = exp.Order(expressions=[exp.Ordered(this=e.copy(), nulls_first=False)
                                        for e in distinct.args["on"].expressions])
            on_keys = self._bind_order(on, items, aliases, collector)
            distinct = None
        return _SelectClauses(
            items=items, group_by=group is not None, group_exprs=group_exprs,
            grouping_sets=grouping_sets,
            having=having_expr, qualify=qualify_expr,
            order_keys=order_keys, on_keys=on_keys, distinct=distinct is not None)

    def _bind_group_by(self, group, items, aliases, scope: Scope, collector: _Collector
                       ) -> tuple[list[Expr], list[list[int]] | None]:
        """The grouping expressions, and for ROLLUP / CUBE / GROUPING SETS the sets (lists
        of indices into them); None sets for a plain GROUP BY."""
        if group is None:
            return [], None
        group_exprs: list[Expr] = []
        if group.args.get("all"):
            group_exprs = [b for _, b, _ in items if not collector.contains_placeholder(b)]
        sets: list[list[Expr]] = [list(group_exprs)]
        for g in group.expressions:
            choices = self._grouping_choices(g, items, aliases, scope)
            sets = [chosen + choice for chosen in sets for choice in choices]
        group_exprs = list(dict.fromkeys(e for chosen in sets for e in chosen))
        if len(sets) > 1 or any(isinstance(g, (exp.Rollup, exp.Cube, exp.GroupingSets))
                                for g in group.expressions):
            return group_exprs, [sorted({group_exprs.index(e) for e in chosen})
                                 for chosen in sets]
        return group_exprs, None

    def _plan_grouping(self, plan: lp.LogicalPlan, clauses: _SelectClauses,
                       collector: _Collector) -> lp.LogicalPlan:
        """The Aggregate (when anything aggregates or groups) and HAVING's filter above it;
        every clause is rewritten to read the aggregate's outputs."""
        if collector.groupings and not clauses.group_by:
            raise PlanError("GROUPING() needs a GROUP BY clause")
        grouping_sets = clauses.grouping_sets
        if collector.groupings and grouping_sets is None:
            grouping_sets = [list(range(len(clauses.group_exprs)))]
        if collector.aggregates or clauses.group_exprs or grouping_sets:
            plan, rewrite = self._plan_aggregate(plan, clauses.group_exprs, collector,
                                                 grouping_sets)
            clauses.rewrite(rewrite)
            collector.rewrite_windows(rewrite)
        elif clauses.having is not None:
            # HAVING without GROUP BY or aggregates: a filter over one implicit group
            plan, rewrite = self._plan_aggregate(plan, [], collector)
            clauses.having = rewrite(clauses.having)
        if clauses.having is not None:
            plan = lp.Filter(plan, self._boolean(clauses.having, "HAVING"))
        return plan

    def _plan_window_clauses(self, plan: lp.LogicalPlan, clauses: _SelectClauses,
                             collector: _Collector) -> lp.LogicalPlan:
        """One Window node per distinct (partition, order) specification, then QUALIFY."""
        if collector.windows:
            plan = self._plan_windows(plan, collector)
        if clauses.qualify is not None:
            if not collector.windows:
                raise PlanError("QUALIFY needs a window function in the query")
            plan = lp.Filter(plan, self._boolean(clauses.qualify, "QUALIFY"))
        return plan

    def _plan_output(self, select: exp.Select, plan: lp.LogicalPlan,
                     clauses: _SelectClauses) -> lp.LogicalPlan:
        """The projection (+ hidden ORDER BY columns), DISTINCT [ON], ORDER BY, LIMIT."""
        outputs, exprs = [], []
        for name, bound, _ in clauses.items:
            if isinstance(bound, Column) and bound.name == name and \
                    bound.id not in {o.id for o in outputs}:
                outputs.append(bound)
            else:
                outputs.append(Column(next_id(), name, bound.type))
            exprs.append(bound)
        visible = len(outputs)

        def output_key(key: SortKey, position: int | None) -> SortKey:
            """``key`` over a projected column: a select item, else a hidden column."""
            if position is None:
                position = next((i for i, e in enumerate(exprs[:visible]) if e == key.expr),
                                None)
            if position is not None:
                return SortKey(outputs[position], key.descending, key.nulls_first)
            if clauses.distinct:
                raise PlanError("for SELECT DISTINCT, ORDER BY expressions must appear in the "
                                f"select list: {key.expr}")
            hidden = key.expr if isinstance(key.expr, Column) and \
                key.expr.id not in {o.id for o in outputs} else \
                Column(next_id(), "__order", key.expr.type)
            exprs.append(key.expr)
            outputs.append(hidden)
            return SortKey(hidden, key.descending, key.nulls_first)

        sort_keys = [output_key(key, position) for key, position in clauses.order_keys]
        on_columns = tuple(output_key(key, position).expr
                           for key, position in clauses.on_keys)
        plan = lp.Projection(plan, tuple(exprs), tuple(outputs))
        if on_columns:
            plan = _first_per_group(plan, on_columns, tuple(sort_keys))
        if clauses.distinct:
            group_cols = tuple(Column(next_id(), c.name, c.type) for c in outputs)
            plan = lp.Aggregate(plan, tuple(outputs), group_cols, (), ())
            sort_keys = [SortKey(group_cols[outputs.index(k.expr)], k.descending, k.nulls_first)
                         for k in sort_keys]
            outputs = list(group_cols)
        if sort_keys:
            plan = lp.Sort(plan, tuple(sort_keys))
        plan = self._limit(select, plan)
        if len(outputs) > visible:
            plan = lp.Projection(plan, tuple(outputs[:visible]), tuple(outputs[:visible]))
        return plan

    def _expand_select_item(self, node, scope: Scope, collector):
        if isinstance(node, exp.Star) or (isinstance(node, exp.Column) and
                                          isinstance(node.this, exp.Star)):
            qualifier = node.table if isinstance(node, exp.Column) else None
            star = node.this if isinstance(node, exp.Column) else node
            # sqlglot >= 26 names the EXCLUDE list "except_", older versions "except"
            excluded = star.args.get("except_") or star.args.get("except") or []
            except_ = {e.name.lower() for e in excluded}
            entries = [e for e in scope.entries if not e.hidden and
                       (qualifier is None or (e.qualifier or "").lower() == qualifier.lower())]
            if qualifier and not entries:
                raise PlanError(f"table {qualifier!r} in {node.sql()} is not in the FROM clause."
                                + did_you_mean(qualifier, {e.qualifier for e in scope.entries
                                                           if e.qualifier}))
            if not entries and qualifier is None:
                raise PlanError("SELECT * needs a FROM clause")
            for e in entries:
                if e.name.lower() not in except_:
                    yield e.name, e.column, node
            return
        name = node.alias_or_name if isinstance(node, (exp.Alias, exp.Column)) else \
            _display_name(node)
        if isinstance(node, exp.Alias):
            bound = collector.bind(node.this)
        else:
            bound = collector.bind(node)
        yield name, bound, node

    def _bind_group_item(self, node, items, aliases, scope) -> Expr:
        if isinstance(node, exp.Literal) and not node.is_string:
            position = int(node.this)
            if not 1 <= position <= len(items):
                raise PlanError(f"GROUP BY position {position} is not in the select list "
                                f"(1..{len(items)})")
            return items[position - 1][1]
        if isinstance(node, exp.Column) and not node.table:
            resolved = None
            try:
                resolved = scope.resolve(node.name, None)
            except PlanError:
                resolved = None
            if resolved is None and node.name.lower() in aliases:
                return aliases[node.name.lower()]
        bound = self.bind_expr(node, scope)
        self._no_aggregates(bound, "GROUP BY")
        return bound

    def _grouping_choices(self, node, items, aliases, scope) -> list[list[Expr]]:
        """The grouping sets one GROUP BY item contributes (a plain key: exactly one)."""
        def element(e) -> list[Expr]:  # (a, b) groups together inside ROLLUP / CUBE / SETS
            if isinstance(e, (exp.Rollup, exp.Cube, exp.GroupingSets)):
                raise NotSupportedError(f"{e.key.upper()} nested inside another grouping "
                                        "construct is not supported")
            parts = e.expressions if isinstance(e, exp.Tuple) else \
                [e.this] if isinstance(e, exp.Paren) else [e]
            return [self._bind_group_item(p, items, aliases, scope) for p in parts]

        if isinstance(node, exp.Rollup):
            elements = [element(e) for e in node.expressions]
            return [list(chain.from_iterable(elements[:n]))
                    for n in range(len(elements), -1, -1)]
        if isinstance(node, exp.Cube):
            elements = [element(e) for e in node.expressions]
            return [list(chain.from_iterable(el for bit, el in enumerate(elements)
                                             if not mask >> bit & 1))
                    for mask in range(2 ** len(elements))]
        if isinstance(node, exp.GroupingSets):
            return [element(e) for e in node.expressions]
        return [[self._bind_group_item(node, items, aliases, scope)]]

    def _bind_order(self, order: exp.Order, items, aliases, collector):
        keys = []
        for ordered in order.expressions:
            descending = bool(ordered.args.get("desc"))
            nulls_first = self._nulls_first(ordered, descending)
            node = ordered.this
            if isinstance(node, exp.Var) and node.name.upper() == "ALL":
                # DuckDB's ORDER BY ALL: every select item, left to right, this direction
                keys += [(SortKey(bound, descending, nulls_first), position)
                         for position, (_, bound, _) in enumerate(items)]
                continue
            position = None
            if isinstance(node, exp.Literal) and not node.is_string:
                position = int(node.this) - 1
                if not 0 <= position < len(items):
                    raise PlanError(f"ORDER BY position {position + 1} is not in the select "
                                    f"list (1..{len(items)})")
                bound = items[position][1]
            elif isinstance(node, exp.Column) and not node.table and \
                    node.name.lower() in aliases:
                # an output alias wins over an input column of the same name (like DuckDB)
                position = next(i for i, (n, _, s) in enumerate(items)
                                if isinstance(s, exp.Alias) and n.lower() == node.name.lower())
                bound = items[position][1]
            else:
                bound = collector.bind(node)
            keys.append((SortKey(bound, descending, nulls_first), position))
        return keys

    def _nulls_first(self, ordered: exp.Ordered, descending: bool) -> bool:
        if ordered.meta.get("explicit_nulls", True):
            return bool(ordered.args.get("nulls_first"))
        mode = self.options.get("default_null_order", "nulls_last")
        return {"nulls_last": False, "nulls_first": True,
                "nulls_first_on_asc_last_on_desc": not descending,
                "nulls_last_on_asc_first_on_desc": descending}[mode]

    def _limit(self, node, plan: lp.LogicalPlan) -> lp.LogicalPlan:
        limit, offset = node.args.get("limit"), node.args.get("offset")
        if limit is None and offset is None:
            return plan
        fetch = self._constant_int(limit.expression, "LIMIT") if limit is not None else None
        skip = self._constant_int(offset.expression, "OFFSET") if offset is not None else 0
        return lp.Limit(plan, skip, fetch)

    def _constant_int(self, node, clause: str) -> int | None:

        bound = fold(self.bind_expr(node, Scope()))
        if not isinstance(bound, Literal) or (bound.value is not None and
                                              not isinstance(bound.value, int)):
            raise PlanError(f"{clause} must be a constant integer, got {node.sql()}")
        if bound.value is not None and bound.value < 0:
            raise PlanError(f"{clause} must not be negative, got {bound.value}")
        return bound.value

    def _order_limit_only(self, node, plan, outer):
        order = node.args.get("order")
        if order is not None:
            items = [(c.name, c, None) for c in plan.columns]
            scope = Scope([ScopeEntry(None, c.name, c) for c in plan.columns], outer)
            collector = _Collector(self, scope, {})
            keys = self._bind_order(order, items, {}, collector)
            plan = lp.Sort(plan, tuple(k for k, _ in keys))
        return self._limit(node, plan)

    # -- aggregation ----------------------------------------------------------
    def _plan_aggregate(self, plan, group_exprs, collector, grouping_sets=None):
        group_exprs = list(dict.fromkeys(group_exprs))
        if grouping_sets is not None:
            node, group_outputs = _plan_grouping_sets(plan, group_exprs, grouping_sets,
                                                      collector)
        else:
            # group keys that are plain columns keep their id, so references stay valid
            group_outputs = tuple(e if isinstance(e, Column) else
                                  Column(next_id(), _expr_name(e), e.type)
                                  for e in group_exprs)
            node = lp.Aggregate(plan, tuple(group_exprs), group_outputs,
                                tuple(collector.aggregates), tuple(collector.aggregate_columns))
        mapping = {e: o for e, o in zip(group_exprs, group_outputs)}
        allowed = {c.id for c in node.columns}
        inner_ids = {c.id for c in plan.columns}

        def rewrite(expr: Expr) -> Expr:
            def visit(e: Expr) -> Expr:
                if e in mapping:
                    return mapping[e]
                if isinstance(e, Column) and e.id in inner_ids and e.id not in allowed:
                    raise PlanError(
                        f"column {e.name!r} must appear in the GROUP BY clause or be used in "
                        f"an aggregate function")
                return e
            return _transform_top_down(expr, visit)

        return node, rewrite

    def _plan_windows(self, plan, collector):
        groups: dict[tuple, list[int]] = {}
        for i, w in enumerate(collector.windows):
            groups.setdefault((w.partition_by, w.order_by), []).append(i)
        for indices in groups.values():
            windows = tuple(collector.windows[i] for i in indices)
            outputs = tuple(collector.window_columns[i] for i in indices)
            plan = lp.Window(plan, windows, outputs)
        return plan

    # -- set operations, VALUES -----------------------------------------------
    def bind_set_operation(self, node: exp.SetOperation, outer: Scope | None) -> lp.LogicalPlan:
        left = self.bind_query(node.this, outer)
        right = self.bind_query(node.expression, outer)
        if len(left.columns) != len(right.columns):
            raise PlanError(f"{type(node).__name__.upper()} inputs have different column "
                            f"counts: {len(left.columns)} and {len(right.columns)}")

        types = [common_supertype([a.type, b.type], f"{type(node).__name__.upper()} column "
                                  f"{a.name!r}") for a, b in zip(left.columns, right.columns)]
        left, right = self._cast_columns(left, types, cast_expr), \
            self._cast_columns(right, types, cast_expr)
        outputs = tuple(Column(next_id(), c.name, t) for c, t in zip(left.columns, types))
        distinct = node.args.get("distinct", True) is not False
        if isinstance(node, exp.Union):
            plan = lp.Union((left, right), outputs)
            if distinct:
                groups = tuple(Column(next_id(), c.name, c.type) for c in outputs)
                plan = lp.Aggregate(plan, outputs, groups, (), ())
        else:
            kind = "semi" if isinstance(node, exp.Intersect) else "anti"
            if distinct:
                groups = tuple(Column(next_id(), c.name, c.type) for c in left.columns)
                left = lp.Aggregate(left, left.columns, groups, (), ())
            else:
                # ALL keeps multiplicities: number the copies of each row on both sides, so
                # the n-th copy on the left meets only the n-th copy on the right
                left, right = _number_copies(left), _number_copies(right)
            on = tuple(zip(left.columns, right.columns))
            joined = lp.Join(left, right, kind, on, None, null_equal=True)
            plan = lp.Projection(joined, left.columns[:len(outputs)], outputs)
        scope = Scope([ScopeEntry(None, c.name, c) for c in plan.columns], outer)
        if node.args.get("order") is not None:
            items = [(c.name, c, None) for c in plan.columns]
            keys = self._bind_order(node.args["order"], items, {}, _Collector(self, scope, {}))
            plan = lp.Sort(plan, tuple(k for k, _ in keys))
        return self._limit(node, plan)

    def _cast_columns(self, plan, types, cast_expr):
        if all(c.type == t for c, t in zip(plan.columns, types)):
            return plan
        exprs = tuple(c if c.type == t else cast_expr(c, t) for c, t in zip(plan.columns, types))
        outputs = tuple(c if c.type == t else Column(next_id(), c.name, t)
                        for c, t in zip(plan.columns, types))
        return lp.Projection(plan, exprs, outputs)

    def bind_values(self, node: exp.Values) -> lp.LogicalPlan:
        rows = []
        for row in node.expressions:
            values = row.expressions if isinstance(row, exp.Tuple) else [row]
            rows.append([self.bind_expr(v, Scope()) for v in values])
        widths = {len(r) for r in rows}
        if len(widths) != 1:
            raise PlanError("VALUES rows have different numbers of columns")

        types = [common_supertype([r[i].type for r in rows], f"VALUES column {i + 1}")
                 for i in range(widths.pop())]
        rows = tuple(tuple(v if v.type == t else cast_expr(v, t) for v, t in zip(r, types))
                     for r in rows)
        alias = node.args.get("alias")
        names = [c.name for c in alias.columns] if alias is not None and alias.columns else []
        columns = tuple(Column(next_id(), names[i] if i < len(names) else f"col{i}", t)
                        for i, t in enumerate(types))
        return lp.Values(columns, rows)

    # -- expressions ----------------------------------------------------------
    def _struct_field(self, node: exp.Column, scope: Scope) -> Expr | None:
        """``s.a`` / ``t.s.a`` / ``s.a.b`` where no table is named ``s``: field ``a`` of the
        struct column ``s`` (of table ``t``), as DuckDB resolves a dotted name a table
        qualifier does not explain. None when no such column or field exists."""
        parts = [p.name for p in node.parts]
        for start in (1, 2):  # column `parts[0]`, or column `parts[1]` of table `parts[0]`
            if len(parts) <= start:
                continue
            qualifier = parts[0] if start == 2 else None
            base = scope.resolve(parts[start - 1], qualifier, node)
            if base is None:
                continue
            value: Expr = base
            for name in parts[start:]:
                if not pa.types.is_struct(value.type) or \
                        not any(f.name.lower() == name.lower() for f in value.type):
                    break
                value = resolve_function("struct_extract",
                                         [value, Literal(name, pa.string())], self.options)
            else:
                return value
        return None

    def bind_expr(self, node: exp.Expression, scope: Scope, collector=None) -> Expr:
        """Bind a scalar expression; aggregates/windows only through a collector."""

        def bind(child: exp.Expression) -> Expr:
            return self.bind_expr(child, scope, collector)

        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise PlanError(f"{node.sql()} is only allowed in the SELECT list")
            column = scope.resolve(node.name, node.table or None, node)
            aliases = getattr(collector, "aliases", None)
            if column is None and not node.table and aliases and node.name.lower() in aliases:
                return aliases[node.name.lower()]  # HAVING / QUALIFY may name SELECT aliases
            if column is None and node.table:
                column = self._struct_field(node, scope)
            if column is None:
                qualified = f"{node.table}.{node.name}" if node.table else node.name
                raise PlanError(f"column {qualified!r} does not exist."
                                + did_you_mean(qualified, scope.candidates()) + _where(node))
            return column
        if isinstance(node, exp.Paren):
            return bind(node.this)
        if isinstance(node, exp.Placeholder) and collector is not False and node.name:
            return self._parameter(node)
        if isinstance(node, exp.Star):
            raise PlanError("* is only allowed in the SELECT list or in count(*)")
        if isinstance(node, (exp.Subquery, exp.Select, exp.SetOperation)) \
                and not isinstance(node, exp.Values):
            return self._subquery(node, scope, "scalar")
        if isinstance(node, tuple(_QUANTIFIED)) and isinstance(node.expression,
                                                                (exp.Any, exp.All)):
            return self._quantified(node, scope, collector)
        if isinstance(node, exp.Exists):
            return self._subquery(node.this, scope, "exists")
        if isinstance(node, exp.In) and node.args.get("query") is not None:
            needle = bind(node.this)
            return self._subquery(node.args["query"], scope, "in", needle=needle)
        if isinstance(node, exp.Not) and isinstance(node.this, exp.Exists):
            return self._subquery(node.this.this, scope, "exists", negated=True)
        if isinstance(node, exp.Not) and isinstance(node.this, exp.In) and \
                node.this.args.get("query") is not None:
            needle = bind(node.this.this)
            return self._subquery(node.this.args["query"], scope, "in", needle=needle,
                                  negated=True)
        if isinstance(node, exp.Grouping):
            if not isinstance(collector, _Collector):
                raise PlanError(f"GROUPING() is not allowed here: {node.sql()}" + _where(node))
            return collector.grouping(node)
        if self._is_window(node) or self._aggregate_name(node) is not None:
            if collector is None:
                what = "window functions" if self._is_window(node) else "aggregate functions"
                raise PlanError(f"{what} are not allowed here: {node.sql()}" + _where(node))
            return collector.placeholder(node)
        return bind_scalar_node(node, bind, self.options)

    def _quantified(self, node: exp.Expression, scope: Scope, collector) -> Expr:
        """``x op ANY (S)`` / ``x op ALL (S)``, with SQL's three-valued answer.

        ``x op ALL S`` is ``NOT (x op' ANY S)`` for the complement op'; ``x = ANY S`` is
        ``x IN S``. Otherwise ANY is decided by S's extreme and its row counts, each a scalar
        subquery over S's rows (decorrelated like any other)::

            CASE WHEN count(*) = 0 THEN FALSE          -- no row: FALSE
                 WHEN x op min(S) / max(S) THEN TRUE   -- the extreme satisfies it
                 WHEN x IS NULL OR count(*) > count(S) THEN NULL   -- a NULL could have
                 ELSE FALSE END
        """
        op = _QUANTIFIED[type(node)]
        quantifier = node.expression
        if isinstance(quantifier, exp.All):
            negated = _COMPLEMENT[op]
            return self._op("not", [self._any(negated, node.this, quantifier.this,
                                                      scope, collector)])
        return self._any(op, node.this, quantifier.this, scope, collector)

    def _any(self, op: str, needle_node, query, scope: Scope, collector) -> Expr:
        needle = self.bind_expr(needle_node, scope, collector)
        if op == "eq":
            return self._subquery(query, scope, "in", needle=needle)
        select = query.this if isinstance(query, exp.Subquery) else query

        def over(aggregate: str, star: bool = False) -> Expr:
            """A scalar subquery computing ``aggregate`` over S's one column."""
            simple = isinstance(select, exp.Select) and len(select.expressions) == 1 and not any(
                select.args.get(k) for k in ("group", "having", "distinct", "limit", "order",
                                             "qualify", "windows")) and not any(
                isinstance(e, (exp.AggFunc, exp.Window)) for e in select.expressions[0].walk())
            if simple:
                value = select.expressions[0]
                value = value.this if isinstance(value, exp.Alias) else value
                rows = select.copy()
            else:  # S as a derived table (its correlation, if any, is not visible there)
                value = exp.column("__value", "__any")
                rows = exp.select("*").from_(exp.Subquery(
                    this=select.copy(), alias=exp.TableAlias(
                        this=exp.to_identifier("__any"),
                        columns=[exp.to_identifier("__value")])))
            argument = exp.Star() if star else value.copy()
            call = {"count": exp.Count, "min": exp.Min, "max": exp.Max}[aggregate](
                this=argument)
            rows.set("expressions", [call])
            return self._subquery(rows, scope, "scalar")

        rows, values = over("count", star=True), over("count")
        if op in ("gt", "gte"):
            hit = self._op(op, [needle, over("min")])
        elif op in ("lt", "lte"):
            hit = self._op(op, [needle, over("max")])
        else:  # neq: some value differs from x when the smallest or the largest does
            hit = self._op("or", [self._op("neq", [needle, over("min")]),
                                          self._op("neq", [needle, over("max")])])
        zero = Literal(0, pa.int64())
        empty = self._op("eq", [rows, zero])
        unknown = self._op("or", [self._op("is_null", [needle]),
                                          self._op("gt", [rows, values])])
        return bind_case([empty, hit, unknown],
                         [Literal(False, pa.bool_()), Literal(True, pa.bool_()),
                          Literal(None, pa.bool_())], Literal(False, pa.bool_()))

    def _op(self, name: str, args: list[Expr]) -> Expr:
        return resolve_operator(name, args, self.options)

    def _parameter(self, node: exp.Placeholder) -> Literal:
        """``:name`` as a typed literal of its bound value (never pasted into SQL text)."""
        name = node.name
        if name not in self.params:
            known = ", ".join(sorted(self.params)) or "none were given"
            raise PlanError(f"parameter :{name} has no value (parameters: {known})."
                            + did_you_mean(name, self.params) + _where(node))
        value = self.params[name]
        if type(value) is int:  # typed like the same number written as a literal (DuckDB too)
            literal_type = integer_literal_type(value)
            return Literal(float(value) if pa.types.is_floating(literal_type) else value,
                           literal_type)
        try:
            scalar = value if isinstance(value, pa.Scalar) else pa.scalar(value)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
            raise PlanError(f"parameter :{name} has a value of type {type(value).__name__} "
                            f"that SQL cannot use: {e}") from None
        if pa.types.is_large_string(scalar.type) or pa.types.is_string_view(scalar.type):
            scalar = scalar.cast(pa.string())
        return Literal(scalar.as_py(), scalar.type)

    def _subquery(self, node, scope: Scope, kind: str, needle: Expr | None = None,
                  negated: bool = False) -> Expr:
        if isinstance(node, exp.Subquery) and not node.args.get("alias"):
            node = node.this if not (node.args.get("order") or node.args.get("limit")) else node
        # generated once: sqlglot copies the whole tree to print it (~0.1-0.3 ms a subquery)
        text = node.sql()
        key = (id(scope), text)
        if kind == "scalar" and key in self._scalar_subqueries:
            return self._scalar_subqueries[key][1]
        key = (id(scope), text, kind, needle, negated)
        if kind != "scalar" and self._select_subqueries.get("reuse") and \
                key in self._select_subqueries:
            return self._select_subqueries[key][1]
        plan = self.bind_query(node, scope)
        if kind == "scalar":
            if len(plan.columns) != 1:
                raise PlanError(f"a scalar subquery must return one column, this one returns "
                                f"{len(plan.columns)}")
            bound = SubqueryExpr("scalar", plan, plan.columns[0].type)
            self._scalar_subqueries[key[:2]] = (scope, bound)
            return bound
        if kind == "in":
            if len(plan.columns) != 1:
                raise PlanError("the subquery of IN must return one column")

            target = common_supertype([needle.type, plan.columns[0].type], "IN (subquery)")
            if needle.type != target:
                needle = cast_expr(needle, target)
            if plan.columns[0].type != target:
                plan = self._cast_columns(plan, [target], cast_expr)
            bound = SubqueryExpr("in", plan, pa.bool_(), negated, needle=needle)
        else:
            bound = SubqueryExpr("exists", plan, pa.bool_(), negated)
        if self._select_subqueries.get("record"):
            self._select_subqueries[key] = (scope, bound)
        return bound

    def constant_of_subqueries(self, expr: Expr, what: str) -> Expr:
        """``expr`` folded after its uncorrelated scalar subqueries are run (through
        ``run_plan``) and replaced by their values; ``expr`` itself when it has none, or
        when there is nothing to run them with.

        For the places SQL needs a value before the query runs (a frame offset): the
        subquery runs once, while the query is planned.
        """
        subqueries = [e for e in walk(expr) if isinstance(e, SubqueryExpr)]
        if not subqueries or self.run_plan is None or \
                any(e.kind != "scalar" for e in subqueries):
            return expr
        values: dict[int, Literal] = {}
        for sub in subqueries:
            result = self.run_plan(sub.plan)
            if result.num_rows > 1:
                raise ExecutionError(f"More than one row returned by a subquery used as "
                                     f"{what}: a scalar subquery must return at most one row "
                                     "(add LIMIT 1 or an aggregate)")
            value = result.column(0)[0].as_py() if result.num_rows else None
            values[id(sub)] = Literal(value, sub.type)
        return fold(_transform_top_down(expr, lambda e: values.get(id(e), e)))

    def _typed_call(self, func: str, args: list[Expr]) -> Expr:

        symbols = {"eq": exp.EQ, "and": exp.And}
        if func in symbols:
            node = symbols[func](this=exp.Placeholder(this="a"),
                                 expression=exp.Placeholder(this="b"))
        else:
            node = exp.Not(this=exp.Placeholder(this="a"))
        values = {"a": args[0], "b": args[1] if len(args) > 1 else None}
        return bind_scalar_node(node, lambda n: values[n.name], self.options)

    def _boolean(self, expr: Expr, clause: str) -> Expr:
        if expr.type != pa.bool_() and isinstance(fold(expr), Literal) and \
                fold(expr).value is None:  # a NULL of any type (COALESCE(NULL, NULL)): unknown
            return Literal(None, pa.bool_())
        if expr.type != pa.bool_() and not pa.types.is_null(expr.type):
            raise PlanError(f"{clause} needs a BOOLEAN condition, got {expr.type}: {expr}")
        if pa.types.is_null(expr.type):  # WHERE NULL: a typed false-ish condition, no rows
            return cast_expr(expr, pa.bool_())
        return expr

    def _no_aggregates(self, expr: Expr, clause: str) -> None:
        for e in walk(expr):
            if isinstance(e, (AggregateCall, WindowCall)):
                raise PlanError(f"aggregate and window functions are not allowed in {clause}")

    def _is_window(self, node) -> bool:
        return isinstance(node, exp.Window)

    def _aggregate_name(self, node) -> str | None:
        if isinstance(node, exp.Filter):
            return self._aggregate_name(node.this)
        if isinstance(node, (exp.IgnoreNulls, exp.RespectNulls)):  # any_value(x) arrives so
            return self._aggregate_name(node.this)
        for cls, name in _AGGREGATE_NODES.items():
            if type(node) is cls:
                return name
        if isinstance(node, exp.Anonymous):
            return _AGGREGATE_NAMES.get(node.name.lower())
        return None


# ----------------------------------------------------------------------------- collector

class _Collector:
    """Binds expressions of one SELECT, replacing aggregates and windows by placeholders."""

    def __init__(self, binder: Binder, scope: Scope, named_windows: dict):
        self.binder, self.scope, self.named_windows = binder, scope, named_windows
        self.aggregates: list[AggregateCall] = []
        self.aggregate_columns: list[Column] = []
        self.windows: list[WindowCall] = []
        self.window_columns: list[Column] = []
        self.groupings: list[tuple[tuple[Expr, ...], Column]] = []  # GROUPING(args)
        self.aliases: dict[str, Expr] = {}

    def bind(self, node: exp.Expression) -> Expr:
        return self.binder.bind_expr(node, self.scope, self)

    def grouping(self, node: exp.Grouping) -> Column:
        """GROUPING(a, ...): a placeholder the grouping-sets aggregate fills per set."""
        args = tuple(self.binder.bind_expr(a, self.scope, None) for a in node.expressions)
        for existing, column in self.groupings:
            if existing == args:
                return column
        column = Column(next_id(), _display_name(node), pa.int64())
        self.groupings.append((args, column))
        return column

    def contains_placeholder(self, expr: Expr) -> bool:
        ids = {c.id for c in self.aggregate_columns + self.window_columns +
               [c for _, c in self.groupings]}
        return any(isinstance(e, Column) and e.id in ids for e in walk(expr))

    def placeholder(self, node: exp.Expression) -> Column:
        if isinstance(node, exp.Window):
            if isinstance(node.this, exp.Expression) and node.this.find(exp.Order):
                raise NotSupportedError("ORDER BY inside the arguments of a window function "
                                        "is not supported yet")
            call = self._window(node)
            for existing, column in zip(self.windows, self.window_columns):
                if existing == call:
                    return column
            column = Column(next_id(), _display_name(node), call.type)
            self.windows.append(call)
            self.window_columns.append(column)
            return column
        call = self._aggregate(node)
        for existing, column in zip(self.aggregates, self.aggregate_columns):
            if existing == call:
                return column
        column = Column(next_id(), _display_name(node), call.type)
        self.aggregates.append(call)
        self.aggregate_columns.append(column)
        return column

    def _inner(self, node) -> Expr:
        """Bind an aggregate's argument: no nested aggregates or windows allowed."""
        bound = self.binder.bind_expr(node, self.scope, None)
        return bound

    def _aggregate(self, node, bind_argument=None) -> AggregateCall:
        """The call of aggregate ``node``. Its arguments bind through ``bind_argument``:
        ``_inner`` for a plain aggregate (nothing nested), ``_post`` for an aggregate under
        OVER, which runs after grouping and so may read aggregates (SUM(SUM(x)) OVER ())."""
        windowed = bind_argument is not None
        bind_argument = bind_argument or self._inner
        filter_expr = None
        if isinstance(node, exp.Filter):
            filter_expr = self.binder._boolean(bind_argument(node.expression.this), "FILTER")
            node = node.this
        ignore_nulls = isinstance(node, exp.IgnoreNulls)
        if isinstance(node, (exp.IgnoreNulls, exp.RespectNulls)):
            node = node.this
        name = self.binder._aggregate_name(node)
        if name == "first" and ignore_nulls:
            name = "any_value"  # first(x IGNORE NULLS): the first non-NULL value
        distinct = False
        options: list[tuple[str, Any]] = []
        arg_nodes: list[exp.Expression] = []
        this = node.this if "this" in node.args else None
        order_nodes: list[exp.Ordered] = []
        if isinstance(this, exp.Order):  # string_agg(s, ',' ORDER BY s)
            order_nodes, this = list(this.expressions), this.this
        if isinstance(this, exp.Distinct):
            distinct = True
            arg_nodes = list(this.expressions)
        elif isinstance(node, exp.Anonymous):
            arg_nodes = list(node.expressions)
            if arg_nodes and isinstance(arg_nodes[0], exp.Distinct):
                distinct = True
                arg_nodes = list(arg_nodes[0].expressions) + arg_nodes[1:]
        elif this is not None:
            arg_nodes = [this]
        if name in BIVARIATE and not isinstance(node, exp.Anonymous):
            arg_nodes = arg_nodes + [node.args["expression"]] \
                if node.args.get("expression") is not None else arg_nodes
        if isinstance(this, exp.Star) or (name == "count" and not arg_nodes):
            name, arg_nodes = "count_star", []
        if name == "string_agg":
            sep = node.args.get("separator")
            if isinstance(node, exp.Anonymous) and len(arg_nodes) > 1:
                sep = arg_nodes[1]
                arg_nodes = arg_nodes[:1]
            options.append(("separator", sep.name if sep is not None else ","))
        if name in ("quantile_cont", "quantile_disc"):
            q = node.args.get("expression")
            if isinstance(node, exp.Anonymous) and len(arg_nodes) > 1:
                q = arg_nodes[1]
                arg_nodes = arg_nodes[:1]
            if q is None or not isinstance(q, exp.Literal):
                raise NotSupportedError(f"{name} needs a constant quantile")
            options.append(("quantile", float(q.this)))
        if name == "median":
            name = "quantile_cont"
            options.append(("quantile", 0.5))
        args = tuple(bind_argument(a) for a in arg_nodes)
        for a in args if not windowed else ():
            if any(isinstance(e, Column) and e.id in {c.id for c in self.aggregate_columns}
                   for e in walk(a)):
                raise PlanError(f"aggregate function calls cannot be nested: {node.sql()}")
        if args and is_null_type(args[0].type) and name not in (
                "count", "count_star", "min", "max", "first", "any_value", "arbitrary"):
            # the NULL type converts to whatever the function takes (as in DuckDB); min(NULL)
            # and the like stay of the NULL type
            fitting = pa.bool_() if name in ("bool_and", "bool_or", "every") else \
                pa.string() if name in ("string_agg", "group_concat", "listagg") else pa.int32()
            args = (cast_expr(args[0], fitting),) + args[1:]
        result_type = aggregate_return_type(name, [a.type for a in args])
        if name in BIVARIATE:
            if distinct:
                raise NotSupportedError(f"{name}(DISTINCT ...) is not supported")
            # DuckDB computes them in DOUBLE
            args = tuple(a if a.type == pa.float64() else cast_expr(a, pa.float64())
                         for a in args)
        order_keys = self._aggregate_order(name, node, order_nodes, args, distinct,
                                           bind_argument)
        if name == "string_agg" and args and args[0].type != pa.string():
            args = (cast_expr(args[0], pa.string()),)
        if order_keys:
            # the ORDER BY keys travel as extra arguments (so projections and pushdown see
            # them); the "order_by" option holds (descending, nulls_first) per key
            args = args + tuple(key for key, _, _ in order_keys)
            options.append(("order_by", tuple((d, n) for _, d, n in order_keys)))
        return AggregateCall(name, args, result_type, distinct, filter_expr, tuple(options))

    def _aggregate_order(self, name, node, order_nodes, args, distinct, bind_argument):
        """The bound ORDER BY keys of an order-sensitive aggregate; [] when order does not
        matter to ``name`` (sum, count, ...: DuckDB accepts and ignores it)."""
        if not order_nodes or name not in ("string_agg", "list", "first", "any_value"):
            return []
        if name != "string_agg":
            raise NotSupportedError(f"ORDER BY inside {name}() is not supported yet")
        keys = []
        for ordered in order_nodes:
            descending = bool(ordered.args.get("desc"))
            keys.append((bind_argument(ordered.this), descending,
                         self.binder._nulls_first(ordered, descending)))
        if distinct and any(key != args[0] for key, _, _ in keys):
            raise PlanError("in a DISTINCT aggregate, ORDER BY expressions must appear in the "
                            f"argument list: {node.sql(dialect='duckdb')}")
        return keys

    def _window(self, node: exp.Window) -> WindowCall:

        spec_node = node
        base_name = node.args.get("alias")
        partition_nodes = list(node.args.get("partition_by") or [])
        order_node = node.args.get("order")
        frame_node = node.args.get("spec")
        seen: set[str] = set()
        # a named window may itself build on another (w AS (base)): inherit along the chain
        while base_name is not None:
            key = base_name.name.lower()
            base = self.named_windows.get(key)
            if base is None:
                raise PlanError(f"window {base_name.name!r} is not defined in the WINDOW clause"
                                + did_you_mean(base_name.name, list(self.named_windows)))
            if key in seen:
                raise PlanError(f"window {base_name.name!r} is defined in terms of itself")
            seen.add(key)
            partition_nodes = partition_nodes or list(base.args.get("partition_by") or [])
            order_node = order_node or base.args.get("order")
            frame_node = frame_node or base.args.get("spec")
            base_name = base.args.get("alias")
        func_node = spec_node.this
        ignore_nulls = False
        if isinstance(func_node, exp.IgnoreNulls):
            # any_value(x) arrives wrapped so: it skips NULLs whatever is written
            ignore_nulls = not isinstance(func_node.this, exp.AnyValue)
            func_node = func_node.this
        elif isinstance(func_node, exp.RespectNulls):
            func_node = func_node.this
        # IGNORE NULLS written inside the call: first_value(x IGNORE NULLS)
        inner = func_node.args.get("this")
        if isinstance(inner, exp.IgnoreNulls):
            ignore_nulls = not isinstance(inner.this, exp.AnyValue)  # any_value(x) FILTER (...)
            func_node = func_node.copy()
            func_node.set("this", func_node.this.this)
        partition_by = tuple(_interval_key(self._post(p)) for p in partition_nodes)
        order_by = ()
        if order_node is not None:
            keys = []
            for ordered in order_node.expressions:
                descending = bool(ordered.args.get("desc"))
                keys.append(SortKey(_interval_key(self._post(ordered.this)), descending,
                                    self.binder._nulls_first(ordered, descending)))
            order_by = tuple(keys)
        frame = self._frame(frame_node, wf, order_by) if frame_node is not None else None
        if frame is not None and frame.unit == "range" and any(
                isinstance(k.expr, Call) and k.expr.func == "interval_order_key"
                for k in order_by):
            frame = _interval_offsets_as_nanos(frame)
        filter_expr = None
        if isinstance(func_node, exp.Filter):
            filter_expr = self._post(func_node.expression.this)
            func_node = func_node.this
        distinct = False
        name = self.binder._aggregate_name(func_node)
        if name is not None:
            call = self._aggregate(func_node, self._post)
            name, args, distinct = call.func, call.args, call.distinct
            if name == "string_agg":
                sep = dict(call.options).get("separator", ",")
                args = args + (Literal(sep, pa.string()),)
            if name == "quantile_cont":
                raise NotSupportedError("median/quantile as window functions are not "
                                        "supported yet")
        else:
            name = _WINDOW_NODES.get(type(func_node))
            if name is None and isinstance(func_node, exp.Anonymous):
                name = func_node.name.lower()
            if name is None and hasattr(func_node, "sql_name"):
                name = func_node.sql_name().lower()  # DENSE_RANK, CUME_DIST, ...
            if name is None:
                name = type(func_node).__name__.lower()
            if name not in _WINDOW_NAMES:
                raise PlanError(f"{name}() is not a window function" +
                                did_you_mean(name, sorted(_WINDOW_NAMES)))
            arg_nodes = [v for k, v in func_node.args.items()
                         if v is not None and k in ("this", "offset", "default", "expression")
                         and isinstance(v, exp.Expression)]
            if isinstance(func_node, exp.Anonymous):
                arg_nodes = list(func_node.expressions)
            args = tuple(self._post(a) for a in arg_nodes)
        if name in ("lag", "lead") and len(args) == 3 and args[2].type != args[0].type:
            if pa.types.is_null(args[0].type):
                # lag(NULL, 1, 0): the untyped NULL takes the default's type (DuckDB fails
                # to cast 0 to NULL at run time, so only on rows; we return the default)
                args = (cast_expr(args[0], args[2].type),) + args[1:]
            else:
                # the default takes the value's type, as in DuckDB (SQL CAST: rounds)
                args = args[:2] + (cast_expr(args[2], args[0].type),)
        result_type = wf.window_return_type(name, [a.type for a in args])
        return WindowCall(name, args, result_type, partition_by, order_by, frame, distinct,
                          filter_expr, ignore_nulls)

    def _post(self, node) -> Expr:
        """Bind an expression evaluated after aggregation (aggregates become placeholders)."""
        return self.binder.bind_expr(node, self.scope, _NoWindowCollector(self))

    def _frame(self, spec: exp.WindowSpec, wf, order_by: tuple[SortKey, ...] = ()):
        unit = (spec.args.get("kind") or "rows").lower()
        key_type = order_by[0].expr.type if len(order_by) == 1 else None

        def bound(value, side):
            side = (side or "").lower()
            if isinstance(value, str) or value is None:
                text = (value or "").upper()
                if text == "UNBOUNDED":
                    return wf.FrameBound(f"unbounded_{side or 'preceding'}")
                if text == "CURRENT ROW":
                    return wf.FrameBound("current_row")

            # an empty scope: a subquery here cannot correlate with the query's rows
            offset = fold(self.binder.bind_expr(value, Scope(), None))
            if not isinstance(offset, Literal):
                # one run per offset text, however many windows share it (a named window)
                known = self.binder.offset_values
                if value.sql() not in known:
                    known[value.sql()] = self.binder.constant_of_subqueries(offset,
                                                                            "frame offset")
                offset = known[value.sql()]
            if not isinstance(offset, Literal):
                raise PlanError(f"frame offset must be a constant: {value.sql()}")
            if unit == "range" and isinstance(offset.value, str) and key_type is not None \
                    and (pa.types.is_floating(key_type) or pa.types.is_integer(key_type)
                         or pa.types.is_decimal(key_type)):
                # a string offset ('inf') takes the numeric ORDER BY key's type, as in DuckDB
                offset = fold(cast_expr(offset, key_type))
            if offset.value is None:
                raise PlanError("frame offset must not be NULL")
            return wf.FrameBound(side or "preceding", offset.value)

        start = bound(spec.args.get("start"), spec.args.get("start_side"))
        end_value = spec.args.get("end")
        end = bound(end_value, spec.args.get("end_side")) if end_value is not None else \
            wf.FrameBound("current_row")
        exclude = spec.args.get("exclude")
        exclude_mode = "no_others"
        if exclude is not None:
            text = (exclude.name if hasattr(exclude, "name") else str(exclude)).upper()
            exclude_mode = {"CURRENT ROW": "current_row", "GROUP": "group", "TIES": "ties",
                            "NO OTHERS": "no_others"}.get(text, text.lower())
        return wf.FrameSpec(unit, start, end, exclude_mode)

    def rewrite_windows(self, rewrite) -> None:
        self.windows = [_rewrite_window(w, rewrite) for w in self.windows]


class _NoWindowCollector(_Collector):
    """Inside a window spec: aggregates allowed (bound in the outer collector), no windows."""

    def __init__(self, outer: _Collector):
        self.outer = outer
        self.binder, self.scope = outer.binder, outer.scope

    def placeholder(self, node):
        if isinstance(node, exp.Window):
            raise PlanError(f"window functions cannot be nested: {node.sql()}")
        return self.outer.placeholder(node)

    def grouping(self, node):
        return self.outer.grouping(node)


def _interval_key(key: Expr) -> Expr:
    """An INTERVAL window key as its normalized value (a month = 30 days, DuckDB's order):
    1 month, 30 days and 720 hours are one partition, and peers in ORDER BY."""
    if pa.types.is_interval(key.type):
        return Call("interval_order_key", (key,), pa.int64())
    return key


def _interval_offsets_as_nanos(frame):
    """RANGE offsets over an INTERVAL key (ordered as ``interval_order_key``'s nanoseconds,
    a month = 30 days) in the same nanoseconds."""
    def convert(bound):
        offset = bound.offset
        if not isinstance(offset, pa.MonthDayNano):
            return bound
        nanos = (offset.months * 30 + offset.days) * 86_400_000_000_000 + offset.nanoseconds
        return replace(bound, offset=nanos)
    return replace(frame, start=convert(frame.start), end=convert(frame.end))


def _rewrite_window(window: WindowCall, rewrite) -> WindowCall:
    return window.with_children(tuple(rewrite(c) for c in window.children()))


def _transform_top_down(expr: Expr, fn) -> Expr:
    replaced = fn(expr)
    if replaced is not expr:
        return replaced
    children = expr.children()
    if not children:
        return expr
    new = tuple(_transform_top_down(c, fn) for c in children)
    if any(a is not b for a, b in zip(new, children)):
        return expr.with_children(new)
    return expr


def _display_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Column):
        return node.name
    text = node.sql(dialect="duckdb")
    return text if len(text) <= 64 else text[:61] + "..."


def _expr_name(expr: Expr) -> str:
    text = str(expr)
    return text if len(text) <= 64 else text[:61] + "..."


def _where(node: exp.Expression | None) -> str:
    """`` (line L, column C)`` of the node's first character; the query adds a caret there."""
    meta = getattr(node, "meta", None) or {}
    line, col = meta.get("line"), meta.get("col")
    if node is not None and line is None and isinstance(node, exp.Column):
        ident = node.this
        meta = getattr(ident, "meta", None) or {}
        line, col = meta.get("line"), meta.get("col")
    if line and col and meta.get("start") is not None and meta.get("end") is not None:
        col = max(1, col - (meta["end"] - meta["start"]))  # sqlglot's col is the last character
    return f" (line {line}, column {col})" if line else ""


__all__ = ["Binder", "Scope"]


_QUANTIFIED = {exp.EQ: "eq", exp.NEQ: "neq", exp.GT: "gt", exp.GTE: "gte", exp.LT: "lt",
               exp.LTE: "lte"}
_COMPLEMENT = {"eq": "neq", "neq": "eq", "gt": "lte", "gte": "lt", "lt": "gte", "lte": "gt"}


def _referenced_columns(expr: Expr):
    """The columns ``expr`` reads, also those a subquery in it correlates with."""
    for e in walk(expr):
        if isinstance(e, Column):
            yield e
        elif isinstance(e, SubqueryExpr):
            yield from _plan_references(e.plan)


def _rename_references(expr: Expr, mapping: dict[int, Column]) -> Expr:
    """``expr`` reading ``mapping[id]`` for each column id in ``mapping``, also where a
    subquery in it correlates with that column."""
    def visit(e: Expr) -> Expr:
        if isinstance(e, Column):
            return mapping.get(e.id, e)
        if isinstance(e, SubqueryExpr):
            needle = _rename_references(e.needle, mapping) if e.needle is not None else None
            return replace(e, plan=_rename_plan(e.plan, mapping), needle=needle)
        return e
    return _transform_top_down(expr, visit)


def _rename_plan(plan: lp.LogicalPlan, mapping: dict[int, Column]) -> lp.LogicalPlan:
    inputs = plan.inputs()
    if inputs:
        plan = plan.with_inputs(tuple(_rename_plan(i, mapping) for i in inputs))
    return map_expressions(plan, lambda e: _rename_references(e, mapping))


def _plan_references(plan: lp.LogicalPlan):
    for e in plan.expressions():
        yield from _referenced_columns(e)
    for child in plan.inputs():
        yield from _plan_references(child)


def _is_comma(join: exp.Join) -> bool:
    """Whether ``join`` is a comma in the FROM list (sqlglot gives an explicit JOIN, even a
    bare one, a ``pivots`` slot; a comma item has none)."""
    return "pivots" not in join.args and not any(
        join.args.get(k) for k in ("side", "kind", "method", "on", "using"))


def _number_copies(plan: lp.LogicalPlan) -> lp.LogicalPlan:
    """``plan`` plus row_number() OVER (PARTITION BY every column): 1..n for n equal rows."""
    copy = WindowCall("row_number", (), pa.int64(), partition_by=plan.columns)
    return lp.Window(plan, (copy,), (Column(next_id(), "__copy", pa.int64()),))


def _first_per_group(plan: lp.LogicalPlan, keys: tuple[Expr, ...],
                     order: tuple[SortKey, ...]) -> lp.LogicalPlan:
    """DISTINCT ON: the first row of each ``keys`` group in ``order`` (any row without one)."""
    rank = Column(next_id(), "__first", pa.int64())
    first = WindowCall("row_number", (), pa.int64(), partition_by=keys, order_by=order)
    plan = lp.Window(plan, (first,), (rank,))
    plan = lp.Filter(plan, Call("eq", (rank, Literal(1, pa.int64())), pa.bool_()))
    return lp.Projection(plan, plan.columns[:-1], plan.columns[:-1])


def _plan_grouping_sets(plan, group_exprs, grouping_sets, collector):
    """GROUP BY ROLLUP / CUBE / GROUPING SETS as one aggregate over a UNION ALL of copies
    of the input, one per grouping set, with the keys outside the set replaced by NULL and
    the set's number as a hidden key (a NULL that was data stays apart from a rolled-up one).
    An empty set is a global aggregate of its own: it yields a row even for empty input.

    Returns the plan and the output column of each group expression.
    """
    def fresh(columns):
        return tuple(Column(next_id(), c.name, c.type) for c in columns)

    # a plain column key keeps its id (as in a plain GROUP BY): correlated subqueries in the
    # SELECT list read it by id and must see the grouped (possibly rolled-up NULL) value
    keys = tuple(e if isinstance(e, Column) else Column(next_id(), _expr_name(e), e.type)
                 for e in group_exprs)
    set_number = Column(next_id(), "__grouping_set", pa.int64())
    marks = tuple(column for _, column in collector.groupings)
    outputs = keys + (set_number,) + marks + tuple(collector.aggregate_columns)

    def constants(number: int, members: list[int]) -> list[Expr]:
        """The set's number and each GROUPING(args): one bit per argument, 1 = not grouped."""
        values = [Literal(number, pa.int64())]
        for args, _ in collector.groupings:
            bits = 0
            for arg in args:
                if arg not in group_exprs:
                    raise PlanError(f"GROUPING() arguments must be GROUP BY expressions: {arg}")
                bits = bits << 1 | (group_exprs.index(arg) not in members)
            values.append(Literal(bits, pa.int64()))
        return values

    def nulled(members: list[int]) -> list[Expr]:
        return [e if i in members else Literal(None, e.type) for i, e in enumerate(group_exprs)]

    inputs = set(plan.columns)
    used = tuple(dict.fromkeys(e for call in collector.aggregates
                               for e in _referenced_columns(call) if e in inputs))
    copies = []
    for number, members in enumerate(grouping_sets):
        if members:
            exprs = nulled(members) + constants(number, members) + list(used)
            columns = fresh(keys + (set_number,) + marks + used)
            copies.append(lp.Projection(plan, tuple(exprs), columns))
    parts = []
    if copies:
        union = lp.Union(tuple(copies), fresh(copies[0].columns))
        n = len(keys) + 1 + len(marks)
        moved = {c.id: m for c, m in zip(used, union.columns[n:])}
        aggregates = tuple(_rename_references(call, moved) for call in collector.aggregates)
        parts.append(lp.Aggregate(union, union.columns[:n], fresh(outputs[:n]), aggregates,
                                  fresh(collector.aggregate_columns)))
    for number, members in enumerate(grouping_sets):
        if not members:
            total = lp.Aggregate(plan, (), (), tuple(collector.aggregates),
                                 fresh(collector.aggregate_columns),
                                 of_grouping_sets=len(grouping_sets) > 1)
            exprs = nulled(members) + constants(number, members) + list(total.columns)
            parts.append(lp.Projection(total, tuple(exprs), fresh(outputs)))
    return lp.Union(tuple(parts), outputs), keys


def _constant_table(names: list[str], rows: list[tuple], types: list[pa.DataType]):
    """A VALUES plan of Python values (statement results such as DESCRIBE and SHOW TABLES)."""
    columns = tuple(Column(next_id(), n, t) for n, t in zip(names, types))
    return lp.Values(columns, tuple(tuple(Literal(v, t) for v, t in zip(row, types))
                                    for row in rows))
