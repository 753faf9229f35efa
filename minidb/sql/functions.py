"""Scalar functions: argument types and result types (the binder's part of PostgreSQL's
function lookup, for the functions minidb has; ``minidb.exec.functions`` computes them).

``bind_function(binder, name, args)`` returns the bound ``Func`` for ``name`` applied to
the bound ``args``, None for the few functions the binder itself handles (abs, lower,
upper, length, coalesce, nullif, btrim with one argument, now), or raises
UndefinedFunction (42883) worded as PostgreSQL's: ``function foo(integer) does not
exist``.  Untyped literals (``'abc'``, NULL) take the type the function wants.

Numeric arguments keep numeric's exactness where PostgreSQL's results are numeric: round,
trunc, floor, ceil, sign, mod, div and abs of numeric return numeric (rounding half away from
zero).  Departures: sqrt / ln / exp / log / power return double precision for numeric input
(PostgreSQL: numeric), round / trunc of a double with a precision return double precision
(PostgreSQL casts to numeric); date_part and EXTRACT return double precision (PostgreSQL
14+: EXTRACT returns numeric); to_char formats dates, timestamps, intervals and numbers
(``minidb.exec.numfmt``).
"""

from __future__ import annotations

import minidb.errors as errors
from minidb.exec import datatypes as dtm
from minidb.exec.datatypes import (BIGINT, DATE, DOUBLE, INTEGER, INTERVAL, NUMERIC, TEXT, TIME,
                                   TIMESTAMP, TIMESTAMPTZ, UNKNOWN, UUID, family)
from minidb.exec.expr import Cast, Const, Func

__all__ = ["bind_function", "DATE_FIELDS", "TRUNC_FIELDS", "VERSION"]

VERSION = "PostgreSQL 15 (minidb, a storage engine in Python with PostgreSQL's SQL dialect)"

DATE_FIELDS = {"year", "month", "day", "hour", "minute", "second", "milliseconds",
               "microseconds", "millisecond", "microsecond", "dow", "isodow", "doy", "week",
               "quarter", "epoch", "decade", "century", "millennium", "isoyear", "years",
               "months", "days", "hours", "minutes", "seconds"}
TRUNC_FIELDS = {"microseconds", "milliseconds", "second", "minute", "hour", "day", "week",
                "month", "quarter", "year", "decade", "century", "millennium"}


_NUMS = ("int", "float", "num")


def _plain_numeric(a):
    """A numeric argument as plain numeric (the result of round(numeric(10,2)) is numeric)."""
    return a if a.type == NUMERIC else Cast(a, NUMERIC)


def _sig(name, args):
    s = ", ".join(str(a.type) for a in args)
    return errors.UndefinedFunction(f"function {name}({s}) does not exist")


def _num(b, a, want=DOUBLE):
    if a.type is UNKNOWN:
        a = b._coerce_unknown(a, want)
    return a


def _text(b, a):
    if a.type is UNKNOWN:
        a = b._coerce_unknown(a, TEXT)
    return a


def _strip(a):
    """char(n) compares and computes without its trailing blanks (bpchar)."""
    if a.type.name == "char":
        return Func("rtrim_char", (a,), TEXT)
    return a


