"""The ``Planner``: bound statements -> plan trees (PostgreSQL's planner.c and
createplan.c, small), and the part of a SELECT above its FROM list.

``Planner(catalog, settings, smgr).plan(bound)`` makes a ``Plan``: INSERT over its VALUES
or SELECT; UPDATE / DELETE over the cheapest scan of their table that returns row ids;
SELECT as below.  The class is assembled from the modules along PostgreSQL's seams:
``scan.ScanPaths`` (base relations, access paths), ``joins.JoinPaths`` (the FROM list),
``parallel.ParallelPaths`` (the parallel aggregate); costs come from ``costs``.

**Above the joins**: Aggregate / HashAggregate (groups: the product of the GROUP BY
columns' n_distinct, at most the input rows; a plain aggregate of one table may go
parallel when that is cheaper), then, without DISTINCT, Sort and Limit over the rows
before projection (LockRows for a row-locking clause under the Limit, as PostgreSQL's, so
LIMIT counts locked rows and SKIP LOCKED moves on to the next one); with
DISTINCT, projection, HashAggregate over the output, Sort, Limit.  A Limit scales its
input's cost to the fraction of rows it reads (startup + fraction x run cost).  For one
table, an index scan that returns rows in the ORDER BY's order (``_index_order_paths``)
competes with Sort: with a LIMIT its startup cost is what counts.  SELECT without FROM is
a Result, under a One-Time Filter for its WHERE.

Every setting read here and in the sibling modules is read from the settings object as
planning goes, and is marked ``plan=True`` in ``minidb.config`` (the plan cache's key).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

import minidb.errors as errors
from minidb.types import set_timezone
from minidb.exec import expr as X
from minidb.exec.agg import AggNode
from minidb.exec.modify import DeleteNode, InsertNode, LockRowsNode, UpdateNode, ValuesNode
from minidb.exec.nodes import (DistinctNode, LimitNode, OneTimeFilterNode, ProjectNode,
                               ResultNode, SortNode)
from minidb.sql import binder as B
from minidb.sql.planner.costs import clamp, ops, type_width
from minidb.sql.planner.joins import JoinPaths
from minidb.sql.planner.parallel import ParallelPaths
from minidb.sql.planner.scan import ScanPaths
from minidb.sql.stats import DEFAULT_NUM_DISTINCT, Estimator

__all__ = ["Planner", "Plan"]


@dataclass
class Plan:
    """A planned statement, as the plan cache keeps it."""
    kind: str                         # select insert update delete
    root: object                      # PlanNode
    names: list = field(default_factory=list)      # output column names
    types: list = field(default_factory=list)
    param_types: dict = field(default_factory=dict)
    rel_pages: dict = field(default_factory=dict)  # relfilenode -> pages when planned
    qualify: bool = False             # EXPLAIN prints qualified column names
    tables: list = field(default_factory=list)


def _returning(plan: Plan, returning: list) -> Plan:
    """INSERT / UPDATE / DELETE ... RETURNING: the node returns the rows (over the target
    row: ``minidb.exec.modify``) and the plan has their names and types."""
    if returning:
        plan.root.returning = list(returning)
        plan.names = [n for n, _ in returning]
        plan.types = [e.type for _, e in returning]
    return plan


def _const_int(e):
    if isinstance(e, X.Const) and e.value is not None:
        return float(e.value)
    return None


class Planner(ScanPaths, JoinPaths, ParallelPaths):
    """Plans one statement (a fresh planner per statement)."""

    def __init__(self, catalog, settings, smgr):
        self.catalog = catalog
        self.settings = settings
        self.smgr = smgr
        self.trace = settings.trace_planner
        # the plan's folded constants (timestamptz shown as text, read without an offset)
        # are the session's TimeZone's: the expressions compiled from it read it too
        set_timezone(settings.timezone)
        self.rel_pages: dict = {}     # relfilenode -> pages, for the plan cache's size check
        self._relstats: dict = {}     # range-table index -> RelStats
        self._single = None           # (BaseRel, Estimator, need_tids) of a one-table FROM
        self._entries: dict = {}      # range-table index -> RangeEntry
        self._need: dict = {}         # range-table index -> attnos needed above the scan
        self._comp_rels: dict = {}

    def _subplanner(self) -> "Planner":
        """A planner for a subquery (its own FROM list), sharing the size record."""
        p = Planner(self.catalog, self.settings, self.smgr)
        p.rel_pages = self.rel_pages
        return p

    def _plan_subqueries(self, bound) -> None:
        """Plans every WITH query and every subquery of an expression of the statement
        (each once; the executor reads ``cte.plan`` / ``SubPlan.root``)."""
        for cte in getattr(bound, "ctes", []):
            if cte.bound is not None and cte.plan is None:
                cte.plan, _, _ = self._subplanner().plan_query(cte.bound)
        for sp in getattr(bound, "subplans", []):
            if sp.root is None:
                sp.root, sp.names, sp.types = self._subplanner().plan_query(sp.bound)

    def plan_query(self, b):
        """(root, names, types) of a query: SELECT, a set operation or WITH RECURSIVE's."""
        if isinstance(b, B.BoundSetOp):
            return self.plan_setop(b)
        if isinstance(b, B.BoundRecursive):
            return self.plan_recursive(b)
        return self.plan_select(b)

    def plan_setop(self, b):
        """UNION ALL: Append; UNION: HashAggregate over Append; INTERSECT / EXCEPT:
        HashSetOp over an Append of Subquery Scans (with a flag column)."""
        from minidb.exec.setops import AppendNode, HashSetOpNode
        from minidb.exec.subscan import SubqueryScanNode
        s = self.settings
        kids = []
        for k, side in enumerate((b.left, b.right)):
            root, _, types = self._subplanner().plan_query(side)
            root = self._cast_outputs(root, types, b.types, b.names)
            if b.op != "union":
                ent = B.RangeEntry(-1 - k, f'"*SELECT* {k + 1}"', None,
                                   list(zip(b.names, b.types)), [False] * len(b.types),
                                   "subquery")
                sq = SubqueryScanNode(root, ent, (), title=f'Subquery Scan on "*SELECT* {k + 1}"')
                sq.set_cost(root.startup_cost, root.total_cost + root.rows * s.cpu_tuple_cost,
                            root.rows, root.width)
                root = sq
            kids.append(root)
        keys = [("out", i) for i in range(len(b.types))]
        app = AppendNode(kids, keys, b.types, flag=b.op != "union")
        app.set_cost(min(k.startup_cost for k in kids), sum(k.total_cost for k in kids),
                     sum(k.rows for k in kids), max(k.width for k in kids))
        node = app
        outs = [X.ColRef(k, t, n, "") for k, t, n in zip(keys, b.types, b.names)]
        if b.op == "union" and not b.all:
            d = DistinctNode(app)
            d.group_names = [X.deparse(o) for o in outs]
            groups = max(1.0, app.rows * 0.5)
            d.set_cost(app.total_cost + app.rows * s.cpu_operator_cost * len(keys),
                       app.total_cost + app.rows * s.cpu_operator_cost * len(keys)
                       + groups * s.cpu_tuple_cost, groups, app.width)
            node = d
        elif b.op != "union":
            h = HashSetOpNode(app, b.op, b.all)
            left_rows = kids[0].rows
            h.set_cost(app.total_cost + app.rows * s.cpu_operator_cost * len(keys),
                       app.total_cost + app.rows * s.cpu_operator_cost * len(keys)
                       + left_rows * s.cpu_tuple_cost,
                       max(1.0, left_rows * (0.5 if b.op == "intersect" else 1.0)), app.width)
            node = h
        if b.order_by:
            node = self._sort(node, b.order_by)
        node = self._limit(node, b)
        return node, list(b.names), list(b.types)

    def plan_recursive(self, b):
        from minidb.exec.setops import RecursiveUnionNode
        lroot, _, ltypes = self._subplanner().plan_query(b.left)
        lroot = self._cast_outputs(lroot, ltypes, b.types, b.names)
        rroot, _, rtypes = self._subplanner().plan_query(b.right)
        rroot = self._cast_outputs(rroot, rtypes, b.types, b.names)
        keys = [("out", i) for i in range(len(b.types))]
        node = RecursiveUnionNode(lroot, rroot, b.all, b.cte, keys, b.types)
        rows = lroot.rows + 10 * rroot.rows
        node.set_cost(lroot.startup_cost, lroot.total_cost + 10 * rroot.total_cost, rows,
                      lroot.width)
        return node, list(b.names), list(b.types)

    def _cast_outputs(self, root, types, want, names):
        """``root``'s output columns cast to the set operation's column types."""
        if all(t == w for t, w in zip(types, want)):
            return root
        exprs = []
        for i, (t, w) in enumerate(zip(types, want)):
            c = X.ColRef(root.keys[i], t, names[i], "")
            exprs.append(c if t == w or (X.family(t) == "text" and X.family(w) == "text")
                         else X.Cast(c, w))
        p = ProjectNode(root, exprs, [("out", i) for i in range(len(exprs))], names)
        p.set_cost(root.startup_cost, root.total_cost, root.rows, root.width)
        return p

    def _attach_subplans(self, root, bound) -> None:
        """Numbers the subqueries as EXPLAIN shows them and hangs each under the node that
        evaluates it (CTEs under the top node)."""
        counter = [0]
        done = set()

        def exprs_of(node):
            out = []
            for v in node.__dict__.values():
                stack = [v]
                while stack:
                    x = stack.pop()
                    if isinstance(x, X.Expr):
                        out.append(x)
                    elif isinstance(x, (list, tuple)):
                        stack.extend(x)
            return out

        def shown(node):
            while node.hidden and node.children:
                node = node.children[0]
            return node

        def reset(node):
            node.initplans = []
            node.subplans = []
            for ch in node.children:
                reset(ch)

        def visit(node, is_top):
            if is_top:
                reset(node)
            tgt = shown(node)
            if is_top:
                for cte in getattr(bound, "ctes", []):
                    if cte.plan is not None and id(cte) not in done:
                        done.add(id(cte))
                        reset(cte.plan)
                        tgt.initplans.append((f"CTE {cte.name}", cte.plan))
                        visit(cte.plan, False)
            for e in exprs_of(node):
                for n in X.walk(e):
                    if isinstance(n, X.SubLink) and id(n.sub) not in done and \
                            n.sub.root is not None:
                        done.add(id(n.sub))
                        counter[0] += 1
                        n.sub.number = counter[0]
                        reset(n.sub.root)
                        if not n.outer and n.kind in ("scalar", "exists", "array"):
                            tgt.initplans.append(
                                (f"InitPlan {counter[0]} (returns ${counter[0] - 1})",
                                 n.sub.root))
                        else:
                            tgt.subplans.append((f"SubPlan {counter[0]}", n.sub.root))
                        visit(n.sub.root, False)
            for ch in node.children:
                visit(ch, False)
            cte = getattr(node, "cte", None)
            if cte is not None and getattr(cte, "plan", None) is not None and \
                    id(cte) not in done:
                done.add(id(cte))
                reset(cte.plan)
                shown(root).initplans.append((f"CTE {cte.name}", cte.plan))
                visit(cte.plan, False)
        visit(root, True)

    def _t(self, msg):
        if self.trace:
            print(f"[planner] {msg}", file=sys.stderr)

    # -- statements ------------------------------------------------------------------------------
    def plan(self, bound) -> Plan:
        self._plan_subqueries(bound)
        if isinstance(bound, (B.BoundSelect, B.BoundSetOp)):
            root, names, types = self.plan_query(bound)
            plan = Plan("select", root, names, types, bound.param_types, dict(self.rel_pages),
                        self._qualify(bound), [t.name for t in bound.tables])
        elif isinstance(bound, B.BoundInsert):
            plan = self.plan_insert(bound)
        elif isinstance(bound, B.BoundUpdate):
            plan = self.plan_modify(bound, "update")
        elif isinstance(bound, B.BoundDelete):
            plan = self.plan_modify(bound, "delete")
        else:
            raise errors.InternalError(f"cannot plan {type(bound).__name__}")
        self._attach_subplans(plan.root, bound)
        return plan

    @staticmethod
    def _qualify(bound) -> bool:
        """EXPLAIN qualifies column names when the statement reads more than one
        relation."""
        n = len(getattr(bound, "rtable", []))
        return n > 1 or bool(getattr(bound, "subplans", []))

    def plan_insert(self, b: B.BoundInsert) -> Plan:
        types = [b.entry.columns[a][1] for a in b.attnos]
        if b.rows is not None:
            defaults = [b.defaults.get(a) for a in b.attnos]
            child = ValuesNode(b.rows, types, defaults)
            n = len(b.rows)
            child.set_cost(0, 0.01 * n if n > 1 else 0.01, n,
                           sum(type_width(t) for t in types))
        else:
            self._plan_subqueries(b.select)
            child, _, _ = self.plan_query(b.select)
        node = InsertNode(b.entry, b.attnos, child, b.defaults)
        oc = b.on_conflict
        if oc is not None and oc.inference is not None:    # infer_arbiter_indexes
            from minidb.sql.planner.arbiters import infer_arbiters
            oc.arbiters = infer_arbiters(self.catalog, b.entry, oc.inference)
        node.on_conflict = oc               # minidb.exec.onconflict runs it
        node.set_cost(child.startup_cost,
                      child.total_cost + child.rows * self.settings.cpu_tuple_cost, 0, 0)
        self.rel_pages[b.entry.table.relfilenode] = self._nblocks(b.entry.table.relfilenode)
        return _returning(Plan("insert", node, [], [], b.param_types, dict(self.rel_pages),
                               False, [b.entry.table.name]), b.returning)

    def plan_modify(self, b, kind) -> Plan:
        entry = b.entry
        if b.join is not None:            # UPDATE ... FROM / DELETE ... USING
            for e in b.join.rtable:
                self._entries[e.index] = e
            self._tids_for = {entry.index}
            scan = self._join_tree(b.join)
        else:
            br = self._base_rel(entry, b.quals)
            if kind == "update" or b.returning:
                br.needed = set(range(len(entry.columns)))
            scan = self._best_scan(br, Estimator({entry.index: br.stats}), need_tids=True)
        if kind == "update":
            node = UpdateNode(entry, scan, b.assignments, b.quals)
        else:
            node = DeleteNode(entry, scan, b.quals)
        node.joined = b.join is not None
        node.set_cost(scan.startup_cost,
                      scan.total_cost + scan.rows * self.settings.cpu_tuple_cost, 0, 0)
        return _returning(Plan(kind, node, [], [], b.param_types, dict(self.rel_pages),
                               b.join is not None, [entry.table.name]), b.returning)

    # -- SELECT ----------------------------------------------------------------------------------
    def plan_select(self, b: B.BoundSelect):
        s = self.settings
        for e in b.rtable:
            self._entries[e.index] = e
        if not b.from_items:
            node = ResultNode()
            node.set_cost(0, 0.01, 1, 0)
            for q in b.quals:      # WHERE without FROM: a one-time filter
                node = OneTimeFilterNode(node, q)
        else:
            node = self._join_tree(b)
        if b.grouped:
            node = self._aggregate(b, node)
        if b.windows:
            node = self._window_aggs(b, node)
        if b.srfs:
            from minidb.exec.subscan import ProjectSetNode
            ps = ProjectSetNode(node, b.srfs)
            ps.set_cost(node.startup_cost, node.total_cost + node.rows * 10 * s.cpu_operator_cost,
                        node.rows * 10, node.width)
            node = ps
        names = [n for n, _ in b.targets]
        exprs = [e for _, e in b.targets]
        out_keys = [("out", i) for i in range(len(exprs))]

        def project(child):
            p = ProjectNode(child, exprs, out_keys, names)
            p.set_cost(child.startup_cost, child.total_cost + child.rows * s.cpu_operator_cost
                       * sum(ops(e) for e in exprs), child.rows,
                       sum(self._expr_width(e) for e in exprs))
            return p

        if b.distinct:
            node = self._distinct(b, project(node), exprs)
            return node, names, [e.type for e in exprs]
        if b.distinct_on:
            from minidb.exec.setops import UniqueNode
            keys = list(b.order_by)
            for e in b.distinct_on:
                if all(e != k for k, _, _ in keys[:len(b.distinct_on)]):
                    keys.append((e, False, False))
            lead = [k for k in keys if any(k[0] == e for e in b.distinct_on)]
            rest = [k for k in keys if all(k[0] != e for e in b.distinct_on)]
            srt = self._sort(node, lead + rest)
            u = UniqueNode(srt, [k for k, _, _ in lead])
            groups = min(srt.rows, self._num_groups(list(b.distinct_on), srt.rows))
            u.set_cost(srt.startup_cost, srt.total_cost + srt.rows * s.cpu_operator_cost,
                       groups, srt.width)
            node = self._limit(u, b)
            return project(node), names, [e.type for e in exprs]
        if b.order_by:
            sorted_path = self._limit(self._sort(node, b.order_by), b)
            ordered = self._index_order_paths(b) \
                if not (b.grouped or b.windows or b.srfs) else []
            paths = [sorted_path] + [self._limit(p, b) for p in ordered]
            node = min(paths, key=lambda p: (p.total_cost, p.startup_cost))
            if node is not sorted_path:
                self._t("ORDER BY served by "
                        f"{node.children[0].title() if b.limit or b.offset else node.title()}")
        else:
            node = self._limit(node, b)
        if b.for_update and b.limit is None and b.offset is None:
            node = self._lock_rows(node, b)   # else _limit put it under the Limit
        node = project(node)
        return node, names, [e.type for e in exprs]

    def _window_aggs(self, b, node):
        """A Sort and a WindowAgg per distinct window (PARTITION BY, ORDER BY), stacked."""
        from minidb.exec.window import WindowAggNode
        specs = []
        for k, w in enumerate(b.windows):
            spec = (w.partition, w.order, w.order_desc, w.order_nf)
            for sp in specs:
                if sp[0] == spec:
                    sp[1].append((k, w))
                    break
            else:
                specs.append((spec, [(k, w)]))
        coc = self.settings.cpu_operator_cost
        for (part, order, desc, nf), members in specs:
            keys = [(p, False, False) for p in part] + list(zip(order, desc, nf))
            if keys:
                node = self._sort(node, keys)
            wa = WindowAggNode(node, [w for _, w in members], [("w", k) for k, _ in members])
            wa.set_cost(node.startup_cost, node.total_cost + node.rows * coc * len(members),
                        node.rows, node.width + 8 * len(members))
            node = wa
        return node

    def _aggregate(self, b, node):
        """The aggregate over ``node``: grouped (HashAggregate) or plain, serial or - when
        cheaper - parallel."""
        s = self.settings
        coc, ctc = s.cpu_operator_cost, s.cpu_tuple_cost
        rows_in = node.rows
        if b.group_by:
            groups = self._num_groups(b.group_by, rows_in)
            agg_cost = rows_in * coc * (len(b.group_by) + len(b.aggs))
            startup = node.total_cost + agg_cost
            total = startup + groups * ctc + groups * coc * ops(b.having)
            rows = groups
        else:
            startup = node.total_cost + rows_in * coc * max(1, len(b.aggs))
            total = startup + ctc
            rows = 1
        if b.having is not None:
            rows = clamp(rows * (1 / 3 if b.group_by else 1))
        if b.grouping_sets is not None:
            return self._grouping_sets(b, node)
        agg = self._parallel_agg(b, node)
        if agg is not None and agg.total_cost >= total:
            self._t(f"parallel aggregate cost={agg.total_cost:.2f} >= serial "
                    f"cost={total:.2f}: serial")
            agg = None          # add_path keeps the cheaper plan, as PostgreSQL's
        if agg is None:
            agg = AggNode(node, b.group_by, b.aggs, b.having)
            agg.set_cost(startup, total, rows, sum(type_width(t) for t in agg.types))
        return agg

    def _grouping_sets(self, b, node):
        """GROUPING SETS / ROLLUP / CUBE: one hashed aggregation per set over the input read
        once (MixedAggregate), costed as the sum of the sets' aggregations; never
        parallel."""
        from minidb.exec.groupingsets import GroupingSetsNode
        s = self.settings
        coc, ctc = s.cpu_operator_cost, s.cpu_tuple_cost
        rows_in = node.rows
        total = node.total_cost
        rows = 0.0
        for st in b.grouping_sets:
            keys = [b.group_by[i] for i in st]
            groups = self._num_groups(keys, rows_in) if keys else 1.0
            total += rows_in * coc * (len(keys) + len(b.aggs)) + groups * ctc
            rows += groups
        if b.having is not None:
            rows = clamp(rows / 3)
        agg = GroupingSetsNode(node, b.group_by, b.grouping_sets, b.aggs, b.having)
        agg.set_cost(total, total + rows * coc * ops(b.having), rows,
                     sum(type_width(t) for t in agg.types))
        return agg

    def _distinct(self, b, node, exprs):
        """SELECT DISTINCT over the projection ``node``: HashAggregate over the output
        columns, then Sort and Limit."""
        s = self.settings
        coc = s.cpu_operator_cost
        d = DistinctNode(node)
        d.group_names = [X.deparse(e, len(b.rtable) > 1) for e in exprs]
        groups = min(node.rows, self._num_groups(exprs, node.rows))
        d.set_cost(node.total_cost + node.rows * coc * len(exprs),
                   node.total_cost + node.rows * coc * len(exprs) + groups * s.cpu_tuple_cost,
                   groups, node.width)
        node = d
        if b.order_by:
            keys = [(X.ColRef(("out", i), exprs[i].type, X.deparse(exprs[i]), ""), desc, nf)
                    for i, (_, desc, nf) in zip(b.order_refs, b.order_by)]
            node = self._sort(node, keys)
        return self._limit(node, b)

    def _sort(self, node, keys):
        coc = self.settings.cpu_operator_cost
        n = max(node.rows, 2.0)
        startup = node.total_cost + 2.0 * coc * n * math.log2(n)
        s = SortNode(node, keys)
        s.set_cost(startup, startup + coc * n, node.rows, node.width)
        return s

    def _lock_rows(self, node, b):
        lk = LockRowsNode(b.rtable[0], node, b.quals, b.lock_mode, b.lock_wait)
        lk.set_cost(node.startup_cost, node.total_cost + node.rows * self.settings.cpu_tuple_cost,
                    node.rows, node.width)
        return lk

    def _limit(self, node, b):
        if b.limit is None and b.offset is None:
            return node
        if getattr(b, "for_update", False):
            node = self._lock_rows(node, b)   # LockRows under the Limit, as PostgreSQL
        lim = _const_int(b.limit)
        off = _const_int(b.offset) or 0
        rows = node.rows
        if b.limit is not None and lim is None:
            lim = max(1.0, rows * 0.10)     # a parameter: PostgreSQL assumes 10%
        if b.offset is not None and _const_int(b.offset) is None:
            off = rows * 0.10
        run = node.total_cost - node.startup_cost
        startup = node.startup_cost + (run * min(off, rows) / rows if rows > 0 else 0)
        if lim is None:
            total = node.total_cost
            out_rows = max(rows - off, 0)
        else:
            frac = min(1.0, (off + lim) / rows) if rows > 0 else 1.0
            total = node.startup_cost + run * frac
            out_rows = max(0.0, min(lim, rows - off))
        ln = LimitNode(node, b.limit, b.offset)
        ln.set_cost(startup, total, clamp(out_rows) if out_rows else 0, node.width)
        return ln

    def _num_groups(self, exprs, rows_in) -> float:
        est = 1.0
        for e in exprs:
            nd = float(DEFAULT_NUM_DISTINCT)
            inner = e.args[0] if isinstance(e, X.Func) and e.name == "rtrim_char" else e
            if isinstance(inner, X.ColRef) and isinstance(inner.key[0], int):
                rs = self._relstats.get(inner.key[0])
                if rs is not None:
                    nd, _ = rs.n_distinct(inner.key[1])
            est *= nd
        return clamp(min(est, max(rows_in, 1.0)))

    def _expr_width(self, e) -> float:
        if isinstance(e, X.ColRef) and isinstance(e.key[0], int):
            rs = self._relstats.get(e.key[0])
            if rs is not None:
                return rs.width(e.key[1])
        return type_width(e.type)
