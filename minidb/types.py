"""SQL types: what minidb can store, how each is spelled, and how a Python value is checked.

minidb stores seventeen SQL types.  Each is a `SqlType` value (a frozen dataclass) that says how
the type sits in a heap tuple (`minidb.heap.layout`): fixed-width types occupy ``size`` bytes at
an offset aligned to ``align``; variable-length types (char, varchar, text, numeric, bytea)
occupy a 4-byte descriptor in the fixed part and put their bytes in the tuple's tail.

=====================  =======================  ====  =====  ========  ======================
canonical name         spellings accepted       size  align  np_dtype  Python value
=====================  =======================  ====  =====  ========  ======================
smallint               smallint, int2           2     2      <i2       int
integer                int, int4, integer       4     4      <i4       int
bigint                 int8, bigint             8     8      <i8       int
real                   real, float4, float(n)   4     4      <f4       float (a float32 value)
                       with 1 <= n <= 24
double precision       float8, float, double    8     8      <f8       float
                       precision, float(n) with
                       25 <= n <= 53
numeric (precision p,  numeric, decimal,        4     4      None      decimal.Decimal
scale s or None)       numeric(p), numeric(p,s)
boolean                bool, boolean            1     1      u1 (0/1)  bool
char (length n)        char, char(n),           4     4      None      str, blank-padded
                       character, character(n)                         to n characters
varchar (length n or   varchar, varchar(n),     4     4      None      str
None = no limit)       character varying[(n)]
text                   text                     4     4      None      str
bytea                  bytea                    4     4      None      bytes
date                   date                     4     4      <i4       datetime.date
time                   time, time without time  8     8      <i8       datetime.time (naive)
                       zone
timestamp              timestamp, timestamp     8     8      <i8       datetime.datetime
                       without time zone                               (naive)
timestamptz            timestamptz, timestamp   8     8      <i8       datetime.datetime
                       with time zone                                  (aware, UTC)
interval               interval                 16    8      INTERVAL  `Interval` (a
                                                             _DTYPE    datetime.timedelta)
uuid                   uuid                     16    1      V16       uuid.UUID
=====================  =======================  ====  =====  ========  ======================

``size``/``align`` of the variable-length types are those of the descriptor; ``np_dtype`` is
the dtype the *stored* fixed-width value has in a tuple, and None for the variable-length
types, whose descriptor is two uint16 fields.  Stored forms (`storage_converter`): integers as
they are, real as float32, date as int32 days since 2000-01-01, time as int64 microseconds
since midnight, timestamp and timestamptz as int64 microseconds since 2000-01-01 00:00 (UTC for
timestamptz), interval as PostgreSQL's struct (int64 microseconds, int32 days, int32 months),
uuid as its 16 bytes in network order; in the tail: UTF-8 for the strings, the raw bytes for
bytea, and for numeric its exact decimal text in ASCII (``format(d, 'f')``: '-12.50', 'NaN',
'Infinity'), which keeps the value and its display scale.

Invariants
1. `coerce` is the only gate a value passes to reach storage: it returns exactly the Python value
   that decoding the stored bytes gives back (char(n) already blank-padded, a naive datetime,
   a real rounded to float32, a numeric rounded to its scale), or raises one of the errors
   below; it never silently changes a value except where PostgreSQL does (a string too long
   for char(n)/varchar(n) only by trailing spaces is cut; an aware datetime is converted to
   UTC; a naive datetime given for timestamptz is read in the session's TimeZone).
2. Timestamps are stored as int64 microseconds since 2000-01-01 00:00:00, PostgreSQL's epoch.
   `timestamp_to_int` and `int_to_timestamp` are exact inverses over Python's datetime range
   (years 1-9999), which is therefore the accepted range (PostgreSQL's is 4713 BC-294276 AD);
   dates likewise (days since 2000-01-01).  infinity / -infinity are not supported.
3. Lengths of char(n)/varchar(n) count characters, as in PostgreSQL; the tuple stores UTF-8
   bytes.  Strings must be valid UTF-8 text without NUL characters (PostgreSQL rejects both).
4. An `Interval` keeps PostgreSQL's three fields (months, days, microseconds) and is also a
   ``timedelta`` of months * 30 + days days and the microseconds, so that comparisons and
   hashing are PostgreSQL's (``'1 mon' = '30 days'``); the timedelta part bounds its range to
   +-999,999,999 days.
5. A numeric(p, s) value has at most p - s digits before the point and is rounded half away
   from zero to s digits, as PostgreSQL's typmod does; plain numeric keeps the value as given.

Errors (PostgreSQL's wording and SQLSTATE)
- smallint/integer/bigint out of range -> NumericValueOutOfRange 'integer out of range' (22003)
- real overflow/underflow -> NumericValueOutOfRange 'value out of range: overflow' (22003)
- numeric too wide for numeric(p,s) -> NumericValueOutOfRange 'numeric field overflow' (22003)
- wrong Python type (a bool for an integer, a str for a timestamp, 2.5 for an integer)
  -> DatatypeMismatch (42804)
- string too long -> StringDataRightTruncation 'value too long for type character varying(3)'
- NUL character or unencodable string -> DataError, SQLSTATE 22021
  (PostgreSQL's character_not_in_repertoire; errors.py has no class for it)
- timestamp / date / interval out of range -> DataError, SQLSTATE 22008
  (datetime_field_overflow)
- unknown type name -> NotSupportedError 'type "money" is not supported'

Interface
- `parse_type(text)` -> SqlType;  `coerce(sqltype, value, column=None)` -> Python value
- `storage_converter(sqltype, column)`: value -> stored form (the one-row encode path);
  `from_storage(sqltype)`: the inverse for the types whose stored form is not the value
- `coerce_array(sqltype, src, nrows, column)`: a whole fixed-width column at once, with numpy
- `encode_strings(sqltype, src, nrows, column)`: a whole varlena column, each distinct value once
- `timestamp_to_int`, `int_to_timestamp`, `ints_to_datetime64`, `datetime64_to_ints`,
  `date_to_int`, `int_to_date`, `time_to_int`, `int_to_time`, `Interval`, `fit_numeric`
- `set_timezone(name)` / `session_timezone()`: the TimeZone setting of the statement running
  in this thread (a context variable the SQL engine sets), used where PostgreSQL reads it.

Left out: arrays, user-defined types, timetz, infinite dates and timestamps, typmods of time,
timestamp and interval (fractional-second precision), numeric precision beyond 1000.
"""

