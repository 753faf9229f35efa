"""Referential integrity: the checks and actions of FOREIGN KEY constraints (PostgreSQL's
``ri_triggers.c``, run from the writer nodes instead of from triggers).

The writer nodes (``minidb.exec.modify``) collect what a statement did to a table that
takes part in a foreign key and call, once the statement's rows are written (PostgreSQL's
AFTER ROW triggers of a non-deferred constraint also fire at the end of the statement):

* ``after_insert(backend, tdef, rows, snap)`` / ``after_update`` on the referencing side:
  every new key (all columns non-NULL: MATCH SIMPLE) is looked up in the referenced table
  through its unique index, and the row found is locked FOR KEY SHARE
  (``minidb.heap.multixact``), so it cannot be deleted or have its key changed until this
  transaction ends - two inserters referencing one row both hold that lock.  No visible
  row: 23503 ``Key (a)=(1) is not present in table "p"``.  A row being deleted by a
  running transaction is waited for (the lock waits); if the deleter committed it is
  gone (23503), if it aborted the row is found.  Under READ COMMITTED a row updated
  meanwhile is followed to its newest version and re-checked (EvalPlanQual).
* ``after_delete(backend, tdef, old_rows, snap)`` / ``after_update`` on the referenced
  side: for each old key no longer present (NO ACTION checks that no row of the table has
  it again, RESTRICT does not), the referencing rows are found - through an index whose
  leading columns are the foreign key's, else by one sequential scan for all the
  statement's keys - and either refused (NO ACTION / RESTRICT: 23503 ``Key (id)=(1) is
  still referenced from table "c"``), deleted (ON DELETE CASCADE), given the new key (ON
  UPDATE CASCADE), or set to NULL / their defaults (SET NULL, SET DEFAULT), through the
  same update loop as UPDATE and DELETE (``heap.epq.modify_rows``: it waits for running
  modifiers, and re-checks under READ COMMITTED), recursively for tables that reference
  the referencing table.

Relation locks, as PostgreSQL's RI queries take them: RowShare on a referenced table a
check reads, RowExclusive on a referencing table an action writes (with their indexes).

Snapshots, as PostgreSQL's ``ri_PerformCheck``: the lookups use a fresh snapshot under
READ COMMITTED and the transaction's under REPEATABLE READ, with the command counter one
past the statement's so that rows of this very statement count (a multi-row INSERT of a
parent and its child).  Writes use the statement's command id.

Departures: no deferrable constraints (always checked at statement end), no MATCH FULL,
the referenced side of a REPEATABLE READ transaction reads a fresh snapshot (PostgreSQL
reads the transaction's and cross-checks against a fresh one, failing with 40001 where
minidb reports the rows it sees); the Python-level ``Session`` API (below SQL) writes
rows without these checks, as PostgreSQL's heap_insert would.
"""

from __future__ import annotations

import minidb.errors as errors
from minidb.catalog.defs import FK_CASCADE, FK_NO_ACTION, FK_RESTRICT, FK_SET_DEFAULT
from minidb.exec import indexam
from minidb.exec.chunk import column_to_list
from minidb.heap.epq import epq_recheck, modify_rows
from minidb.heap.modify import TM_INVISIBLE, TM_OK, TM_UPDATED, heap_fetch_raw
from minidb.heap.multixact import LOCK_KEY_SHARE, heap_lock_tuple_mode
from minidb.heap import mvcc
from minidb.txn.lockdefs import RowExclusiveLock, RowShareLock, relation_tag
from minidb.txn.xact import REPEATABLE_READ
from minidb.types import parse_type

__all__ = ["after_insert", "after_update", "after_delete", "involved", "referencing_key",
           "key_text", "MAX_CASCADE_DEPTH"]

MAX_CASCADE_DEPTH = 64


def involved(tdef) -> bool:
    """Does ``tdef`` take part in a foreign key (either side)?"""
    return bool(tdef.foreign_keys or tdef.referenced_by)


def _fmt(v) -> str:
    return "null" if v is None else str(v)


def key_text(cols, key) -> str:
    return f"({', '.join(cols)})=({', '.join(_fmt(v) for v in key)})"


def referencing_key(tdef, fk, row):
    """The foreign key's values in a row of the referencing table (None: a NULL in it)."""
    key = tuple(row[tdef.column_index(c)] for c in fk.columns)
    return None if any(v is None for v in key) else key


