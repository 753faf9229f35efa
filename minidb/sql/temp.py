"""Temporary tables: CREATE TEMP[ORARY] TABLE [... ON COMMIT DROP | DELETE ROWS | PRESERVE
ROWS], CREATE TEMP TABLE ... AS, SELECT ... INTO TEMP.

As in PostgreSQL a temporary table is an ordinary catalog entry in a schema of the
session's own, ``pg_temp_<N>`` (N: the backend's slot): it is stored as
``pg_temp_<N>.<name>`` in pg_class, and the backend of that slot finds it by its short name
first (``Catalog.temp_prefix``: a temporary table hides a permanent table of the same
name), so no other session can name it; its indexes and CHECK constraints get the same
prefix.  Everything else - scans, writes, indexes, transactions - is a table's.

Storage: PostgreSQL keeps temporary tables in the backend's local buffers and never
WAL-logs them.  minidb keeps their pages in the shared buffer pool (one buffer manager,
and a table's scans, index paths and EXPLAIN BUFFERS work unchanged) but writes no WAL for
them (``xloginsert.unlogged(bufmgr)``, the relfilenodes of the backend's temporary heaps:
their page records and hint-bit images are skipped); their catalog rows are WAL-logged like any DDL.  A crash
loses their pages, and every ``pg_temp_*`` table is dropped when a data directory is
opened (``Catalog.drop_temp_tables``), so they are gone after a crash as in PostgreSQL.
Their B-tree indexes are WAL-logged (a departure: cheaper to keep than to special-case).

End of life: the session's temporary tables are dropped when its backend closes;
``ON COMMIT DROP`` drops the table when the transaction that created it commits,
``ON COMMIT DELETE ROWS`` empties it (a truncation) at each commit.  Departure: both run
right after the commit, in a short transaction of their own (PostgreSQL runs them just
before), which no other session can tell apart.  A slot's leftover temporary tables (a
backend that died before cleaning up) are dropped by the next session of that slot when it
first creates one.
"""

from __future__ import annotations

import dataclasses

__all__ = ["for_create", "create_temp_table", "after_commit"]


def _prepare(engine, name: str, on_commit: str | None) -> str:
    session = engine.session
    catalog = session.backend.catalog
    prefix = catalog.temp_prefix
    if not getattr(session, "_temp_checked", False):
        session._temp_checked = True
        for stale in [n for n in list(catalog.tables.keys()) if n.startswith(prefix)]:
            catalog.drop_table(stale)     # a dead backend of this slot left them
        hooks = session.after_commit_hooks
        hooks.append(lambda: after_commit(engine))
    actions = session.__dict__.setdefault("temp_on_commit", {})
    long = prefix + name
    if on_commit in ("drop", "delete"):
        actions[long] = on_commit
    else:
        actions.pop(long, None)
    return long


def for_create(engine, st):
    """CREATE TEMP TABLE: the statement with the table's name in the session's schema."""
    long = _prepare(engine, st.name, st.on_commit)
    return dataclasses.replace(st, name=long, temp=False, on_commit=None)


def create_temp_table(engine, name: str, defs, on_commit) -> str:
    """CREATE TEMP TABLE ... AS: the table, by its stored name."""
    long = _prepare(engine, name, on_commit)
    engine.session.backend.catalog.create_table(long, defs)
    return long


def after_commit(engine) -> None:
    """ON COMMIT DROP / DELETE ROWS, run after each commit of the session."""
    session = engine.session
    actions = session.__dict__.get("temp_on_commit")
    if not actions:
        return
    from minidb.exec import indexam
    backend = session.backend
    catalog = backend.catalog
    by_oid = {t.oid: t for t in catalog.tables.values()}
    for key, what in list(actions.items()):
        # keyed by the stored name until the creation commits, then by OID (a RENAME keeps
        # the action, as PostgreSQL's on-commit list is by OID)
        t = by_oid.get(key) if isinstance(key, int) else dict.get(catalog.tables, key)
        actions.pop(key, None)
        if t is None:                      # rolled back or dropped
            continue
        long = t.name
        if what == "drop":
            catalog.drop_table(long)
            continue
        actions[t.oid] = what
        if backend.instance.smgr.nblocks(t.relfilenode) > 0:
            catalog.truncate_table(long, build_index=lambda idef: indexam.rebuild_index(
                backend, idef))
