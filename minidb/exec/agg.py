"""Aggregation: count, sum, avg, min, max (and their DISTINCT forms), with or without
GROUP BY.

**Aggregate** (no GROUP BY) streams: each batch updates running states (``AggState``) with
whole-array numpy reductions (``sum``, ``min``, ``max``), so ``count(*)`` over a filtered scan
does one addition per batch.  DISTINCT arguments keep the batch-wise ``np.unique`` values and
reduce them at the end.  ``AggState`` is also the partial aggregate of a parallel scan: every
participant keeps its own states, and the Finalize Aggregate above the Gather (``gather.py``)
combines them (``AggState.combine``) - one implementation of each aggregate's transition,
combine and final function, serial or parallel.

**HashAggregate** (GROUP BY) gathers the group keys and aggregate arguments of all its
input (only those columns), numbers the groups (``nodes.factorize``: ``np.unique`` per key
column, combined), and computes every aggregate per group at once: ``bincount`` for
counts, ``reduceat`` over the rows sorted by group for sums, minima and maxima.  Groups come
out in key order.  Departure from PostgreSQL: no spilling to disk; the input's key and
argument columns must fit in memory (a real hash table is not needed: sorting once is
what numpy does fast).

Result types follow PostgreSQL with two departures: count -> bigint;
sum(smallint/integer/bigint) -> bigint (PostgreSQL: sum(bigint) is numeric; minidb raises
NumericValueOutOfRange past the bigint range instead); sum(double) -> double, sum(real) ->
real; sum / avg of numeric -> numeric (exact; avg with numeric division's scale), of
interval -> interval; avg of integers or doubles -> double (PostgreSQL: numeric for integer
input); min/max -> the argument's type.  Aggregates of no
rows are NULL except count, which is 0.  HAVING is the node's filter.
"""

from __future__ import annotations

import numpy as np

import minidb.errors as errors
from minidb.exec import datatypes as dt
from minidb.exec.chunk import Chunk, concat
from minidb.exec.datatypes import VECTOR_DTYPE, VECTOR_FILL, family
from minidb.exec.compile import K, evaluate, truth
from minidb.exec.expr import deparse
from minidb.exec.nodes import PlanNode, factorize

__all__ = ["AggNode", "AggState"]

_DT = VECTOR_DTYPE   # one definition: datatypes.VECTOR_DTYPE / VECTOR_FILL
_FILL = VECTOR_FILL