def _lookup_snapshot(backend, snap):
    """The snapshot RI lookups read with (see the module docstring)."""
    xact = backend.xact
    if xact.isolation == REPEATABLE_READ:   # the transaction's snapshot, one command on
        s = snap.with_cid(snap.curcid + 1)
        s.myxid = xact.xid        # rows this transaction wrote since the snapshot count
        return s
    return xact.procarray.get_snapshot(backend.slot, xact.xid, snap.curcid + 1)


def _lock_relation(backend, tdef, mode: int) -> None:
    """The relation lock PostgreSQL's RI queries take: RowShare on a referenced table they
    read FOR KEY SHARE, RowExclusive on a referencing table an action writes (with its
    indexes, as ``minidb.sql.locking`` locks a statement's tables)."""
    lm = backend.lockmgr
    lm.acquire(relation_tag(tdef.oid), mode)
    for iname in tdef.indexes:
        idef = backend.catalog.indexes.get(iname)
        if idef is not None:
            lm.acquire(relation_tag(idef.oid), mode)


def _unique_index(catalog, table: str, cols):
    """The unique index of ``table`` on exactly ``cols`` (any order), else None."""
    t = catalog.tables.get(table)
    if t is None:
        return None
    for iname in t.indexes:
        idef = catalog.indexes.get(iname)
        if idef is not None and idef.unique and sorted(idef.columns) == sorted(cols):
            return idef
    return None


def _leading_index(catalog, tdef, cols):
    """An index of ``tdef`` whose leading columns are ``cols`` (any order), else None."""
    for iname in tdef.indexes:
        idef = catalog.indexes.get(iname)
        if idef is not None and sorted(idef.columns[:len(cols)]) == sorted(cols):
            return idef
    return None


# ---------------------------------------------------------------------------------------------
# referencing side: the key must be present, and its row gets a FOR KEY SHARE lock
def _check_present(backend, fk, key, snap) -> bool:
    catalog = backend.catalog
    idef = _unique_index(catalog, fk.ref_table, fk.ref_columns)
    if idef is None:
        raise errors.InternalError(
            f'foreign key "{fk.name}": no unique index on "{fk.ref_table}" for its key')
    ref = catalog.table(fk.ref_table)
    _lock_relation(backend, ref, RowShareLock)
    rel = catalog.heap_rel(fk.ref_table)
    pos = {c: i for i, c in enumerate(fk.ref_columns)}
    eq = [key[pos[c]] for c in idef.columns]
    look = _lookup_snapshot(backend, snap)
    ref_pos = [ref.column_index(c) for c in fk.ref_columns]

    def where(row):
        return tuple(row[p] for p in ref_pos) == key

    rows, exact = indexam.scan_rows(backend, idef.name, eq, None, None, look, None)
    for tid, row in list(rows):
        if not exact and not where(row):
            continue
        for _ in range(1000):
            res, _newer = heap_lock_tuple_mode(backend, rel, tid, snap, LOCK_KEY_SHARE)
            if res in (TM_OK, TM_INVISIBLE):  # locked, or inserted by this very statement
                return True
            if res == TM_UPDATED:
                got = epq_recheck(backend, rel, tid, where, snap)
                if got is None:
                    break
                tid = got[0]
                continue
            break  # TM_DELETED, TM_SELF_MODIFIED (this statement deleted or updated it)
    return False


def _check_keys(backend, tdef, fk, keys, snap) -> None:
    for key in keys:
        if not _check_present(backend, fk, key, snap):
            raise errors.ForeignKeyViolation(
                f'insert or update on table "{tdef.name}" violates foreign key constraint '
                f'"{fk.name}"\nDETAIL:  Key {key_text(fk.columns, key)} is not present in '
                f'table "{fk.ref_table}".')


def after_insert(backend, tdef, rows, snap) -> None:
    """The referencing side's check of the rows an INSERT wrote (see the docstring)."""
    for fk in tdef.foreign_keys:
        keys = dict.fromkeys(k for k in (referencing_key(tdef, fk, r) for r in rows)
                             if k is not None)
        _check_keys(backend, tdef, fk, keys, snap)


# ---------------------------------------------------------------------------------------------
# referenced side
def _ref_key(tdef, fk, row):
    key = tuple(row[tdef.column_index(c)] for c in fk.ref_columns)
    return None if any(v is None for v in key) else key


