"""Writers of existing rows: delete, update, row lock (``heap_delete``, ``heap_update``,
``heap_lock_tuple`` of PostgreSQL's heapam.c), and the update-chain walk of READ COMMITTED.

Each writer is handed the TID of a version its statement's snapshot saw, takes the page's
exclusive content lock and asks ``visibility.satisfies_update`` what it may do:

=====================  ===========================================  ==========================
TM result              meaning                                      what the writer does
=====================  ===========================================  ==========================
TM_OK                  no live deleter/locker: the row is ours      write xmax (and the new
                                                                    version), return TM_OK
TM_BEING_MODIFIED      xmax is a transaction still running          drop lock and pin, sleep
                       (updater, deleter or locker)                 until it ends, ask again
TM_UPDATED             xmax committed an update (t_ctid elsewhere)  RR: SerializationFailure
                                                                    RC: return the newer TID
TM_DELETED             xmax committed a delete (t_ctid = itself)    RR: SerializationFailure
                                                                    RC: return it (skip row)
TM_SELF_MODIFIED       this very command already changed it         return it (the caller
                       (cmax >= curcid)                             skips the row)
TM_INVISIBLE           not visible to the writer at all (inserted   return it (the caller's
                       by a later command or an aborted xact, or    bug: PostgreSQL errors)
                       changed by an earlier command of mine)
=====================  ===========================================  ==========================

Hint bits that ``satisfies_update`` learned are OR-ed into t_infomask before anything else
(the page is exclusively locked, so they are always safe to write).  It asks the proc array
through ``visibility.RunningAfter`` with the writer's snapshot's xmin: an xid below it had
ended when the snapshot was taken (an unhinted xmin - its hint deferred until the commit
record is flushed, under asynchronous commit - costs no scan of the proc array).

**The wait protocol** (XactLockTableWait).  A writer never sleeps holding a content lock
or a pin: on TM_BEING_MODIFIED it notes xmax, unlocks, unpins and calls
``ProcArray.wait_for(slot, xmax, lock_timeout_ms=lock_timeout, deadlock_timeout_ms=
deadlock_timeout, max_wait_ms=lock_wait_timeout_ms)``.  That sleeps on the backend's
semaphore until the transaction ends (its end wakes the waiters), runs the deadlock check
after ``deadlock_timeout`` (DeadlockDetected, 40P01) and gives up after ``lock_timeout``
(LockNotAvailable, 55P03).  Then the writer re-pins the page and decides again from
scratch: the holder may have aborted (TM_OK now), committed an update (TM_UPDATED), or
someone else may have locked the row meanwhile (wait again).

**READ COMMITTED re-check** (EvalPlanQual, simplified).  Under READ COMMITTED a writer that
meets a committed newer version returns (TM_UPDATED, t_ctid).  The caller then calls
``follow_update_chain`` to find the newest version (each step checks that the next
version's xmin equals the previous xmax, PostgreSQL's rule for a chain that is intact),
re-evaluates its WHERE clause on it under a fresh snapshot of the same command, and applies
its change to that version if it still qualifies (``minidb.heap.epq`` does this).  Under
REPEATABLE READ the same situation is a serialization failure (SQLSTATE 40001): the
transaction's snapshot cannot see the newer version, so it cannot base a write on it.

**Update placement and HOT.**  The new version is ``layout.encode_row(new_values, xid,
cid, 0, 0, HEAP_UPDATED)`` (``encode``'s bytes, HEAP_UPDATED set).  As in PostgreSQL's
heap_update it goes on the old version's page whenever it fits there
(``page.heap_free_space``; fillfactor is *not* applied to this check: the space fillfactor
keeps free exists precisely for such updates, and ``RelationGetBufferForTuple`` is only
consulted when the old page is full).  It is a heap-only tuple (HOT) iff it stays on the
page, ``hot_updates`` is on and no column of ``rel.indexed_columns`` changed (compared on
the stored bytes where equal bytes mean equal values, else on the decoded stored values:
``_keys_changed``): then the old version gets HEAP_HOT_UPDATED and the new one
HEAP_ONLY_TUPLE.  Otherwise the new version goes to another page, chosen as an insert's
(``heapam.buffer_for_update``: the backend's target block, the free-space map, a new page).

**Lock ordering.**  Two content locks only in PostgreSQL's order, the lower block first.  An
update whose new version must go to another page does it in two steps, as PostgreSQL's
heap_update does when it has to release the old buffer's lock to look for room ("temporarily
mark it locked"):

  1. under the old page's lock: xmax = my xid with HEAP_XMAX_LOCK_ONLY (and cmax), so any
     other writer now waits for me, while readers still see the old version as live; set
     PD_PAGE_FULL; log LOCK; unlock, keep the pin (so pruning cannot touch the page);
  2. ``heapam.buffer_for_update`` chooses the new page (never the old one: it holds too
     little, and the pin keeps pruning from freeing any) and returns it with both pages
     exclusively locked, the lower block first (a page it adds is above the old one: the
     old page's lock is then tried conditionally, and on failure the new page's lock is
     let go while waiting); with both locked the new version is placed, the old one
     finished (LOCK_ONLY cleared: xmax becomes a real deleter; cmax, t_ctid -> the new TID,
     pd_prune_xid) and ONE UPDATE record logged with both pages; unlock both, unpin.

If step 2 fails (row too big, I/O error), the old version is left locked by a transaction
that will abort: harmless, an aborted locker is ignored by everyone.

Deletes and updates set the page's ``pd_prune_xid`` to the oldest deleter not yet pruned
and reset a stale forward link (t_ctid of an aborted update) to the tuple's own TID, as
heap_delete does.  A row lock (SELECT FOR UPDATE) sets xmax = my xid with XMAX_LOCK_ONLY,
leaves pd_prune_xid alone (a lock leaves nothing to prune) and never writes cmax.

WAL: each writer logs, after changing the page, one logical record (``minidb.heap.redo``:
DELETE, LOCK, UPDATE / HOT_UPDATE with the new version when it stays on the page; an update
to another page logs LOCK, then one UPDATE whose block 0 is the new page with INSERT's data
and block 1 the old page): the offset, xmax, cmax, the infomask bits set, infomask2 and
t_ctid as written, from which redo rebuilds the page byte for byte.

Statistics: 'del', 'upd', 'hot_upd' through ``backend.pgstat`` on success (an update's
'upd' and 'hot_upd' in one ``count_update`` call).

**FOR KEY SHARE / FOR SHARE / FOR NO KEY UPDATE** (``minidb.heap.multixact``): a version
with HEAP_XMAX_KEYSHR_LOCK has lockers listed in ``minidb.txn.multixact``'s shared table,
not in xmax.  ``_acquire`` looks there once ``satisfies_update`` said TM_OK and waits for
each live one whose mode conflicts with its own, like for a running xmax: an update that
changes no indexed column conflicts as FOR NO KEY UPDATE does (not with key-share lockers,
which it copies to its new version).  NOWAIT and SKIP LOCKED (``wait_policy``) raise or
return TM_WOULDBLOCK where a wait would start.

Left out: MultiXacts in xmax (one xmax locker: FOR UPDATE and the writers), combo cids,
visibility-map bits.
"""