from __future__ import annotations

import contextvars
import datetime as _dt
import decimal
import functools
import itertools
import math
import operator
import re
import struct
import uuid as _uuid
import zoneinfo
from dataclasses import dataclass

import numpy as np

import minidb.errors as errors

__all__ = [
    "SqlType", "parse_type", "coerce",
    "SMALLINT", "INTEGER", "BIGINT", "REAL", "DOUBLE", "NUMERIC", "BOOLEAN", "TEXT", "BYTEA",
    "DATE", "TIME", "TIMESTAMP", "TIMESTAMPTZ", "INTERVAL", "UUID",
    "PG_EPOCH", "timestamp_to_int", "int_to_timestamp", "ints_to_datetime64",
    "datetime64_to_ints", "TIMESTAMP_MIN", "TIMESTAMP_MAX", "MAX_STRING_LENGTH",
    "STORAGE_ZERO", "storage_converter", "from_storage", "coerce_array", "encode_strings",
    "Interval", "INTERVAL_DTYPE", "date_to_int", "int_to_date", "time_to_int", "int_to_time",
    "fit_numeric", "NUMERIC_CONTEXT", "NUMERIC_NAN", "NumericNaN", "canon_numeric", "format_numeric", "set_timezone", "session_timezone",
    "timezone_named", "UTC",
]

# PostgreSQL's limit on n in char(n)/varchar(n) (MaxAttrSize / 1 MB); our rows are far smaller,
# so a longer declared length could never be filled anyway.
MAX_STRING_LENGTH = 10 * 1024 * 1024
NUMERIC_MAX_PRECISION = 1000        # PostgreSQL's NUMERIC_MAX_PRECISION
NUMERIC_MIN_SCALE, NUMERIC_MAX_SCALE = -1000, 1000

INT2_MIN, INT2_MAX = -(2 ** 15), 2 ** 15 - 1
INT4_MIN, INT4_MAX = -(2 ** 31), 2 ** 31 - 1
INT8_MIN, INT8_MAX = -(2 ** 63), 2 ** 63 - 1
_INT_RANGE = {"smallint": (INT2_MIN, INT2_MAX), "integer": (INT4_MIN, INT4_MAX),
              "bigint": (INT8_MIN, INT8_MAX)}

# PostgreSQL's struct Interval {int64 time; int32 day; int32 month;}
INTERVAL_DTYPE = np.dtype([("time", "<i8"), ("day", "<i4"), ("month", "<i4")])

# (fixed, size, align, np_dtype) per canonical name.
_PHYSICAL = {
    "smallint": (True, 2, 2, "<i2"),
    "integer": (True, 4, 4, "<i4"),
    "bigint": (True, 8, 8, "<i8"),
    "real": (True, 4, 4, "<f4"),
    "double precision": (True, 8, 8, "<f8"),
    "numeric": (False, 4, 4, None),
    "boolean": (True, 1, 1, "u1"),
    "date": (True, 4, 4, "<i4"),
    "time": (True, 8, 8, "<i8"),
    "timestamp": (True, 8, 8, "<i8"),
    "timestamptz": (True, 8, 8, "<i8"),
    "interval": (True, 16, 8, INTERVAL_DTYPE),
    "uuid": (True, 16, 1, "V16"),
    "char": (False, 4, 4, None),
    "varchar": (False, 4, 4, None),
    "text": (False, 4, 4, None),
    "bytea": (False, 4, 4, None),
}


@dataclass(frozen=True)
class SqlType:
    """One SQL type: canonical ``name``; for char/varchar the declared ``length``; for
    numeric the precision (``length``) and ``scale`` (both None: unconstrained numeric)."""

    name: str
    length: int | None = None
    scale: int | None = None

    def __post_init__(self):
        if self.name not in _PHYSICAL:
            raise errors.NotSupportedError(f'type "{self.name}" is not supported')
        if self.name == "char" and self.length is None:
            object.__setattr__(self, "length", 1)       # char means char(1)
        if self.name == "numeric":
            if self.length is None:
                if self.scale is not None:
                    raise errors.InvalidParameterValue("NUMERIC scale needs a precision")
                return
            if not 1 <= self.length <= NUMERIC_MAX_PRECISION:
                raise errors.InvalidParameterValue(
                    f"NUMERIC precision {self.length} must be between 1 and "
                    f"{NUMERIC_MAX_PRECISION}")
            if self.scale is None:
                object.__setattr__(self, "scale", 0)    # numeric(p) means numeric(p, 0)
            if not NUMERIC_MIN_SCALE <= self.scale <= NUMERIC_MAX_SCALE:
                raise errors.InvalidParameterValue(
                    f"NUMERIC scale {self.scale} must be between {NUMERIC_MIN_SCALE} and "
                    f"{NUMERIC_MAX_SCALE}")
            return
        if self.scale is not None:
            raise errors.InvalidParameterValue(f"type {self.name} does not take a scale")
        if self.length is not None:
            if self.name not in ("char", "varchar"):
                raise errors.InvalidParameterValue(f"type {self.name} does not take a length")
            if not 1 <= self.length <= MAX_STRING_LENGTH:
                raise errors.InvalidParameterValue(
                    f"length for type {self.name} must be between 1 and {MAX_STRING_LENGTH}")

    @property
    def fixed(self) -> bool:
        """True when the value itself sits in the fixed part (not a varlena descriptor)."""
        return _PHYSICAL[self.name][0]

    @property
    def size(self) -> int:
        return _PHYSICAL[self.name][1]

    @property
    def align(self) -> int:
        return _PHYSICAL[self.name][2]

    @property
    def np_dtype(self):
        return _PHYSICAL[self.name][3]

    def __str__(self) -> str:
        if self.name == "char":
            return f"character({self.length})"
        if self.name == "varchar":
            return "character varying" if self.length is None else f"character varying({self.length})"
        if self.name == "timestamp":
            return "timestamp without time zone"
        if self.name == "timestamptz":
            return "timestamp with time zone"
        if self.name == "time":
            return "time without time zone"
        if self.name == "numeric" and self.length is not None:
            return f"numeric({self.length},{self.scale})"
        return self.name


