"""Utility statements and DDL: what ``Engine`` runs without planning.

==========================  ==================================================================
statement                   what happens
==========================  ==================================================================
BEGIN / START TRANSACTION   ``session.begin(isolation)``; inside a block: WARNING, no change
COMMIT / END                ``session.commit()``; a failed block rolls back (tag ROLLBACK)
ROLLBACK / ABORT            ``session.rollback()``; outside a block: WARNING
SAVEPOINT / RELEASE /       ``minidb.sql.savepoint`` (subtransactions, ``minidb.txn.subxact``)
  ROLLBACK TO
SET TRANSACTION ISOLATION   ``xact.set_isolation`` (before the block's first query)
SET / RESET / SHOW          the backend's session settings (``minidb.config``); instance
                            settings cannot change (55P02); SHOW ALL lists every setting
CREATE TABLE                catalog rows + file; PRIMARY KEY -> unique index ``T_pkey`` (its
                            columns NOT NULL), UNIQUE -> unique index ``T_COLS_key``, CHECK ->
                            pg_constraint rows (``checks``); TEMP: ``temp``; one statement: if
                            an index cannot be built nothing is left
CREATE TABLE ... AS         ``ctas`` (SELECT ... INTO too)
CREATE / DROP VIEW          ``views``
DROP TABLE                  its catalog rows and its indexes'; the files go at commit; the
                            views that read it: 2BP01, or dropped first with CASCADE
CREATE [UNIQUE] INDEX       ``minidb.index.create_index`` (default name ``T_COLS_idx``)
DROP INDEX                  ``minidb.index.drop_index``; a primary key's index is refused
                            (2BP01, HINT: ALTER TABLE ... DROP CONSTRAINT drops it)
ALTER TABLE / ALTER INDEX   ``minidb.sql.alter`` (ADD / DROP / RENAME COLUMN, RENAME TO, ADD /
  / REINDEX                 DROP CONSTRAINT, SET / DROP NOT NULL); REINDEX INDEX / TABLE
TRUNCATE                    as PostgreSQL: a new, empty relfilenode for the table and each
                            index (rebuilt empty); the old files go at commit
VACUUM [ANALYZE] [t, ...]   ``heap.vacuum.vacuum_table`` with the indexes' callbacks; not in
                            a transaction block (25001); no table: every table
ANALYZE [t, ...]            ``stats.analyze_table`` under a statement snapshot
COPY t FROM / TO 'file'     ``copy`` (text or csv)
LOCK [TABLE] t [IN m MODE]  the named lock until the block ends (NOWAIT: 55P03 at once);
                            outside a block 25P01, as PostgreSQL
CHECKPOINT                  ``Instance.checkpoint``
==========================  ==================================================================

Every statement takes PostgreSQL's relation lock (``minidb.sql.locking``): DROP / TRUNCATE
wait for the transactions that read or write the table (or fail with 55P03 on
``lock_timeout``), held to the end of the transaction; a statement outside a block runs in
an implicit transaction committed when it ends, which releases them.

DDL and TRUNCATE are transactional (``minidb.catalog``): each runs as a statement of the
session's transaction (an implicit one outside a block), a ROLLBACK undoes it, and an error
inside a block fails the block (25P02 after, as for DML).  Departure: SET is not
transactional.
"""

from __future__ import annotations

import minidb.errors as errors
from minidb.catalog import ColumnDef
from minidb.config import SETTINGS
from minidb.exec import indexam
from minidb.sql import ast, indexpred, savepoint, sequences
from minidb.sql.alter import alter_table, check_default, free_name, reindex
from minidb.sql import temp, views
from minidb.sql.checks import create_table_checks
from minidb.sql.ctas import create_table_as
from minidb.sql.locking import lock_oid, lock_table
from minidb.sql.result import Result
from minidb.txn.lmgr import (SQL_MODES, AccessExclusiveLock, ShareLock,
                             ShareUpdateExclusiveLock)
from minidb.types import parse_type

__all__ = ["run_utility"]