from __future__ import annotations

import struct
import sys

from minidb.errors import InternalError, LockNotAvailable, SerializationFailure
from minidb.heap import redo
from minidb.heap.heapam import MAX_HEAP_TUPLES_PER_PAGE, HeapRel, buffer_for_update
from minidb.heap.layout import BITMAP_OFFSET, HEADER_STRUCT, decode_header
from minidb.storage.htup import (HEAP_HOT_UPDATED, HEAP_KEYS_UPDATED, HEAP_NATTS_MASK,
                                 HEAP_ONLY_TUPLE, HEAP_UPDATED,
                                 HEAP_XMAX_COMMITTED, HEAP_XMAX_INVALID, HEAP_XMAX_KEYSHR_LOCK,
                                 HEAP_XMAX_LOCK_ONLY, HEAP_XMIN_COMMITTED, HEAP_XMIN_INVALID)
from minidb.storage import freespace
from minidb.storage import page as pg
from minidb.storage.bufmgr import EXCLUSIVE, SHARE
from minidb.storage.xloginsert import PageRecord
from minidb.txn import multixact
from minidb.txn import visibility as vis
from minidb.txn.clog import COMMITTED
from minidb.txn.visibility import (TM_BEING_MODIFIED, TM_DELETED, TM_INVISIBLE, TM_OK,
                                   TM_SELF_MODIFIED, TM_UPDATED)
from minidb.txn.xact import REPEATABLE_READ
from minidb.wal.record import (RM_HEAP, XLOG_HEAP_DELETE, XLOG_HEAP_HOT_UPDATE,
                               XLOG_HEAP_INIT_PAGE, XLOG_HEAP_LOCK, XLOG_HEAP_UPDATE)

