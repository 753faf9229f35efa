"""Unique indexes: the duplicate check an insert makes (nbtinsert.c's ``_bt_check_unique``).

A unique index may hold several entries with the same key - versions of one row that
are dead or dying, or rows of transactions that will abort - but never two whose rows
can both be live.  Before inserting key K with the leaf page for K locked exclusively,
the inserter looks at every entry with key K (on that leaf and, while the high key still
starts with K, on right siblings locked in share mode) and asks the heap about the row
each points to, with PostgreSQL's "dirty snapshot" rules (``heap_dirty_check``, which
walks the HOT chain from the entry's TID):

==============================================  ===========================================
the chain holds a version that is               verdict
==============================================  ===========================================
inserted by a committed (or by my) transaction  conflict: UniqueViolation (SQLSTATE 23505)
and not deleted (or deleted by an aborted one,
or only locked)
inserted by another transaction still running   wait for that transaction, then start the
                                                insert over (it may abort)
deleted by another transaction still running    wait for it (the delete may abort)
deleted by me, or by a committed transaction    no conflict (the old version is gone for
                                                every future snapshot of mine)
dead to everyone (aborted inserter, deleter     no conflict; the entry is marked LP_DEAD on
committed before the global xmin horizon)       the spot (setting ``kill_index_tuples``)
==============================================  ===========================================

The wait releases every lock and pin first (``ProcArray.wait_for``, with deadlock
detection), then the insert descends again from the root: by then the key may live on
another page.  NULLs never conflict (a key with a NULL column skips the check).

Departures: PostgreSQL decides with ``HeapTupleSatisfiesDirty``; minidb classifies each
chain member with ``satisfies_vacuum`` (whose five states say the same thing once "my own
transaction" is told apart) and so gets the "dead to everyone" verdict for free.  A member
with a committed (hinted) inserter and one of my own live xids as deleter - the old version
of the row my UPDATE is inserting the entry for - is judged "deleted by me" without asking
``satisfies_vacuum``, whose answer for it is known, so no horizon is computed for it.  And the
check is batched per leaf page: the leaf's entries with the key are collected first, the
chains they point to are checked one heap page at a time (one pin and share lock for all
the entries on that page: the old versions of a bloated row share a few pages), then the
verdicts are applied in the entries' order - the first conflict or wait decides, and only
the entries before it are killed, as an entry-by-entry check would.  PostgreSQL visits one
entry at a time; in Python each visit's pin, lock and size check cost more than the check.
"""

from __future__ import annotations

import struct

from minidb.errors import UniqueViolation
from minidb.storage.htup import (HEAP_HOT_UPDATED, HEAP_ONLY_TUPLE, HEAP_XMAX_COMMITTED,
                                 HEAP_XMAX_INVALID, HEAP_XMAX_LOCK_ONLY, HEAP_XMIN_COMMITTED)
from minidb.index import btpage as bt
from minidb.index.rel import IndexRel, count, trace
from minidb.index.search import release
from minidb.storage import page as pg
from minidb.storage.bufmgr import SHARE
from minidb.txn import visibility as vis

__all__ = ["check_unique", "heap_dirty_check", "heap_dirty_check_block"]

_HDR = struct.Struct("<QQIIIHHH")  # xmin xmax cmin cmax ctid.block ctid.offset im2 im
_U16 = struct.Struct("<H")
_T_INFOMASK = 32
# the infomask bits that, with only HEAP_XMIN_COMMITTED of them set, leave xmax a deleter
# whose fate the hint bits do not tell (``_chain_verdict``'s "deleted by me" shortcut)
_MINE_DELETED_MASK = (HEAP_XMIN_COMMITTED | HEAP_XMAX_INVALID | HEAP_XMAX_COMMITTED
                      | HEAP_XMAX_LOCK_ONLY)


def heap_dirty_check(bm, hrel, tid, procarray, clog, myxid, horizon_box: list
                     ) -> tuple[bool, int, bool]:
    """(conflict, xid to wait for or 0, all_dead) for the HOT chain at heap ``tid``."""
    return heap_dirty_check_block(bm, hrel, int(tid[0]), [int(tid[1])], procarray, clog,
                                  myxid, horizon_box)[0]


