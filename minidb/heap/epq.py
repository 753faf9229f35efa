"""The row-modification loop of UPDATE / DELETE / SELECT FOR UPDATE, with the READ COMMITTED
re-check (PostgreSQL's ExecUpdate / ExecDelete / ExecLockRows and EvalPlanQual, simplified).

``modify_rows(backend, rel, snap, candidates, where, kind, set_fn, on_done)`` is handed the
rows a statement's scan found - ``(tid, row)`` pairs of versions visible to ``snap`` that
matched ``where`` - and calls ``heap_update`` / ``heap_delete`` / ``heap_lock_tuple``
(``minidb.heap.modify``: those wait for a running modifier) on each.  When the row was
changed meanwhile by a transaction that committed:

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

``where(row)`` and ``set_fn(row)`` are plain Python callables on the full row tuple;
``on_done(tid, row, new_tid, hot, new_row)`` is told of every row acted on (the SQL
executor maintains the indexes there).

Why here, in the heap package, and not in the executor where PostgreSQL has it: two
layers need this loop - ``minidb.session.Session`` (``update`` / ``delete`` /
``select_for_update`` with Python predicates) and the SQL executor's writer nodes
(``minidb.exec.modify``: ``UpdateNode``, ``DeleteNode``, ``LockRowsNode``, with compiled
expressions).  The layer order puts session below exec, so Session may not import the
executor; the lowest layer both can import, and the one whose calls the loop is made of,
is this one.  The executor builds its nodes on it; it knows nothing of SQL.
"""

from __future__ import annotations

from minidb.errors import InternalError
from minidb.heap.heapam import HeapRel
from minidb.heap.modify import (TM_DELETED, TM_INVISIBLE, TM_OK, TM_SELF_MODIFIED,
                                TM_UPDATED, TM_WOULDBLOCK, WAIT_BLOCK, follow_update_chain,
                                heap_delete, heap_fetch_raw, heap_update)
from minidb.heap.multixact import LOCK_UPDATE, heap_lock_tuple_mode
from minidb.txn import visibility as vis

__all__ = ["modify_rows", "epq_recheck", "MAX_RECHECKS"]

MAX_RECHECKS = 10_000  # a row re-checked this often means a bug, not contention


def modify_rows(backend, rel: HeapRel, snap, candidates, where, kind: str, set_fn,
                on_done=None, lock_mode: str = LOCK_UPDATE, wait_policy: str = WAIT_BLOCK) -> int:
    """Apply ``kind`` ("update", "delete", "lock") to each candidate ``(tid, row)`` -
    rows visible to ``snap`` that matched ``where`` - with the READ COMMITTED re-check
    (``where(row)`` and ``set_fn(row)`` are called again on the newest version when the
    row changed meanwhile).  ``on_done(tid, row, new_tid, hot, new_row)`` is called for
    each row acted on (``new_tid``, ``hot``, ``new_row``: an update's new version, else
    None / False / None).  Returns the count.  A "lock" takes ``lock_mode``
    (``minidb.heap.multixact``) with ``wait_policy``; a row SKIP LOCKED passes over is
    neither counted nor reported.
    """
    n = 0
    for tid, row in candidates:
        for _ in range(MAX_RECHECKS):
            new_tid, hot, new_row = None, False, None
            if kind == "update":
                new_row = set_fn(row)
                res, newer, hot = heap_update(backend, rel, tid, new_row, snap)
                if res == TM_OK:
                    new_tid = newer
            elif kind == "delete":
                res, newer = heap_delete(backend, rel, tid, snap)
            else:
                res, newer = heap_lock_tuple_mode(backend, rel, tid, snap, lock_mode,
                                                  wait_policy)
            if res == TM_OK:
                n += 1
                if on_done is not None:
                    on_done(tid, row, new_tid, hot, new_row)
                break
            if res == TM_UPDATED:  # READ COMMITTED (REPEATABLE READ raised)
                got = epq_recheck(backend, rel, tid, where, snap)
                if got is None:
                    break
                tid, row = got
                continue
            if res in (TM_DELETED, TM_SELF_MODIFIED, TM_WOULDBLOCK):
                break
            if res == TM_INVISIBLE:
                raise InternalError(
                    f'attempted to {kind} invisible tuple {tid} of "{rel.name}"')
            raise InternalError(f"unexpected result {res} from heap {kind}")
        else:  # pragma: no cover
            raise InternalError(f'row {tid} of "{rel.name}" re-checked too often')
    return n


def epq_recheck(backend, rel: HeapRel, tid, where, snap):
    """EvalPlanQual-lite: (newest TID, row) if the newest version of the row at ``tid``
    is visible to a fresh snapshot of this command and still matches ``where``."""
    xact = backend.xact
    last = None
    for _ in range(MAX_RECHECKS):
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
