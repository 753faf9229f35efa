"""Plan nodes: the base class, the execution context, instrumentation, and the operators
that only reshape a stream (projection, limit, sort, distinct, materialize, result).

A plan is a tree of ``PlanNode`` s built by the planner (``minidb.sql.planner``), which
also fills in each node's estimates (``startup_cost``, ``total_cost``, ``rows``,
``width``).  A node is immutable once planned, so a cached plan can run again and again
(and from several sessions of one process): everything an execution needs - compiled
expressions with the parameters bound, open scans, instrumentation - lives in the
``ExecContext`` or in the generator ``execute`` returns.

Execution is pull-based, batch at a time (the "vectorized Volcano" model): ``run(ectx)``
yields ``Chunk`` s.  Each node's output columns are named by ``keys`` (the ColRef keys of
``minidb.exec.expr``), so an expression above compiles against ``node.layout()``.

With EXPLAIN ANALYZE, ``run`` wraps ``execute`` to measure, per node and inclusive of its
children as PostgreSQL does: loops, rows, time to the first and to the last batch, buffer
hits and reads, heap fetches and index items killed (from the backend's counters), WAL
records, full-page images and bytes (the backend's WAL usage, ``WalHandle.usage``), and
whatever the node notes itself (rows removed by a filter, sort method).
"""

from __future__ import annotations

import time

import numpy as np

import minidb.errors as errors
from minidb.exec.chunk import Chunk, concat
from minidb.exec.compile import K, compile_expr, evaluate, truth
from minidb.heap.prune import PagePruner
from minidb.shmem import C

__all__ = ["PlanNode", "ExecContext", "Instr", "ResultNode", "ProjectNode", "LimitNode",
           "SortNode", "DistinctNode", "MaterializeNode"]


class Instr:
    """What EXPLAIN ANALYZE reports for one node (sums over its loops)."""

    __slots__ = ("loops", "rows", "startup", "total", "hit", "read", "heap_fetches",
                 "killed", "wal_records", "wal_fpi", "wal_bytes", "extra")

    def __init__(self):
        self.loops = 0
        self.rows = 0
        self.startup = 0.0
        self.total = 0.0
        self.hit = self.read = self.heap_fetches = self.killed = 0
        self.wal_records = self.wal_fpi = self.wal_bytes = 0
        self.extra: dict = {}


_NO_WAL = (0, 0, 0)
_CTR = (C["buffers_hit"], C["buffers_read"], C["index_heap_fetches"], C["index_items_killed"])


class ExecContext:
    """One execution of a plan: session, snapshot, parameters, instrumentation."""

    def __init__(self, session, snapshot, params=(), *, analyze: bool = False,
                 timing: bool = True):
        self.session = session
        self.backend = session.backend
        # CHECK_FOR_INTERRUPTS: a cancel (57014), a crash of another process (57P02)
        self.check_interrupts = session.check_interrupts
        self.snapshot = snapshot
        self.params = list(params)
        self.analyze = analyze
        self.timing = timing
        self.instr: dict[int, Instr] = {}
        self._pruners: dict = {}
        self.rows_affected = 0      # INSERT / UPDATE / DELETE
        self.wrote = False          # SELECT FOR UPDATE locked rows
        self.outer: dict = {}       # outer-reference key -> value (correlated subqueries)
        self.initplans: dict = {}   # SubPlan -> its value, once per execution
        self.ctes: dict = {}        # CTE -> its rows, once per execution
        self.worktables: dict = {}  # recursive CTE -> the working table

    def compile(self, e, layout):
        return compile_expr(e, layout, self.params, self.session.xact.start_time, self)

    def pruner(self, rel) -> PagePruner:
        """The opportunistic-pruning hook for scans of ``rel``: one ``PagePruner`` per
        relation and execution (a nested loop's inner index scan asks for it per row)."""
        p = self._pruners.get(rel.relfilenode)
        if p is None:
            p = self._pruners[rel.relfilenode] = PagePruner(self.backend, rel)
        return p

    def instr_for(self, node) -> Instr:
        ins = self.instr.get(id(node))
        if ins is None:
            ins = self.instr[id(node)] = Instr()
        return ins

    def note(self, node, key: str, n) -> None:
        """A node-specific figure for EXPLAIN ANALYZE (summed over loops)."""
        if self.analyze:
            ex = self.instr_for(node).extra
            if isinstance(n, (int, float)) and key in ex and isinstance(ex[key], (int, float)):
                ex[key] += n
            else:
                ex[key] = n

    def counters(self):
        s = self.backend.bufmgr.stats
        wal = self.backend.wal
        return tuple(int(s[i]) for i in _CTR) + (wal.usage() if wal is not None else _NO_WAL)


def _interruptible(it, check):
    """A node's chunks with CHECK_FOR_INTERRUPTS between them: a cancel (57014) or a crash
    of another process (57P02) ends the statement within one chunk of some node (a
    nested loop's inner rescans included).  ~0.3 us a chunk."""
    try:
        for chunk in it:
            yield chunk
            check()
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()