def heap_dirty_check_block(bm, hrel, block: int, offsets: list, procarray, clog,
                           myxid, horizon_box: list) -> list:
    """``heap_dirty_check`` for several chains on one heap page, with one pin and one
    share lock: a verdict (conflict, xid to wait for or 0, all_dead) per offset.  The
    block is checked against the relation's size without a system call once it is known
    to be inside (``Smgr.has_block``).  ``myxid``: the checker's live xids (its top-level
    xid and live subtransaction xids), a collection."""
    none = (False, 0, False)
    if not bm.smgr.has_block(hrel.relfilenode, block):
        return [none] * len(offsets)
    b = bm.pin_lock(hrel.relfilenode, block, SHARE)
    hinted = [False]
    try:
        page = bm.page_view(b)   # struct reads cost less on the memoryview
        nitems = pg.max_offset(page)
        return [_chain_verdict(page, block, off, nitems, procarray, clog, myxid,
                               horizon_box, hinted) for off in offsets]
    finally:
        if hinted[0]:
            bm.mark_dirty_hint(b)
        bm.unlock_unpin(b)


def _chain_verdict(page, block: int, off: int, nitems: int, procarray, clog, myxid,
                   horizon_box: list, hinted: list) -> tuple[bool, int, bool]:
    """The verdict for the HOT chain at ``off`` of the share-locked ``page``."""
    if not 1 <= off <= nitems:
        return False, 0, False
    lp_off, flags, _len = pg.get_item_id(page, off)
    if flags == pg.LP_DEAD:
        return False, 0, True
    if flags == pg.LP_UNUSED:
        return False, 0, False
    at_start = True
    if flags == pg.LP_REDIRECT:
        off = lp_off
        if not 1 <= off <= nitems:
            return False, 0, False
        lp_off, flags, _len = pg.get_item_id(page, off)
        at_start = False
    all_dead = True
    prev_xmax = 0
    for _ in range(nitems):
        if flags != pg.LP_NORMAL:
            break
        xmin, xmax, _cmin, _cmax, cblk, coff, im2, im = _HDR.unpack_from(page, lp_off)
        if at_start and im2 & HEAP_ONLY_TUPLE:
            return False, 0, False
        if prev_xmax and xmin != prev_xmax:
            break
        if im & _MINE_DELETED_MASK == HEAP_XMIN_COMMITTED and xmax in myxid:
            # committed inserter, deleted (updated) by one of my live xids: what
            # satisfies_vacuum says (DELETE_IN_PROGRESS, no hints) and the rules below make
            # of it - a committed xmin is no longer running - without the horizon
            all_dead = False  # deleted by me: not a conflict, not dead either
        else:
            if not horizon_box:
                horizon = procarray.global_xmin()
                # no xid older than the horizon runs: is_in_progress without the scan then
                horizon_box += (horizon, vis.RunningAfter(procarray, horizon))
            procarray = horizon_box[1]
            state, hints = vis.satisfies_vacuum(xmin, xmax, im, horizon_box[0], procarray, clog)
            if hints:
                _U16.pack_into(page, lp_off + _T_INFOMASK, im | hints)
                hinted[0] = True
            if state == vis.LIVE:
                return True, 0, False
            if state == vis.INSERT_IN_PROGRESS:
                if xmin in myxid:
                    if (xmax in myxid and xmax != xmin and not im & HEAP_XMAX_LOCK_ONLY
                            and not im & HEAP_XMAX_INVALID):
                        all_dead = False  # inserted and deleted by my subtransactions
                    else:
                        return True, 0, False
                else:
                    return False, xmin, False
            if state == vis.DELETE_IN_PROGRESS:
                if xmin not in myxid and procarray.is_in_progress(xmin):
                    return False, xmin, False
                if xmax not in myxid or im & HEAP_XMAX_LOCK_ONLY:
                    return False, xmax, False
                all_dead = False  # deleted by me: not a conflict, not dead either
            elif state == vis.RECENTLY_DEAD:
                all_dead = False
        if not im2 & HEAP_HOT_UPDATED or cblk != block or not 1 <= coff <= nitems:
            break
        off = coff
        lp_off, flags, _len = pg.get_item_id(page, off)
        prev_xmax = xmax
        at_start = False
    return False, 0, all_dead


