"""Types of expressions: families, result types of operators, literal parsing, casts.

Stored columns have the `minidb.types.SqlType` s.  Expressions compute with twelve
*families* and one pseudo-type::

    family    SQL types                      vector representation (numpy)
    --------  -----------------------------  ----------------------------------------------
    int       smallint, integer, bigint      any integer dtype (int16/int32 from a scan,
                                             int64 after arithmetic); values always in the
                                             type's range (checked after each operation)
    float     real, double precision         float64 (a real holds float32 values: each
                                             operation's result is rounded to float32)
    num       numeric, numeric(p,s)          object array of decimal.Decimal
    bool      boolean                        bool
    text      char(n), varchar(n), text      object array of str; "" in NULL slots
    bytea     bytea                          object array of bytes
    uuid      uuid                           object array of uuid.UUID
    date      date                           int days since 2000-01-01
    time      time                           int64 microseconds since midnight
    ts        timestamp                      int64 microseconds since 2000-01-01
    tstz      timestamptz                    int64 microseconds since 2000-01-01 UTC
    interval  interval                       object array of types.Interval
    unknown   a string literal or NULL not   (never reaches the executor: the binder
              yet given a type (PostgreSQL's  resolves it from context, else to text)
              "unknown")

A NULL is a True entry in a separate bool mask (None when no entry is NULL); the value
slot under a NULL is a harmless filler (``VECTOR_FILL``: 0, False, "", Decimal 0, b"", the
nil uuid, the zero interval), never None, so vector operations never meet a Python None.

Literals (`parse_literal`) and explicit casts (`cast_value`) follow PostgreSQL's input and
output functions: integers and floats accept surrounding blanks; numeric keeps every digit
given; booleans accept t/true/yes/on/1 and their opposites; timestamps accept ISO 8601 forms
(a time zone suffix is ignored, as PostgreSQL ignores it for ``timestamp without time
zone``); dates, times, timestamptz and intervals are read by ``datetimes``; bytea accepts the
hex format (``\\x0102``) and the escape format; uuid the 32 hex digits with or without
hyphens or braces.  Output: ``format_value`` (casts to text, COPY TO) is PostgreSQL's output
function (bytea hex, intervals '1 day 02:00:00', timestamptz in the session's TimeZone).

Implicit conversions (PostgreSQL's pg_cast, context "implicit"): smallint -> integer ->
bigint -> numeric -> real -> double precision; date -> timestamp -> timestamptz; time ->
interval.  `common_type` resolves two types of one group (UNION, CASE, comparisons) to the
later one, and `arith_plan` gives an operator's result type and the types its operands are
cast to first.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import uuid as _uuid

import numpy as np

import minidb.errors as errors
from minidb.exec import datetimes as dtx
from minidb.types import (BIGINT, BOOLEAN, BYTEA, DATE, DOUBLE, INTEGER, INTERVAL, NUMERIC,
                          REAL, SMALLINT, TEXT, TIME, TIMESTAMP, TIMESTAMPTZ, UUID, Interval,
                          NUMERIC_CONTEXT, date_to_int, fit_numeric, float_to_numeric,
                          format_numeric, int_to_date, int_to_time, int_to_timestamp,
                          no_exponent, time_to_int, timestamp_to_int)
from minidb.types import INTERVAL_ZERO

__all__ = ["UNKNOWN", "family", "SMALLINT", "INTEGER", "BIGINT", "REAL", "DOUBLE", "NUMERIC",
           "BOOLEAN", "TEXT", "BYTEA", "DATE", "TIME", "TIMESTAMP", "TIMESTAMPTZ", "INTERVAL",
           "UUID", "arith_result", "arith_plan", "common_numeric", "common_type",
           "parse_literal", "cast_value", "to_repr", "from_repr", "type_name", "INT2_MIN",
           "INT2_MAX", "INT4_MIN", "INT4_MAX", "INT8_MIN", "INT8_MAX", "format_value",
           "VECTOR_DTYPE", "VECTOR_FILL", "NUMBER_FAMILIES", "DATETIME_FAMILIES",
           "implicitly_castable", "assignment_castable", "explicitly_castable"]

INT2_MIN, INT2_MAX = -(2 ** 15), 2 ** 15 - 1
INT4_MIN, INT4_MAX = -(2 ** 31), 2 ** 31 - 1
INT8_MIN, INT8_MAX = -(2 ** 63), 2 ** 63 - 1


class _Unknown:
    """PostgreSQL's ``unknown``: an untyped string literal or NULL."""
    name = "unknown"
    length = None

    def __repr__(self):
        return "UNKNOWN"

    def __str__(self):
        return "unknown"

    def __reduce__(self):
        return (_unknown, ())


