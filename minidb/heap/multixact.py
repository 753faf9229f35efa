"""Row locks of two strengths: FOR UPDATE and FOR KEY SHARE (PostgreSQL 9.3's heap_lock_tuple
modes, the two foreign keys and SELECT ... FOR UPDATE need).

``heap_lock_tuple_mode(backend, rel, tid, snapshot, mode)`` locks the version at ``tid``:

* ``LOCK_UPDATE``: ``heap_lock_tuple`` - xmax = my xid, HEAP_XMAX_LOCK_ONLY; one holder.
* ``LOCK_KEY_SHARE``: any number of transactions at once.  Under the page's exclusive lock,
  after ``satisfies_update`` found no running deleter, updater or FOR UPDATE locker in
  xmax (it waits for one), the transaction is added to the version's entry in the shared
  multi-locker table (``minidb.txn.multixact``) and the version gets HEAP_XMAX_KEYSHR_LOCK
  (a hint-style write: the buffer is dirtied, no WAL).  xmax is left as it is.

The conflicts, as PostgreSQL's table for these modes:

================  ==========  =================  ==========================================
held \\ wanted     KEY SHARE   non-key UPDATE     DELETE, key UPDATE, FOR UPDATE
================  ==========  =================  ==========================================
KEY SHARE         .           .                  waits (``modify._acquire`` asks the table)
FOR UPDATE        waits       waits              waits
================  ==========  =================  ==========================================

A non-key update of a key-share-locked version takes the lockers along to its new version.
Departure: a KEY SHARE locker that meets a running non-key updater in xmax waits for it
(PostgreSQL lets it lock the version at once, in a MultiXact with the updater).
"""

from __future__ import annotations

from minidb.heap.heapam import HeapRel
from minidb.heap.modify import (_KEY_SHARE, _OFF_INFOMASK, _acquire, _get16, _newer, _put16,
                                heap_lock_tuple)
from minidb.storage.htup import HEAP_XMAX_KEYSHR_LOCK
from minidb.txn import multixact
from minidb.txn.visibility import TM_OK

__all__ = ["LOCK_KEY_SHARE", "LOCK_UPDATE", "heap_lock_tuple_mode", "key_share_lockers"]

LOCK_KEY_SHARE, LOCK_UPDATE = "key share", "update"


def heap_lock_tuple_mode(backend, rel: HeapRel, tid, snapshot, mode: str):
    """Lock the version at ``tid`` in ``mode``: (TM result, newer TID when TM_UPDATED)."""
    if mode != LOCK_KEY_SHARE:
        return heap_lock_tuple(backend, rel, tid, snapshot)
    tid = (int(tid[0]), int(tid[1]))
    result, b, item, h = _acquire(backend, rel, tid, snapshot, _KEY_SHARE)
    if result != TM_OK:
        return result, _newer(result, h)
    bm = backend.bufmgr
    try:
        multixact.add_locker(backend, rel.relfilenode, tid, h["xmin"], backend.xact.xid)
        im = _get16(item, _OFF_INFOMASK)
        if not im & HEAP_XMAX_KEYSHR_LOCK:
            _put16(item, _OFF_INFOMASK, im | HEAP_XMAX_KEYSHR_LOCK)
            bm.mark_dirty_hint(b)
    finally:
        bm.unlock(b)
        bm.unpin(b)
    return TM_OK, None


def key_share_lockers(backend, rel: HeapRel, tid, xmin: int) -> list[int]:
    """The live FOR KEY SHARE lockers of a version (this backend's too)."""
    return multixact.lockers_of(backend, rel.relfilenode, (int(tid[0]), int(tid[1])), xmin)