class AggNode(PlanNode):

    def __init__(self, child, group, aggs, having):
        keys = [("g", i) for i in range(len(group))] + [("a", j) for j in range(len(aggs))]
        types = [g.type for g in group] + [a.type for a in aggs]
        super().__init__([child], keys, types)
        self.group = list(group)
        self.aggs = list(aggs)
        self.having = having

    @property
    def label(self):
        return "HashAggregate" if self.group else "Aggregate"

    def details(self, qualify):
        out = []
        if self.group:
            out.append("Group Key: " + ", ".join(deparse(g, qualify) for g in self.group))
        if self.having is not None:
            out.append("Filter: " + deparse(self.having, qualify))
        return out

    def execute(self, ectx):
        child = self.children[0]
        layout = child.layout()
        args = [None if a.arg is None else ectx.compile(a.arg, layout) for a in self.aggs]
        having = ectx.compile(self.having, self.layout()) if self.having is not None else None
        if not all(_simple(a) for a in self.aggs):
            out = self._general(ectx, child, layout, args)
        elif self.group:
            out = self._grouped(ectx, child, layout, args)
        else:
            out = self._plain(ectx, child, args)
        if out is None:
            return
        if having is not None:
            before = out.n
            out = out.select(truth(having, out))
            ectx.note(self, "Rows Removed by Filter", before - out.n)
        if out.n:
            yield out

    # -- no GROUP BY -----------------------------------------------------------------------------
    def _plain(self, ectx, child, args):
        states = [AggState.for_agg(a) for a in self.aggs]
        it = child.run(ectx)
        try:
            for chunk in it:
                for st, c in zip(states, args):
                    if c is None:
                        st.add_rows(chunk.n)
                    else:
                        st.add(*evaluate(c, chunk))
        finally:
            it.close()
        cols = [st.result() for st in states]
        return Chunk(cols, 1)

    # -- GROUP BY --------------------------------------------------------------------------------
    def _grouped(self, ectx, child, layout, args):
        gcomp = [ectx.compile(g, layout) for g in self.group]
        gparts = [[] for _ in self.group]
        aparts = [[] for _ in self.aggs]
        n = 0
        it = child.run(ectx)
        try:
            for chunk in it:
                n += chunk.n
                for i, c in enumerate(gcomp):
                    gparts[i].append(Chunk([evaluate(c, chunk)], chunk.n))
                for j, c in enumerate(args):
                    if c is not None:
                        aparts[j].append(Chunk([evaluate(c, chunk)], chunk.n))
        finally:
            it.close()
        if n == 0:
            return None
        gcols = [concat(p, 1).cols[0] for p in gparts]
        g, first = factorize(gcols)
        ng = len(first)
        cols = [(v[first], None if m is None else m[first]) for v, m in gcols]
        for j, a in enumerate(self.aggs):
            if a.arg is None:
                cols.append((np.bincount(g, minlength=ng).astype(np.int64), None))
                continue
            v, m = concat(aparts[j], 1).cols[0]
            cols.append(_group_agg(a, v, m, g, ng))
        return Chunk(cols, ng)


    # -- FILTER, ORDER BY in the call, string_agg, array_agg, bool_*, stddev, variance ----------
    def _general(self, ectx, child, layout, args):
        """Every aggregate computed per group from all of the input's values at once (the
        forms the streaming states do not cover)."""
        gcomp = [ectx.compile(g, layout) for g in self.group]
        extra = [[ectx.compile(x, layout) for x in a.extra] for a in self.aggs]
        filt = [ectx.compile(a.filter, layout) if a.filter is not None else None
                for a in self.aggs]
        order = [[ectx.compile(o, layout) for o in a.order] for a in self.aggs]
        parts = []
        n = 0
        it = child.run(ectx)
        try:
            for chunk in it:
                n += chunk.n
                row = [_full(evaluate(c, chunk), chunk.n) for c in gcomp]
                for j, a in enumerate(self.aggs):
                    row.append(_full(evaluate(args[j], chunk), chunk.n) if args[j] is not None
                               else (np.zeros(chunk.n, bool), None))
                    row += [_full(evaluate(c, chunk), chunk.n) for c in extra[j]]
                    if filt[j] is not None:
                        tv = truth(filt[j], chunk)
                        row.append((np.full(chunk.n, bool(tv)) if np.ndim(tv) == 0 else tv,
                                    None))
                    row += [_full(evaluate(c, chunk), chunk.n) for c in order[j]]
                parts.append(Chunk(row, chunk.n))
        finally:
            it.close()
        if n == 0 and self.group:
            return None
        width = len(gcomp) + sum(1 + len(extra[j]) + (filt[j] is not None) + len(order[j])
                                 for j in range(len(self.aggs)))
        data = concat(parts, width) if parts else Chunk([(np.empty(0), None)] * width, 0)
        pos = len(gcomp)
        if self.group:
            gcols = data.cols[:pos]
            g, first = factorize(gcols)
            cols = [(v[first], None if m is None else m[first]) for v, m in gcols]
        else:
            g, first = np.zeros(n, np.int64), np.array([0])
            cols = []
        ng = len(first)
        for j, a in enumerate(self.aggs):
            v, m = data.cols[pos]
            pos += 1
            ex = data.cols[pos:pos + len(extra[j])]
            pos += len(extra[j])
            keep = np.ones(n, bool)
            if filt[j] is not None:
                keep = np.asarray(data.cols[pos][0], dtype=bool)
                pos += 1
            ocols = data.cols[pos:pos + len(order[j])]
            pos += len(order[j])
            cols.append(_general_agg(a, v, m, ex, keep, ocols, g, ng))
        return Chunk(cols, ng)


def _simple(a) -> bool:
    return a.name in ("count", "sum", "avg", "min", "max") and a.filter is None and \
        not a.order and not a.extra


def _full(col, n):
    v, m = col
    return (np.full(n, v) if np.ndim(v) == 0 else v), m