def _result(status, rows=None, description=None, messages=None, rowcount=-1):
    return Result(description, rows or [], rowcount, status, messages or [])


def run_utility(engine, stmt):
    h = _HANDLERS.get(type(stmt))
    if h is None:
        raise errors.NotSupportedError(f"{stmt.tag or type(stmt).__name__} is not supported")
    xact = engine.session.xact
    was_idle = xact.state == "idle"
    res = h(engine, stmt)
    if was_idle and xact.state != "idle" and not xact.explicit:
        xact.commit()   # the implicit transaction that held the statement's locks
        engine.session.run_after_commit()
    return res


# -- transactions ------------------------------------------------------------------------------
def _begin(engine, st: ast.BeginStmt):
    xact = engine.session.xact
    if xact.in_block:
        return _result("BEGIN", messages=["WARNING:  there is already a transaction in progress"])
    if xact.state != "idle":
        # an implicit transaction cannot be open between statements; be safe
        xact.commit()
    engine.session.begin(st.isolation, checked=True)   # (Engine._run checked)
    return _result("BEGIN")


def _commit(engine, st):
    xact = engine.session.xact
    if not xact.in_block:
        msgs = ["WARNING:  there is no transaction in progress"]
        if xact.state != "idle":
            xact.commit()
        return _result("COMMIT", messages=msgs)
    ok = engine.session.commit()
    return _result("COMMIT" if ok else "ROLLBACK")


def _rollback(engine, st):
    xact = engine.session.xact
    if not xact.in_block:
        if xact.state != "idle":
            xact.rollback()
        return _result("ROLLBACK", messages=["WARNING:  there is no transaction in progress"])
    engine.session.rollback()
    return _result("ROLLBACK")


def _set_transaction(engine, st: ast.SetTransactionStmt):
    xact = engine.session.xact
    if not xact.in_block:
        return _result("SET", messages=[
            "WARNING:  SET TRANSACTION can only be used in transaction blocks"])
    xact.set_isolation(st.isolation)
    return _result("SET")


# -- settings ----------------------------------------------------------------------------------
_VIRTUAL = {"server_version": lambda e: "15.0 (minidb 0.1)",
            "transaction_isolation": lambda e: (e.session.xact.isolation
                                                if e.session.xact.state != "idle" else
                                                e.session.settings.default_transaction_isolation),
            "server_encoding": lambda e: "UTF8", "client_encoding": lambda e: "UTF8",
            "datestyle": lambda e: "ISO, MDY", "standard_conforming_strings": lambda e: "on"}


def _show_value(v) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, float):
        return repr(v).rstrip("0").rstrip(".") if v != int(v) else str(int(v))
    return str(v)


def _set(engine, st: ast.SetStmt):
    settings = engine.session.settings
    name = st.name.lower()
    if name in _VIRTUAL:
        raise errors.CantChangeParameter(f'parameter "{name}" cannot be changed')
    if st.value is None:
        settings.reset(name)
    else:
        settings.set(name, st.value)
    return _result("SET")


def _show(engine, st: ast.ShowStmt):
    settings = engine.session.settings
    if st.name == "all":
        rows = [(n, _show_value(v), SETTINGS[n].reason) for n, v in settings.items()]
        desc = [(c, "text", None, None, None, None, None)
                for c in ("name", "setting", "description")]
        return _result("SHOW", rows, desc, rowcount=len(rows))
    name = st.name.lower()
    if name in _VIRTUAL:
        v = _VIRTUAL[name](engine)
    else:
        v = _show_value(settings.get(name))
    return _result("SHOW", [(v,)], [(name, "text", None, None, None, None, None)], rowcount=1)


def _reset(engine, st: ast.ResetStmt):
    settings = engine.session.settings
    if st.name == "all":
        for n, s in SETTINGS.items():
            if s.context == "session":
                settings.reset(n)
    else:
        settings.reset(st.name.lower())
    return _result("RESET")


# -- DDL -----------------------------------------------------------------------------------------
def _notice(msg):
    return f"NOTICE:  {msg}"


