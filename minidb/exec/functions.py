"""Scalar functions over whole batches (the binder, ``minidb.sql.functions``, has typed
the arguments).

``STRICT[name](values, types, live) -> values``: the function of each row's arguments,
given the argument vectors (numpy arrays of one batch, NULL slots holding fillers) for
the rows; the caller makes the result NULL wherever an argument is NULL, as for
PostgreSQL's strict functions.  Numeric functions are numpy expressions; string and
timestamp functions loop in Python over the batch (one call per row, as PostgreSQL's).
Errors (negative square root, zero field position ...) are raised only for rows in
``live``.  Non-strict functions (concat, greatest, least, random, setseed) are in
``compile.py``.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import hashlib
import math

import numpy as np

import minidb.errors as errors
from minidb.exec import datetimes as dtx
from minidb.exec import numfmt
from minidb.exec.atzone import at_time_zone
from minidb.exec.datetimes import date_part, date_trunc
from minidb.types import (NUMERIC_CONTEXT, NUMERIC_NAN, Interval, date_to_int, int_to_date,
                          int_to_timestamp, timestamp_to_int)

__all__ = ["STRICT", "date_part", "date_trunc", "gen_random_uuid"]


def _live_any(cond, live) -> bool:
    if live is None:
        return bool(np.any(cond))
    return bool(np.any(cond & live))


def _f(v):
    return np.asarray(v, dtype=np.float64)


def _round_half_away(x, d=0):
    """numeric's rounding: half away from zero."""
    scale = 10.0 ** d
    y = np.abs(x) * scale
    r = np.floor(y + 0.5)
    return np.sign(x) * r / scale


def _round(vals, types, live):
    x = vals[0]
    if len(vals) == 1:
        if x.dtype.kind in "iu":
            return x
        return _round_half_away(_f(x))      # numeric's rule (decimal literals are doubles)
    d = np.asarray(vals[1], dtype=np.int64)
    return _round_half_away(_f(x), d)


def _trunc(vals, types, live):
    x = vals[0]
    if len(vals) == 1:
        return x if x.dtype.kind in "iu" else np.trunc(_f(x))
    scale = 10.0 ** np.asarray(vals[1], dtype=np.int64)
    return np.trunc(_f(x) * scale) / scale


def _sqrt(vals, types, live):
    x = _f(vals[0])
    if _live_any(x < 0, live):
        raise errors.DataError("cannot take square root of a negative number",
                               sqlstate="2201F")
    return np.sqrt(np.maximum(x, 0))


def _ln(vals, types, live):
    x = _f(vals[0])
    if _live_any(x == 0, live):
        raise errors.DataError("cannot take logarithm of zero", sqlstate="2201E")
    if _live_any(x < 0, live):
        raise errors.DataError("cannot take logarithm of a negative number", sqlstate="2201E")
    with np.errstate(all="ignore"):
        return np.log(np.where(x > 0, x, 1))


def _log(vals, types, live):
    if len(vals) == 1:
        return _ln(vals, types, live) / math.log(10)
    b = _ln([vals[0]], types, live)
    x = _ln([vals[1]], types, live)
    if _live_any(b == 0, live):
        raise errors.DivisionByZero("division by zero")
    with np.errstate(all="ignore"):
        return x / np.where(b == 0, 1, b)


def _power(vals, types, live):
    a, b = _f(vals[0]), _f(vals[1])
    bad = (a == 0) & (b < 0)
    if _live_any(bad, live):
        raise errors.DataError("zero raised to a negative power is undefined",
                               sqlstate="2201F")
    bad = (a < 0) & (b != np.floor(b))
    if _live_any(bad, live):
        raise errors.DataError("a negative number raised to a non-integer power yields a "
                               "complex result", sqlstate="2201F")
    with np.errstate(all="ignore"):
        r = np.power(a, b)
    if _live_any(np.isinf(r) & np.isfinite(a) & np.isfinite(b), live):
        raise errors.NumericValueOutOfRange("value out of range: overflow")
    return r


def _exp(vals, types, live):
    with np.errstate(all="ignore"):
        r = np.exp(_f(vals[0]))
    if _live_any(np.isinf(r) & np.isfinite(_f(vals[0])), live):
        raise errors.NumericValueOutOfRange("value out of range: overflow")
    return r


