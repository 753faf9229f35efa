"""Subqueries inside expressions: InitPlan, hashed SubPlan and correlated SubPlan
(PostgreSQL's nodeSubplan.c).

A ``SubLink`` (``expr.py``) holds its subquery's plan (``SubPlan.root``, planned with the
statement).  ``compile_sublink`` turns it into a compiled expression (``compile.py``'s
``K`` / ``V``):

* **InitPlan** - an uncorrelated scalar subquery or EXISTS: the plan runs once per
  execution (its value is kept in ``ExecContext.initplans``) and the SubLink becomes a
  constant.  A scalar subquery returning more than one row is error 21000; none gives
  NULL.  EXISTS stops at the first row.
* **hashed SubPlan** - an uncorrelated ``x [NOT] IN (subquery)``: the subquery's values
  are read once into a sorted array and each batch is probed with ``np.isin``.  SQL's NULL
  rules: no match and a NULL among the values (or a NULL ``x`` and a non-empty set) is
  NULL, so ``NOT IN`` over a set holding a NULL is never TRUE; over an empty set ``IN``
  is FALSE and ``NOT IN`` TRUE whatever ``x`` is.
* **SubPlan** - a correlated subquery: for each distinct combination of the outer values
  it reads (``SubLink.outer``) in a batch, the plan runs with those values set in
  ``ExecContext.outer`` (where its ``OuterRef`` s read them), once per distinct key rather
  than once per row.

Correlated ``EXISTS`` and ``IN`` in a WHERE clause are usually not run this way: the
planner turns them into semi and anti joins (``minidb/sql/planner/joins.py``).
"""

from __future__ import annotations

import numpy as np

import minidb.errors as errors
from minidb.exec.chunk import concat

__all__ = ["compile_sublink", "run_subplan"]


def run_subplan(ectx, sub, first_only: bool = False):
    """All rows of the subquery (one Chunk), or its first batch with ``first_only``."""
    it = sub.root.run(ectx)
    chunks = []
    try:
        for ch in it:
            if ch.n:
                chunks.append(ch)
                if first_only:
                    break
    finally:
        it.close()
    return concat(chunks, len(sub.types))


def _scalar(ectx, sub):
    data = run_subplan(ectx, sub)
    if data.n == 0:
        return None
    if data.n > 1:
        raise errors.DataError("more than one row returned by a subquery used as an "
                               "expression", sqlstate="21000")
    v, m = data.cols[0]
    if m is not None and m[0]:
        return None
    x = v[0]
    return x.item() if isinstance(x, np.generic) else x


def _array(ectx, sub) -> list:
    """ARRAY(subquery): the first column's values, in the subquery's order."""
    data = run_subplan(ectx, sub)
    if data.n == 0:
        return []
    v, m = data.cols[0]
    if np.ndim(v) == 0:
        v = [v] * data.n
    out = [x.item() if isinstance(x, np.generic) else x for x in list(v)[:data.n]]
    if m is not None:
        out = [None if null else x for x, null in zip(out, m[:data.n])]
    return out


def _lists(arr: list):
    def each_row(chunk, live):
        out = np.empty(chunk.n, dtype=object)
        for i in range(chunk.n):
            out[i] = list(arr)
        return out, None
    return each_row


def _exists(ectx, sub):
    return run_subplan(ectx, sub, first_only=True).n > 0


def _value_set(comp, ectx, sub, evaluate):
    """(sorted distinct non-NULL values, whether a NULL was among them, any rows)."""
    data = run_subplan(ectx, sub)
    if data.n == 0:
        return np.empty(0), False, False
    right = comp.__class__({("sub", 0): 0}, comp.params, comp.now, ectx).c(sub.test.right)
    v, m = evaluate(right, data)
    has_null = m is not None and bool(m.any())
    if m is not None:
        v = v[~m]
    return np.unique(v) if len(v) else v, has_null, True


