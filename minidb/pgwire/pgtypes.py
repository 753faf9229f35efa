"""Values on the wire: PostgreSQL's type OIDs, and the text and binary forms of each type.

A result column's type is known by its minidb type name (``description``'s second field);
``column_type(name)`` gives the OID and length PostgreSQL reports for it in a RowDescription,
so a client decodes ``integer`` as ``int4`` (23), ``double precision`` as ``float8`` (701)...

Text output follows PostgreSQL's output functions: booleans ``t`` / ``f``; floats in the
shortest form that reads back exactly (PostgreSQL 12+'s default, ``extra_float_digits`` 1),
``Infinity`` / ``-Infinity`` / ``NaN``; timestamps ``YYYY-MM-DD HH:MM:SS[.ffffff]`` with
trailing zeros of the fraction dropped; bytea as ``\\x`` and hex; arrays as ``{a,b}`` with
PostgreSQL's quoting.  Binary output (a client may ask for it per column in Bind) is
PostgreSQL's ``send`` form for the fixed-width types: big-endian integers, IEEE floats, one
byte for a boolean, microseconds since 2000-01-01 for timestamps; other types fall back to the
text bytes (which is their ``send`` form for text, varchar, char).

Parameters arrive as text unless the client says binary.  A parameter whose type the client
gave (an OID in Parse) is read as that type; one of type 0 ("unknown") is handed to the
engine as a Python ``str``, and the binder reads it as the type its context asks for
(``id = $1`` reads it as an integer), which is what PostgreSQL does with an unknown literal.

The client's side (``minidb.pgwire.client``) is the mirror image.  ``encode_param`` sends a
Python value so that the server's ``decode_param`` gives the engine the same Python value
the embedded DB-API would have passed: integers, floats, booleans, timestamps, bytea and
uuids in binary with their OID, a ``str`` as text of type 0 (unknown, so its context types
it), ``None`` as NULL.  ``decode_text`` reads a result column's text by its type OID into the
Python type the embedded DB-API returns (``int``, ``float``, ``bool``, naive ``datetime``,
``str``...), and ``type_name`` gives the minidb type name ``description`` shows for an OID.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import struct
import uuid

import minidb.errors as errors

__all__ = ["column_type", "encode_text", "encode_binary", "decode_param", "OID_NAMES",
           "type_oid", "type_name", "encode_param", "decode_text"]

# name -> (OID, typlen); typlen -1 is variable length
_TYPES = {
    "boolean": (16, 1), "bool": (16, 1),
    "bytea": (17, -1),
    "bigint": (20, 8), "int8": (20, 8),
    "smallint": (21, 2), "int2": (21, 2),
    "integer": (23, 4), "int4": (23, 4), "int": (23, 4),
    "text": (25, -1), "unknown": (25, -1),
    "oid": (26, 4),
    "real": (700, 4), "float4": (700, 4),
    "double precision": (701, 8), "float8": (701, 8),
    "char": (1042, -1), "bpchar": (1042, -1), "character": (1042, -1),
    "varchar": (1043, -1), "character varying": (1043, -1),
    "date": (1082, 4),
    "time": (1083, 8), "time without time zone": (1083, 8),
    "timestamp": (1114, 8), "timestamp without time zone": (1114, 8),
    "timestamptz": (1184, 8), "timestamp with time zone": (1184, 8),
    "interval": (1186, 16),
    "numeric": (1700, -1), "decimal": (1700, -1),
    "uuid": (2950, 16),
    "json": (114, -1), "jsonb": (3802, -1),
}
_ARRAYS = {16: 1000, 17: 1001, 20: 1016, 21: 1005, 23: 1007, 25: 1009, 700: 1021, 701: 1022,
           1042: 1014, 1043: 1015, 1082: 1182, 1114: 1115, 1184: 1185, 1700: 1231, 2950: 2951}
OID_NAMES = {16: "boolean", 17: "bytea", 20: "bigint", 21: "smallint", 23: "integer",
             25: "text", 26: "oid", 700: "real", 701: "double precision", 1042: "char",
             1043: "varchar", 1082: "date", 1083: "time", 1114: "timestamp",
             1184: "timestamptz", 1186: "interval", 1700: "numeric", 2950: "uuid", 705: "unknown"}
_EPOCH = _dt.datetime(2000, 1, 1)
_EPOCH_TZ = _dt.datetime(2000, 1, 1, tzinfo=_dt.timezone.utc)
_EPOCH_DATE = _dt.date(2000, 1, 1)


def _base(name: str) -> str:
    name = name.lower().strip()
    cut = name.find("(")
    return name[:cut].strip() if cut >= 0 else name


def type_oid(name: str) -> int:
    """PostgreSQL's OID for a minidb type name (``text``'s for one it does not know)."""
    name = name.lower().strip()
    if name.endswith("[]"):
        return _ARRAYS.get(type_oid(name[:-2]), 1009)
    return _TYPES.get(_base(name), (25, -1))[0]


def column_type(name: str) -> tuple[int, int, int]:
    """(type OID, typlen, typmod) for a RowDescription."""
    name = (name or "text").lower().strip()
    if name.endswith("[]"):
        return type_oid(name), -1, -1
    oid, typlen = _TYPES.get(_base(name), (25, -1))
    typmod = -1
    if oid in (1042, 1043) and "(" in name:
        try:
            typmod = int(name[name.index("(") + 1:name.index(")")]) + 4
        except ValueError:
            pass
    return oid, typlen, typmod


# -- text output ----------------------------------------------------------------------------------
def _float_text(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    r = repr(v)
    if "e" in r:
        mant, exp = r.split("e")
        if mant.endswith(".0"):
            mant = mant[:-2]
        sign = exp[0] if exp[0] in "+-" else "+"
        digits = exp.lstrip("+-").rjust(2, "0")
        return f"{mant}e{sign}{digits}"
    if r.endswith(".0"):
        r = r[:-2]
        if len(r.lstrip("-")) > 15:   # PostgreSQL switches to an exponent past 15 digits
            return _float_text_exp(v)
    return r


def _float_text_exp(v: float) -> str:
    s = f"{v:.17e}"
    mant, exp = s.split("e")
    # shortest mantissa that reads back
    for nd in range(1, 18):
        cand = f"{v:.{nd}e}"
        if float(cand) == v:
            mant, exp = cand.split("e")
            break
    mant = mant.rstrip("0").rstrip(".") if "." in mant else mant
    sign = exp[0]
    return f"{mant}e{sign}{exp[1:].lstrip('0').rjust(2, '0')}"


def _time_text(t) -> str:
    s = t.strftime("%H:%M:%S")
    if t.microsecond:
        s += (".%06d" % t.microsecond).rstrip("0")
    return s


def _interval_text(td: _dt.timedelta) -> str:
    days = td.days
    secs = td.seconds
    us = td.microseconds
    parts = []
    if days:
        parts.append(f"{days} day" + ("s" if days != 1 else ""))
    if secs or us or not parts:
        h, rem = divmod(secs, 3600)
        m, s = divmod(rem, 60)
        t = f"{h:02d}:{m:02d}:{s:02d}"
        if us:
            t += (".%06d" % us).rstrip("0")
        parts.append(t)
    return " ".join(parts)


def _interval_parts_text(months: int, days: int, us: int) -> str:
    """PostgreSQL's interval output (IntervalStyle postgres): '1 year 2 mons 3 days
    04:05:06.5', each field with its own sign."""
    out = []
    years, mons = int(months / 12), months - int(months / 12) * 12
    for n, unit in ((years, "year"), (mons, "mon"), (days, "day")):
        if n:
            out.append(f"{n} {unit}" + ("s" if n != 1 else ""))
    if us or not out:
        sign = "-" if us < 0 else ("+" if out and (months < 0 or days < 0) else "")
        a = abs(us)
        h, rem = divmod(a, 3_600_000_000)
        m, rem = divmod(rem, 60_000_000)
        sec, frac = divmod(rem, 1_000_000)
        t = f"{sign}{h:02d}:{m:02d}:{sec:02d}"
        if frac:
            t += (".%06d" % frac).rstrip("0")
        out.append(t)
    return " ".join(out)


