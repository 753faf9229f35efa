"""Join nodes: nested loop, nested loop over an index, hash join; inner, outer (left,
right, full), semi and anti joins.

Every join's output row is the outer row's columns followed by the inner row's, and its
``tids`` the union of both sides'.  A semi or anti join returns the outer row's columns
only.

**Join types** (PostgreSQL's JoinType; the ``jointype`` of the hash join and nested loop):
``left`` adds each outer row no inner row matched, its inner columns NULL; ``right`` adds
each inner row no outer row matched (a flag per inner row, set while probing), outer
columns NULL; ``full`` both; ``semi`` returns each outer row that has a match once
(EXISTS, IN); ``anti`` each outer row without one (NOT EXISTS).  "Matched" means the
join condition - hash keys and Join Filter - is TRUE; a ``Filter`` (a WHERE condition
that must see the NULL-extended rows) is applied to the join's output.

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
from minidb.exec.datatypes import VECTOR_DTYPE, VECTOR_FILL, family
from minidb.exec.compile import K, evaluate, truth
from minidb.exec.expr import and_all, deparse
from minidb.exec.nodes import PassThroughNode, PlanNode

__all__ = ["NestLoopNode", "IndexNestLoopNode", "HashJoinNode", "HashNode", "NESTLOOP_PIECE",
           "null_columns"]

NESTLOOP_PIECE = 1 << 18
_JOIN_WORD = {"inner": "", "left": " Left", "right": " Right", "full": " Full",
              "semi": " Semi", "anti": " Anti"}
_DT = VECTOR_DTYPE   # one definition: datatypes.VECTOR_DTYPE / VECTOR_FILL
_FILL = VECTOR_FILL


def null_columns(types, n: int) -> list:
    """``n`` rows of NULLs for columns of ``types`` (the NULL-extended side of an outer
    join)."""
    out = []
    for t in types:
        f = family(t)
        out.append((np.full(n, _FILL[f], dtype=_DT[f]), np.ones(n, dtype=bool)))
    return out


def _extend(chunk: Chunk, types, right: bool) -> Chunk:
    """``chunk``'s rows with NULL columns of ``types`` after them (or before: ``right``)."""
    nulls = null_columns(types, chunk.n)
    cols = (nulls + list(chunk.cols)) if right else (list(chunk.cols) + nulls)
    return Chunk(cols, chunk.n, chunk.tids)


class _JoinMixin:
    """What the join nodes share: the join type and its output."""

    def _init_join(self, outer, inner, jointype, filter_quals):
        self.jointype = jointype
        self.filter = list(filter_quals or [])
        if jointype in ("semi", "anti"):
            self.keys = list(outer.keys)
            self.types = list(outer.types)

    def _filter_details(self, qualify):
        return ["Filter: " + deparse(and_all(self.filter), qualify)] if self.filter else []

    def _post(self, ectx):
        return _compile_filter(ectx, self.filter, self.layout()) if self.filter else None

    def _emit(self, oc, oi, ii, keep_q, inner_all, inner_types, matched_inner, post):
        """The output for one outer batch given its candidate pairs (oi, ii)."""
        jt = self.jointype
        if len(oi):
            combined = join_chunks(oc, oi, inner_all, ii)
            if keep_q is not None:
                k = truth(keep_q, combined) if not isinstance(keep_q, K) else bool(keep_q.value)
                if np.ndim(k) == 0:
                    k = np.full(len(oi), bool(k))
                oi, ii = oi[k], ii[k]
                combined = combined.take(np.flatnonzero(k)) if not k.all() else combined
        else:
            combined = None
        if matched_inner is not None and len(ii):
            matched_inner[ii] = True
        if jt == "semi":
            return oc.take(np.unique(oi)) if len(oi) else None
        if jt == "anti":
            hit = np.zeros(oc.n, bool)
            hit[oi] = True
            return oc.take(np.flatnonzero(~hit)) if not hit.all() else None
        parts = []
        if combined is not None and combined.n:
            parts.append(combined)
        if jt in ("left", "full"):
            hit = np.zeros(oc.n, bool)
            hit[oi] = True
            if not hit.all():
                parts.append(_extend(oc.take(np.flatnonzero(~hit)), inner_types, False))
        if not parts:
            return None
        out = parts[0] if len(parts) == 1 else concat(parts, len(self.keys))
        return _apply(post, out) if post is not None else out

    def _unmatched_inner(self, inner_all, matched, outer_types, post):
        rest = np.flatnonzero(~matched)
        if not len(rest):
            return None
        out = _extend(inner_all.take(rest), outer_types, True)
        return _apply(post, out) if post is not None else out


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


