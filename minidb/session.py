"""A session: one backend and its transaction, with one method per kind of statement.

``Session`` is the thin layer tests (and, until the SQL executor exists, everything else)
use to run transactions against the heap.  Each method is exactly one *statement*::

    snap = xact.start_statement()       # READ COMMITTED: a fresh snapshot; RR: the xact's
    ... scan / write under snap ...
    xact.command_done(wrote)            # later statements see this one's writes

Transaction control follows PostgreSQL's client-visible rules:

======================  ===========================================================
situation               what happens
======================  ===========================================================
outside ``begin()``     autocommit: the statement is its own transaction, committed
                        when it ends, rolled back if it raises
inside a block          the statement's error moves the block to FAILED
                        (``xact.fail()``) and re-raises; every later statement
                        raises InFailedSqlTransaction (25P02) until ``rollback()``
                        (or ``commit()``, which then rolls back and returns False)
``begin("serializable")``  NotSupportedError (no SSI; REPEATABLE READ is snapshot
                        isolation)
======================  ===========================================================

Rows are Python tuples in the table's column order (``layout.decode``'s values: int,
float, bool, str, datetime, None).  ``where`` is a Python predicate on the full row tuple,
``set_fn(row)`` returns the full new row.

Writers (``update``, ``delete``, ``select_for_update``) scan the rows visible to the
statement's snapshot that match ``where``, then call ``heap_update`` / ``heap_delete`` /
``heap_lock_tuple`` on each (``minidb.heap.modify``: those wait for a running modifier).
When the row was changed meanwhile by a transaction that committed:

* REPEATABLE READ: the heap call raises SerializationFailure (40001);
* READ COMMITTED, updated (TM_UPDATED): EvalPlanQual - follow the update chain to the
  newest version, take a fresh snapshot with the statement's command id, and if that
  version is visible to it and still matches ``where``, apply the change to it
  (``set_fn`` is called again, on the newest row: two concurrent ``balance + 1`` both
  count).  Deleted (TM_DELETED), or no longer matching: the row is skipped.  If the
  version the walk stopped at was updated by a transaction that committed between the
  walk and the fresh snapshot, the walk goes on from it (skipping it would lose this
  statement's change); if the heap call on the re-checked version meets yet another
  committed update, the whole re-check repeats.  PostgreSQL locks the newest version
  before re-evaluating the quals; here the heap call after the re-check plays that part
  (it waits for a running modifier and reports any newer committed version).

Scans use ``minidb.heap.mvcc.seq_scan`` with the opportunistic pruning hook of
``minidb.heap.prune`` (when that module exists); ``get`` uses ``heap_fetch_visible`` (the
HOT chain walk, or the exact heap-only tuple when given one).

Statistics: inserts are counted here ('ins'); 'upd', 'hot_upd', 'del' by the heap
writers; 'seq_scan' / 'seq_tup_read' by the scan.
"""

from __future__ import annotations

import numpy as np

from minidb.errors import InternalError
from minidb.heap import mvcc, pgstat
from minidb.heap.heapam import heap_insert
from minidb.heap.modify import (TM_DELETED, TM_INVISIBLE, TM_OK, TM_SELF_MODIFIED,
                                TM_UPDATED, follow_update_chain, heap_delete, heap_fetch_raw,
                                heap_lock_tuple, heap_update)
from minidb.txn import visibility as vis
from minidb.types import int_to_timestamp

_MAX_RECHECKS = 10_000  # a row re-checked this often means a bug, not contention