def _array_elem(v) -> str:
    if v is None:
        return "NULL"
    s = encode_text(v).decode("utf-8")
    if s == "" or any(c in s for c in ' ,{}"\\') or s.upper() == "NULL":
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return s


def encode_text_as(v, oid: int) -> bytes:
    """``encode_text`` knowing the column's type: a real (float4) is written with the
    shortest digits that read back as the same float4, as PostgreSQL writes it."""
    if oid == 700 and isinstance(v, float) and math.isfinite(v):
        return _float_text(float(str(_np_float32(v)))).encode()
    return encode_text(v)


def _np_float32(v):
    import numpy as np
    return np.float32(v)


def encode_text(v) -> bytes:
    """PostgreSQL's text output of one non-NULL value."""
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, bool):
        return b"t" if v else b"f"
    if isinstance(v, int):
        return str(v).encode()
    if isinstance(v, float):
        return _float_text(v).encode()
    if isinstance(v, _dt.datetime):
        s = v.strftime("%Y-%m-%d %H:%M:%S")
        if v.microsecond:
            s += (".%06d" % v.microsecond).rstrip("0")
        if v.tzinfo is not None:
            off = v.utcoffset()
            total = int(off.total_seconds())
            sign = "+" if total >= 0 else "-"
            total = abs(total)
            s += f"{sign}{total // 3600:02d}"
            if total % 3600:
                s += f":{total % 3600 // 60:02d}"
        return s.encode()
    if isinstance(v, _dt.date):
        return v.isoformat().encode()
    if isinstance(v, _dt.time):
        return _time_text(v).encode()
    if isinstance(v, _dt.timedelta):
        parts = getattr(v, "parts", None)
        if parts is not None:      # minidb.types.Interval: months, days, microseconds
            return _interval_parts_text(*parts()).encode()
        return _interval_text(v).encode()
    if isinstance(v, decimal.Decimal):
        return str(v).encode()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return b"\\x" + bytes(v).hex().encode()
    if isinstance(v, uuid.UUID):
        return str(v).encode()
    if isinstance(v, (list, tuple)):
        return ("{" + ",".join(_array_elem(x) for x in v) + "}").encode("utf-8")
    return str(v).encode("utf-8")


