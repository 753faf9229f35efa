"""Shared row lockers of tuple versions (FOR KEY SHARE, FOR SHARE, FOR NO KEY UPDATE): the
smallest multi-locker record (PostgreSQL's MultiXact, reduced to lockers).

PostgreSQL 9.3 gave row locks four strengths; the weakest, FOR KEY SHARE, is what a
foreign-key check takes on the referenced row, and it lets any number of transactions hold
it at once: two sessions inserting children of one parent must not wait for each other.
It conflicts only with FOR UPDATE strength - a DELETE, an UPDATE that changes a key column,
SELECT ... FOR UPDATE - and not with an UPDATE that leaves the keys alone (FOR NO KEY
UPDATE).  One xmax cannot name several lockers, so PostgreSQL puts a MultiXactId there
(HEAP_XMAX_IS_MULTI), an index into pg_multixact's SLRUs listing (member xid, lock mode),
and every reader of xmax - visibility, pruning, freezing, waits - learns to expand it.

minidb keeps the lockers of a version in this shared-memory table instead and leaves xmax
alone:

* an entry is keyed by the version it locks - (relfilenode, block, offset, xmin): a
  version's TID can be reused only after it is dead to everyone, and xmin tells a reused
  slot apart - and holds one column per backend slot: the xid of the transaction of that
  slot holding the lock (0: none), and beside it the lock's strength (``mx_mode``:
  ``KEY_SHARE`` 1, ``SHARE`` 2, ``NO_KEY_UPDATE`` 3; a transaction that locks a version
  again keeps the stronger of its two modes).  A member is *live* while ``proc_xid`` of its slot still
  is that xid, a lock-free comparison; nothing is released at transaction end, an entry
  whose members are all gone is free for the next version (liveness decides, as PostgreSQL
  checks a MultiXact's members);
* the version gets the infomask bit HEAP_XMAX_KEYSHR_LOCK (``minidb.storage.htup``), written
  like a hint bit (no WAL: a lock does not survive a crash anyway), so a writer looks into
  the table only for a version that was ever key-share locked;
* the heap's writers (``minidb.heap.modify``: delete, update, FOR UPDATE) look here after
  ``satisfies_update`` said TM_OK, under the page's exclusive lock - the lock a locker holds
  while it adds itself, so the two are ordered - and wait (``ProcArray.wait_for``, seen by
  the deadlock detector) for each live member other than themselves; an update whose key
  columns stay as they are does not wait, and the live members are copied to its new
  version (which gets the bit too), as PostgreSQL gives the new tuple the lockers' multi.

The weaker SQL row locks live here too (``minidb.heap.multixact``): FOR SHARE (any number
of holders, conflicting with FOR NO KEY UPDATE and stronger) and FOR NO KEY UPDATE (one
holder: it conflicts with itself and FOR SHARE, not with FOR KEY SHARE).  A writer waits for
the members whose mode is at least its threshold (``live_lockers(..., min_mode)``):
DELETE, a key-changing UPDATE and FOR UPDATE from 1 (all), a non-key UPDATE and FOR NO KEY
UPDATE from 2, FOR SHARE from 3, FOR KEY SHARE never.  FOR UPDATE itself stays in xmax.

Because xmax is untouched, visibility, pruning, vacuum, the unique check and EvalPlanQual are
unchanged: for them a shared row lock does not exist.  What PostgreSQL has beyond this:
a key-share lock taken on a version whose non-key update is still running (minidb's locker
waits for that updater), lockers persisting in the tuple (pg_multixact survives restarts for hot
standby and prepared transactions), and no fixed capacity (here ``MULTI_LOCKERS_PER_SLOT``
x slots versions at once: 53200 beyond).  The member is the top-level transaction: a
ROLLBACK TO does not release a key-share lock taken in the savepoint (PostgreSQL does).
"""

from __future__ import annotations

import numpy as np

import minidb.errors as errors

