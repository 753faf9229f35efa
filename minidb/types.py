"""SQL types: what minidb can store, how each is spelled, and how a Python value is checked.

minidb stores eight SQL types.  Each is a `SqlType` value (a frozen dataclass) that says how the
type sits in a heap tuple (`minidb.heap.layout`): fixed-width types occupy ``size`` bytes at an
offset aligned to ``align``; variable-length types (char, varchar, text) occupy a 4-byte
descriptor in the fixed part and put their UTF-8 bytes in the tuple's tail.

=====================  =======================  ====  =====  ========  ======================
canonical name         spellings accepted       size  align  np_dtype  Python value
=====================  =======================  ====  =====  ========  ======================
integer                int, int4, integer       4     4      <i4       int
bigint                 int8, bigint             8     8      <i8       int
double precision       float8, float, double    8     8      <f8       float
                       precision
boolean                bool, boolean            1     1      u1 (0/1)  bool
char (length n)        char, char(n),           4     4      None      str, blank-padded
                       character, character(n)                         to n characters
varchar (length n or   varchar, varchar(n),     4     4      None      str
None = no limit)       character varying[(n)]
text                   text                     4     4      None      str
timestamp              timestamp, timestamp     8     8      <i8       datetime.datetime
                       without time zone                               (naive)
=====================  =======================  ====  =====  ========  ======================

``size``/``align`` of char/varchar/text are those of the descriptor; ``np_dtype`` is the dtype
the *stored* fixed-width value has in a tuple (booleans are one byte 0/1, timestamps int64), and
None for the variable-length types, whose descriptor is two uint16 fields.

Invariants
1. `coerce` is the only gate a value passes to reach storage: it returns exactly the Python value
   that decoding the stored bytes gives back (char(n) already blank-padded, a naive datetime),
   or raises one of the errors below; it never silently changes a value except where PostgreSQL
   does (a string too long for char(n)/varchar(n) only by trailing spaces is cut; an aware
   datetime is converted to UTC).
2. Timestamps are stored as int64 microseconds since 2000-01-01 00:00:00, PostgreSQL's epoch.
   `timestamp_to_int` and `int_to_timestamp` are exact inverses over Python's datetime range
   (years 1-9999), which is therefore the accepted range (PostgreSQL's is 4713 BC-294276 AD).
3. Lengths of char(n)/varchar(n) count characters, as in PostgreSQL; the tuple stores UTF-8
   bytes.  Strings must be valid UTF-8 text without NUL characters (PostgreSQL rejects both).

Errors (PostgreSQL's wording and SQLSTATE)
- integer/bigint out of range -> NumericValueOutOfRange 'integer out of range' (22003)
- wrong Python type (a bool for an integer, a str for a timestamp, 2.5 for an integer)
  -> DatatypeMismatch (42804)
- string too long -> StringDataRightTruncation 'value too long for type character varying(3)'
- NUL character or unencodable string -> DataError, SQLSTATE 22021
  (PostgreSQL's character_not_in_repertoire; errors.py has no class for it)
- timestamp out of range -> DataError, SQLSTATE 22008 (datetime_field_overflow)
- unknown type name -> NotSupportedError 'type "money" is not supported'

Interface
- `parse_type(text)` -> SqlType;  `coerce(sqltype, value, column=None)` -> Python value
- `storage_converter(sqltype, column)`: value -> stored form (the one-row encode path)
- `coerce_array(sqltype, src, nrows, column)`: a whole fixed-width column at once, with numpy
- `encode_strings(sqltype, src, nrows, column)`: a whole string column, each distinct value once
- `timestamp_to_int`, `int_to_timestamp`, `ints_to_datetime64`, `datetime64_to_ints`

Left out: numeric, real/float4, smallint, date/time/interval, timestamptz as a type (aware
datetimes are accepted and converted), arrays, user-defined types, typmods other than a length.
"""

from __future__ import annotations