def _unknown():
    return UNKNOWN


UNKNOWN = _Unknown()


class ArrayType:
    """An array of ``elem`` (array_agg's result): a Python list per value."""
    name = "array"
    length = None
    fixed = False

    def __init__(self, elem):
        self.elem = elem

    def __str__(self):
        return f"{self.elem}[]"

    __repr__ = __str__

    def __eq__(self, other):
        return isinstance(other, ArrayType) and other.elem == self.elem

    def __hash__(self):
        return hash(("array", str(self.elem)))

_FAMILY = {"smallint": "int", "integer": "int", "bigint": "int", "real": "float",
           "double precision": "float", "numeric": "num", "boolean": "bool", "char": "text",
           "varchar": "text", "text": "text", "bytea": "bytea", "uuid": "uuid",
           "date": "date", "time": "time", "timestamp": "ts", "timestamptz": "tstz",
           "interval": "interval", "unknown": "unknown", "array": "array"}

# numpy dtype of a family's vectors, and the filler under a NULL
VECTOR_DTYPE = {"int": np.int64, "float": np.float64, "bool": np.bool_, "text": object,
                "ts": np.int64, "tstz": np.int64, "date": np.int64, "time": np.int64,
                "num": object, "interval": object, "bytea": object, "uuid": object,
                "unknown": object, "array": object}
VECTOR_FILL = {"int": 0, "float": 0.0, "bool": False, "text": "", "ts": 0, "tstz": 0,
               "date": 0, "time": 0, "num": decimal.Decimal(0), "interval": INTERVAL_ZERO,
               "bytea": b"", "uuid": _uuid.UUID(int=0), "unknown": "", "array": None}
NUMBER_FAMILIES = ("int", "float", "num")
DATETIME_FAMILIES = ("date", "ts", "tstz")


def family(t) -> str:
    return _FAMILY[t.name]


def type_name(t) -> str:
    """The type name a result column reports (PEP 249 type_code): the canonical name."""
    if isinstance(t, ArrayType):
        return str(t)
    return "text" if t is UNKNOWN else t.name


# PostgreSQL's implicit-cast order of the numeric types, and of the datetimes
_NUM_RANK = {"smallint": 0, "integer": 1, "bigint": 2, "numeric": 3, "real": 4,
             "double precision": 5}
_DT_RANK = {"date": 0, "timestamp": 1, "timestamptz": 2}


def common_numeric(a, b):
    """The type two numeric types meet in (integers widen, then numeric, real, double;
    two different numeric(p,s) meet in plain numeric)."""
    if a.name == b.name:
        return a if a == b or a.name != "numeric" else NUMERIC
    if {a.name, b.name} & {"real"} and {a.name, b.name} - {"real", "double precision"}:
        return DOUBLE            # real with an integer or numeric: float8's operators
    hi = a if _NUM_RANK[a.name] >= _NUM_RANK[b.name] else b
    return NUMERIC if hi.name == "numeric" else hi


def common_type(a, b):
    """The type of a UNION / CASE / comparison of ``a`` and ``b``, or None if they do not
    meet (text families are the caller's business)."""
    fa, fb = family(a), family(b)
    if fa in NUMBER_FAMILIES and fb in NUMBER_FAMILIES:
        return common_numeric(a, b)
    if fa in DATETIME_FAMILIES and fb in DATETIME_FAMILIES:
        return a if _DT_RANK[a.name] >= _DT_RANK[b.name] else b
    if fa == fb:
        return a
    if {fa, fb} == {"time", "interval"}:
        return INTERVAL
    return None