__all__ = ["KEY_SHARE", "SHARE", "NO_KEY_UPDATE", "add_locker", "live_lockers", "carry_lockers",
           "lockers_of"]

KEY_SHARE, SHARE, NO_KEY_UPDATE = 1, 2, 3


def _find(seg, tag) -> int:
    t = seg.mx_tag
    hit = np.flatnonzero((t[:, 0] == tag[0]) & (t[:, 1] == tag[1]) & (t[:, 2] == tag[2])
                         & (t[:, 3] == tag[3]))
    return int(hit[0]) if len(hit) else -1


def _live(seg, e: int) -> np.ndarray:
    m = seg.mx_member[e]
    return (m != 0) & (m == seg.proc_xid[:len(m)])


def _claim(seg, tag) -> int:
    """An entry for ``tag``: its own, else one whose members have all gone."""
    e = _find(seg, tag)
    if e >= 0:
        return e
    m = seg.mx_member
    live = ((m != 0) & (m == seg.proc_xid[None, :m.shape[1]])).any(axis=1)
    free = np.flatnonzero(~live)
    if not len(free):
        raise errors.InsufficientResources(
            "out of shared memory\nHINT:  Too many row versions are locked FOR [KEY] SHARE or "
            "NO KEY UPDATE at once (the multixact table holds MULTI_LOCKERS_PER_SLOT per "
            "connection).")
    e = int(free[0])
    seg.mx_tag[e] = tag
    m[e] = 0
    seg.mx_mode[e] = 0
    return e


def add_locker(backend, rfn: int, tid, xmin: int, xid: int, mode: int = KEY_SHARE) -> None:
    """Record that ``xid`` (this backend's transaction) holds ``mode`` on the version
    ``(rfn, tid, xmin)``; the caller holds the page's exclusive lock."""
    inst = backend.instance
    seg = inst.seg
    slot = backend.slot
    with inst.locks.multixact:
        e = _claim(seg, (rfn, tid[0], tid[1], xmin))
        if seg.mx_member[e, slot] == xid:
            mode = max(mode, int(seg.mx_mode[e, slot]))
        seg.mx_member[e, slot] = xid
        seg.mx_mode[e, slot] = mode


def live_lockers(backend, rfn: int, tid, xmin: int, min_mode: int = KEY_SHARE) -> list[int]:
    """The xids of the live lockers of a version holding ``min_mode`` or stronger, other
    than this backend's own transaction."""
    inst = backend.instance
    seg = inst.seg
    with inst.locks.multixact:
        e = _find(seg, (rfn, tid[0], tid[1], xmin))
        if e < 0:
            return []
        live = _live(seg, e) & (seg.mx_mode[e] >= min_mode)
        live[backend.slot] = False
        return [int(x) for x in seg.mx_member[e][live]]


def lockers_of(backend, rfn: int, tid, xmin: int) -> list[int]:
    """Every live locker of a version, this backend's included (tests, inspection)."""
    inst = backend.instance
    seg = inst.seg
    with inst.locks.multixact:
        e = _find(seg, (rfn, tid[0], tid[1], xmin))
        return [] if e < 0 else [int(x) for x in seg.mx_member[e][_live(seg, e)]]


def carry_lockers(backend, rfn: int, tid, xmin: int, new_tid, new_xmin: int) -> bool:
    """A non-key update of a version with shared lockers: its live lockers (the key-share
    ones; any stronger one is the updater's own) also lock the new version.  True if there
    were any."""
    inst = backend.instance
    seg = inst.seg
    with inst.locks.multixact:
        e = _find(seg, (rfn, tid[0], tid[1], xmin))
        if e < 0:
            return False
        live = _live(seg, e)
        if not live.any():
            return False
        members = seg.mx_member[e].copy()
        modes = seg.mx_mode[e].copy()
        n = _claim(seg, (rfn, new_tid[0], new_tid[1], new_xmin))
        seg.mx_member[n][live] = members[live]
        seg.mx_mode[n][live] = modes[live]
        return True