SMALLINT = SqlType("smallint")
INTEGER = SqlType("integer")
BIGINT = SqlType("bigint")
REAL = SqlType("real")
DOUBLE = SqlType("double precision")
NUMERIC = SqlType("numeric")
BOOLEAN = SqlType("boolean")
TEXT = SqlType("text")
BYTEA = SqlType("bytea")
DATE = SqlType("date")
TIME = SqlType("time")
TIMESTAMP = SqlType("timestamp")
TIMESTAMPTZ = SqlType("timestamptz")
INTERVAL = SqlType("interval")
UUID = SqlType("uuid")

# spelling (lower case, single spaces) -> canonical name; a name in _LENGTHED may take (n)
_ALIASES = {
    "smallint": "smallint", "int2": "smallint",
    "int": "integer", "int4": "integer", "integer": "integer",
    "int8": "bigint", "bigint": "bigint",
    "real": "real", "float4": "real",
    "float8": "double precision", "float": "double precision",
    "double precision": "double precision", "double": "double precision",
    "numeric": "numeric", "decimal": "numeric", "dec": "numeric",
    "bool": "boolean", "boolean": "boolean",
    "char": "char", "character": "char", "bpchar": "char",
    "varchar": "varchar", "character varying": "varchar",
    "text": "text",
    "bytea": "bytea",
    "date": "date",
    "time": "time", "time without time zone": "time",
    "timestamp": "timestamp", "timestamp without time zone": "timestamp",
    "timestamptz": "timestamptz", "timestamp with time zone": "timestamptz",
    "interval": "interval",
    "uuid": "uuid",
}
_LENGTHED = {"char", "varchar"}
_TYPE_RE = re.compile(
    r"^\s*([a-z][a-z0-9 ]*?)\s*(?:\(\s*(-?\d+)\s*(?:,\s*(-?\d+)\s*)?\))?\s*$")
_parse_cache: dict[str, SqlType] = {}


def parse_type(text: str | SqlType) -> SqlType:
    """Parse a PostgreSQL type spelling ('INT4', 'character varying(10)', 'numeric(10, 2)',
    'float(24)' ...) into a SqlType."""
    if isinstance(text, SqlType):
        return text
    cached = _parse_cache.get(text)
    if cached is not None:
        return cached
    m = _TYPE_RE.match(text.lower())
    canonical = m and _ALIASES.get(" ".join(m.group(1).split()))
    if not canonical:
        raise errors.NotSupportedError(f'type "{text.strip()}" is not supported')
    length, scale = m.group(2), m.group(3)
    if canonical == "double precision" and " ".join(m.group(1).split()) == "float" \
            and length is not None and scale is None:
        # PostgreSQL: float(1)..float(24) is real, float(25)..float(53) double precision
        n = int(length)
        if n < 1:
            raise errors.InvalidParameterValue("precision for type float must be at least 1 bit")
        if n > 53:
            raise errors.InvalidParameterValue("precision for type float must be less than 54 bits")
        result = REAL if n <= 24 else DOUBLE
    elif canonical == "numeric":
        result = SqlType("numeric", None if length is None else int(length),
                         None if scale is None else int(scale))
    else:
        if scale is not None or (length is not None and canonical not in _LENGTHED):
            raise errors.NotSupportedError(f'type "{text.strip()}" is not supported')
        result = SqlType(canonical, None if length is None else int(length))
    _parse_cache[text] = result
    return result


# -- the session's time zone --------------------------------------------------------------------

UTC = _dt.timezone.utc
_TIMEZONE: contextvars.ContextVar = contextvars.ContextVar("minidb_timezone", default=None)
_OFFSET_RE = re.compile(r"^(?:utc|gmt)?\s*([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?$")


@functools.lru_cache(maxsize=256)
def timezone_named(name: str):
    """A tzinfo for a TimeZone value: an IANA name ('Europe/Paris', 'UTC') or a fixed offset
    ('+02', '-05:30'; POSIX signs as PostgreSQL's AT TIME ZONE reads 'UTC+2' are not
    supported).  Raises InvalidParameterValue for an unknown name."""
    low = name.strip().lower()
    if low in ("utc", "gmt", "z", "zulu", "uct", "etc/utc"):
        return UTC
    m = _OFFSET_RE.match(low)
    if m and m.group(0) and (m.group(1)):
        secs = int(m.group(2)) * 3600 + int(m.group(3) or 0) * 60 + int(m.group(4) or 0)
        if secs > 15 * 3600 + 59 * 60:
            raise errors.InvalidParameterValue(f'time zone "{name}" not recognized')
        return _dt.timezone(_dt.timedelta(seconds=secs if m.group(1) == "+" else -secs))
    try:
        return zoneinfo.ZoneInfo(name.strip())
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise errors.InvalidParameterValue(f'time zone "{name}" not recognized') from None


