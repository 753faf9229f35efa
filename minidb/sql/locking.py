"""Which heavyweight lock each statement takes (PostgreSQL's choices), and taking it.

==============================  =====================================================
statement                       locks (held to transaction end)
==============================  =====================================================
SELECT                          AccessShare on every table read and its indexes
SELECT ... FOR UPDATE           RowShare on the table and its indexes
INSERT / UPDATE / DELETE        RowExclusive on the target and its indexes; AccessShare
                                on the tables an INSERT ... SELECT reads
COPY FROM / COPY TO             RowExclusive / AccessShare on the table
CREATE INDEX                    Share on the table
VACUUM, ANALYZE                 ShareUpdateExclusive on each table
DROP TABLE, TRUNCATE            AccessExclusive on the table and its indexes
DROP INDEX                      AccessExclusive on the index's table and the index
ALTER TABLE (every form)        AccessExclusive on the table and its indexes
ALTER INDEX ... RENAME          AccessExclusive on the index
REINDEX                         Share on the table, AccessExclusive on each index rebuilt
LOCK TABLE                      the named mode (AccessExclusive by default)
foreign-key check / action      RowShare on a referenced table it reads, RowExclusive on a
                                referencing table an action writes (``minidb.exec.ri``,
                                when it runs); ADD FOREIGN KEY: ShareRowExclusive on both
==============================  =====================================================

DML locks are computed once per plan (``statement_lock_keys`` after binding, kept on the
plan as ``lock_reqs``).  A new statement takes them right after binding, before the
planner opens the relations' files (as PostgreSQL locks during parse analysis), and binds
again if the catalog generation moved while it waited; a cached plan takes them before its
validity is checked, as PostgreSQL's AcquireExecutorLocks: a statement that waited for a
DROP or TRUNCATE to commit sees the catalog generation moved and plans again against the
new catalog.  Utility statements
look the table up, lock it, and look again (``lock_table``): if a concurrent DROP won,
the name is gone and the error says so; if it was dropped and re-created, the new one is
locked instead.

Every lock is taken inside a transaction (``Transaction.start_implicit`` for a statement
outside a block), so the transaction's end releases it.

Parallel workers take no locks: the leader holds them for the whole statement and the
workers only read the relations it locked (``minidb.txn.lmgr`` explains why that is
enough instead of PostgreSQL's lock groups).
"""

from __future__ import annotations

import minidb.errors as errors
from minidb.txn.lmgr import (AccessExclusiveLock, AccessShareLock, RowExclusiveLock,
                             RowShareLock, prepare_requests, relation_tag)

__all__ = ["statement_lock_keys", "statement_lock_reqs", "lock_table", "lock_oid"]


def _table_keys(catalog, tdef, mode: int, out: dict) -> None:
    out[(relation_tag(tdef.oid), mode)] = None
    for iname in tdef.indexes:
        idef = catalog.indexes.get(iname)
        if idef is not None:
            out[(relation_tag(idef.oid), mode)] = None


def statement_lock_keys(bound, catalog) -> tuple:
    """The ``(tag, mode)`` keys a bound DML statement locks (see the module docstring)."""
    from minidb.sql.binder import BoundDelete, BoundInsert, BoundSelect, BoundSetOp, BoundUpdate
    out: dict = {}
    if isinstance(bound, (BoundSelect, BoundSetOp)):
        mode = RowShareLock if bound.for_update else AccessShareLock
        first = bound.rtable[0].table if bound.for_update else None
        if first is not None:
            _table_keys(catalog, first, mode, out)
        for t in bound.tables:         # every table read, subqueries included
            if t is not first:
                _table_keys(catalog, t, AccessShareLock, out)
    elif isinstance(bound, BoundInsert):
        _table_keys(catalog, bound.entry.table, RowExclusiveLock, out)
        for t in getattr(bound, "tables", []):
            if t.oid != bound.entry.table.oid:
                _table_keys(catalog, t, AccessShareLock, out)
    elif isinstance(bound, (BoundUpdate, BoundDelete)):
        _table_keys(catalog, bound.entry.table, RowExclusiveLock, out)
        for t in getattr(bound, "tables", []):
            if t.oid != bound.entry.table.oid:
                _table_keys(catalog, t, AccessShareLock, out)
    return tuple(out)


def statement_lock_reqs(bound, catalog) -> tuple:
    return prepare_requests(statement_lock_keys(bound, catalog))


def lock_oid(engine, oid: int, mode: int, nowait: bool = False) -> None:
    """Take ``mode`` on relation ``oid`` in the session's transaction (started if none)."""
    session = engine.session
    session.xact.start_implicit()
    session.backend.lockmgr.acquire(relation_tag(oid), mode, nowait)


def lock_table(engine, name: str, mode: int, nowait: bool = False, *, indexes: bool = False):
    """Look ``name`` up, lock it in ``mode``, and look again (RangeVarGetRelidExtended):
    returns the table's current definition; UndefinedTable if it is gone.  ``indexes``:
    lock its indexes in the same mode too."""
    catalog = engine.session.backend.catalog
    t = catalog.table(name)
    for _ in range(100):
        lock_oid(engine, t.oid, mode, nowait)
        catalog.refresh()
        now = catalog.tables.get(name) or catalog.system_tables.get(name)
        if now is None:
            raise errors.UndefinedTable(f'relation "{name}" does not exist')
        if now.oid == t.oid:
            if indexes:
                for iname in now.indexes:
                    idef = catalog.indexes.get(iname)
                    if idef is not None:
                        lock_oid(engine, idef.oid, mode, nowait)
            return now
        t = now  # dropped and created again while we waited: lock the new one
    raise errors.InternalError(f'relation "{name}" keeps changing while being locked')


def lock_mode_of(sql_mode: str) -> int:
    from minidb.txn.lmgr import SQL_MODES
    return SQL_MODES[sql_mode]


ACCESS_EXCLUSIVE = AccessExclusiveLock
