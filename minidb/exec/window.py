"""WindowAgg: window functions over sorted input (PostgreSQL's nodeWindowAgg.c, computed
for the whole input at once).

The planner puts a Sort by (PARTITION BY keys, ORDER BY keys) below each WindowAgg, one
WindowAgg per distinct window (stacked, as PostgreSQL does).  The node reads all its
input, finds the partition boundaries and the peer groups (rows equal in the ORDER BY
keys; NULLs are peers of each other) by comparing neighbouring rows, and computes each
function for every row with array operations:

* row_number, rank, dense_rank, percent_rank, cume_dist, ntile - from the positions of
  the row, its partition's first row and its peer group's first and last rows;
* lag / lead (offset, default) - the row ``offset`` before / after within the partition;
* first_value, last_value, and the aggregates count, sum, avg, min, max - over the default
  frame: with ORDER BY, ``RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW`` (the
  partition's rows up to the last peer of the current row); without, the whole
  partition.  Running sums are cumulative sums read at each row's last peer; running
  minima and maxima are ``maximum.accumulate`` over value ranks shifted by a per-partition
  offset (so one pass serves every partition).

Frames other than the default (ROWS / RANGE / GROUPS clauses) are not supported.
"""

from __future__ import annotations

import numpy as np

import minidb.errors as errors
from minidb.exec import datatypes as dt
from minidb.exec.chunk import Chunk
from minidb.exec.compile import evaluate
from minidb.exec.datatypes import VECTOR_DTYPE, VECTOR_FILL, family
from minidb.exec.expr import deparse
from minidb.exec.nodes import PlanNode

__all__ = ["WindowAggNode"]

_DT = VECTOR_DTYPE   # one definition: datatypes.VECTOR_DTYPE / VECTOR_FILL
_FILL = VECTOR_FILL


def _changes(cols, n) -> np.ndarray:
    """True where row i differs from row i-1 in any of ``cols`` (row 0: True)."""
    new = np.zeros(n, bool)
    if n:
        new[0] = True
    for v, m in cols:
        v = np.full(n, v) if np.ndim(v) == 0 else v
        if v.dtype.kind == "f":
            v = np.where(v == 0, 0.0, v)
        diff = np.asarray(v[1:] != v[:-1], dtype=bool)
        if m is not None:
            diff = (diff & ~m[1:] & ~m[:-1]) | (m[1:] != m[:-1])
        new[1:] |= diff
    return new


def _first_index(flag) -> np.ndarray:
    idx = np.arange(len(flag))
    return np.maximum.accumulate(np.where(flag, idx, 0))


def _last_index(flag) -> np.ndarray:
    """For each row, the last row of its group (groups start where ``flag``)."""
    n = len(flag)
    ends = np.zeros(n, bool)
    if n:
        ends[:-1] = flag[1:]
        ends[-1] = True
    idx = np.arange(n)
    rev = np.where(ends, idx, n)[::-1]
    return np.minimum.accumulate(rev)[::-1]


