"""Operators and casts of the types beyond integers, doubles, booleans, text and timestamp:
numeric, real, smallint, date, time, timestamptz, interval, bytea, uuid (see ``datatypes``
for their vector forms).  ``compile.py`` calls `arith_fn`, `neg_fn` and `cast_fn` for any
operator or cast that involves one of them; the first five keep their numpy paths there.

Vectorized where the values are numpy integers: date +/- integer, date - date, date + time,
timestamp / timestamptz +/- an interval constant without months (the common ``ts + interval
'1 day'``), time +/- interval, integer casts.  Everything on object vectors (numeric
Decimals, intervals, and intervals added to timestamps with months, or with days across a
time zone's DST changes) loops in Python, one row at a time, as PostgreSQL's own functions
do; an error (division by zero, overflow) is raised only for a row in ``live``.

numeric arithmetic is exact (``types.NUMERIC_CONTEXT``); division's scale is PostgreSQL's
select_div_scale: at least 16 significant digits and at least the operands' scales, rounded
half away from zero.
"""

from __future__ import annotations

import decimal

import numpy as np

import minidb.errors as errors
from minidb.exec import datatypes as dt
from minidb.exec import datetimes as dtx
from minidb.types import (DATE_MAX, DATE_MIN, NUMERIC_CONTEXT, NUMERIC_NAN, UTC, Interval,
                          canon_numeric, fit_numeric, session_timezone)

__all__ = ["arith_fn", "neg_fn", "cast_fn", "numeric_div", "handles"]

_USPD = dtx.USECS_PER_DAY
_NEW = {"num", "date", "time", "tstz", "interval", "bytea", "uuid"}


def handles(rt, ta, tb=None) -> bool:
    """Is an operator with these types (result, operands) one of this module's?"""
    names = {rt.name, ta.name} | ({tb.name} if tb is not None else set())
    fams = {dt.family(rt), dt.family(ta)} | ({dt.family(tb)} if tb is not None else set())
    return bool(fams & _NEW) or bool(names & {"smallint", "real"})


def _n(a, b) -> int:
    if np.ndim(a):
        return len(a)
    return len(b) if np.ndim(b) else 1


def _as_list(x, n):
    if np.ndim(x):
        return x.tolist() if isinstance(x, np.ndarray) else list(x)
    return [x] * n


def rowwise(fn, a, b, live, dtype=object, fill=None):
    """``fn(x, y)`` for each row (scalars broadcast); errors only for live rows."""
    n = _n(a, b)
    al, bl = _as_list(a, n), _as_list(b, n)
    out = np.empty(n, dtype=dtype)
    if live is None or (np.ndim(live) == 0 and live):
        for i in range(n):
            out[i] = fn(al[i], bl[i])
        return out
    lv = np.broadcast_to(live, (n,)).tolist()
    for i in range(n):
        if lv[i]:
            out[i] = fn(al[i], bl[i])
        else:
            try:
                out[i] = fn(al[i], bl[i])
            except (errors.Error, ArithmeticError, ValueError, OverflowError):
                out[i] = fill if fill is not None else dt.VECTOR_FILL[
                    "num" if dtype is object else "int"]
    return out


def _any(cond, live) -> bool:
    if np.ndim(cond) == 0:
        return bool(cond) and (live is None or bool(np.any(live)))
    return bool(cond.any() if live is None else (cond & live).any())


# -- numeric ---------------------------------------------------------------------------------

def _weight(d: decimal.Decimal) -> tuple[int, int]:
    """(weight, first digit) of |d| in PostgreSQL's base-10000 digits."""
    adj = d.adjusted()
    w = adj // 4
    first = int(abs(d).scaleb(-4 * w, context=NUMERIC_CONTEXT))
    return w, first


def _dscale(d: decimal.Decimal) -> int:
    e = d.as_tuple().exponent
    return max(0, -e) if isinstance(e, int) else 0


def numeric_div(a: decimal.Decimal, b: decimal.Decimal) -> decimal.Decimal:
    """a / b with PostgreSQL's result scale (select_div_scale), half away from zero."""
    if b.is_zero() and not b.is_nan():
        raise errors.DivisionByZero("division by zero")
    if not (a.is_finite() and b.is_finite()):
        if a.is_finite() and b.is_infinite():     # x / Infinity is 0, as PostgreSQL
            return decimal.Decimal(0)
        try:
            return canon_numeric(NUMERIC_CONTEXT.divide(a, b))
        except decimal.InvalidOperation:
            return NUMERIC_NAN
    if a.is_zero():
        w1, f1 = 0, 0
    else:
        w1, f1 = _weight(a)
    w2, f2 = _weight(b)
    qweight = w1 - w2
    if f1 <= f2:
        qweight -= 1
    rscale = 16 - qweight * 4
    rscale = max(rscale, _dscale(a), _dscale(b), 0)
    rscale = min(rscale, 1000)
    q = NUMERIC_CONTEXT.divide(a, b)
    return q.quantize(decimal.Decimal(1).scaleb(-rscale), context=NUMERIC_CONTEXT)


