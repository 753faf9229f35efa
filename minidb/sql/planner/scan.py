"""Base relations and their access paths (PostgreSQL's allpaths.c, indxpath.c and
plancat.c, small).

**Base relations.**  For each table of the FROM list: its size now (``stats.rel_size``:
the density ANALYZE or VACUUM measured times the current number of pages; with
``planner_trusts_stale_stats`` the pages and rows of the last measurement, unscaled, as
PostgreSQL 7 planned), its restriction clauses (WHERE / ON conjuncts that name only this
table), and the columns needed above it.  Access paths, each costed:

* Seq Scan: ``pages x seq_page_cost + tuples x (cpu_tuple_cost + cpu_operator_cost x
  operators in the filter)``;
* Index Scan, for each index whose leading column has a usable clause (``col op value``
  with op in = < <= > >= and a value that names no column): equalities on a prefix of the
  index columns, then ranges on the next one; costed by ``costs.index_cost``.  A partial
  index is considered only when the restriction clauses imply its predicate
  (``indexpred.usable_partial_index``), and then also with no usable clause (a full scan
  of the index: it holds only the rows of its predicate).
* for one table with an ORDER BY, index scans that return rows in its order
  (``_index_order_paths``): they compete with Sort in ``core``.

``enable_seqscan`` / ``enable_indexscan`` off add ``disable_cost`` to the path.
"""

from __future__ import annotations

from minidb.exec import expr as X
from minidb.exec.datatypes import family
from minidb.exec.scan import IndexScanNode, SeqScanNode
from minidb.sql.indexpred import index_targets, usable_partial_index
from minidb.sql.planner.costs import clamp, index_cost, ops, ops_list, penalize
from minidb.sql.stats import RelStats, rel_size

__all__ = ["BaseRel", "ScanPaths", "key_type_ok"]


class BaseRel:
    """A table of the FROM list while it is planned."""

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
        self.best = None                # its cheapest scan, once a join asked for it


def key_type_ok(coltype, valtype) -> bool:
    """Can a value of ``valtype`` search an index on a column of ``coltype``?"""
    fc, fv = family(coltype), family(valtype)
    if coltype.name == "char":
        return False
    if fc == "int":
        return fv == "int"
    if fc == "float":
        return fv in ("int", "float")
    return fc == fv


def _is_target(e, rindex, target) -> bool:
    """Is ``e`` the index column ``target`` (a column position or a bound expression)?"""
    if isinstance(target, int):
        return isinstance(e, X.ColRef) and e.key == (rindex, target)
    return e == target


def _indexable(q, rindex, attno, coltype):
    """(op, value expr) if ``q`` is ``column op value`` on (rindex, attno); ``attno`` may
    be an expression column's bound expression (``indexpred.index_targets``)."""
    if not isinstance(q, X.Compare) or q.op not in ("=", "<", "<=", ">", ">="):
        return None
    op = q.op
    col, val = q.left, q.right
    if not _is_target(col, rindex, attno):
        col, val = q.right, q.left
        op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
        if not _is_target(col, rindex, attno):
            return None
    if X.column_keys(val) or not key_type_ok(coltype, val.type):
        return None             # the value must be a pseudo-constant
    return op, val


def _unique_key_lookup(path) -> bool:
    """Is ``path`` an equality on every column of a unique index?"""
    return bool(path.index.unique and len(path.eq) == len(path.index.columns)
                and not path.lower and not path.upper)


