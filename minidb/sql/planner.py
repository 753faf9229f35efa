"""The planner: bound statements -> plan trees, chosen by cost (PostgreSQL's optimizer,
small).

**Base relations.**  For each table of the FROM list: its size now (``stats.rel_size``:
the density ANALYZE or VACUUM measured times the current number of pages; with
``planner_trusts_stale_stats`` the pages and rows of the last measurement, unscaled, as
PostgreSQL 7 planned), its
restriction clauses (WHERE / ON conjuncts that name only this table), and the columns
needed above it.  Access paths, each costed:

* Seq Scan: ``pages x seq_page_cost + tuples x (cpu_tuple_cost + cpu_operator_cost x
  operators in the filter)``;
* Index Scan, for each index whose leading column has a usable clause (``col op value``
  with op in = < <= > >= and a value that names no column): equalities on a prefix of the
  index columns, then ranges on the next one.  Cost as PostgreSQL's ``cost_index`` with
  ``btcostestimate``: descent (log2 of the entries, plus 50 operators per level), index
  pages in proportion to the selectivity at ``random_page_cost`` each, entries at
  ``cpu_index_tuple_cost``; heap pages by the Mackert-Lohman formula (``effective_cache_size``)
  between the uncorrelated cost (every page random) and the correlated one (one random
  then sequential pages), interpolated by the square of the column's correlation.

``enable_seqscan`` / ``enable_indexscan`` off add ``disable_cost`` (1e10) to the path, so
it is chosen only when nothing else is possible, exactly as in PostgreSQL.

**Joins** (inner only): dynamic programming over sets of relations, left-deep, as
PostgreSQL's standard join search does for few relations; a set's row estimate is the
product of its members' rows and all selectivities of the clauses inside it, whatever the
order.  Each step considers a hash join (when an equality links the two sides; the smaller
side builds), a nested loop with the inner side materialized, and a nested loop whose inner
side is an index scan keyed by the outer row; a cross product only when no clause links
the remaining relations.

**Above the joins**: Aggregate / HashAggregate (groups: the product of the GROUP BY
columns' n_distinct, at most the input rows), then, without DISTINCT, Sort and Limit over
the rows before projection (LockRows for FOR UPDATE between Limit and the projection); with
DISTINCT, projection, HashAggregate over the output, Sort, Limit.  A Limit scales its
input's cost to the fraction of rows it reads (startup + fraction x run cost).  For one
table, an index scan that returns rows in the ORDER BY's order (``_index_order_paths``)
competes with Sort: with a LIMIT its startup cost is what counts.

``trace_planner`` prints every path costed and the winner to stderr.
"""

from __future__ import annotations

import itertools
import math
import sys
from dataclasses import dataclass, field

import minidb.errors as errors
from minidb.exec import expr as X
from minidb.exec.agg import AggNode
from minidb.exec.datatypes import family
from minidb.exec.join import HashJoinNode, HashNode, IndexNestLoopNode, NestLoopNode
from minidb.exec.modify import DeleteNode, InsertNode, LockRowsNode, UpdateNode, ValuesNode
from minidb.exec.nodes import (DistinctNode, LimitNode, MaterializeNode, ProjectNode,
                               ResultNode, SortNode)
from minidb.exec.scan import IndexScanNode, SeqScanNode
from minidb.sql import binder as B
from minidb.sql.stats import (DEFAULT_NUM_DISTINCT, Estimator, RelStats, rel_size)

__all__ = ["Planner", "Plan", "DISABLE_COST"]

DISABLE_COST = 1.0e10
_LEAF_FANOUT = 300          # entries per B-tree page, for the height estimate
_JOIN_SEARCH_LIMIT = 8      # more relations than this: greedy instead of exhaustive


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


class _Costs:
    def __init__(self, settings):
        self.spc = settings.seq_page_cost
        self.rpc = settings.random_page_cost
        self.ctc = settings.cpu_tuple_cost
        self.citc = settings.cpu_index_tuple_cost
        self.coc = settings.cpu_operator_cost
        self.ecs = settings.effective_cache_size
        self.seqscan = settings.enable_seqscan
        self.indexscan = settings.enable_indexscan
        self.hashjoin = settings.enable_hashjoin
        self.nestloop = settings.enable_nestloop


