"""B-tree keys as memcmp-comparable byte strings.

PostgreSQL's nbtree compares keys with one support function per column type (an operator
class).  minidb instead encodes a whole key once into bytes whose plain byte order
(``memcmp``, Python's ``bytes`` comparison) is the key order, so that every comparison the
B-tree makes is one ``bytes`` comparison done in C, and a page's keys can be sorted or
searched without knowing their types.

Encoding, per column, concatenated in index column order::

    flag   1 byte   0x00 value present, 0x01 NULL (so NULLs sort after every value,
                    PostgreSQL's default NULLS LAST for ascending indexes)
    value  see below; a fixed-width type's NULL keeps a zero payload of the same width
           (so keys of fixed-width columns all have one length); a string NULL has none

    ==================  =====  =======================================================
    type                bytes  value
    ==================  =====  =======================================================
    integer             4      big-endian two's complement with the sign bit flipped
    bigint, timestamp   8      same (timestamp: microseconds since 2000-01-01)
    double precision    8      IEEE bits big-endian; negatives: all bits flipped;
                               positives: sign bit flipped.  -0.0 is encoded as 0.0
                               and every NaN as one NaN that sorts above +Infinity
                               (PostgreSQL: NaN = NaN, NaN > every other value)
    boolean             1      0x00 false, 0x01 true
    char, varchar,      n+2    UTF-8 with each 0x00 byte written 0x00 0xFF, then the
    text                       terminator 0x00 0x00
    smallint            2      as integer, 16 bits
    date                4      as integer (days since 2000-01-01)
    time, timestamptz   8      as bigint (microseconds)
    real                8      as double precision (a float32 value widened exactly)
    interval            16     the span PostgreSQL compares by, months * 30 days + days
                               + microseconds, as a 128-bit integer (sign bit flipped)
    uuid                16     its bytes (PostgreSQL compares uuids with memcmp)
    bytea               n+2    the bytes escaped and terminated as strings are
    numeric             var    0x00 -Infinity; 0x01 negative; 0x02 zero; 0x03 positive;
                               0x04 Infinity; 0x05 NaN (PostgreSQL: NaN above all).  A
                               nonzero value is 0.d1d2...dk x 10^(E+1) with dk != 0:
                               E as int32 with the sign bit flipped, then each digit + 1
                               as a byte, then 0x00; a negative value has all of these
                               bytes complemented (so -0.123 < -0.12 and the 0xFF end
                               still terminates it).  Equal numbers (1.0, 1.00) encode
                               equal.
    ==================  =====  =======================================================

**Column options** (``options``, one int per column, PostgreSQL's ``pg_index.indoption``
bits: ``INDOPTION_DESC`` = 1, ``INDOPTION_NULLS_FIRST`` = 2).  ASC NULLS LAST (0) is the
encoding above.  NULLS FIRST swaps the two flag bytes (0x00 NULL, 0x01 value), so a NULL
sorts before every value of its column.  DESC complements every byte of the value's
encoding (its flag byte excepted): a column's encodings are prefix-free (fixed width or
self-terminated: the string escape and terminator become 0xFF 0x00 and 0xFF 0xFF), so
the first differing byte of two complemented encodings is the complement of the first
differing byte of the originals, and their order is exactly reversed.  Invariant 2 below
holds for every combination; ``decode`` complements a DESC column back before reading it.

Why the string form sorts right: inside a string a 0x00 is always followed by 0xFF, and
the terminator is 0x00 0x00, so a string that ends first compares below any longer string
with the same prefix (0x00 0x00 < 0x00 0xFF and < any other byte pair).  The order is
the order of UTF-8 bytes, which is the order of code points: PostgreSQL's ``C`` collation
(``COLLATE "C"``), not a linguistic one.  char(n) values are stored blank-padded to n
characters, so comparing the padded bytes equals bpchar's "ignore trailing blanks" rule
except for strings whose characters sort below a blank (control characters).

Invariants:
  1. For keys a, b of one index: ``encode(a) < encode(b)`` iff a sorts before b
     (column by column, NULL last), and equal keys encode equal.
  2. The encoding of a complete key is *prefix-free* among complete keys of the same
     index (every column's encoding is fixed-width or self-terminated), so appending
     anything (the heap TID) after different keys never changes their order, and the
     encoding of the first k columns is a byte prefix of the whole key's.
  3. ``decode(encode(v)) == v`` for every storable v (after ``types.coerce``), except that
     -0.0 decodes as 0.0 and every NaN as the canonical NaN; a numeric decodes without its
     display scale (1.00 as 1) and an interval as days and microseconds of the same span
     (equal under SQL's ``=`` in both cases).

Interface: ``KeyCodec(types, names, options=None)`` with ``encode(values)``, ``encode_prefix(values)``,
``encode_stored(stored_values)``, ``decode(data)``, ``encode_batch(columns, n)`` (numpy,
an index build's worth at once) and ``fixed_width`` (the key length when every column is
fixed-width, else None).
"""

