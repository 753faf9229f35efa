"""ALTER TABLE, ALTER INDEX ... RENAME and REINDEX (PostgreSQL's ``tablecmds.c``, ``indexcmds.c``).

==============================================  ===============================================
form                                            what happens
==============================================  ===============================================
ADD [COLUMN] c type [NOT NULL] [DEFAULT e]      the table is rewritten into a new relfilenode
  [PRIMARY KEY | UNIQUE]                        with the column filled with its default (e
                                                evaluated per row if not a constant; NULL
                                                when none: with NOT NULL 23502 if the table
                                                has rows); its indexes are rebuilt
DROP [COLUMN] c                                 rewritten without the column; an index that
                                                uses it is dropped with it (as PostgreSQL)
RENAME [COLUMN] c TO d                          pg_attribute.attname
RENAME TO u   (also ALTER INDEX i RENAME TO j)  pg_class.relname
ADD [CONSTRAINT n] PRIMARY KEY | UNIQUE (cols)  a unique index (the constraint is its index);
                                                PRIMARY KEY sets NOT NULL on its columns,
                                                checking the rows first
DROP CONSTRAINT n                               drops the table's unique or primary-key index
ALTER [COLUMN] c SET NOT NULL                   checks the rows (23502), then attnotnull
ALTER [COLUMN] c DROP NOT NULL                  attnotnull (42P16 for a primary-key column)
REINDEX INDEX i | TABLE t                       each index gets a new relfilenode built from
                                                the heap; the old file goes at commit
==============================================  ===============================================

Locks (PostgreSQL's): ALTER TABLE takes AccessExclusive on the table and its indexes for
every form minidb has, ALTER INDEX on the index; REINDEX Share on the table (readers and
other REINDEXes go on, writers wait) and AccessExclusive on each index it rebuilds.  Every
form is a catalog change of the session's transaction (``minidb.catalog.alter``): it rolls
back with it, and catalog and files agree after commit or abort.  The actions of one
statement run in order; an error in any undoes all of them (the statement's transaction, or
the block, fails).

Departures: ADD / DROP COLUMN rewrite the table (see ``minidb.catalog.alter``); there is
no pg_constraint, so DROP CONSTRAINT accepts any unique index of the table (PostgreSQL only
one made by a constraint), and DROP INDEX of a unique constraint's index is allowed (of a
primary key's it is refused, with a HINT naming ALTER TABLE ... DROP CONSTRAINT).
"""

from __future__ import annotations

import numpy as np

import minidb.errors as errors
from minidb.catalog import ColumnDef
from minidb.catalog import alter as catalter
from minidb.exec import indexam
from minidb.sql import ast
from minidb.sql.checks import add_check, drop_check
from minidb.sql.locking import lock_oid, lock_table
from minidb.txn.lmgr import AccessExclusiveLock, ShareLock
from minidb.types import parse_type

__all__ = ["alter_table", "reindex", "check_default", "free_name"]


def _notice(msg):
    return f"NOTICE:  {msg}"


def _result(tag, msgs=()):
    from minidb.sql.result import Result
    return Result(None, [], -1, tag, list(msgs))


# -- shared with CREATE TABLE (minidb.sql.commands) ---------------------------------------------
def check_default(engine, col, t):
    """Bind a column's DEFAULT text against its type (an error if it cannot be assigned)."""
    from minidb.exec.compile import K, compile_expr
    from minidb.sql.binder import Binder
    from minidb.sql.parser.translate import parse_expression_text
    node = parse_expression_text(col.default)
    b = Binder(engine.session.backend.catalog)
    e = b.assignable(b.expr(node, [], ctx=t), t, col.name)
    if not isinstance(compile_expr(e, {}), K):
        pass   # evaluated per row at INSERT time


def free_name(catalog, name: str) -> str:
    """``name``, or ``name`` with the first number appended that no relation has."""
    if name not in catalog.tables and name not in catalog.indexes:
        return name
    for i in range(1, 10000):
        cand = f"{name}{i}"
        if cand not in catalog.tables and cand not in catalog.indexes:
            return cand
    raise errors.DuplicateTable(f'relation "{name}" already exists')


# -- ALTER TABLE ----------------------------------------------------------------------------------
def alter_table(engine, st: ast.AlterTableStmt):
    return engine._statement(lambda snap: (_alter_body(engine, st), True))


