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
    foreign_keys: list = field(default_factory=list)   # [FKeyDef] this table's (contype 'f')
    referenced_by: list = field(default_factory=list)  # [FKeyDef] of tables referencing it

    def column_index(self, name: str) -> int:
        for i, c in enumerate(self.columns):
            if c.name == name:
                return i
        return -1


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
