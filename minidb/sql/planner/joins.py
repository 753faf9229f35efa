"""Joins: the base relations of a SELECT, then the join search (PostgreSQL's allpaths.c
make_one_rel, joinrels.c and joinpath.c, small), outer joins planned as units, and
subqueries pulled up into semi and anti joins (prepjointree.c's pull_up_sublinks).

``_join_tree`` sorts the WHERE / ON conjuncts into restriction clauses of one table,
join clauses (several tables) and constant ones (kept on the first table's scan), works
out the columns each scan must return, and sizes each base relation (``scan``).  One
table: its cheapest scan.  Several: dynamic programming over sets of relations, left-deep,
as PostgreSQL's standard join search does for few relations (more than
``JOIN_SEARCH_LIMIT``: greedy, the cheapest next join each time); a set's row estimate is
the product of its members' rows and all selectivities of the clauses inside it, whatever
the order.  Each step (``_join_paths``) considers, both ways round, a nested loop with the
inner side materialized and a hash join (when an equality links the two sides), plus a
nested loop whose inner side is an index scan of the new relation keyed by the outer row;
a cross product only when no clause links the remaining relations.

A member of the search is a table (``BaseRel``), a FROM entry that is not a table
(``CompRel`` around its Subquery / CTE / Function / WorkTable Scan), or a LEFT or FULL join
planned by ``_plan_outer`` (conditions pushed into its preserved side from above and into
its nullable side from its ON clause; Hash Left / Right / Full Join or Nested Loop Left /
Full Join; the WHERE conditions on its nullable side as its Filter).  ``_semi_join`` puts
a pulled-up ``EXISTS`` / ``NOT EXISTS`` / ``IN (SELECT ...)`` on top of the result as a
Hash or Nested Loop Semi / Anti Join, its correlated conditions becoming join conditions.
"""

from __future__ import annotations

import itertools

from minidb.exec import expr as X
from minidb.exec.join import HashJoinNode, HashNode, IndexNestLoopNode, NestLoopNode
from minidb.exec.nodes import MaterializeNode
from minidb.sql.planner.costs import clamp, ops_list, penalize, type_width
from minidb.sql.planner.scan import key_type_ok
from minidb.sql.stats import Estimator

__all__ = ["JoinPaths", "JOIN_SEARCH_LIMIT", "CompRel"]


def _FromRel():
    from minidb.sql.binder import FromRel
    return FromRel


def _replace_key(e, key, by):
    """``e`` with the column ``key`` replaced by the expression ``by``."""
    from minidb.sql.binder import _map_children
    if isinstance(e, X.ColRef) and e.key == key:
        return by
    return _map_children(e, lambda c: _replace_key(c, key, by))

JOIN_SEARCH_LIMIT = 8      # more relations than this: greedy instead of exhaustive


def _side_keys(e) -> set:
    return {k[0] for k in X.column_keys(e) if isinstance(k[0], int)}


def _split_quals(quals, rels, push: bool = True) -> tuple[list, list]:
    """(those of ``quals`` that read only ``rels`` and have no sublink - to go down into
    that side - , the rest); none go down when not ``push``."""
    down, rest = [], []
    for q in quals:
        rs = _side_keys(q)
        if push and rs and rs <= rels and not X.has_sublink(q):
            down.append(q)
        else:
            rest.append(q)
    return down, rest


def _hash_pairs(jq, left_rels, right_rels) -> list:
    """The equality clauses of ``jq`` usable as hash keys, one side on each input:
    (clause, expression over ``left_rels``, expression over ``right_rels``)."""
    pairs = []
    for q in jq:
        if isinstance(q, X.Compare) and q.op == "=" and not X.has_sublink(q):
            lk, rk = _side_keys(q.left), _side_keys(q.right)
            if lk and rk and lk <= left_rels and rk <= right_rels:
                pairs.append((q, q.left, q.right))
            elif lk and rk and rk <= left_rels and lk <= right_rels:
                pairs.append((q, q.right, q.left))
    return pairs


class _DerivedStats:
    """Statistics of a range entry that is not a table (a subquery, a CTE, a function):
    none, PostgreSQL's defaults."""

    def __init__(self, entry, rows):
        self.entry = entry
        self.rows = rows
        self.stats = {}
        self.unique_cols = set()

    def col(self, attno):
        return None

    def n_distinct(self, attno):
        return float(min(200.0, max(self.rows, 1.0))), True

    def width(self, attno):
        return float(type_width(self.entry.columns[attno][1]))


