"""The catalogs' own descriptors, hard-coded (PostgreSQL's ``formrdesc`` and ``schemapg.h``).

To read ``pg_class`` one needs ``pg_class``'s row layout; that circle is broken here: the
four system catalogs are described by the Python table ``CATALOGS`` below, with
PostgreSQL's OIDs, and their relfilenode *is* their OID forever (minidb never rewrites a
catalog file - no TRUNCATE, VACUUM FULL or REINDEX of a catalog - so it needs no relation
mapper).  ``bootstrap(backend)`` runs once, when a data directory is created: it creates
the four files and inserts, in one ordinary transaction, the catalogs' own rows into
``pg_class`` and ``pg_attribute`` so SQL can see them (``SELECT relname FROM pg_class``).

Column types are minidb's (``integer`` where PostgreSQL has ``oid`` / ``int2``, ``text``
where it has ``name``); the columns are the ones minidb needs, in PostgreSQL's spelling,
plus a few minidb keeps in a simpler place than PostgreSQL (see ``minidb.catalog``'s
docstring: ``attdefault``, ``atttypname``, ``stavalues``).
"""

from __future__ import annotations

from dataclasses import dataclass

from minidb.catalog.defs import ColumnDef, TableDef
from minidb.heap.heapam import HeapRel, heap_insert
from minidb.heap.layout import Column, RowLayout
from minidb.storage.xloginsert import log_smgr_create
from minidb.types import parse_type

PG_CATALOG_NAMESPACE = 11
PUBLIC_NAMESPACE = 2200
RELKIND_TABLE, RELKIND_INDEX = "r", "i"
RELKIND_SEQUENCE = "S"
# pg_attribute has no attidentity column: an identity column's kind is written after its
# default's text (``nextval('t_id_seq')`` + IDENTITY_MARK + "a"), read back by column_def
IDENTITY_MARK = " /* identity "
RELKIND_VIEW = "v"              # a view: pg_class + pg_attribute rows, its query in pg_rewrite, no file

# PostgreSQL's type OIDs of the types minidb has (pg_type.dat); atttypid
TYPE_OIDS = {"boolean": 16, "bigint": 20, "integer": 23, "text": 25,
             "double precision": 701, "char": 1042, "varchar": 1043, "timestamp": 1114,
             "bytea": 17, "smallint": 21, "real": 700, "numeric": 1700, "date": 1082,
             "time": 1083, "timestamptz": 1184, "interval": 1186, "uuid": 2950}


def type_oid_mod(spelling: str) -> tuple[int, int]:
    """(atttypid, atttypmod) of a minidb type spelling; typmod is n + 4 for char(n) /
    varchar(n) and ((p << 16) | s) + 4 for numeric(p, s) as in PostgreSQL, -1 otherwise."""
    t = parse_type(spelling)
    if t.name == "numeric":
        return TYPE_OIDS["numeric"], (((t.length << 16) | (t.scale & 0x7FF)) + 4
                                      if t.length else -1)
    return TYPE_OIDS.get(t.name, 0), (t.length + 4 if t.length else -1)


@dataclass(frozen=True)
class CatalogDesc:
    """One system catalog: OID (= relfilenode), name, columns (name, type, not null)."""
    oid: int
    name: str
    columns: tuple

    @property
    def rel(self) -> HeapRel:
        return _RELS[self.oid]

    def column_defs(self) -> list[ColumnDef]:
        return [ColumnDef(n, t, nn) for n, t, nn in self.columns]

    def table_def(self) -> TableDef:
        return TableDef(self.oid, self.name, self.oid, self.column_defs(), system=True)


PG_CLASS = CatalogDesc(1259, "pg_class", (
    ("oid", "integer", True), ("relname", "text", True), ("relnamespace", "integer", True),
    ("relkind", "char(1)", True), ("relfilenode", "integer", True),
    ("relpages", "integer", True), ("reltuples", "double precision", True),
    ("relnatts", "integer", True), ("relhasindex", "boolean", True)))
PG_ATTRIBUTE = CatalogDesc(1249, "pg_attribute", (
    ("attrelid", "integer", True), ("attname", "text", True), ("atttypid", "integer", True),
    ("atttypmod", "integer", True), ("attnum", "integer", True),
    ("attnotnull", "boolean", True), ("atthasdef", "boolean", True),
    ("atttypname", "text", True), ("attdefault", "text", False)))
PG_INDEX = CatalogDesc(2610, "pg_index", (
    ("indexrelid", "integer", True), ("indrelid", "integer", True),
    ("indnatts", "integer", True), ("indisunique", "boolean", True),
    ("indisprimary", "boolean", True), ("indkey", "text", True),
    # minidb keeps these three as text: the per-column option bits ("0 3", NULL = all 0),
    # the SQL of the expression columns (a JSON list, one per indkey 0) and of the predicate
    ("indoption", "text", False), ("indexprs", "text", False), ("indpred", "text", False)))
