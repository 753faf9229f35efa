"""PostgreSQL's catalog as clients read it: virtual relations computed from the catalog cache.

Design note
-----------
psql's backslash commands, psycopg's type loading and DB-API users' introspection read
``pg_catalog`` relations (pg_class, pg_namespace, pg_attribute, pg_index, pg_type, ...) and
the ``information_schema`` / ``pg_tables`` / ``pg_indexes`` views, with PostgreSQL's column
names.  minidb stores only four catalogs (``bootstrap.CATALOGS``), with fewer columns; the
relations here are *virtual*: each is a list of columns and a function that computes its rows
from the backend's catalog state (``Catalog``: the committed state, or the backend's own
overlay) when a scan of it starts - nothing is stored, nothing can be written.

* ``pg_class``, ``pg_attribute`` and ``pg_index`` have every column of the stored catalog of
  that name (same values) plus the PostgreSQL columns clients read (relowner, relam,
  relpersistence, attisdropped, indisvalid, ...) with the values a PostgreSQL table without
  those features has.  Being computed from the catalog cache, they show what a fresh catalog
  snapshot shows (PostgreSQL reads pg_class with the statement's snapshot).
* ``pg_namespace`` has ``pg_catalog`` (11) and ``public`` (2200); every relation is visible
  (``pg_table_is_visible`` is true): there is one schema for user tables.
* ``pg_constraint`` lists the CHECK constraints and foreign keys (the stored catalog's rows); ``pg_views`` /
  ``information_schema.views`` the views, with their stored query text; views are in
  ``pg_class`` (relkind 'v'), ``pg_attribute``, ``information_schema.tables`` (VIEW) and
  ``columns``.
* ``pg_type`` lists the types minidb has, with PostgreSQL's OIDs (``TYPE_OIDS``).
* ``pg_proc`` lists the functions minidb has by name and kind (``f`` / ``a`` aggregate /
  ``w`` window), all in ``pg_catalog``, without argument and result types (``proargtypes``
  empty, ``prorettype`` 0): the upper layers name them (``register_functions``), since the
  catalog layer does not import the SQL front end.  psql's ``\\df`` lists no function, as
  PostgreSQL's does in a database without user functions.
* ``pg_database`` has one database, ``minidb``; ``pg_roles`` / ``pg_user`` one role,
  ``minidb``, which owns everything (minidb has no roles: any user name connects).
* Relations for features minidb does not have (row-level security policies, extended
  statistics, publications, inheritance, collations, ...) are ``EMPTY``: always without rows.
  The SQL front end answers a query that inner-joins one of them as an empty result
  without binding the rest of it (their column lists are not needed).

Public interface: ``VIRTUAL`` (name -> ``VirtualRel``), ``EMPTY``, ``SCHEMAS``, ``OWNER``,
and what the catalog functions need (``format_type``, ``index_def``, ``type_by_name``,
``relation_name``, ``relation_file``, ``index_files``, ``size_pretty``).
"""

from __future__ import annotations

import json

from dataclasses import dataclass

from minidb.catalog.bootstrap import (BY_NAME, PG_CATALOG_NAMESPACE, PUBLIC_NAMESPACE,
                                      TYPE_OIDS, type_oid_mod)
from minidb.types import parse_type

__all__ = ["VirtualRel", "VIRTUAL", "EMPTY", "SCHEMAS", "format_type", "index_def", "OWNER",
           "OWNER_OID", "DATABASE", "type_by_name", "relation_name", "relation_file",
           "index_files", "size_pretty", "view_def", "constraint_def", "index_column_def",
           "index_column_by_oid", "register_functions", "function_name"]

OWNER = "minidb"          # the one role: owns every relation, schema and the database
OWNER_OID = 10            # BOOTSTRAP_SUPERUSERID
DATABASE = "minidb"
DATABASE_OID = 5
BTREE_AM, HEAP_AM = 403, 2
SCHEMAS = {"pg_catalog": PG_CATALOG_NAMESPACE, "public": PUBLIC_NAMESPACE}
INFORMATION_SCHEMA = 13000

# PostgreSQL's spelling of each type (format_type), by OID
_TYPE_NAMES = {16: "boolean", 20: "bigint", 23: "integer", 25: "text",
               701: "double precision", 1042: "character", 1043: "character varying",
               1114: "timestamp without time zone",
               17: "bytea", 21: "smallint", 700: "real", 1700: "numeric", 1082: "date",
               1083: "time without time zone", 1184: "timestamp with time zone",
               1186: "interval", 2950: "uuid"}