def _ddl(engine, body):
    """Run ``body()`` as one statement of the session's transaction."""
    return engine._statement(lambda snap: (body(), True))


def _create_table(engine, st: ast.CreateTableStmt):
    return _ddl(engine, lambda: _create_table_body(engine, st))


def _create_table_body(engine, st: ast.CreateTableStmt):
    if st.temp:
        st = temp.for_create(engine, st)     # named in the session's pg_temp schema
    session = engine.session
    backend = session.backend
    catalog = backend.catalog
    if st.name in catalog.tables or st.name in catalog.indexes:
        if st.if_not_exists:
            return _result("CREATE TABLE", messages=[
                _notice(f'relation "{st.name}" already exists, skipping')])
        raise errors.DuplicateTable(f'relation "{st.name}" already exists')
    if not st.columns:
        raise errors.NotSupportedError("tables without columns are not supported")
    names = [c.name for c in st.columns]
    for n in names:
        if names.count(n) > 1:
            raise errors.DuplicateColumn(f'column "{n}" specified more than once')
    pk = list(st.primary_key or [])
    col_pk = [c.name for c in st.columns if c.primary]
    if col_pk:
        if pk or len(col_pk) > 1:
            raise errors.ProgrammingError(
                f'multiple primary keys for table "{st.name}" are not allowed', sqlstate="42P16")
        pk = col_pk
    for c in pk:
        if c not in names:
            raise errors.UndefinedColumn(f'column "{c}" named in key does not exist')
    uniques = [list(u) for u in st.uniques] + [[c.name] for c in st.columns if c.unique]
    for u in uniques:
        for c in u:
            if c not in names:
                raise errors.UndefinedColumn(f'column "{c}" named in key does not exist')
    defs = []
    for c in st.columns:
        t = parse_type(c.type_name)
        if c.default is not None:
            check_default(engine, c, t)
        defs.append(ColumnDef(c.name, str(t), c.not_null or c.name in pk, c.default))
    owned = sequences.serial_columns(engine, st, defs)
    catalog.create_table(st.name, defs)
    create_table_checks(engine, st)
    sequences.create_owned(engine, st.name, owned)
    if pk:
        indexam.create_index(backend, st.name, free_name(catalog, f"{st.name}_pkey"), pk,
                             unique=True, primary=True)
    for u in uniques:
        if u == pk:
            continue
        indexam.create_index(backend, st.name,
                             free_name(catalog, f"{st.name}_{'_'.join(u)}_key"), u,
                             unique=True)
    if st.foreign_keys:
        from minidb.sql.fkeys import create_fkeys
        create_fkeys(engine, st.name, st.foreign_keys)
    return _result("CREATE TABLE")


def _drop_table(engine, st: ast.DropTableStmt):
    return _ddl(engine, lambda: _drop_table_body(engine, st))


def _drop_table_body(engine, st: ast.DropTableStmt):
    backend = engine.session.backend
    catalog = backend.catalog
    msgs = []
    for name in st.names:
        if name in catalog.system_tables:
            catalog.drop_table(name)  # refused: 42501
        if name not in catalog.tables:
            if catalog.view(name) is not None:
                raise errors.WrongObjectType(
                    f'"{name}" is not a table\nHINT:  Use DROP VIEW to remove a view.')
            if st.if_exists:
                msgs.append(_notice(f'table "{name}" does not exist, skipping'))
                continue
            raise errors.UndefinedTable(f'table "{name}" does not exist')
    locked = []
    for name in st.names:
        if name in catalog.tables:
            try:
                lock_table(engine, name, AccessExclusiveLock, indexes=True)
            except errors.UndefinedTable:
                if not st.if_exists:
                    raise
                msgs.append(_notice(f'table "{name}" does not exist, skipping'))
                continue
            locked.append(name)
    from minidb.sql.fkeys import drop_dependents
    drop_dependents(engine, locked, st.cascade, msgs, _notice)
    for name in locked:
        if name in catalog.tables:            # not dropped by an earlier CASCADE
            views.drop_dependents(engine, "table", name, catalog.tables[name].oid,
                                  st.cascade, msgs)
    for name in locked:
        sequences.drop_owned(engine, catalog.tables[name].oid)
        catalog.drop_table(name)
    return _result("DROP TABLE", messages=msgs)


