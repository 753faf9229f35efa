"""ALTER TABLE and REINDEX as catalog changes (PostgreSQL's ``tablecmds.c`` / ``index.c``).

Each function here runs inside the backend's transaction (``Catalog.run_change``): it
updates, inserts or deletes rows of pg_class / pg_attribute / pg_index / pg_statistic, so it
rolls back like any row, and it ends with a CommandCounterIncrement (``Catalog._changed``).
The caller (``minidb.sql.alter``) holds PostgreSQL's lock (AccessExclusive on the table;
REINDEX: Share on the table, AccessExclusive on the index) and has checked the rows where
a change needs it (SET NOT NULL).

============================  ===============================================================
change                        catalog rows / files
============================  ===============================================================
``rename_relation``           pg_class.relname (a table or an index), the name checked free
                              as CREATE checks it (waiting for a transaction that creates or
                              drops that name)
``rename_column``             pg_attribute.attname (indexes and statistics name attnums)
``set_not_null``              pg_attribute.attnotnull
``reindex``                   a new relfilenode for the index (old file deleted at commit,
                              new one at abort), built by the caller's ``build``
``rewrite_table``             ADD / DROP COLUMN: the table's pg_attribute rows replaced, a
                              new relfilenode for the table and each index it keeps (an
                              index on a dropped column is dropped), pg_index.indkey and
                              pg_statistic.staattnum renumbered; the caller's ``copy`` fills
                              the new heap, ``build_index`` each new index file
============================  ===============================================================

Departure: ADD COLUMN and DROP COLUMN rewrite the table (PostgreSQL's rewrite path, taken
there for a volatile DEFAULT or a type change) rather than storing a "missing value" and
marking the column ``attisdropped``: minidb's row layouts put every column at a fixed
offset after a bitmap sized for the table's columns, so a tuple with fewer columns would
need a second layout per table.  The rewrite is transactional through pending deletes, like
TRUNCATE.  Its rows are new versions stamped with the altering transaction (as in
PostgreSQL's rewrite): a REPEATABLE READ snapshot taken before the ALTER committed, that had
not locked the table, sees the table empty afterwards (PostgreSQL documents the same for
rewriting ALTER TABLE and TRUNCATE).
"""

from __future__ import annotations

from minidb.catalog.bootstrap import PG_ATTRIBUTE, PG_INDEX, PG_STATISTIC, attribute_row
from minidb.catalog.defs import ColumnDef
from minidb.errors import DuplicateColumn, DuplicateTable, UndefinedColumn
from minidb.heap.layout import Column, RowLayout

__all__ = ["rename_relation", "rename_column", "set_not_null", "reindex", "rewrite_table"]


# -- public: each one catalog change in the backend's transaction --------------------------------
def rename_relation(catalog, name: str, new: str, kind: str = "table"):
    """ALTER TABLE / ALTER INDEX ``name`` RENAME TO ``new``."""
    long = catalog._long(name)
    if long != name:            # a temporary table stays in the session's schema
        new = long[:len(long) - len(name)] + new
    return catalog.run_change(_rename_relation, name, new, kind)


def rename_column(catalog, table: str, old: str, new: str):
    return catalog.run_change(_rename_column, table, old, new)


def set_not_null(catalog, table: str, column: str, flag: bool):
    return catalog.run_change(_set_not_null, table, column, flag)


def reindex(catalog, index: str, build):
    """Give index ``index`` a new, empty file and ``build(index_def)`` it."""
    return catalog.run_change(_reindex, index, build)


def rewrite_table(catalog, table: str, columns: list[ColumnDef], source: list, copy,
                  build_index):
    """Replace the columns of ``table`` by ``columns``; ``source[j]`` is the position of new
    column j among the old columns, or None for a new column.  Returns (the new
    ``TableDef``, names of the indexes dropped with a dropped column).  ``copy(old_rel,
    new_rel)`` fills the new heap; ``build_index(index_def)`` each index's new file."""
    return catalog.run_change(_rewrite_table, table, columns, source, copy, build_index)


# -- helpers ------------------------------------------------------------------------------------
def _table(cat, st, name: str):
    return cat._user_table(st, name, "alter", noun="relation")


def _attr_rows(cat, b, st, relid: int) -> dict[int, tuple]:
    """attnum -> (tid, row) of a relation's pg_attribute rows."""
    out = {}
    for tid in st.attr_tids.get(relid, []):
        row = cat._fetch(b, PG_ATTRIBUTE, tid)
        out[row[4]] = (tid, row)
    return out


def _column(t, name: str) -> int:
    i = t.column_index(name)
    if i < 0:
        raise UndefinedColumn(f'column "{name}" of relation "{t.name}" does not exist')
    return i


def _set(desc, row: tuple, **changes) -> tuple:
    names = [c[0] for c in desc.columns]
    out = list(row)
    for k, v in changes.items():
        out[names.index(k)] = v
    return tuple(out)