from __future__ import annotations

import struct

import numpy as np

import decimal
import uuid as _uuid

import minidb.errors as errors
from minidb.types import (NUMERIC_NAN, Interval, SqlType, from_storage, int_to_timestamp,
                          parse_type, storage_converter)

__all__ = ["KeyCodec", "NULL_FLAG", "VALUE_FLAG", "INDOPTION_DESC", "INDOPTION_NULLS_FIRST",
           "default_option"]

VALUE_FLAG = b"\x00"      # the flags of an ASC / DESC NULLS LAST column
NULL_FLAG = b"\x01"
_TERMINATOR = b"\x00\x00"
INDOPTION_DESC = 1        # PostgreSQL's pg_index.indoption bits
INDOPTION_NULLS_FIRST = 2
_COMPLEMENT = bytes(range(255, -1, -1))


def default_option(desc: bool, nulls_first: bool | None) -> int:
    """The indoption bits of ``col [ASC|DESC] [NULLS FIRST|LAST]``; NULLS FIRST is the
    default of DESC, NULLS LAST of ASC (PostgreSQL's rule)."""
    if nulls_first is None:
        nulls_first = desc
    return (INDOPTION_DESC if desc else 0) | (INDOPTION_NULLS_FIRST if nulls_first else 0)

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_D = struct.Struct(">d")
_SIGN32 = 1 << 31
_SIGN64 = 1 << 63
_ALL64 = (1 << 64) - 1
_CANONICAL_NAN = 0x7FF8000000000000

# (payload width or None for strings) per type name
_WIDTH = {"integer": 4, "bigint": 8, "timestamp": 8, "double precision": 8, "boolean": 1,
          "char": None, "varchar": None, "text": None, "smallint": 2, "date": 4, "time": 8,
          "timestamptz": 8, "real": 8, "interval": 16, "uuid": 16, "bytea": None,
          "numeric": None}
_U16 = struct.Struct(">H")
_SIGN16 = 1 << 15
_SIGN128 = 1 << 127
_USECS_PER_DAY = 86_400_000_000


def _interval_span(v) -> int:
    """PostgreSQL's interval_cmp_value: (months * 30 + days) days + microseconds."""
    if not isinstance(v, Interval):
        v = from_storage(_INTERVAL_T)(v)
    return (v.months * 30 + v.mdays) * _USECS_PER_DAY + v.usecs


def _interval_key(v) -> bytes:
    return ((_interval_span(v) + _SIGN128) & ((1 << 128) - 1)).to_bytes(16, "big")


def _numeric_key(d: decimal.Decimal) -> bytes:
    """The order-preserving bytes of a numeric (see the module docstring)."""
    if d.is_nan():
        return b"\x05"
    if d.is_infinite():
        return b"\x00" if d.is_signed() else b"\x04"
    if d.is_zero():
        return b"\x02"
    sign, digits, exp = d.as_tuple()
    k = len(digits)
    while digits[k - 1] == 0:
        k -= 1
    e = len(digits) + exp - 1           # exponent of the leading digit
    body = ((e + _SIGN32) & 0xFFFFFFFF).to_bytes(4, "big") + bytes(x + 1 for x in digits[:k]) \
        + b"\x00"
    if sign:
        return b"\x01" + bytes(255 - x for x in body)
    return b"\x03" + body