def _still_present(backend, ptdef, fk, key, snap) -> bool:
    """NO ACTION: does some row of the referenced table have ``key`` again (now)?"""
    idef = _unique_index(backend.catalog, ptdef.name, fk.ref_columns)
    pos = {c: i for i, c in enumerate(fk.ref_columns)}
    eq = [key[pos[c]] for c in idef.columns]
    rows, exact = indexam.scan_rows(backend, idef.name, eq, None, None,
                                    _lookup_snapshot(backend, snap), None)
    ref_pos = [ptdef.column_index(c) for c in fk.ref_columns]
    return any(exact or tuple(r[p] for p in ref_pos) == key for _, r in rows)


def _referencing_rows(backend, ctdef, fk, keys: set, snap) -> list:
    """(tid, row) of the rows of the referencing table whose key is in ``keys``."""
    catalog = backend.catalog
    rel = catalog.heap_rel(ctdef.name)
    look = _lookup_snapshot(backend, snap)
    cpos = [ctdef.column_index(c) for c in fk.columns]
    out = []
    idef = _leading_index(catalog, ctdef, fk.columns)
    if idef is not None:
        order = [fk.columns.index(c) for c in idef.columns[:len(fk.columns)]]
        for key in keys:
            rows, _exact = indexam.scan_rows(backend, idef.name, [key[i] for i in order],
                                             None, None, look, None)
            out.extend((tid, r) for tid, r in rows if tuple(r[p] for p in cpos) == key)
        return out
    types = [parse_type(ctdef.columns[p].type) for p in cpos]
    scan = mvcc.seq_scan(backend, rel, cpos, look)
    try:
        for batch in scan:
            cols = [column_to_list(v, m, t) for (v, m), t in zip(batch.columns, types)]
            hits = [i for i, k in enumerate(zip(*cols)) if k in keys]
            if hits:
                blocks, offsets = batch.blocks, batch.offsets
                for i in hits:
                    tid = (int(blocks[i]), int(offsets[i]))
                    got = heap_fetch_raw(backend, rel, tid)
                    if got is not None:
                        out.append((tid, tuple(got[1])))
    finally:
        scan.close()
    return out


def _on_parent_change(backend, ptdef, changed: dict, snap, deleting: bool, depth: int):
    """``changed``: old key -> new key (None when deleted) per foreign key referencing
    ``ptdef``; apply each constraint's action."""
    if depth > MAX_CASCADE_DEPTH:
        raise errors.ProgramLimitExceeded(
            f"foreign key actions nested more than {MAX_CASCADE_DEPTH} levels deep")
    catalog = backend.catalog
    for fk in ptdef.referenced_by:
        moves = changed.get(fk.oid)
        if not moves:
            continue
        action = fk.on_delete if deleting else fk.on_update
        keys = {k for k in moves
                if not (action == FK_NO_ACTION and _still_present(backend, ptdef, fk, k, snap))}
        if not keys:
            continue
        ctdef = catalog.table(fk.table)
        _lock_relation(backend, ctdef, RowShareLock if action in (FK_NO_ACTION, FK_RESTRICT)
                       else RowExclusiveLock)
        found = _referencing_rows(backend, ctdef, fk, keys, snap)
        if not found:
            continue
        if action in (FK_NO_ACTION, FK_RESTRICT):
            key = tuple(found[0][1][ctdef.column_index(c)] for c in fk.columns)
            raise errors.ForeignKeyViolation(
                f'update or delete on table "{ptdef.name}" violates foreign key constraint '
                f'"{fk.name}" on table "{ctdef.name}"\nDETAIL:  Key '
                f'{key_text(fk.ref_columns, key)} is still referenced from table '
                f'"{ctdef.name}".')
        _act(backend, ctdef, fk, action, moves, found, snap, deleting, depth)


