"""Scan nodes: sequential scan and index scan of one table.

**Seq Scan** runs ``minidb.heap.mvcc.seq_scan`` (visibility decided for a whole batch of
pages at once, hint bits set, opportunistic pruning through ``heap.prune``'s hook, as
``minidb.session`` wires it) and evaluates its filter on each batch as one numpy
expression; only the rows where the filter is TRUE go up.  A batch is one run of
``SCAN_BATCH_PAGES`` pages, tens of thousands of rows.

Filter conditions that cannot raise an error and read only fixed-width columns
(comparisons, AND/OR/NOT, IS NULL, IN lists) are *pushed into the page scan*: while the
batch is share-locked, its tuples' columns are gathered and the condition evaluated for
all of them, and visibility (``MVCCFilter``) is checked only for the tuples that passed.
The answer is the same as PostgreSQL's order (visibility, then quals) since a condition
is a function of the tuple's bytes; the work saved is the visibility test of every tuple
the WHERE rejects, which makes a selective ``count(*) ... WHERE`` run at the speed of the
raw storage scan.  Departures: hint bits are set only on tuples that passed the condition,
and ``seq_tup_read`` counts the rows returned, not every visible row.

**Index Scan** asks the B-tree for the entries between its bounds (equality on a prefix
of the index columns, then an optional range on the next column), fetches each visible
heap version (``IndexScan.visible_rows``: HOT chain walk, index tuple killing), and groups
the rows into batches of ``INDEX_BATCH_ROWS`` before filtering them like a sequential
scan does.  When a bound cannot be encoded as a key of the column's type (see ``indexam``)
it is dropped and the index conditions are re-checked with the filter.  Used as the inner side of a nested loop, ``lookup`` runs the same scan for
one outer row's key.
"""

from __future__ import annotations

import numpy as np

from minidb.exec import datatypes as dt
from minidb.exec import expr as X
from minidb.exec import indexam
from minidb.exec.chunk import Chunk, normalize_columns, rows_to_chunk
from minidb.exec.compile import K, truth
from minidb.exec.expr import and_all, column_keys, deparse
from minidb.exec.nodes import PlanNode
from minidb.heap.heapam import HeapScan, pages_without_nulls
from minidb.heap.mvcc import MVCCFilter, seq_scan

__all__ = ["SeqScanNode", "IndexScanNode", "INDEX_BATCH_ROWS"]

INDEX_BATCH_ROWS = 1024


def _rel_title(entry) -> str:
    t = entry.table.name
    return t if entry.alias == t else f"{t} {entry.alias}"


class SeqScanNode(PlanNode):
    label = "Seq Scan"

    def __init__(self, entry, attnos, quals, need_tids=False):
        keys = [(entry.index, a) for a in attnos]
        types = [entry.columns[a][1] for a in attnos]
        super().__init__([], keys, types)
        self.entry = entry
        self.attnos = list(attnos)
        self.quals = list(quals)
        self.need_tids = need_tids

    def title(self):
        return f"Seq Scan on {_rel_title(self.entry)}"

    def details(self, qualify):
        out = []
        if self.quals:
            out.append("Filter: " + deparse(and_all(self.quals), qualify))
        return out

    def execute(self, ectx):
        backend = ectx.backend
        rel = backend.catalog.heap_rel(self.entry.table.name)
        layout = self.layout()
        pushed = [q for q in self.quals if _pushable(q, self.entry)]
        rest = [q for q in self.quals if not any(q is p for p in pushed)]
        qual = ectx.compile(and_all(rest), layout) if rest else None
        if isinstance(qual, K):
            if not qual.value:
                return
            qual = None
        pre = None
        if pushed:
            pcols = sorted({k[1] for p in pushed for k in column_keys(p)})
            pre = ectx.compile(and_all(pushed), {(self.entry.index, a): i
                                                 for i, a in enumerate(pcols)})
            if isinstance(pre, K):
                if not pre.value:
                    return
                pre = None
        if pre is None:
            scan = seq_scan(backend, rel, self.attnos, ectx.snapshot,
                            prepare_pages=ectx.pruner(rel))
            heap_scan = scan.heap_scan
        else:
            scan = heap_scan = _prefiltered_scan(ectx, rel, self.attnos, pcols, pre)
        strings = any(not t.fixed for t in self.types)
        rindex = self.entry.index
        returned = removed = 0
        stats = backend.pgstat
        if pre is not None:
            stats.count(rel.oid, "seq_scan")
        try:
            for batch in scan:
                cols = batch.columns
                if pre is not None:
                    stats.count(rel.oid, "seq_tup_read", len(batch))
                if strings:
                    cols = normalize_columns(cols, self.types)
                tids = {rindex: (batch.blocks, batch.offsets)} if self.need_tids else None
                chunk = Chunk(cols, len(batch), tids)
                if qual is not None:
                    out = chunk.select(truth(qual, chunk))
                    removed += chunk.n - out.n
                    chunk = out
                returned += chunk.n
                if chunk.n:
                    yield chunk
        finally:
            close = getattr(scan, "close", None)
            if close is not None:
                close()
            if self.quals and ectx.analyze:
                if pre is not None:      # pushed-down quals also removed invisible tuples
                    removed = heap_scan.tuples_seen - returned
                ectx.note(self, "Rows Removed by Filter", removed)


# Conditions evaluated before visibility must not be able to fail (a dead tuple's values
# must never raise an error PostgreSQL would not raise) and should be cheap for every tuple
# on the page: comparisons, AND / OR / NOT, IS NULL, IN lists over fixed-width columns.
_PUSHABLE = (X.ColRef, X.Const, X.Param, X.Compare, X.BoolOp, X.Not, X.IsNull, X.InList)