def _numeric_mod(a, b):
    if b.is_zero():
        raise errors.DivisionByZero("division by zero")
    return NUMERIC_CONTEXT.remainder(a, b)


_NUM_OPS = {"+": NUMERIC_CONTEXT.add, "-": NUMERIC_CONTEXT.subtract,
            "*": NUMERIC_CONTEXT.multiply, "/": numeric_div, "%": _numeric_mod}


def _to_dec(x):
    return x if isinstance(x, decimal.Decimal) else decimal.Decimal(x)


class _NanLast:
    """A numeric made comparable when NaNs are about: NaN equals NaN and is above every
    number (PostgreSQL's numeric order); Python's Decimal refuses to order a NaN."""

    __slots__ = ("k",)

    def __init__(self, d):
        self.k = (1, 0) if isinstance(d, decimal.Decimal) and d.is_nan() else (0, d)

    def __lt__(self, o):
        return self.k < o.k

    def __le__(self, o):
        return self.k <= o.k

    def __gt__(self, o):
        return self.k > o.k

    def __ge__(self, o):
        return self.k >= o.k

    def __eq__(self, o):
        return self.k == o.k

    def __ne__(self, o):
        return self.k != o.k

    __hash__ = None


def nan_last(a, b):
    """Both operands of a numeric comparison wrapped so that NaN compares as PostgreSQL's."""
    def wrap(x):
        if np.ndim(x):
            out = np.empty(len(x), dtype=object)
            out[:] = [_NanLast(v) for v in x]
            return out
        return _NanLast(x)
    return wrap(a), wrap(b)


# -- the operators ---------------------------------------------------------------------------

def arith_fn(op: str, rt, ta, tb):
    """fn(a, b, live) -> result vector of ``a op b`` with result type ``rt`` and operand
    types ``ta``, ``tb`` (after the binder's casts)."""
    fr, fa, fb = dt.family(rt), dt.family(ta), dt.family(tb)
    if fr == "num":
        f = _NUM_OPS[op]

        def one(x, y):
            x, y = _to_dec(x), _to_dec(y)
            if x.is_nan() or y.is_nan():        # before any division by zero, as PostgreSQL
                return NUMERIC_NAN
            try:
                r = f(x, y)
            except decimal.InvalidOperation:    # Infinity - Infinity, Infinity * 0
                return NUMERIC_NAN
            return NUMERIC_NAN if r.is_nan() else r

        def num(a, b, live):
            return rowwise(one, a, b, live)
        return num
    key = (fa, op, fb)
    if key in (("date", "+", "int"), ("int", "+", "date"), ("date", "-", "int")):
        def date_int(a, b, live):
            r = np.asarray(a, np.int64) + (np.asarray(b, np.int64) if op == "+"
                                           else -np.asarray(b, np.int64))
            r = np.atleast_1d(r)
            if _any((r < DATE_MIN) | (r > DATE_MAX), live):
                raise errors.DatetimeFieldOverflow("date out of range")
            return r
        return date_int
    if key == ("date", "-", "date"):
        return lambda a, b, live: np.atleast_1d(np.asarray(a, np.int64) - np.asarray(b, np.int64))
    if key in (("date", "+", "time"), ("time", "+", "date")):
        def date_time(a, b, live):
            d, t = (a, b) if fa == "date" else (b, a)
            return np.atleast_1d(np.asarray(d, np.int64) * _USPD + np.asarray(t, np.int64))
        return date_time
    if fr in ("ts", "tstz") and op in ("+", "-"):
        sign = 1 if op == "+" else -1
        tz_aware = fr == "tstz"

        def ts_iv(a, b, live):
            ts, iv = (a, b) if fa in ("ts", "tstz") else (b, a)
            if np.ndim(iv) == 0:
                zone = session_timezone() if tz_aware else UTC
                simple = iv.months == 0 and (iv.mdays == 0 or not tz_aware or zone is UTC
                                             or not hasattr(zone, "key"))
                if simple:
                    r = np.atleast_1d(np.asarray(ts, np.int64)
                                      + sign * (iv.mdays * _USPD + iv.usecs))
                    return r
            add = dtx.add_interval_tstz if tz_aware else dtx.add_interval_ts
            return rowwise(lambda x, y: add(int(x), y, sign), ts, iv, live, dtype=np.int64,
                           fill=0)
        return ts_iv
    if fr == "interval" and fa in ("ts", "tstz"):          # ts - ts
        return lambda a, b, live: rowwise(lambda x, y: dtx.ts_diff(int(x), int(y)), a, b, live)
    if fr == "time":
        sign = 1 if op == "+" else -1

        def time_iv(a, b, live):
            t, iv = (a, b) if fa == "time" else (b, a)
            if np.ndim(iv) == 0:
                return np.atleast_1d((np.asarray(t, np.int64) + sign * iv.usecs) % _USPD)
            return rowwise(lambda x, y: (int(x) + sign * y.usecs) % _USPD, t, iv, live,
                           dtype=np.int64, fill=0)
        return time_iv
    if key == ("time", "-", "time"):
        return lambda a, b, live: rowwise(lambda x, y: Interval(0, 0, int(x) - int(y)),
                                          a, b, live)
    if key in (("interval", "+", "interval"), ("interval", "-", "interval")):
        sign = 1 if op == "+" else -1
        return lambda a, b, live: rowwise(
            lambda x, y: Interval(x.months + sign * y.months, x.mdays + sign * y.mdays,
                                  x.usecs + sign * y.usecs), a, b, live)
    if fr == "interval" and op == "*":
        return lambda a, b, live: rowwise(
            lambda x, y: dtx.interval_mul(x, y) if isinstance(x, Interval)
            else dtx.interval_mul(y, x), a, b, live)
    if fr == "interval" and op == "/":
        return lambda a, b, live: rowwise(lambda x, y: dtx.interval_div(x, y), a, b, live)
    raise errors.UndefinedFunction(f"operator does not exist: {ta} {op} {tb}")