def _general_agg(a, v, m, extra, keep, ocols, g, ng):
    """One aggregate per group, over the rows where ``keep`` (FILTER)."""
    from minidb.exec.chunk import column_to_list
    from minidb.exec.nodes import sort_order
    name = a.name
    if a.arg is None:                                  # count(*) FILTER (...)
        return np.bincount(g[keep], minlength=ng).astype(np.int64), None
    if _simple_name(name) and not a.order:
        sel = np.flatnonzero(keep)
        return _group_agg(a, v[sel], None if m is None else m[sel], g[sel], ng)
    ok = keep if m is None else keep & ~m
    if name in ("bool_and", "bool_or"):
        vv = np.asarray(v, dtype=bool)
        cnt = np.bincount(g[ok], minlength=ng)
        trues = np.bincount(g[ok & vv], minlength=ng)
        out = (trues == cnt) if name == "bool_and" else (trues > 0)
        empty = cnt == 0
        return out & ~empty, (empty if empty.any() else None)
    if name in ("stddev", "stddev_samp", "stddev_pop", "variance", "var_samp", "var_pop"):
        x = np.asarray(v, dtype=np.float64)
        cnt = np.bincount(g[ok], minlength=ng).astype(np.float64)
        s1 = np.bincount(g[ok], weights=x[ok], minlength=ng)
        with np.errstate(all="ignore"):
            mean = s1 / np.maximum(cnt, 1)
            dev = np.bincount(g[ok], weights=(x[ok] - mean[g[ok]]) ** 2, minlength=ng)
            pop = name in ("stddev_pop", "var_pop")
            denom = cnt if pop else cnt - 1
            var = dev / np.where(denom > 0, denom, 1)
        bad = denom <= 0
        out = np.sqrt(var) if name.startswith("stddev") else var
        out = np.where(bad, 0.0, out)
        return out, (bad if bad.any() else None)
    # string_agg / array_agg: values in ORDER BY order within each group
    rows = np.flatnonzero(keep if name == "array_agg" else ok)
    if a.distinct:
        sub_v = v[rows]
        code, firsts = factorize([(g[rows], None), (sub_v, None if m is None else m[rows])])
        rows = rows[np.sort(firsts)]
        if not a.order:
            ocols = [(v, m)]
    keys = [(g[rows], None, False, False)]
    for (ov, om), d, nf in zip(ocols, a.order_desc or (False,) * len(ocols),
                               a.order_nf or (False,) * len(ocols)):
        keys.append((np.asarray(ov)[rows], None if om is None else om[rows], d, nf))
    if ocols and a.distinct and not a.order:
        keys = keys[:1] + [(np.asarray(v)[rows], None if m is None else m[rows], False, False)]
    from minidb.exec.chunk import Chunk as _C
    order = sort_order(_C([], len(rows)), keys) if len(rows) else np.empty(0, np.int64)
    rows = rows[order]
    out = np.empty(ng, dtype=object)
    mask = np.ones(ng, bool)
    if name == "string_agg":
        sep_v, sep_m = extra[0]
        buckets: dict = {}
        for r in rows.tolist():
            gi = g[r]
            if gi in buckets:
                sep = "" if (sep_m is not None and sep_m[r]) else sep_v[r]
                buckets[gi].append(sep)
            else:
                buckets[gi] = []
            buckets[gi].append(v[r])
        for gi in range(ng):
            if gi in buckets:
                out[gi] = "".join(buckets[gi])
                mask[gi] = False
            else:
                out[gi] = ""
        return out, (mask if mask.any() else None)
    elem = a.type.elem
    vals = column_to_list(np.asarray(v)[rows], None if m is None else m[rows], elem)
    lists: dict = {}
    for r, x in zip(rows.tolist(), vals):
        lists.setdefault(int(g[r]), []).append(x)
    for gi in range(ng):
        if gi in lists:
            out[gi] = lists[gi]
            mask[gi] = False
        else:
            out[gi] = None
    return out, (mask if mask.any() else None)


def _simple_name(name) -> bool:
    return name in ("count", "sum", "avg", "min", "max")