def arith_plan(op: str, a, b):
    """(result type, type to cast the left operand to or None, same for the right) of
    ``a op b``, PostgreSQL's operators; raises 42883 when there is none."""
    fa, fb = family(a), family(b)
    if fa in NUMBER_FAMILIES and fb in NUMBER_FAMILIES:
        if op == "%" and (fa == "float" or fb == "float"):
            raise _no_operator(op, a, b)
        if fa == "int" and fb == "int":
            if a.name == "smallint" and b.name == "smallint":
                return SMALLINT, None, None
            return common_numeric(a, b), None, None
        t = common_numeric(a, b)
        return t, (None if a == t or (a.name == "numeric" and t.name == "numeric") else t), \
            (None if b == t or (b.name == "numeric" and t.name == "numeric") else t)
    key = (fa, op, fb)
    r = _DT_OPS.get(key)
    if r is not None:
        return r
    # date / timestamp / timestamptz mixed: meet in the later type, as the implicit casts do
    if fa in DATETIME_FAMILIES and fb in DATETIME_FAMILIES and op == "-":
        t = common_type(a, b)
        if t.name == "date":
            return INTEGER, None, None
        return INTERVAL, (None if a == t else t), (None if b == t else t)
    if fa in DATETIME_FAMILIES and fb == "time" and op == "+" and fa == "date":
        return TIMESTAMP, None, None
    raise _no_operator(op, a, b)


_DT_OPS = {
    ("date", "+", "int"): (DATE, None, None), ("int", "+", "date"): (DATE, None, None),
    ("date", "-", "int"): (DATE, None, None),
    ("date", "+", "interval"): (TIMESTAMP, TIMESTAMP, None),
    ("interval", "+", "date"): (TIMESTAMP, None, TIMESTAMP),
    ("date", "-", "interval"): (TIMESTAMP, TIMESTAMP, None),
    ("date", "+", "time"): (TIMESTAMP, None, None), ("time", "+", "date"): (TIMESTAMP, None, None),
    ("ts", "+", "interval"): (TIMESTAMP, None, None),
    ("interval", "+", "ts"): (TIMESTAMP, None, None),
    ("ts", "-", "interval"): (TIMESTAMP, None, None),
    ("tstz", "+", "interval"): (TIMESTAMPTZ, None, None),
    ("interval", "+", "tstz"): (TIMESTAMPTZ, None, None),
    ("tstz", "-", "interval"): (TIMESTAMPTZ, None, None),
    ("time", "+", "interval"): (TIME, None, None), ("interval", "+", "time"): (TIME, None, None),
    ("time", "-", "interval"): (TIME, None, None),
    ("time", "-", "time"): (INTERVAL, None, None),
    ("interval", "+", "interval"): (INTERVAL, None, None),
    ("interval", "-", "interval"): (INTERVAL, None, None),
    ("interval", "*", "int"): (INTERVAL, None, DOUBLE),
    ("interval", "*", "float"): (INTERVAL, None, DOUBLE),
    ("interval", "*", "num"): (INTERVAL, None, DOUBLE),
    ("int", "*", "interval"): (INTERVAL, DOUBLE, None),
    ("float", "*", "interval"): (INTERVAL, DOUBLE, None),
    ("num", "*", "interval"): (INTERVAL, DOUBLE, None),
    ("interval", "/", "int"): (INTERVAL, None, DOUBLE),
    ("interval", "/", "float"): (INTERVAL, None, DOUBLE),
    ("interval", "/", "num"): (INTERVAL, None, DOUBLE),
}


def _no_operator(op, a, b):
    return errors.DatatypeMismatch(f"operator does not exist: {a} {op} {b}")


def arith_result(op: str, a, b):
    """The result type of ``a op b`` (see `arith_plan`)."""
    return arith_plan(op, a, b)[0]


# which casts PostgreSQL makes without being asked ("implicit"), in INSERT / UPDATE
# ("assignment") or only when written ("explicit"); text casts are handled apart
def implicitly_castable(src, dst) -> bool:
    if src == dst:
        return True
    if src.name in _NUM_RANK and dst.name in _NUM_RANK:
        return _NUM_RANK[src.name] <= _NUM_RANK[dst.name]
    if src.name in _DT_RANK and dst.name in _DT_RANK:
        return _DT_RANK[src.name] <= _DT_RANK[dst.name]
    return (src.name, dst.name) == ("time", "interval")


def assignment_castable(src, dst) -> bool:
    fs, fd = family(src), family(dst)
    if fs == fd or fd == "text":
        return True
    if fs in NUMBER_FAMILIES and fd in NUMBER_FAMILIES:
        return True
    if fs in DATETIME_FAMILIES and fd in DATETIME_FAMILIES:
        return True
    if fs in ("ts", "tstz") and fd == "time":
        return True
    return implicitly_castable(src, dst)


def explicitly_castable(src, dst) -> bool:
    fs, fd = family(src), family(dst)
    if assignment_castable(src, dst) or fs == "text" or fs == "unknown":
        return True
    return {fs, fd} == {"int", "bool"} and "integer" in (src.name, dst.name) or \
        (fs, fd) == ("interval", "time")