def _numeric_from_key(data: bytes, pos: int) -> tuple[decimal.Decimal, int]:
    tag = data[pos]
    pos += 1
    if tag == 5:
        return NUMERIC_NAN, pos
    if tag in (0, 2, 4):
        return decimal.Decimal({0: "-Infinity", 2: "0", 4: "Infinity"}[tag]), pos
    neg = tag == 1
    flip = (lambda b: 255 - b) if neg else (lambda b: b)
    e = int.from_bytes(bytes(flip(b) for b in data[pos:pos + 4]), "big") - _SIGN32
    pos += 4
    digits = []
    while flip(data[pos]) != 0:
        digits.append(flip(data[pos]) - 1)
        pos += 1
    pos += 1
    return decimal.Decimal((1 if neg else 0, tuple(digits), e - len(digits) + 1)), pos


def _stored_numeric(v) -> decimal.Decimal:
    return v if isinstance(v, decimal.Decimal) else decimal.Decimal(str(v, "ascii"))


def _double_bits(v: float) -> int:
    if v != v:
        bits = _CANONICAL_NAN
    else:
        if v == 0.0:
            v = 0.0  # -0.0 == 0.0 in SQL: one encoding
        bits = _U64.unpack(_D.pack(v))[0]
    return bits ^ _ALL64 if bits & _SIGN64 else bits ^ _SIGN64


def _bits_double(bits: int) -> float:
    bits = bits ^ _SIGN64 if bits & _SIGN64 else bits ^ _ALL64
    return _D.unpack(_U64.pack(bits))[0]


def _escape(b: bytes) -> bytes:
    if b"\x00" in b:
        b = b.replace(b"\x00", b"\x00\xff")
    return b + _TERMINATOR


_INTERVAL_T = parse_type("interval")
_INTEGER_T, _BIGINT_T, _DOUBLE_T = (parse_type(n) for n in ("integer", "bigint",
                                                            "double precision"))


def _int_field(fmt: struct.Struct, sign: int):
    return lambda b: fmt.unpack(b)[0] - sign


_OTHER_DECODE = {
    "smallint": _int_field(_U16, _SIGN16),
    "date": lambda b: from_storage(parse_type("date"))(_U32.unpack(b)[0] - _SIGN32),
    "time": lambda b: from_storage(parse_type("time"))(_U64.unpack(b)[0] - _SIGN64),
    "timestamptz": lambda b: from_storage(parse_type("timestamptz"))(_U64.unpack(b)[0] - _SIGN64),
    "real": lambda b: _bits_double(_U64.unpack(b)[0]),
    "interval": lambda b: Interval(0, *divmod(int.from_bytes(b, "big") - _SIGN128,
                                              _USECS_PER_DAY)),
    "uuid": lambda b: _uuid.UUID(bytes=bytes(b)),
}


_SEARCH_TYPE = {"real": parse_type("double precision")}
_NUMERIC_T = parse_type("numeric")