def set_timezone(name: str):
    """Make ``name`` the TimeZone of what runs next in this thread (the SQL engine calls it at
    each statement with the session's setting)."""
    _TIMEZONE.set(timezone_named(name))


def session_timezone():
    tz = _TIMEZONE.get()
    return UTC if tz is None else tz


# -- dates, times, intervals, numerics ----------------------------------------------------------

_PG_EPOCH_DATE_ORD = _dt.date(2000, 1, 1).toordinal()
DATE_MIN = _dt.date.min.toordinal() - _PG_EPOCH_DATE_ORD
DATE_MAX = _dt.date.max.toordinal() - _PG_EPOCH_DATE_ORD
USECS_PER_DAY = 86_400_000_000


def date_to_int(d: _dt.date) -> int:
    """Days since 2000-01-01."""
    return d.toordinal() - _PG_EPOCH_DATE_ORD


def int_to_date(i: int) -> _dt.date:
    i = int(i)
    if not DATE_MIN <= i <= DATE_MAX:
        raise errors.DatetimeFieldOverflow("date out of range")
    return _dt.date.fromordinal(i + _PG_EPOCH_DATE_ORD)


def time_to_int(t: _dt.time) -> int:
    """Microseconds since midnight."""
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond


def int_to_time(i: int) -> _dt.time:
    i = int(i)
    if i == USECS_PER_DAY:       # 24:00:00 is a PostgreSQL time; Python's stops before it
        i -= 1
    s, us = divmod(i, 1_000_000)
    m, s = divmod(s, 60)
    h, m = divmod(m, 60)
    return _dt.time(h, m, s, us)


class Interval(_dt.timedelta):
    """PostgreSQL's interval: ``months``, ``days`` and ``microseconds`` kept apart (a month is
    not a fixed number of days when added to a date), and a ``timedelta`` of months * 30 +
    days days plus the microseconds, the span PostgreSQL compares and hashes intervals by."""

    __slots__ = ("months", "mdays", "usecs")

    def __new__(cls, months: int = 0, days: int = 0, microseconds: int = 0):
        months, days, microseconds = int(months), int(days), int(microseconds)
        if not (INT4_MIN <= months <= INT4_MAX and INT4_MIN <= days <= INT4_MAX
                and INT8_MIN <= microseconds <= INT8_MAX):
            raise errors.DatetimeFieldOverflow("interval out of range")
        try:
            self = _dt.timedelta.__new__(cls, days=months * 30 + days, microseconds=microseconds)
        except OverflowError:
            raise errors.DatetimeFieldOverflow("interval out of range") from None
        self.months, self.mdays, self.usecs = months, days, microseconds
        return self

    @classmethod
    def from_timedelta(cls, td: _dt.timedelta) -> "Interval":
        if isinstance(td, Interval):
            return td
        return cls(0, td.days, td.seconds * 1_000_000 + td.microseconds)

    def parts(self) -> tuple[int, int, int]:
        return self.months, self.mdays, self.usecs

    def __reduce__(self):
        return (Interval, (self.months, self.mdays, self.usecs))

    def __repr__(self):
        return f"Interval(months={self.months}, days={self.mdays}, microseconds={self.usecs})"

    # timedelta's hash and comparisons are PostgreSQL's interval ones; keep them
    __hash__ = _dt.timedelta.__hash__


INTERVAL_ZERO = Interval()
_INTERVAL_STRUCT = struct.Struct("<qii")

# Exact decimal arithmetic: enough digits for any numeric minidb stores, PostgreSQL's rounding.
NUMERIC_CONTEXT = decimal.Context(prec=200_000, rounding=decimal.ROUND_HALF_UP,
                                  Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN,
                                  traps=[decimal.InvalidOperation, decimal.DivisionByZero,
                                         decimal.Overflow])
_DEC_ZERO = decimal.Decimal(0)


class NumericNaN(decimal.Decimal):
    """numeric's NaN as PostgreSQL orders it: equal to itself and above every other value
    (Infinity included), with one hash - so sorting, grouping, DISTINCT, min / max, joins
    and comparisons treat it as PostgreSQL does, where Python's Decimal NaN equals nothing
    and refuses to be ordered.  Every numeric NaN minidb makes is the one instance
    ``NUMERIC_NAN`` (``fit_numeric``, storage, float casts, arithmetic); being a Decimal
    subclass, its comparison methods win over Decimal's on either side of an operator."""

    __slots__ = ()

    def __eq__(self, other):
        return isinstance(other, decimal.Decimal) and other.is_nan()

    def __ne__(self, other):
        return not self.__eq__(other)

    def __lt__(self, other):
        return False

    def __le__(self, other):
        return self.__eq__(other)

    def __gt__(self, other):
        return not self.__eq__(other)

    def __ge__(self, other):
        return True

    def __hash__(self):
        return 0x7FF8

    def __reduce__(self):
        return (_numeric_nan, ())


def _numeric_nan():
    return NUMERIC_NAN


NUMERIC_NAN = NumericNaN("NaN")


def canon_numeric(d: decimal.Decimal) -> decimal.Decimal:
    """``d``, with a NaN replaced by ``NUMERIC_NAN``."""
    return NUMERIC_NAN if d.is_nan() else d


def _numeric_overflow(t: SqlType) -> errors.NumericValueOutOfRange:
    p, s = t.length, t.scale
    if s >= p or p - s <= 0:
        detail = (f"A field with precision {p}, scale {s} must round to an absolute value "
                  f"less than 1.")
    else:
        detail = (f"A field with precision {p}, scale {s} must round to an absolute value "
                  f"less than 10^{p - s}.")
    return errors.NumericValueOutOfRange(f"numeric field overflow\nDETAIL:  {detail}")