class WindowAggNode(PlanNode):
    label = "WindowAgg"

    def __init__(self, child, wins, keys):
        super().__init__([child], list(child.keys) + list(keys),
                         list(child.types) + [w.type for w in wins])
        self.wins = list(wins)
        self.win_keys = list(keys)

    def details(self, qualify):
        w = self.wins[0]
        out = []
        if w.partition:
            out.append("Partition By: " + ", ".join(deparse(p, qualify) for p in w.partition))
        if w.order:
            out.append("Order By: " + ", ".join(
                deparse(o, qualify) + (" DESC" if d else "") for o, d in zip(w.order,
                                                                             w.order_desc)))
        return out

    def execute(self, ectx):
        child = self.children[0]
        data = child.run_all(ectx)
        n = data.n
        if n == 0:
            return
        layout = child.layout()
        w0 = self.wins[0]
        pcols = [evaluate(ectx.compile(p, layout), data) for p in w0.partition]
        ocols = [evaluate(ectx.compile(o, layout), data) for o in w0.order]
        pflag = _changes(pcols, n)
        peerflag = pflag | _changes(ocols, n) if ocols else pflag.copy()
        ps = _first_index(pflag)
        pe = _last_index(pflag)
        if ocols:
            qs, qe = _first_index(peerflag), _last_index(peerflag)
        else:
            qs, qe = ps, pe                   # no ORDER BY: every row is a peer
        pid = np.cumsum(pflag) - 1
        ctx = (n, ps, pe, qs, qe, pid, peerflag, bool(ocols))
        cols = list(data.cols)
        for w in self.wins:
            args = [evaluate(ectx.compile(a, layout), data) for a in w.args]
            args = [(np.full(n, v) if np.ndim(v) == 0 else v, m) for v, m in args]
            cols.append(self._compute(w, args, ctx))
        yield Chunk(cols, n)

    def _compute(self, w, args, ctx):
        n, ps, pe, qs, qe, pid, peerflag, ordered = ctx
        idx = np.arange(n)
        name = w.name
        if name == "row_number":
            return (idx - ps + 1).astype(np.int64), None
        if name == "rank":
            return (qs - ps + 1).astype(np.int64), None
        if name == "dense_rank":
            c = np.cumsum(peerflag)
            return (c - c[ps] + 1).astype(np.int64), None
        if name == "percent_rank":
            size = pe - ps + 1
            with np.errstate(all="ignore"):
                r = np.where(size > 1, (qs - ps) / np.maximum(size - 1, 1), 0.0)
            return r.astype(np.float64), None
        if name == "cume_dist":
            return ((qe - ps + 1) / (pe - ps + 1)).astype(np.float64), None
        if name == "ntile":
            v, m = args[0]
            if m is not None and m.any():
                raise errors.DataError("argument of ntile must be greater than zero",
                                       sqlstate="22014")
            buckets = np.asarray(v, dtype=np.int64)
            if np.any(buckets <= 0):
                raise errors.DataError("argument of ntile must be greater than zero",
                                       sqlstate="22014")
            size = pe - ps + 1
            pos = idx - ps
            q, r = size // buckets, size % buckets
            big = r * (q + 1)
            with np.errstate(all="ignore"):
                out = np.where(pos < big, pos // np.maximum(q + 1, 1),
                               r + (pos - big) // np.maximum(q, 1)) + 1
            return out.astype(np.int64), None
        f = family(w.type)
        if name in ("lag", "lead"):
            v, m = args[0]
            off = np.ones(n, np.int64)
            if len(args) > 1:
                ov, om = args[1]
                off = np.asarray(ov, dtype=np.int64)
                if om is not None:
                    off = np.where(om, 0, off)
            tgt = idx - off if name == "lag" else idx + off
            inside = (tgt >= ps) & (tgt <= pe)
            safe = np.where(inside, tgt, idx)
            vals = np.array(v[safe], dtype=_DT[f], copy=True)
            mask = (m[safe] if m is not None else np.zeros(n, bool)) & inside
            if len(args) > 2:
                dv, dm = args[2]
                vals[~inside] = np.asarray(dv, dtype=_DT[f])[~inside]
                mask[~inside] = False if dm is None else dm[~inside]
            else:
                vals[~inside] = _FILL[f]
                mask[~inside] = True
            if len(args) > 1 and args[1][1] is not None:
                mask |= args[1][1]
            return vals, (mask if mask.any() else None)
        if name in ("first_value", "last_value"):
            v, m = args[0]
            at = ps if name == "first_value" else qe
            return v[at], (None if m is None else m[at])
        # aggregates over the default frame: rows ps .. qe
        end = qe
        if name == "count" and not args:
            return (end - ps + 1).astype(np.int64), None
        v, m = args[0]
        ok = np.ones(n, bool) if m is None else ~m
        cnt = np.cumsum(ok)
        start_cnt = cnt[ps] - ok[ps]
        count = cnt[end] - start_cnt
        if name == "count":
            return count.astype(np.int64), None
        empty = count == 0
        emask = empty if empty.any() else None
        if name in ("sum", "avg"):
            if v.dtype.kind == "f" or name == "avg":
                x = np.where(ok, np.asarray(v, np.float64), 0.0)
                cs = np.cumsum(x)
                s = cs[end] - cs[ps] + x[ps]
                if name == "avg":
                    with np.errstate(all="ignore"):
                        return np.where(empty, 0.0, s / np.maximum(count, 1)), emask
                return np.where(empty, 0.0, s), emask
            x = np.where(ok, np.asarray(v, np.int64), 0)
            est = np.cumsum(x.astype(np.float64))
            if np.any(np.abs(est) >= 2.0 ** 62):
                raise errors.NumericValueOutOfRange("bigint out of range")
            cs = np.cumsum(x)
            s = cs[end] - cs[ps] + x[ps]
            return np.where(empty, 0, s).astype(np.int64), emask
        if name in ("min", "max"):
            uniq, code = np.unique(v[ok] if not ok.all() else v, return_inverse=True)
            codes = np.full(n, -1, dtype=np.int64)
            codes[ok] = code.reshape(-1)
            k = len(uniq) + 1
            if name == "min":
                codes = np.where(ok, (k - 2) - codes, -1)
            shifted = np.where(ok, codes, -1) + pid * (k + 1) + 1
            run = np.maximum.accumulate(shifted)
            got = run[end] - pid * (k + 1) - 1
            have = (got >= 0) & ~empty
            got = np.where(have, got, 0)
            if name == "min":
                got = (k - 2) - got
            if len(uniq) == 0:
                return np.full(n, _FILL[f], dtype=_DT[f]), np.ones(n, bool)
            out = np.asarray(uniq)[np.clip(got, 0, len(uniq) - 1)]
            out = np.array(out, dtype=_DT[f])
            mask = ~have
            return out, (mask if mask.any() else None)
        raise errors.NotSupportedError(f"window function {name} is not supported")


assert dt