_OFFNUM = struct.Struct("<H")         # main data of DELETE / LOCK: the offset number
_UPDATE_MAIN = struct.Struct("<HH")   # UPDATE / HOT_UPDATE: old and new offset numbers

TM_WOULDBLOCK = 6   # a SKIP LOCKED lock met a conflicting holder (PostgreSQL's TM_WouldBlock)
TM_NAMES = ("TM_OK", "TM_INVISIBLE", "TM_SELF_MODIFIED", "TM_BEING_MODIFIED", "TM_UPDATED",
            "TM_DELETED", "TM_WOULDBLOCK")

# what a row lock does when it meets a conflicting holder (PostgreSQL's LockWaitPolicy)
WAIT_BLOCK, WAIT_NOWAIT, WAIT_SKIP = "block", "nowait", "skip"

# field offsets inside the tuple header (minidb.heap.layout)
_XMAX = struct.Struct("<Q")      # @8
_CMAX = struct.Struct("<I")      # @20
_CTID = struct.Struct("<IH")     # @24
_CTID_IMS = struct.Struct("<IHHH")   # @24: t_ctid, then t_infomask2 @30 and t_infomask @32
_U16 = struct.Struct("<H")       # t_infomask2 @30, t_infomask @32
_OFF_XMAX, _OFF_CMAX, _OFF_CTID, _OFF_INFOMASK2, _OFF_INFOMASK = 8, 20, 24, 30, 32

_XMAX_BITS = HEAP_XMAX_COMMITTED | HEAP_XMAX_INVALID | HEAP_XMAX_LOCK_ONLY

_DELETE, _UPDATE, _LOCK, _KEY_SHARE = "delete", "update", "lock", "key share"
_SHARE, _NO_KEY_UPDATE = "share", "no key update"
# the weakest shared-locker mode (minidb.txn.multixact) each operation conflicts with;
# every other operation (delete, key update, FOR UPDATE) conflicts with all of them
_CONFLICTS_FROM = {_KEY_SHARE: multixact.NO_KEY_UPDATE + 1, _SHARE: multixact.NO_KEY_UPDATE,
                   _NO_KEY_UPDATE: multixact.SHARE}


# ---------------------------------------------------------------------------------------------
# small helpers on one tuple (the caller holds the page's content lock)
def _item(page, off: int, rel: HeapRel, tid) -> memoryview:
    """The bytes of the version at ``tid`` (offset ``off``), read with one look at the page
    header and one at the line pointer (``page.item_state``); InternalError when there is
    no such item or it is not a normal one."""
    flags, item = pg.item_state(page, off)
    if item is None:
        if flags < 0:
            raise InternalError(f'tuple ({tid[0]},{tid[1]}) of "{rel.name}" does not exist')
        raise InternalError(
            f'tuple ({tid[0]},{tid[1]}) of "{rel.name}" to modify is not a normal item '
            f"(line pointer state {flags}); the caller did not get it from a visible version")
    return item


def _get16(item, at: int) -> int:
    return _U16.unpack_from(item, at)[0]


def _put16(item, at: int, v: int) -> None:
    _U16.pack_into(item, at, v)


def _set_xmax(item, xid: int, cid: int | None, infomask_set: int) -> None:
    """xmax = xid (+ cmax), clear the xmax hint bits and LOCK_ONLY, then OR ``infomask_set``."""
    _XMAX.pack_into(item, _OFF_XMAX, xid)
    if cid is not None:
        _CMAX.pack_into(item, _OFF_CMAX, cid)
    im = _get16(item, _OFF_INFOMASK)
    _put16(item, _OFF_INFOMASK, (im & ~_XMAX_BITS) | infomask_set)


def _set_prune_xid(page, xid: int) -> None:
    old = pg.get_prune_xid(page)
    if old == 0 or xid < old:
        pg.set_prune_xid(page, xid)


def _trace(backend, msg: str) -> None:
    if backend.settings.trace_xact:
        print(f"[heap slot {backend.slot}] {msg}", file=sys.stderr)


def _gone_error(rel: HeapRel, result: int) -> SerializationFailure:
    what = "update" if result == TM_UPDATED else "delete"
    return SerializationFailure(
        f"could not serialize access due to concurrent {what} (table \"{rel.name}\")")