# -- the changes ----------------------------------------------------------------------------------
def _rename_relation(cat, b, name: str, new: str, kind: str):
    st = cat._state()
    if kind == "index":
        rel = st.indexes.get(name)
        if rel is None:
            from minidb.errors import UndefinedObject
            raise UndefinedObject(f'index "{name}" does not exist')
    else:
        rel = _table(cat, st, name)
    xact = b.xact
    xact.xid_for_write()
    while True:
        with cat._cache.lock:
            wait = cat._name_taken(b, new)
            if wait == 0:
                cat._update_class(b, st, rel.oid, relname=new)
                break
        if wait < 0:
            raise DuplicateTable(f'relation "{new}" already exists')
        s = b.settings
        xact.procarray.wait_for(b.slot, wait, lock_timeout_ms=s.lock_timeout,
                                deadlock_timeout_ms=s.deadlock_timeout,
                                max_wait_ms=s.lock_wait_timeout_ms,
                                what=f' (for relation name "{new}")')
    st = cat._changed(b)
    return st.tables.get(new) or st.indexes.get(new)


def _rename_column(cat, b, table: str, old: str, new: str):
    st = cat._state()
    t = _table(cat, st, table)
    i = _column(t, old)
    if t.column_index(new) >= 0:
        raise DuplicateColumn(f'column "{new}" of relation "{table}" already exists')
    b.xact.xid_for_write()
    tid, row = _attr_rows(cat, b, st, t.oid)[i + 1]
    cat._write(b, PG_ATTRIBUTE, tid, _set(PG_ATTRIBUTE, row, attname=new))
    return cat._changed(b).tables[table]


def _set_not_null(cat, b, table: str, column: str, flag: bool):
    st = cat._state()
    t = _table(cat, st, table)
    i = _column(t, column)
    if t.columns[i].not_null == flag:
        return t
    b.xact.xid_for_write()
    tid, row = _attr_rows(cat, b, st, t.oid)[i + 1]
    cat._write(b, PG_ATTRIBUTE, tid, _set(PG_ATTRIBUTE, row, attnotnull=bool(flag)))
    return cat._changed(b).tables[table]


def _reindex(cat, b, index: str, build):
    st = cat._state()
    idef = st.indexes.get(index)
    if idef is None:
        from minidb.errors import UndefinedObject
        raise UndefinedObject(f'index "{index}" does not exist')
    b.xact.xid_for_write()
    rfn = cat._new_file(b)
    cat._update_class(b, st, idef.oid, relfilenode=rfn)
    b.xact.pending_deletes.append((idef.relfilenode, True))
    st = cat._changed(b)
    idef = st.indexes[index]
    if build is not None:
        build(idef)
    return idef


def _rewrite_table(cat, b, table: str, columns: list[ColumnDef], source: list, copy,
                   build_index):
    st = cat._state()
    t = _table(cat, st, table)
    RowLayout([Column(c.name, c.type, c.not_null) for c in columns])  # validates
    old_rel = cat.heap_rel(table)
    new_pos = {src: j for j, src in enumerate(source) if src is not None}  # old i -> new j
    xact = b.xact
    xact.xid_for_write()
    # the columns
    for tid in st.attr_tids.get(t.oid, []):
        cat._write(b, PG_ATTRIBUTE, tid)
    for j, c in enumerate(columns, start=1):
        cat._insert(b, PG_ATTRIBUTE, attribute_row(t.oid, j, c))
    # statistics follow their column's number, or go with it
    for tid in st.stat_tids.get(t.oid, []):
        row = cat._fetch(b, PG_STATISTIC, tid)
        j = new_pos.get(row[1] - 1)
        if j is None:
            cat._write(b, PG_STATISTIC, tid)
        elif j + 1 != row[1]:
            cat._write(b, PG_STATISTIC, tid, _set(PG_STATISTIC, row, staattnum=j + 1))
    # the table's new file
    rfn = cat._new_file(b)
    cat._update_class(b, st, t.oid, relfilenode=rfn, relnatts=len(columns))
    xact.pending_deletes.append((t.relfilenode, True))
    # its indexes: dropped with a dropped column, else renumbered and given a new file
    dropped = []
    for iname in t.indexes:
        idef = st.indexes[iname]
        olds = [t.column_index(c) for c in idef.columns]
        if any(i not in new_pos for i in idef.referenced_columns(t)):
            cat._drop_index_rows(b, st, idef)
            dropped.append(iname)
            continue
        irow = cat._fetch(b, PG_INDEX, st.index_tid[idef.oid])
        exprs = idef.exprs or [None] * len(olds)
        indkey = " ".join("0" if e is not None else str(new_pos[i] + 1)
                          for i, e in zip(olds, exprs))
        if indkey != irow[5]:
            cat._write(b, PG_INDEX, st.index_tid[idef.oid], _set(PG_INDEX, irow, indkey=indkey))
        irfn = cat._new_file(b)
        cat._update_class(b, st, idef.oid, relfilenode=irfn)
        xact.pending_deletes.append((idef.relfilenode, True))
    st = cat._changed(b)
    copy(old_rel, cat.heap_rel(table))
    if build_index is not None:
        for iname in st.tables[table].indexes:
            build_index(st.indexes[iname])
    return st.tables[table], dropped
