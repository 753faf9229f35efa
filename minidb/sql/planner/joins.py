"""Joins (inner only): the base relations of a SELECT, then the join search (PostgreSQL's
allpaths.c make_one_rel, joinrels.c and joinpath.c, small).

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
"""

from __future__ import annotations

import itertools

from minidb.exec import expr as X
from minidb.exec.join import HashJoinNode, HashNode, IndexNestLoopNode, NestLoopNode
from minidb.exec.nodes import MaterializeNode
from minidb.sql.planner.costs import clamp, ops_list, penalize
from minidb.sql.planner.scan import key_type_ok
from minidb.sql.stats import Estimator

__all__ = ["JoinPaths", "JOIN_SEARCH_LIMIT"]

JOIN_SEARCH_LIMIT = 8      # more relations than this: greedy instead of exhaustive


def _side_keys(e) -> set:
    return {k[0] for k in X.column_keys(e) if isinstance(k[0], int)}


def _hash_pairs(jq, left_set, r) -> list:
    """The equality clauses of ``jq`` usable as hash keys, one side on each input:
    (clause, expression over ``left_set``, expression over relation ``r``)."""
    pairs = []
    for q in jq:
        if isinstance(q, X.Compare) and q.op == "=":
            lk, rk = _side_keys(q.left), _side_keys(q.right)
            if lk and rk and lk <= left_set and rk == {r}:
                pairs.append((q, q.left, q.right))
            elif lk and rk and rk <= left_set and lk == {r}:
                pairs.append((q, q.right, q.left))
    return pairs


class JoinPaths:
    """The ``Planner``'s methods for the FROM list: base relations and joins."""

    def _join_tree(self, b):
        rels = {}
        single: dict = {e.index: [] for e in b.rtable}
        multi = []
        const_quals = []
        for q in b.quals:
            rs = {k[0] for k in X.column_keys(q) if isinstance(k[0], int)}
            if len(rs) == 1:
                single[next(iter(rs))].append(q)
            elif not rs:
                const_quals.append(q)
            else:
                multi.append((q, frozenset(rs)))
        # columns needed above each scan
        needed: dict = {e.index: set() for e in b.rtable}
        above = [e for _, e in b.targets] + list(b.group_by) + [e for e, _, _ in b.order_by]
        above += [a for a in b.aggs]
        above += [q for q, _ in multi]
        if b.for_update:
            needed[b.rtable[0].index] = set(range(len(b.rtable[0].columns)))
        for e in above:
            for k in X.column_keys(e):
                if isinstance(k[0], int):
                    needed[k[0]].add(k[1])
        for e in b.rtable:
            br = self._base_rel(e, single[e.index] + (const_quals if e.index == 0 else []))
            br.needed = needed[e.index]
            rels[e.index] = br
        self._relstats = {i: r.stats for i, r in rels.items()}
        est = Estimator(self._relstats)
        for br in rels.values():
            br.rows = clamp(br.tuples * est.clauses(br.quals)) if br.tuples else 0.0
        need_tids = b.for_update
        if len(rels) == 1:
            self._single = (next(iter(rels.values())), est, need_tids)
            return self._best_scan(self._single[0], est, need_tids)
        return self._join_search(rels, multi, est)

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
            best[frozenset([i])] = self._best_scan(br, est)
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
        pairs = _hash_pairs(jq, left_set, r)
        out = []
        for outer, inner, swap in ((left, right, False), (right, left, True)):
            out.append(self._nestloop_path(outer, inner, jq, rows, width))
            if pairs:
                out.append(self._hash_join_path(outer, inner, swap, pairs, jq, rows, width))
        out += self._index_nestloop_paths(left, rbr, r, pairs, jq, est, rows, width)
        return out

    def _nestloop_path(self, outer, inner, jq, rows, width):
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
        nl = NestLoopNode(outer, mat, jq)
        nl.set_cost(startup, total, rows, width)
        nl.linked = bool(jq)
        self._t(f"nested loop {outer.title()} x {inner.title()}: cost={total:.2f}")
        return nl

    def _hash_join_path(self, outer, inner, swap, pairs, jq, rows, width):
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
        hj = HashJoinNode(outer, h, okeys, ikeys, [p[0] for p in pairs], extra)
        hj.set_cost(startup, total, rows, width)
        self._t(f"hash join {outer.title()} x {inner.title()}: cost={total:.2f}")
        return hj

    def _index_nestloop_paths(self, left, rbr, r, pairs, jq, est, rows, width) -> list:
        """Nested loops whose inner side is an index scan of ``rbr`` keyed by the outer
        row: one per index whose leading column an equality of ``pairs`` binds."""
        s = self.settings
        out = []
        for idef, ipages in rbr.indexes:
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
                                     False, loop_count=max(left.rows, 1.0), eq_values=[lexpr],
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