class PlanNode:
    label = "?"
    hidden = False          # not printed by EXPLAIN (its child is printed in its place)

    def __init__(self, children, keys, types):
        self.children = list(children)
        self.keys = list(keys)
        self.types = list(types)
        self.startup_cost = 0.0
        self.total_cost = 0.0
        self.rows = 0.0
        self.width = 0

    def layout(self) -> dict:
        return {k: i for i, k in enumerate(self.keys)}

    def set_cost(self, startup, total, rows, width=None):
        self.startup_cost = float(startup)
        self.total_cost = float(total)
        self.rows = float(rows)
        if width is not None:
            self.width = int(round(width))
        return self

    def title(self) -> str:
        return self.label

    def details(self, qualify: bool) -> list[str]:
        return []

    def execute(self, ectx):   # pragma: no cover - every node overrides it
        raise NotImplementedError

    def run(self, ectx):
        it = self.execute(ectx)
        if ectx.analyze:
            it = self._instrumented(ectx, it)
        return _interruptible(it, ectx.check_interrupts)

    def run_all(self, ectx) -> Chunk:
        """Every row of this node's output as one chunk: what a blocking parent (a sort, a
        hash build, a window, a set operation) reads before it can yield a row."""
        it = self.run(ectx)
        try:
            return concat(list(it), len(self.keys))
        finally:
            it.close()

    def _instrumented(self, ectx, it):
        ins = ectx.instr_for(self)
        ins.loops += 1
        first = True
        elapsed = 0.0
        try:
            while True:
                t0 = time.perf_counter()
                c0 = ectx.counters()
                try:
                    chunk = next(it)
                except StopIteration:
                    self._account(ins, ectx, t0, c0)
                    elapsed += time.perf_counter() - t0
                    if first:
                        ins.startup += elapsed
                    ins.total += elapsed
                    return
                self._account(ins, ectx, t0, c0)
                elapsed += time.perf_counter() - t0
                if first:
                    ins.startup += elapsed
                    first = False
                ins.rows += chunk.n
                yield chunk
        finally:
            it.close()

    @staticmethod
    def _account(ins, ectx, t0, c0):
        c1 = ectx.counters()
        ins.hit += c1[0] - c0[0]
        ins.read += c1[1] - c0[1]
        ins.heap_fetches += c1[2] - c0[2]
        ins.killed += c1[3] - c0[3]
        ins.wal_records += c1[4] - c0[4]
        ins.wal_fpi += c1[5] - c0[5]
        ins.wal_bytes += c1[6] - c0[6]


# ---------------------------------------------------------------------------------------------
class ResultNode(PlanNode):
    """One row of no columns (SELECT without FROM)."""
    label = "Result"

    def __init__(self):
        super().__init__([], [], [])

    def execute(self, ectx):
        yield Chunk([], 1)


class OneTimeFilterNode(ResultNode):
    """A Result with a One-Time Filter: its child's rows if a condition that names no
    column holds (SELECT without FROM with a WHERE)."""

    def __init__(self, child, qual):
        super().__init__()
        self.children = [child]
        self.qual = qual
        self.set_cost(child.startup_cost, child.total_cost, 1, 0)

    def details(self, qualify):
        from minidb.exec.expr import deparse
        return ["One-Time Filter: " + deparse(self.qual, qualify)]

    def execute(self, ectx):
        c = ectx.compile(self.qual, {})
        for chunk in self.children[0].run(ectx):
            out = chunk.select(truth(c, chunk))
            if out.n:
                yield out


class ProjectNode(PlanNode):
    """Computes the output expressions (hidden in EXPLAIN: PostgreSQL projects inside the
    node below)."""
    hidden = True
    label = "Project"

    def __init__(self, child, exprs, keys, names):
        super().__init__([child], keys, [e.type for e in exprs])
        self.exprs = list(exprs)
        self.names = list(names)

    def execute(self, ectx):
        child = self.children[0]
        layout = child.layout()
        comp = [ectx.compile(e, layout) for e in self.exprs]
        it = child.run(ectx)
        try:
            for chunk in it:
                cols = [evaluate(c, chunk) for c in comp]
                yield Chunk(cols, chunk.n, chunk.tids)
        finally:
            it.close()


class LimitNode(PlanNode):
    label = "Limit"

    def __init__(self, child, limit, offset):
        super().__init__([child], child.keys, child.types)
        self.limit = limit
        self.offset = offset

    def _value(self, ectx, e, what, state):
        if e is None:
            return None
        c = ectx.compile(e, {})
        if not isinstance(c, K):
            raise errors.NotSupportedError(f"{what} must be a constant or a parameter")
        v = c.value
        if v is not None and v < 0:
            raise errors.DataError(f"{what} must not be negative", sqlstate=state)
        return v

    def execute(self, ectx):
        lim = self._value(ectx, self.limit, "LIMIT", "2201W")
        skip = self._value(ectx, self.offset, "OFFSET", "2201X") or 0
        if lim == 0:
            return
        it = self.children[0].run(ectx)
        try:
            for chunk in it:
                n = chunk.n
                if skip:
                    if n <= skip:
                        skip -= n
                        continue
                    chunk = chunk.take(np.arange(skip, n))
                    skip = 0
                    n = chunk.n
                if lim is not None:
                    if n >= lim:
                        yield chunk if n == lim else chunk.take(np.arange(lim))
                        return
                    lim -= n
                yield chunk
        finally:
            it.close()