def _ops(e) -> int:
    """Operators an expression evaluates (its cost in cpu_operator_cost units)."""
    if e is None:
        return 0
    n = 0
    for node in X.walk(e):
        if isinstance(node, (X.Arith, X.Compare, X.Neg, X.Concat, X.Like, X.Func, X.Cast,
                             X.InList, X.IsNull)):
            n += 1 if not isinstance(node, X.InList) else max(1, len(node.items))
    return n


def _clamp(rows: float) -> float:
    """PostgreSQL's clamp_row_est: at least one row, whole numbers."""
    return 1.0 if rows <= 1.0 else float(round(rows))


def _pseudo_constant(e) -> bool:
    return not X.column_keys(e)


class _BaseRel:
    def __init__(self, entry, pages, tuples, stats: RelStats):
        self.entry = entry
        self.index = entry.index
        self.pages = pages
        self.tuples = tuples
        self.stats = stats
        self.quals: list = []
        self.needed: set = set()        # attnos needed above the scan
        self.rows = tuples
        self.indexes: list = []         # (IndexDef, pages)


class Planner:
    def __init__(self, catalog, settings, smgr):
        self.catalog = catalog
        self.settings = settings
        self.smgr = smgr
        self.c = _Costs(settings)
        self.trace = settings.trace_planner
        self.rel_pages: dict = {}

    def _t(self, msg):
        if self.trace:
            print(f"[planner] {msg}", file=sys.stderr)

    # -- statements ------------------------------------------------------------------------------
    def plan(self, bound) -> Plan:
        if isinstance(bound, B.BoundSelect):
            root, names, types = self.plan_select(bound)
            return Plan("select", root, names, types, bound.param_types, dict(self.rel_pages),
                        len(bound.rtable) > 1, [e.table.name for e in bound.rtable])
        if isinstance(bound, B.BoundInsert):
            return self.plan_insert(bound)
        if isinstance(bound, B.BoundUpdate):
            return self.plan_modify(bound, "update")
        if isinstance(bound, B.BoundDelete):
            return self.plan_modify(bound, "delete")
        raise errors.InternalError(f"cannot plan {type(bound).__name__}")

    def plan_insert(self, b: B.BoundInsert) -> Plan:
        types = [b.entry.columns[a][1] for a in b.attnos]
        if b.rows is not None:
            defaults = [b.defaults.get(a) for a in b.attnos]
            child = ValuesNode(b.rows, types, defaults)
            n = len(b.rows)
            child.set_cost(0, 0.01 * n if n > 1 else 0.01, n,
                           sum(self._type_width(t) for t in types))
        else:
            child, _, _ = self.plan_select(b.select)
        node = InsertNode(b.entry, b.attnos, child, b.defaults)
        node.set_cost(child.startup_cost, child.total_cost + child.rows * self.c.ctc, 0, 0)
        self.rel_pages[b.entry.table.relfilenode] = self._nblocks(b.entry.table.relfilenode)
        return Plan("insert", node, [], [], b.param_types, dict(self.rel_pages), False,
                    [b.entry.table.name])

    def plan_modify(self, b, kind) -> Plan:
        entry = b.entry
        br = self._base_rel(entry, b.quals)
        if kind == "update":
            br.needed = set(range(len(entry.columns)))
        scan = self._best_scan(br, Estimator({entry.index: br.stats}), need_tids=True)
        if kind == "update":
            node = UpdateNode(entry, scan, b.assignments, b.quals)
        else:
            node = DeleteNode(entry, scan, b.quals)
        node.set_cost(scan.startup_cost, scan.total_cost + scan.rows * self.c.ctc, 0, 0)
        return Plan(kind, node, [], [], b.param_types, dict(self.rel_pages), False,
                    [entry.table.name])

    # -- SELECT ----------------------------------------------------------------------------------
    def plan_select(self, b: B.BoundSelect):
        c = self.c
        if not b.rtable:
            node = ResultNode()
            node.set_cost(0, 0.01, 1, 0)
            for q in b.quals:      # WHERE without FROM: a one-time filter
                node = _ConstFilter(node, q)
        else:
            node = self._join_tree(b)
        if b.grouped:
            rows_in = node.rows
            if b.group_by:
                groups = self._num_groups(b.group_by, rows_in, b)
                agg_cost = rows_in * c.coc * (len(b.group_by) + len(b.aggs))
                startup = node.total_cost + agg_cost
                total = startup + groups * c.ctc + groups * c.coc * _ops(b.having)
                rows = groups
            else:
                startup = node.total_cost + rows_in * c.coc * max(1, len(b.aggs))
                total = startup + c.ctc
                rows = 1
            if b.having is not None:
                rows = _clamp(rows * (1 / 3 if b.group_by else 1))
            agg = self._parallel_agg(b, node)
            if agg is not None and agg.total_cost >= total:
                self._t(f"parallel aggregate cost={agg.total_cost:.2f} >= serial "
                        f"cost={total:.2f}: serial")
                agg = None          # add_path keeps the cheaper plan, as PostgreSQL's
            if agg is None:
                agg = AggNode(node, b.group_by, b.aggs, b.having)
                agg.set_cost(startup, total, rows,
                             sum(self._type_width(t) for t in agg.types))
            node = agg
        names = [n for n, _ in b.targets]
        exprs = [e for _, e in b.targets]
        out_keys = [("out", i) for i in range(len(exprs))]

        def project(child):
            p = ProjectNode(child, exprs, out_keys, names)
            p.set_cost(child.startup_cost, child.total_cost + child.rows * c.coc * sum(
                _ops(e) for e in exprs), child.rows,
                sum(self._expr_width(e, b) for e in exprs))
            return p

        if b.distinct:
            node = project(node)
            d = DistinctNode(node)
            d.group_names = [X.deparse(e, len(b.rtable) > 1) for e in exprs]
            groups = min(node.rows, self._num_groups(exprs, node.rows, b))
            d.set_cost(node.total_cost + node.rows * c.coc * len(exprs),
                       node.total_cost + node.rows * c.coc * len(exprs) + groups * c.ctc,
                       groups, node.width)
            node = d
            if b.order_by:
                keys = [(X.ColRef(("out", i), exprs[i].type, X.deparse(exprs[i]), ""), desc, nf)
                        for i, (_, desc, nf) in zip(b.order_refs, b.order_by)]
                node = self._sort(node, keys)
            node = self._limit(node, b)
            return node, names, [e.type for e in exprs]
        if b.order_by:
            sorted_path = self._limit(self._sort(node, b.order_by), b)
            ordered = self._index_order_paths(b) if not b.grouped else []
            paths = [sorted_path] + [self._limit(p, b) for p in ordered]
            node = min(paths, key=lambda p: (p.total_cost, p.startup_cost))
            if node is not sorted_path:
                self._t(f"ORDER BY served by {node.children[0].title() if b.limit or b.offset else node.title()}")
        else:
            node = self._limit(node, b)
        if b.for_update:
            lk = LockRowsNode(b.rtable[0], node, b.quals)
            lk.set_cost(node.startup_cost, node.total_cost + node.rows * c.ctc, node.rows,
                        node.width)
            node = lk
        node = project(node)
        return node, names, [e.type for e in exprs]

    def _parallel_agg(self, b, scan):
        """Finalize Aggregate -> Gather -> Partial Aggregate -> Parallel Seq Scan for a plain
        aggregate of one table (see ``minidb.exec.gather``), or None: the serial plan."""
        s = self.settings
        if (len(b.rtable) != 1 or b.group_by or b.having is not None or b.distinct
                or b.order_by or b.for_update or b.limit is not None or b.offset is not None
                or not b.aggs or type(scan) is not SeqScanNode or scan.need_tids
                or s.max_parallel_workers_per_gather <= 0):
            return None
        entry = scan.entry
        nblocks = self._nblocks(entry.table.relfilenode)
        if nblocks < s.min_parallel_table_scan_size:
            return None
        from minidb.workers import compute_parallel_workers
        nworkers = compute_parallel_workers(nblocks, s)
        if nworkers <= 0:
            return None
        attnos = list(scan.attnos)
        if not all(entry.columns[a][1].fixed for a in attnos):
            return None             # string columns: the scan would hand them over raw
        for q in scan.quals:
            if not any(k[0] == entry.index for k in X.column_keys(q)):
                return None         # a constant condition: keep it simple, run serially
        specs = []
        for a in b.aggs:
            if a.distinct or a.name not in ("count", "sum", "avg", "min", "max"):
                return None
            if a.arg is None:
                if a.name != "count":
                    return None
                specs.append(("count", None))
                continue
            if not (isinstance(a.arg, X.ColRef) and a.arg.key[0] == entry.index
                    and a.arg.key[1] in attnos):
                return None
            if a.name != "count" and family(a.arg.type) != "int":
                return None         # float sums depend on the order; keep them serial
            specs.append((a.name, attnos.index(a.arg.key[1])))
        from minidb.exec.gather import (FinalizeAggNode, GatherNode, ParallelSeqScanNode,
                                        PartialAggNode)
        c = self.c
        divisor = float(nworkers)
        if s.parallel_leader_participation:
            divisor += max(0.0, 1.0 - 0.3 * nworkers)
        ops = sum(_ops(q) for q in scan.quals)
        br = self._single[0]
        pscan = ParallelSeqScanNode(scan)
        pscan.set_cost(0.0, br.pages * c.spc + br.tuples * (c.ctc + ops * c.coc) / divisor,
                       _clamp(scan.rows / divisor), scan.width)
        width = sum(self._type_width(a.type) for a in b.aggs)
        naggs = max(1, len(b.aggs))
        partial = PartialAggNode(pscan, b.aggs)
        pstart = pscan.total_cost + pscan.rows * c.coc * naggs
        partial.set_cost(pstart, pstart + c.ctc, 1, width)
        gather = GatherNode(partial, nworkers)
        gather.set_cost(partial.startup_cost + s.parallel_setup_cost,
                        partial.total_cost + s.parallel_setup_cost
                        + s.parallel_tuple_cost * (nworkers + 1), nworkers + 1, width)
        fin = FinalizeAggNode(gather, b.aggs, specs)
        fstart = gather.total_cost + (nworkers + 1) * c.coc * naggs
        fin.set_cost(fstart, fstart + c.ctc, 1, width)
        self._t(f"parallel aggregate on {entry.alias}: {nworkers} workers, "
                f"cost={fin.total_cost:.2f}")
        return fin

    def _sort(self, node, keys):
        c = self.c
        n = max(node.rows, 2.0)
        startup = node.total_cost + 2.0 * c.coc * n * math.log2(n)
        s = SortNode(node, keys)
        s.set_cost(startup, startup + c.coc * n, node.rows, node.width)
        return s

    def _limit(self, node, b):
        if b.limit is None and b.offset is None:
            return node
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
        ln.set_cost(startup, total, _clamp(out_rows) if out_rows else 0, node.width)
        return ln

    def _num_groups(self, exprs, rows_in, b) -> float:
        est = 1.0
        for e in exprs:
            nd = float(DEFAULT_NUM_DISTINCT)
            inner = e.args[0] if isinstance(e, X.Func) and e.name == "rtrim_char" else e
            if isinstance(inner, X.ColRef) and isinstance(inner.key[0], int):
                rs = self._relstats.get(inner.key[0])
                if rs is not None:
                    nd, _ = rs.n_distinct(inner.key[1])
            est *= nd
        return _clamp(min(est, max(rows_in, 1.0)))

    # -- base relations ---------------------------------------------------------------------------
    def _nblocks(self, rfn) -> int:
        n = self.smgr.nblocks(rfn)
        self.rel_pages[rfn] = n
        return n

    def _type_width(self, t) -> float:
        if getattr(t, "fixed", False):
            return float(t.size)
        if t.name in ("char", "varchar") and t.length:
            return float(t.length + 1 if t.length <= 32 else 32 + (t.length - 32) / 2)
        return 32.0

    def _expr_width(self, e, b) -> float:
        if isinstance(e, X.ColRef) and isinstance(e.key[0], int):
            rs = self._relstats.get(e.key[0])
            if rs is not None:
                return rs.width(e.key[1])
        return self._type_width(e.type)

    def _base_rel(self, entry, quals) -> _BaseRel:
        t = entry.table
        unique_cols = set()
        idx = []
        for iname in t.indexes:
            idef = self.catalog.indexes.get(iname)
            if idef is None:
                continue
            idx.append((idef, self._nblocks(idef.relfilenode)))
            if idef.unique and len(idef.columns) == 1:
                a = entry.attno(idef.columns[0])
                if a >= 0:
                    unique_cols.add(a)
        nblocks = self._nblocks(t.relfilenode)
        proto = RelStats(entry, 0.0, unique_cols)
        width = sum(proto.width(a) for a in range(len(entry.columns)))
        pages, tuples = rel_size(t, nblocks, width)
        if self.settings.planner_trusts_stale_stats and t.relpages > 0 and t.reltuples >= 0:
            pages, tuples = t.relpages, float(t.reltuples)  # PostgreSQL 7: pg_class as is
        rs = RelStats(entry, tuples, unique_cols)
        br = _BaseRel(entry, pages, tuples, rs)
        br.quals = list(quals)
        br.indexes = idx
        if not hasattr(self, "_relstats"):
            self._relstats = {}
        self._relstats[entry.index] = rs
        return br

    def _scan_attnos(self, br, extra_quals=()) -> list:
        keys = set(br.needed)
        for q in list(br.quals) + list(extra_quals):
            for k in X.column_keys(q):
                if k[0] == br.index:
                    keys.add(k[1])
        return sorted(keys)

    def _width(self, br, attnos) -> float:
        return sum(br.stats.width(a) for a in attnos)

    def _seq_path(self, br, est, need_tids):
        c = self.c
        attnos = self._scan_attnos(br)
        sel = est.clauses(br.quals) if br.quals else 1.0
        rows = _clamp(br.tuples * sel) if br.tuples else 0.0
        ops = sum(_ops(q) for q in br.quals)
        total = br.pages * c.spc + br.tuples * (c.ctc + ops * c.coc)
        startup = 0.0
        if not c.seqscan:
            startup += DISABLE_COST
            total += DISABLE_COST
        node = SeqScanNode(br.entry, attnos, br.quals, need_tids)
        node.set_cost(startup, total, rows, self._width(br, br.needed))
        self._t(f"seq scan on {br.entry.alias}: cost={startup:.2f}..{total:.2f} rows={rows:.0f}")
        return node

    def _match_index(self, br, idef, quals):
        """(eq [(qual, value)], lower [(qual, value, incl)], upper [...]) for an index."""
        entry = br.entry
        cols = [entry.attno(c) for c in idef.columns]
        eq, lower, upper = [], [], []
        for pos, attno in enumerate(cols):
            found_eq = None
            rng_lo, rng_hi = [], []
            for q in quals:
                m = _indexable(q, br.index, attno, entry.columns[attno][1])
                if m is None:
                    continue
                op, val = m
                if op == "=" and found_eq is None:
                    found_eq = (q, val)
                elif op in (">", ">="):
                    rng_lo.append((q, val, op == ">="))
                elif op in ("<", "<="):
                    rng_hi.append((q, val, op == "<="))
            if found_eq is not None:
                eq.append(found_eq)
                continue
            lower, upper = rng_lo, rng_hi
            break
        return eq, lower, upper

    def _index_paths(self, br, est, need_tids):
        out = []
        for idef, ipages in br.indexes:
            eq, lower, upper = self._match_index(br, idef, br.quals)
            if not eq and not lower and not upper:
                continue
            used = [q for q, _ in eq] + [q for q, _, _ in lower] + [q for q, _, _ in upper]
            rest = [q for q in br.quals if all(q is not u for u in used)]
            node = self._index_node(br, idef, ipages, est, eq, lower, upper, used, rest,
                                    need_tids)
            out.append(node)
        return out

    def _index_node(self, br, idef, ipages, est, eq, lower, upper, used, rest, need_tids,
                    loop_count=1.0, eq_values=None, display_quals=None, sel_idx=None):
        attnos = self._scan_attnos(br, used)
        if sel_idx is None:
            sel_idx = est.clauses(used)
        sel_all = sel_idx * (est.clauses(rest) if rest else 1.0)
        startup, total, _ = self._index_cost(br, idef, ipages, sel_idx, len(used),
                                             sum(_ops(q) for q in rest), loop_count)
        rows = _clamp(br.tuples * sel_all) if br.tuples else 0.0
        node = IndexScanNode(br.entry, idef, attnos,
                             eq_values if eq_values is not None else [v for _, v in eq],
                             [(v, incl) for _, v, incl in lower],
                             [(v, incl) for _, v, incl in upper],
                             display_quals if display_quals is not None else used, rest,
                             need_tids)
        node.set_cost(startup, total, rows, self._width(br, br.needed))
        self._t(f"index scan using {idef.name} on {br.entry.alias}: cost={startup:.2f}.."
                f"{total:.2f} rows={rows:.0f} (index selectivity {sel_idx:.6f})")
        return node

    def _index_cost(self, br, idef, ipages, sel, n_index_quals, filter_ops, loop_count=1.0):
        c = self.c
        T = max(br.pages, 1)
        N = max(br.tuples, 1.0)
        idx_pages = max(ipages - 1, 1)
        num_index_tuples = max(1.0, round(sel * N))
        num_index_pages = math.ceil(num_index_tuples * idx_pages / N)
        height = 0 if idx_pages <= 1 else max(1, math.ceil(math.log(idx_pages) / math.log(_LEAF_FANOUT)))
        startup = (math.ceil(math.log2(N)) if N > 1 else 0) * c.coc + (height + 1) * 50 * c.coc
        index_total = startup + num_index_pages * c.rpc + num_index_tuples * (
            c.citc + n_index_quals * c.coc)
        tuples_fetched = num_index_tuples
        if loop_count > 1:
            pf = _pages_fetched(tuples_fetched * loop_count, T, c.ecs) / loop_count
            max_io = pf * c.rpc
            pages_sel = math.ceil(sel * T)
            min_io = (pages_sel * c.rpc) if pages_sel else 0.0
        else:
            pf = _pages_fetched(tuples_fetched, T, c.ecs)
            max_io = pf * c.rpc
            pages_sel = math.ceil(sel * T)
            min_io = c.rpc + (pages_sel - 1) * c.spc if pages_sel >= 1 else 0.0
        corr = 0.0
        first = br.entry.attno(idef.columns[0])
        st = br.stats.col(first)
        if st is not None:
            corr = st.get("correlation", 0.0) or 0.0
        io = max_io + corr * corr * (min_io - max_io)
        cpu = tuples_fetched * (c.ctc + filter_ops * c.coc)
        total = index_total + io + cpu
        if not c.indexscan:
            startup += DISABLE_COST
            total += DISABLE_COST
        return startup, total, tuples_fetched

    def _index_order_paths(self, b) -> list:
        """Index scans of a single table that return rows in ORDER BY's order (keys = a
        prefix of the index's columns, all ASC NULLS LAST - the index's order - or all DESC
        NULLS FIRST - scanned backward), so no Sort is needed: with a LIMIT, such a path
        reads only the first rows (PostgreSQL's pathkeys, for the simple cases)."""
        single = getattr(self, "_single", None)
        if single is None or len(b.rtable) != 1:
            return []
        br, est, need_tids = single
        out = []
        for idef, ipages in br.indexes:
            cols = [br.entry.attno(c) for c in idef.columns]
            if len(b.order_by) > len(cols):
                continue
            direction = None
            ok = True
            for (e, desc, nf), a in zip(b.order_by, cols):
                if not (isinstance(e, X.ColRef) and e.key == (br.index, a)) or desc != nf \
                        or (direction is not None and direction != desc):
                    ok = False
                    break
                direction = desc
            if not ok:
                continue
            eq, lower, upper = self._match_index(br, idef, br.quals)
            used = [q for q, _ in eq] + [q for q, _, _ in lower] + [q for q, _, _ in upper]
            rest = [q for q in br.quals if all(q is not u for u in used)]
            node = self._index_node(br, idef, ipages, est, eq, lower, upper, used, rest,
                                    need_tids, sel_idx=est.clauses(used) if used else 1.0)
            node.backward = bool(direction)
            out.append(node)
        return out

    def _best_scan(self, br, est, need_tids=False):
        paths = [self._seq_path(br, est, need_tids)] + self._index_paths(br, est, need_tids)
        best = min(paths, key=lambda p: (p.total_cost, p.startup_cost))
        self._t(f"chosen for {br.entry.alias}: {best.title()}")
        return best

    # -- joins -------------------------------------------------------------------------------------
    def _join_tree(self, b: B.BoundSelect):
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
            br.rows = _clamp(br.tuples * est.clauses(br.quals)) if br.tuples else 0.0
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
                r = _clamp(r)
                rows_of[s] = r
            return r

        for i, br in rels.items():
            best[frozenset([i])] = self._best_scan(br, est)
        ids = sorted(rels)
        if len(ids) > _JOIN_SEARCH_LIMIT:
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

    def _join_paths(self, left, left_set, rbr, r, jq, est, rows):
        """Paths joining plan ``left`` (relations ``left_set``) with base relation ``rbr``."""
        c = self.c
        out = []
        right = self._best_scan(rbr, est) if not hasattr(rbr, "_best") else rbr._best
        rbr._best = right
        width = left.width + right.width
        qual_ops = sum(_ops(q) for q in jq)
        # equality clauses usable as hash keys: one side on each input
        hash_pairs = []
        for q in jq:
            if isinstance(q, X.Compare) and q.op == "=":
                lk, rk = _side_keys(q.left), _side_keys(q.right)
                if lk and rk and lk <= left_set and rk == {r}:
                    hash_pairs.append((q, q.left, q.right))
                elif lk and rk and rk <= left_set and lk == {r}:
                    hash_pairs.append((q, q.right, q.left))
        for outer, inner, swap in ((left, right, False), (right, left, True)):
            # nested loop, inner materialized
            mat = MaterializeNode(inner)
            mat.set_cost(inner.startup_cost, inner.total_cost + 2 * c.coc * inner.rows,
                         inner.rows, inner.width)
            startup = outer.startup_cost + inner.startup_cost
            total = (outer.total_cost + mat.total_cost
                     + max(outer.rows - 1, 0) * inner.rows * c.coc
                     + outer.rows * inner.rows * (c.ctc + qual_ops * c.coc))
            if not c.nestloop:
                startup += DISABLE_COST
                total += DISABLE_COST
            nl = NestLoopNode(outer, mat, jq)
            nl.set_cost(startup, total, rows, width)
            nl.linked = bool(jq)
            out.append(nl)
            self._t(f"nested loop {outer.title()} x {inner.title()}: cost={total:.2f}")
            if hash_pairs:
                okeys = [p[2] if swap else p[1] for p in hash_pairs]
                ikeys = [p[1] if swap else p[2] for p in hash_pairs]
                extra = [q for q in jq if all(q is not p[0] for p in hash_pairs)]
                h = HashNode(inner)
                nk = len(hash_pairs)
                h.set_cost(inner.total_cost, inner.total_cost + inner.rows * (c.coc * nk + c.ctc),
                           inner.rows, inner.width)
                startup = outer.startup_cost + h.total_cost
                total = (startup + (outer.total_cost - outer.startup_cost)
                         + outer.rows * c.coc * nk
                         + rows * (c.ctc + _ops_list(extra) * c.coc))
                if not c.hashjoin:
                    startup += DISABLE_COST
                    total += DISABLE_COST
                hj = HashJoinNode(outer, h, okeys, ikeys, [p[0] for p in hash_pairs], extra)
                hj.set_cost(startup, total, rows, width)
                out.append(hj)
                self._t(f"hash join {outer.title()} x {inner.title()}: cost={total:.2f}")
        # nested loop over an index of the right relation, keyed by the left row
        for idef, ipages in rbr.indexes:
            first = rbr.entry.attno(idef.columns[0])
            key = None
            for q, lexpr, rexpr in hash_pairs:
                if isinstance(rexpr, X.ColRef) and rexpr.key == (r, first) and \
                        _key_type_ok(rbr.entry.columns[first][1], lexpr.type):
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
            inner.rows = _clamp(rbr.tuples * sel * (est.clauses(rbr.quals) if rbr.quals else 1))
            startup = left.startup_cost + inner.startup_cost
            total = (left.total_cost + left.rows * inner.total_cost
                     + rows * (c.ctc + _ops_list(rest_join) * c.coc))
            if not c.nestloop:
                startup += DISABLE_COST
                total += DISABLE_COST
            inl = IndexNestLoopNode(left, inner, [lexpr], rest_join)
            inl.set_cost(startup, total, rows, width)
            out.append(inl)
            self._t(f"index nested loop {left.title()} x {inner.title()}: cost={total:.2f}")
        return out