# -- binary output --------------------------------------------------------------------------------
_PACK = {16: struct.Struct("!?"), 20: struct.Struct("!q"), 21: struct.Struct("!h"),
         23: struct.Struct("!i"), 26: struct.Struct("!I"), 700: struct.Struct("!f"),
         701: struct.Struct("!d")}


def encode_binary(v, oid: int) -> bytes:
    """PostgreSQL's binary (``send``) form of one non-NULL value of type ``oid``."""
    p = _PACK.get(oid)
    if p is not None:
        return p.pack(v)
    if oid in (1114, 1184) and isinstance(v, _dt.datetime):
        base = _EPOCH_TZ if v.tzinfo is not None else _EPOCH
        d = v - base
        return struct.pack("!q", (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds)
    if oid == 1082 and isinstance(v, _dt.date):
        return struct.pack("!i", (v - _EPOCH_DATE).days)
    if oid == 17 and isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if oid == 2950 and isinstance(v, uuid.UUID):
        return v.bytes
    if oid == 1083 and isinstance(v, _dt.time):
        return struct.pack("!q", ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000
                           + v.microsecond)
    if oid == 1186 and isinstance(v, _dt.timedelta):
        parts = getattr(v, "parts", None)
        months, days, us = parts() if parts is not None else (
            0, v.days, v.seconds * 1_000_000 + v.microseconds)
        return struct.pack("!qii", us, days, months)
    if oid == 1700 and isinstance(v, decimal.Decimal):
        return _numeric_send(v)
    return encode_text(v)


def _numeric_send(d: decimal.Decimal) -> bytes:
    """numeric's binary form: ndigits, weight, sign, dscale, then base-10000 digits."""
    if d.is_nan():
        return struct.pack("!hhHh", 0, 0, 0xC000, 0)
    sign, digits, exp = d.as_tuple()
    dscale = max(0, -exp)
    s = "".join(map(str, digits))
    # align the decimal point to a multiple of 4 digits
    int_len = len(s) + exp          # digits before the point
    pad_left = (4 - int_len % 4) % 4
    s = "0" * pad_left + s
    int_len += pad_left
    frac = len(s) - int_len
    s += "0" * ((4 - frac % 4) % 4 if frac > 0 else 0)
    if int_len < 0:
        s = "0" * (-int_len) + s
        int_len = 0
    groups = [int(s[i:i + 4]) for i in range(0, len(s), 4)]
    weight = int_len // 4 - 1
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    return struct.pack(f"!hhHh{len(groups)}h", len(groups), weight,
                       0x4000 if sign else 0, dscale, *groups)


# -- parameters -----------------------------------------------------------------------------------
_UNPACK = {16: struct.Struct("!?"), 20: struct.Struct("!q"), 21: struct.Struct("!h"),
           23: struct.Struct("!i"), 26: struct.Struct("!I"), 700: struct.Struct("!f"),
           701: struct.Struct("!d")}


def _bool_in(s: str) -> bool:
    t = s.strip().lower()
    if t in ("t", "true", "yes", "y", "on", "1"):
        return True
    if t in ("f", "false", "no", "n", "off", "0"):
        return False
    raise errors.InvalidTextRepresentation(f'invalid input syntax for type boolean: "{s}"')


def _int_in(s: str, name: str) -> int:
    try:
        return int(s.strip())
    except ValueError:
        raise errors.InvalidTextRepresentation(
            f'invalid input syntax for type {name}: "{s}"') from None


def _float_in(s: str) -> float:
    t = s.strip().lower()
    special = {"infinity": math.inf, "+infinity": math.inf, "-infinity": -math.inf,
               "inf": math.inf, "-inf": -math.inf, "nan": math.nan}
    if t in special:
        return special[t]
    try:
        return float(t)
    except ValueError:
        raise errors.InvalidTextRepresentation(
            f'invalid input syntax for type double precision: "{s}"') from None


def _numeric_recv(data: bytes) -> decimal.Decimal:
    n, weight, sign, dscale = struct.unpack_from("!hhHh", data)
    if sign == 0xC000:
        return decimal.Decimal("NaN")
    if len(data) != 8 + 2 * n:
        raise errors.InvalidBinaryRepresentation("invalid length in external \"numeric\" value")
    groups = struct.unpack_from(f"!{n}h", data, 8)
    value = 0
    for g in groups:
        value = value * 10000 + g
    exp = (weight - n + 1) * 4
    d = decimal.Decimal(value).scaleb(exp) if n else decimal.Decimal(0)
    d = d.quantize(decimal.Decimal(1).scaleb(-dscale)) if dscale or exp < 0 else d
    return -d if sign == 0x4000 else d


def decode_param(data: bytes | None, oid: int, binary: bool):
    """A Bind parameter as the Python value the engine takes (None for NULL)."""
    if data is None:
        return None
    if binary:
        p = _UNPACK.get(oid)
        if p is not None:
            if len(data) != p.size:
                raise errors.InvalidBinaryRepresentation(
                    f"incorrect binary data format in bind parameter (type {oid})")
            return p.unpack(data)[0]
        if oid == 17:
            return bytes(data)
        if oid in (1114, 1184) and len(data) == 8:
            us = struct.unpack("!q", data)[0]
            base = _EPOCH_TZ if oid == 1184 else _EPOCH
            return base + _dt.timedelta(microseconds=us)
        if oid == 1082 and len(data) == 4:
            return _EPOCH_DATE + _dt.timedelta(days=struct.unpack("!i", data)[0])
        if oid == 2950 and len(data) == 16:
            return uuid.UUID(bytes=bytes(data))
        if oid == 1083 and len(data) == 8:
            us = struct.unpack("!q", data)[0]
            h, rem = divmod(us, 3_600_000_000)
            m, rem = divmod(rem, 60_000_000)
            return _dt.time(h, m, rem // 1_000_000, rem % 1_000_000)
        if oid == 1186 and len(data) == 16:
            us, days, months = struct.unpack("!qii", data)
            if months:
                from minidb.types import Interval
                return Interval(months=months, days=days, microseconds=us)
            return _dt.timedelta(days=days, microseconds=us)
        if oid == 1700 and len(data) >= 8:
            return _numeric_recv(bytes(data))
        if oid in (25, 1042, 1043, 0, 705):
            return data.decode("utf-8")
        raise errors.NotSupportedError(
            f"binary format for parameters of type {OID_NAMES.get(oid, oid)} is not supported")
    try:
        s = data.decode("utf-8")
    except UnicodeDecodeError:
        raise errors.CharacterNotInRepertoire(
            'invalid byte sequence for encoding "UTF8"') from None
    if oid in (20, 21, 23, 26):
        return _int_in(s, OID_NAMES[oid])
    if oid in (700, 701):
        return _float_in(s)
    if oid == 16:
        return _bool_in(s)
    if oid == 1700:
        try:
            d = decimal.Decimal(s.strip())
        except decimal.InvalidOperation:
            raise errors.InvalidTextRepresentation(
                f'invalid input syntax for type numeric: "{s}"') from None
        # numeric is read by the binder from its text (the column's type decides)
        return int(d) if d == d.to_integral_value() and "." not in s else s
    if oid == 17:
        if s.startswith("\\x"):
            try:
                return bytes.fromhex(s[2:])
            except ValueError:
                raise errors.InvalidTextRepresentation(
                    "invalid hexadecimal data for type bytea") from None
        return s.encode("utf-8")
    return s


# -- the client's side: parameters out, results in ---------------------------------------------------
_Q = struct.Struct("!q")
_D = struct.Struct("!d")
# the names minidb's description uses for the types it stores (OID_NAMES for the rest)
_DESCRIPTION_NAMES = {16: "boolean", 20: "bigint", 23: "integer", 25: "text",
                      701: "double precision", 1042: "char", 1043: "varchar",
                      1114: "timestamp"}


def type_name(oid: int) -> str:
    """The type name ``description`` shows for a result column of type ``oid``."""
    return _DESCRIPTION_NAMES.get(oid) or OID_NAMES.get(oid) or "text"


def encode_param(v) -> tuple[int, int, bytes | None]:
    """(type OID, format 0 text / 1 binary, bytes or None for NULL) of one Bind parameter."""
    if v is None:
        return 0, 0, None
    if isinstance(v, bool):
        return 16, 1, b"\x01" if v else b"\x00"
    if isinstance(v, int):
        if -(1 << 63) <= v < (1 << 63):
            return 20, 1, _Q.pack(v)
        return 1700, 0, str(v).encode()
    if isinstance(v, float):
        return 701, 1, _D.pack(v)
    if isinstance(v, str):
        return 0, 0, v.encode("utf-8")
    if isinstance(v, _dt.datetime):
        return (1184 if v.tzinfo is not None else 1114), 1, encode_binary(
            v, 1184 if v.tzinfo is not None else 1114)
    if isinstance(v, _dt.date):      # the embedded engine reads a date as its midnight
        return 1114, 1, encode_binary(_dt.datetime(v.year, v.month, v.day), 1114)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return 17, 1, bytes(v)
    if isinstance(v, uuid.UUID):
        return 2950, 1, v.bytes
    if isinstance(v, decimal.Decimal):
        return 1700, 0, str(v).encode()
    return 0, 0, str(v).encode("utf-8")


def _timestamp_in(s: str, aware: bool) -> _dt.datetime:
    if s in ("infinity", "-infinity"):
        return _dt.datetime.max if s[0] == "i" else _dt.datetime.min
    if aware and len(s) > 3 and s[-3] in "+-" and s[-2:].isdigit():
        s += ":00"      # PostgreSQL writes a whole-hour offset as +00
    return _dt.datetime.fromisoformat(s)


_IV_UNITS = {"year": 12, "years": 12, "mon": 1, "mons": 1, "day": 0, "days": 0}


def _interval_in(s: str):
    """PostgreSQL's interval output ('1 year 2 mons -3 days 04:05:06.5') as the
    ``minidb.types.Interval`` the embedded engine returns."""
    from minidb.types import Interval
    months = days = us = 0
    parts = s.split()
    i = 0
    while i < len(parts):
        tok = parts[i]
        if ":" in tok:
            sign = -1 if tok.startswith("-") else 1
            h, m, sec = tok.lstrip("+-").split(":")
            whole, _, frac = sec.partition(".")
            us += sign * (((int(h) * 60 + int(m)) * 60 + int(whole)) * 1_000_000
                          + int((frac + "000000")[:6] or 0))
            i += 1
            continue
        n, unit = int(tok), parts[i + 1]
        if unit not in _IV_UNITS:
            raise ValueError(s)
        if unit.startswith("day"):
            days += n
        else:
            months += n * _IV_UNITS[unit]
        i += 2
    return Interval(months=months, days=days, microseconds=us)


def decode_text(data: bytes, oid: int):
    """A result column's non-NULL text value as the Python value of its type."""
    if oid in (25, 1042, 1043, 19, 705):
        return data.decode("utf-8")
    s = data.decode("utf-8")
    try:
        if oid in (20, 21, 23, 26):
            return int(s)
        if oid in (700, 701):
            return float(s)
        if oid == 16:
            return s == "t"
        if oid in (1114, 1184):
            return _timestamp_in(s, oid == 1184)
        if oid == 1082:
            return _dt.date.fromisoformat(s)
        if oid == 1083:
            return _dt.time.fromisoformat(s)
        if oid == 1700:
            return decimal.Decimal(s)
        if oid == 17:
            return bytes.fromhex(s[2:]) if s.startswith("\\x") else data
        if oid == 2950:
            return uuid.UUID(s)
        if oid == 1186:
            return _interval_in(s)
    except ValueError:
        raise errors.InvalidTextRepresentation(
            f'the server sent "{s}" for a value of type {type_name(oid)}') from None
    return s