def bind_function(b, name: str, args: list):
    """The bound call, None for the binder's own functions, or UndefinedFunction."""
    n = len(args)
    if name in _CATALOG:
        return _catalog_function(b, name, args)
    fams = lambda xs: [family(x.type) for x in xs]  # noqa: E731
    if name in ("abs", "lower", "upper", "coalesce", "nullif", "now") or \
            (name == "btrim" and n == 1) or (name == "length" and n == 1):
        return None
    if name in ("char_length", "character_length") and n == 1:
        return b._func_length(args) if hasattr(b, "_func_length") else \
            bind_function(b, "_length", args)
    if name == "_length":
        a = _text(b, args[0])
        if family(a.type) != "text":
            raise _sig("length", args)
        return Func("length", (_strip(a) if a.type.name == "char" else a,), INTEGER)
    if name in ("round", "trunc") and n in (1, 2):
        a = _num(b, args[0])
        if family(a.type) not in _NUMS:
            raise _sig(name, args)
        if family(a.type) == "num":
            a = _plain_numeric(a)
        if n == 1:
            return Func(name, (a,), a.type if family(a.type) in ("int", "num") else DOUBLE)
        d = _num(b, args[1], INTEGER)
        if family(d.type) != "int":
            raise _sig(name, args)
        return Func(name, (a, d), NUMERIC if family(a.type) == "num" else DOUBLE)
    if name in ("floor", "ceil", "ceiling", "sqrt", "cbrt", "ln", "exp", "sign", "degrees",
                "radians", "sin", "cos", "tan", "asin", "acos", "atan") and n == 1:
        a = _num(b, args[0])
        if family(a.type) not in _NUMS:
            raise _sig(name, args)
        name = "ceil" if name == "ceiling" else name
        if family(a.type) == "num" and name in ("floor", "ceil", "sign"):
            return Func(name, (_plain_numeric(a),), NUMERIC)
        return Func(name, (a,), DOUBLE)
    if name == "log" and n in (1, 2):
        xs = [_num(b, a) for a in args]
        if any(f not in _NUMS for f in fams(xs)):
            raise _sig(name, args)
        return Func("log", tuple(xs), DOUBLE)
    if name in ("power", "pow", "atan2") and n == 2:
        xs = [_num(b, a) for a in args]
        if any(f not in _NUMS for f in fams(xs)):
            raise _sig(name, args)
        return Func("atan2" if name == "atan2" else "power", tuple(xs), DOUBLE)
    if name in ("mod", "div") and n == 2:
        xs = [_num(b, a, INTEGER) for a in args]
        if any(f not in _NUMS for f in fams(xs)):
            raise _sig(name, args)
        t = dtm.common_numeric(xs[0].type, xs[1].type)
        if family(t) == "num":
            return Func(name, tuple(b.to_common(x, NUMERIC) for x in xs), NUMERIC)
        return Func(name, tuple(xs), t)
    if name == "pi" and n == 0:
        return Const(3.141592653589793, DOUBLE)
    if name == "random" and n == 0:
        return Func("random", (), DOUBLE)
    if name == "setseed" and n == 1:
        a = _num(b, args[0])
        if family(a.type) not in _NUMS:
            raise _sig(name, args)
        if family(a.type) == "num":
            a = b.to_common(a, DOUBLE)
        return Func("setseed", (a,), TEXT)
    if name in ("greatest", "least") and n >= 1:
        t = b._common([a.type for a in args], name.upper())
        xs = [b.to_common(a, t) for a in args]
        if family(t) == "text":
            xs = [_strip(x) for x in xs]
            t = TEXT
        return Func(name, tuple(xs), t)
    if name in ("octet_length", "ascii", "md5", "initcap", "reverse") and n == 1:
        a = _text(b, args[0])
        if family(a.type) != "text":
            raise _sig(name, args)
        rt = INTEGER if name in ("octet_length", "ascii") else TEXT
        return Func(name, (_strip(a) if name != "octet_length" else a,), rt)
    if name == "chr" and n == 1:
        a = _num(b, args[0], INTEGER)
        if family(a.type) != "int":
            raise _sig(name, args)
        return Func("chr", (a,), TEXT)
    if name in ("substr", "substring") and n in (2, 3):
        s = _text(b, args[0])
        rest = [_num(b, a, INTEGER) for a in args[1:]]
        if family(s.type) != "text" or any(f != "int" for f in fams(rest)):
            raise _sig(name, args)
        return Func("substr", (_strip(s),) + tuple(rest), TEXT)
    if name in ("strpos", "position") and n == 2:
        xs = [_text(b, a) for a in args]
        if any(f != "text" for f in fams(xs)):
            raise _sig(name, args)
        return Func("strpos", tuple(_strip(x) for x in xs), INTEGER)
    if name == "replace" and n == 3:
        xs = [_text(b, a) for a in args]
        if any(f != "text" for f in fams(xs)):
            raise _sig(name, args)
        return Func("replace", tuple(_strip(x) for x in xs), TEXT)
    if name in ("btrim", "ltrim", "rtrim") and n in (1, 2):
        xs = [_text(b, a) for a in args]
        if any(f != "text" for f in fams(xs)):
            raise _sig(name, args)
        return Func(name, tuple(_strip(x) for x in xs), TEXT)
    if name == "split_part" and n == 3:
        xs = [_text(b, a) for a in args[:2]] + [_num(b, args[2], INTEGER)]
        if fams(xs) != ["text", "text", "int"]:
            raise _sig(name, args)
        return Func("split_part", (_strip(xs[0]), _strip(xs[1]), xs[2]), TEXT)
    if name in ("left", "right", "repeat") and n == 2:
        xs = [_text(b, args[0]), _num(b, args[1], INTEGER)]
        if fams(xs) != ["text", "int"]:
            raise _sig(name, args)
        return Func(name, (_strip(xs[0]), xs[1]), TEXT)
    if name in ("lpad", "rpad") and n in (2, 3):
        xs = [_text(b, args[0]), _num(b, args[1], INTEGER)] + [_text(b, a) for a in args[2:]]
        if fams(xs)[:2] != ["text", "int"] or (n == 3 and family(xs[2].type) != "text"):
            raise _sig(name, args)
        return Func(name, tuple(_strip(x) if family(x.type) == "text" else x for x in xs), TEXT)
    if name == "concat":
        xs = []
        for a in args:
            a = _text(b, a)
            if family(a.type) == "array":
                raise _sig(name, args)
            xs.append(_strip(a) if family(a.type) == "text" else a)
        return Func("concat", tuple(xs), TEXT)
    if name in ("concat_ws",) and n >= 1:
        xs = [_text(b, a) for a in args]
        return Func("concat_ws", tuple(_strip(x) if family(x.type) == "text" else x
                                       for x in xs), TEXT)
    if name in ("date_part", "date_trunc") and n in (2, 3):
        f = _text(b, args[0])
        ts = args[1]
        if ts.type is UNKNOWN:
            ts = b._coerce_unknown(ts, TIMESTAMP)
        tf = family(ts.type)
        if name == "date_trunc" and tf == "date":
            ts = b.to_common(ts, TIMESTAMPTZ)        # PostgreSQL: date_trunc(text, timestamptz)
            tf = "tstz"
        ok_types = ("ts", "tstz", "interval") + (("date", "time") if name == "date_part" else ())
        if family(f.type) != "text" or tf not in ok_types or \
                (n == 3 and (name != "date_trunc" or tf != "tstz")):
            raise _sig(name, args)
        tn = "timestamp without time zone" if tf == "ts" else str(ts.type)
        if isinstance(f, Const) and f.value is not None:
            field = str(f.value).lower()
            ok = DATE_FIELDS if name == "date_part" else TRUNC_FIELDS
            if tf == "tstz" and name == "date_part":
                ok = ok | {"timezone", "timezone_hour", "timezone_minute"}
            if field not in ok:
                raise errors.InvalidParameterValue(f'unit "{field}" not recognized for type {tn}')
            f = Const(field, TEXT)
        extra = ()
        if n == 3:
            z = _text(b, args[2])
            if family(z.type) != "text":
                raise _sig(name, args)
            extra = (z,)
        rt = DOUBLE if name == "date_part" else ts.type
        return Func(name, (f, ts) + extra, rt)
    if name in ("localtimestamp",) and n == 0:
        return Func("now", (), TIMESTAMP)
    if name in ("transaction_timestamp", "statement_timestamp") and n == 0:
        return Func("now", (), TIMESTAMPTZ)
    if name == "clock_timestamp" and n == 0:
        return Func("clock_timestamp", (), TIMESTAMPTZ)
    if name == "current_date" and n == 0:
        return Func("current_date", (), DATE)
    if name in ("current_time", "localtime") and n == 0:
        # PostgreSQL's CURRENT_TIME is time with time zone, which minidb lacks
        return Func("current_time", (), TIME)
    if name == "gen_random_uuid" and n == 0:
        return Func("gen_random_uuid", (), UUID)
    if name == "timezone" and n == 2:        # also what AT TIME ZONE is
        z, ts = _text(b, args[0]), args[1]
        if ts.type is UNKNOWN:
            ts = b._coerce_unknown(ts, TIMESTAMPTZ)
        if family(ts.type) == "date":
            ts = b.to_common(ts, TIMESTAMPTZ)
        tf = family(ts.type)
        if tf == "time":
            raise errors.NotSupportedError(
                "AT TIME ZONE of a time (time with time zone is not supported)")
        if family(z.type) not in ("text", "interval") or tf not in ("ts", "tstz"):
            raise _sig(name, args)
        return Func("timezone", (_strip(z), ts), TIMESTAMPTZ if tf == "ts" else TIMESTAMP)
    if name == "to_char" and n == 2:
        x = args[0]
        if x.type is UNKNOWN:
            x = b._coerce_unknown(x, TIMESTAMPTZ)
        fmt = _text(b, args[1])
        if family(x.type) in ("int", "float", "num") and family(fmt.type) == "text":
            return Func("to_char", (x, _strip(fmt)), TEXT)   # minidb.exec.numfmt
        if family(x.type) not in ("ts", "tstz", "date", "interval") or \
                family(fmt.type) != "text":
            raise _sig(name, args)
        return Func("to_char", (x, _strip(fmt)), TEXT)
    if name == "age" and n in (1, 2):
        xs = [b._coerce_unknown(a, TIMESTAMP) if a.type is UNKNOWN else a for a in args]
        fs = [family(a.type) for a in xs]
        if any(f not in ("ts", "tstz", "date") for f in fs):
            raise _sig(name, args)
        if n == 2 and fs[0] != fs[1]:
            t = dtm.common_type(xs[0].type, xs[1].type)
            xs = [b.to_common(a, t) for a in xs]
        return Func("age", tuple(xs), INTERVAL)
    if name in ("make_date", "make_time", "make_timestamp") and n == {"make_date": 3,
                                                                       "make_time": 3,
                                                                       "make_timestamp": 6}[name]:
        k = 3 if name == "make_date" else (2 if name == "make_time" else 5)
        xs = [_num(b, a, INTEGER) for a in args[:k]] + [_num(b, a) for a in args[k:]]
        if any(family(a.type) != "int" for a in xs[:k]) or \
                any(family(a.type) not in _NUMS for a in xs[k:]):
            raise _sig(name, args)
        xs = xs[:k] + [b.to_common(a, DOUBLE) for a in xs[k:]]
        rt = {"make_date": DATE, "make_time": TIME, "make_timestamp": TIMESTAMP}[name]
        return Func(name, tuple(xs), rt)
    if name == "version" and n == 0:
        return Const(VERSION, TEXT)
    if name in ("to_date", "to_timestamp", "to_number"):
        raise errors.NotSupportedError(f"function {name}() is not supported")
    raise _sig(name, args)