def _alter_body(engine, st: ast.AlterTableStmt):
    catalog = engine.session.backend.catalog
    if st.kind == "index":
        return _alter_index(engine, st)
    if st.table in catalog.system_tables:
        raise errors.InsufficientPrivilege(
            f'permission denied: "{st.table}" is a system catalog (cannot alter it)')
    if st.table not in catalog.tables:
        if st.if_exists:
            return _result(st.tag, [_notice(f'relation "{st.table}" does not exist, skipping')])
        raise errors.UndefinedTable(f'relation "{st.table}" does not exist')
    lock_table(engine, st.table, AccessExclusiveLock, indexes=True)
    msgs = []
    name = st.table
    for act in st.actions:
        name = _ACTIONS[act.kind](engine, name, act, msgs)
    return _result(st.tag, msgs)


def _alter_index(engine, st):
    catalog = engine.session.backend.catalog
    idef = catalog.indexes.get(st.table)
    if idef is None:
        if st.if_exists:
            return _result(st.tag, [_notice(f'relation "{st.table}" does not exist, skipping')])
        raise errors.UndefinedTable(f'relation "{st.table}" does not exist')
    lock_oid(engine, idef.oid, AccessExclusiveLock)
    catalog.refresh()
    catter = catalog.indexes.get(st.table)
    if catter is None or catter.oid != idef.oid:
        raise errors.UndefinedTable(f'relation "{st.table}" does not exist')
    catalter.rename_relation(catalog, st.table, st.actions[0].new_name, "index")
    return _result(st.tag)


def _table(engine, name):
    return engine.session.backend.catalog.table(name)


def _col_missing(t, c):
    return errors.UndefinedColumn(f'column "{c}" of relation "{t.name}" does not exist')


def _rebuild(backend):
    return lambda idef: indexam.rebuild_index(backend, idef)


def _add_column(engine, name, act, msgs):
    backend = engine.session.backend
    t = _table(engine, name)
    spec = act.column
    if t.column_index(spec.name) >= 0:
        if act.missing_ok:
            msgs.append(_notice(f'column "{spec.name}" of relation "{name}" already exists, '
                                f"skipping"))
            return name
        raise errors.DuplicateColumn(
            f'column "{spec.name}" of relation "{name}" already exists')
    if getattr(spec, "identity", ""):
        raise errors.NotSupportedError("ALTER TABLE ... ADD COLUMN of a serial or identity "
                                       "column is not supported")
    typ = parse_type(spec.type_name)
    if spec.default is not None:
        check_default(engine, spec, typ)
    col = ColumnDef(spec.name, str(typ), spec.not_null or spec.primary, spec.default)
    n = len(t.columns)
    source = list(range(n)) + [None]
    catalter.rewrite_table(
        backend.catalog, name, list(t.columns) + [col], source,
        lambda old, new: _copy_rows(engine, old, new, source, {n: col}), _rebuild(backend))
    if spec.primary:
        _add_constraint(engine, name, ast.AlterAction("add_constraint", None,
                                                      columns=[spec.name], primary=True), msgs)
    if spec.unique:
        _add_constraint(engine, name, ast.AlterAction("add_constraint", None,
                                                      columns=[spec.name]), msgs)
    return name


def _drop_column(engine, name, act, msgs):
    from minidb.sql.fkeys import refuse_if_involved
    refuse_if_involved(engine.session.backend.catalog, name, "DROP COLUMN", act.name)
    backend = engine.session.backend
    t = _table(engine, name)
    i = t.column_index(act.name)
    if i < 0:
        if act.missing_ok:
            msgs.append(_notice(f'column "{act.name}" of relation "{name}" does not exist, '
                                f"skipping"))
            return name
        raise _col_missing(t, act.name)
    if len(t.columns) == 1:
        raise errors.NotSupportedError(
            f'cannot drop column "{act.name}": tables without columns are not supported')
    source = [j for j in range(len(t.columns)) if j != i]
    cols = [t.columns[j] for j in source]
    catalter.rewrite_table(backend.catalog, name, cols, source,
                           lambda old, new: _copy_rows(engine, old, new, source, {}),
                           _rebuild(backend))
    return name


def _rename_column(engine, name, act, msgs):
    from minidb.sql.fkeys import refuse_if_involved
    refuse_if_involved(engine.session.backend.catalog, name, "RENAME", act.name)
    t = _table(engine, name)
    if t.column_index(act.name) < 0:
        raise errors.UndefinedColumn(f'column "{act.name}" does not exist')
    catalter.rename_column(engine.session.backend.catalog, name, act.name, act.new_name)
    return name