def neg_fn(rt):
    f = dt.family(rt)
    if f == "num":
        return lambda v, live: rowwise(lambda x, _: NUMERIC_CONTEXT.minus(x)
                                       if not x.is_zero() else x, v, None, live)
    if f == "interval":
        return lambda v, live: rowwise(lambda x, _: Interval(-x.months, -x.mdays, -x.usecs),
                                       v, None, live)
    raise errors.UndefinedFunction(f"operator does not exist: - {rt}")


# -- casts -----------------------------------------------------------------------------------

def real_round(r: np.ndarray, live) -> np.ndarray:
    """float64 results of a real operation rounded to float32 (22003 on overflow)."""
    r = np.asarray(r, np.float64)
    with np.errstate(over="ignore"):
        r32 = r.astype(np.float32)
    bad = (np.isinf(r32) & np.isfinite(r))
    if _any(bad, live):
        raise errors.NumericValueOutOfRange("value out of range: overflow")
    under = (r32 == 0) & (r != 0)
    if _any(under, live):
        raise errors.NumericValueOutOfRange("value out of range: underflow")
    return r32.astype(np.float64)


def cast_fn(src, dst):
    """A vectorized cast fn(values, mask, live) for the cases worth it, or None (the caller
    then casts value by value through ``datatypes.cast_value``)."""
    fs, fd = dt.family(src), dt.family(dst)
    if fd == "float" and dst.name == "real" and fs in ("int", "float"):
        return lambda v, m, live: real_round(v, live)
    if fs == "int" and fd == "num":
        if dst.length is None:
            return lambda v, m, live: rowwise(lambda x, _: decimal.Decimal(int(x)), v, None,
                                              live)
        return lambda v, m, live: rowwise(lambda x, _: fit_numeric(decimal.Decimal(int(x)),
                                                                   dst), v, None, live)
    if fs == "num" and fd == "num":
        return lambda v, m, live: rowwise(lambda x, _: fit_numeric(x, dst), v, None, live)
    if fs == "num" and fd == "float" and dst.name != "real":
        def n2f(v, m, live):
            out = np.array([float(x) for x in v], dtype=np.float64) if len(v) else \
                np.empty(0, np.float64)
            bad = np.isinf(out) & ~np.array([x.is_infinite() for x in v], dtype=bool) \
                if len(v) else np.zeros(0, bool)
            if _any(bad, live):
                raise errors.NumericValueOutOfRange("value out of range: overflow")
            return out
        return n2f
    if fs == "date" and fd == "ts":
        return lambda v, m, live: np.asarray(v, np.int64) * _USPD
    if fs == "ts" and fd == "date":
        return lambda v, m, live: np.floor_divide(np.asarray(v, np.int64), _USPD)
    if fs == "ts" and fd == "time":
        return lambda v, m, live: np.mod(np.asarray(v, np.int64), _USPD)
    if (fs, fd) in (("date", "tstz"), ("ts", "tstz"), ("tstz", "ts"), ("tstz", "date"),
                    ("tstz", "time")):
        zone = session_timezone()
        if zone is UTC or not hasattr(zone, "key"):       # a fixed offset: vectorized
            off = 0 if zone is UTC else int(zone.utcoffset(None).total_seconds() * 1_000_000)

            def fixed(v, m, live):
                x = np.asarray(v, np.int64)
                if fs == "date":
                    return x * _USPD - off
                if fs == "ts":
                    return x - off
                local = x + off
                if fd == "ts":
                    return local
                if fd == "date":
                    return np.floor_divide(local, _USPD)
                return np.mod(local, _USPD)
            return fixed
    if fs == "time" and fd == "interval":
        return lambda v, m, live: rowwise(lambda x, _: Interval(0, 0, int(x)), v, None, live)
    return None