class KeyCodec:
    """Encoder/decoder of the keys of one index (see the module docstring)."""

    def __init__(self, types, names=None, options=None):
        self.types: list[SqlType] = [parse_type(t) for t in types]
        if not self.types:
            raise errors.InternalError("an index needs at least one key column")
        self.names = list(names) if names is not None else [f"column{i + 1}"
                                                            for i in range(len(self.types))]
        self.options = [int(o) for o in options] if options else [0] * len(self.types)
        if len(self.options) != len(self.types):
            raise errors.InternalError("an index needs one option per key column")
        widths = [_WIDTH[t.name] for t in self.types]
        self.fixed_width = (None if any(w is None for w in widths)
                            else sum(1 + w for w in widths))
        # search values are converted without the column's typmod or float32 rounding: a
        # bound 1.005 on a numeric(10,2) column or 0.1 (a double) on a real column must keep
        # its value, as the comparison in a scan's filter does
        self._conv = [storage_converter(_SEARCH_TYPE.get(t.name, _NUMERIC_T
                                                         if t.name == "numeric" else t), n)
                      for t, n in zip(self.types, self.names)]
        self._enc = [self._with_option(self._encoder(t), o)
                     for t, o in zip(self.types, self.options)]
        # the flag bytes of each column: (value present, NULL)
        self._flags = [(b"\x01", b"\x00") if o & INDOPTION_NULLS_FIRST else (b"\x00", b"\x01")
                       for o in self.options]

    @staticmethod
    def _with_option(enc, option: int):
        """A column encoder with its DESC / NULLS FIRST option applied (module docstring)."""
        if not option:
            return enc
        flag = b"\x01" if option & INDOPTION_NULLS_FIRST else b"\x00"
        if option & INDOPTION_DESC:
            return lambda v: flag + enc(v)[1:].translate(_COMPLEMENT)
        return lambda v: flag + enc(v)[1:]

    @staticmethod
    def _encoder(t: SqlType):
        name = t.name
        if name == "integer":
            return lambda v: b"\x00" + _U32.pack((v + _SIGN32) & 0xFFFFFFFF)
        if name in ("bigint", "timestamp"):
            return lambda v: b"\x00" + _U64.pack((v + _SIGN64) & _ALL64)
        if name == "double precision":
            return lambda v: b"\x00" + _U64.pack(_double_bits(float(v)))
        if name == "boolean":
            return lambda v: b"\x00\x01" if v else b"\x00\x00"
        if name == "smallint":
            return lambda v: b"\x00" + _U16.pack((v + _SIGN16) & 0xFFFF)
        if name == "date":
            return lambda v: b"\x00" + _U32.pack((v + _SIGN32) & 0xFFFFFFFF)
        if name in ("time", "timestamptz"):
            return lambda v: b"\x00" + _U64.pack((v + _SIGN64) & _ALL64)
        if name == "real":
            return lambda v: b"\x00" + _U64.pack(_double_bits(float(v)))
        if name == "interval":
            return lambda v: b"\x00" + _interval_key(v)
        if name == "uuid":
            return lambda v: b"\x00" + (v.bytes if isinstance(v, _uuid.UUID) else bytes(v))
        if name == "numeric":
            return lambda v: b"\x00" + _numeric_key(_stored_numeric(v))
        return lambda v: b"\x00" + _escape(v)  # stored form: UTF-8 bytes (bytea: the bytes)

    def _null(self, i: int) -> bytes:
        w = _WIDTH[self.types[i].name]
        return self._flags[i][1] + bytes(w or 0)

    def null_flag(self, i: int) -> bytes:
        """The flag byte a NULL of key column ``i`` has (0x01, or 0x00 with NULLS FIRST)."""
        return self._flags[i][1]

    def value_flag(self, i: int) -> bytes:
        """The flag byte a value of key column ``i`` has (0x00, or 0x01 with NULLS FIRST)."""
        return self._flags[i][0]

    # -- one key ---------------------------------------------------------------------------------
    def encode(self, values) -> bytes:
        """The bytes of a complete key (one value per column; None = NULL)."""
        if len(values) != len(self.types):
            raise errors.InternalError(f"key has {len(values)} values, index has "
                                       f"{len(self.types)} columns")
        return self.encode_prefix(values)

    def encode_prefix(self, values) -> bytes:
        """The bytes of the first ``len(values)`` columns (a search bound on a prefix).
        Values are checked and converted as a stored value would be (``types.coerce``)."""
        if len(values) == 1 and self.types:     # (a one-column lookup: no list, no join)
            v = values[0]
            if v is not None:
                return self._enc[0](self._conv[0](v))
        if len(values) > len(self.types):
            raise errors.InternalError(f"key has {len(values)} values, index has "
                                       f"{len(self.types)} columns")
        parts = []
        for i, v in enumerate(values):
            if v is None:
                parts.append(self._null(i))
            else:
                parts.append(self._enc[i](self._conv[i](v)))
        return b"".join(parts)

    def encode_stored(self, stored) -> bytes:
        """Like ``encode_prefix`` for values already in their stored form (int, float,
        bool, int microseconds, UTF-8 ``bytes``), without ``types.coerce``: the form the
        heap holds.  Strings may then contain 0x00 bytes, which the escape handles even
        though SQL text never has them."""
        parts = []
        for i, v in enumerate(stored):
            parts.append(self._null(i) if v is None else self._enc[i](v))
        return b"".join(parts)

    def has_null(self, values) -> bool:
        return any(v is None for v in values)

    def decode(self, data) -> tuple:
        """The column values of a complete key's bytes (the inverse of ``encode``)."""
        data = bytes(data)
        pos = 0
        out = []
        flipped = False   # the bytes after pos are complemented (the last column was DESC)
        for t, o, (vflag, nflag) in zip(self.types, self.options, self._flags):
            if flipped:
                data = data[:pos] + data[pos:].translate(_COMPLEMENT)
                flipped = False
            flag = data[pos:pos + 1]
            pos += 1
            w = _WIDTH[t.name]
            if flag == nflag:
                out.append(None)
                pos += w or 0
                continue
            if flag != vflag:
                raise errors.DataCorrupted(f"invalid null flag {data[pos - 1]} in index key "
                                           f"{data.hex()}")
            if o & INDOPTION_DESC:   # complement the rest back (this column's bytes matter)
                data = data[:pos] + data[pos:].translate(_COMPLEMENT)
                flipped = True
            name = t.name
            if name == "integer":
                out.append(_U32.unpack_from(data, pos)[0] - _SIGN32)
            elif name == "bigint":
                out.append(_U64.unpack_from(data, pos)[0] - _SIGN64)
            elif name == "timestamp":
                out.append(int_to_timestamp(_U64.unpack_from(data, pos)[0] - _SIGN64))
            elif name == "double precision":
                out.append(_bits_double(_U64.unpack_from(data, pos)[0]))
            elif name == "boolean":
                out.append(data[pos] != 0)
            elif name == "numeric":
                d, pos = _numeric_from_key(data, pos)
                out.append(d)
                continue
            elif name in _OTHER_DECODE:
                out.append(_OTHER_DECODE[name](data[pos:pos + w]))
            else:
                buf = bytearray()
                while True:
                    j = data.index(b"\x00", pos)
                    buf += data[pos:j]
                    nxt = data[j + 1]
                    if nxt == 0:
                        pos = j + 2
                        break
                    if nxt != 0xFF:
                        raise errors.DataCorrupted(f"invalid string escape in index key "
                                                   f"{data.hex()}")
                    buf += b"\x00"
                    pos = j + 2
                out.append(bytes(buf) if name == "bytea" else buf.decode("utf-8"))
                continue
            pos += w
        if pos != len(data):
            raise errors.DataCorrupted(f"index key {data.hex()} has {len(data) - pos} "
                                       "trailing bytes")
        return tuple(out)

    # -- many keys (index build) ------------------------------------------------------------------
    def encode_batch(self, columns, n: int):
        """Encode ``n`` keys given as columns, each ``(values, null mask or None)`` as
        ``RowLayout.gather`` returns them (ints, floats, bools, int64 timestamps, object
        arrays of str).  Returns an ``(n, fixed_width)`` uint8 array when every column is
        fixed-width (vectorized), else a list of ``bytes``."""
        if len(columns) != len(self.types):
            raise errors.InternalError("encode_batch needs one array per key column")
        if self.fixed_width is None:
            return self._encode_batch_var(columns, n)
        out = np.zeros((n, self.fixed_width), dtype=np.uint8)
        pos = 0
        for t, o, (vals, mask) in zip(self.types, self.options, columns):
            w = _WIDTH[t.name]
            payload = self._fixed_payload(t, np.asarray(vals), n).view(np.uint8).reshape(n, w)
            out[:, pos + 1:pos + 1 + w] = (255 - payload) if o & INDOPTION_DESC else payload
            nulls_first = bool(o & INDOPTION_NULLS_FIRST)
            if nulls_first:
                out[:, pos] = 1
            if mask is not None:
                m = np.asarray(mask, dtype=bool)
                out[m, pos] = 0 if nulls_first else 1
                out[m, pos + 1:pos + 1 + w] = 0
            pos += 1 + w
        return out

    @staticmethod
    def _fixed_payload(t: SqlType, vals: np.ndarray, n: int) -> np.ndarray:
        name = t.name
        if name == "integer":
            return (vals.astype(np.int64) + _SIGN32).astype(">u4")
        if name in ("bigint", "timestamp"):
            return (vals.astype(np.int64).view(np.uint64) ^ np.uint64(_SIGN64)).astype(">u8")
        if name == "double precision":
            f = vals.astype(np.float64)
            f = np.where(f == 0.0, 0.0, f)                   # -0.0 -> 0.0
            bits = f.view(np.uint64).copy()
            bits[np.isnan(f)] = np.uint64(_CANONICAL_NAN)
            neg = (bits & np.uint64(_SIGN64)) != 0
            bits = np.where(neg, ~bits, bits ^ np.uint64(_SIGN64))
            return bits.astype(">u8")
        if name == "boolean":
            return (vals != 0).astype(np.uint8)
        if name == "smallint":
            return (vals.astype(np.int64) + _SIGN16).astype(">u2")
        if name == "date":
            return KeyCodec._fixed_payload(_INTEGER_T, vals, n)
        if name in ("time", "timestamptz"):
            return KeyCodec._fixed_payload(_BIGINT_T, vals, n)
        if name == "real":
            return KeyCodec._fixed_payload(_DOUBLE_T, vals, n)
        if name in ("interval", "uuid"):
            enc = _interval_key if name == "interval" else (
                lambda v: v.bytes if isinstance(v, _uuid.UUID) else bytes(v))
            return np.frombuffer(b"".join([enc(v) for v in vals]), dtype="V16")
        raise errors.InternalError(f"{name} is not fixed-width")

    def _encode_batch_var(self, columns, n: int) -> list[bytes]:
        per_col = []
        for i, (t, (vals, mask)) in enumerate(zip(self.types, columns)):
            nulls = (np.zeros(n, dtype=bool) if mask is None
                     else np.asarray(mask, dtype=bool))
            null_bytes = self._null(i)
            w = _WIDTH[t.name]
            if w is None:
                if t.name in ("numeric", "bytea"):
                    f = self._enc[i]
                    enc = [null_bytes if nl else f(v) for v, nl in zip(vals, nulls.tolist())]
                elif self.options[i]:
                    f = self._enc[i]
                    enc = [null_bytes if nl else f(v.encode("utf-8"))
                           for v, nl in zip(vals, nulls.tolist())]
                else:
                    enc = [null_bytes if nl else b"\x00" + _escape(v.encode("utf-8"))
                           for v, nl in zip(vals, nulls.tolist())]
            else:
                payload = self._fixed_payload(t, np.asarray(vals), n)
                raw = payload.view(np.uint8).reshape(n, w)
                if self.options[i] & INDOPTION_DESC:
                    raw = 255 - raw
                flag = nulls.astype(np.uint8)[:, None]
                if self.options[i] & INDOPTION_NULLS_FIRST:
                    flag = 1 - flag
                m = np.concatenate([flag, np.where(nulls[:, None], 0, raw)], axis=1)
                m = np.ascontiguousarray(m, dtype=np.uint8)
                blob = m.tobytes()
                enc = [blob[j * (w + 1):(j + 1) * (w + 1)] for j in range(n)]
            per_col.append(enc)
        if len(per_col) == 1:
            return per_col[0]
        return [b"".join(parts) for parts in zip(*per_col)]

    def describe(self, values) -> str:
        """``(a, b)=(1, x)`` as PostgreSQL's error details print a key."""
        cols = ", ".join(self.names)
        vals = ", ".join("null" if v is None else str(v) for v in values)
        return f"({cols})=({vals})"