class CompRel:
    """One member of a join search: a base table (its ``BaseRel``), a relation that is not a
    table (subquery, CTE, function: its scan), or an outer join planned as a unit."""

    def __init__(self, index, rels, best, rows, entry=None):
        self.index = index
        self.rels = frozenset(rels)
        self.best = best
        self.rows = rows
        self.tuples = rows
        self.entry = entry
        self.indexes = []
        self.quals = []
        self.needed = set()


def _unwrap_outer(e):
    """A pulled-up subquery's condition: its outer references become plain columns."""
    from minidb.sql.binder import _map_children
    if isinstance(e, X.OuterRef):
        return e.ref
    return _map_children(e, _unwrap_outer)


class JoinPaths:
    """The ``Planner``'s methods for the FROM list: base relations and joins."""

    def _join_tree(self, b):
        self._need = self._needed_columns(b)
        pulled, quals = self._pull_sublinks(b)
        top_tables = len(b.from_items) == 1 and isinstance(b.from_items[0], _FromRel()) \
            and not pulled
        node, rels = self._plan_items(b.from_items, quals, need_tids=b.for_update,
                                      single_ok=top_tables)
        for sl, anti in pulled:
            node, rels = self._semi_join(node, rels, sl, anti)
        return node

    def _needed_columns(self, b) -> dict:
        """Columns each relation must return: those read above the scans (targets,
        grouping, ordering, windows, join conditions, subqueries' outer references)."""
        need: dict = {}
        exprs = [e for _, e in b.targets] + list(b.group_by) + [e for e, _, _ in b.order_by]
        exprs += list(b.aggs) + list(b.windows) + list(b.srfs) + list(b.distinct_on)
        outer_joins = any(not isinstance(it, _FromRel()) for it in b.from_items)
        for q in b.quals:
            if len(_side_keys(q)) != 1 or X.has_sublink(q) or outer_joins:
                exprs.append(q)      # above an outer join, a condition is a Filter there

        def tree(n):
            from minidb.sql.binder import FromJoin
            if isinstance(n, FromJoin):
                exprs.extend(n.quals)
                exprs.extend(n.lateral)     # a LATERAL subquery's parameters
                tree(n.left)
                tree(n.right)
        for it in b.from_items:
            tree(it)
        for e in exprs:
            for k in X.column_keys(e):
                if isinstance(k[0], int):
                    need.setdefault(k[0], set()).add(k[1])
            for n in X.walk(e):
                if isinstance(n, X.SubLink):
                    sub = n.sub.bound
                    for q in getattr(sub, "quals", []):
                        for m in X.walk(q):
                            if isinstance(m, X.OuterRef) and isinstance(m.ref, X.ColRef) \
                                    and isinstance(m.ref.key[0], int):
                                need.setdefault(m.ref.key[0], set()).add(m.ref.key[1])
        if b.for_update:
            e0 = b.rtable[0]
            need[e0.index] = set(range(len(e0.columns)))
        return need

    def _pull_sublinks(self, b):
        """WHERE conjuncts ``EXISTS (...)``, ``NOT EXISTS (...)`` (correlated) and ``x IN
        (SELECT ...)`` that become semi and anti joins (PostgreSQL's
        pull_up_sublinks); the rest stay conditions."""
        local = {e.index for e in b.rtable}
        pulled, rest = [], []
        for q in b.quals:
            anti = isinstance(q, X.Not) and isinstance(q.arg, X.SubLink)
            sl = q.arg if anti else q
            if isinstance(sl, X.SubLink) and self._pullable(sl, local, anti):
                pulled.append((sl, anti))
            else:
                rest.append(q)
        return pulled, rest

    @staticmethod
    def _pullable(sl, local, anti) -> bool:
        from minidb.sql.binder import BoundSelect
        sub = sl.sub.bound
        if sl.kind not in ("exists", "in") or (sl.kind == "in" and (sl.negated or anti)):
            return False
        if sl.kind == "exists" and not sl.outer:
            return False                      # uncorrelated EXISTS: an InitPlan
        if not isinstance(sub, BoundSelect) or sub.grouped or sub.windows or sub.srfs or \
                sub.distinct_on or sub.limit is not None or sub.offset is not None or \
                not sub.from_items or sub.for_update:
            return False
        if not all(isinstance(o, X.ColRef) and o.key[0] in local for o in sl.outer):
            return False
        for q in sub.quals:
            for n in X.walk(q):
                if isinstance(n, X.SubLink):
                    return False
                if isinstance(n, X.OuterRef) and not (isinstance(n.ref, X.ColRef)
                                                      and n.ref.key[0] in local):
                    return False
        if sl.kind == "in":
            t = sub.targets[0][1]
            if any(isinstance(n, (X.SubLink, X.OuterRef)) for n in X.walk(t)):
                return False
        return True

    def _semi_join(self, node, rels, sl, anti):
        """``node`` semi- (anti-) joined with a pulled-up subquery."""
        sub = sl.sub.bound
        for e in sub.rtable:
            self._entries[e.index] = e
        corr, local = [], []
        for q in sub.quals:
            (corr if any(isinstance(n, X.OuterRef) for n in X.walk(q)) else local).append(q)
        jq = [_unwrap_outer(q) for q in corr]
        if sl.kind == "in":
            test = sl.sub.test
            target = sub.targets[0][1]
            right = _replace_key(test.right, ("sub", 0), target)
            jq.append(X.Compare("=", test.left, right))
        for r, cols in self._needed_columns(sub).items():
            self._need.setdefault(r, set()).update(cols)
        for q in jq:
            for k in X.column_keys(q):
                if isinstance(k[0], int):
                    self._need.setdefault(k[0], set()).add(k[1])
        inner, irels = self._plan_items(sub.from_items, local)
        pairs = _hash_pairs(jq, rels, irels)
        est = Estimator(self._relstats)
        sel = est.clauses(jq) if jq else 1.0
        frac = min(1.0, max(inner.rows, 1.0) * sel)
        rows = clamp(node.rows * (1.0 - frac if anti else frac)) if node.rows else 0.0
        jt = "anti" if anti else "semi"
        paths = [self._nestloop_path(node, inner, jq, rows, node.width, jt)]
        if pairs:
            paths.append(self._hash_join_path(node, inner, False, pairs, jq, rows, node.width,
                                              jt))
        best = min(paths, key=lambda p: (p.total_cost, p.startup_cost))
        return best, rels

    # -- the FROM list -------------------------------------------------------------------------
    def _plan_items(self, items, quals, need_tids=False, single_ok=False):
        """The cheapest plan joining FROM ``items`` (``FromRel`` / ``FromJoin``) under the
        conditions ``quals``: (plan, range indexes it covers)."""
        from minidb.sql.binder import FromJoin, FromRel
        leaves, quals = [], list(quals)

        def flatten(n):
            if isinstance(n, FromJoin) and n.kind == "inner":
                flatten(n.left)
                flatten(n.right)
                quals.extend(n.quals)
            else:
                leaves.append(n)
        for it in items:
            flatten(it)
        comp_of: dict = {}
        leaf_rels = []
        for k, lf in enumerate(leaves):
            rs = frozenset([lf.index]) if isinstance(lf, FromRel) else self._tree_rels(lf)
            leaf_rels.append(rs)
            for r in rs:
                comp_of[r] = k
        per = {k: [] for k in range(len(leaves))}
        multi = []
        for q in quals:
            rs = _side_keys(q)
            cs = {comp_of[r] for r in rs if r in comp_of}
            if len(cs) == 1:
                per[next(iter(cs))].append(q)
            elif not cs:
                per[0].append(q)          # a constant condition: on the first relation
            else:
                multi.append((q, frozenset(cs)))
        entries = self._entries
        rels = {}
        for k, lf in enumerate(leaves):
            if isinstance(lf, FromRel):
                e = entries[lf.index]
                if e.kind == "table":
                    br = self._base_rel(e, per[k])
                    br.needed = set(self._need.get(e.index, set()))
                    rels[k] = br
                else:
                    rels[k] = self._derived_rel(e, per[k])
            elif lf.kind in ("lateral", "lateral left"):
                node = self._plan_lateral(lf, per[k])
                rels[k] = CompRel(-1 - k, leaf_rels[k], node, node.rows)
            else:
                node = self._plan_outer(lf, per[k])
                rels[k] = CompRel(-1 - k, leaf_rels[k], node, node.rows)
        est = Estimator(self._relstats)
        for k, br in rels.items():
            if getattr(br, "entry", None) is not None and getattr(br.entry, "kind", "") == "table" \
                    and not isinstance(br, CompRel):
                br.rows = clamp(br.tuples * est.clauses(br.quals)) if br.tuples else 0.0
        covered = frozenset().union(*leaf_rels) if leaf_rels else frozenset()
        if len(rels) == 1:
            br = rels[0]
            if isinstance(br, CompRel):
                return br.best, covered
            if single_ok:
                self._single = (br, est, need_tids)
            return self._best_scan(br, est, need_tids), covered
        self._comp_rels = {k: leaf_rels[k] for k in rels}
        return self._join_search(rels, multi, est), covered

    def _tree_rels(self, n) -> frozenset:
        from minidb.sql.binder import FromJoin
        if isinstance(n, FromJoin):
            return self._tree_rels(n.left) | self._tree_rels(n.right)
        return frozenset([n.index])

    def _plan_outer(self, j, above):
        """A LEFT or FULL join planned as a unit: conditions from above that read only the
        preserved side of a LEFT join go down into it, ON conditions that read only the
        nullable side go down into that side; the rest are the join's."""
        lrels, rrels = self._tree_rels(j.left), self._tree_rels(j.right)
        kind = j.kind
        push_l, keep = _split_quals(above, lrels, kind == "left")
        push_r, jq = _split_quals(j.quals, rrels, kind == "left")
        lp, _ = self._plan_items([j.left], push_l)
        rp, _ = self._plan_items([j.right], push_r)
        est = Estimator(self._relstats)
        inner_rows = lp.rows * rp.rows * (est.clauses(jq) if jq else 1.0)
        rows = max(inner_rows, lp.rows) if kind == "left" else \
            max(inner_rows, lp.rows + rp.rows)
        rows = clamp(rows)
        width = lp.width + rp.width
        pairs = _hash_pairs(jq, lrels, rrels)
        paths = [self._nestloop_path(lp, rp, jq, rows, width, kind)]
        if pairs:
            paths.append(self._hash_join_path(lp, rp, False, pairs, jq, rows, width, kind))
            if kind == "left":
                paths.append(self._hash_join_path(rp, lp, True, pairs, jq, rows, width,
                                                  "right"))
        best = min(paths, key=lambda p: (p.total_cost, p.startup_cost))
        if keep:
            best.filter = list(keep)
            best.rows = clamp(best.rows * est.clauses(keep))
        return best

    def _plan_lateral(self, j, above):
        """A LATERAL subquery (or a join holding one, ``j.right``) joined to the FROM items
        before it (``j.left``): a ``LateralNode`` runs it for each outer row.  Conditions from above that read only
        the left go down into it, ON conditions that read only the subquery into its scan;
        the remaining ON conditions are the join's, the remaining ones from above its
        Filter."""
        from minidb.exec.lateral import LateralNode
        lrels, rrels = self._tree_rels(j.left), self._tree_rels(j.right)
        push_l, keep = _split_quals(above, lrels)
        push_r, jq = _split_quals(j.quals, rrels)
        lp, _ = self._plan_items([j.left], push_l)
        rp, _ = self._plan_items([j.right], push_r)
        est = Estimator(self._relstats)
        rows = lp.rows * rp.rows * (est.clauses(jq) if jq else 1.0)
        if j.kind == "lateral left":
            rows = max(rows, lp.rows)
        node = LateralNode(lp, rp, j.lateral, jq, "left" if j.kind == "lateral left"
                           else "inner", keep)
        run = lp.rows * (rp.total_cost + rp.rows * self.settings.cpu_tuple_cost)
        node.set_cost(lp.startup_cost + rp.startup_cost, lp.total_cost + run,
                      clamp(rows * (est.clauses(keep) if keep else 1.0)),
                      lp.width + rp.width)
        return node

    def _derived_rel(self, e, quals):
        """A FROM entry that is not a table: its scan (Subquery Scan, CTE Scan, Function
        Scan, WorkTable Scan) with the conditions on it as a filter."""
        from minidb.exec.setops import WorkTableScanNode
        from minidb.exec.subscan import CTEScanNode, FunctionScanNode, SubqueryScanNode
        ctc, coc = self.settings.cpu_tuple_cost, self.settings.cpu_operator_cost
        if e.kind == "subquery":
            child, _, _ = self._subplanner().plan_query(e.sub)
            node = SubqueryScanNode(child, e, quals)
            rows, start, total = child.rows, child.startup_cost, child.total_cost
        elif e.kind == "cte":
            node = CTEScanNode(e.sub, e, quals)
            root = e.sub.plan
            rows = root.rows if root is not None else 1000.0
            start, total = 0.0, rows * ctc
        elif e.kind == "worktable":
            node = WorkTableScanNode(e, e.sub, quals)
            rows, start, total = 100.0, 0.0, 100.0 * ctc
        elif e.kind == "virtual":
            from minidb.exec.catscan import VirtualScanNode
            node = VirtualScanNode(e, e.sub, quals)
            rows, start, total = 100.0, 0.0, 100.0 * ctc
        else:
            node = FunctionScanNode(e, e.sub, quals)
            rows = 1000.0
            vals = [a.value for a in e.sub.args if isinstance(a, X.Const)]
            if len(vals) == len(e.sub.args) and all(isinstance(v, (int, float)) for v in vals):
                step = vals[2] if len(vals) > 2 else 1
                rows = max(0.0, float((vals[1] - vals[0]) // step + 1)) if step else 0.0
            start, total = 0.0, rows * coc
        stats = _DerivedStats(e, rows)
        self._relstats[e.index] = stats
        est = Estimator(self._relstats)
        out_rows = clamp(rows * est.clauses(quals)) if (quals and rows) else rows
        node.set_cost(start, total + rows * (ctc + ops_list(quals) * coc), out_rows,
                      sum(type_width(t) for _, t in e.columns))
        return CompRel(e.index, [e.index], node, out_rows, e)

    def _join_search(self, rels, multi, est):
        best: dict = {}
        rows_of: dict = {}

        def set_rows(s):
            r = rows_of.get(s)
            if r is None:
                r = 1.0
                for i in s:
                    r *= rels[i].rows
                inner = [q for q, rs in multi if rs <= s]
                if inner:
                    r *= est.clauses(inner)
                r = clamp(r)
                rows_of[s] = r
            return r

        for i, br in rels.items():
            best[frozenset([i])] = br.best if isinstance(br, CompRel) else \
                self._best_scan(br, est)
        ids = sorted(rels)
        if len(ids) > JOIN_SEARCH_LIMIT:
            return self._greedy(rels, multi, est, best, set_rows)
        for size in range(2, len(ids) + 1):
            for combo in itertools.combinations(ids, size):
                s = frozenset(combo)
                cands = []
                for allow_cross in (False, True):
                    for r in combo:
                        left = s - {r}
                        if left not in best:
                            continue
                        jq = [q for q, rs in multi if rs <= s and not rs <= left
                              and not rs <= frozenset([r])]
                        if not jq and not allow_cross:
                            continue
                        cands += self._join_paths(best[left], left, rels[r], r, jq, est,
                                                  set_rows(s))
                    if cands:
                        break
                if cands:
                    best[s] = min(cands, key=lambda p: (p.total_cost, p.startup_cost))
                    self._t(f"best join of {sorted(s)}: {best[s].title()} "
                            f"cost={best[s].total_cost:.2f} rows={best[s].rows:.0f}")
        return best[frozenset(ids)]

    def _greedy(self, rels, multi, est, best, set_rows):
        done = frozenset([min(rels, key=lambda i: rels[i].rows)])
        cur = best[done]
        while len(done) < len(rels):
            cands = []
            for r in rels:
                if r in done:
                    continue
                s = done | {r}
                jq = [q for q, rs in multi if rs <= s and not rs <= done and not rs <= {r}]
                cands += [(p, s) for p in self._join_paths(cur, done, rels[r], r, jq, est,
                                                           set_rows(s))]
            linked = [x for x in cands if x[0].children and getattr(x[0], "linked", True)]
            p, s = min(linked or cands, key=lambda x: x[0].total_cost)
            cur, done = p, s
        return cur

    # -- one join step -------------------------------------------------------------------------
    def _join_paths(self, left, left_set, rbr, r, jq, est, rows):
        """Paths joining plan ``left`` (relations ``left_set``) with base relation ``rbr``
        (range-table index ``r``) under join clauses ``jq``, giving ``rows`` rows."""
        if rbr.best is None:
            rbr.best = self._best_scan(rbr, est)
        right = rbr.best
        width = left.width + right.width
        left_rels = frozenset().union(*(self._comp_rels[c] for c in left_set))
        pairs = _hash_pairs(jq, left_rels, self._comp_rels[r])
        out = []
        for outer, inner, swap in ((left, right, False), (right, left, True)):
            out.append(self._nestloop_path(outer, inner, jq, rows, width))
            if pairs:
                out.append(self._hash_join_path(outer, inner, swap, pairs, jq, rows, width))
        if not isinstance(rbr, CompRel):
            out += self._index_nestloop_paths(left, rbr, rbr.index, pairs, jq, est, rows, width)
        return out

    def _nestloop_path(self, outer, inner, jq, rows, width, jointype="inner"):
        """Nested loop over ``inner`` materialized: every outer row against every inner."""
        s = self.settings
        coc = s.cpu_operator_cost
        mat = MaterializeNode(inner)
        mat.set_cost(inner.startup_cost, inner.total_cost + 2 * coc * inner.rows,
                     inner.rows, inner.width)
        startup = outer.startup_cost + inner.startup_cost
        total = (outer.total_cost + mat.total_cost
                 + max(outer.rows - 1, 0) * inner.rows * coc
                 + outer.rows * inner.rows * (s.cpu_tuple_cost + ops_list(jq) * coc))
        startup, total = penalize(s.enable_nestloop, startup, total)
        nl = NestLoopNode(outer, mat, jq, jointype)
        nl.set_cost(startup, total, rows, width)
        nl.linked = bool(jq)
        self._t(f"nested loop {outer.title()} x {inner.title()}: cost={total:.2f}")
        return nl

    def _hash_join_path(self, outer, inner, swap, pairs, jq, rows, width, jointype="inner"):
        """Hash join building on ``inner``, keyed by the equalities ``pairs`` (``swap``:
        the plan joined so far is the inner side)."""
        s = self.settings
        coc, ctc = s.cpu_operator_cost, s.cpu_tuple_cost
        okeys = [p[2] if swap else p[1] for p in pairs]
        ikeys = [p[1] if swap else p[2] for p in pairs]
        extra = [q for q in jq if all(q is not p[0] for p in pairs)]
        h = HashNode(inner)
        nk = len(pairs)
        h.set_cost(inner.total_cost, inner.total_cost + inner.rows * (coc * nk + ctc),
                   inner.rows, inner.width)
        startup = outer.startup_cost + h.total_cost
        total = (startup + (outer.total_cost - outer.startup_cost)
                 + outer.rows * coc * nk
                 + rows * (ctc + ops_list(extra) * coc))
        startup, total = penalize(s.enable_hashjoin, startup, total)
        hj = HashJoinNode(outer, h, okeys, ikeys, [p[0] for p in pairs], extra, jointype)
        hj.set_cost(startup, total, rows, width)
        self._t(f"hash join {outer.title()} x {inner.title()}: cost={total:.2f}")
        return hj

    def _index_nestloop_paths(self, left, rbr, r, pairs, jq, est, rows, width) -> list:
        """Nested loops whose inner side is an index scan of ``rbr`` keyed by the outer
        row: one per index whose leading column an equality of ``pairs`` binds."""
        s = self.settings
        out = []
        for idef, ipages in rbr.indexes:
            if getattr(idef, "exprs", None) and idef.exprs[0] is not None:
                continue        # an expression column first: no join key binds it
            first = rbr.entry.attno(idef.columns[0])
            key = None
            for q, lexpr, rexpr in pairs:
                if isinstance(rexpr, X.ColRef) and rexpr.key == (r, first) and \
                        key_type_ok(rbr.entry.columns[first][1], lexpr.type):
                    key = (q, lexpr)
                    break
            if key is None:
                continue
            q, lexpr = key
            rest_join = [x for x in jq if x is not q]
            nd, _ = rbr.stats.n_distinct(first)
            sel = 1.0 / max(nd, 1.0)
            inner = self._index_node(rbr, idef, ipages, est, [], [], [], [q], rbr.quals,
                                     rbr.entry.index in getattr(self, "_tids_for", ()),
                                     loop_count=max(left.rows, 1.0), eq_values=[lexpr],
                                     display_quals=[q], sel_idx=sel)
            inner.rows = clamp(rbr.tuples * sel * (est.clauses(rbr.quals) if rbr.quals else 1))
            startup = left.startup_cost + inner.startup_cost
            total = (left.total_cost + left.rows * inner.total_cost
                     + rows * (s.cpu_tuple_cost + ops_list(rest_join) * s.cpu_operator_cost))
            startup, total = penalize(s.enable_nestloop, startup, total)
            inl = IndexNestLoopNode(left, inner, [lexpr], rest_join)
            inl.set_cost(startup, total, rows, width)
            out.append(inl)
            self._t(f"index nested loop {left.title()} x {inner.title()}: cost={total:.2f}")
        return out
