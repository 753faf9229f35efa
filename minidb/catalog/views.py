"""Views in the catalog: a pg_class row (relkind 'v', no file: relfilenode 0), a
pg_attribute row per output column, and a pg_rewrite row with the query's SQL text and
the OIDs of the relations it reads (where PostgreSQL keeps the rule's parse tree and
pg_depend rows).  Each function runs as a catalog change of the backend's transaction
(``Catalog.run_change``), so a view is created, replaced and dropped transactionally like
a table; the SQL side (binding, expansion, dependencies) is ``minidb.sql.views``.
"""

from __future__ import annotations

from minidb.catalog.bootstrap import (PG_ATTRIBUTE, PG_CLASS, PG_REWRITE, RELKIND_VIEW,
                                      attribute_row, class_row)
from minidb.catalog.defs import ColumnDef, ViewDef

__all__ = ["create_view", "replace_view", "drop_view"]


def _deps_text(deps) -> str:
    return " ".join(str(int(d)) for d in sorted(set(deps)))


def create_view(cat, b, name: str, columns: list[ColumnDef], query: str,
                deps: list[int]) -> ViewDef:
    oid = cat._claim_name(b, name, lambda oid: class_row(
        oid, name, RELKIND_VIEW, 0, len(columns)), storage=False)
    for i, c in enumerate(columns, start=1):
        cat._insert(b, PG_ATTRIBUTE, attribute_row(oid, i, c))
    cat._insert(b, PG_REWRITE, (oid, "_RETURN", query, _deps_text(deps)))
    return cat._changed(b).views[name]


def replace_view(cat, b, name: str, columns: list[ColumnDef], query: str,
                 deps: list[int]) -> ViewDef:
    """CREATE OR REPLACE VIEW of an existing view: its columns keep their names and types
    (the caller checked), new ones are added at the end, the query is the new one."""
    st = cat._state()
    v = st.views[name]
    for i in range(len(v.columns), len(columns)):
        cat._insert(b, PG_ATTRIBUTE, attribute_row(v.oid, i + 1, columns[i]))
    if len(columns) != len(v.columns):
        cat._update_class(b, st, v.oid, relnatts=len(columns))
    cat._write(b, PG_REWRITE, st.rewrite_tid[v.oid], (v.oid, "_RETURN", query,
                                                      _deps_text(deps)))
    return cat._changed(b).views[name]


def drop_view(cat, b, name: str) -> ViewDef:
    st = cat._state()
    v = st.views[name]
    b.xact.xid_for_write()
    cat._write(b, PG_REWRITE, st.rewrite_tid[v.oid])
    for tid in st.attr_tids.get(v.oid, []):
        cat._write(b, PG_ATTRIBUTE, tid)
    cat._write(b, PG_CLASS, st.class_tid[v.oid])
    cat._changed(b)
    return v