class Session:
    """One backend and its transaction (see the module docstring)."""

    def __init__(self, instance, **settings):
        self.instance = instance
        self._backend = instance.connect(**settings)

    # -- plumbing ------------------------------------------------------------------------------
    @property
    def backend(self):
        return self._backend

    @property
    def xact(self):
        return self._backend.xact

    @property
    def settings(self):
        return self._backend.settings

    def rel(self, table: str):
        return self.instance.catalog.heap_rel(table)

    def table_stats(self, table: str) -> dict[str, int]:
        """The table's shared ``pg_stat_user_tables`` counters (published at xact end)."""
        oid = self.instance.catalog.table(table).oid
        return pgstat.read(self.instance.seg, self.instance.locks.stats, oid)

    # -- transaction control ---------------------------------------------------------------------
    def begin(self, isolation: str | None = None) -> None:
        self.xact.begin(isolation)

    def commit(self) -> bool:
        """COMMIT; False if the block had failed (it is rolled back instead)."""
        return self.xact.commit()

    def rollback(self) -> None:
        self.xact.rollback()

    def close(self) -> None:
        self._backend.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def statement(self, body):
        """Run ``body(snap) -> (result, wrote)`` as one statement (see the docstring); the
        SQL engine brackets its statements with this too."""
        xact = self.xact
        snap = xact.start_statement()
        implicit = not xact.explicit
        try:
            result, wrote = body(snap)
            xact.command_done(wrote)
        except BaseException:
            xact.fail()
            raise
        if implicit:
            xact.commit()
        return result

    # -- statements ----------------------------------------------------------------------------
    def insert(self, table: str, row: tuple) -> tuple[int, int]:
        rel = self.rel(table)

        def body(snap):
            xid = self.xact.xid_for_write()
            tid = heap_insert(self._backend, rel, row, xmin=xid, cmin=snap.curcid)
            self._backend.pgstat.count(rel.oid, "ins")
            return tid, True
        return self.statement(body)

    def insert_many(self, table: str, rows) -> int:
        rel = self.rel(table)

        def body(snap):
            xid = self.xact.xid_for_write()
            n = 0
            for row in rows:
                heap_insert(self._backend, rel, row, xmin=xid, cmin=snap.curcid)
                n += 1
            self._backend.pgstat.count(rel.oid, "ins", n)
            return n, n > 0
        return self.statement(body)

    def select(self, table: str, where=None, columns=None) -> list[tuple]:
        rel = self.rel(table)

        def body(snap):
            rows = [row for _, row in self._scan(rel, snap, where)]
            if columns is not None:
                cols = list(columns)
                rows = [tuple(r[c] for c in cols) for r in rows]
            return rows, False
        return self.statement(body)

    def select_tids(self, table: str, where=None) -> list[tuple[tuple[int, int], tuple]]:
        rel = self.rel(table)
        return self.statement(lambda snap: (self._scan(rel, snap, where), False))

    def get(self, table: str, tid) -> tuple | None:
        """The version of the row at ``tid`` (a HOT chain root or any version) that this
        statement's snapshot sees, or None."""
        rel = self.rel(table)
        return self.statement(lambda snap: (self._hot_search(rel, tid, snap), False))

    def update(self, table: str, where, set_fn) -> int:
        rel = self.rel(table)

        def body(snap):
            n = len(self._write_rows(rel, snap, where, "update", set_fn))
            return n, n > 0
        return self.statement(body)

    def delete(self, table: str, where) -> int:
        rel = self.rel(table)

        def body(snap):
            n = len(self._write_rows(rel, snap, where, "delete", None))
            return n, n > 0
        return self.statement(body)

    def select_for_update(self, table: str, where=None) -> list[tuple]:
        rel = self.rel(table)

        def body(snap):
            done = self._write_rows(rel, snap, where, "lock", None)
            return [row for _, row in done], bool(done)
        return self.statement(body)

    # -- writers ---------------------------------------------------------------------------------
    def _write_rows(self, rel, snap, where, kind: str, set_fn) -> list:
        """Apply ``kind`` to every row visible to ``snap`` matching ``where``, with the
        READ COMMITTED re-check; returns the (tid, row) pairs acted on (for an update the
        old version's TID and the row the change was computed from)."""
        done = []
        self.modify_rows(rel, snap, self._scan(rel, snap, where), where, kind, set_fn,
                         on_done=lambda tid, row, new_tid, hot, new_row:
                         done.append((tid, row)))
        return done

    def modify_rows(self, rel, snap, candidates, where, kind: str, set_fn, on_done=None) -> int:
        """Apply ``kind`` ("update", "delete", "lock") to each candidate ``(tid, row)`` -
        rows visible to ``snap`` that matched ``where`` - with the READ COMMITTED re-check
        (``where(row)`` and ``set_fn(row)`` are called again on the newest version when the
        row changed meanwhile).  ``on_done(tid, row, new_tid, hot, new_row)`` is called for
        each row acted on (``new_tid``, ``hot``, ``new_row``: an update's new version, else
        None / False / None); the SQL executor maintains indexes there.  Returns the count.
        """
        backend = self._backend
        n = 0
        for tid, row in candidates:
            for _ in range(_MAX_RECHECKS):
                new_tid, hot, new_row = None, False, None
                if kind == "update":
                    new_row = set_fn(row)
                    res, newer, hot = heap_update(backend, rel, tid, new_row, snap)
                    if res == TM_OK:
                        new_tid = newer
                elif kind == "delete":
                    res, newer = heap_delete(backend, rel, tid, snap)
                else:
                    res, newer = heap_lock_tuple(backend, rel, tid, snap)
                if res == TM_OK:
                    n += 1
                    if on_done is not None:
                        on_done(tid, row, new_tid, hot, new_row)
                    break
                if res == TM_UPDATED:  # READ COMMITTED (REPEATABLE READ raised)
                    got = self._recheck(rel, tid, where, snap)
                    if got is None:
                        break
                    tid, row = got
                    continue
                if res in (TM_DELETED, TM_SELF_MODIFIED):
                    break
                if res == TM_INVISIBLE:
                    raise InternalError(
                        f'attempted to {kind} invisible tuple {tid} of "{rel.name}"')
                raise InternalError(f"unexpected result {res} from heap {kind}")
            else:  # pragma: no cover
                raise InternalError(f'row {tid} of "{rel.name}" re-checked too often')
        return n

    def _recheck(self, rel, tid, where, snap):
        """EvalPlanQual-lite: (newest TID, row) if the newest version of the row at ``tid``
        is visible to a fresh snapshot of this command and still matches ``where``."""
        backend = self._backend
        xact = self.xact
        last = None
        for _ in range(_MAX_RECHECKS):
            newest = follow_update_chain(backend, rel, tid)
            if newest is None:
                return None
            fresh = xact.procarray.get_snapshot(backend.slot, xact.xid, snap.curcid)
            got = heap_fetch_raw(backend, rel, newest)
            if got is None:
                return None
            h, row = got
            visible, _ = vis.satisfies_mvcc(h["xmin"], h["xmax"], h["cmin"], h["cmax"],
                                            h["infomask"], fresh, xact.procarray.clog)
            if visible:
                return (newest, row) if where is None or where(row) else None
            # The version's updater committed between the chain walk and the snapshot:
            # walk on from it (skipping the row here would lose the update).
            if newest == last:
                return None  # invisible for another reason: not the row's live version
            last = tid = newest
        raise InternalError(f'row {tid} of "{rel.name}" re-checked too often')  # pragma: no cover

    # -- reading -----------------------------------------------------------------------------------
    def _scan(self, rel, snap, where) -> list[tuple[tuple[int, int], tuple]]:
        """(tid, row) of every row visible to ``snap`` for which ``where(row)`` holds."""
        out = []
        for tids, rows in _visible_rows(self._backend, rel, snap):
            if where is None:
                out.extend(zip(tids, rows))
            else:
                out.extend((t, r) for t, r in zip(tids, rows) if where(r))
        return out

    def _hot_search(self, rel, tid, snap):
        return mvcc.heap_fetch_visible(self._backend, rel, tid, snap)