# -- literals ------------------------------------------------------------------------------------

_TRUE = {"t", "true", "y", "yes", "on", "1"}
_FALSE = {"f", "false", "n", "no", "off", "0"}
_INT_RANGE = {"smallint": (INT2_MIN, INT2_MAX), "integer": (INT4_MIN, INT4_MAX),
              "bigint": (INT8_MIN, INT8_MAX)}


def _bad_input(t, text):
    return errors.InvalidTextRepresentation(
        f'invalid input syntax for type {t}: "{text}"')


def parse_timestamp(text: str) -> _dt.datetime:
    s = text.strip()
    low = s.lower()
    if low in ("now", "today"):
        d = _dt.datetime.now()
        return d if low == "now" else _dt.datetime(d.year, d.month, d.day)
    if low == "epoch":
        return _dt.datetime(1970, 1, 1)
    try:
        d = _dt.datetime.fromisoformat(s)
    except ValueError:
        raise _bad_input("timestamp", text) from None
    return d.replace(tzinfo=None)


_NUMERIC_SPECIAL = {"nan": "NaN", "infinity": "Infinity", "+infinity": "Infinity",
                    "-infinity": "-Infinity", "inf": "Infinity", "+inf": "Infinity",
                    "-inf": "-Infinity"}


def parse_numeric(text: str, t=NUMERIC) -> decimal.Decimal:
    s = text.strip()
    special = _NUMERIC_SPECIAL.get(s.lower())
    if special is not None:
        return fit_numeric(decimal.Decimal(special), t)
    if not s or not (s[0].isdigit() or s[0] in "+-.") or "_" in s or " " in s:
        raise _bad_input("numeric", text)
    try:
        d = decimal.Decimal(s)
    except decimal.InvalidOperation:
        raise _bad_input("numeric", text) from None
    if not d.is_finite():
        raise _bad_input("numeric", text)
    return fit_numeric(no_exponent(d), t)


def parse_bytea(text: str) -> bytes:
    """bytea input: hex format ``\\x0a0b`` (blanks between pairs allowed) or escape format
    (``\\\\`` a backslash, ``\\ooo`` an octal byte, other characters as their UTF-8)."""
    if text.startswith("\\x"):
        h = "".join(text[2:].split())
        for ch in h:
            if ch not in "0123456789abcdefABCDEF":
                raise errors.InvalidParameterValue(f'invalid hexadecimal digit: "{ch}"')
        if len(h) % 2:
            raise errors.InvalidParameterValue("invalid hexadecimal data: odd number of digits")
        return bytes.fromhex(h)
    out = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\":
            out += ch.encode("utf-8")
            i += 1
        elif text[i + 1:i + 2] == "\\":
            out.append(0x5C)
            i += 2
        elif len(text) >= i + 4 and all(c in "01234567" for c in text[i + 1:i + 4]) \
                and text[i + 1] in "0123":
            out.append(int(text[i + 1:i + 4], 8))
            i += 4
        else:
            raise _bad_input("bytea", text)
    return bytes(out)


def parse_uuid(text: str) -> _uuid.UUID:
    s = text.strip()
    body = s[1:-1] if s.startswith("{") and s.endswith("}") else s
    h = body.replace("-", "")
    if len(h) != 32 or any(c not in "0123456789abcdefABCDEF" for c in h) or \
            body.startswith("-") or body.endswith("-") or "--" in body:
        raise _bad_input("uuid", text)
    return _uuid.UUID(hex=h)