import datetime as _dt
import functools
import itertools
import math
import operator
import re
from dataclasses import dataclass

import numpy as np

import minidb.errors as errors

__all__ = [
    "SqlType", "parse_type", "coerce",
    "INTEGER", "BIGINT", "DOUBLE", "BOOLEAN", "TEXT", "TIMESTAMP",
    "PG_EPOCH", "timestamp_to_int", "int_to_timestamp", "ints_to_datetime64",
    "datetime64_to_ints", "TIMESTAMP_MIN", "TIMESTAMP_MAX", "MAX_STRING_LENGTH",
    "STORAGE_ZERO", "storage_converter", "coerce_array", "encode_strings",
]

# PostgreSQL's limit on n in char(n)/varchar(n) (MaxAttrSize / 1 MB); our rows are far smaller,
# so a longer declared length could never be filled anyway.
MAX_STRING_LENGTH = 10 * 1024 * 1024

INT4_MIN, INT4_MAX = -(2 ** 31), 2 ** 31 - 1
INT8_MIN, INT8_MAX = -(2 ** 63), 2 ** 63 - 1

# (fixed, size, align, np_dtype) per canonical name.
_PHYSICAL = {
    "integer": (True, 4, 4, "<i4"),
    "bigint": (True, 8, 8, "<i8"),
    "double precision": (True, 8, 8, "<f8"),
    "boolean": (True, 1, 1, "u1"),
    "timestamp": (True, 8, 8, "<i8"),
    "char": (False, 4, 4, None),
    "varchar": (False, 4, 4, None),
    "text": (False, 4, 4, None),
}


@dataclass(frozen=True)
class SqlType:
    """One SQL type: canonical ``name`` and, for char/varchar, the declared ``length``."""

    name: str
    length: int | None = None

    def __post_init__(self):
        if self.name not in _PHYSICAL:
            raise errors.NotSupportedError(f'type "{self.name}" is not supported')
        if self.name == "char" and self.length is None:
            object.__setattr__(self, "length", 1)       # char means char(1)
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
    def np_dtype(self) -> str | None:
        return _PHYSICAL[self.name][3]

    def __str__(self) -> str:
        if self.name == "char":
            return f"character({self.length})"
        if self.name == "varchar":
            return "character varying" if self.length is None else f"character varying({self.length})"
        if self.name == "timestamp":
            return "timestamp without time zone"
        return self.name


INTEGER = SqlType("integer")
BIGINT = SqlType("bigint")
DOUBLE = SqlType("double precision")
BOOLEAN = SqlType("boolean")
TEXT = SqlType("text")
TIMESTAMP = SqlType("timestamp")

# spelling (lower case, single spaces) -> canonical name; a name in _LENGTHED may take (n)
_ALIASES = {
    "int": "integer", "int4": "integer", "integer": "integer",
    "int8": "bigint", "bigint": "bigint",
    "float8": "double precision", "float": "double precision",
    "double precision": "double precision",
    "bool": "boolean", "boolean": "boolean",
    "char": "char", "character": "char",
    "varchar": "varchar", "character varying": "varchar",
    "text": "text",
    "timestamp": "timestamp", "timestamp without time zone": "timestamp",
}
_LENGTHED = {"char", "varchar"}
_TYPE_RE = re.compile(r"^\s*([a-z][a-z0-9 ]*?)\s*(?:\(\s*(\d+)\s*\))?\s*$")
_parse_cache: dict[str, SqlType] = {}