def fit_numeric(d: decimal.Decimal, t: SqlType) -> decimal.Decimal:
    """``d`` as a value of numeric type ``t``: rounded half away from zero to the scale and
    checked against the precision (22003), as PostgreSQL's apply_typmod; a negative zero
    loses its sign (PostgreSQL has none)."""
    if d.is_nan():
        return NUMERIC_NAN
    if t.length is None:
        if d.is_infinite():
            return d
        return d.copy_abs() if d.is_zero() and d.is_signed() else d
    if d.is_infinite():
        raise _numeric_overflow(t)
    q = d.quantize(decimal.Decimal(1).scaleb(-t.scale), context=NUMERIC_CONTEXT)
    if not q.is_zero() and q.adjusted() >= t.length - t.scale:
        raise _numeric_overflow(t)
    if q.is_signed() and q.is_zero():
        q = q.copy_abs()
    if t.scale < 0:         # numeric(p, -s): the value is a multiple of 10^s, shown without
        q = q.quantize(decimal.Decimal(1), context=NUMERIC_CONTEXT)   # a point
    return q


def format_numeric(d: decimal.Decimal) -> str:
    """PostgreSQL's numeric_out: plain digits (never an exponent), NaN, Infinity."""
    if d.is_nan():
        return "NaN"
    if d.is_infinite():
        return "-Infinity" if d.is_signed() else "Infinity"
    s = format(d, "f")
    return s[1:] if s.startswith("-") and d.is_zero() else s


# -- timestamps ------------------------------------------------------------------------------

PG_EPOCH = _dt.datetime(2000, 1, 1)
_UNIX_TO_PG_US = 946_684_800_000_000     # microseconds from 1970-01-01 to 2000-01-01


def timestamp_to_int(dt: _dt.datetime | _dt.date) -> int:
    """Microseconds since 2000-01-01 00:00:00 (an aware datetime is first converted to UTC)."""
    if not isinstance(dt, _dt.datetime):
        dt = _dt.datetime(dt.year, dt.month, dt.day)
    elif dt.tzinfo is not None:
        dt = dt.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    d = dt - PG_EPOCH
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


TIMESTAMP_MIN = timestamp_to_int(_dt.datetime.min)
TIMESTAMP_MAX = timestamp_to_int(_dt.datetime.max)


def int_to_timestamp(i: int) -> _dt.datetime:
    return PG_EPOCH + _dt.timedelta(microseconds=int(i))


def ints_to_datetime64(arr) -> np.ndarray:
    """Vectorized: int64 microseconds since 2000-01-01 -> numpy datetime64[us]."""
    return (np.asarray(arr, dtype="<i8") + _UNIX_TO_PG_US).view("datetime64[us]")


def datetime64_to_ints(arr) -> np.ndarray:
    """Vectorized inverse of `ints_to_datetime64` (NaT comes out as int64 min; check it first)."""
    a = np.asarray(arr).astype("datetime64[us]").view("<i8")
    return np.where(a == np.iinfo(np.int64).min, a, a - _UNIX_TO_PG_US)


# -- coercion --------------------------------------------------------------------------------

def _mismatch(sqltype: SqlType, value, column: str | None) -> errors.DatatypeMismatch:
    what = f'column "{column}" is' if column else "value must be"
    return errors.DatatypeMismatch(
        f"{what} of type {sqltype} but the value is of type {type(value).__name__}: {value!r:.60}")


def _out_of_range(sqltype: SqlType) -> errors.NumericValueOutOfRange:
    return errors.NumericValueOutOfRange(f"{sqltype.name} out of range")


def _check_text(s: str) -> str:
    """Reject what PostgreSQL cannot store in a UTF-8 database: NUL and lone surrogates."""
    if "\x00" in s:
        raise errors.CharacterNotInRepertoire('invalid byte sequence for encoding "UTF8": 0x00')
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError as e:
            raise errors.CharacterNotInRepertoire(
                f'character {s[e.start]!r} cannot be encoded in UTF8') from None
    return s


def _limit_length(sqltype: SqlType, s: str) -> str:
    n = sqltype.length
    if n is not None and len(s) > n:
        if s[n:].strip(" "):
            raise errors.StringDataRightTruncation(f"value too long for type {sqltype}")
        s = s[:n]           # only blanks beyond n: PostgreSQL silently truncates
    return s


def coerce(sqltype: SqlType, value, column: str | None = None):
    """Validate ``value`` for a column of ``sqltype`` and return the Python value to store.

    None passes through (NULL and NOT NULL are the row layout's business).  ``column`` only
    improves error messages.  See the module docstring for the rules and errors.
    """
    if value is None:
        return None
    name = sqltype.name
    if name == "integer" or name == "bigint" or name == "smallint":
        if isinstance(value, (bool, np.bool_)):
            raise _mismatch(sqltype, value, column)
        if isinstance(value, (int, np.integer)):
            v = int(value)
        elif isinstance(value, (float, np.floating)):
            if not math.isfinite(value) or value != math.floor(value):
                raise _mismatch(sqltype, value, column)
            v = int(value)
        else:
            raise _mismatch(sqltype, value, column)
        lo, hi = _INT_RANGE[name]
        if not lo <= v <= hi:
            raise _out_of_range(sqltype)
        return v
    if name == "double precision":
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)):
            raise _mismatch(sqltype, value, column)
        try:
            return float(value)
        except OverflowError:
            raise errors.NumericValueOutOfRange("value out of range: overflow") from None
    if name == "boolean":
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        raise _mismatch(sqltype, value, column)
    if name in ("char", "varchar", "text"):
        if not isinstance(value, str):
            raise _mismatch(sqltype, value, column)
        s = _check_text(str(value))      # str() turns np.str_ into a plain str
        if name == "text":
            return s
        s = _limit_length(sqltype, s)
        if name == "char" and len(s) < sqltype.length:
            s = s.ljust(sqltype.length)
        return s
    if name == "timestamp":
        if isinstance(value, np.datetime64):
            if np.isnat(value):
                raise _mismatch(sqltype, value, column)
            i = int(datetime64_to_ints(value))
            if not TIMESTAMP_MIN <= i <= TIMESTAMP_MAX:
                raise errors.DatetimeFieldOverflow("timestamp out of range")
            return int_to_timestamp(i)
        if isinstance(value, _dt.datetime):
            if value.tzinfo is not None:
                try:
                    return value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
                except OverflowError:
                    raise errors.DatetimeFieldOverflow("timestamp out of range") from None
            return value
        if isinstance(value, _dt.date):
            return _dt.datetime(value.year, value.month, value.day)
        raise _mismatch(sqltype, value, column)
    return _coerce_new(sqltype, name, value, column)