# ---------------------------------------------------------------------------------------------
# the shared skeleton of the three writers
def _acquire(backend, rel: HeapRel, tid, snapshot, op: str, keys_changed=None,
             wait_policy: str = WAIT_BLOCK):
    """Pin and exclusively lock ``tid``'s page, waiting out running modifiers.

    Returns (result, buf, item, header).  On TM_OK the buffer stays pinned and locked (the
    caller writes, then unlocks and unpins); otherwise it is released and ``item`` is None.
    A version with shared lockers (HEAP_XMAX_KEYSHR_LOCK) also waits out its live lockers
    (``minidb.txn.multixact``) whose mode conflicts with ``op`` (``_CONFLICTS_FROM``; an
    update for which ``keys_changed(item)`` says no key column changes conflicts as FOR NO
    KEY UPDATE does).  ``wait_policy``: instead of waiting, WAIT_NOWAIT raises
    LockNotAvailable (55P03) and WAIT_SKIP returns TM_WOULDBLOCK.
    """
    bm = backend.bufmgr
    xact = backend.xact
    procarray = xact.procarray
    clog = procarray.clog
    settings = backend.settings
    xid = xact.xid_for_write()
    cid = snapshot.curcid
    block, off = int(tid[0]), int(tid[1])
    tid = (block, off)
    rfn = rel.relfilenode
    # has_block: an fstat only past the largest size this process saw (heaps never shrink)
    if off < 1 or not bm.smgr.has_block(rfn, block):
        raise InternalError(f'tuple ({block},{off}) of "{rel.name}" does not exist')
    # every xid below the snapshot's xmin had ended when it was taken: an inserter or
    # deleter older than that is not looked for in the proc array (RecentXmin's test)
    running = vis.RunningAfter(procarray, snapshot.xmin)
    while True:
        b = bm.pin_lock(rfn, block, EXCLUSIVE)
        try:
            item = pg.item_state(bm.page(b), off)[1]
            if item is None:
                _item(bm.page(b), off, rel, tid)   # raises the error that fits
            # decode_header's fields, used before they are put in its dict
            xmin, xmax, cmin, cmax, cblk, coff, im2, im, hoff = HEADER_STRUCT.unpack_from(item)
            result, hints = vis.satisfies_update(
                xmin, xmax, cmin, cmax, im, cid, xid, running, clog,
                ctid_is_self=(cblk == block and coff == off), mine=xact.mine_xids)
            if hints:
                im |= hints
                _put16(item, _OFF_INFOMASK, im)
                bm.mark_dirty_hint(b)
            h = {"xmin": xmin, "xmax": xmax, "cmin": cmin, "cmax": cmax, "ctid": (cblk, coff),
                 "infomask2": im2, "infomask": im, "natts": im2 & HEAP_NATTS_MASK,
                 "t_hoff": hoff}
        except BaseException:
            bm.unlock_unpin(b)
            raise
        if result == TM_OK and h["infomask"] & HEAP_XMAX_KEYSHR_LOCK:
            min_mode = _CONFLICTS_FROM.get(op, multixact.KEY_SHARE)
            if op == _UPDATE and keys_changed is not None and not keys_changed(item):
                min_mode = multixact.SHARE
            if min_mode <= multixact.NO_KEY_UPDATE:
                lockers = multixact.live_lockers(backend, rfn, tid, h["xmin"], min_mode)
                if lockers:
                    result, h = TM_BEING_MODIFIED, dict(h, xmax=lockers[0])
        if result == TM_OK:
            return result, b, item, h
        bm.unlock_unpin(b)
        if result == TM_BEING_MODIFIED:
            if wait_policy == WAIT_NOWAIT:
                raise LockNotAvailable(
                    f'could not obtain lock on row in relation "{rel.name}"')
            if wait_policy == WAIT_SKIP:
                return TM_WOULDBLOCK, None, None, h
            xwait = h["xmax"]
            _trace(backend, f"{op} of ({block},{off}) in {rel.name} waits for xid {xwait}")
            procarray.wait_for(
                backend.slot, xwait, lock_timeout_ms=settings.lock_timeout,
                deadlock_timeout_ms=settings.deadlock_timeout,
                max_wait_ms=settings.lock_wait_timeout_ms,
                what=f' (to {op} tuple ({block},{off}) of "{rel.name}")')
            continue
        if result in (TM_UPDATED, TM_DELETED):
            if xact.isolation == REPEATABLE_READ:
                raise _gone_error(rel, result)
            return result, None, None, h
        return result, None, None, h  # TM_SELF_MODIFIED, TM_INVISIBLE


def _newer(result: int, h: dict):
    return h["ctid"] if result == TM_UPDATED else None