def _create_index(engine, st: ast.CreateIndexStmt):
    return _ddl(engine, lambda: _create_index_body(engine, st))


def _create_index_body(engine, st: ast.CreateIndexStmt):
    backend = engine.session.backend
    catalog = backend.catalog
    t = lock_table(engine, st.table, ShareLock)
    exprs = st.exprs or [None] * len(st.columns)
    plain = [c for c, e in zip(st.columns, exprs) if e is None]
    for c in plain:
        if t.column_index(c) < 0:
            raise errors.UndefinedColumn(f'column "{c}" does not exist')
    if len(set(plain)) != len(plain):
        raise errors.DuplicateColumn("an index column is named more than once")
    for e in exprs:              # refused here if it does not bind or is volatile
        if e is not None:
            indexpred.bind_index_expr(catalog, t, e)
    name = st.name
    if name is None:
        name = free_name(catalog, f"{st.table}_{'_'.join(st.columns)}_idx")
    elif name in catalog.indexes or name in catalog.tables:
        if st.if_not_exists:
            return _result("CREATE INDEX", messages=[
                _notice(f'relation "{name}" already exists, skipping')])
        raise errors.DuplicateTable(f'relation "{name}" already exists')
    if st.where is not None:     # refused here if it does not bind (42703, 42804, ...)
        indexpred.bind_predicate(catalog, t, st.where)
    indexam.create_index(backend, st.table, name, st.columns, unique=st.unique,
                         options=st.options or None, predicate=st.where,
                         exprs=st.exprs or None)
    return _result("CREATE INDEX")


def _drop_index(engine, st: ast.DropIndexStmt):
    return _ddl(engine, lambda: _drop_index_body(engine, st))


def _drop_index_body(engine, st: ast.DropIndexStmt):
    backend = engine.session.backend
    catalog = backend.catalog
    msgs = []
    todo = []
    for name in st.names:
        idef = catalog.indexes.get(name)
        if idef is None:
            if st.if_exists:
                msgs.append(_notice(f'index "{name}" does not exist, skipping'))
                continue
            raise errors.UndefinedObject(f'index "{name}" does not exist')
        if idef.primary:
            raise errors.ProgrammingError(
                f'cannot drop index {name} because constraint {name} on table {idef.table} '
                f'requires it\nHINT:  You can drop constraint {name} on table {idef.table} '
                f'instead: ALTER TABLE {idef.table} DROP CONSTRAINT {name}', sqlstate="2BP01")
        from minidb.sql.fkeys import drop_index_dependents
        drop_index_dependents(engine, idef, False, msgs, _notice, f"index {name}")
        todo.append(name)
    for name in todo:
        idef = catalog.indexes[name]
        lock_table(engine, idef.table, AccessExclusiveLock)
        lock_oid(engine, idef.oid, AccessExclusiveLock)
        catalog.refresh()
        if name not in catalog.indexes:
            raise errors.UndefinedObject(f'index "{name}" does not exist')
    for name in todo:
        indexam.drop_index(backend, name)
    return _result("DROP INDEX", messages=msgs)


def _truncate(engine, st: ast.TruncateStmt):
    return _ddl(engine, lambda: _truncate_body(engine, st))


def _truncate_body(engine, st: ast.TruncateStmt):
    backend = engine.session.backend
    catalog = backend.catalog
    for name in st.names:
        catalog.table(name)            # all exist, or nothing happens
    from minidb.sql.fkeys import truncate_targets
    msgs = []
    names = truncate_targets(catalog, st.names, st.cascade, msgs, _notice)
    for name in names:                 # wait for every transaction using them
        lock_table(engine, name, AccessExclusiveLock, indexes=True)
    for name in names:
        catalog.truncate_table(name, build_index=lambda idef: indexam.rebuild_index(
            backend, idef))
    return _result("TRUNCATE TABLE", messages=msgs)