def parse_literal(text: str, t):
    """A string literal (or a string parameter) read as a value of type ``t`` (the Python
    value, see ``from_repr``)."""
    f = family(t)
    if f in ("text", "unknown"):
        return text
    s = text.strip()
    if f == "int":
        try:
            v = int(s)
        except ValueError:
            raise _bad_input(t, text) from None
        lo, hi = _INT_RANGE[t.name]
        if not lo <= v <= hi:
            raise errors.NumericValueOutOfRange(f'value "{s}" is out of range for type {t}')
        return v
    if f == "float":
        low = s.lower()
        special = {"nan": math.nan, "infinity": math.inf, "+infinity": math.inf,
                   "-infinity": -math.inf, "inf": math.inf, "-inf": -math.inf}
        if low in special:
            return special[low]
        try:
            v = float(s)
        except ValueError:
            raise _bad_input(t, text) from None
        if t.name == "real":
            with np.errstate(over="ignore"):
                r = float(np.float32(v))
            if (math.isinf(r) and not math.isinf(v)) or (r == 0.0 and v != 0.0):
                raise errors.NumericValueOutOfRange(f'"{s}" is out of range for type real')
            return r
        if math.isinf(v):
            raise errors.NumericValueOutOfRange(
                f'"{s}" is out of range for type double precision')
        return v
    if f == "num":
        return parse_numeric(text, t)
    if f == "bool":
        low = s.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise _bad_input(t, text)
    if f == "ts":
        return parse_timestamp(text)
    if f == "date":
        return int_to_date(dtx.parse_date(text))
    if f == "time":
        return int_to_time(dtx.parse_time(text))
    if f == "tstz":
        return _tstz_value(dtx.parse_timestamptz(text))
    if f == "interval":
        return dtx.parse_interval(text)
    if f == "bytea":
        return parse_bytea(text)
    if f == "uuid":
        return parse_uuid(text)
    raise AssertionError(t)


def _tstz_value(us: int) -> _dt.datetime:
    from minidb.types import int_to_timestamptz
    return int_to_timestamptz(us)


# -- casts ---------------------------------------------------------------------------------------