_TYPE_SHORT = {16: "bool", 20: "int8", 23: "int4", 25: "text", 701: "float8", 1042: "bpchar",
               1043: "varchar", 1114: "timestamp",
               17: "bytea", 21: "int2", 700: "float4", 1700: "numeric", 1082: "date",
               1083: "time", 1184: "timestamptz", 1186: "interval", 2950: "uuid"}
_TYPE_LEN = {16: 1, 20: 8, 23: 4, 25: -1, 701: 8, 1042: -1, 1043: -1, 1114: 8,
             17: -1, 21: 2, 700: 4, 1700: -1, 1082: 4, 1083: 8, 1184: 8, 1186: 16, 2950: 16}
_TYPE_ARRAY = {16: 1000, 20: 1016, 23: 1007, 25: 1009, 701: 1022, 1042: 1014, 1043: 1015,
               1114: 1115,
               17: 1001, 21: 1005, 700: 1021, 1700: 1231, 1082: 1182, 1083: 1183, 1184: 1185,
               1186: 1187, 2950: 2951}
_TYPE_ALIASES = {"int": 23, "int4": 23, "integer": 23, "int8": 20, "bigint": 20, "bool": 16,
                 "boolean": 16, "text": 25, "float8": 701, "double precision": 701,
                 "bpchar": 1042, "char": 1042, "character": 1042, "varchar": 1043,
                 "character varying": 1043, "timestamp": 1114,
                 "timestamp without time zone": 1114,
                 "bytea": 17, "int2": 21, "smallint": 21, "float4": 700, "real": 700,
                 "numeric": 1700, "decimal": 1700, "date": 1082, "time": 1083,
                 "time without time zone": 1083, "timestamptz": 1184,
                 "timestamp with time zone": 1184, "interval": 1186, "uuid": 2950}
_TYPE_CATEGORY = {16: "B", 20: "N", 23: "N", 25: "S", 701: "N", 1042: "S", 1043: "S",
                  1114: "D",
                  17: "U", 21: "N", 700: "N", 1700: "N", 1082: "D", 1083: "D", 1184: "D",
                  1186: "T", 2950: "U"}


def format_type(typid, typmod=None):
    """PostgreSQL's ``format_type(oid, typmod)``: the SQL spelling of a type."""
    if typid is None:
        return None
    name = _TYPE_NAMES.get(int(typid))
    if name is None:
        return "???"
    if typmod is not None and typmod >= 4 and int(typid) in (1042, 1043):
        return f"{name}({typmod - 4})"
    if typmod is not None and typmod >= 4 and int(typid) == 1700:
        return f"numeric({(typmod - 4) >> 16},{(typmod - 4) & 0x7FF})"
    return name


def type_by_name(name):
    """PostgreSQL's ``to_regtype(name)``: the OID of a type minidb has, else None."""
    if name is None:
        return None
    n = " ".join(name.strip().lower().split())
    n = n[len("pg_catalog."):] if n.startswith("pg_catalog.") else n
    return _TYPE_ALIASES.get(n)


def relation_file(catalog, oid):
    """The relfilenode of a table or index by OID, else None."""
    for t in list(catalog.tables.values()) + list(catalog.system_tables.values()):
        if t.oid == oid:
            return t.relfilenode
    for ix in catalog.indexes.values():
        if ix.oid == oid:
            return ix.relfilenode
    return None


def index_files(catalog, oid) -> list:
    """The relfilenodes of a table's indexes."""
    for t in catalog.tables.values():
        if t.oid == oid:
            return [catalog.indexes[n].relfilenode for n in t.indexes if n in catalog.indexes]
    return []


def size_pretty(n):
    """PostgreSQL's ``pg_size_pretty(bigint)``: bytes below 10 kB, then kB, MB, GB, TB,
    each below 20 (10 x 2) thousand of its unit, rounded half away from zero."""
    if n is None:
        return None
    if abs(n) < 10 * 1024:
        return f"{n} bytes"
    sign = -1 if n < 0 else 1
    v = abs(n) >> 9                     # one extra bit for rounding
    for unit in ("kB", "MB", "GB", "TB"):
        if v < 20 * 1024 - 1 or unit == "TB":
            return f"{sign * ((v + 1) // 2)} {unit}"
        v >>= 10
    return None