def _real(v: float) -> float:
    """A double rounded to float32, with PostgreSQL's overflow / underflow errors."""
    with np.errstate(over="ignore"):
        r = float(np.float32(v))
    if math.isinf(r) and not math.isinf(v):
        raise errors.NumericValueOutOfRange("value out of range: overflow")
    if r == 0.0 and v != 0.0:
        raise errors.NumericValueOutOfRange("value out of range: underflow")
    return r


def float_to_numeric(v: float) -> decimal.Decimal:
    """float8 -> numeric as PostgreSQL does it: the value printed with 15 significant
    digits (DBL_DIG), so 0.1::float8::numeric is 0.1."""
    if math.isnan(v):
        return NUMERIC_NAN
    if math.isinf(v):
        return decimal.Decimal("Infinity" if v > 0 else "-Infinity")
    return no_exponent(decimal.Decimal(format(v, ".15g")))


def no_exponent(d: decimal.Decimal) -> decimal.Decimal:
    """``d`` with a non-positive exponent (1E+3 -> 1000), the form numeric values keep: the
    exponent is minus PostgreSQL's display scale."""
    if d.is_finite() and d.as_tuple().exponent > 0:
        return d.quantize(decimal.Decimal(1), context=NUMERIC_CONTEXT)
    return d


def _to_utc_aware(value: _dt.datetime) -> _dt.datetime:
    """An aware datetime in UTC; a naive one is read in the session's time zone."""
    try:
        if value.tzinfo is None:
            value = value.replace(tzinfo=session_timezone())
        return value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise errors.DatetimeFieldOverflow("timestamp out of range") from None


def _coerce_new(sqltype: SqlType, name: str, value, column):
    """coerce() for the types added after the first eight (kept out of its hot branches)."""
    if name == "real":
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)):
            raise _mismatch(sqltype, value, column)
        try:
            return _real(float(value))
        except OverflowError:
            raise errors.NumericValueOutOfRange("value out of range: overflow") from None
    if name == "numeric":
        if isinstance(value, decimal.Decimal):
            d = value
        elif isinstance(value, (bool, np.bool_)):
            raise _mismatch(sqltype, value, column)
        elif isinstance(value, (int, np.integer)):
            d = decimal.Decimal(int(value))
        elif isinstance(value, (float, np.floating)):
            d = float_to_numeric(float(value))
        else:
            raise _mismatch(sqltype, value, column)
        if d.is_snan():
            raise _mismatch(sqltype, value, column)
        return fit_numeric(d, sqltype)
    if name == "date":
        if isinstance(value, _dt.datetime):
            return value.date()
        if isinstance(value, _dt.date):
            return value
        raise _mismatch(sqltype, value, column)
    if name == "time":
        if isinstance(value, _dt.time):
            return value.replace(tzinfo=None) if value.tzinfo is not None else value
        raise _mismatch(sqltype, value, column)
    if name == "timestamptz":
        if isinstance(value, np.datetime64):
            if np.isnat(value):
                raise _mismatch(sqltype, value, column)
            value = coerce(TIMESTAMP, value).replace(tzinfo=UTC)
        if isinstance(value, _dt.datetime):
            return _to_utc_aware(value)
        if isinstance(value, _dt.date):
            return _to_utc_aware(_dt.datetime(value.year, value.month, value.day))
        raise _mismatch(sqltype, value, column)
    if name == "interval":
        if isinstance(value, _dt.timedelta):
            return Interval.from_timedelta(value)
        raise _mismatch(sqltype, value, column)
    if name == "bytea":
        if isinstance(value, bytes):
            return value
        if isinstance(value, (bytearray, memoryview)):
            return bytes(value)
        raise _mismatch(sqltype, value, column)
    if name == "uuid":
        if isinstance(value, _uuid.UUID):
            return value
        raise _mismatch(sqltype, value, column)
    raise AssertionError(name)   # __post_init__ admits only the names above


# -- stored forms, one value and whole columns --------------------------------------------------

# The stored form of a value, what the tuple holds: int for integer/bigint, float for double,
# bool for boolean, int microseconds since 2000-01-01 for timestamp, UTF-8 bytes (blank-padded
# for char(n)) for the string types.  A NULL fixed-width slot holds the zero below.
STORAGE_ZERO = {"integer": 0, "bigint": 0, "double precision": 0.0, "boolean": False,
                "timestamp": 0, "smallint": 0, "real": 0.0, "date": 0, "time": 0,
                "timestamptz": 0, "interval": bytes(16), "uuid": bytes(16)}