def _rename(engine, name, act, msgs):
    from minidb.sql.fkeys import refuse_if_involved
    refuse_if_involved(engine.session.backend.catalog, name, "RENAME")
    catalter.rename_relation(engine.session.backend.catalog, name, act.new_name)
    return act.new_name


def _add_constraint(engine, name, act, msgs):
    if act.fkey is not None:
        from minidb.sql.fkeys import add_fkey
        add_fkey(engine, name, act.fkey)
        return name
    backend = engine.session.backend
    catalog = backend.catalog
    t = _table(engine, name)
    cols = list(act.columns)
    for c in cols:
        if t.column_index(c) < 0:
            raise errors.UndefinedColumn(f'column "{c}" named in key does not exist')
    if len(set(cols)) != len(cols):
        raise errors.DuplicateColumn(f'column "{cols[0]}" appears twice in '
                                     f'{"primary key" if act.primary else "unique"} constraint')
    if act.primary:
        if any(catalog.indexes[i].primary for i in t.indexes if i in catalog.indexes):
            raise errors.ProgrammingError(
                f'multiple primary keys for table "{name}" are not allowed', sqlstate="42P16")
        for c in cols:
            if not t.columns[t.column_index(c)].not_null:
                _set_not_null(engine, name, ast.AlterAction("set_not_null", c), msgs)
    iname = act.name
    if iname is None:
        iname = free_name(catalog, f"{name}_pkey" if act.primary
                           else f"{name}_{'_'.join(cols)}_key")
    elif iname in catalog.tables or iname in catalog.indexes:
        raise errors.DuplicateTable(f'relation "{iname}" already exists')
    indexam.create_index(backend, name, iname, cols, unique=True, primary=act.primary)
    return name


def _drop_constraint(engine, name, act, msgs):
    from minidb.sql.fkeys import drop_fkey_named
    if drop_fkey_named(engine, name, act.name):
        return name
    backend = engine.session.backend
    catalog = backend.catalog
    if drop_check(engine, name, act.name):
        return name
    idef = catalog.indexes.get(act.name)
    if idef is None or idef.table != name or not idef.unique:
        if act.missing_ok:
            msgs.append(_notice(f'constraint "{act.name}" of relation "{name}" does not '
                                f"exist, skipping"))
            return name
        raise errors.UndefinedObject(
            f'constraint "{act.name}" of relation "{name}" does not exist')
    from minidb.sql.fkeys import drop_index_dependents
    drop_index_dependents(engine, idef, act.cascade, msgs, _notice,
                          f"constraint {act.name} on table {name}")
    lock_oid(engine, idef.oid, AccessExclusiveLock)
    indexam.drop_index(backend, act.name)
    return name


def _set_not_null(engine, name, act, msgs):
    backend = engine.session.backend
    t = _table(engine, name)
    i = t.column_index(act.name)
    if i < 0:
        raise _col_missing(t, act.name)
    if t.columns[i].not_null:
        return name
    if _has_null(backend, backend.catalog.heap_rel(name), i):
        raise errors.NotNullViolation(
            f'column "{act.name}" of relation "{name}" contains null values')
    catalter.set_not_null(backend.catalog, name, act.name, True)
    return name


def _drop_not_null(engine, name, act, msgs):
    backend = engine.session.backend
    catalog = backend.catalog
    t = _table(engine, name)
    if t.column_index(act.name) < 0:
        raise _col_missing(t, act.name)
    for iname in t.indexes:
        idef = catalog.indexes.get(iname)
        if idef is not None and idef.primary and act.name in idef.columns:
            raise errors.ProgrammingError(f'column "{act.name}" is in a primary key',
                                          sqlstate="42P16")
    catalter.set_not_null(catalog, name, act.name, False)
    return name


_ACTIONS = {"add_column": _add_column, "drop_column": _drop_column,
            "rename_column": _rename_column, "rename": _rename,
            "add_constraint": _add_constraint, "drop_constraint": _drop_constraint,
            "add_check": add_check,
            "set_not_null": _set_not_null, "drop_not_null": _drop_not_null}


