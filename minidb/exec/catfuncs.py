"""The catalog functions PostgreSQL's clients call (psql's ``\\d`` queries, DB-API users):
``pg_table_is_visible``, ``format_type``, ``pg_get_indexdef``, ``pg_get_userbyid``,
``pg_get_expr``, ``obj_description``, ``array_to_string``, ``pg_encoding_to_char``,
``pg_function_is_visible`` / ``pg_get_function_result`` / ``..._arguments`` (psql's ``\\df``),
``array_cat`` (``array || array``, psql's ``\\d+``),
``current_setting``, ``to_regtype``, the relation sizes (``pg_table_size`` ...,
``pg_size_pretty``), and the ``::regclass`` / ``::regtype`` casts; and the sequence
functions ``nextval`` / ``currval`` / ``setval`` / ``lastval`` (``minidb.catalog.sequence``:
evaluated once per row, never folded).

Each is a per-row Python function of the execution context and the argument values (None
for NULL); the rows of a catalog query are few.  Those that read the catalog see the
backend's catalog state (``minidb.catalog.pgcatalog``).  Argument and result types are the
binder's (``minidb.sql.functions``).
"""

from __future__ import annotations

import minidb.errors as errors
from minidb.catalog import pgcatalog
from minidb.exec.functions import STRICT

__all__ = ["CATALOG_FUNCS", "call"]


def _setting(ectx, name, missing_ok=False):
    if name is None:
        return None
    name = name.lower()
    fixed = {"server_encoding": "UTF8", "client_encoding": "UTF8", "datestyle": "ISO, MDY",
             "standard_conforming_strings": "on", "server_version": "15.0",
             "server_version_num": "150000", "integer_datetimes": "on",
             "search_path": '"$user", public', "timezone": "UTC",
             "lc_collate": "C", "lc_ctype": "C"}
    if name in fixed:
        return fixed[name]
    settings = ectx.session.settings
    try:
        v = settings.get(name)
    except Exception:  # noqa: BLE001 - an unknown name
        if missing_ok:
            return None
        raise errors.UndefinedObject(f'unrecognized configuration parameter "{name}"') from None
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, float) and v == int(v):
        return str(int(v))
    return str(v)


def _regclass_in(ectx, name):
    if name is None:
        return None
    if name.isdigit():
        return int(name)
    n = name[len("public."):] if name.startswith("public.") else name
    n = n[len("pg_catalog."):] if n.startswith("pg_catalog.") else n
    n = n[1:-1] if n.startswith('"') and n.endswith('"') else n.lower()
    cat = ectx.backend.catalog
    t = cat.tables.get(n) or cat.system_tables.get(n)
    if t is not None:
        return t.oid
    ix = cat.indexes.get(n) or cat.sequences.get(n) or cat.views.get(n)
    if ix is not None:
        return ix.oid
    raise errors.UndefinedTable(f'relation "{name}" does not exist')


def _array_to_string(ectx, arr, sep, null=None):
    if arr is None or sep is None:
        return None
    if isinstance(arr, str):
        return arr
    return sep.join(null if x is None else str(x) for x in arr
                    if x is not None or null is not None)


def _size(ectx, oid, with_indexes=False):
    if oid is None:
        return None
    from minidb.config import BLCKSZ
    cat = ectx.backend.catalog
    rfn = pgcatalog.relation_file(cat, oid)
    if rfn is None:
        return None
    files = [rfn] + (pgcatalog.index_files(cat, oid) if with_indexes else [])
    smgr = ectx.backend.instance.smgr
    return sum(smgr.nblocks(f) for f in files) * BLCKSZ


def _regtype_in(ectx, name):
    oid = pgcatalog.type_by_name(name)
    if oid is None and name is not None:
        raise errors.UndefinedObject(f'type "{name}" does not exist')
    return oid


def _seq_call(fn):
    """A sequence function (``minidb.catalog.sequence``) of a sequence named by text or OID;
    NULL if an argument is."""
    def call(ectx, name, *args):
        if name is None or any(a is None for a in args):
            return None
        from minidb.catalog import sequence as seq
        b = ectx.backend
        return fn(b, seq.lookup_sequence(b.catalog, name), *args)
    return call