def _qident(name: str) -> str:
    if name.isidentifier() and name == name.lower() and name.isascii():
        return name
    return '"' + name.replace('"', '""') + '"'


def index_def(catalog, oid) -> str | None:
    """PostgreSQL's ``pg_get_indexdef(oid)``: the CREATE INDEX statement of an index."""
    if oid is None:
        return None
    for ix in catalog.indexes.values():
        if ix.oid == oid:
            cols = ", ".join(index_column_def(ix, i) for i in range(len(ix.columns)))
            where = f" WHERE ({ix.predicate})" if ix.predicate is not None else ""
            return (f"CREATE {'UNIQUE ' if ix.unique else ''}INDEX {_qident(ix.name)} ON "
                    f"public.{_qident(ix.table)} USING btree ({cols}){where}")
    return None


def index_column_def(ix, i: int) -> str:
    """Column ``i`` of index ``ix`` as pg_get_indexdef prints it: the column's name or the
    expression (a function call as it is, anything else in parentheses), then DESC /
    NULLS FIRST / NULLS LAST where they differ from the defaults."""
    e = ix.exprs[i] if i < len(ix.exprs) else None
    if e is None:
        out = _qident(ix.columns[i])
    else:
        out = e if _is_call(e) else f"({e})"
    opt = ix.option(i)
    if opt & 1:
        out += " DESC" if opt & 2 else " DESC NULLS LAST"
    elif opt & 2:
        out += " NULLS FIRST"
    return out


def _is_call(text: str) -> bool:
    """Is ``text`` one function call, ``f(...)``, with nothing after its closing paren?"""
    head, paren, _ = text.partition("(")
    if not paren or not head.strip().isidentifier() or not text.endswith(")"):
        return False
    depth = 0
    for k, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and ch == ")":
            return k == len(text) - 1
    return False


def index_column_by_oid(catalog, oid, n):
    """``pg_get_indexdef(oid, n, pretty)`` for n > 0: the n-th column of the index."""
    for ix in catalog.indexes.values():
        if ix.oid == oid:
            return index_column_def(ix, n - 1) if 0 < n <= len(ix.columns) else ""
    return None


# pg_proc: function name -> prokind ('f', 'a' aggregate, 'w' window), named by the layers
# that have the functions (minidb.exec.catfuncs, minidb.sql.binder)
_FUNCTIONS: dict[str, str] = {}
FIRST_PROC_OID = 8000       # below FirstNormalObjectId (16384), as built-in objects are


def register_functions(names, kind: str = "f") -> None:
    """Name functions minidb has, for ``pg_proc`` (``kind``: PostgreSQL's prokind)."""
    for n in names:
        _FUNCTIONS.setdefault(n, kind)


def _proc_rows(cat):
    return [(FIRST_PROC_OID + i, name, PG_CATALOG_NAMESPACE, OWNER_OID, kind, 0, "", None,
             False)
            for i, (name, kind) in enumerate(sorted(_FUNCTIONS.items()))]


def function_name(oid):
    """A ``pg_proc`` OID's function name, else None."""
    if oid is None:
        return None
    names = sorted(_FUNCTIONS)
    i = int(oid) - FIRST_PROC_OID
    return names[i] if 0 <= i < len(names) else None


def relation_name(catalog, oid):
    """``oid::regclass`` as text: the relation's name, else the number."""
    if oid is None:
        return None
    for t in list(catalog.tables.values()) + list(catalog.system_tables.values()):
        if t.oid == oid:
            return t.name
    for ix in list(catalog.indexes.values()) + list(catalog.sequences.values()):
        if ix.oid == oid:
            return ix.name
    for v in catalog.views.values():
        if v.oid == oid:
            return v.name
    return str(oid)


def view_def(catalog, oid) -> str | None:
    """PostgreSQL's ``pg_get_viewdef(oid)``: the view's query (as stored: minidb.sql.views)."""
    for v in catalog.views.values():
        if v.oid == oid:
            return " " + v.query + ";"
    return None


@dataclass(frozen=True)
class VirtualRel:
    """A relation computed at scan time: its columns (name, minidb type spelling, or
    ``elem[]`` for an array) and ``rows(catalog)`` -> list of tuples."""
    name: str
    columns: tuple
    rows: object


