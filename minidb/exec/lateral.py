"""A LATERAL subquery in FROM: a nested loop that runs its inner side again for each outer row
(PostgreSQL's Nested Loop whose inner Subquery Scan has the outer row's columns as
parameters, ``nestParams``).

``LateralNode(outer, inner, params, quals, jointype, filter_quals)``: ``params`` are the
outer side's columns (``ColRef`` s) the subquery reads; the subquery's plan reads them as
``OuterRef`` s through ``ExecContext.outer``, as a correlated SubPlan does
(``minidb.exec.subplan``).  For each outer batch the distinct combinations of the
parameter values are found, the inner plan runs once per combination (rows with equal
parameters share its result, PostgreSQL would rescan per row), and the pairs (outer row,
inner row) are formed in the outer rows' order.  ``quals`` (the ON condition) decide
which pairs match; ``jointype`` "left" keeps an outer row no pair matched, its inner
columns NULL (``LEFT JOIN LATERAL ... ON``); ``filter_quals`` are WHERE conditions
applied to the output.  RIGHT and FULL joins cannot be lateral (PostgreSQL's rule).
"""

from __future__ import annotations

import numpy as np

from minidb.exec.chunk import Chunk, concat
from minidb.exec.compile import evaluate
from minidb.exec.expr import and_all, deparse
from minidb.exec.join import _compile_filter, _JoinMixin
from minidb.exec.nodes import PlanNode

__all__ = ["LateralNode"]

_MISSING = object()


class LateralNode(_JoinMixin, PlanNode):

    def __init__(self, outer, inner, params, quals, jointype="inner", filter_quals=()):
        super().__init__([outer, inner], outer.keys + inner.keys, outer.types + inner.types)
        self.params = list(params)
        self.quals = list(quals)
        self._init_join(outer, inner, jointype, filter_quals)

    @property
    def label(self):
        return "Nested Loop Left Join" if self.jointype == "left" else "Nested Loop"

    def details(self, qualify):
        out = ["Join Filter: " + deparse(and_all(self.quals), qualify)] if self.quals else []
        return out + self._filter_details(qualify)

    def execute(self, ectx):
        outer, inner = self.children
        olayout = outer.layout()
        comp = [ectx.compile(p, olayout) for p in self.params]
        keys = [p.key for p in self.params]
        q = _compile_filter(ectx, self.quals, self.layout())
        post = self._post(ectx)
        saved = {k: ectx.outer.get(k, _MISSING) for k in keys}
        it = outer.run(ectx)
        try:
            for oc in it:
                ectx.check_interrupts()
                cols = []
                for c in comp:
                    v, m = evaluate(c, oc)
                    vl = v.tolist() if isinstance(v, np.ndarray) else [v] * oc.n
                    if m is not None:
                        for k in np.flatnonzero(m).tolist():
                            vl[k] = None
                    cols.append(vl)
                results: dict = {}     # parameter values -> (offset in parts, rows)
                parts, base = [], 0
                oi, ii = [], []
                for r in range(oc.n):
                    pv = tuple(c[r] for c in cols)
                    got = results.get(pv)
                    if got is None:
                        for k, v in zip(keys, pv):
                            ectx.outer[k] = v
                        ch = inner.run_all(ectx)
                        got = results[pv] = (base, ch.n)
                        if ch.n:
                            parts.append(ch)
                            base += ch.n
                    start, n = got
                    if n:
                        oi.append(np.full(n, r, dtype=np.int64))
                        ii.append(np.arange(start, start + n, dtype=np.int64))
                if parts:
                    inner_all = concat(parts, len(inner.keys))
                    oi_a, ii_a = np.concatenate(oi), np.concatenate(ii)
                else:
                    inner_all = Chunk([], 0)
                    oi_a = ii_a = np.empty(0, np.int64)
                out = self._emit(oc, oi_a, ii_a, q, inner_all, inner.types, None, post)
                if out is not None and out.n:
                    yield out
        finally:
            it.close()
            for k, v in saved.items():
                if v is _MISSING:
                    ectx.outer.pop(k, None)
                else:
                    ectx.outer[k] = v
