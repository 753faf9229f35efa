"""What the rest of minidb sees of the catalog: one table, one column, one index.

These are the *relcache entries* of minidb: plain Python objects built from the catalog
rows (``pg_class``, ``pg_attribute``, ``pg_index``, ``pg_statistic``) by
``minidb.catalog.cache``, shared by every lookup that hits the same cached catalog state and
never written by callers (a change is a catalog change: see ``Catalog``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FIRST_OID = 16384  # FirstNormalObjectId: OIDs below are the system catalogs' own


@dataclass
class ColumnDef:
    name: str
    type: str  # SQL spelling, parsed by minidb.types.parse_type
    not_null: bool = False
    default: str | None = None  # SQL expression text
    identity: str = ""  # "a": GENERATED ALWAYS AS IDENTITY, "d": BY DEFAULT, "": neither


@dataclass
class IndexDef:
    oid: int
    name: str
    table: str
    relfilenode: int
    columns: list[str]
    unique: bool = False
    primary: bool = False
    # pg_index.indoption per key column: 1 DESC, 2 NULLS FIRST (minidb.index.keys)
    options: list[int] = field(default_factory=list)
    # per key column: the SQL text of an expression column, None for a plain column (whose
    # name is in ``columns``; an expression column's entry there is its display name)
    exprs: list = field(default_factory=list)
    predicate: str | None = None   # a partial index's WHERE, as SQL text

    def option(self, i: int) -> int:
        return self.options[i] if i < len(self.options) else 0

    def is_plain(self) -> bool:
        """No expression column and no predicate."""
        return not any(self.exprs) and self.predicate is None

    def referenced_columns(self, table: "TableDef") -> set[int]:
        """Positions of the table's columns the index reads: its plain key columns and
        every column its expressions or predicate name (by identifier; a superset is safe:
        these decide HOT updates and what a dropped column takes with it)."""
        out = {table.column_index(c) for c, e in zip(self.columns, self.exprs or
                                                     [None] * len(self.columns)) if e is None}
        for text in [e for e in self.exprs if e is not None] + [self.predicate or ""]:
            out |= sql_identifiers(text, table)
        out.discard(-1)
        return out


_STRING = re.compile(r"'(?:[^']|'')*'")
_IDENT = re.compile(r'"((?:[^"]|"")+)"|([A-Za-z_][A-Za-z0-9_$]*)')


def sql_identifiers(text: str, table: "TableDef") -> set[int]:
    """Positions of ``table``'s columns named in SQL ``text`` (string literals skipped)."""
    out = set()
    for m in _IDENT.finditer(_STRING.sub("''", text)):
        name = m.group(1).replace('""', '"') if m.group(1) else m.group(2).lower()
        i = table.column_index(name)
        if i >= 0:
            out.add(i)
    return out


@dataclass
class SequenceDef:
    """A sequence (relkind 'S'): its state is in its own page (minidb.catalog.sequence)."""
    oid: int
    name: str
    relfilenode: int


@dataclass
class TableDef:
    oid: int
    name: str
    relfilenode: int
    columns: list[ColumnDef]
    indexes: list[str] = field(default_factory=list)
    relpages: int = 0
    reltuples: float = -1.0  # -1: never vacuumed or analyzed (PostgreSQL 14+)
    # ANALYZE's per-column statistics (pg_statistic), by column name: null_frac,
    # avg_width, n_distinct, mcv / mcv_freq, histogram, correlation (minidb.sql.stats)
    column_stats: dict = field(default_factory=dict)
    system: bool = False  # a system catalog (pg_class, ...): no DROP, TRUNCATE or ANALYZE
    checks: list = field(default_factory=list)   # [CheckDef] (pg_constraint, contype 'c')
    foreign_keys: list = field(default_factory=list)   # [FKeyDef] this table's (contype 'f')
    referenced_by: list = field(default_factory=list)  # [FKeyDef] of tables referencing it

    def column_index(self, name: str) -> int:
        for i, c in enumerate(self.columns):
            if c.name == name:
                return i
        return -1


@dataclass
class CheckDef:
    """A CHECK constraint: its pg_constraint OID, name and expression's SQL text."""
    oid: int
    name: str
    expr: str


@dataclass
class ViewDef:
    """A view (relkind 'v'): its columns (names and types of its query's output), its
    query's SQL text, expanded where the view is named (``minidb.sql.views``), and the
    OIDs of the relations the query reads (DROP of one of them needs CASCADE)."""
    oid: int
    name: str
    columns: list[ColumnDef]
    query: str
    deps: list[int] = field(default_factory=list)


# referential actions, pg_constraint's confupdtype / confdeltype letters
FK_NO_ACTION, FK_RESTRICT, FK_CASCADE, FK_SET_NULL, FK_SET_DEFAULT = "a", "r", "c", "n", "d"


@dataclass
class FKeyDef:
    """A FOREIGN KEY constraint (pg_constraint, contype 'f'): the referencing table and
    columns, the referenced table and columns (a unique index covers them), the actions
    ON UPDATE / ON DELETE (``FK_*`` letters).  ``tid``: its catalog row (to drop it)."""
    oid: int
    name: str
    table: str
    columns: list[str]
    ref_table: str
    ref_columns: list[str]
    on_update: str = FK_NO_ACTION
    on_delete: str = FK_NO_ACTION
    table_oid: int = 0
    ref_oid: int = 0
    tid: tuple | None = None