class ScanPaths:
    """The ``Planner``'s methods for base relations and their scans."""

    def _nblocks(self, rfn) -> int:
        n = self.smgr.nblocks(rfn)
        self.rel_pages[rfn] = n
        return n

    def _base_rel(self, entry, quals) -> BaseRel:
        t = entry.table
        unique_cols = set()
        idx = []
        for iname in t.indexes:
            idef = self.catalog.indexes.get(iname)
            if idef is None or not usable_partial_index(self.catalog, idef, entry, quals):
                continue
            idx.append((idef, self._nblocks(idef.relfilenode)))
            if idef.unique and len(idef.columns) == 1 and not getattr(idef, "exprs", None):
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
        br = BaseRel(entry, pages, tuples, rs)
        br.quals = list(quals)
        br.indexes = idx
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

    def _best_scan(self, br, est, need_tids=False):
        # UPDATE ... FROM / DELETE ... USING: the target's TIDs come up through the joins
        need_tids = need_tids or br.entry.index in getattr(self, "_tids_for", ())
        index_paths = self._index_paths(br, est, need_tids)
        keyed = [p for p in index_paths if _unique_key_lookup(p)]
        s = self.settings
        if keyed and s.enable_fast_path and s.enable_indexscan \
                and not s.planner_trusts_stale_stats:
            # a unique key's equality finds at most one live row: its index path, whatever
            # the table's size (one small table's page decoded per statement costs more);
            # not in PostgreSQL 7's planner (planner_trusts_stale_stats), which the
            # dead-tuples experiment replays
            best = min(keyed, key=lambda p: (p.total_cost, p.startup_cost))
            self._t(f"chosen for {br.entry.alias}: {best.title()} (a unique key)")
            return best
        paths = [self._seq_path(br, est, need_tids)] + index_paths
        best = min(paths, key=lambda p: (p.total_cost, p.startup_cost))
        self._t(f"chosen for {br.entry.alias}: {best.title()}")
        return best

    def _seq_path(self, br, est, need_tids):
        s = self.settings
        attnos = self._scan_attnos(br)
        sel = est.clauses(br.quals) if br.quals else 1.0
        rows = clamp(br.tuples * sel) if br.tuples else 0.0
        total = br.pages * s.seq_page_cost + br.tuples * (
            s.cpu_tuple_cost + ops_list(br.quals) * s.cpu_operator_cost)
        startup, total = penalize(s.enable_seqscan, 0.0, total)
        node = SeqScanNode(br.entry, attnos, br.quals, need_tids)
        node.set_cost(startup, total, rows, self._width(br, br.needed))
        self._t(f"seq scan on {br.entry.alias}: cost={startup:.2f}..{total:.2f} rows={rows:.0f}")
        return node

    def _match_index(self, br, idef, quals):
        """(eq [(qual, value)], lower [(qual, value, incl)], upper [...]) for an index."""
        entry = br.entry
        cols = index_targets(self.catalog, idef, entry)
        eq, lower, upper = [], [], []
        for attno in cols or ():
            found_eq = None
            rng_lo, rng_hi = [], []
            coltype = entry.columns[attno][1] if isinstance(attno, int) else attno.type
            for q in quals:
                m = _indexable(q, br.index, attno, coltype)
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
            partial = getattr(idef, "predicate", None) is not None
            if not eq and not lower and not upper and not partial:
                continue
            used = [q for q, _ in eq] + [q for q, _, _ in lower] + [q for q, _, _ in upper]
            rest = [q for q in br.quals if all(q is not u for u in used)]
            # a partial index whose predicate WHERE implies is a path even without a clause
            # on its columns (a full scan of it reads only its rows, as PostgreSQL's
            # predOK indexes); its selectivity is then taken as the whole WHERE's
            node = self._index_node(br, idef, ipages, est, eq, lower, upper, used, rest,
                                    need_tids, sel_idx=None if used else
                                    est.clauses(br.quals) if br.quals else 1.0)
            out.append(node)
        return out

    def _index_node(self, br, idef, ipages, est, eq, lower, upper, used, rest, need_tids,
                    loop_count=1.0, eq_values=None, display_quals=None, sel_idx=None):
        attnos = self._scan_attnos(br, used)
        if sel_idx is None:
            sel_idx = est.clauses(used)
        sel_all = sel_idx * (est.clauses(rest) if rest else 1.0)
        startup, total, _ = index_cost(self.settings, br, idef, ipages, sel_idx, len(used),
                                       sum(ops(q) for q in rest), loop_count)
        rows = clamp(br.tuples * sel_all) if br.tuples else 0.0
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

    def _index_order_paths(self, b) -> list:
        """Index scans of a single table that return rows in ORDER BY's order, so no Sort
        is needed: with a LIMIT, such a path reads only the first rows (PostgreSQL's
        pathkeys, for the simple cases).  The ORDER BY keys are index columns in index
        order, each with the column's own direction and NULLS placement (pg_index.indoption)
        - a forward scan - or each with both reversed - a backward scan; leading index
        columns that WHERE fixes by an equality may be left out of the ORDER BY (``WHERE
        a = 1 ORDER BY b`` on an index on (a, b)), as PostgreSQL drops such pathkeys."""
        if self._single is None or len(b.rtable) != 1:
            return []
        br, est, need_tids = self._single
        out = []
        for idef, ipages in br.indexes:
            cols = index_targets(self.catalog, idef, br.entry)
            if cols is None:
                continue
            eq, lower, upper = self._match_index(br, idef, br.quals)
            backward = _order_direction(b.order_by, br.index, cols, idef, len(eq))
            if backward is None:
                continue
            used = [q for q, _ in eq] + [q for q, _, _ in lower] + [q for q, _, _ in upper]
            rest = [q for q in br.quals if all(q is not u for u in used)]
            node = self._index_node(br, idef, ipages, est, eq, lower, upper, used, rest,
                                    need_tids, sel_idx=est.clauses(used) if used else 1.0)
            node.backward = backward
            out.append(node)
        return out


def _order_direction(order_by, rindex, cols, idef, n_eq: int):
    """False (forward) / True (backward) if an index on ``cols`` returns rows in the order
    ``order_by`` ([(expr, desc, nulls_first)]) asks for, else None.  The first ``n_eq``
    index columns are fixed by equalities: ORDER BY may start at any of them or after."""
    for skip in range(n_eq + 1):
        keys = cols[skip:]
        if len(order_by) > len(keys) or not order_by:
            continue
        direction = None
        for j, ((e, desc, nf), a) in enumerate(zip(order_by, keys)):
            opt = idef.option(skip + j)
            if not _is_target(e, rindex, a):
                direction = None
                break
            fwd = desc == bool(opt & 1) and nf == bool(opt & 2)
            back = desc != bool(opt & 1) and nf != bool(opt & 2)
            d = False if fwd else True if back else None
            if d is None or (j and d != direction):
                direction = None
                break
            direction = d
        if direction is not None:
            return direction
    return None