class NestLoopNode(_JoinMixin, PlanNode):

    def __init__(self, outer, inner, quals, jointype="inner", filter_quals=()):
        super().__init__([outer, inner], outer.keys + inner.keys, outer.types + inner.types)
        self.quals = list(quals)
        self._init_join(outer, inner, jointype, filter_quals)

    @property
    def label(self):
        return f"Nested Loop{_JOIN_WORD[self.jointype]}"

    def details(self, qualify):
        out = ["Join Filter: " + deparse(and_all(self.quals), qualify)] if self.quals else []
        return out + self._filter_details(qualify)

    def execute(self, ectx):
        outer, inner = self.children
        jt = self.jointype
        inner_all = inner.run_all(ectx)
        full_layout = {k: i for i, k in enumerate(outer.keys + inner.keys)}
        q = _compile_filter(ectx, self.quals, full_layout)
        post = self._post(ectx)
        ni = inner_all.n
        if ni == 0 and jt in ("inner", "semi", "right"):
            return
        matched = np.zeros(ni, bool) if jt in ("right", "full") else None
        step = max(1, NESTLOOP_PIECE // max(ni, 1))
        it = outer.run(ectx)
        try:
            for oc in it:
                for s in range(0, oc.n, step):
                    ectx.check_interrupts()     # a piece may yield nothing for a long time
                    e = min(s + step, oc.n)
                    piece = oc if (s == 0 and e == oc.n) else oc.take(np.arange(s, e))
                    oi = np.repeat(np.arange(e - s), ni)
                    ii = np.tile(np.arange(ni), e - s)
                    out = self._emit(piece, oi, ii, q, inner_all, inner.types, matched, post)
                    if out is not None and out.n:
                        yield out
            if matched is not None:
                out = self._unmatched_inner(inner_all, matched, outer.types, post)
                if out is not None and out.n:
                    yield out
        finally:
            it.close()


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


class HashJoinNode(_JoinMixin, PlanNode):

    def __init__(self, outer, hash_node, outer_keys, inner_keys, conds, quals,
                 jointype="inner", filter_quals=()):
        super().__init__([outer, hash_node], outer.keys + hash_node.keys,
                         outer.types + hash_node.types)
        self.outer_keys = list(outer_keys)
        self.inner_keys = list(inner_keys)
        self.conds = list(conds)           # the equalities, for EXPLAIN
        self.quals = list(quals)
        self._init_join(outer, hash_node, jointype, filter_quals)

    @property
    def label(self):
        return f"Hash{_JOIN_WORD[self.jointype]} Join"

    def details(self, qualify):
        out = ["Hash Cond: " + deparse(and_all(self.conds), qualify)]
        if self.quals:
            out.append("Join Filter: " + deparse(and_all(self.quals), qualify))
        return out + self._filter_details(qualify)

    def execute(self, ectx):
        outer, hnode = self.children
        jt = self.jointype
        build = hnode.run_all(ectx)
        if build.n == 0 and jt in ("inner", "semi", "right"):
            return
        ilayout, olayout = hnode.layout(), outer.layout()
        bkeys = [evaluate(ectx.compile(e, ilayout), build) for e in self.inner_keys]
        okc = [ectx.compile(e, olayout) for e in self.outer_keys]
        full_layout = {k: i for i, k in enumerate(outer.keys + hnode.keys)}
        q = _compile_filter(ectx, self.quals, full_layout)
        post = self._post(ectx)
        fams = [family(e.type) for e in self.inner_keys + self.outer_keys]
        vector = len(self.inner_keys) == 1 and all(f in ("int", "float", "bool", "ts", "tstz",
                                                          "date", "time")
                                                   for f in fams)
        if build.n == 0:
            probe = None
        elif vector:
            probe = self._sorted_probe(bkeys[0], fams)
        else:
            probe = self._dict_probe(bkeys)
        matched = np.zeros(build.n, bool) if jt in ("right", "full") else None
        empty = np.empty(0, np.int64)
        it = outer.run(ectx)
        try:
            for oc in it:
                if probe is None:
                    oi = ii = empty
                else:
                    okeys = [evaluate(c, oc) for c in okc]
                    okeys = [(np.full(oc.n, v) if np.ndim(v) == 0 else v, m) for v, m in okeys]
                    oi, ii = probe(okeys)
                if jt == "inner":
                    if not len(oi):
                        continue
                    out = _apply(q, join_chunks(oc, oi, build, ii))
                    if post is not None:
                        out = _apply(post, out)
                else:
                    out = self._emit(oc, oi, ii, q, build, hnode.types, matched, post)
                if out is not None and out.n:
                    yield out
            if matched is not None:
                out = self._unmatched_inner(build, matched, outer.types, post)
                if out is not None and out.n:
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
