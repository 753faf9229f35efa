"""CHECK constraints in the catalog: pg_constraint rows (contype 'c'), one per constraint,
with the expression's SQL text (``consrc``); ``TableDef.checks`` lists a table's.  Each
function is a catalog change of the backend's transaction (``Catalog.run_change``); DROP
TABLE removes a table's rows (``Catalog._drop_table``).  The SQL side (names, validation,
enforcement) is ``minidb.sql.checks``."""

from __future__ import annotations

from minidb.catalog.bootstrap import PG_CONSTRAINT

__all__ = ["add_checks", "drop_check"]


def add_checks(cat, b, table: str, checks: list) -> None:
    """Add ``checks`` ([(name, SQL text)]) to ``table``."""
    st = cat._state()
    t = st.tables[table]
    b.xact.xid_for_write()
    for name, text in checks:
        with cat._cache.lock:
            oid = cat._cache.new_oid()
        cat._insert(b, PG_CONSTRAINT, (oid, name, t.oid, "c", text))
    cat._changed(b)


def drop_check(cat, b, table: str, name: str) -> None:
    st = cat._state()
    t = st.tables[table]
    b.xact.xid_for_write()
    for c in t.checks:
        if c.name == name:
            cat._write(b, PG_CONSTRAINT, st.con_tids[c.oid])
    cat._changed(b)