def _sequence_funcs() -> dict:
    from minidb.catalog import sequence as seq
    return {"nextval": _seq_call(seq.nextval), "currval": _seq_call(seq.currval),
            "setval": _seq_call(lambda b, s, v, called=True: seq.setval(b, s, int(v),
                                                                        bool(called))),
            "lastval": lambda ectx: seq.lastval(ectx.backend, ectx.backend.catalog)}


CATALOG_FUNCS = {
    "pg_table_is_visible": lambda ectx, oid: None if oid is None else
        pgcatalog.table_visible(ectx.backend.catalog, oid),
    "pg_get_userbyid": lambda ectx, oid: None if oid is None else pgcatalog.OWNER,
    "format_type": lambda ectx, oid, mod=None: pgcatalog.format_type(oid, mod),
    "pg_get_indexdef": lambda ectx, oid, col=0, pretty=None:
        pgcatalog.index_column_by_oid(ectx.backend.catalog, oid, col) if col else
        pgcatalog.index_def(ectx.backend.catalog, oid),
    "pg_function_is_visible": lambda ectx, oid: None if oid is None else True,
    "pg_get_function_result": lambda ectx, oid: None,       # (pg_proc has no types)
    "pg_get_function_arguments": lambda ectx, oid: None,
    "pg_get_function_identity_arguments": lambda ectx, oid: None,
    "pg_get_expr": lambda ectx, expr, relid, pretty=None: expr,
    "pg_get_constraintdef": lambda ectx, oid, pretty=None:
        pgcatalog.constraint_def(ectx.backend.catalog, oid),
    "pg_get_viewdef": lambda ectx, oid, pretty=None: pgcatalog.view_def(ectx.backend.catalog, oid),
    # no partitioning: a relation's only "ancestor" is itself (one row, as PostgreSQL's
    # set-returning function gives for a table that is not a partition)
    "pg_partition_ancestors": lambda ectx, oid: oid,
    "obj_description": lambda ectx, oid, catalog=None: None,
    "col_description": lambda ectx, oid, num: None,
    "shobj_description": lambda ectx, oid, catalog: None,
    "pg_encoding_to_char": lambda ectx, enc: None if enc is None else
        ("UTF8" if enc == 6 else "SQL_ASCII" if enc == 0 else ""),
    "array_to_string": _array_to_string,
    "array_cat": lambda ectx, a, b: b if a is None else a if b is None else list(a) + list(b),
    "current_setting": lambda ectx, name, missing_ok=False: _setting(ectx, name, missing_ok),
    "current_database": lambda ectx: pgcatalog.DATABASE,
    "current_schema": lambda ectx: "public",
    "regclass_out": lambda ectx, oid: pgcatalog.relation_name(ectx.backend.catalog, oid),
    "regclass_in": _regclass_in,
    "regtype_out": lambda ectx, oid: pgcatalog.format_type(oid),
    "regtype_in": _regtype_in,
    "to_regtype": lambda ectx, name: pgcatalog.type_by_name(name),
    "pg_relation_size": lambda ectx, oid, fork=None: _size(ectx, oid),
    "pg_table_size": lambda ectx, oid: _size(ectx, oid),
    "pg_total_relation_size": lambda ectx, oid: _size(ectx, oid, True),
    "pg_indexes_size": lambda ectx, oid: None if oid is None else
        _size(ectx, oid, True) - _size(ectx, oid),
    "pg_size_pretty": lambda ectx, n: pgcatalog.size_pretty(n),
    "regnamespace_out": lambda ectx, oid: None if oid is None else
        {v: k for k, v in pgcatalog.SCHEMAS.items()}.get(oid, str(oid)),
    **_sequence_funcs(),
}


# pg_proc's rows: the scalar functions of the executor and these (aggregates and window
# functions are named by the binder)
pgcatalog.register_functions(sorted(STRICT) + sorted(
    n for n in CATALOG_FUNCS if not n.endswith(("_in", "_out"))) + [
    "abs", "lower", "upper", "length", "now", "version", "gen_random_uuid", "concat",
    "generate_series"])


def call(ectx, name: str, rows_of_args: list) -> list:
    """The function's value for each row of argument values."""
    fn = CATALOG_FUNCS[name]
    return [fn(ectx, *args) for args in rows_of_args]
