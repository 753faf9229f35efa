"""Scans of things that are not tables: a subquery in FROM (Subquery Scan), a WITH query
(CTE Scan), a table function (Function Scan: generate_series, unnest), and the select list's
set-returning functions (ProjectSet).

* **Subquery Scan** renames its child's output columns (``("out", i)``) to the range
  entry's keys and applies the conditions on it (its Filter).
* **CTE Scan** reads a WITH query's rows: the query runs at most once per execution (its
  rows are kept in ``ExecContext.ctes``), however many CTE Scans read it, as PostgreSQL's
  CTEs materialize.
* **Function Scan** computes ``unnest(array)`` (the array's elements) or
  ``generate_series(start, stop [, step])`` over integers,
  doubles or timestamps (a step of months is applied on the calendar) as whole arrays.
* **ProjectSet** (``SELECT generate_series(1, n) FROM t``) repeats each input row once
  per value of its longest series, the shorter series giving NULL, as PostgreSQL 10+.
"""

from __future__ import annotations

import datetime as _dt

import numpy as np

import minidb.errors as errors
from minidb.exec.chunk import Chunk, rows_to_chunk
from minidb.exec.compile import K, truth
from minidb.exec.expr import and_all, deparse
from minidb.exec.nodes import PlanNode
from minidb.types import int_to_timestamp, timestamp_to_int

__all__ = ["SubqueryScanNode", "CTEScanNode", "FunctionScanNode", "ProjectSetNode",
           "series", "series_lengths"]

BATCH = 65536


class _FilteredScan(PlanNode):
    def _setup_filter(self, ectx):
        if not self.quals:
            return None
        q = ectx.compile(and_all(self.quals), self.layout())
        if isinstance(q, K):
            return bool(q.value)
        return q

    def _filter(self, q, chunk):
        if q is None:
            return chunk
        if q is True or q is False:
            return chunk if q else chunk.take(np.empty(0, np.int64))
        return chunk.select(truth(q, chunk))

    def details(self, qualify):
        return ["Filter: " + deparse(and_all(self.quals), qualify)] if self.quals else []


class SubqueryScanNode(_FilteredScan):

    def __init__(self, child, entry, quals=(), title=None):
        keys = [(entry.index, i) for i in range(len(entry.columns))]
        super().__init__([child], keys, [t for _, t in entry.columns])
        self.entry = entry
        self.quals = list(quals)
        self._title = title

    def title(self):
        return self._title or f"Subquery Scan on {self.entry.alias}"

    def execute(self, ectx):
        q = self._setup_filter(ectx)
        if q is False:
            return
        n = len(self.keys)
        it = self.children[0].run(ectx)
        try:
            for ch in it:
                out = self._filter(q, Chunk(list(ch.cols[:n]), ch.n))
                if out.n:
                    yield out
        finally:
            it.close()


class CTEScanNode(_FilteredScan):

    def __init__(self, cte, entry, quals=()):
        keys = [(entry.index, i) for i in range(len(entry.columns))]
        super().__init__([], keys, [t for _, t in entry.columns])
        self.cte = cte
        self.entry = entry
        self.quals = list(quals)

    def title(self):
        name = self.cte.name
        return f"CTE Scan on {name}" + ("" if self.entry.alias == name
                                        else f" {self.entry.alias}")

    def execute(self, ectx):
        q = self._setup_filter(ectx)
        if q is False:
            return
        data = ectx.ctes.get(id(self.cte))
        if data is None:
            root = self.cte.plan
            data = root.run_all(ectx)
            ectx.ctes[id(self.cte)] = data
        n = len(self.keys)
        if data.n:
            out = self._filter(q, Chunk(list(data.cols[:n]), data.n))
            if out.n:
                yield out


def series_lengths(start, stop, step, live=None):
    """Number of values of each generate_series(start, stop, step) (arrays)."""
    step = np.asarray(step)
    if np.any((step == 0) if live is None else ((step == 0) & live)):
        raise errors.InvalidParameterValue("step size cannot equal zero")
    safe = np.where(step == 0, 1, step)
    if np.asarray(start).dtype.kind == "f" or np.asarray(stop).dtype.kind == "f" or \
            safe.dtype.kind == "f":
        n = np.floor((np.asarray(stop, np.float64) - start) / safe + 1e-12) + 1
    else:
        n = (np.asarray(stop, np.int64) - np.asarray(start, np.int64)) // safe + 1
    return np.maximum(n, 0).astype(np.int64)


def _month_series(start: int, stop: int, months: int, micros: int) -> np.ndarray:
    """A series with a calendar step: each value is the previous one plus the interval
    (months first, clamped to the month's last day, then the rest), as PostgreSQL adds."""
    out = []
    cur = int_to_timestamp(int(start))
    end = int_to_timestamp(int(stop))
    fwd = months > 0 or (months == 0 and micros > 0)
    while (cur <= end) if fwd else (cur >= end):
        out.append(timestamp_to_int(cur))
        total = cur.month - 1 + months
        y, m = cur.year + total // 12, total % 12 + 1
        cur = cur.replace(year=y, month=m, day=min(cur.day, _days_in(y, m))) + \
            _dt.timedelta(microseconds=micros)
        if len(out) > 10_000_000:
            raise errors.ProgramLimitExceeded("generate_series result too large")
    return np.array(out, dtype=np.int64)


def _days_in(y, m):
    nxt = _dt.date(y + (m == 12), m % 12 + 1, 1)
    return (nxt - _dt.date(y, m, 1)).days


