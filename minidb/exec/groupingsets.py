"""GROUPING SETS / ROLLUP / CUBE: one aggregation per grouping set over the same input.

PostgreSQL's Agg node runs grouping sets as sorted phases (GroupAggregate, one sort per
rollup chain) or hashed (HashAggregate / MixedAggregate, one hash table per set, all
filled in one pass over the input).  This node is the hashed form: it reads its input
once into memory, then runs the ordinary ``AggNode`` over that one chunk for each set (a
set's keys numbered with ``np.unique`` as any GROUP BY is), and appends the results.  Its
output layout is the plain aggregation's - ``("g", i)`` for every grouping expression
that occurs in some set, ``("a", j)`` for the aggregates - plus ``("gset", 0)``, the
number of the row's grouping set, which the binder's rewrite of ``grouping(...)`` reads.
A grouping expression absent from a row's set is NULL there.  The empty set gives one row
even over no input (the grand total), as in PostgreSQL; other sets give no row then.
Rows come out set by set, in the order the sets were listed after expansion.  HAVING is
applied to the appended rows (it may test ``grouping()``).

Departure: PostgreSQL may also choose the sorted strategy (and then emits rows in the
rollup's sort order); without ORDER BY the order of rows differs, as it may in
PostgreSQL between plans.
"""

from __future__ import annotations

import numpy as np

from minidb.exec.agg import AggNode
from minidb.exec.chunk import Chunk, concat
from minidb.exec.compile import truth
from minidb.exec.datatypes import INTEGER, VECTOR_DTYPE, VECTOR_FILL, family
from minidb.exec.expr import deparse
from minidb.exec.nodes import PlanNode

__all__ = ["GroupingSetsNode"]


class _Materialized(PlanNode):
    """The input read once, served again to each set's aggregation (no instrumentation:
    it is not part of the plan tree EXPLAIN shows)."""

    label = "Materialized"

    def __init__(self, like, chunk):
        super().__init__([], list(like.keys), list(like.types))
        self.chunk = chunk

    def execute(self, ectx):
        if self.chunk.n:
            yield self.chunk

    def run(self, ectx):
        return self.execute(ectx)


class GroupingSetsNode(PlanNode):
    label = "MixedAggregate"

    def __init__(self, child, group, sets, aggs, having):
        keys = [("g", i) for i in range(len(group))] + \
            [("a", j) for j in range(len(aggs))] + [("gset", 0)]
        types = [g.type for g in group] + [a.type for a in aggs] + [INTEGER]
        super().__init__([child], keys, types)
        self.group = list(group)
        self.sets = [tuple(s) for s in sets]
        self.aggs = list(aggs)
        self.having = having

    def details(self, qualify):
        out = []
        for s in self.sets:
            if s:
                out.append("Hash Key: " + ", ".join(deparse(self.group[i], qualify)
                                                     for i in s))
            else:
                out.append("Group Key: ()")
        if self.having is not None:
            out.append("Filter: " + deparse(self.having, qualify))
        return out

    def execute(self, ectx):
        child = self.children[0]
        data = child.run_all(ectx)
        src = _Materialized(child, data)
        parts = []
        for k, s in enumerate(self.sets):
            agg = AggNode(src, [self.group[i] for i in s], self.aggs, None)
            got = list(agg.execute(ectx))
            if not got:
                continue
            res = concat(got, len(agg.keys))
            n = res.n
            cols = []
            for i, g in enumerate(self.group):
                if i in s:
                    cols.append(res.cols[s.index(i)])
                else:
                    f = family(g.type)
                    cols.append((np.full(n, VECTOR_FILL[f], dtype=VECTOR_DTYPE[f]),
                                 np.ones(n, bool)))
            cols += res.cols[len(s):]
            cols.append((np.full(n, k, dtype=np.int64), None))
            parts.append(Chunk(cols, n))
        if not parts:
            return
        out = concat(parts, len(self.keys))
        if self.having is not None:
            before = out.n
            out = out.select(truth(ectx.compile(self.having, self.layout()), out))
            ectx.note(self, "Rows Removed by Filter", before - out.n)
        if out.n:
            yield out