# ---------------------------------------------------------------------------------------------
# delete
def heap_delete(backend, rel: HeapRel, tid, snapshot) -> tuple[int, tuple | None]:
    """Delete the version at ``tid``: (TM result, newer TID when TM_UPDATED else None)."""
    tid = (int(tid[0]), int(tid[1]))
    result, b, item, h = _acquire(backend, rel, tid, snapshot, _DELETE)
    if result != TM_OK:
        return result, _newer(result, h)
    bm = backend.bufmgr
    try:
        page = bm.page(b)
        xid = backend.xact.xid_for_write()   # assigned by _acquire: a level's subxid
        cid = snapshot.curcid
        _set_xmax(item, xid, cid, 0)
        _put16(item, _OFF_INFOMASK2,
               (h["infomask2"] & ~HEAP_HOT_UPDATED) | HEAP_KEYS_UPDATED)
        _CTID.pack_into(item, _OFF_CTID, *tid)  # no forward link (an aborted update's)
        _set_prune_xid(page, xid)
        PageRecord(bm).add(b, data=redo.xmax_data(
            page, tid[1], redo.F_CMAX | redo.F_PRUNE_XID, xid, cid, 0)).log(
            RM_HEAP, XLOG_HEAP_DELETE, xid, _OFFNUM.pack(tid[1]))
    finally:
        bm.unlock_unpin(b)
    backend.pgstat.count(rel.oid, "del")
    return TM_OK, None


# ---------------------------------------------------------------------------------------------
# row lock
def heap_lock_tuple(backend, rel: HeapRel, tid, snapshot, wait_policy: str = WAIT_BLOCK
                    ) -> tuple[int, tuple | None]:
    """Lock the version at ``tid`` FOR UPDATE: (TM result, newer TID when TM_UPDATED)."""
    tid = (int(tid[0]), int(tid[1]))
    result, b, item, h = _acquire(backend, rel, tid, snapshot, _LOCK, wait_policy=wait_policy)
    if result != TM_OK:
        return result, _newer(result, h)
    bm = backend.bufmgr
    try:
        xid = backend.xact.xid_for_write()   # assigned by _acquire: a level's subxid
        if h["xmax"] != xid or not h["infomask"] & HEAP_XMAX_LOCK_ONLY:
            _set_xmax(item, xid, None, HEAP_XMAX_LOCK_ONLY)
            # a lock leaves no newer version: drop an aborted update's forward link
            _put16(item, _OFF_INFOMASK2, h["infomask2"] & ~HEAP_HOT_UPDATED)
            _CTID.pack_into(item, _OFF_CTID, *tid)
            page = bm.page(b)
            PageRecord(bm).add(b, data=redo.xmax_data(
                page, tid[1], 0, xid, 0, HEAP_XMAX_LOCK_ONLY)).log(
                RM_HEAP, XLOG_HEAP_LOCK, xid, _OFFNUM.pack(tid[1]))
    finally:
        bm.unlock_unpin(b)
    return TM_OK, None


