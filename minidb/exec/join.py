"""Join nodes (inner joins): nested loop, nested loop over an index, hash join.

Every join's output row is the outer row's columns followed by the inner row's, and its
``tids`` the union of both sides'.

**Nested Loop** materializes the inner input once, then for each outer batch forms the
cross product with it in pieces of at most ``NESTLOOP_PIECE`` pairs (numpy ``repeat`` and
``tile`` of row numbers) and evaluates the join condition on the whole piece.

**Nested Loop over an Index Scan** (PostgreSQL's parameterized inner index scan): for each
outer row, the inner ``IndexScanNode.lookup`` runs with the outer row's join key as its
equality bound.  One index descent per outer row; the per-row Python is the index's.

**Hash Join** builds on the inner input (the ``Hash`` node) and probes with the outer.
With one join key whose type is a number, a boolean or a timestamp, the "hash table" is
the inner keys sorted once (``argsort``), and a probe batch finds each key's matches with
two ``searchsorted`` calls, then expands the (outer, inner) row-number pairs with
``repeat`` - no per-row Python at all.  With several keys or string keys it is a Python
dict from key tuple to inner row numbers, probed row by row.  Rows with a NULL key never
match (``=`` is never TRUE with NULL).  Departure from PostgreSQL: no batching to disk
(``work_mem``); the inner side must fit in memory.
"""

from __future__ import annotations

import numpy as np

from minidb.exec.chunk import Chunk, concat
from minidb.exec.datatypes import family
from minidb.exec.compile import K, evaluate, truth
from minidb.exec.expr import and_all, deparse
from minidb.exec.nodes import PassThroughNode, PlanNode

__all__ = ["NestLoopNode", "IndexNestLoopNode", "HashJoinNode", "HashNode", "NESTLOOP_PIECE"]

NESTLOOP_PIECE = 1 << 18


def join_chunks(a: Chunk, ai, b: Chunk, bi) -> Chunk:
    cols = [(v[ai], None if m is None else m[ai]) for v, m in a.cols]
    cols += [(v[bi], None if m is None else m[bi]) for v, m in b.cols]
    tids = None
    if a.tids or b.tids:
        tids = {}
        for r, (bl, of) in (a.tids or {}).items():
            tids[r] = (bl[ai], of[ai])
        for r, (bl, of) in (b.tids or {}).items():
            tids[r] = (bl[bi], of[bi])
    return Chunk(cols, len(ai), tids)


def _compile_filter(ectx, quals, layout):
    if not quals:
        return None
    q = ectx.compile(and_all(quals), layout)
    return q


def _apply(q, chunk):
    if q is None:
        return chunk
    if isinstance(q, K):
        return chunk if q.value else chunk.take(np.empty(0, np.int64))
    return chunk.select(truth(q, chunk))


