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
* ``pg_type`` lists the types minidb has, with PostgreSQL's OIDs (``TYPE_OIDS``).
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

from dataclasses import dataclass

from minidb.catalog.bootstrap import (BY_NAME, PG_CATALOG_NAMESPACE, PUBLIC_NAMESPACE,
                                      TYPE_OIDS, type_oid_mod)
from minidb.types import parse_type

__all__ = ["VirtualRel", "VIRTUAL", "EMPTY", "SCHEMAS", "format_type", "index_def", "OWNER",
           "OWNER_OID", "DATABASE", "type_by_name", "relation_name", "relation_file",
           "index_files", "size_pretty"]

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
               1114: "timestamp without time zone"}
_TYPE_SHORT = {16: "bool", 20: "int8", 23: "int4", 25: "text", 701: "float8", 1042: "bpchar",
               1043: "varchar", 1114: "timestamp"}
_TYPE_LEN = {16: 1, 20: 8, 23: 4, 25: -1, 701: 8, 1042: -1, 1043: -1, 1114: 8}
_TYPE_ARRAY = {16: 1000, 20: 1016, 23: 1007, 25: 1009, 701: 1022, 1042: 1014, 1043: 1015,
               1114: 1115}
_TYPE_ALIASES = {"int": 23, "int4": 23, "integer": 23, "int8": 20, "bigint": 20, "bool": 16,
                 "boolean": 16, "text": 25, "float8": 701, "double precision": 701,
                 "bpchar": 1042, "char": 1042, "character": 1042, "varchar": 1043,
                 "character varying": 1043, "timestamp": 1114,
                 "timestamp without time zone": 1114}
_TYPE_CATEGORY = {16: "B", 20: "N", 23: "N", 25: "S", 701: "N", 1042: "S", 1043: "S",
                  1114: "D"}


def format_type(typid, typmod=None):
    """PostgreSQL's ``format_type(oid, typmod)``: the SQL spelling of a type."""
    if typid is None:
        return None
    name = _TYPE_NAMES.get(int(typid))
    if name is None:
        return "???"
    if typmod is not None and typmod >= 4 and int(typid) in (1042, 1043):
        return f"{name}({typmod - 4})"
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
            cols = ", ".join(_qident(c) for c in ix.columns)
            return (f"CREATE {'UNIQUE ' if ix.unique else ''}INDEX {_qident(ix.name)} ON "
                    f"public.{_qident(ix.table)} USING btree ({cols})")
    return None


def relation_name(catalog, oid):
    """``oid::regclass`` as text: the relation's name, else the number."""
    if oid is None:
        return None
    for t in list(catalog.tables.values()) + list(catalog.system_tables.values()):
        if t.oid == oid:
            return t.name
    for ix in catalog.indexes.values():
        if ix.oid == oid:
            return ix.name
    return str(oid)


@dataclass(frozen=True)
class VirtualRel:
    """A relation computed at scan time: its columns (name, minidb type spelling) and
    ``rows(catalog)`` -> list of tuples."""
    name: str
    columns: tuple
    rows: object


def _all_tables(cat):
    return sorted(list(cat.system_tables.values()) + list(cat.tables.values()),
                  key=lambda t: t.oid)


def _ns(t):
    return PG_CATALOG_NAMESPACE if t.system else PUBLIC_NAMESPACE


_CLASS_EXTRA = (("relowner", "integer"), ("relam", "integer"), ("reltablespace", "integer"),
                ("relchecks", "integer"), ("relhasrules", "boolean"),
                ("relhastriggers", "boolean"), ("relrowsecurity", "boolean"),
                ("relforcerowsecurity", "boolean"), ("relispartition", "boolean"),
                ("reloftype", "integer"), ("relpersistence", "text"),
                ("relreplident", "text"), ("reltoastrelid", "integer"),
                ("relpartbound", "text"), ("relacl", "text"), ("reloptions", "text"))


def _class_rows(cat):
    out = []
    for t in _all_tables(cat):
        base = (t.oid, t.name, _ns(t), "r", t.relfilenode, t.relpages, float(t.reltuples),
                len(t.columns), bool(t.indexes))
        # relhastriggers: PostgreSQL's foreign keys are triggers (psql's \d then lists them)
        fk = bool(t.foreign_keys or t.referenced_by)
        out.append(base + (OWNER_OID, HEAP_AM, 0, 0, False, fk, False, False, False, 0,
                           "p", "d", 0, None, None, None))
    for ix in sorted(cat.indexes.values(), key=lambda i: i.oid):
        base = (ix.oid, ix.name, PUBLIC_NAMESPACE, "i", ix.relfilenode, 0, -1.0,
                len(ix.columns), False)
        out.append(base + (OWNER_OID, BTREE_AM, 0, 0, False, False, False, False, False, 0,
                           "p", "n", 0, None, None, None))
    return out