# ---------------------------------------------------------------------------------------------
# update
def heap_update(backend, rel: HeapRel, tid, new_values, snapshot
                ) -> tuple[int, tuple | None, bool]:
    """Replace the version at ``tid`` by ``new_values`` (a full row).

    Returns (TM result, TID, hot): on TM_OK the new version's TID and whether the update
    was HOT; on TM_UPDATED the newer version's TID; otherwise None.
    """
    bm = backend.bufmgr
    # encode before taking any lock: a bad value fails without touching the page
    xid = backend.xact.xid_for_write()
    cid = snapshot.curcid
    data = _new_version(rel, new_values, xid, cid)
    size = (len(data) + (pg.MAXALIGN - 1)) & ~(pg.MAXALIGN - 1)   # pg.maxalign

    block, off = tid = (int(tid[0]), int(tid[1]))
    result, b, item, h = _acquire(
        backend, rel, tid, snapshot, _UPDATE,
        keys_changed=lambda it: bool(rel.indexed_columns)
        and _keys_changed(rel, it, data, new_values))
    if result != TM_OK:
        return result, _newer(result, h), False
    if h["infomask"] & HEAP_XMAX_KEYSHR_LOCK:   # key-share lockers go with a non-key update
        _put16(data, _OFF_INFOMASK, _get16(data, _OFF_INFOMASK) | HEAP_XMAX_KEYSHR_LOCK)
    try:
        page = bm.page(b)
        keys_changed = False
        if rel.indexed_columns:
            keys_changed = _keys_changed(rel, item, data, new_values)
        fits = pg.heap_free_space(page, MAX_HEAP_TUPLES_PER_PAGE) >= size
        if fits:
            hot = bool(backend.settings.hot_updates) and not keys_changed
            new_tid, wal = _update_on_page(page, block, off, item, h, data, xid, cid, hot,
                                           keys_changed)
            PageRecord(bm).add(b, data=wal).log(
                RM_HEAP, XLOG_HEAP_HOT_UPDATE if hot else XLOG_HEAP_UPDATE, xid,
                _UPDATE_MAIN.pack(off, new_tid[1]))
            bm.unlock_unpin(b)
            b = None
        else:
            # step 1: lock the old version for myself, mark the page full, let go of it
            avail = pg.heap_free_space(page, MAX_HEAP_TUPLES_PER_PAGE)
            _set_xmax(item, xid, cid, HEAP_XMAX_LOCK_ONLY)
            pg.set_flags(page, pg.get_flags(page) | pg.PD_PAGE_FULL)
            PageRecord(bm).add(b, data=redo.xmax_data(
                page, off, redo.F_CMAX | redo.F_PAGE_FULL, xid, cid, HEAP_XMAX_LOCK_ONLY,
                item=item)).log(
                RM_HEAP, XLOG_HEAP_LOCK, xid, _OFFNUM.pack(off))
            bm.unlock(b)
    except BaseException:
        if b is not None:
            if bm.held[b]:
                bm.unlock_unpin(b)
            else:
                bm.unpin(b)
        raise
    if fits:
        backend.pgstat.count_update(rel.oid, hot)
        if h["infomask"] & HEAP_XMAX_KEYSHR_LOCK:
            _carry_key_share(backend, rel, tid, h, new_tid, xid)
        return TM_OK, new_tid, hot
    new_tid = _update_elsewhere(backend, rel, b, block, off, avail, data, xid, cid,
                                keys_changed)
    backend.pgstat.count_update(rel.oid, False)
    _carry_key_share(backend, rel, tid, h, new_tid, xid)
    return TM_OK, new_tid, False


def _carry_key_share(backend, rel: HeapRel, tid, h: dict, new_tid, xid: int) -> None:
    """The old version's live FOR KEY SHARE lockers lock the new one too (the new version
    is nobody else's to write before this transaction commits, so this may follow the
    placement)."""
    if h["infomask"] & HEAP_XMAX_KEYSHR_LOCK:
        multixact.carry_lockers(backend, rel.relfilenode, tid, h["xmin"], new_tid, xid)


def _keys_changed(rel: HeapRel, item, data, new_values) -> bool:
    """Does the new version differ from the old one (``item``) in an indexed column?
    First the stored bytes: an indexed column whose type's values equal themselves
    (``_BYTES_DECIDE``) and whose null bit and bytes are the same in both tuples holds the
    same value in both (decoding is a function of the bytes), so when that is so of every
    indexed column nothing is decoded.  Else the new values as given are compared: equal
    to the stored old ones, they encode to what the old ones decode from (a decoded value
    survives a round trip), so only the old tuple is decoded; otherwise the new tuple is
    decoded too and compared as stored (char(n) padding, real's precision)."""
    layout = rel.layout
    cols = rel.indexed_columns
    plan = _byte_plan(layout, cols)
    if plan is not None and _same_bytes(plan, item, data):
        return False
    old_row = layout.decode(item)
    try:
        if all(old_row[c] == new_values[c] for c in cols):
            return False
    except Exception:  # a value that does not compare (a numpy array): decide as stored
        pass
    new_row = layout.decode(data)
    return any(old_row[c] != new_row[c] for c in cols)


# types whose decoded values always equal themselves (no NaN, no value of a class without
# equality): for them equal stored bytes mean equal values
_BYTES_DECIDE = frozenset({"smallint", "integer", "bigint", "boolean", "text", "varchar",
                           "char", "bytea", "uuid"})
_VARLENA = struct.Struct("<HH")        # a variable-length column's (offset, length)


def _byte_plan(layout, cols) -> tuple | None:
    """Per indexed column (null-bitmap byte, bit, fixed-part offset, size or -1 for a
    variable-length column), or None if some column's type is not in _BYTES_DECIDE; kept
    per layout and column set."""
    per = layout.key_byte_plans
    plan = per.get(cols, False)
    if plan is False:
        plan = []
        for c in sorted(cols):
            t = layout.columns[c].type
            if t.name not in _BYTES_DECIDE:
                plan = None
                break
            plan.append((BITMAP_OFFSET + (c >> 3), 1 << (c & 7), layout.offsets[c],
                         t.size if t.fixed else -1))
        per[cols] = plan = tuple(plan) if plan is not None else None
    return plan


