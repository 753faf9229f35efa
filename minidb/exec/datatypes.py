"""Types of expressions: families, result types of operators, literal parsing, casts.

Stored columns have the eight `minidb.types.SqlType` s.  Expressions compute with five
*families* and one pseudo-type::

    family   SQL types                      vector representation (numpy)
    -------  -----------------------------  ----------------------------------------------
    int      integer, bigint                any integer dtype (int32 from a scan, int64
                                            after arithmetic); values always in the
                                            type's range (checked after each operation)
    float    double precision               float64
    bool     boolean                        bool
    text     char(n), varchar(n), text      object array of str; "" in NULL slots
    ts       timestamp                      int64 microseconds since 2000-01-01
    unknown  a string literal or NULL not   (never reaches the executor: the binder
             yet given a type (PostgreSQL's  resolves it from context, else to text)
             "unknown")

A NULL is a True entry in a separate bool mask (None when no entry is NULL); the value
slot under a NULL is a harmless filler (0, False, ""), never None, so numpy operations
never meet a Python None.

Literals (`parse_literal`) and explicit casts (`cast_value`) follow PostgreSQL's input and
output functions closely enough for the types minidb has: integers and floats accept
surrounding blanks; booleans accept t/true/yes/on/1 and their opposites; timestamps accept
ISO 8601 forms (a time zone suffix is ignored, as PostgreSQL ignores it for ``timestamp
without time zone``).
"""

from __future__ import annotations

import datetime as _dt
import math

import minidb.errors as errors
from minidb.types import (BIGINT, BOOLEAN, DOUBLE, INTEGER, TEXT, TIMESTAMP, int_to_timestamp,
                          timestamp_to_int)

__all__ = ["UNKNOWN", "family", "INTEGER", "BIGINT", "DOUBLE", "BOOLEAN", "TEXT", "TIMESTAMP",
           "arith_result", "common_numeric", "parse_literal", "cast_value", "to_repr",
           "from_repr", "type_name", "INT4_MIN", "INT4_MAX", "INT8_MIN", "INT8_MAX",
           "format_value"]

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

_FAMILY = {"integer": "int", "bigint": "int", "double precision": "float",
           "boolean": "bool", "char": "text", "varchar": "text", "text": "text",
           "timestamp": "ts", "unknown": "unknown", "array": "array"}


def family(t) -> str:
    return _FAMILY[t.name]


def type_name(t) -> str:
    """The type name a result column reports (PEP 249 type_code): the canonical name."""
    if isinstance(t, ArrayType):
        return str(t)
    return "text" if t is UNKNOWN else t.name


def common_numeric(a, b):
    """Result type of integer/bigint/double arithmetic."""
    if a.name == "double precision" or b.name == "double precision":
        return DOUBLE
    if a.name == "bigint" or b.name == "bigint":
        return BIGINT
    return INTEGER


def arith_result(op: str, a, b):
    fa, fb = family(a), family(b)
    if fa in ("int", "float") and fb in ("int", "float"):
        if op == "%" and (fa == "float" or fb == "float"):
            raise errors.DatatypeMismatch(f"operator does not exist: {a} % {b}")
        return common_numeric(a, b)
    raise errors.DatatypeMismatch(f"operator does not exist: {a} {op} {b}")


# -- literals ------------------------------------------------------------------------------------

_TRUE = {"t", "true", "y", "yes", "on", "1"}
_FALSE = {"f", "false", "n", "no", "off", "0"}


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


def parse_literal(text: str, t):
    """A string literal (or a string parameter) read as a value of type ``t``."""
    f = family(t)
    if f in ("text", "unknown"):
        return text
    s = text.strip()
    if f == "int":
        try:
            v = int(s)
        except ValueError:
            raise _bad_input(t, text) from None
        lo, hi = (INT4_MIN, INT4_MAX) if t.name == "integer" else (INT8_MIN, INT8_MAX)
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
            return float(s)
        except ValueError:
            raise _bad_input(t, text) from None
    if f == "bool":
        low = s.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise _bad_input(t, text)
    if f == "ts":
        return parse_timestamp(text)
    raise AssertionError(t)


# -- casts ---------------------------------------------------------------------------------------

def format_value(v, t) -> str:
    """A value as PostgreSQL's output function writes it (for casts to text, COPY TO)."""
    f = family(t)
    if f == "bool":
        return "true" if v else "false"
    if f == "float":
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        r = repr(float(v))
        return r[:-2] if r.endswith(".0") else r
    if f == "ts":
        if not isinstance(v, _dt.datetime):
            v = int_to_timestamp(v)
        return v.isoformat(sep=" ")
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
        return v
    if fd == "text":
        return _fit_text(format_value(v, src), dst, explicit)
    if fs == "int" and fd == "float":
        return float(v)
    if fs == "float" and fd == "int":
        if math.isnan(v) or math.isinf(v):
            raise errors.NumericValueOutOfRange(f"{dst.name} out of range")
        return _int_range(int(round(v)), dst)    # round(): half to even, as rint()
    if explicit:
        if fs == "text":
            return parse_literal(v, dst)
        if fs == "bool" and fd == "int":
            return int(v)
        if fs == "int" and fd == "bool":
            return v != 0
    what = f'column "{column}" is of type {dst}' if column else f"cannot cast type {src} to {dst}"
    if column:
        raise errors.DatatypeMismatch(f"{what} but expression is of type {src}")
    raise errors.DatatypeMismatch(what)


def _int_range(v: int, t) -> int:
    lo, hi = (INT4_MIN, INT4_MAX) if t.name == "integer" else (INT8_MIN, INT8_MAX)
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
    """Python value -> the scalar an expression vector holds (timestamps as int)."""
    if v is None:
        return None
    if t.name == "timestamp" and isinstance(v, _dt.datetime):
        return timestamp_to_int(v)
    return v


def from_repr(v, t):
    if v is None:
        return None
    if t.name == "timestamp" and not isinstance(v, _dt.datetime):
        return int_to_timestamp(int(v))
    return v