PG_STATISTIC = CatalogDesc(2619, "pg_statistic", (
    ("starelid", "integer", True), ("staattnum", "integer", True),
    ("stainherit", "boolean", True), ("stanullfrac", "double precision", True),
    ("stawidth", "double precision", True), ("stadistinct", "double precision", True),
    ("stacorrelation", "double precision", False), ("stavalues", "text", False)))

# a view's query (PostgreSQL keeps its parse tree in ev_action: minidb its SQL text) and the
# relations it reads (PostgreSQL's pg_depend rows for it: OIDs, as "16384 16390")
PG_REWRITE = CatalogDesc(2618, "pg_rewrite", (
    ("ev_class", "integer", True), ("rulename", "text", True), ("ev_action", "text", True),
    ("ev_deps", "text", True)))
# constraints other than a table's unique indexes (primary keys and unique constraints are
# their indexes: pg_index): CHECK (contype 'c': consrc is the expression's SQL text;
# PostgreSQL's conbin is its tree) and FOREIGN KEY ('f': consrc is PostgreSQL's
# pg_get_constraintdef text - its conkey / confkey ... are arrays - read back by
# minidb.catalog.fkeys)
PG_CONSTRAINT = CatalogDesc(2606, "pg_constraint", (
    ("oid", "integer", True), ("conname", "text", True), ("conrelid", "integer", True),
    ("contype", "char(1)", True), ("consrc", "text", True)))

CATALOGS: tuple[CatalogDesc, ...] = (PG_CLASS, PG_ATTRIBUTE, PG_INDEX, PG_STATISTIC,
                                     PG_REWRITE, PG_CONSTRAINT)
BY_OID = {d.oid: d for d in CATALOGS}
BY_NAME = {d.name: d for d in CATALOGS}

_RELS = {d.oid: HeapRel(d.name, d.oid, RowLayout([Column(n, t, nn) for n, t, nn in d.columns]),
                        d.oid)
         for d in CATALOGS}


def class_row(oid: int, name: str, kind: str, relfilenode: int, natts: int,
              relpages: int = 0, reltuples: float = -1.0, hasindex: bool = False,
              namespace: int = PUBLIC_NAMESPACE) -> tuple:
    return (oid, name, namespace, kind, relfilenode, relpages, float(reltuples), natts,
            hasindex)


def attribute_row(relid: int, attnum: int, col: ColumnDef) -> tuple:
    typid, typmod = type_oid_mod(col.type)
    default = col.default
    if col.identity and default is not None:
        default = f"{default}{IDENTITY_MARK}{col.identity} */"
    return (relid, col.name, typid, typmod, attnum, bool(col.not_null),
            default is not None, col.type, default)


def column_def(row: tuple) -> ColumnDef:
    """The ColumnDef of a pg_attribute row (the identity kind split off the default)."""
    default, identity = row[8], ""
    if default is not None and default.endswith(" */") and IDENTITY_MARK in default:
        default, _, rest = default.rpartition(IDENTITY_MARK)
        identity = rest[:-3]
    return ColumnDef(row[1], row[7], bool(row[5]), default, identity)


def add_missing_catalogs(backend) -> bool:
    """A data directory made before a catalog existed (pg_rewrite and pg_constraint came
    after the first four) gets that catalog's file and rows now, in one transaction the
    caller commits; True if anything was added."""
    smgr = backend.instance.smgr
    missing = [d for d in CATALOGS if not smgr.exists(d.oid)]
    if not missing:
        return False
    xact = backend.xact
    xact.start_statement()
    xid = xact.xid_for_write()
    for d in missing:
        smgr.create(d.oid)
        log_smgr_create(backend.wal, d.oid)
        _insert_own_rows(backend, d, xid)
    xact.command_done(True)
    return True


def _insert_own_rows(backend, d, xid) -> None:
    heap_insert(backend, PG_CLASS.rel,
                class_row(d.oid, d.name, RELKIND_TABLE, d.oid, len(d.columns),
                          namespace=PG_CATALOG_NAMESPACE), xmin=xid, cmin=0)
    for i, col in enumerate(d.column_defs(), start=1):
        heap_insert(backend, PG_ATTRIBUTE.rel, attribute_row(d.oid, i, col),
                    xmin=xid, cmin=0)


def bootstrap(backend) -> None:
    """Create the catalogs' files and insert their own rows (a new data directory only);
    the caller commits."""
    smgr = backend.instance.smgr
    for d in CATALOGS:
        smgr.create(d.oid)
        log_smgr_create(backend.wal, d.oid)
    xact = backend.xact
    xact.start_statement()
    xid = xact.xid_for_write()
    for d in CATALOGS:
        _insert_own_rows(backend, d, xid)
    xact.command_done(True)