def format_float(v: float, t=DOUBLE) -> str:
    """float8out / float4out: the shortest text that reads back as the same double (real:
    the same float32)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    r = repr(float(v)) if t.name != "real" else str(np.float32(v))
    return r[:-2] if r.endswith(".0") else r


def format_value(v, t) -> str:
    """A value (Python or vector form) as PostgreSQL's output function writes it (for casts
    to text, COPY TO)."""
    f = family(t)
    if f == "bool":
        return "true" if v else "false"
    if f == "float":
        return format_float(v, t)
    if f == "ts":
        if not isinstance(v, _dt.datetime):
            v = int_to_timestamp(v)
        return v.isoformat(sep=" ")
    if f == "num":
        return format_numeric(v)
    if f == "date":
        return dtx.format_date(v if not isinstance(v, _dt.date) else date_to_int(v))
    if f == "time":
        return dtx.format_time(v if not isinstance(v, _dt.time) else time_to_int(v))
    if f == "tstz":
        return dtx.format_timestamptz(to_repr(v, t))
    if f == "interval":
        return dtx.format_interval(v)
    if f == "bytea":
        return "\\x" + bytes(v).hex()
    return str(v)


def cast_value(v, src, dst, *, explicit: bool = True, column: str | None = None):
    """Convert a Python value of type ``src`` to type ``dst`` (None stays None).

    ``explicit`` False is an *assignment* cast (INSERT / UPDATE / COPY): only the
    conversions PostgreSQL allows in assignment context; others raise DatatypeMismatch
    naming ``column``.
    """
    if v is None:
        return None
    fs, fd = family(src), family(dst)
    if src is UNKNOWN:
        return _fit_text(parse_literal(v, dst), dst, explicit) if fd == "text" else \
            parse_literal(v, dst)
    if fs == fd:
        if fd == "int":
            return _int_range(int(v), dst)
        if fd == "text":
            return _fit_text(v, dst, explicit)
        if fd == "float" and dst.name == "real" and src.name != "real":
            return _to_real(v)
        if fd == "num":
            return fit_numeric(v, dst)
        return v
    if fd == "text":
        return _fit_text(format_value(v, src), dst, explicit)
    allowed = explicitly_castable(src, dst) if explicit else assignment_castable(src, dst)
    if allowed:
        r = _convert(v, src, dst, fs, fd)
        if r is not NotImplemented:
            return r
    what = f'column "{column}" is of type {dst}' if column else f"cannot cast type {src} to {dst}"
    if column:
        raise errors.DatatypeMismatch(f"{what} but expression is of type {src}")
    raise errors.DatatypeMismatch(what)


def _to_real(v: float) -> float:
    with np.errstate(over="ignore"):
        r = float(np.float32(v))
    if math.isinf(r) and not math.isinf(v):
        raise errors.NumericValueOutOfRange("value out of range: overflow")
    if r == 0.0 and v != 0.0:
        raise errors.NumericValueOutOfRange("value out of range: underflow")
    return r


def _numeric_to_int(d: decimal.Decimal, dst) -> int:
    if not d.is_finite():           # PostgreSQL 15: 0A000
        raise errors.NotSupportedError(
            f"cannot convert {'NaN' if d.is_nan() else 'infinity'} to {dst.name}")
    r = int(d.to_integral_value(rounding=decimal.ROUND_HALF_UP, context=NUMERIC_CONTEXT))
    return _int_range(r, dst)


def _convert(v, src, dst, fs, fd):
    """The non-text conversions (Python values in and out); NotImplemented if none."""
    if fs == "text":
        return cast_value(v, UNKNOWN, dst)
    if fs == "int":
        if fd == "float":
            return _to_real(float(v)) if dst.name == "real" else float(v)
        if fd == "num":
            return fit_numeric(decimal.Decimal(int(v)), dst)
        if fd == "bool":
            return v != 0
        if fd == "date":
            return NotImplemented
    if fs == "float":
        if fd == "int":
            if math.isnan(v) or math.isinf(v):
                raise errors.NumericValueOutOfRange(f"{dst.name} out of range")
            return _int_range(int(round(v)), dst)    # round(): half to even, as rint()
        if fd == "num":
            return fit_numeric(float_to_numeric(float(v)) if src.name != "real"
                               else decimal.Decimal(format_float(v, src).replace("e", "E"))
                               if not (math.isnan(v) or math.isinf(v)) else
                               float_to_numeric(float(v)), dst)
    if fs == "num":
        if fd == "int":
            return _numeric_to_int(v, dst)
        if fd == "float":
            f = float(v)
            if math.isinf(f) and not v.is_infinite():
                raise errors.NumericValueOutOfRange("value out of range: overflow")
            return _to_real(f) if dst.name == "real" else f
    if fs == "bool" and fd == "int":
        return int(v)
    if fs in DATETIME_FAMILIES and fd in DATETIME_FAMILIES + ("time",):
        return _convert_datetime(v, fs, fd)
    if fs == "time" and fd == "interval":
        return Interval(0, 0, time_to_int(v))
    if fs == "interval" and fd == "time":
        us = (v.usecs % dtx.USECS_PER_DAY)
        return int_to_time(us)
    return NotImplemented


def _convert_datetime(v, fs, fd):
    from minidb.types import int_to_timestamptz, session_timezone
    if fs == "date":
        d = _dt.datetime(v.year, v.month, v.day)
        if fd == "ts":
            return d
        if fd == "tstz":
            return int_to_timestamptz(dtx.local_to_tstz_dt(d))
        return NotImplemented
    if fs == "ts":
        if fd == "date":
            return v.date()
        if fd == "tstz":
            return int_to_timestamptz(dtx.local_to_tstz_dt(v))
        if fd == "time":
            return v.time()
    if fs == "tstz":
        local = v.astimezone(session_timezone())
        if fd == "date":
            return local.date()
        if fd == "ts":
            return local.replace(tzinfo=None)
        if fd == "time":
            return local.time().replace(tzinfo=None)
    return NotImplemented


def _int_range(v: int, t) -> int:
    lo, hi = _INT_RANGE[t.name]
    if not lo <= v <= hi:
        raise errors.NumericValueOutOfRange(f"{t.name} out of range")
    return v


def _fit_text(s: str, t, explicit: bool) -> str:
    if t.name in ("char", "varchar") and t.length is not None and len(s) > t.length:
        if explicit or not s[t.length:].strip(" "):
            s = s[:t.length]                 # an explicit cast truncates, as in PostgreSQL
        else:
            raise errors.StringDataRightTruncation(f"value too long for type {t}")
    if t.name == "char" and len(s) < t.length:
        s = s.ljust(t.length)
    return s


def to_repr(v, t):
    """Python value -> the scalar an expression vector holds (timestamps, dates, times as
    int)."""
    if v is None:
        return None
    name = t.name
    if name == "timestamp" and isinstance(v, _dt.datetime):
        return timestamp_to_int(v)
    if name == "timestamptz" and isinstance(v, _dt.datetime):
        return dtx.local_to_tstz_dt(v)
    if name == "date" and isinstance(v, _dt.date):
        return date_to_int(v)
    if name == "time" and isinstance(v, _dt.time):
        return time_to_int(v)
    return v


def from_repr(v, t):
    if v is None:
        return None
    name = t.name
    if name == "timestamp" and not isinstance(v, _dt.datetime):
        return int_to_timestamp(int(v))
    if name == "timestamptz" and not isinstance(v, _dt.datetime):
        return _tstz_value(int(v))
    if name == "date" and not isinstance(v, _dt.date):
        return int_to_date(int(v))
    if name == "time" and not isinstance(v, _dt.time):
        return int_to_time(int(v))
    return v