def _all_tables(cat):
    return sorted(list(cat.system_tables.values()) + list(cat.tables.values()),
                  key=lambda t: t.oid)


TEMP_NAMESPACE_BASE = 14000     # pg_temp_N's namespace OID: this + N


def _temp_parts(name: str):
    """(slot, short name) of a temporary table's stored name (``minidb.sql.temp``), else
    None."""
    if name.startswith("pg_temp_") and "." in name:
        head, short = name.split(".", 1)
        if head[8:].isdigit():
            return int(head[8:]), short
    return None


def _ns(t):
    if t.system:
        return PG_CATALOG_NAMESPACE
    tp = _temp_parts(t.name)
    return TEMP_NAMESPACE_BASE + tp[0] if tp else PUBLIC_NAMESPACE


def _own_prefix(cat) -> str:
    return getattr(cat, "temp_prefix", "\x00")


def table_visible(cat, oid) -> bool:
    """``pg_table_is_visible``: false for another session's temporary table."""
    for t in cat.tables.values():
        if t.oid == oid:
            return _temp_parts(t.name) is None or t.name.startswith(_own_prefix(cat))
    return True


_CLASS_EXTRA = (("relowner", "integer"), ("relam", "integer"), ("reltablespace", "integer"),
                ("relchecks", "integer"), ("relhasrules", "boolean"),
                ("relhastriggers", "boolean"), ("relrowsecurity", "boolean"),
                ("relforcerowsecurity", "boolean"), ("relispartition", "boolean"),
                ("reloftype", "integer"), ("relpersistence", "text"),
                ("relreplident", "text"), ("reltoastrelid", "integer"),
                ("relpartbound", "text"), ("relacl", "text"), ("reloptions", "text[]"))


def _class_rows(cat):
    out = []
    for t in _all_tables(cat):
        tp = _temp_parts(t.name)
        base = (t.oid, tp[1] if tp else t.name, _ns(t), "r", t.relfilenode, t.relpages,
                float(t.reltuples), len(t.columns), bool(t.indexes))
        # relhastriggers: PostgreSQL's foreign keys are triggers (psql's \d then lists them)
        fk = bool(t.foreign_keys or t.referenced_by)
        out.append(base + (OWNER_OID, HEAP_AM, 0, len(t.checks), False, fk, False, False,
                           False, 0, "t" if tp else "p", "d", 0, None, None, None))
    for ix in sorted(cat.indexes.values(), key=lambda i: i.oid):
        base = (ix.oid, ix.name, PUBLIC_NAMESPACE, "i", ix.relfilenode, 0, -1.0,
                len(ix.columns), False)
        out.append(base + (OWNER_OID, BTREE_AM, 0, 0, False, False, False, False, False, 0,
                           "p", "n", 0, None, None, None))
    for sq in sorted(cat.sequences.values(), key=lambda s: s.oid):
        base = (sq.oid, sq.name, PUBLIC_NAMESPACE, "S", sq.relfilenode, 1, 1.0, 3, False)
        out.append(base + (OWNER_OID, 0, 0, 0, False, False, False, False, False, 0,
                           "p", "n", 0, None, None, None))
    for v in sorted(cat.views.values(), key=lambda v: v.oid):
        base = (v.oid, v.name, PUBLIC_NAMESPACE, "v", 0, 0, -1.0, len(v.columns), False)
        out.append(base + (OWNER_OID, 0, 0, 0, True, False, False, False, False, 0,
                           "p", "n", 0, None, None, None))
    return out


def _attribute_rows(cat):
    out = []
    for t in _all_tables(cat) + sorted(cat.views.values(), key=lambda v: v.oid):
        for n, c in enumerate(t.columns, 1):
            typid, typmod = type_oid_mod(c.type)
            out.append((t.oid, c.name, typid, typmod, n, bool(c.not_null),
                        c.default is not None, c.type, c.default,
                        0, c.identity, "", False, True, 0, _storage(typid), "", -1))
    for ix in cat.indexes.values():
        table = cat.tables.get(ix.table)
        for n, name in enumerate(ix.columns, 1):
            plain = table is not None and not (ix.exprs and ix.exprs[n - 1] is not None)
            c = table.columns[table.column_index(name)] if plain else None
            typid, typmod = type_oid_mod(c.type) if c is not None else (0, -1)
            out.append((ix.oid, name, typid, typmod, n, False, False,
                        c.type if c is not None else "", None, 0, "", "", False, True, 0,
                        _storage(typid), "", -1))
    return out