def storage_converter(t: SqlType, column: str | None = None):
    """A function: non-None Python value -> its stored form (see STORAGE_ZERO's comment).

    Each has a fast path for the common exact type and otherwise defers to `coerce`, so the
    rules and error messages are coerce's.
    """
    slow = functools.partial(coerce, t, column=column)
    name = t.name
    if name == "integer" or name == "bigint" or name == "smallint":
        lo, hi = _INT_RANGE[name]

        def conv(v):
            if type(v) is int and lo <= v <= hi:
                return v
            return slow(v)
    elif name == "double precision":
        def conv(v):
            return v if type(v) is float else slow(v)
    elif name == "boolean":
        def conv(v):
            return v if type(v) is bool else slow(v)
    elif name == "timestamp":
        def conv(v):
            return timestamp_to_int(slow(v))
    elif name in _NEW_STORAGE:
        to_stored = _NEW_STORAGE[name]

        def conv(v):
            return to_stored(slow(v))
    elif name == "char":
        n = t.length

        def conv(v):
            if type(v) is str and len(v) <= n and v.isascii() and "\x00" not in v:
                return v.encode("ascii").ljust(n)       # blank-padded, as coerce does
            return slow(v).encode("utf-8")
    else:
        n = t.length if name == "varchar" else None

        def conv(v):
            if (type(v) is str and v.isascii() and "\x00" not in v
                    and (n is None or len(v) <= n)):
                return v.encode("ascii")
            return slow(v).encode("utf-8")
    return conv


def _tstz_to_int(v: _dt.datetime) -> int:
    d = v - _PG_EPOCH_UTC
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def _interval_bytes(v: Interval) -> bytes:
    return _INTERVAL_STRUCT.pack(v.usecs, v.mdays, v.months)


_PG_EPOCH_UTC = _dt.datetime(2000, 1, 1, tzinfo=UTC)

# stored form of a coerced value, per type added after the first eight
_NEW_STORAGE = {
    "smallint": int, "real": float,
    "numeric": lambda d: format_numeric(d).encode("ascii"),
    "date": date_to_int, "time": time_to_int, "timestamptz": _tstz_to_int,
    "interval": _interval_bytes, "uuid": lambda u: u.bytes, "bytea": bytes,
}


def int_to_timestamptz(i: int) -> _dt.datetime:
    return _PG_EPOCH_UTC + _dt.timedelta(microseconds=int(i))


def interval_from_bytes(b) -> Interval:
    us, days, months = _INTERVAL_STRUCT.unpack(b)
    return Interval(months, days, us)


def from_storage(t: SqlType):
    """The inverse of `storage_converter` for the types whose stored form is not their Python
    value (None for the others: integers, floats, booleans, strings are stored as they are;
    timestamp has ``int_to_timestamp``).  A varlena type's function takes its raw bytes."""
    return _FROM_STORAGE.get(t.name)


_FROM_STORAGE = {
    "date": int_to_date, "time": int_to_time, "timestamptz": int_to_timestamptz,
    "interval": interval_from_bytes, "uuid": lambda b: _uuid.UUID(bytes=bytes(b)),
    "numeric": lambda b: canon_numeric(decimal.Decimal(str(b, "ascii"))), "bytea": bytes,
}


_NONE_TYPE = type(None)
_INT_TYPES = {int}
_FLOAT_TYPES = {float, int}
_BOOL_TYPES = {bool}


def _first_bad(t: SqlType, column: str | None, values, ok: np.ndarray | None = None):
    """Raise coerce's error for the first value in ``values`` that fails (``ok`` False)."""
    idx = range(len(values)) if ok is None else np.flatnonzero(~ok)
    for k in idx:
        v = values[int(k)]
        if v is not None:
            coerce(t, v, column=column)
    what = f'column "{column}"' if column else "array"
    raise errors.DatatypeMismatch(f"{what} is of type {t}: invalid values")


def _as_list_with_nulls(src, nrows):
    """(list of values, None for NULL; mask or None; set of the non-None value types)."""
    if isinstance(src, np.ma.MaskedArray):
        if src.shape != (nrows,):
            raise _wrong_length(src.size, nrows)
        mask = np.ma.getmaskarray(src)
        lst = src.data.tolist()
        for k in np.flatnonzero(mask).tolist():
            lst[k] = None
    else:
        lst = src.tolist() if isinstance(src, np.ndarray) else list(src)
        if len(lst) != nrows:
            raise _wrong_length(len(lst), nrows)
    kinds = set(map(type, lst))
    if _NONE_TYPE in kinds:
        kinds.discard(_NONE_TYPE)
        mask = np.fromiter(map(operator.is_, lst, itertools.repeat(None)), dtype=bool,
                           count=nrows)
    else:
        mask = None
    return lst, mask, kinds


def _wrong_length(got: int, nrows: int):
    return errors.InvalidParameterValue(f"column has {got} values, expected {nrows}")


def coerce_array(t: SqlType, src, nrows: int, column: str | None = None,
                 ) -> tuple[np.ndarray, np.ndarray | None]:
    """Vectorized `coerce` for a fixed-width type: (stored values as ``t.np_dtype``, NULL mask).

    ``src``: a numpy array (a masked array for NULLs; NaT is NULL in datetime64 arrays), a
    sequence with None for NULL, or None (all NULL).  The mask is None when nothing is NULL;
    NULL positions hold 0.  Numeric arrays are checked with numpy, no per-row Python; lists
    are converted by numpy when their values are all of the plain type, else value by value.
    Raises what `coerce` raises for the first bad value.
    """
    dtype = np.dtype(t.np_dtype)
    if src is None:
        return np.zeros(nrows, dtype), np.ones(nrows, dtype=bool)
    mask = None
    if isinstance(src, np.ndarray) and src.dtype != object:
        if src.shape != (nrows,):
            raise _wrong_length(src.size, nrows)
        if isinstance(src, np.ma.MaskedArray):
            m = np.ma.getmaskarray(src)
            arr = src.data
            if m.any():
                mask = m
        else:
            arr = src
    else:
        lst, mask, kinds = _as_list_with_nulls(src, nrows)
        fill = STORAGE_ZERO[t.name]
        filled = lst if mask is None else [fill if x is None else x for x in lst]
        if t.name in _INT_RANGE and kinds <= _INT_TYPES:
            try:
                arr = np.array(filled, dtype=np.int64)
            except OverflowError:
                _first_bad(t, column, lst)
        elif t.name in ("double precision", "real") and kinds <= _FLOAT_TYPES:
            try:
                arr = np.array(filled, dtype=np.float64)
            except OverflowError:
                _first_bad(t, column, lst)
        elif t.name == "boolean" and kinds <= _BOOL_TYPES:
            arr = np.array(filled, dtype=bool)
        else:
            # anything else (numpy scalars, datetimes, mixtures): coerce value by value
            conv = storage_converter(t, column)
            if dtype.kind == "V":           # interval, uuid: 16 bytes each
                arr = np.frombuffer(b"".join([fill if x is None else conv(x) for x in lst]),
                                    dtype=dtype).copy()
            else:
                arr = np.array([fill if x is None else conv(x) for x in lst], dtype=dtype)
            return arr, mask
    if mask is not None:
        arr = np.where(mask, np.zeros((), arr.dtype), arr)
    return _check_fixed_array(t, column, arr, mask)