def _mod(vals, types, live):
    a, b = vals
    if _live_any(np.asarray(b) == 0, live):
        raise errors.DivisionByZero("division by zero")
    if a.dtype.kind == "f" or np.asarray(b).dtype.kind == "f":
        with np.errstate(all="ignore"):
            return np.fmod(_f(a), np.where(_f(b) == 0, 1, _f(b)))
    sb = np.where(np.asarray(b) == 0, 1, b).astype(np.int64)
    return np.fmod(np.asarray(a, dtype=np.int64), sb)


def _div(vals, types, live):
    a, b = vals
    if _live_any(np.asarray(b) == 0, live):
        raise errors.DivisionByZero("division by zero")
    if a.dtype.kind == "f" or np.asarray(b).dtype.kind == "f":
        with np.errstate(all="ignore"):
            return np.trunc(_f(a) / np.where(_f(b) == 0, 1, _f(b)))
    a = np.asarray(a, dtype=np.int64)
    sb = np.where(np.asarray(b) == 0, 1, b).astype(np.int64)
    q = np.abs(a) // np.abs(sb)
    return np.where((a < 0) != (sb < 0), -q, q)


def _rows(fn):
    """A per-row function of Python values -> a batch function (object result)."""
    def batch(vals, types, live):
        cols = [v.tolist() if isinstance(v, np.ndarray) else list(v) for v in vals]
        n = len(cols[0]) if cols else 0
        out = np.empty(n, dtype=object)
        live_l = None if live is None else np.asarray(live).tolist()
        for i in range(n):
            if live_l is not None and not live_l[i]:
                out[i] = ""
                continue
            out[i] = fn(*[c[i] for c in cols])
        return out
    return batch


def _rows_int(fn):
    inner = _rows(fn)

    def batch(vals, types, live):
        r = inner(vals, types, live)
        return np.array([0 if x == "" else x for x in r.tolist()], dtype=np.int64)
    return batch


def _substr(s, start, length=None):
    if length is not None and length < 0:
        raise errors.DataError("negative substring length not allowed", sqlstate="22011")
    begin = start - 1
    end = None if length is None else begin + length
    begin = max(begin, 0)
    if end is not None:
        if end <= 0:
            return ""
        return s[begin:end]
    return s[begin:]


def _strpos(s, sub):
    return s.find(sub) + 1


def _trim(chars_default, side):
    def f(s, chars=chars_default):
        if side == "b":
            return s.strip(chars)
        if side == "l":
            return s.lstrip(chars)
        return s.rstrip(chars)
    return f


def _split_part(s, delim, n):
    if n == 0:
        raise errors.InvalidParameterValue("field position must not be zero")
    if delim == "":
        parts = [s] if s != "" else []
    else:
        parts = s.split(delim) if s != "" else []
    if n > 0:
        return parts[n - 1] if n <= len(parts) else ""
    return parts[n] if -n <= len(parts) else ""


def _left(s, n):
    return s[:n] if n >= 0 else s[:max(len(s) + n, 0)]


def _right(s, n):
    if n >= 0:
        return s[len(s) - n:] if n else ""
    return s[-n:]