def check_unique(backend, irel: IndexRel, hrel, b: int, data: bytes, key: bytes, keyvals,
                 tid, start: int | None = None) -> int:
    """Look for live duplicates of ``key`` from the exclusively locked leaf ``b`` (whose
    copy is ``data``) rightward.  Returns 0 if the insert may go on, or the xid to wait
    for; raises UniqueViolation on a conflict.  ``b`` stays locked either way.  ``start``:
    the offset of the key's first entry on ``b`` (``binsearch_leaf``) if the caller has it."""
    bm = backend.bufmgr
    inst = backend.instance
    procarray, clog = inst.procarray, inst.clog
    xact = backend.xact
    myxid = xact.mine_xids or (xact.xid,)   # the inserter's live xids (subtransactions)
    kill = backend.settings.kill_index_tuples
    horizon_box: list = []
    _prev, nxt, _lvl, _fl, _c = bt.opaque(data)
    off = start if start is not None else bt.binsearch_leaf(data, key, bt.first_data(nxt),
                                                            bt.nitems(data))
    cur_b, cur = b, data
    nb = -1
    klen = len(key)
    try:
        while True:
            # this leaf's entries with the key (not LP_DEAD), in order
            maxoff = bt.nitems(cur)
            entries = []   # (offset, heap tid)
            ended = False
            while off <= maxoff:
                word = bt.lp_word(cur, off)
                start, length = word & 0x7FFF, word >> 17
                if cur[start + 8:start + length] != key:
                    ended = True
                    break
                if not bt.lp_is_dead(word):
                    entries.append((off, bt.TID_BE.unpack_from(cur, start)))
                off += 1
            # the heap verdicts, one pin and lock per heap page (many versions of a
            # bloated row share a few pages); then decided in the entries' order
            verdicts = {}
            if len(entries) == 1:   # the usual case: the row's one older version
                blk, o = entries[0][1]
                verdicts[(blk, o)] = heap_dirty_check_block(
                    bm, hrel, blk, [o], procarray, clog, myxid, horizon_box)[0]
            else:
                by_block: dict = {}
                for _o, htid in entries:
                    by_block.setdefault(int(htid[0]), []).append(int(htid[1]))
                for blk, offs in by_block.items():
                    for o, v in zip(offs, heap_dirty_check_block(
                            bm, hrel, blk, offs, procarray, clog, myxid, horizon_box)):
                        verdicts.setdefault((blk, o), v)
            for ioff, htid in entries:
                conflict, xwait, all_dead = verdicts[(int(htid[0]), int(htid[1]))]
                if conflict:
                    err = UniqueViolation(
                        f'duplicate key value violates unique constraint "{irel.name}": '
                        f"Key {irel.codec.describe(keyvals)} already exists.")
                    # for ON CONFLICT (minidb.index.conflict): which index, which row
                    err.index_name = irel.name
                    err.conflict_tid = (int(htid[0]), int(htid[1]))
                    raise err
                if xwait:
                    trace(backend, irel, f"unique check waits for xid {xwait} (heap tid "
                                         f"{htid})")
                    return xwait
                if all_dead and kill:
                    page = bm.page(cur_b)
                    pg.set_item_dead(page, ioff, keep_storage=True)
                    bt.set_flags(page, bt.get_flags(page) | bt.BTP_HAS_GARBAGE)
                    bm.mark_dirty_hint(cur_b)
                    count(bm, "index_items_killed")
                    trace(backend, irel, f"unique check killed item {ioff} (heap tid {htid})")
            if ended:
                return 0
            _prev, nxt, _lvl, _fl, _c = bt.opaque(cur)
            if nxt == bt.P_NONE or bt.pivot_key(cur, bt.P_HIKEY)[:klen] != key:
                return 0
            if nb >= 0:
                release(bm, nb)
                nb = -1
            nb = bm.pin_lock(irel.relfilenode, nxt, SHARE)
            cur_b, cur = nb, bm.page(nb).tobytes()
            off = bt.first_data(bt.opaque(cur)[1])
    finally:
        if nb >= 0:
            release(bm, nb)