class NestLoopNode(PlanNode):
    label = "Nested Loop"

    def __init__(self, outer, inner, quals):
        super().__init__([outer, inner], outer.keys + inner.keys, outer.types + inner.types)
        self.quals = list(quals)

    def details(self, qualify):
        return ["Join Filter: " + deparse(and_all(self.quals), qualify)] if self.quals else []

    def execute(self, ectx):
        outer, inner = self.children
        it = inner.run(ectx)
        try:
            inner_all = concat(list(it), len(inner.keys))
        finally:
            it.close()
        if inner_all.n == 0:
            return
        q = _compile_filter(ectx, self.quals, self.layout())
        ni = inner_all.n
        step = max(1, NESTLOOP_PIECE // ni)
        removed = 0
        it = outer.run(ectx)
        try:
            for oc in it:
                for s in range(0, oc.n, step):
                    e = min(s + step, oc.n)
                    oi = np.repeat(np.arange(s, e), ni)
                    ii = np.tile(np.arange(ni), e - s)
                    combined = join_chunks(oc, oi, inner_all, ii)
                    out = _apply(q, combined)
                    removed += combined.n - out.n
                    if out.n:
                        yield out
        finally:
            it.close()
            if self.quals:
                ectx.note(self, "Rows Removed by Join Filter", removed)


class IndexNestLoopNode(PlanNode):
    """Nested loop whose inner side is an index scan keyed by the outer row."""
    label = "Nested Loop"

    def __init__(self, outer, inner, outer_keys, quals):
        super().__init__([outer, inner], outer.keys + inner.keys, outer.types + inner.types)
        self.outer_keys = list(outer_keys)   # exprs over the outer row, one per eq column
        self.quals = list(quals)

    def details(self, qualify):
        return ["Join Filter: " + deparse(and_all(self.quals), qualify)] if self.quals else []

    def execute(self, ectx):
        from minidb.exec.chunk import column_to_list
        outer, inner = self.children
        olayout = outer.layout()
        keyc = [ectx.compile(e, olayout) for e in self.outer_keys]
        q = _compile_filter(ectx, self.quals, self.layout())
        it = outer.run(ectx)
        try:
            for oc in it:
                cols = []
                for c, e in zip(keyc, self.outer_keys):
                    v, m = evaluate(c, oc)
                    cols.append(column_to_list(v, m, e.type))
                o_idx, parts = [], []
                for r in range(oc.n):
                    key = [col[r] for col in cols]
                    for ch in (inner.run_lookup(ectx, key)):
                        o_idx.append(np.full(ch.n, r, dtype=np.int64))
                        parts.append(ch)
                if not parts:
                    continue
                inner_all = concat(parts, len(inner.keys))
                oi = np.concatenate(o_idx)
                combined = join_chunks(oc, oi, inner_all, np.arange(inner_all.n))
                out = _apply(q, combined)
                if out.n:
                    yield out
        finally:
            it.close()


class HashNode(PassThroughNode):
    """The build side of a hash join (shown as PostgreSQL shows it)."""
    label = "Hash"


class HashJoinNode(PlanNode):
    label = "Hash Join"

    def __init__(self, outer, hash_node, outer_keys, inner_keys, conds, quals):
        super().__init__([outer, hash_node], outer.keys + hash_node.keys,
                         outer.types + hash_node.types)
        self.outer_keys = list(outer_keys)
        self.inner_keys = list(inner_keys)
        self.conds = list(conds)           # the equalities, for EXPLAIN
        self.quals = list(quals)

    def details(self, qualify):
        out = ["Hash Cond: " + deparse(and_all(self.conds), qualify)]
        if self.quals:
            out.append("Join Filter: " + deparse(and_all(self.quals), qualify))
        return out

    def execute(self, ectx):
        outer, hnode = self.children
        it = hnode.run(ectx)
        try:
            build = concat(list(it), len(hnode.keys))
        finally:
            it.close()
        if build.n == 0:
            return
        ilayout, olayout = hnode.layout(), outer.layout()
        bkeys = [evaluate(ectx.compile(e, ilayout), build) for e in self.inner_keys]
        okc = [ectx.compile(e, olayout) for e in self.outer_keys]
        q = _compile_filter(ectx, self.quals, self.layout())
        fams = [family(e.type) for e in self.inner_keys + self.outer_keys]
        vector = len(self.inner_keys) == 1 and all(f in ("int", "float", "bool", "ts")
                                                   for f in fams)
        if vector:
            probe = self._sorted_probe(bkeys[0], fams)
        else:
            probe = self._dict_probe(bkeys)
        it = outer.run(ectx)
        try:
            for oc in it:
                okeys = [evaluate(c, oc) for c in okc]
                oi, ii = probe(okeys)
                if not len(oi):
                    continue
                out = _apply(q, join_chunks(oc, oi, build, ii))
                if out.n:
                    yield out
        finally:
            it.close()

    @staticmethod
    def _sorted_probe(bkey, fams):
        vals, mask = bkey
        as_float = "float" in fams
        conv = (lambda v: np.asarray(v, dtype=np.float64)) if as_float else \
            (lambda v: np.asarray(v, dtype=np.int64))
        rows = np.arange(len(vals)) if mask is None else np.flatnonzero(~mask)
        bv = conv(vals)[rows]
        order = np.argsort(bv, kind="stable")
        sk = bv[order]
        srows = rows[order]

        def probe(okeys):
            v, m = okeys[0]
            pv = conv(v)
            lo = np.searchsorted(sk, pv, "left")
            hi = np.searchsorted(sk, pv, "right")
            cnt = hi - lo
            if m is not None:
                cnt = np.where(m, 0, cnt)
            total = int(cnt.sum())
            if total == 0:
                return np.empty(0, np.int64), np.empty(0, np.int64)
            oi = np.repeat(np.arange(len(pv)), cnt)
            starts = np.cumsum(cnt) - cnt
            within = np.arange(total) - np.repeat(starts, cnt)
            ii = srows[np.repeat(lo, cnt) + within]
            return oi, ii
        return probe

    @staticmethod
    def _dict_probe(bkeys):
        n = len(bkeys[0][0])
        cols = []
        bad = np.zeros(n, bool)
        for v, m in bkeys:
            cols.append(_hashable(v))
            if m is not None:
                bad |= m
        table: dict = {}
        for r, key in enumerate(zip(*cols)):
            if not bad[r]:
                table.setdefault(key, []).append(r)

        def probe(okeys):
            pcols, pbad = [], np.zeros(len(okeys[0][0]), bool)
            for v, m in okeys:
                pcols.append(_hashable(v))
                if m is not None:
                    pbad |= m
            oi, ii = [], []
            get = table.get
            for r, key in enumerate(zip(*pcols)):
                if pbad[r]:
                    continue
                hit = get(key)
                if hit:
                    oi.extend([r] * len(hit))
                    ii.extend(hit)
            return np.array(oi, dtype=np.int64), np.array(ii, dtype=np.int64)
        return probe


def _hashable(v):
    if v.dtype.kind == "f":
        return [0.0 if x == 0 else x for x in v.tolist()]
    if v.dtype.kind in "iub":
        return v.tolist()
    return list(v)
