"""Join reordering by estimated cost: the cheapest tree of an inner-join graph.

    a ⋈ b ⋈ c ⋈ d (as written) ──flatten──▶ relations {a, b, c, d} + equalities (the graph)
        ──DP over connected subsets──▶ cheapest tree ──▶ Filter(cross joins, all conjuncts)
        ──push_down_filters (again)──▶ equi-joins in that order

A tree's cost is the sum of its intermediate results' estimated rows (C_out) plus the rows of
every hash table built (the smaller input of each join), so a filtered dimension that
shrinks a fact table is joined first: TPC-H Q21 joins nation (one row after
its filter) to supplier before lineitem, not lineitem to orders. Estimated rows of a set of
relations: the product of their rows divided, for every joined pair, by its keys' domain
(estimate.key_domain: the larger distinct count of the two key columns in their sources).
Up to ``MAX_DP_RELATIONS`` relations every left-deep order of connected subsets is
considered (dynamic programming over subsets in increasing order: a subset's best order is a
connected subset's best order plus one relation joined to it by an edge); beyond, a greedy
order joins the smallest relation with its cheapest neighbour, then the next, ... A graph
that is not connected is left as it is (its cross joins were placed by
eliminate_cross_joins). The written order stays unless the best
order is estimated at least ``MIN_GAIN`` times cheaper.

Equalities imply more edges than are written: ``c_nationkey = s_nationkey`` and
``s_nationkey = n_nationkey`` join customer to nation too (TPC-H Q5), so the filtered
region ⋈ nation can shrink customer before supplier is reached. Equal columns (same type,
no cast) form classes; an implied edge joins two relations of a class, and divides the
estimate only where the class does not already link them (a chain filters once per link).
The tree gets an implied equality where it joins by one, and a join's equality that its
other keys already imply is dropped (a redundant key costs hashing and skews the key domain).

Left-deep, not bushy: each join then builds on a small side and streams the big one, and the
build's keys filter the big scan (dynamic filters); with rough estimates a bushy tree of two
large inputs looked cheap and was not. One exception: a connected subset estimated smaller
than its largest relation (a dimension shrunk by a filtered one) may join the rest whole, as
the smaller (build) side. TPC-H Q7 filters nation twice: left-deep, customer's nation shrinks
customer before orders and lineitem, and supplier's came last, above all of lineitem ⋈
orders; as the pair supplier ⋈ nation (800 of 10,000 suppliers) its keys filter lineitem too.

Only inner joins reorder; outer, semi and anti joins stay where they are and their inputs
are reordered within.
"""

from __future__ import annotations

from plansight.engine.logical import plan as lp
from plansight.engine.logical.estimate import estimate_rows, join_domain
from plansight.engine.logical.expr import Call, Column, Expr, columns_of, conjunction
from plansight.engine.optimizer.eliminate_cross_joins import flatten_inner_joins, is_inner_join

MAX_DP_RELATIONS = 10
#: reorder only when the estimated cost of the written order is at least this many times the
#: best order's: the estimates (independent conjuncts, sampled or range-bounded distinct
#: counts) are rough, and a written order is often a good one
MIN_GAIN = 2.0


def reorder_joins(plan: lp.LogicalPlan) -> lp.LogicalPlan:
    if not is_inner_join(plan):
        inputs = tuple(reorder_joins(c) for c in plan.inputs())
        return plan.with_inputs(inputs) if inputs else plan
    relations: list[lp.LogicalPlan] = []
    conjuncts: list[Expr] = []
    flatten_inner_joins(plan, relations, conjuncts)
    relations = [reorder_joins(r) for r in relations]
    graph = _JoinGraph(relations, conjuncts)
    order = graph.best_tree() if len(relations) >= 3 else None
    if order is None:
        return _rebuild_as_written(plan)
    conjuncts = graph.without_redundant(order, conjuncts + graph.implied_conjuncts(order))
    joined = lp.Filter(graph.build(order), conjunction(conjuncts))
    if [c.id for c in joined.columns] != [c.id for c in plan.columns]:
        columns = tuple(plan.columns)
        return lp.Projection(joined, columns, columns)
    return joined


def _rebuild_as_written(plan: lp.LogicalPlan) -> lp.LogicalPlan:
    return plan.with_inputs(tuple(reorder_joins(c) for c in plan.inputs()))