def series(start, stop, step, is_ts: bool):
    """The values of one generate_series call (scalars in; an array out)."""
    if is_ts:
        months, micros = step
        if months == 0 and micros == 0:
            raise errors.InvalidParameterValue("step size cannot equal zero")
        if months:
            return _month_series(start, stop, months, micros)
        step = micros
    n = int(series_lengths(np.array([start]), np.array([stop]), np.array([step]))[0])
    if isinstance(start, float) or isinstance(stop, float) or isinstance(step, float):
        return start + step * np.arange(n, dtype=np.float64)
    return np.int64(start) + np.int64(step) * np.arange(n, dtype=np.int64)


def _call_args(ectx, call):
    vals = []
    for a in call.args:
        c = ectx.compile(a, {})
        if not isinstance(c, K):    # (an ARRAY(subquery): one value, computed here)
            v, m = c.fn(Chunk([], 1), None)
            vals.append(None if m is not None and m[0] else v[0])
            continue
        vals.append(c.value)
    return vals


class FunctionScanNode(_FilteredScan):

    def __init__(self, entry, call, quals=()):
        super().__init__([], [(entry.index, 0)], [entry.columns[0][1]])
        self.entry = entry
        self.call = call
        self.quals = list(quals)

    def title(self):
        return f"Function Scan on {self.call.name}" + (
            "" if self.entry.alias == self.call.name else f" {self.entry.alias}")

    def execute(self, ectx):
        q = self._setup_filter(ectx)
        if q is False:
            return
        vals = _call_args(ectx, self.call)
        if any(v is None for v in vals):
            return
        if self.call.name == "unnest":         # an array's elements (NULLs kept)
            elems = list(vals[0])
            if elems:
                out = self._filter(q, rows_to_chunk([(x,) for x in elems], self.types))
                if out.n:
                    yield out
            return
        is_ts = self.types[0].name == "timestamp"
        step = vals[2] if len(vals) > 2 else 1
        if not is_ts and self.types[0].name == "double precision":
            vals = [float(v) for v in vals[:2]]
            step = float(step)
        data = series(vals[0], vals[1], step, is_ts)
        for s in range(0, len(data), BATCH):
            part = data[s:s + BATCH]
            out = self._filter(q, Chunk([(part, None)], len(part)))
            if out.n:
                yield out


class ProjectSetNode(PlanNode):
    """The select list's set-returning functions: columns ``("srf", k)`` added to each
    input row, repeated once per value."""
    label = "ProjectSet"

    def __init__(self, child, srfs):
        keys = list(child.keys) + [("srf", k) for k in range(len(srfs))]
        super().__init__([child], keys, list(child.types) + [f.type for f in srfs])
        self.srfs = list(srfs)

    def execute(self, ectx):
        from minidb.exec.compile import evaluate
        child = self.children[0]
        layout = child.layout()
        comp = [[ectx.compile(a, layout) for a in f.args] for f in self.srfs]
        it = child.run(ectx)
        try:
            for ch in it:
                out = self._expand(ch, comp, evaluate)
                if out is not None and out.n:
                    yield out
        finally:
            it.close()

    def _expand(self, ch, comp, evaluate):
        n = ch.n
        per = []
        for f, args in zip(self.srfs, comp):
            vs = []
            null = np.zeros(n, bool)
            is_ts = f.type.name == "timestamp"
            for c in (args[:2] if is_ts else args):
                v, m = evaluate(c, ch)
                v = np.full(n, v) if np.ndim(v) == 0 else np.asarray(v)
                if m is not None:
                    null |= m
                vs.append(v)
            if len(vs) < 3 and not is_ts:
                vs.append(np.ones(n, dtype=np.int64))
            if is_ts:
                months, micros = args[2].value
                if months == 0 and micros == 0:
                    raise errors.InvalidParameterValue("step size cannot equal zero")
                if months:
                    lists = [series(int(a), int(b), (months, micros), True)
                             for a, b in zip(vs[0], vs[1])]
                    lens = np.array([len(x) for x in lists], dtype=np.int64)
                    lens[null] = 0
                    per.append((lens, None, lists))
                    continue
                vs.append(np.full(n, micros, dtype=np.int64))
            if f.type.name == "double precision":
                vs = [np.asarray(v, np.float64) for v in vs]
            lens = series_lengths(vs[0], vs[1], vs[2], ~null)
            lens[null] = 0
            per.append((lens, (vs[0], vs[2]), None))
        total_len = np.max(np.stack([p[0] for p in per]), axis=0)
        rows = np.repeat(np.arange(n), total_len)
        within = np.arange(len(rows)) - np.repeat(np.cumsum(total_len) - total_len, total_len)
        base = ch.take(rows)
        cols = list(base.cols)
        for (lens, sv, lists), f in zip(per, self.srfs):
            mine = np.repeat(lens, total_len)
            mask = within >= mine
            if lists is not None:
                vals = np.zeros(len(rows), dtype=np.int64)
                for j in np.flatnonzero(~mask).tolist():
                    vals[j] = lists[rows[j]][within[j]]
            else:
                start, step = sv
                vals = start[rows] + step[rows] * within.astype(start.dtype
                                                               if start.dtype.kind == "f"
                                                               else np.int64)
                if f.type.name == "integer" and len(vals) and (
                        vals.max(initial=0) > 2 ** 31 - 1 or vals.min(initial=0) < -2 ** 31):
                    raise errors.NumericValueOutOfRange("integer out of range")
            cols.append((vals, mask if mask.any() else None))
        return Chunk(cols, len(rows))