def _pushable(q, entry) -> bool:
    for n in X.walk(q):
        if not isinstance(n, _PUSHABLE):
            return False
        if isinstance(n, X.ColRef):
            if not isinstance(n.key[0], int) or n.key[0] != entry.index:
                return False
            if not entry.columns[n.key[1]][1].fixed:
                return False
    return bool(column_keys(q))


def _prefiltered_scan(ectx, rel, attnos, pcols, pre):
    """A heap scan whose filter evaluates ``pre`` on every tuple of the locked pages and
    checks visibility only for the tuples that pass (see the module docstring)."""
    backend = ectx.backend
    bm = backend.bufmgr
    mvcc = MVCCFilter(bm, ectx.snapshot, backend.instance.clog)
    layout = rel.layout

    def tuple_filter(views, starts, bufs):
        chunk = Chunk(layout.gather(views, starts, pcols,
                                    no_nulls=pages_without_nulls(views, bufs)), len(starts))
        keep = truth(pre, chunk)
        idx = np.flatnonzero(keep)
        out = np.zeros(len(starts), dtype=bool)
        if idx.size:
            out[idx[mvcc(views, starts[idx], bufs)]] = True
        return out

    return HeapScan(backend, rel, attnos, tuple_filter=tuple_filter,
                    prepare_pages=ectx.pruner(rel))


class IndexScanNode(PlanNode):
    label = "Index Scan"

    def __init__(self, entry, index, attnos, eq, lower, upper, index_quals, quals,
                 need_tids=False, backward=False):
        keys = [(entry.index, a) for a in attnos]
        types = [entry.columns[a][1] for a in attnos]
        super().__init__([], keys, types)
        self.entry = entry
        self.index = index            # catalog IndexDef
        self.attnos = list(attnos)
        self.eq = list(eq)            # value expressions for the leading columns
        self.lower = lower            # [(expr, inclusive)] on the next column
        self.upper = upper
        self.index_quals = list(index_quals)   # the conditions the bounds came from
        self.quals = list(quals)      # the rest (the filter)
        own = set(keys)
        # conditions re-checked on the fetched rows (not those naming an outer row)
        self.recheck = [q for q in self.index_quals if column_keys(q) <= own]
        self.need_tids = need_tids
        self.backward = backward

    def title(self):
        back = " Backward" if self.backward else ""
        return f"Index Scan{back} using {self.index.name} on {_rel_title(self.entry)}"

    def details(self, qualify):
        out = []
        if self.index_quals:
            out.append("Index Cond: " + deparse(and_all(self.index_quals), qualify))
        if self.quals:
            out.append("Filter: " + deparse(and_all(self.quals), qualify))
        return out

    def _bound_values(self, ectx, exprs):
        out = []
        for e in exprs:
            c = ectx.compile(e, {})
            if not isinstance(c, K):
                raise AssertionError("index bound is not a constant")
            out.append(dt.from_repr(c.value, e.type))
        return out

    def _pick(self, ectx, bounds, lower: bool):
        """The tightest of several bounds on the range column: (value, inclusive)."""
        best = None
        for e, incl in bounds:
            v = self._bound_values(ectx, [e])[0]
            if v is None:
                return (None, True)
            if best is None:
                best = (v, incl)
                continue
            try:
                better = (v > best[0]) if lower else (v < best[0])
            except TypeError:
                continue
            if better or (v == best[0] and not incl):
                best = (v, incl)
        return best

    def execute(self, ectx):
        eq = self._bound_values(ectx, self.eq)
        yield from self._scan(ectx, eq)

    def run_lookup(self, ectx, eq_values):
        """The scan with the leading equality values given (nested loop inner side)."""
        it = self._scan(ectx, list(eq_values))
        return self._instrumented(ectx, it) if ectx.analyze else it

    def _scan(self, ectx, eq):
        backend = ectx.backend
        rel = backend.catalog.heap_rel(self.entry.table.name)
        lower = self._pick(ectx, self.lower, True) if self.lower else None
        upper = self._pick(ectx, self.upper, False) if self.upper else None
        layout = self.layout()
        rows_iter, exact = indexam.scan_rows(backend, self.index.name, eq, lower, upper,
                                             ectx.snapshot, ectx.pruner(rel), self.backward)
        checks = self.quals if exact else self.quals + self.recheck
        qual = ectx.compile(and_all(checks), layout) if checks else None
        if isinstance(qual, K):
            if not qual.value:
                return
            qual = None
        buf_rows, buf_tids = [], []
        removed = 0
        rindex = self.entry.index
        try:
            for tid, row in rows_iter:
                buf_rows.append(row)
                buf_tids.append(tid)
                if len(buf_rows) >= INDEX_BATCH_ROWS:
                    chunk, r = self._chunk(buf_rows, buf_tids, qual, rindex)
                    removed += r
                    buf_rows, buf_tids = [], []
                    if chunk.n:
                        yield chunk
            if buf_rows:
                chunk, r = self._chunk(buf_rows, buf_tids, qual, rindex)
                removed += r
                if chunk.n:
                    yield chunk
        finally:
            close = getattr(rows_iter, "close", None)
            if close is not None:
                close()
            if self.quals:
                ectx.note(self, "Rows Removed by Filter", removed)

    def _chunk(self, rows, tids, qual, rindex):
        import numpy as np
        t = None
        if self.need_tids:
            t = {rindex: (np.array([x[0] for x in tids], dtype=np.int64),
                          np.array([x[1] for x in tids], dtype=np.int64))}
        chunk = rows_to_chunk(rows, self.types, self.attnos, t)
        if qual is None:
            return chunk, 0
        out = chunk.select(truth(qual, chunk))
        return out, chunk.n - out.n