class AggState:
    """The state of one aggregate without GROUP BY, and its three functions: transition
    (``add`` a batch's values, ``add_rows`` for ``count(*)``), combine (``combine`` another
    state of the same aggregate: partial aggregation, the parallel scan's participants) and
    final (``result`` as a one-row SQL column, ``value`` as a Python value).

    ``fam`` is the argument's family: ``float`` sums in float64, every other family sums
    exactly as Python integers (beyond 64 bits if need be; ``result`` then raises past the
    bigint range, ``value`` does not); None takes the family from each batch's dtype (the
    parallel scan's aggregates, which know columns, not types).  ``rfam``, the result's family,
    is needed by ``result`` only.  A state pickles (a worker sends its partial states to its
    leader); a DISTINCT state does not combine."""

    __slots__ = ("name", "fam", "rfam", "count", "sum", "best", "distinct", "real")

    def __init__(self, name: str, fam: str | None = None, rfam: str | None = None,
                 distinct: bool = False):
        self.name = name
        self.fam = fam
        self.rfam = rfam
        self.count = 0
        self.sum = 0
        self.best = None
        self.distinct = [] if distinct else None
        self.real = False           # sum(real): the result rounded to float32

    @classmethod
    def for_agg(cls, agg) -> "AggState":
        """The state of a bound aggregate call (``expr.AggCall``)."""
        fam = family(agg.arg.type) if agg.arg is not None else "int"
        st = cls(agg.name, fam, family(agg.type), agg.distinct)
        st.real = agg.type.name == "real"
        return st

    # -- transition ------------------------------------------------------------------------------
    def add_rows(self, n: int) -> None:
        """``count(*)`` over ``n`` more rows."""
        self.count += n

    def add(self, vals, mask):
        if np.ndim(vals) == 0:
            vals = np.full(1, vals)
        if mask is not None:
            vals = vals[~mask]
        if not len(vals):
            return
        if self.distinct is not None:
            self.distinct.append(np.unique(vals))
            return
        self._reduce(vals)

    def _reduce(self, vals):
        self.count += len(vals)
        name = self.name
        if name in ("sum", "avg"):
            fam = self.fam
            if fam == "float" or (fam is None and vals.dtype.kind == "f"):
                self.sum += float(np.sum(vals, dtype=np.float64))
            elif fam == "num" or fam == "interval":
                self.sum = _object_sum(vals.tolist(), self.sum, fam)
            else:
                self.sum += _exact_sum(vals)
        elif name == "min":
            m = vals.min()
            self.best = m if self.best is None or m < self.best else self.best
        elif name == "max":
            m = vals.max()
            self.best = m if self.best is None or m > self.best else self.best

    # -- combine ---------------------------------------------------------------------------------
    def combine(self, other: "AggState") -> None:
        """Merge ``other``'s rows into this state (as if this state had seen them)."""
        if self.distinct is not None or other.distinct is not None:
            raise errors.InternalError(f"{self.name}(DISTINCT) states do not combine")
        if not other.count:
            return
        self.count += other.count
        name = self.name
        if name in ("sum", "avg"):
            self.sum = _object_sum([other.sum], self.sum, self.fam) \
                if self.fam in ("num", "interval") else self.sum + other.sum
        elif name in ("min", "max") and other.best is not None:
            b = other.best
            if self.best is None or (b < self.best if name == "min" else b > self.best):
                self.best = b

    # -- final -----------------------------------------------------------------------------------
    def _finish_distinct(self):
        if self.distinct is not None and self.distinct:
            allv = np.unique(np.concatenate(self.distinct))
            self.distinct = None
            self._reduce(allv)

    def result(self):
        """The final value as a one-row column ``(values, mask)`` of the result's type."""
        self._finish_distinct()
        name, f = self.name, self.rfam
        if name == "count":
            return np.array([self.count], dtype=np.int64), None
        if self.count == 0:
            return np.array([_FILL[f]], dtype=_DT[f]), np.ones(1, bool)
        if f in ("num", "interval", "float") and name in ("sum", "avg"):
            out = np.empty(1, dtype=_DT[f])
            out[0] = _object_final(name, self.sum, self.count, f, self.real)
            return out, None
        if name == "sum":
            if f == "int":
                _check_bigint(self.sum)
            return np.array([self.sum], dtype=_DT[f]), None
        best = self.best
        arr = np.empty(1, dtype=_DT[f])
        arr[0] = best
        return arr, None

    def value(self):
        """The final value as a Python value: count an int, sum an int (exact) or a float,
        avg a float, min/max the values' Python scalar; None over no rows but for count."""
        self._finish_distinct()
        name = self.name
        if name == "count":
            return self.count
        if self.count == 0:
            return None
        if name == "sum":
            return self.sum
        if name == "avg":
            return self.sum / self.count
        b = self.best
        return b.item() if isinstance(b, np.generic) else b