def _act(backend, ctdef, fk, action, moves, found, snap, deleting, depth):
    """Delete or update the referencing rows ``found`` (CASCADE, SET NULL, SET DEFAULT)."""
    catalog = backend.catalog
    rel = catalog.heap_rel(ctdef.name)
    cpos = [ctdef.column_index(c) for c in fk.columns]
    keys = set(moves)

    def where(row):
        return tuple(row[p] for p in cpos) in keys

    done = []
    if action == FK_CASCADE and deleting:
        modify_rows(backend, rel, snap, found, where, "delete", None,
                    on_done=lambda tid, row, *_: done.append(row))
        if ctdef.referenced_by:
            after_delete(backend, ctdef, done, snap, depth + 1)
        return
    if action == FK_SET_DEFAULT:
        defaults = _defaults(backend, ctdef, cpos)

    def set_fn(row):
        new = list(row)
        nk = moves.get(tuple(row[p] for p in cpos)) if action == FK_CASCADE else None
        if nk is not None:
            for p, v in zip(cpos, nk):
                new[p] = v
        else:
            for p in cpos:
                new[p] = defaults[p] if action == FK_SET_DEFAULT else None
        for p in cpos:
            if new[p] is None and ctdef.columns[p].not_null:
                raise errors.NotNullViolation(
                    f'null value in column "{ctdef.columns[p].name}" of relation '
                    f'"{ctdef.name}" violates not-null constraint')
        return new

    indexes = list(ctdef.indexes)

    def on_done(tid, row, new_tid, hot, new_row):
        if new_tid is not None and not hot:
            indexam.insert_entries(backend, indexes, new_row, new_tid)
        done.append((row, new_row))

    modify_rows(backend, rel, snap, found, where, "update", set_fn, on_done=on_done)
    if action == FK_SET_DEFAULT:
        # the default must itself be a present key (PostgreSQL checks it as an update)
        after_update(backend, ctdef, done, snap, depth + 1, only=fk)
    elif ctdef.referenced_by:
        after_update(backend, ctdef, done, snap, depth + 1, referenced_only=True)


def _defaults(backend, ctdef, cpos) -> dict:
    """SET DEFAULT: the columns' default values (NULL when none; a default must be a
    constant: ``minidb.sql.fkeys`` refuses SET DEFAULT on a column with another kind)."""
    return {p: constant_default(ctdef.columns[p]) for p in cpos}


def constant_default(col):
    """The value of a column's constant DEFAULT (a number or a string literal), in the
    column's type; None for no default."""
    text = col.default
    if text is None or text.strip().upper() == "NULL":
        return None
    from minidb.exec.datatypes import UNKNOWN, cast_value
    t = text.strip()
    if len(t) >= 2 and t[0] == "'" and t[-1] == "'":
        v, src = t[1:-1].replace("''", "'"), UNKNOWN
        return cast_value(v, src, parse_type(col.type))
    try:
        v = int(t)
    except ValueError:
        try:
            v = float(t)
        except ValueError:
            raise errors.NotSupportedError(
                f'ON ... SET DEFAULT with the non-constant default {text} of column '
                f'"{col.name}" is not supported') from None
    return v


def after_delete(backend, tdef, old_rows, snap, depth: int = 0) -> None:
    """The referenced side's actions for the rows a DELETE removed."""
    if not tdef.referenced_by or not old_rows:
        return
    changed = {}
    for fk in tdef.referenced_by:
        m = {}
        for r in old_rows:
            k = _ref_key(tdef, fk, r)
            if k is not None:
                m[k] = None
        changed[fk.oid] = m
    _on_parent_change(backend, tdef, changed, snap, True, depth)


def after_update(backend, tdef, pairs, snap, depth: int = 0, *, only=None,
                 referenced_only: bool = False) -> None:
    """Both sides' work for the (old row, new row) pairs an UPDATE wrote: new referencing
    keys are checked, changed referenced keys get their constraint's ON UPDATE action."""
    if not pairs:
        return
    if not referenced_only:
        for fk in tdef.foreign_keys:
            if only is not None and fk.oid != only.oid:
                continue
            keys = {}
            for old, new in pairs:
                nk = referencing_key(tdef, fk, new)
                if nk is not None and (only is not None
                                       or nk != referencing_key(tdef, fk, old)):
                    keys[nk] = None
            _check_keys(backend, tdef, fk, keys, snap)
    if only is not None or not tdef.referenced_by:
        return
    changed = {}
    for fk in tdef.referenced_by:
        m = {}
        for old, new in pairs:
            ok, nk = _ref_key(tdef, fk, old), _ref_key(tdef, fk, new)
            if ok is not None and ok != nk:
                m[ok] = nk
        changed[fk.oid] = m
    _on_parent_change(backend, tdef, changed, snap, False, depth)


def old_row(backend, rel, tid):
    """The row of the version at ``tid`` (a DELETE's victim, still on its page)."""
    got = heap_fetch_raw(backend, rel, tid)
    if got is None:  # pragma: no cover - pruning keeps a version deleted by a running xact
        raise errors.InternalError(f'deleted row {tid} of "{rel.name}" is gone')
    return tuple(got[1])