def _same_bytes(plan: tuple, old, new) -> bool:
    """Do tuples ``old`` and ``new`` store the same bytes (and null bit) in every column of
    ``plan``?"""
    for nbyte, bit, off, size in plan:
        if (old[nbyte] ^ new[nbyte]) & bit:
            return False
        if size >= 0:
            if old[off:off + size] != new[off:off + size]:
                return False
        else:
            a, n = _VARLENA.unpack_from(old, off)
            a2, n2 = _VARLENA.unpack_from(new, off)
            if n != n2 or old[a:a + n] != new[a2:a2 + n2]:
                return False
    return True


def _new_version(rel: HeapRel, new_values, xid: int, cid: int) -> bytearray:
    """The new version's tuple bytes: the row encoded with this xid / cid, HEAP_UPDATED."""
    return bytearray(rel.layout.encode_row(new_values, xid, cid, 0, 0, HEAP_UPDATED))


def _update_on_page(page, block: int, off: int, item, h: dict, data: bytearray, xid: int,
                    cid: int, hot: bool, keys_changed: bool) -> tuple[tuple[int, int], bytes]:
    """Put the new version on the old version's (exclusively locked) page and make the old
    one (``item``: its bytes in the page, at offset ``off``) point at it: HOT
    (HEAP_HOT_UPDATED / HEAP_ONLY_TUPLE) if ``hot``.  Returns the new TID and the WAL
    block data of the change (``redo.hot_update_data``: the bytes ``redo.xmax_data`` reads
    back from the page, built from the values written); the caller logs it, which marks
    the buffer dirty.  ``pg.add_heap_tuple`` moves no stored item (it writes the new one at
    the new pd_upper and a line pointer), so ``item`` still shows the old version
    afterwards."""
    if hot:
        _put16(data, _OFF_INFOMASK2, _get16(data, _OFF_INFOMASK2) | HEAP_ONLY_TUPLE)
    new_off, start, pd_flags = pg.add_heap_tuple(page, data, block, MAX_HEAP_TUPLES_PER_PAGE)
    im2 = h["infomask2"] & ~(HEAP_HOT_UPDATED | HEAP_KEYS_UPDATED)
    if hot:
        im2 |= HEAP_HOT_UPDATED
    if keys_changed:
        im2 |= HEAP_KEYS_UPDATED
    # _set_xmax(item, xid, cid, 0), then t_ctid -> the new version and t_infomask2, with
    # t_ctid, t_infomask2 and t_infomask (adjacent) written by one pack
    _XMAX.pack_into(item, _OFF_XMAX, xid)
    _CMAX.pack_into(item, _OFF_CMAX, cid)
    _CTID_IMS.pack_into(item, _OFF_CTID, block, new_off, im2,
                        _get16(item, _OFF_INFOMASK) & ~_XMAX_BITS)
    _set_prune_xid(page, xid)
    wal = redo.hot_update_data(off, redo.F_CMAX | redo.F_PRUNE_XID, xid, cid, im2, block,
                               new_off, pd_flags,
                               memoryview(page)[start:start + len(data)])
    return (block, new_off), wal