# -- reading and copying the rows -------------------------------------------------------------------
def _scan(backend, rel, cols):
    """Batches of the rows this transaction sees now (a fresh snapshot with its own
    changes, as PostgreSQL's rewrite takes the latest snapshot under its lock)."""
    from minidb.heap.heapam import HeapScan
    from minidb.heap.mvcc import MVCCFilter
    xact = backend.xact
    snap = xact.procarray.get_snapshot(backend.slot, xact.xid, xact.cid)
    flt = MVCCFilter(backend.bufmgr, snap, backend.instance.clog)
    return HeapScan(backend, rel, cols, tuple_filter=flt, syncscan=False)


def _has_null(backend, rel, col: int) -> bool:
    for batch in _scan(backend, rel, [col]):
        _vals, mask = batch.columns[0]
        if mask is not None and np.asarray(mask).any():
            return True
    return False


def _copy_rows(engine, old_rel, new_rel, source: list, added: dict) -> None:
    """Fill ``new_rel`` (a new, empty file) with the rows of ``old_rel``: new column j is old
    column ``source[j]``, or (None) the default of ``added[j]`` (a ``ColumnDef``)."""
    from minidb.exec.chunk import Chunk, column_to_list
    from minidb.exec.compile import K
    from minidb.exec.datatypes import from_repr
    from minidb.exec.nodes import ExecContext
    from minidb.heap.heapam import heap_bulk_insert
    from minidb.sql.binder import Binder
    from minidb.sql.parser.translate import parse_expression_text
    session = engine.session
    backend = session.backend
    xact = backend.xact
    olds = sorted({s for s in source if s is not None})
    old_types = [parse_type(c.type) for c in old_rel.layout.columns]
    new_cols = new_rel.layout.columns
    fills = {}
    for j, cdef in added.items():
        typ = parse_type(cdef.type)
        if cdef.default is None:
            fills[j] = ("const", None, typ)
            continue
        b = Binder(backend.catalog)
        e = b.assignable(b.expr(parse_expression_text(cdef.default), [], ctx=typ), typ,
                         cdef.name)
        c = ExecContext(session, None).compile(e, {})
        fills[j] = (("const", from_repr(c.value, c.type), typ) if isinstance(c, K)
                    else ("expr", c, typ))
    xid = xact.xid_for_write()
    for batch in _scan(backend, old_rel, olds):
        n = len(batch)
        if not n:
            continue
        got = {o: column_to_list(v, m, old_types[o]) for o, (v, m) in zip(olds, batch.columns)}
        data = {}
        for j, src in enumerate(source):
            if src is not None:
                data[new_cols[j].name] = got[src]
                continue
            kind, val, typ = fills[j]
            if kind == "const":
                vals = [val] * n
            else:
                v, m = val.fn(Chunk([], n), None)
                if np.ndim(v) == 0:
                    v = np.full(n, v)
                vals = column_to_list(v, m, typ)
            if new_cols[j].not_null and any(x is None for x in vals):
                raise errors.NotNullViolation(
                    f'column "{new_cols[j].name}" of relation "{new_rel.name}" contains '
                    f"null values")
            data[new_cols[j].name] = vals
        heap_bulk_insert(backend, new_rel, data, n, xmin=xid, cmin=xact.cid)


# -- REINDEX --------------------------------------------------------------------------------------------
def reindex(engine, st: ast.ReindexStmt):
    return engine._statement(lambda snap: (_reindex_body(engine, st), True))


def _reindex_body(engine, st: ast.ReindexStmt):
    backend = engine.session.backend
    catalog = backend.catalog
    if st.kind == "index":
        idef = catalog.indexes.get(st.name)
        if idef is None:
            if st.name in catalog.system_tables or st.name in catalog.tables:
                raise errors.ProgrammingError(f'"{st.name}" is not an index', sqlstate="42809")
            raise errors.UndefinedTable(f'relation "{st.name}" does not exist')
        lock_table(engine, idef.table, ShareLock)
        names = [st.name]
    else:
        if st.name in catalog.system_tables:
            raise errors.InsufficientPrivilege(
                f'permission denied: "{st.name}" is a system catalog (cannot reindex it)')
        t = lock_table(engine, st.name, ShareLock)
        names = list(t.indexes)
    for iname in names:
        idef = catalog.indexes.get(iname)
        if idef is None:
            raise errors.UndefinedTable(f'relation "{iname}" does not exist')
        lock_oid(engine, idef.oid, AccessExclusiveLock)
        catalter.reindex(catalog, iname, _rebuild(backend))
    return _result("REINDEX")