def _pad(left):
    def f(s, n, fill=" "):
        if n <= 0:
            return ""
        if len(s) >= n or fill == "":
            return s[:n]
        need = n - len(s)
        pad = (fill * (need // len(fill) + 1))[:need]
        return pad + s if left else s + pad
    return f


def _repeat(s, n):
    return s * max(n, 0)


def _chr(c):
    if c <= 0:
        raise errors.ProgramLimitExceeded("requested character too large for encoding: %d" % c) \
            if c > 0x10FFFF else errors.InvalidParameterValue("null character not permitted")
    if c > 0x10FFFF:
        raise errors.ProgramLimitExceeded(f"requested character too large for encoding: {c}")
    return chr(c)


def _initcap(s):
    out, start = [], True
    for ch in s:
        if ch.isalnum():
            out.append(ch.upper() if start else ch.lower())
            start = False
        else:
            out.append(ch)
            start = True
    return "".join(out)


# -- timestamps (date_part / date_trunc live in datetimes.py) ------------------------------------
def _date_part_batch(vals, types, live):
    fields, ts = vals[0], vals[1]
    tname = types[1].name
    out = np.zeros(len(ts), dtype=np.float64)
    fl, tl = list(fields), np.asarray(ts).tolist()
    for i in range(len(tl)):
        if live is None or live[i]:
            out[i] = date_part(fl[i], tl[i]) if tname == "timestamp" else \
                dtx.date_part_of(fl[i], tl[i], tname)
    return out


def _date_trunc_batch(vals, types, live):
    fields, ts = vals[0], vals[1]
    tname = types[1].name
    zone = list(vals[2]) if len(vals) > 2 else None
    obj = tname == "interval"
    out = np.empty(len(ts), dtype=object) if obj else np.zeros(len(ts), dtype=np.int64)
    fl, tl = list(fields), np.asarray(ts).tolist()
    for i in range(len(tl)):
        if live is None or live[i]:
            if tname == "timestamp":
                out[i] = timestamp_to_int(date_trunc(fl[i], tl[i]))
            else:
                out[i] = dtx.date_trunc_of(fl[i], tl[i], tname, zone[i] if zone else None)
        elif obj:
            out[i] = tl[i]
    return out


# -- dates, times, timestamptz, intervals --------------------------------------------------------
def _wall(v, tname: str) -> _dt.datetime:
    """A date / timestamp / timestamptz vector scalar as a naive wall-clock datetime (the
    session's TimeZone for timestamptz)."""
    if tname == "date":
        d = int_to_date(v)
        return _dt.datetime(d.year, d.month, d.day)
    if tname == "timestamptz":
        return dtx.tstz_to_local(v).replace(tzinfo=None)
    return int_to_timestamp(int(v))


_NUMBER_TYPES = ("smallint", "integer", "bigint", "real", "double precision", "numeric")


def _timezone_batch(vals, types, live):
    """timezone(zone, ts) - AT TIME ZONE (``minidb.exec.atzone``)."""
    zones, ts = vals
    tname = types[1].name
    zl = list(zones) if types[0].name == "interval" else np.asarray(zones).tolist()
    tl = np.asarray(ts).tolist()
    out = np.zeros(len(tl), dtype=np.int64)
    for i in range(len(tl)):
        if live is None or live[i]:
            out[i] = at_time_zone(zl[i], tl[i], tname)
    return out


def _to_char_batch(vals, types, live):
    src, fmts = vals
    tname = types[0].name
    out = np.empty(len(src), dtype=object)
    if tname in _NUMBER_TYPES:
        kind = {"real": "float4", "double precision": "float8", "numeric": "num"}.get(tname,
                                                                                     "int")
        sl, fl = np.asarray(src).tolist() if kind != "num" else list(src), list(fmts)
        parsed: dict = {}
        for i in range(len(sl)):
            if live is not None and not live[i]:
                out[i] = ""
                continue
            f = parsed.get(fl[i])
            if f is None:
                f = parsed[fl[i]] = numfmt.parse_num_format(fl[i])
            out[i] = numfmt.num_to_char(sl[i], f, kind)
        return out
    sl, fl = np.asarray(src).tolist() if tname != "interval" else list(src), list(fmts)
    for i in range(len(sl)):
        if live is not None and not live[i]:
            out[i] = ""
            continue
        if tname == "timestamptz":
            loc = dtx.tstz_to_local(sl[i])
            out[i] = dtx.to_char(loc.replace(tzinfo=None), fl[i], loc.utcoffset(),
                                 loc.tzname() or "")
        elif tname == "interval":
            iv = sl[i]
            y, mon = int(iv.months / 12), iv.months - int(iv.months / 12) * 12
            us = iv.usecs
            h = int(us / dtx.USECS_PER_HOUR)
            rem = abs(us - h * dtx.USECS_PER_HOUR)
            d = _IntervalFields(y, mon, iv.mdays, h, rem // 60_000_000,
                                rem // 1_000_000 % 60, rem % 1_000_000)
            out[i] = dtx.to_char(d, fl[i])
        else:
            out[i] = dtx.to_char(_wall(sl[i], tname), fl[i])
    return out


class _IntervalFields:
    """An interval's fields for to_char (hours may exceed 23; no weekday)."""

    def __init__(self, year, month, day, hour, minute, second, microsecond):
        self.year, self.month, self.day = year, month, day
        self.hour, self.minute, self.second, self.microsecond = hour, minute, second, microsecond

    def isoweekday(self):
        return 7

    def timetuple(self):
        class _T:
            tm_yday = 0
        return _T()

    def isocalendar(self):
        return (self.year, 0, 0)

    def toordinal(self):
        return 0


def _age_batch(vals, types, live):
    tname = types[0].name
    out = np.empty(len(vals[0]), dtype=object)
    a = np.asarray(vals[0]).tolist()
    if len(vals) == 2:
        b = np.asarray(vals[1]).tolist()
        tb = types[1].name
    else:
        # age(x): from midnight of today in the session's TimeZone
        today = dtx.parse_date("today")
        b, a, tb = a, [today] * len(a), tname
        tname = "date"
    for i in range(len(a)):
        if live is not None and not live[i]:
            out[i] = Interval()
            continue
        out[i] = dtx.age(_wall(a[i], tname), _wall(b[i], tb))
    return out


def _make_date(vals, types, live):
    out = np.zeros(len(vals[0]), dtype=np.int64)
    for i, (y, m, d) in enumerate(zip(*[np.asarray(v).tolist() for v in vals])):
        if live is not None and not live[i]:
            continue
        try:
            out[i] = date_to_int(_dt.date(int(y), int(m), int(d)))
        except ValueError:
            raise errors.DatetimeFieldOverflow(
                f"date field value out of range: {int(y)}-{int(m):02d}-{int(d):02d}") from None
    return out


def _make_time(vals, types, live):
    out = np.zeros(len(vals[0]), dtype=np.int64)
    for i, (h, m, sec) in enumerate(zip(*[np.asarray(v).tolist() for v in vals])):
        if live is not None and not live[i]:
            continue
        us = round(float(sec) * 1_000_000)
        if not (0 <= h <= 24 and 0 <= m <= 59 and 0 <= us <= 60_000_000) or \
                (h == 24 and (m or us)):
            raise errors.DatetimeFieldOverflow(
                f"time field value out of range: {int(h)}:{int(m):02d}:{float(sec):02g}")
        out[i] = (int(h) * 60 + int(m)) * 60_000_000 + us
    return out


def _make_timestamp(vals, types, live):
    days = _make_date(vals[:3], types[:3], live)
    tod = _make_time(vals[3:], types[3:], live)
    return days * dtx.USECS_PER_DAY + tod


def gen_random_uuid(n: int) -> np.ndarray:
    import uuid as _uuid
    out = np.empty(n, dtype=object)
    out[:] = [_uuid.uuid4() for _ in range(n)]
    return out


# -- numeric (Decimal object vectors): exact, PostgreSQL's rounding -----------------------------
def _dec_rows(fn):
    """fn(*Decimals) per row -> an object vector (numeric arguments); a NaN argument gives
    NaN, before any other check (PostgreSQL: mod(NaN, 0) is NaN)."""
    def nan_first(*args):
        for a in args:
            if isinstance(a, decimal.Decimal) and a.is_nan():
                return NUMERIC_NAN
        return fn(*args)

    def batch(vals, types, live):
        cols = [v.tolist() if isinstance(v, np.ndarray) else list(v) for v in vals]
        out = np.empty(len(cols[0]), dtype=object)
        for i, args in enumerate(zip(*cols)):
            if live is None or live[i]:
                out[i] = nan_first(*args)
            else:
                try:
                    out[i] = nan_first(*args)
                except (errors.Error, ArithmeticError):
                    out[i] = decimal.Decimal(0)
        return out
    return batch


def _dec_round(x, d=0, mode=decimal.ROUND_HALF_UP):
    if not x.is_finite():
        return x
    d = int(d)
    q = x.quantize(decimal.Decimal(1).scaleb(-d), rounding=mode, context=NUMERIC_CONTEXT)
    if d < 0:                     # round(1234, -2) is 1200, shown without a point
        q = q.quantize(decimal.Decimal(1), context=NUMERIC_CONTEXT)
    return q.copy_abs() if q.is_zero() else q


def _dec_mod(a, b):
    if b.is_zero():
        raise errors.DivisionByZero("division by zero")
    return NUMERIC_CONTEXT.remainder(a, b)


def _dec_sign(x):
    return decimal.Decimal(0 if x.is_zero() else (-1 if x.is_signed() else 1))


def _either(float_fn, dec_fn):
    """float_fn for double/integer vectors, dec_fn for numeric (object) ones."""
    def batch(vals, types, live):
        if types[0].name == "numeric":
            return dec_fn(vals, types, live)
        return float_fn(vals, types, live)
    return batch


_NUMERIC_FUNCS = {
    "round": _dec_rows(lambda x, d=0: _dec_round(x, d)),
    "trunc": _dec_rows(lambda x, d=0: _dec_round(x, d, decimal.ROUND_DOWN)),
    "floor": _dec_rows(lambda x: _dec_round(x, 0, decimal.ROUND_FLOOR)),
    "ceil": _dec_rows(lambda x: _dec_round(x, 0, decimal.ROUND_CEILING)),
    "sign": _dec_rows(_dec_sign),
    "mod": _dec_rows(_dec_mod),
    "div": _dec_rows(lambda a, b: _dec_round(NUMERIC_CONTEXT.divide(a, b), 0,
                                               decimal.ROUND_DOWN) if not b.is_zero()
                     else (_ for _ in ()).throw(errors.DivisionByZero("division by zero"))),
}


STRICT = {
    "round": _round, "trunc": _trunc,
    "floor": lambda v, t, l: np.floor(_f(v[0])),
    "ceil": lambda v, t, l: np.ceil(_f(v[0])),
    "sqrt": _sqrt, "cbrt": lambda v, t, l: np.cbrt(_f(v[0])),
    "ln": _ln, "log": _log, "exp": _exp, "power": _power, "mod": _mod, "div": _div,
    "sign": lambda v, t, l: np.sign(_f(v[0])),
    "degrees": lambda v, t, l: np.degrees(_f(v[0])),
    "radians": lambda v, t, l: np.radians(_f(v[0])),
    "sin": lambda v, t, l: np.sin(_f(v[0])), "cos": lambda v, t, l: np.cos(_f(v[0])),
    "tan": lambda v, t, l: np.tan(_f(v[0])),
    "asin": lambda v, t, l: np.arcsin(_f(v[0])), "acos": lambda v, t, l: np.arccos(_f(v[0])),
    "atan": lambda v, t, l: np.arctan(_f(v[0])),
    "atan2": lambda v, t, l: np.arctan2(_f(v[0]), _f(v[1])),
    "substr": _rows(_substr), "strpos": _rows_int(_strpos),
    "replace": _rows(lambda s, a, b: s.replace(a, b) if a else s),
    "btrim": _rows(_trim(" ", "b")), "ltrim": _rows(_trim(" ", "l")),
    "rtrim": _rows(_trim(" ", "r")),
    "split_part": _rows(_split_part), "left": _rows(_left), "right": _rows(_right),
    "lpad": _rows(_pad(True)), "rpad": _rows(_pad(False)), "repeat": _rows(_repeat),
    "reverse": _rows(lambda s: s[::-1]), "initcap": _rows(_initcap),
    "md5": _rows(lambda s: hashlib.md5(s.encode()).hexdigest()),
    "ascii": _rows_int(lambda s: ord(s[0]) if s else 0), "chr": _rows(_chr),
    "octet_length": _rows_int(lambda s: len(s.encode())),
    "date_part": _date_part_batch, "date_trunc": _date_trunc_batch,
    "to_char": _to_char_batch, "timezone": _timezone_batch, "age": _age_batch, "make_date": _make_date,
    "make_time": _make_time, "make_timestamp": _make_timestamp,
}

for _name, _fn in _NUMERIC_FUNCS.items():
    STRICT[_name] = _either(STRICT[_name], _fn)
