"""Row locks of four strengths (PostgreSQL 9.3's heap_lock_tuple modes): FOR UPDATE, FOR NO
KEY UPDATE, FOR SHARE and FOR KEY SHARE, each with a wait policy (block, NOWAIT, SKIP LOCKED).

``heap_lock_tuple_mode(backend, rel, tid, snapshot, mode, wait_policy)`` locks the version at
``tid``:

* ``LOCK_UPDATE``: ``heap_lock_tuple`` - xmax = my xid, HEAP_XMAX_LOCK_ONLY; one holder.
* ``LOCK_NO_KEY_UPDATE``, ``LOCK_SHARE``, ``LOCK_KEY_SHARE``: under the page's exclusive
  lock, after ``satisfies_update`` found no running deleter, updater or FOR UPDATE locker
  in xmax (it waits for one) and no live shared locker of a conflicting mode, the
  transaction is added to the version's entry in the shared multi-locker table
  (``minidb.txn.multixact``) with its mode, and the version gets HEAP_XMAX_KEYSHR_LOCK (a
  hint-style write: the buffer is dirtied, no WAL).  xmax is left as it is.

The conflicts, PostgreSQL's table ("x": the second waits, or fails under NOWAIT, or skips
the row under SKIP LOCKED):

=================  ==========  =====  ==================================  =================
held \\ wanted      KEY SHARE   SHARE  NO KEY UPDATE, non-key UPDATE       UPDATE, DELETE,
                                                                          key UPDATE
=================  ==========  =====  ==================================  =================
KEY SHARE          .           .      .                                   x
SHARE              .           .      x                                   x
NO KEY UPDATE      .           x      x                                   x
UPDATE (xmax)      x           x      x                                   x
=================  ==========  =====  ==================================  =================

A non-key update of a key-share-locked version takes the lockers along to its new version.
Departure: a KEY SHARE locker that meets a running non-key updater in xmax waits for it
(PostgreSQL lets it lock the version at once, in a MultiXact with the updater).
"""

from __future__ import annotations

from minidb.heap.heapam import HeapRel
from minidb.heap.modify import (_KEY_SHARE, _NO_KEY_UPDATE, _OFF_INFOMASK, _SHARE, WAIT_BLOCK,
                                _acquire, _get16, _newer, _put16, heap_lock_tuple)
from minidb.storage.htup import HEAP_XMAX_KEYSHR_LOCK
from minidb.txn import multixact
from minidb.txn.visibility import TM_OK

__all__ = ["LOCK_KEY_SHARE", "LOCK_SHARE", "LOCK_NO_KEY_UPDATE", "LOCK_UPDATE", "LOCK_MODES",
           "heap_lock_tuple_mode", "key_share_lockers"]

LOCK_KEY_SHARE, LOCK_SHARE, LOCK_NO_KEY_UPDATE, LOCK_UPDATE = \
    _KEY_SHARE, _SHARE, _NO_KEY_UPDATE, "update"
LOCK_MODES = (LOCK_UPDATE, LOCK_NO_KEY_UPDATE, LOCK_SHARE, LOCK_KEY_SHARE)
_SHARED = {LOCK_KEY_SHARE: multixact.KEY_SHARE, LOCK_SHARE: multixact.SHARE,
           LOCK_NO_KEY_UPDATE: multixact.NO_KEY_UPDATE}


def heap_lock_tuple_mode(backend, rel: HeapRel, tid, snapshot, mode: str,
                         wait_policy: str = WAIT_BLOCK):
    """Lock the version at ``tid`` in ``mode``: (TM result, newer TID when TM_UPDATED);
    TM_WOULDBLOCK under SKIP LOCKED when a conflicting holder is there."""
    if mode == LOCK_UPDATE:
        return heap_lock_tuple(backend, rel, tid, snapshot, wait_policy)
    tid = (int(tid[0]), int(tid[1]))
    result, b, item, h = _acquire(backend, rel, tid, snapshot, mode, wait_policy=wait_policy)
    if result != TM_OK:
        return result, _newer(result, h)
    bm = backend.bufmgr
    try:
        multixact.add_locker(backend, rel.relfilenode, tid, h["xmin"], backend.xact.xid,
                             _SHARED[mode])
        im = _get16(item, _OFF_INFOMASK)
        if not im & HEAP_XMAX_KEYSHR_LOCK:
            _put16(item, _OFF_INFOMASK, im | HEAP_XMAX_KEYSHR_LOCK)
            bm.mark_dirty_hint(b)
    finally:
        bm.unlock(b)
        bm.unpin(b)
    return TM_OK, None


def key_share_lockers(backend, rel: HeapRel, tid, xmin: int) -> list[int]:
    """The live shared lockers of a version (this backend's too)."""
    return multixact.lockers_of(backend, rel.relfilenode, (int(tid[0]), int(tid[1])), xmin)