def _storage(typid) -> str:
    """attstorage as PostgreSQL shows it in \\d+ (its types' typstorage): plain for
    fixed-width types, main for numeric, extended for the other variable-width ones
    (minidb neither compresses values nor moves them out of line)."""
    return "p" if _TYPE_LEN.get(typid, -1) > 0 else "m" if typid == 1700 else "x"


def _index_rows(cat):
    out = []
    for ix in sorted(cat.indexes.values(), key=lambda i: i.oid):
        table = cat.tables.get(ix.table)
        if table is None:
            continue
        exprs = ix.exprs or [None] * len(ix.columns)
        key = " ".join("0" if e is not None else str(table.column_index(c) + 1)
                       for c, e in zip(ix.columns, exprs))
        option = " ".join(str(ix.option(i)) for i in range(len(ix.columns)))
        texts = [e for e in exprs if e is not None]
        out.append((ix.oid, table.oid, len(ix.columns), ix.unique, ix.primary, key,
                    option, json.dumps(texts) if texts else None, ix.predicate,
                    len(ix.columns), False, True, True, False, True, True, False, False))
    return out


def _type_rows(cat):
    return [(oid, _TYPE_SHORT[oid], PG_CATALOG_NAMESPACE, OWNER_OID, _TYPE_LEN[oid], "b",
             _TYPE_CATEGORY[oid], True, 0, 0,
             100 if oid in (25, 1042, 1043) else 0,
             _TYPE_ARRAY[oid], ",")
            for oid in sorted(_TYPE_NAMES)]


def _attrdef_rows(cat):
    return [(t.oid * 1000 + n, t.oid, n, c.default)
            for t in _all_tables(cat) for n, c in enumerate(t.columns, 1)
            if c.default is not None]


def _foreign_keys(cat):
    return [fk for t in _all_tables(cat) for fk in t.foreign_keys]


def _constraint_rows(cat):
    """CHECK constraints (contype 'c') and foreign keys ('f'; minidb.catalog.fkeys);
    primary keys and unique constraints are their indexes and not listed (pg_index has
    them)."""
    from minidb.catalog.fkeys import definition
    out = [(c.oid, c.name, PUBLIC_NAMESPACE, "c", False, False, t.oid, 0, 0, " ", " ", " ",
            True, 0, f"CHECK ({c.expr})")
           for t in sorted(cat.tables.values(), key=lambda t: t.oid) for c in t.checks]
    for fk in _foreign_keys(cat):
        ref = cat.tables.get(fk.ref_table)
        ix = None
        if ref is not None:
            for i in ref.indexes:
                idef = cat.indexes.get(i)
                if idef is not None and idef.unique and \
                        sorted(idef.columns) == sorted(fk.ref_columns):
                    ix = idef.oid
                    break
        out.append((fk.oid, fk.name, PUBLIC_NAMESPACE, "f", False, False, fk.table_oid, ix,
                    fk.ref_oid, fk.on_update, fk.on_delete, "s", True, 0, definition(fk)))
    return out


def constraint_def(catalog, oid) -> str | None:
    """PostgreSQL's ``pg_get_constraintdef(oid)``: a CHECK constraint or a foreign key."""
    from minidb.catalog.fkeys import definition
    for t in catalog.tables.values():
        for c in t.checks:
            if c.oid == oid:
                return f"CHECK ({c.expr})"
    for fk in _foreign_keys(catalog):
        if fk.oid == oid:
            return definition(fk)
    return None


def _tables_view(cat):
    out = []
    for t in sorted(cat.tables.values(), key=lambda t: t.name):
        tp = _temp_parts(t.name)
        out.append((f"pg_temp_{tp[0]}" if tp else "public", tp[1] if tp else t.name, OWNER,
                    None, bool(t.indexes), False, False, False))
    return out


def _indexes_view(cat):
    return [("public", ix.table, ix.name, None, index_def(cat, ix.oid))
            for ix in sorted(cat.indexes.values(), key=lambda i: (i.table, i.name))]