def _check_fixed_array(t: SqlType, column: str | None, arr: np.ndarray, mask):
    """Vectorized version of coerce's rules for one numpy array: (stored values, mask)."""
    kind, name = arr.dtype.kind, t.name
    if name in _INT_RANGE:
        lo, hi = _INT_RANGE[name]
        if kind in "iu":
            if arr.size and (int(arr.min()) < lo or int(arr.max()) > hi):
                _first_bad(t, column, arr.tolist(), (arr >= lo) & (arr <= hi))
            return arr.astype(t.np_dtype), mask
        if kind == "f":
            with np.errstate(invalid="ignore"):
                ok = np.isfinite(arr) & (arr == np.trunc(arr)) & (arr >= lo) & (arr < -float(lo))
            if not ok.all():
                _first_bad(t, column, arr.tolist(), ok)
            return arr.astype(t.np_dtype), mask
    elif name == "double precision":
        if kind in "iuf":
            return arr.astype("<f8"), mask
    elif name == "real":
        if kind in "iuf":
            f8 = arr.astype("<f8")
            with np.errstate(over="ignore"):
                f4 = f8.astype("<f4")
            bad = (np.isinf(f4) & ~np.isinf(f8)) | ((f4 == 0) & (f8 != 0))
            if bad.any():
                _first_bad(t, column, f8.tolist(), ~bad)
            return f4, mask
    elif name == "date":
        if kind == "M":
            nat = np.isnat(arr)
            days = arr.astype("datetime64[D]").view("<i8") - 10957   # 1970 -> 2000
            if nat.any():
                mask = nat if mask is None else (mask | nat)
                days = np.where(nat, 0, days)
            if days.size and (days.min() < DATE_MIN or days.max() > DATE_MAX):
                raise errors.DatetimeFieldOverflow("date out of range")
            return days.astype("<i4"), mask
    elif name == "timestamptz":
        if kind == "M":         # numpy datetimes are naive: read as UTC
            return _check_fixed_array(TIMESTAMP, column, arr, mask)
    elif name == "boolean":
        if kind == "b":
            return arr.astype("u1"), mask
    elif name == "timestamp":
        if kind == "M":
            ints = datetime64_to_ints(arr)
            nat = np.isnat(arr)
            if nat.any():               # NaT is numpy's NULL for datetimes
                mask = nat if mask is None else (mask | nat)
                ints[nat] = 0
            if arr.size and (ints.min() < TIMESTAMP_MIN or ints.max() > TIMESTAMP_MAX):
                raise errors.DatetimeFieldOverflow("timestamp out of range")
            return ints, mask
    # wrong kind of array: coerce's error for its first element
    _first_bad(t, column, arr[:1].tolist())


def encode_strings(t: SqlType, src, nrows: int, column: str | None = None):
    """Vectorized `coerce` + UTF-8 encoding for char/varchar/text (and the stored bytes of
    numeric and bytea).

    Returns (encoded, const, lengths, mask): ``encoded`` a list of bytes per row (b"" for
    NULL) or None; ``const`` the bytes of the one value every row has when no row is NULL (then
    ``encoded`` is None: a blank filler for a million rows costs one encoding); ``lengths``
    int64 byte lengths, 0 for NULL; ``mask`` True for NULL, or None.  Each distinct value is
    coerced and encoded once.
    """
    if src is None:
        return None, None, np.zeros(nrows, np.int64), np.ones(nrows, dtype=bool)
    if isinstance(src, np.ndarray) and src.dtype.kind not in "UOS":
        _first_bad(t, column, src[:1].tolist())
    if isinstance(src, np.ndarray) and src.shape != (nrows,):
        raise _wrong_length(src.size, nrows)
    lst, mask, kinds = _as_list_with_nulls(src, nrows)
    if t.name == "bytea" and not kinds <= {bytes}:
        lst = [bytes(x) if isinstance(x, (bytearray, memoryview)) else x for x in lst]
    if t.name == "numeric" or t.name == "bytea":
        pass                        # conv (coerce) checks each distinct value
    elif not all(issubclass(k, str) for k in kinds):
        _first_bad(t, column, lst, np.fromiter((isinstance(x, str) or x is None for x in lst),
                                         dtype=bool, count=nrows))
    conv = storage_converter(t, column)
    distinct = set(lst)
    distinct.discard(None)
    if len(distinct) == 1 and mask is None:
        const = conv(next(iter(distinct)))
        return None, const, np.full(nrows, len(const), np.int64), None
    table = {x: conv(x) for x in distinct}
    table[None] = b""
    encoded = list(map(table.__getitem__, lst))
    lens = np.fromiter(map(len, encoded), dtype=np.int64, count=nrows)
    return encoded, None, lens, mask