# -- maintenance ---------------------------------------------------------------------------------
def _tables(engine, names):
    catalog = engine.session.backend.catalog
    if not names:       # every table but temporary ones (other sessions' among them)
        return sorted(n for n in catalog.tables if not n.startswith("pg_temp_"))
    for n in names:
        catalog.table(n)
    return list(names)


def _vacuum(engine, st: ast.VacuumStmt):
    from minidb.heap.vacuum import vacuum_table
    session = engine.session
    backend = session.backend
    xact = session.xact
    if xact.in_block:
        raise errors.ActiveSqlTransaction("VACUUM cannot run inside a transaction block")
    msgs = []
    for name in _tables(engine, st.tables):
        lock_table(engine, name, ShareUpdateExclusiveLock)
        rel = backend.catalog.heap_rel(name)
        res = vacuum_table(backend, rel, index_callbacks=indexam.vacuum_callbacks(backend, name))
        if st.verbose:
            msgs.append(f'INFO:  vacuuming "{name}": {res}')
        if st.analyze:
            info = _analyze_one(engine, name)
            if st.verbose:
                msgs.append(_analyze_msg(info))
    return _result("VACUUM", messages=msgs)


def _analyze_one(engine, name):
    from minidb.sql.stats import analyze_table
    backend = engine.session.backend
    lock_table(engine, name, ShareUpdateExclusiveLock)
    return engine._statement(lambda snap: (analyze_table(backend, name, snap), False))


def _analyze_msg(info) -> str:
    return (f'INFO:  "{info["table"]}": scanned {info["pages"]} pages, containing '
            f'{info["rows"]} live rows and {info["dead"]} dead rows; {info["sampled"]} rows '
            f"in sample")


def _analyze(engine, st: ast.AnalyzeStmt):
    msgs = []
    for name in _tables(engine, st.tables):
        info = _analyze_one(engine, name)
        if st.verbose:
            msgs.append(_analyze_msg(info))
    return _result("ANALYZE", messages=msgs)


def _lock(engine, st: ast.LockStmt):
    xact = engine.session.xact
    if not xact.in_block:
        raise errors.NoActiveSqlTransaction("LOCK TABLE can only be used in transaction blocks")
    mode = SQL_MODES[st.mode]
    for name in st.names:
        try:
            lock_table(engine, name, mode, st.nowait)
        except errors.LockNotAvailable as e:
            if st.nowait and str(e).startswith("could not obtain lock"):
                raise errors.LockNotAvailable(
                    f'could not obtain lock on relation "{name}"') from None
            raise
    return _result("LOCK TABLE")


def _checkpoint(engine, st):
    engine.instance.checkpoint()
    return _result("CHECKPOINT")


def _copy(engine, st):
    from minidb.sql.copy import run_copy
    n = run_copy(engine, st)
    return _result(f"COPY {n}", rowcount=n)


_HANDLERS = {
    ast.BeginStmt: _begin, ast.CommitStmt: _commit, ast.RollbackStmt: _rollback,
    ast.SetTransactionStmt: _set_transaction, ast.SetStmt: _set, ast.ShowStmt: _show,
    ast.ResetStmt: _reset, ast.CreateTableStmt: _create_table, ast.DropTableStmt: _drop_table,
    ast.CreateIndexStmt: _create_index, ast.DropIndexStmt: _drop_index,
    ast.TruncateStmt: _truncate, ast.VacuumStmt: _vacuum, ast.AnalyzeStmt: _analyze,
    ast.CheckpointStmt: _checkpoint, ast.CopyStmt: _copy, ast.LockStmt: _lock,
    ast.AlterTableStmt: alter_table, ast.ReindexStmt: reindex,
    **sequences.HANDLERS,
    **savepoint.HANDLERS,
    ast.CreateTableAsStmt: create_table_as,
    ast.CreateViewStmt: views.create_view, ast.DropViewStmt: views.drop_view,
}