def parse_type(text: str | SqlType) -> SqlType:
    """Parse a PostgreSQL type spelling ('INT4', 'character varying(10)', ...) into a SqlType."""
    if isinstance(text, SqlType):
        return text
    cached = _parse_cache.get(text)
    if cached is not None:
        return cached
    m = _TYPE_RE.match(text.lower())
    canonical = m and _ALIASES.get(" ".join(m.group(1).split()))
    if not canonical:
        raise errors.NotSupportedError(f'type "{text.strip()}" is not supported')
    length = m.group(2)
    if length is not None and canonical not in _LENGTHED:
        raise errors.NotSupportedError(f'type "{text.strip()}" is not supported')
    result = SqlType(canonical, None if length is None else int(length))
    _parse_cache[text] = result
    return result


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
    if name == "integer" or name == "bigint":
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
        lo, hi = (INT4_MIN, INT4_MAX) if name == "integer" else (INT8_MIN, INT8_MAX)
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
    raise AssertionError(name)   # __post_init__ admits only the names above


# -- stored forms, one value and whole columns --------------------------------------------------

# The stored form of a value, what the tuple holds: int for integer/bigint, float for double,
# bool for boolean, int microseconds since 2000-01-01 for timestamp, UTF-8 bytes (blank-padded
# for char(n)) for the string types.  A NULL fixed-width slot holds the zero below.
STORAGE_ZERO = {"integer": 0, "bigint": 0, "double precision": 0.0, "boolean": False,
                "timestamp": 0}


def storage_converter(t: SqlType, column: str | None = None):
    """A function: non-None Python value -> its stored form (see STORAGE_ZERO's comment).

    Each has a fast path for the common exact type and otherwise defers to `coerce`, so the
    rules and error messages are coerce's.
    """
    slow = functools.partial(coerce, t, column=column)
    name = t.name
    if name == "integer" or name == "bigint":
        lo, hi = (INT4_MIN, INT4_MAX) if name == "integer" else (INT8_MIN, INT8_MAX)

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
        if t.name in ("integer", "bigint") and kinds <= _INT_TYPES:
            try:
                arr = np.array(filled, dtype=np.int64)
            except OverflowError:
                _first_bad(t, column, lst)
        elif t.name == "double precision" and kinds <= _FLOAT_TYPES:
            try:
                arr = np.array(filled, dtype=np.float64)
            except OverflowError:
                _first_bad(t, column, lst)
        elif t.name == "boolean" and kinds <= _BOOL_TYPES:
            arr = np.array(filled, dtype=bool)
        else:
            # anything else (numpy scalars, datetimes, mixtures): coerce value by value
            conv = storage_converter(t, column)
            arr = np.array([fill if x is None else conv(x) for x in lst], dtype=dtype)
            return arr, mask
    if mask is not None:
        arr = np.where(mask, np.zeros((), arr.dtype), arr)
    return _check_fixed_array(t, column, arr, mask)


def _check_fixed_array(t: SqlType, column: str | None, arr: np.ndarray, mask):
    """Vectorized version of coerce's rules for one numpy array: (stored values, mask)."""
    kind, name = arr.dtype.kind, t.name
    if name in ("integer", "bigint"):
        lo, hi = (INT4_MIN, INT4_MAX) if name == "integer" else (INT8_MIN, INT8_MAX)
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
    """Vectorized `coerce` + UTF-8 encoding for char/varchar/text.

    Returns (encoded, const, lengths, mask): ``encoded`` a list of bytes per row (b"" for
    NULL) or None; ``const`` the bytes of the one value every row has when no row is NULL (then
    ``encoded`` is None: a blank filler for a million rows costs one encoding); ``lengths``
    int64 byte lengths, 0 for NULL; ``mask`` True for NULL, or None.  Each distinct value is
    coerced and encoded once.
    """
    if src is None:
        return None, None, np.zeros(nrows, np.int64), np.ones(nrows, dtype=bool)
    if isinstance(src, np.ndarray) and src.dtype.kind not in "UO":
        _first_bad(t, column, src[:1].tolist())
    if isinstance(src, np.ndarray) and src.shape != (nrows,):
        raise _wrong_length(src.size, nrows)
    lst, mask, kinds = _as_list_with_nulls(src, nrows)
    if not all(issubclass(k, str) for k in kinds):
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