def _is_tables(cat):
    rows = []
    for t in sorted(cat.tables.values(), key=lambda t: t.name):
        tp = _temp_parts(t.name)
        if tp is None:
            rows.append((DATABASE, "public", t.name, "BASE TABLE", "YES", "NO"))
        elif t.name.startswith(_own_prefix(cat)):     # another session's: not listed
            rows.append((DATABASE, f"pg_temp_{tp[0]}", tp[1], "LOCAL TEMPORARY", "YES", "NO"))
    rows += [(DATABASE, "public", v.name, "VIEW", "NO", "NO")
             for v in sorted(cat.views.values(), key=lambda v: v.name)]
    rows += [(DATABASE, "pg_catalog", t.name, "BASE TABLE", "NO", "NO")
             for t in sorted(cat.system_tables.values(), key=lambda t: t.name)]
    return rows


def _views_view(cat):
    return [("public", v.name, OWNER, " " + v.query + ";")
            for v in sorted(cat.views.values(), key=lambda v: v.name)]


def _is_views(cat):
    return [(DATABASE, "public", v.name, " " + v.query + ";", "NONE", "NO", "NO")
            for v in sorted(cat.views.values(), key=lambda v: v.name)]


def _is_columns(cat):
    out = []
    for t in _all_tables(cat) + sorted(cat.views.values(), key=lambda v: v.oid):
        for n, c in enumerate(t.columns, 1):
            st = parse_type(c.type)
            typid, _ = type_oid_mod(c.type)
            out.append((DATABASE, "pg_catalog" if getattr(t, "system", False) else "public",
                        t.name, c.name, n,
                        c.default, "NO" if c.not_null else "YES",
                        _TYPE_NAMES.get(typid, c.type), st.length,
                        _TYPE_SHORT.get(typid, c.type)))
    return out


def _rel(name, cols, rows):
    return VirtualRel(name, tuple(cols), rows)


def _stored(name):
    return tuple((n, t) for n, t, _ in BY_NAME[name].columns)