def _ops_list(qs) -> int:
    return sum(_ops(q) for q in qs)


def _side_keys(e) -> set:
    return {k[0] for k in X.column_keys(e) if isinstance(k[0], int)}


def _key_type_ok(coltype, valtype) -> bool:
    fc, fv = family(coltype), family(valtype)
    if coltype.name == "char":
        return False
    if fc == "int":
        return fv == "int"
    if fc == "float":
        return fv in ("int", "float")
    return fc == fv


def _indexable(q, rindex, attno, coltype):
    """(op, value expr) if ``q`` is ``column op value`` on (rindex, attno)."""
    if not isinstance(q, X.Compare) or q.op not in ("=", "<", "<=", ">", ">="):
        return None
    op = q.op
    col, val = q.left, q.right
    if not (isinstance(col, X.ColRef) and col.key == (rindex, attno)):
        col, val = q.right, q.left
        op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
        if not (isinstance(col, X.ColRef) and col.key == (rindex, attno)):
            return None
    if not _pseudo_constant(val) or not _key_type_ok(coltype, val.type):
        return None
    return op, val


def _pages_fetched(tuples: float, pages: int, ecs: int) -> float:
    """Mackert and Lohman's estimate of distinct heap pages read (index_pages_fetched)."""
    T = max(pages, 1)
    N = tuples
    b = ecs
    if T <= b:
        pf = (2.0 * T * N) / (2.0 * T + N)
        pf = min(pf, T)
    else:
        lim = (2.0 * T * b) / (2.0 * T - b)
        pf = (2.0 * T * N) / (2.0 * T + N) if N <= lim else b + (N - lim) * (T - b) / T
    return float(math.ceil(pf))


def _const_int(e):
    if isinstance(e, X.Const) and e.value is not None:
        return float(e.value)
    return None


class _ConstFilter(ResultNode):
    """SELECT without FROM with a WHERE: one row if the condition holds."""

    def __init__(self, child, qual):
        super().__init__()
        self.children = [child]
        self.qual = qual
        self.set_cost(child.startup_cost, child.total_cost, 1, 0)

    def details(self, qualify):
        return ["One-Time Filter: " + X.deparse(self.qual, qualify)]

    def execute(self, ectx):
        from minidb.exec.compile import truth
        c = ectx.compile(self.qual, {})
        for chunk in self.children[0].run(ectx):
            keep = truth(c, chunk)
            out = chunk.select(keep)
            if out.n:
                yield out