# ---------------------------------------------------------------------------------------------
# scans
def _prepare_pages_hook(backend, rel):
    """The opportunistic-pruning hook of ``minidb.heap.prune`` (None until it exists)."""
    try:
        from minidb.heap import prune
    except ImportError:
        return None
    fn = getattr(prune, "heap_page_prune_opt", None)
    if fn is None:
        return None
    return lambda bufs, first_block: fn(backend, rel, bufs, first_block)


def _visible_rows(backend, rel, snap):
    """Yield (tids, rows) per batch of the rows visible to ``snap``."""
    cols = list(range(rel.layout.natts))
    for batch in mvcc.seq_scan(backend, rel, cols, snap,
                               prepare_pages=_prepare_pages_hook(backend, rel)):
        tids = list(zip(batch.blocks.tolist(), batch.offsets.tolist()))
        yield tids, _batch_rows(rel, batch)


def _batch_rows(rel, batch) -> list[tuple]:
    """Python row tuples (as ``layout.decode`` gives them) of a scan batch."""
    per_col = []
    for c, (vals, mask) in enumerate(batch.columns):
        lst = vals.tolist()
        if rel.layout.columns[c].type.name == "timestamp":
            lst = [int_to_timestamp(x) for x in lst]
        if mask is not None:
            for k in np.flatnonzero(mask).tolist():
                lst[k] = None
        per_col.append(lst)
    if not per_col:
        return [()] * len(batch)
    return list(zip(*per_col))


__all__ = ["Session"]