VIRTUAL: dict[str, VirtualRel] = {r.name: r for r in (
    _rel("pg_class", _stored("pg_class") + _CLASS_EXTRA, _class_rows),
    _rel("pg_attribute", _stored("pg_attribute") + (
        ("attcollation", "integer"), ("attidentity", "text"), ("attgenerated", "text"),
        ("attisdropped", "boolean"), ("attislocal", "boolean"), ("attndims", "integer"),
        ("attstorage", "text"), ("attcompression", "text"), ("attstattarget", "integer")),
        _attribute_rows),
    _rel("pg_index", _stored("pg_index") + (
        ("indnkeyatts", "integer"), ("indisclustered", "boolean"), ("indisvalid", "boolean"),
        ("indisready", "boolean"), ("indisreplident", "boolean"), ("indislive", "boolean"),
        ("indimmediate", "boolean"), ("indisexclusion", "boolean"),
        ("indnullsnotdistinct", "boolean")), _index_rows),
    _rel("pg_namespace", (("oid", "integer"), ("nspname", "text"), ("nspowner", "integer"),
                          ("nspacl", "text")),
         lambda cat: [(PG_CATALOG_NAMESPACE, "pg_catalog", OWNER_OID, None),
                      (PUBLIC_NAMESPACE, "public", OWNER_OID, None),
                      (INFORMATION_SCHEMA, "information_schema", OWNER_OID, None)]
         + [(TEMP_NAMESPACE_BASE + s, f"pg_temp_{s}", OWNER_OID, None) for s in sorted(
             {tp[0] for tp in map(_temp_parts, cat.tables) if tp is not None})]),
    _rel("pg_type", (("oid", "integer"), ("typname", "text"), ("typnamespace", "integer"),
                     ("typowner", "integer"), ("typlen", "integer"), ("typtype", "text"),
                     ("typcategory", "text"), ("typisdefined", "boolean"),
                     ("typrelid", "integer"), ("typelem", "integer"),
                     ("typcollation", "integer"), ("typarray", "integer"),
                     ("typdelim", "text")), _type_rows),
    _rel("pg_am", (("oid", "integer"), ("amname", "text"), ("amtype", "text")),
         lambda cat: [(HEAP_AM, "heap", "t"), (BTREE_AM, "btree", "i")]),
    _rel("pg_database", (("oid", "integer"), ("datname", "text"), ("datdba", "integer"),
                         ("encoding", "integer"), ("datlocprovider", "text"),
                         ("datistemplate", "boolean"), ("datallowconn", "boolean"),
                         ("datconnlimit", "integer"), ("datcollate", "text"),
                         ("datctype", "text"), ("daticulocale", "text"), ("datacl", "text")),
         lambda cat: [(DATABASE_OID, DATABASE, OWNER_OID, 6, "c", False, True, -1, "C", "C",
                       None, None)]),
    _rel("pg_roles", (("oid", "integer"), ("rolname", "text"), ("rolsuper", "boolean"),
                      ("rolinherit", "boolean"), ("rolcreaterole", "boolean"),
                      ("rolcreatedb", "boolean"), ("rolcanlogin", "boolean"),
                      ("rolconnlimit", "integer"), ("rolvaliduntil", "timestamptz"),
                      ("rolreplication", "boolean"), ("rolbypassrls", "boolean")),
         lambda cat: [(OWNER_OID, OWNER, True, True, True, True, True, -1, None, True,
                       True)]),
    _rel("pg_proc", (("oid", "integer"), ("proname", "text"), ("pronamespace", "integer"),
                     ("proowner", "integer"), ("prokind", "text"), ("prorettype", "integer"),
                     ("proargtypes", "text"), ("prosrc", "text"), ("proretset", "boolean")),
         _proc_rows),
    _rel("pg_user", (("usename", "text"), ("usesysid", "integer"), ("usecreatedb", "boolean"),
                     ("usesuper", "boolean")),
         lambda cat: [(OWNER, OWNER_OID, True, True)]),
    _rel("pg_attrdef", (("oid", "integer"), ("adrelid", "integer"), ("adnum", "integer"),
                        ("adbin", "text")), _attrdef_rows),
    _rel("pg_constraint", (("oid", "integer"), ("conname", "text"),
                           ("connamespace", "integer"), ("contype", "text"),
                           ("condeferrable", "boolean"), ("condeferred", "boolean"),
                           ("conrelid", "integer"), ("conindid", "integer"),
                           ("confrelid", "integer"), ("confupdtype", "text"),
                           ("confdeltype", "text"), ("confmatchtype", "text"),
                           ("convalidated", "boolean"), ("conparentid", "integer"),
                           ("consrc", "text")),
         _constraint_rows),
    _rel("pg_tables", (("schemaname", "text"), ("tablename", "text"), ("tableowner", "text"),
                       ("tablespace", "text"), ("hasindexes", "boolean"),
                       ("hasrules", "boolean"), ("hastriggers", "boolean"),
                       ("rowsecurity", "boolean")), _tables_view),
    _rel("pg_views", (("schemaname", "text"), ("viewname", "text"), ("viewowner", "text"),
                      ("definition", "text")), _views_view),
    _rel("information_schema.views", (
        ("table_catalog", "text"), ("table_schema", "text"), ("table_name", "text"),
        ("view_definition", "text"), ("check_option", "text"), ("is_updatable", "text"),
        ("is_insertable_into", "text")), _is_views),
    _rel("pg_indexes", (("schemaname", "text"), ("tablename", "text"), ("indexname", "text"),
                        ("tablespace", "text"), ("indexdef", "text")), _indexes_view),
    _rel("information_schema.tables", (
        ("table_catalog", "text"), ("table_schema", "text"), ("table_name", "text"),
        ("table_type", "text"), ("is_insertable_into", "text"), ("is_typed", "text")),
        _is_tables),
    _rel("information_schema.columns", (
        ("table_catalog", "text"), ("table_schema", "text"), ("table_name", "text"),
        ("column_name", "text"), ("ordinal_position", "integer"), ("column_default", "text"),
        ("is_nullable", "text"), ("data_type", "text"),
        ("character_maximum_length", "integer"), ("udt_name", "text")), _is_columns),
)}

# catalogs of features minidb does not have: always empty
EMPTY = frozenset({"pg_policy", "pg_statistic_ext", "pg_publication", "pg_publication_rel",
                   "pg_publication_namespace", "pg_inherits", "pg_collation", "pg_trigger",
                   "pg_rewrite", "pg_partitioned_table", "pg_foreign_table", "pg_sequence",
                   "pg_description", "pg_event_trigger", "pg_extension",
                   "pg_auth_members"})

_ = TYPE_OIDS
