"""Set operations and the nodes that reshape whole queries' outputs: Append (UNION ALL),
HashSetOp (INTERSECT / EXCEPT [ALL]), Unique (DISTINCT ON), Recursive Union with its
WorkTable Scan (WITH RECURSIVE).

* **Append** runs its children one after the other; each child's output columns are
  renamed to the Append's (``("out", i)``).  With ``flag`` it adds a column holding the
  child's number, which HashSetOp reads (PostgreSQL adds the same flag column).
* **HashSetOp** numbers the distinct rows of its input (``nodes.factorize``: NULLs equal,
  as set operations treat them) and counts, per distinct row, the rows from each side:
  INTERSECT keeps rows counted on both sides (ALL: ``min(l, r)`` copies), EXCEPT rows of
  the left side not on the right (ALL: ``l - r`` copies).  Rows come out in the order of
  their first appearance.
* **Unique** keeps the first row of each run of equal keys in its (sorted) input:
  ``SELECT DISTINCT ON (keys)`` over a Sort by those keys.
* **Recursive Union** runs the non-recursive term, then the recursive term again and again
  with the rows of the previous round as the work table (``ExecContext.worktables``),
  until a round gives no row; UNION (not ALL) drops rows seen before, in every round.
"""

from __future__ import annotations

import numpy as np

import minidb.errors as errors
from minidb.exec.chunk import Chunk, concat
from minidb.exec.nodes import PlanNode, factorize

__all__ = ["AppendNode", "HashSetOpNode", "UniqueNode", "RecursiveUnionNode",
           "WorkTableScanNode", "MAX_RECURSION_ROUNDS"]

MAX_RECURSION_ROUNDS = 1_000_000


class AppendNode(PlanNode):
    label = "Append"

    def __init__(self, children, keys, types, flag: bool = False):
        super().__init__(children, list(keys) + ([("flag",)] if flag else []),
                         list(types) + ([None] if flag else []))
        self.flag = flag

    def execute(self, ectx):
        ncols = len(self.keys) - (1 if self.flag else 0)
        for k, child in enumerate(self.children):
            it = child.run(ectx)
            try:
                for ch in it:
                    cols = list(ch.cols[:ncols])
                    if self.flag:
                        cols.append((np.full(ch.n, k, dtype=np.int64), None))
                    yield Chunk(cols, ch.n)
            finally:
                it.close()


class HashSetOpNode(PlanNode):

    def __init__(self, child, op: str, all_: bool):
        super().__init__([child], child.keys[:-1], child.types[:-1])
        self.op = op
        self.all = all_

    @property
    def label(self):
        return f"HashSetOp {self.op.capitalize()}{' All' if self.all else ''}"

    def execute(self, ectx):
        child = self.children[0]
        data = child.run_all(ectx)
        if data.n == 0:
            return
        ncols = len(self.keys)
        side = data.cols[ncols][0]
        body = Chunk(data.cols[:ncols], data.n)
        if ncols:
            g, first = factorize(body.cols)
        else:
            g, first = np.zeros(data.n, np.int64), np.array([0])
        ng = len(first)
        left = np.bincount(g[side == 0], minlength=ng)
        right = np.bincount(g[side == 1], minlength=ng)
        if self.op == "intersect":
            copies = np.minimum(left, right) if self.all else ((left > 0) & (right > 0))
        else:
            copies = np.maximum(left - right, 0) if self.all else ((left > 0) & (right == 0))
        copies = copies.astype(np.int64)
        order = np.argsort(first, kind="stable")
        rows = np.repeat(first[order], copies[order])
        if len(rows):
            yield body.take(rows)


class UniqueNode(PlanNode):
    """The first row of each group of equal ``keys`` in sorted input (DISTINCT ON)."""
    label = "Unique"

    def __init__(self, child, keys_exprs):
        super().__init__([child], child.keys, child.types)
        self.key_exprs = list(keys_exprs)

    def execute(self, ectx):
        from minidb.exec.compile import evaluate
        child = self.children[0]
        data = child.run_all(ectx)
        if data.n == 0:
            return
        layout = child.layout()
        cols = [evaluate(ectx.compile(e, layout), data) for e in self.key_exprs]
        cols = [(np.full(data.n, v) if np.ndim(v) == 0 else v, m) for v, m in cols]
        new = np.zeros(data.n, bool)
        new[0] = True
        for v, m in cols:
            if v.dtype.kind == "f":
                v = np.where(v == 0, 0.0, v)
            diff = np.asarray(v[1:] != v[:-1], dtype=bool)
            if m is not None:
                diff = (diff & ~m[1:] & ~m[:-1]) | (m[1:] != m[:-1])
            new[1:] |= diff
        yield data.take(np.flatnonzero(new))


class WorkTableScanNode(PlanNode):
    """The recursive term's read of the rows the previous round produced."""

    def __init__(self, entry, cte, quals=()):
        keys = [(entry.index, i) for i in range(len(entry.columns))]
        super().__init__([], keys, [t for _, t in entry.columns])
        self.entry = entry
        self.cte = cte
        self.quals = list(quals)

    def details(self, qualify):
        from minidb.exec.expr import and_all, deparse
        return ["Filter: " + deparse(and_all(self.quals), qualify)] if self.quals else []

    def title(self):
        name = self.cte.name
        return f"WorkTable Scan on {name}" + ("" if self.entry.alias == name
                                              else f" {self.entry.alias}")

    def execute(self, ectx):
        from minidb.exec.compile import truth
        from minidb.exec.expr import and_all
        data = ectx.worktables.get(id(self.cte))
        if data is not None and data.n:
            out = Chunk(list(data.cols), data.n)
            if self.quals:
                out = out.select(truth(ectx.compile(and_all(self.quals), self.layout()), out))
            if out.n:
                yield out


class RecursiveUnionNode(PlanNode):
    label = "Recursive Union"

    def __init__(self, left, right, all_: bool, cte, keys, types):
        super().__init__([left, right], keys, types)
        self.all = all_
        self.cte = cte

    def execute(self, ectx):
        left, right = self.children
        ncols = len(self.keys)
        seen = None

        def take_new(data):
            nonlocal seen
            if self.all or data.n == 0:
                return data
            if seen is None:
                _, first = factorize(data.cols) if ncols else (None, np.array([0]))
                out = data.take(np.sort(first))
                seen = out
                return out
            both = concat([seen, data], ncols)
            g, first = factorize(both.cols)
            old = set(g[:seen.n].tolist())
            _, firsts = np.unique(g[seen.n:], return_index=True)
            keep = [seen.n + i for i in sorted(firsts.tolist()) if g[seen.n + i] not in old]
            out = both.take(np.array(keep, dtype=np.int64))
            seen = concat([seen, out], ncols)
            return out

        def run_all(node):
            it = node.run(ectx)
            try:
                return concat([Chunk(list(c.cols[:ncols]), c.n) for c in it], ncols)
            finally:
                it.close()

        work = take_new(run_all(left))
        rounds = 0
        key = id(self.cte)
        saved = ectx.worktables.get(key)
        try:
            while work.n:
                yield work
                rounds += 1
                if rounds > MAX_RECURSION_ROUNDS:
                    raise errors.ProgramLimitExceeded("recursive query did not end")
                ectx.worktables[key] = work
                work = take_new(run_all(right))
        finally:
            if saved is None:
                ectx.worktables.pop(key, None)
            else:
                ectx.worktables[key] = saved