def _bool():
    import pyarrow as pa

    return pa.bool_()


class _JoinGraph:
    """Relations (bit i = relation i), equi-join edges and the estimates over them."""

    def __init__(self, relations: list[lp.LogicalPlan], conjuncts: list[Expr]):
        self.relations = relations
        self.rows = [max(estimate_rows(r), 1.0) for r in relations]
        self.owner = owner = {c.id: i for i, r in enumerate(relations) for c in r.columns}
        # (i, j) -> the key pairs joining i and j, as (i's key, j's key)
        pairs: dict[tuple[int, int], list[tuple[Expr, Expr]]] = {}
        self.neighbours = [0] * len(relations)
        for conjunct in conjuncts:
            if not (isinstance(conjunct, Call) and conjunct.func == "eq"):
                continue
            a, b = conjunct.args
            sides = [{owner.get(i) for i in columns_of(x)} for x in (a, b)]
            if any(len(s) != 1 or None in s for s in sides):
                continue
            i, j = next(iter(sides[0])), next(iter(sides[1]))
            if i == j:
                continue
            if i > j:
                i, j, a, b = j, i, b, a
            pairs.setdefault((i, j), []).append((a, b))
            self.neighbours[i] |= 1 << j
            self.neighbours[j] |= 1 << i
        self.denominators = {(i, j): join_domain(on, relations[i], relations[j])
                             for (i, j), on in pairs.items()}
        self._implied_edges(pairs)
        self._rows_cache: dict[int, float] = {}

    def _implied_edges(self, pairs: dict[tuple[int, int], list[tuple[Expr, Expr]]]) -> None:
        """Edges that equalities imply by transitivity: ``c_nationkey = s_nationkey`` and
        ``s_nationkey = n_nationkey`` join customer to nation as well (TPC-H Q5), so the
        filtered nation can reduce customer before either meets supplier. Only between
        plain columns of one type, where the implied equality needs no cast."""
        parent: dict[int, int] = {}
        member: dict[int, tuple[int, Column]] = {}  # column id -> (relation, column)

        def find(x: int) -> int:
            while parent.setdefault(x, x) != x:
                x = parent[x]
            return x

        for (i, j), on in pairs.items():
            for a, b in on:
                if isinstance(a, Column) and isinstance(b, Column) and a.type == b.type:
                    member[a.id], member[b.id] = (i, a), (j, b)
                    parent[find(a.id)] = find(b.id)
        classes: dict[int, list[tuple[int, Column]]] = {}
        for column_id, found in member.items():
            classes.setdefault(find(column_id), []).append(found)
        self.class_of = {column_id: find(column_id) for column_id in member}
        # (class, i, j) -> (i's column, j's column, domain); class: its root column id
        self.implied: dict[tuple[int, int, int], tuple[Column, Column, float]] = {}
        self.pair_classes: dict[tuple[int, int], set[int]] = {}
        for root, members in classes.items():
            for i, a in members:
                for j, b in members:
                    if i >= j:
                        continue
                    if (i, j) in pairs:
                        self.pair_classes.setdefault((i, j), set()).add(root)
                    elif (root, i, j) not in self.implied:
                        domain = join_domain([(a, b)], self.relations[i], self.relations[j])
                        self.implied[(root, i, j)] = (a, b, domain)
                        self.neighbours[i] |= 1 << j
                        self.neighbours[j] |= 1 << i

    def implied_conjuncts(self, tree) -> list[Expr]:
        """The implied equalities the tree joins by: one for each join whose new relation
        has no written equality with the relations before it."""
        found: list[Expr] = []
        self._implied_used(tree, found)
        return found

    def without_redundant(self, tree, conjuncts: list[Expr]) -> list[Expr]:
        """``conjuncts`` less the equalities a join's other keys already imply: joining
        supplier to (customer ⋈ nation) on ``s_nationkey = c_nationkey`` needs no
        ``s_nationkey = n_nationkey`` once ``c_nationkey = n_nationkey`` holds below. A
        redundant key costs hashing and, combined with the others, makes the join's key
        domain look far larger than it is."""
        linked: dict[tuple[int, int], int] = {}  # (class, relation) -> linked to

        def find(root: int, x: int) -> int:
            while linked.setdefault((root, x), x) != x:
                x = linked[(root, x)]
            return x

        order = {id(c): n for n, c in enumerate(conjuncts)}
        dropped: set[int] = set()
        for left, right in self._joins(tree):
            crossing = []  # (class, relation, relation, conjunct)
            for conjunct in conjuncts:
                root = self._equality_class(conjunct)
                if root is None:
                    continue
                i, j = sorted(self.owner[x.id] for x in conjunct.args)
                if (left >> i & 1 and right >> j & 1) or (left >> j & 1 and right >> i & 1):
                    crossing.append((root, i, j, conjunct))
            # keep first the keys of the pair of tables joined by the most of them: a
            # composite foreign key to one table's key (lineitem's (l_partkey, l_suppkey) to
            # partsupp, not to part and supplier) is a unique build key and estimates right
            per_pair: dict[tuple[int, int], int] = {}
            for _, i, j, _ in crossing:
                per_pair[(i, j)] = per_pair.get((i, j), 0) + 1
            crossing.sort(key=lambda e: -per_pair[(e[1], e[2])])
            for root, i, j, conjunct in crossing:
                a, b = find(root, i), find(root, j)
                if a == b:
                    dropped.add(order[id(conjunct)])
                else:
                    linked[(root, a)] = b
        return [c for n, c in enumerate(conjuncts) if n not in dropped]

    def _equality_class(self, conjunct: Expr) -> int | None:
        """The class of equal columns ``conjunct`` (a plain ``a = b``) links, or None."""
        if not (isinstance(conjunct, Call) and conjunct.func == "eq"):
            return None
        a, b = conjunct.args
        if not (isinstance(a, Column) and isinstance(b, Column) and a.type == b.type):
            return None
        root = self.class_of.get(a.id)
        if root is None or root != self.class_of.get(b.id) or \
                self.owner.get(a.id) is None or self.owner.get(b.id) is None:
            return None
        return root

    def _joins(self, tree) -> list[tuple[int, int]]:
        """Every join of ``tree`` as (left relations, right relations), bottom-up."""
        if isinstance(tree, int):
            return []
        joins = self._joins(tree[0]) + self._joins(tree[1])
        return joins + [(self._relations(tree[0]), self._relations(tree[1]))]

    def _relations(self, tree) -> int:
        if isinstance(tree, int):
            return 1 << tree
        return self._relations(tree[0]) | self._relations(tree[1])

    def _implied_used(self, tree, found: list[Expr]) -> int:
        if isinstance(tree, int):
            return 1 << tree
        left, right = (self._implied_used(t, found) for t in tree)
        if not any((min(i, j), max(i, j)) in self.denominators
                   for i in _bits(left) for j in _bits(right)):
            edges = [(domain, a, b) for (_, i, j), (a, b, domain) in self.implied.items()
                     if (left >> i & 1 and right >> j & 1) or (left >> j & 1 and right >> i & 1)]
            _, a, b = min(edges, key=lambda e: e[0])
            found.append(Call("eq", (a, b), _bool()))
        return left | right

    def set_rows(self, subset: int) -> float:
        """Rows of joining ``subset``: every written equality divides by its domain; an
        implied one only where its two relations are not yet joined through the same class
        of equal columns (a chain c = s = n filters once per link, not once per pair)."""
        cached = self._rows_cache.get(subset)
        if cached is not None:
            return cached
        rows = 1.0
        for i, r in enumerate(self.rows):
            if subset >> i & 1:
                rows *= r
        linked: dict[int, dict[int, int]] = {}  # class -> relation -> its component

        def find(root: int, x: int) -> int:
            component = linked.setdefault(root, {})
            while component.setdefault(x, x) != x:
                x = component[x]
            return x

        for (i, j), ndv in self.denominators.items():
            if subset >> i & 1 and subset >> j & 1:
                rows /= ndv
                for root in self.pair_classes.get((i, j), ()):
                    linked[root][find(root, i)] = find(root, j)
        implied = sorted((domain, root, i, j) for (root, i, j), (_, _, domain)
                         in self.implied.items() if subset >> i & 1 and subset >> j & 1)
        for domain, root, i, j in implied:
            a, b = find(root, i), find(root, j)
            if a != b:
                linked[root][a] = b
                rows /= domain
        self._rows_cache[subset] = rows = max(rows, 1.0)
        return rows

    def _connected(self, subset: int) -> bool:
        start = subset & -subset
        seen, frontier = start, start
        while frontier:
            i = frontier.bit_length() - 1
            frontier &= ~(1 << i)
            new = self.neighbours[i] & subset & ~seen
            seen |= new
            frontier |= new
        return seen == subset

    def best_tree(self):
        """A nested (left, right) tuple of relation indices, or None for a graph that is
        not connected."""
        full = (1 << len(self.relations)) - 1
        if not self._connected(full):
            return None
        if len(self.relations) > MAX_DP_RELATIONS:
            return self._greedy()
        best: dict[int, tuple[float, object]] = {1 << i: (0.0, i)
                                                for i in range(len(self.relations))}
        reducers: list[int] = []  # subsets of 2+ relations fit to be a build side whole
        for subset in range(1, full + 1):
            if subset & (subset - 1) == 0 or not self._connected(subset):
                continue
            choice = None
            for last in _bits(subset):
                rest = subset & ~(1 << last)
                if rest in best and self.neighbours[last] & rest:
                    cost = best[rest][0] + self._step_cost(rest, last)
                    if choice is None or cost < choice[0]:
                        choice = (cost, (best[rest][1], last))
            for build in reducers:
                rest = subset & ~build
                if build & subset != build or rest not in best or \
                        not self._touches(build, rest) or \
                        self.set_rows(build) > self.set_rows(rest):
                    continue
                cost = best[rest][0] + best[build][0] + self.set_rows(subset) + \
                    self.set_rows(build)
                if choice is None or cost < choice[0]:
                    choice = (cost, (best[rest][1], best[build][1]))
            if choice is not None:
                best[subset] = choice
                if self._reduces(subset):
                    reducers.append(subset)
        cost, tree = best[full]
        if cost * MIN_GAIN > self.written_cost():
            return None  # not clearly better: the estimates are too rough to trust less
        return tree

    def _reduces(self, subset: int) -> bool:
        """Whether the joined ``subset`` is estimated smaller than its largest relation: a
        dimension shrunk by a filtered one (TPC-H Q7's supplier ⋈ nation = 'FRANCE' or
        'GERMANY', 800 of 10,000 suppliers). Such a subset may join the rest whole, as a
        build side, so its keys filter the fact table as well (a bushy tree, but only with a
        small, reducing side: two large inputs stay left-deep)."""
        return self.set_rows(subset) < max(self.rows[i] for i in _bits(subset))

    def _touches(self, a: int, b: int) -> bool:
        return any(self.neighbours[i] & b for i in _bits(a))

    def _step_cost(self, joined: int, last: int) -> float:
        return self.set_rows(joined | 1 << last) + min(self.set_rows(joined), self.rows[last])

    def written_cost(self) -> float:
        """The cost of joining the relations left-deep in the order the query wrote them."""
        joined, cost = 1, 0.0
        for last in range(1, len(self.relations)):
            cost += self._step_cost(joined, last)
            joined |= 1 << last
        return cost

    def _greedy(self):
        """Left-deep: the smallest relation, then each time the neighbour that keeps the
        intermediate result smallest."""
        first = min(range(len(self.rows)), key=lambda i: self.rows[i])
        tree, joined = first, 1 << first
        while joined != (1 << len(self.rows)) - 1:
            candidates = [i for i in range(len(self.rows))
                          if not joined >> i & 1 and self.neighbours[i] & joined]
            nxt = min(candidates, key=lambda i: self.set_rows(joined | 1 << i))
            tree, joined = (tree, nxt), joined | 1 << nxt
        return tree

    def build(self, tree) -> lp.LogicalPlan:
        """Cross joins in the tree's shape, the larger estimated side on the left (the probe
        side when the physical planner builds on the smaller)."""
        return self._build(tree)[0]

    def _build(self, tree) -> tuple[lp.LogicalPlan, int]:
        if isinstance(tree, int):
            return self.relations[tree], 1 << tree
        (left, left_set), (right, right_set) = (self._build(t) for t in tree)
        if self.set_rows(left_set) < self.set_rows(right_set):
            left, right = right, left
        return lp.Join(left, right, "cross"), left_set | right_set


def _bits(subset: int):
    while subset:
        low = subset & -subset
        yield low.bit_length() - 1
        subset &= ~low