class PassThroughNode(PlanNode):
    """A node that hands on its child's chunks unchanged; it exists to be shown in EXPLAIN
    as PostgreSQL shows its plan (the consuming join keeps what it needs)."""

    def __init__(self, child):
        super().__init__([child], child.keys, child.types)

    def execute(self, ectx):
        it = self.children[0].run(ectx)
        try:
            yield from it
        finally:
            it.close()


class MaterializeNode(PassThroughNode):
    """Keeps its input for re-reading (the inner side of a nested loop)."""
    label = "Materialize"


def sort_order(chunk, keys) -> np.ndarray:
    """Row order for ``keys`` = [(values, mask, desc, nulls_first)] (stable)."""
    lex = []
    for vals, mask, desc, nulls_first in keys:
        if vals.dtype == object or (desc and vals.dtype == np.int64):
            _, v = np.unique(vals, return_inverse=True)
            v = v.astype(np.int64)
            if desc:
                v = -v
        elif vals.dtype == np.bool_:
            v = vals.astype(np.int8)
            if desc:
                v = -v
        elif desc:
            v = -vals.astype(np.float64) if vals.dtype.kind == "f" else -vals.astype(np.int64)
        else:
            v = vals
        if mask is not None:
            v = np.where(mask, 0, v)
            nk = (~mask if nulls_first else mask).astype(np.int8)
        else:
            nk = None
        lex.append((nk, v))
    arrays = []
    for nk, v in reversed(lex):
        arrays.append(v)
        if nk is not None:
            arrays.append(nk)
    if len(arrays) == 1:
        return np.argsort(arrays[0], kind="stable")
    return np.lexsort(arrays)


class SortNode(PlanNode):
    label = "Sort"

    def __init__(self, child, sort_keys):
        super().__init__([child], child.keys, child.types)
        self.sort_keys = list(sort_keys)   # [(expr, desc, nulls_first)]

    def details(self, qualify):
        from minidb.exec.expr import deparse
        parts = []
        for e, desc, nf in self.sort_keys:
            s = deparse(e, qualify)
            if desc:
                s += " DESC"
                if not nf:
                    s += " NULLS LAST"
            elif nf:
                s += " NULLS FIRST"
            parts.append(s)
        return ["Sort Key: " + ", ".join(parts)]

    def execute(self, ectx):
        child = self.children[0]
        layout = child.layout()
        comp = [(ectx.compile(e, layout), d, nf) for e, d, nf in self.sort_keys]
        data = child.run_all(ectx)
        if data.n == 0:
            return
        keys = []
        for c, d, nf in comp:
            v, m = evaluate(c, data)
            keys.append((v, m, d, nf))
        order = sort_order(data, keys)
        ectx.note(self, "Sort Method", f"quicksort  Memory: {max(1, _nbytes(data) // 1024)}kB")
        yield data.take(order)


def _nbytes(chunk) -> int:
    total = 0
    for v, m in chunk.cols:
        total += v.nbytes if v.dtype != object else 48 * len(v)
    return total


def factorize(cols) -> tuple[np.ndarray, np.ndarray]:
    """(group number per row, first row of each group) for rows keyed by ``cols``.

    NULLs form one group per column, as GROUP BY and DISTINCT treat them; groups are
    numbered in key order (NULLs last)."""
    n = len(cols[0][0]) if cols else 0
    code = np.zeros(n, dtype=np.int64)
    for vals, mask in cols:
        if vals.dtype.kind == "f":
            vals = np.where(vals == 0, 0.0, vals)          # -0.0 groups with 0.0
        _, inv = np.unique(vals, return_inverse=True)
        inv = inv.astype(np.int64).reshape(-1)
        k = int(inv.max()) + 2 if n else 1
        if mask is not None:
            inv = np.where(mask, k - 1, inv)
        code = code * k + inv
        _, code = np.unique(code, return_inverse=True)
        code = code.astype(np.int64).reshape(-1)
    _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64), first


class DistinctNode(PlanNode):
    """SELECT DISTINCT: the first row of each distinct output row, in input order."""
    label = "HashAggregate"

    def __init__(self, child):
        super().__init__([child], child.keys, child.types)
        self.group_names = []

    def details(self, qualify):
        return ["Group Key: " + ", ".join(self.group_names)] if self.group_names else []

    def execute(self, ectx):
        child = self.children[0]
        data = child.run_all(ectx)
        if data.n == 0:
            return
        if not data.cols:
            yield Chunk([], 1)
            return
        _, first = factorize(data.cols)
        yield data.take(np.sort(first))