def _object_sum(values: list, start, fam: str):
    """Exact sum of numeric Decimals or of intervals (field by field), from ``start``."""
    from minidb.types import NUMERIC_CONTEXT, Interval
    if fam == "num":
        acc = start if start else dt.VECTOR_FILL["num"]
        add = NUMERIC_CONTEXT.add
        for x in values:
            acc = add(acc, x)
        return acc
    m, d, u = (start.months, start.mdays, start.usecs) if isinstance(start, Interval) \
        else (0, 0, 0)
    for x in values:
        m += x.months
        d += x.mdays
        u += x.usecs
    return Interval(m, d, u)


def _object_final(name: str, total, count: int, f: str, real: bool = False):
    """sum / avg of a group from its exact total: numeric avg with numeric division's
    scale, interval avg with interval division, sum(real) rounded to float32."""
    from minidb.exec import datetimes as dtx
    from minidb.exec.typeops import numeric_div
    if f == "float":
        v = total if name == "sum" else total / count
        if real and name == "sum":
            return dt.cast_value(float(v), dt.DOUBLE, dt.REAL)
        return v
    if name == "sum":
        return total
    if f == "num":
        import decimal
        return numeric_div(total, decimal.Decimal(count))
    return dtx.interval_div(total, count)


def _exact_sum(vals) -> int:
    v = np.asarray(vals, dtype=np.int64)
    est = float(np.sum(v, dtype=np.float64))
    if abs(est) < 2.0 ** 62:
        return int(np.sum(v))
    return sum(v.tolist())


def _check_bigint(x: int) -> None:
    if not dt.INT8_MIN <= x <= dt.INT8_MAX:
        raise errors.NumericValueOutOfRange("bigint out of range")


def _group_agg(a, v, m, g, ng):
    """One aggregate per group: (values, mask) of length ``ng``."""
    f = family(a.type)
    if m is not None:
        keep = ~m
        v, g = v[keep], g[keep]
    if a.distinct and len(v):
        code, first = factorize([(g, None), (v, None)])
        v, g = v[first], g[first]
    cnt = np.bincount(g, minlength=ng).astype(np.int64)
    if a.name == "count":
        return cnt, None
    empty = cnt == 0
    mask = empty if empty.any() else None
    out = np.full(ng, _FILL[f], dtype=_DT[f])
    if not len(v):
        return out, mask
    order = np.argsort(g, kind="stable")
    sv, sg = v[order], g[order]
    starts = np.flatnonzero(np.r_[True, sg[1:] != sg[:-1]])
    groups = sg[starts]
    if a.name in ("sum", "avg") and family(a.arg.type) in ("num", "interval"):
        af = family(a.arg.type)
        ends = np.r_[starts[1:], len(sv)]
        lst = sv.tolist()
        for k, gi in enumerate(groups.tolist()):
            tot = _object_sum(lst[starts[k]:ends[k]], None, af)
            out[gi] = _object_final(a.name, tot, int(cnt[gi]), f)
        return out, mask
    if a.name in ("sum", "avg"):
        if family(a.arg.type) == "float" or a.name == "avg":
            sums = np.add.reduceat(sv.astype(np.float64), starts)
            if a.name == "sum" and f == "int":
                pass
        else:
            iv = sv.astype(np.int64)
            est = np.add.reduceat(iv.astype(np.float64), starts)
            sums = np.add.reduceat(iv, starts)
            if np.any(np.abs(est) >= 2.0 ** 62):
                for k in np.flatnonzero(np.abs(est) >= 2.0 ** 62).tolist():
                    e = starts[k + 1] if k + 1 < len(starts) else len(sv)
                    _check_bigint(sum(iv[starts[k]:e].tolist()))
        if a.name == "avg":
            out[groups] = sums / cnt[groups]
        else:
            out[groups] = sums
            if a.type.name == "real":
                out = out.astype(np.float32).astype(np.float64)
        return out, mask
    red = np.minimum if a.name == "min" else np.maximum
    out[groups] = red.reduceat(sv, starts)
    return out, mask


assert K
