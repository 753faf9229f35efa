"""Gather over a Parallel Seq Scan with partial aggregation (PostgreSQL's Finalize Aggregate
-> Gather -> Partial Aggregate -> Parallel Seq Scan), run by ``minidb.workers``'
``ParallelSeqScan``.

Only the planner's narrow rule uses it (``Planner._parallel_agg``): one table, no GROUP BY /
HAVING / DISTINCT / ORDER BY / LIMIT / FOR UPDATE, aggregates count(*), count(col) on a
fixed-width column, and sum / avg / min / max of integer columns (exact whatever the order in
which participants combine, so the result equals the serial plan's), a WHERE over fixed-width
columns.  The WHERE travels to the workers as ``ScanPredicate``: the bound expression tree,
its column layout, the parameters and the transaction's start time, compiled lazily in the
process that calls it.  ``FinalizeAggNode`` is the only node that executes; the three below it
are for EXPLAIN (EXPLAIN ANALYZE fills their figures from the scan's ``GatherStats``).
"""

from __future__ import annotations

import time

import numpy as np

from minidb.exec.agg import _State
from minidb.exec.chunk import Chunk
from minidb.exec.compile import K, compile_expr, truth
from minidb.exec.expr import and_all, deparse
from minidb.exec.nodes import PlanNode

__all__ = ["ScanPredicate", "FinalizeAggNode", "GatherNode", "PartialAggNode",
           "ParallelSeqScanNode"]


class ScanPredicate:
    """A WHERE clause for a parallel scan: picklable (its state is the expression tree, the
    column layout, the parameters and ``now``); compiled on first call in each process."""

    def __init__(self, expr, layout, params=(), now=None):
        self.expr = expr
        self.layout = dict(layout)
        self.params = list(params)
        self.now = now
        self._c = None

    def __getstate__(self):
        return {"expr": self.expr, "layout": self.layout, "params": self.params,
                "now": self.now}

    def __setstate__(self, st):
        self.__dict__.update(st)
        self._c = None

    def __call__(self, cols):
        if self._c is None:
            self._c = compile_expr(self.expr, self.layout, self.params, self.now)
        n = len(cols[0][0]) if cols else 0
        t = truth(self._c, Chunk(list(cols), n))
        if isinstance(t, (bool, np.bool_)):
            return np.full(n, bool(t))
        return np.asarray(t, dtype=bool)


class _Display(PlanNode):
    """A node shown by EXPLAIN; FinalizeAggNode runs the whole subtree."""

    def execute(self, ectx):   # pragma: no cover - never run on its own
        raise NotImplementedError(f"{self.label} runs under Finalize Aggregate")


class ParallelSeqScanNode(_Display):
    label = "Parallel Seq Scan"

    def __init__(self, seq):
        super().__init__([], seq.keys, seq.types)
        self.entry = seq.entry
        self.attnos = list(seq.attnos)
        self.quals = list(seq.quals)

    def title(self):
        t = self.entry.table.name
        return f"Parallel Seq Scan on {t if self.entry.alias == t else f'{t} {self.entry.alias}'}"

    def details(self, qualify):
        return ["Filter: " + deparse(and_all(self.quals), qualify)] if self.quals else []


class PartialAggNode(_Display):
    label = "Partial Aggregate"

    def __init__(self, child, aggs):
        super().__init__([child], [("a", j) for j in range(len(aggs))], [a.type for a in aggs])


class GatherNode(_Display):
    label = "Gather"

    def __init__(self, child, nworkers):
        super().__init__([child], child.keys, child.types)
        self.nworkers = nworkers

    def details(self, qualify):
        return [f"Workers Planned: {self.nworkers}"]


class FinalizeAggNode(PlanNode):
    label = "Finalize Aggregate"

    def __init__(self, gather, aggs, specs):
        super().__init__([gather], [("a", j) for j in range(len(aggs))], [a.type for a in aggs])
        self.aggs = list(aggs)
        self.specs = list(specs)          # (func, position in the scan's columns or None)

    def execute(self, ectx):
        from minidb.workers import Aggregate, ParallelSeqScan
        gather = self.children[0]
        partial = gather.children[0]
        scan = partial.children[0]
        backend = ectx.backend
        rel = backend.catalog.heap_rel(scan.entry.table.name)
        pred = self.predicate(ectx.params, ectx.session.xact.start_time)
        if pred is not None:
            probe = compile_expr(pred.expr, pred.layout, pred.params, pred.now)
            if isinstance(probe, K):       # a constant WHERE
                if not probe.value:
                    yield self._finalize([0 if f == "count" else None for f, _ in self.specs])
                    return
                pred = None
        nworkers = min(gather.nworkers, backend.settings.max_parallel_workers_per_gather)
        t0 = time.perf_counter()
        ps = ParallelSeqScan(backend, rel, scan.attnos, ectx.snapshot, predicate=pred,
                             aggregates=[Aggregate(f, c) for f, c in self.specs],
                             nworkers=nworkers)
        values = ps.aggregate()
        if ectx.analyze:
            self._instrument(ectx, ps.stats, time.perf_counter() - t0)
        yield self._finalize(values)

    def predicate(self, params, now):
        """The WHERE clause as a picklable ``ScanPredicate`` over the scan's columns (or None)."""
        scan = self.children[0].children[0].children[0]
        if not scan.quals:
            return None
        layout = {(scan.entry.index, a): i for i, a in enumerate(scan.attnos)}
        return ScanPredicate(and_all(scan.quals), layout, params, now)

    def _finalize(self, values) -> Chunk:
        cols = []
        for a, v in zip(self.aggs, values):
            st = _State(a)
            if a.name == "count":
                st.count = int(v)
            elif v is None:
                pass                               # no rows: NULL
            elif a.name == "avg":
                cols.append((np.array([v], dtype=np.float64), None))
                continue
            elif a.name == "sum":
                st.count, st.sum = 1, v
            else:
                st.count, st.best = 1, v
            cols.append(st.result())
        return Chunk(cols, 1)

    def _instrument(self, ectx, stats, elapsed):
        gather = self.children[0]
        partial = gather.children[0]
        scan = partial.children[0]
        nparts = max(len(stats.participants), 1)
        for node, loops, rows in ((gather, 1, len(stats.participants)),
                                  (partial, nparts, nparts),
                                  (scan, nparts, stats.total("rows"))):
            ins = ectx.instr_for(node)
            ins.loops += loops
            ins.rows += rows
            ins.startup += elapsed * loops
            ins.total += elapsed * loops
        ex = ectx.instr_for(gather).extra
        for line in stats.explain_lines(analyze=True)[1:]:
            k, _, v = line.partition(": ")
            ex[k] = v
