"""What the rest of minidb sees of the catalog: one table, one column, one index.

These are the *relcache entries* of minidb: plain Python objects built from the catalog
rows (``pg_class``, ``pg_attribute``, ``pg_index``, ``pg_statistic``) by
``minidb.catalog.cache``, shared by every lookup that hits the same cached catalog state and
never written by callers (a change is a catalog change: see ``Catalog``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

FIRST_OID = 16384  # FirstNormalObjectId: OIDs below are the system catalogs' own


@dataclass
class ColumnDef:
    name: str
    type: str  # SQL spelling, parsed by minidb.types.parse_type
    not_null: bool = False
    default: str | None = None  # SQL expression text


@dataclass
class IndexDef:
    oid: int
    name: str
    table: str
    relfilenode: int
    columns: list[str]
    unique: bool = False
    primary: bool = False


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