def _update_elsewhere(backend, rel: HeapRel, b: int, block: int, off: int, avail: int,
                      data: bytearray, xid: int, cid: int, keys_changed: bool
                      ) -> tuple[int, int]:
    """Step 2 of an update whose new version does not fit on the old page (``b``: pinned,
    unlocked, the old version locked by step 1; ``avail``: the free space it had).
    ``heapam.buffer_for_update`` chooses the new version's page and locks both pages,
    lower block first; then, with both locked, the new version is placed, the old one
    finished (a real deleter: LOCK_ONLY cleared, cmax, t_ctid -> the new TID,
    pd_prune_xid) and ONE Heap UPDATE logged: block 0 the new page (its INSERT data;
    ``XLOG_HEAP_INIT_PAGE`` when the page was just added), block 1 the old page (its xmax
    data).  Returns the new TID; unpins ``b`` in every case."""
    bm = backend.bufmgr
    try:
        nblock, nb, fresh = buffer_for_update(backend, rel, len(data), b, block, avail)
    except BaseException:
        bm.unpin(b)
        raise
    try:
        npage = bm.page(nb)
        if fresh:
            pg.init_page(npage)
        new_off, start, pd_flags = pg.add_heap_tuple(npage, data, nblock,
                                                     MAX_HEAP_TUPLES_PER_PAGE)
        if fresh:
            free = pg.heap_free_space(npage, MAX_HEAP_TUPLES_PER_PAGE)
        page = bm.page(b)
        item = pg.get_item(page, off)
        im2 = _get16(item, _OFF_INFOMASK2) & ~(HEAP_HOT_UPDATED | HEAP_KEYS_UPDATED)
        if keys_changed:
            im2 |= HEAP_KEYS_UPDATED
        _set_xmax(item, xid, cid, 0)
        _CTID_IMS.pack_into(item, _OFF_CTID, nblock, new_off, im2,
                            _get16(item, _OFF_INFOMASK))
        _set_prune_xid(page, xid)
        PageRecord(bm).add(nb, new=fresh, data=redo.insert_data(
            new_off, pd_flags, memoryview(npage)[start:start + len(data)])).add(
            b, data=redo.XMAX.pack(off, redo.F_CMAX | redo.F_PRUNE_XID, xid, cid, 0, im2,
                                   nblock, new_off)).log(
            RM_HEAP, XLOG_HEAP_UPDATE | XLOG_HEAP_INIT_PAGE if fresh else XLOG_HEAP_UPDATE,
            xid, _UPDATE_MAIN.pack(off, new_off))
    finally:
        bm.unlock_unpin(nb)
        bm.unlock_unpin(b)
    if fresh:
        freespace.record(bm, rel.relfilenode, nblock, free)
    return nblock, new_off


# ---------------------------------------------------------------------------------------------
# reading single versions, and the update chain
def heap_fetch_raw(backend, rel: HeapRel, tid) -> tuple[dict, tuple] | None:
    """(header dict, row) of the LP_NORMAL tuple at ``tid``, else None.  No visibility."""
    bm = backend.bufmgr
    block, off = tid
    if off < 1 or not bm.smgr.has_block(rel.relfilenode, block):
        return None
    b = bm.pin_lock(rel.relfilenode, block, SHARE)
    try:
        item = pg.item_state(bm.page(b), off)[1]
        if item is None:
            return None
        return decode_header(item), rel.layout.decode(item)
    finally:
        bm.unlock_unpin(b)


def follow_update_chain(backend, rel: HeapRel, tid) -> tuple[int, int] | None:
    """The newest version of the row whose version is at ``tid`` (READ COMMITTED re-check).

    Walks t_ctid while the current version's xmax is an updater that has committed (not
    running in the proc array, committed in the commit log - in that order) and the next
    version's xmin equals that xmax.  Stops at, and returns, the first version whose xmax
    is invalid, lock-only, aborted or still running (a writer given it waits for that
    transaction as usual).  None when the row was deleted by a committed transaction, or
    the chain is broken (the next version was pruned away or its xmin does not match).
    """
    procarray = backend.xact.procarray
    clog = procarray.clog
    seen = 0
    tid = (int(tid[0]), int(tid[1]))
    while True:
        got = heap_fetch_raw(backend, rel, tid)
        if got is None:
            return None
        h = got[0]
        im, xmax = h["infomask"], h["xmax"]
        if (xmax == 0 or im & HEAP_XMAX_INVALID or im & HEAP_XMAX_LOCK_ONLY
                or (im & HEAP_XMIN_INVALID and not im & HEAP_XMIN_COMMITTED)):
            return tid
        if not im & HEAP_XMAX_COMMITTED:
            if procarray.is_in_progress(xmax) or clog.status(xmax) != COMMITTED:
                return tid  # running (the writer will wait) or aborted
        nxt = h["ctid"]
        if nxt == tid:
            return None  # deleted
        got = heap_fetch_raw(backend, rel, nxt)
        if got is None or got[0]["xmin"] != xmax:
            return None  # broken chain
        tid = nxt
        seen += 1
        if seen > 1_000_000:  # pragma: no cover - a cycle would be corruption
            raise InternalError(f'update chain of "{rel.name}" does not end')


__all__ = ["heap_delete", "heap_update", "heap_lock_tuple", "follow_update_chain",
           "heap_fetch_raw", "TM_OK", "TM_INVISIBLE", "TM_SELF_MODIFIED",
           "TM_BEING_MODIFIED", "TM_UPDATED", "TM_DELETED", "TM_WOULDBLOCK", "TM_NAMES",
           "WAIT_BLOCK", "WAIT_NOWAIT", "WAIT_SKIP"]
