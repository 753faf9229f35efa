"""A session: one backend and its transaction, with one method per kind of statement.

``Session`` is the thin layer that runs transactions against the heap with Python rows and
predicates (the tests use it directly); the SQL engine (``minidb.sql``) holds one per
connection and brackets each of its statements with ``Session.statement``.  Each method is
exactly one *statement*::

    snap = xact.start_statement()       # READ COMMITTED: a fresh snapshot; RR: the xact's
    ... scan / write under snap ...
    xact.command_done(wrote)            # later statements see this one's writes
                                        # (autocommit: the commit ends the statement too)

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
with savepoints         (``xact.savepoint(name)`` / ``release`` / ``rollback_to``,
                        ``minidb.txn.subxact``) the error aborts the innermost
                        savepoint level only, and ``xact.rollback_to(name)`` ends
                        the FAILED state
``begin("serializable")``  NotSupportedError (no SSI; REPEATABLE READ is snapshot
                        isolation)
======================  ===========================================================

Rows are Python tuples in the table's column order (``layout.decode``'s values: int,
float, bool, str, datetime, None).  ``where`` is a Python predicate on the full row tuple,
``set_fn(row)`` returns the full new row.

Writers (``update``, ``delete``, ``select_for_update``) scan the rows visible to the
statement's snapshot that match ``where``, then hand them to ``minidb.heap.epq.modify_rows``
- the loop the SQL executor's UPDATE / DELETE / FOR UPDATE nodes use too - which calls
``heap_update`` / ``heap_delete`` / ``heap_lock_tuple`` on each and, under READ COMMITTED,
re-checks ``where`` on the newest version of a row that a committed transaction changed
meanwhile (EvalPlanQual; ``set_fn`` is then called again, on that version); under
REPEATABLE READ such a row is a serialization failure (40001).  ``minidb.heap.epq`` has
the rules, and why the loop lives in the heap package.

Scans use ``minidb.heap.mvcc.seq_scan`` with the opportunistic pruning hook
``minidb.heap.prune.PagePruner``; ``get`` uses ``heap_fetch_visible`` (the HOT chain walk,
or the exact heap-only tuple when given one).

Statistics: inserts are counted here ('ins'); 'upd', 'hot_upd', 'del' by the heap
writers; 'seq_scan' / 'seq_tup_read' by the scan.
"""

from __future__ import annotations

import numpy as np

from minidb.heap import mvcc, pgstat
from minidb.heap.epq import modify_rows
from minidb.heap.heapam import heap_insert
from minidb.heap.prune import PagePruner
from minidb.types import int_to_timestamp


_NO_PARAMS = object()


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
        return self._backend.catalog.heap_rel(table)

    def table_stats(self, table: str) -> dict[str, int]:
        """The table's shared ``pg_stat_user_tables`` counters (published at xact end)."""
        oid = self._backend.catalog.table(table).oid
        return pgstat.read(self.instance.seg, self.instance.locks.stats, oid)

    # -- transaction control ---------------------------------------------------------------------
    def check_interrupts(self) -> None:
        """57P01 / 57P02 (``Instance.check_interrupts``), this backend's staleness after a
        crash restart included."""
        self.instance.check_interrupts(self._backend)

    def begin(self, isolation: str | None = None, *, checked: bool = False) -> None:
        """BEGIN.  ``checked``: the caller has just checked for interrupts for this very
        statement (the SQL layer's ``Engine._run`` does, before any statement): not again."""
        if not checked:
            self.check_interrupts()
        self.xact.begin(isolation)

    def commit(self) -> bool:
        """COMMIT; False if the block had failed (it is rolled back instead).  Interrupts
        are checked inside the call (``enter_call``): a crash noticed between the SQL
        layer's check and this point must still stop the commit."""
        inst = self.instance
        inst.enter_call()
        try:
            inst.check_interrupts(self._backend)
            ok = self.xact.commit()
        finally:
            inst.leave_call()
        self.run_after_commit()
        return ok

    @property
    def after_commit_hooks(self) -> list:
        """Callables run after each commit of this session, outside any transaction (the
        SQL layer's ON COMMIT actions of temporary tables: ``minidb.sql.temp``)."""
        hooks = self.__dict__.get("_after_commit")
        if hooks is None:
            hooks = self._after_commit = []
        return hooks

    def run_after_commit(self) -> None:
        hooks = self.__dict__.get("_after_commit")
        if hooks and self.xact.state == "idle":
            for fn in list(hooks):
                fn()

    def rollback(self) -> None:
        inst = self.instance
        inst.enter_call()
        try:
            if self._backend.generation != inst.generation:  # stale after a crash restart
                inst.check_interrupts(self._backend)
            self.xact.rollback()
        finally:
            inst.leave_call()

    def close(self) -> None:
        self._backend.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def statement(self, body, params=_NO_PARAMS):
        """Run ``body(snap) -> (result, wrote)`` as one statement (see the docstring); the
        SQL engine brackets its statements with this too.  With ``params``, the body is a
        point closure (``minidb.exec.point``): ``body(self, snap, params)``, without a
        lambda around it."""
        inst = self.instance
        backend = self._backend
        inst.enter_call()  # a crash restart waits until the statement is over
        try:
            inst.check_interrupts(backend)
            xact = backend.xact
            snap = xact.start_statement()
            implicit = not xact.explicit
            try:
                if params is _NO_PARAMS:
                    result, wrote = body(snap)
                else:
                    result, wrote = body(self, snap, params)
                if not implicit:    # (the commit below ends the statement too)
                    xact.command_done(wrote)
            except BaseException:
                xact.fail()
                raise
            if implicit:
                xact.commit()
        finally:
            inst.leave_call()
        if implicit and self.__dict__.get("_after_commit"):
            self.run_after_commit()
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
        modify_rows(self._backend, rel, snap, self._scan(rel, snap, where), where, kind,
                    set_fn, on_done=lambda tid, row, new_tid, hot, new_row:
                    done.append((tid, row)))
        return done

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
def _visible_rows(backend, rel, snap):
    """Yield (tids, rows) per batch of the rows visible to ``snap``."""
    cols = list(range(rel.layout.natts))
    for batch in mvcc.seq_scan(backend, rel, cols, snap,
                               prepare_pages=PagePruner(backend, rel)):
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