def _probe(av, am, values, has_null, nonempty, negated, n):
    if not nonempty:
        return np.full(n, negated), None
    hit = np.isin(av, values) if len(values) else np.zeros(n, bool)
    mask = None
    unknown = ~hit if has_null else np.zeros(n, bool)
    if am is not None:
        unknown = unknown | am
        hit = hit & ~am
    if unknown.any():
        mask = unknown
    r = ~hit if negated else hit.copy()
    if mask is not None:
        r &= ~mask
    return r, mask


def compile_sublink(comp, e, K, V, evaluate, dtypes, fills):
    """The compiled form of SubLink ``e`` (``comp``: the compiler; the other arguments are
    ``compile.py``'s, passed in so that this module does not import it)."""
    ectx = comp.ectx
    if ectx is None:
        raise errors.NotSupportedError("a subquery is not supported here")
    sub = e.sub
    if sub.root is None:
        raise errors.InternalError("subquery was not planned")
    if not e.outer:
        if e.kind in ("scalar", "exists", "array"):
            if sub not in ectx.initplans:
                ectx.initplans[sub] = _scalar(ectx, sub) if e.kind == "scalar" \
                    else _array(ectx, sub) if e.kind == "array" else _exists(ectx, sub)
            if e.kind == "array":       # a list per row (a constant would broadcast it)
                return V(_lists(ectx.initplans[sub]), e.type)
            return K(ectx.initplans[sub], e.type)
        if sub not in ectx.initplans:
            ectx.initplans[sub] = _value_set(comp, ectx, sub, evaluate)
        values, has_null, nonempty = ectx.initplans[sub]
        a = comp.c(e.arg)
        neg = e.negated

        def hashed(chunk, live):
            av, am = evaluate(a, chunk, live)
            if np.ndim(av) == 0:
                av = np.full(chunk.n, av)
            return _probe(np.asarray(av), am, values, has_null, nonempty, neg, chunk.n)
        return V(hashed, e.type)

    outer = [comp.c(o) for o in e.outer]
    keys = list(sub.outer_keys)
    arg = comp.c(e.arg) if e.arg is not None else None
    from minidb.exec.datatypes import family
    _DTYPE, _FILL = dtypes, fills
    rf = family(e.type)

    def correlated(chunk, live):
        n = chunk.n
        cols = []
        for c in outer:
            v, m = evaluate(c, chunk, live)
            vl = v.tolist() if isinstance(v, np.ndarray) else [v] * n
            if m is not None:
                for k in np.flatnonzero(m).tolist():
                    vl[k] = None
            cols.append(vl)
        av = am = None
        if arg is not None:
            av, am = evaluate(arg, chunk, live)
            if np.ndim(av) == 0:
                av = np.full(n, av)
        rows = range(n) if live is None else np.flatnonzero(live).tolist()
        groups: dict = {}
        for r in rows:
            groups.setdefault(tuple(c[r] for c in cols), []).append(r)
        vals = np.full(n, _FILL[rf], dtype=_DTYPE[rf])
        mask = np.zeros(n, bool)
        saved = {k: ectx.outer.get(k, _MISSING) for k in keys}
        try:
            for key, members in groups.items():
                for k, v in zip(keys, key):
                    ectx.outer[k] = v
                idx = np.array(members, dtype=np.int64)
                if e.kind == "scalar":
                    x = _scalar(ectx, sub)
                    if x is None:
                        mask[idx] = True
                    else:
                        vals[idx] = x
                elif e.kind == "exists":
                    vals[idx] = _exists(ectx, sub)
                elif e.kind == "array":
                    arr = _array(ectx, sub)
                    for i in members:
                        vals[i] = list(arr)
                else:
                    values, has_null, nonempty = _value_set(comp, ectx, sub, evaluate)
                    r, m = _probe(av[idx], None if am is None else am[idx], values, has_null,
                                  nonempty, e.negated, len(idx))
                    vals[idx] = r
                    if m is not None:
                        mask[idx] = m
        finally:
            for k, v in saved.items():
                if v is _MISSING:
                    ectx.outer.pop(k, None)
                else:
                    ectx.outer[k] = v
        return vals, (mask if mask.any() else None)
    return V(correlated, e.type)


_MISSING = object()