_ = (BIGINT, Cast)


# the catalog functions clients call (minidb.exec.catfuncs): name -> (argument types by
# position, the fewest arguments, result type); "oid" arguments are integers
_OID, _INT, _TXT, _BOOL, _ANY = "oid", "int", "text", "bool", "any"
_CATALOG = {
    "pg_table_is_visible": ((_OID,), 1, "boolean"),
    "pg_get_userbyid": ((_OID,), 1, "text"),
    "format_type": ((_OID, _INT), 2, "text"),
    "pg_get_indexdef": ((_OID, _INT, _BOOL), 1, "text"),
    "pg_get_expr": ((_TXT, _OID, _BOOL), 2, "text"),
    "pg_get_constraintdef": ((_OID, _BOOL), 1, "text"),
    "pg_get_viewdef": ((_OID, _BOOL), 1, "text"),
    "pg_partition_ancestors": ((_OID,), 1, "oid"),
    "obj_description": ((_OID, _TXT), 1, "text"),
    "col_description": ((_OID, _INT), 2, "text"),
    "shobj_description": ((_OID, _TXT), 2, "text"),
    "pg_encoding_to_char": ((_INT,), 1, "text"),
    "array_to_string": ((_ANY, _TXT, _TXT), 2, "text"),
    "current_setting": ((_TXT, _BOOL), 1, "text"),
    "current_database": ((), 0, "text"),
    "to_regtype": ((_TXT,), 1, "oid"),
    "pg_relation_size": ((_OID, _TXT), 1, "bigint"),
    "pg_table_size": ((_OID,), 1, "bigint"),
    "pg_total_relation_size": ((_OID,), 1, "bigint"),
    "pg_indexes_size": ((_OID,), 1, "bigint"),
    "pg_size_pretty": ((_INT,), 1, "text"),
    "current_schema": ((), 0, "text"),
    # sequences (minidb.catalog.sequence): the sequence by name (text) or OID (::regclass)
    "nextval": ((_ANY,), 1, "bigint"),
    "currval": ((_ANY,), 1, "bigint"),
    "setval": ((_ANY, _INT, _BOOL), 2, "bigint"),
    "lastval": ((), 0, "bigint"),
    "pg_function_is_visible": ((_OID,), 1, "boolean"),
    "pg_get_function_result": ((_OID,), 1, "text"),
    "pg_get_function_arguments": ((_OID,), 1, "text"),
    "pg_get_function_identity_arguments": ((_OID,), 1, "text"),
}


def _catalog_function(b, name: str, args: list):
    from minidb.exec.datatypes import BOOLEAN
    kinds, least, result = _CATALOG[name]
    if not least <= len(args) <= len(kinds):
        raise _sig(name, args)
    want = {_OID: INTEGER, _INT: INTEGER, _TXT: TEXT, _BOOL: BOOLEAN}
    out = []
    for a, k in zip(args, kinds):
        if k == _ANY:
            out.append(_text(b, a))
            continue
        t = want[k]
        if a.type is UNKNOWN:
            a = b._coerce_unknown(a, t)
        fa, ft = family(a.type), family(t)
        if fa != ft and not (ft == "int" and fa == "int"):
            raise _sig(name, args)
        out.append(a)
    rt = {"boolean": BOOLEAN, "oid": INTEGER, "bigint": BIGINT}.get(result, TEXT)
    return Func(name, tuple(out), rt)