def _attribute_rows(cat):
    out = []
    for t in _all_tables(cat):
        for n, c in enumerate(t.columns, 1):
            typid, typmod = type_oid_mod(c.type)
            out.append((t.oid, c.name, typid, typmod, n, bool(c.not_null),
                        c.default is not None, c.type, c.default,
                        0, "", "", False, True, 0))
    for ix in cat.indexes.values():
        table = cat.tables.get(ix.table)
        for n, name in enumerate(ix.columns, 1):
            c = table.columns[table.column_index(name)] if table is not None else None
            typid, typmod = type_oid_mod(c.type) if c is not None else (0, -1)
            out.append((ix.oid, name, typid, typmod, n, False, False,
                        c.type if c is not None else "", None, 0, "", "", False, True, 0))
    return out


def _index_rows(cat):
    out = []
    for ix in sorted(cat.indexes.values(), key=lambda i: i.oid):
        table = cat.tables.get(ix.table)
        if table is None:
            continue
        key = " ".join(str(table.column_index(c) + 1) for c in ix.columns)
        out.append((ix.oid, table.oid, len(ix.columns), ix.unique, ix.primary, key,
                    len(ix.columns), False, True, True, False, True, True, False))
    return out


def _type_rows(cat):
    return [(oid, _TYPE_SHORT[oid], PG_CATALOG_NAMESPACE, OWNER_OID, _TYPE_LEN[oid], "b",
             _TYPE_CATEGORY[oid], True, 0, 0, 0 if oid in (16, 20, 23, 701, 1114) else 100,
             _TYPE_ARRAY[oid], ",")
            for oid in sorted(_TYPE_NAMES)]


def _attrdef_rows(cat):
    return [(t.oid * 1000 + n, t.oid, n, c.default)
            for t in _all_tables(cat) for n, c in enumerate(t.columns, 1)
            if c.default is not None]


def _foreign_keys(cat):
    return [fk for t in _all_tables(cat) for fk in t.foreign_keys]


def _constraint_rows(cat):
    """Foreign keys (contype 'f'; minidb.catalog.fkeys)."""
    out = []
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
                    fk.ref_oid, fk.on_update, fk.on_delete, "s", True, 0))
    return out


def constraint_def(catalog, oid) -> str | None:
    """PostgreSQL's ``pg_get_constraintdef(oid)`` (foreign keys)."""
    from minidb.catalog.fkeys import definition
    for fk in _foreign_keys(catalog):
        if fk.oid == oid:
            return definition(fk)
    return None


def _tables_view(cat):
    return [("public", t.name, OWNER, None, bool(t.indexes), False, False, False)
            for t in sorted(cat.tables.values(), key=lambda t: t.name)]


def _indexes_view(cat):
    return [("public", ix.table, ix.name, None, index_def(cat, ix.oid))
            for ix in sorted(cat.indexes.values(), key=lambda i: (i.table, i.name))]


def _is_tables(cat):
    rows = [(DATABASE, "public", t.name, "BASE TABLE", "YES", "NO")
            for t in sorted(cat.tables.values(), key=lambda t: t.name)]
    rows += [(DATABASE, "pg_catalog", t.name, "BASE TABLE", "NO", "NO")
             for t in sorted(cat.system_tables.values(), key=lambda t: t.name)]
    return rows


def _is_columns(cat):
    out = []
    for t in _all_tables(cat):
        for n, c in enumerate(t.columns, 1):
            st = parse_type(c.type)
            typid, _ = type_oid_mod(c.type)
            out.append((DATABASE, "pg_catalog" if t.system else "public", t.name, c.name, n,
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
        ("attisdropped", "boolean"), ("attislocal", "boolean"), ("attndims", "integer")),
        _attribute_rows),
    _rel("pg_index", _stored("pg_index") + (
        ("indnkeyatts", "integer"), ("indisclustered", "boolean"), ("indisvalid", "boolean"),
        ("indisready", "boolean"), ("indisreplident", "boolean"), ("indislive", "boolean"),
        ("indimmediate", "boolean"), ("indisexclusion", "boolean")), _index_rows),
    _rel("pg_namespace", (("oid", "integer"), ("nspname", "text"), ("nspowner", "integer"),
                          ("nspacl", "text")),
         lambda cat: [(PG_CATALOG_NAMESPACE, "pg_catalog", OWNER_OID, None),
                      (PUBLIC_NAMESPACE, "public", OWNER_OID, None),
                      (INFORMATION_SCHEMA, "information_schema", OWNER_OID, None)]),
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
                      ("rolconnlimit", "integer")),
         lambda cat: [(OWNER_OID, OWNER, True, True, True, True, True, -1)]),
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
                           ("convalidated", "boolean"), ("conparentid", "integer")),
         _constraint_rows),
    _rel("pg_tables", (("schemaname", "text"), ("tablename", "text"), ("tableowner", "text"),
                       ("tablespace", "text"), ("hasindexes", "boolean"),
                       ("hasrules", "boolean"), ("hastriggers", "boolean"),
                       ("rowsecurity", "boolean")), _tables_view),
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
                   "pg_description", "pg_event_trigger", "pg_extension"})

_ = TYPE_OIDS
