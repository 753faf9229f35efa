"""The heap's logical WAL records: what INSERT, DELETE, LOCK, UPDATE and HOT_UPDATE write
as block data, and the redo routines that replay them (heapam.c's heap_xlog_* routines).

The hot-path writers (``heapam.insert_tuple``, ``modify.heap_delete`` / ``heap_lock_tuple``
/ ``heap_update``) register their page (an update to another page: both pages) with
``PageRecord.add(buf, data=...)``: the record
carries the operation, not a byte delta of the page, so no before-image is copied and no
delta computed.  Recovery calls the routines registered in ``minidb.recovery.LOGICAL_REDO``
by (rmgr, opcode); each must leave the page byte for byte as the operation left it on the
primary (hint bits aside), because a later record on the same page may still be a byte
delta (prune, vacuum, a speculative insertion's kill).  ``tests/wal/test_logical_redo.py``
checks that with the masking of PostgreSQL's wal_consistency_checking.

Block data layouts (little-endian):

``INSERT`` (Heap, ``| INIT_PAGE`` when the insert starts a fresh page):
    ``offnum u16 | flags u8 | tuple bytes`` - the tuple as it was placed, t_ctid included.
    Redo (after ``init_page`` when the record says INIT_PAGE, the block then being
    ``WILL_INIT``: no image and no read) puts the tuple at ``offnum`` (a free line pointer or
    the next one, as ``PageAddItem`` with an offset) and sets ``PD_HAS_FREE_LINES`` as the
    primary left it (``F_FREE_LINES``).

``DELETE`` / ``LOCK`` / ``UPDATE`` / ``HOT_UPDATE`` (the old version's change):
    ``offnum u16 | flags u8 | xmax u64 | cmax u32 | infomask_set u16 | infomask2 u16 |
    ctid block u32 | ctid offnum u16`` then, with ``F_NEW_TUPLE`` (an update whose new
    version stays on the page), ``new offnum u16 | tuple bytes`` as for INSERT.
    Redo writes xmax (and cmax with ``F_CMAX``), clears the xmax hint bits and LOCK_ONLY
    from t_infomask and ORs ``infomask_set`` (PostgreSQL's infobits_set), stores
    ``infomask2`` and t_ctid as logged, lowers ``pd_prune_xid`` to xmax with
    ``F_PRUNE_XID`` and sets ``PD_PAGE_FULL`` with ``F_PAGE_FULL`` (the first step of an
    update whose new version goes to another page).

``UPDATE`` whose new version goes to another page: two blocks in one record, as
PostgreSQL's: block 0 is the new version's page with INSERT's data (and the record's
``XLOG_HEAP_INIT_PAGE`` bit when the update added that page: the block is then
``WILL_INIT``), block 1 the old version's page with the xmax data above (no
``F_NEW_TUPLE``; t_ctid names the new page).  ``redo_update`` tells them apart by the block
id.  The LOCK record that the writer logs before it lets go of the old page to look for
room (``minidb.heap.modify``) comes before it, as in PostgreSQL.

Departures: the tuple header goes in whole (PostgreSQL's xl_heap_header keeps only
t_infomask2, t_infomask and t_hoff and rebuilds the rest); cmax is logged because redo must
rebuild the page byte for byte; the main data keeps only the offset numbers, for waldump.
MULTI_INSERT (bulk load) still logs an image of each new page.
"""

from __future__ import annotations

import struct

from minidb.errors import InternalError
from minidb.storage import page as pg
from minidb.storage.htup import (HEAP_XMAX_COMMITTED, HEAP_XMAX_INVALID,
                                 HEAP_XMAX_LOCK_ONLY)
from minidb.wal import record as rec
from minidb.wal.record import XLOG_HEAP_INIT_PAGE

# flags of the block data (repeated in minidb.wal.dump, which describes them)
F_CMAX = 0x01        # write cmax
F_PAGE_FULL = 0x02   # set PD_PAGE_FULL
F_PRUNE_XID = 0x04   # pd_prune_xid = min(pd_prune_xid, xmax)
F_NEW_TUPLE = 0x08   # the new version follows (an update on the same page)
F_FREE_LINES = 0x10  # the page keeps PD_HAS_FREE_LINES after the insert

INSERT = struct.Struct("<HB")               # offnum, flags; then the tuple
XMAX = struct.Struct("<HBQIHHIH")            # see the module docstring
NEW_OFF = struct.Struct("<H")

XMAX_CLEARED = HEAP_XMAX_COMMITTED | HEAP_XMAX_INVALID | HEAP_XMAX_LOCK_ONLY

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_CTID_IM2 = struct.Struct("<IHH")  # t_ctid (block, offset), t_infomask2: bytes 24..31
_OFF_XMAX, _OFF_CMAX, _OFF_CTID, _OFF_INFOMASK2, _OFF_INFOMASK = 8, 20, 24, 30, 32


# -- what the writers log --------------------------------------------------------------------
def insert_data(off: int, pd_flags: int, tup) -> bytes:
    """INSERT's block data for a tuple just placed at ``off`` by ``page.add_heap_tuple``:
    from what that returned (pd_flags after the placement, where the tuple starts) and the
    placed bytes (t_ctid set), so nothing is read back from the page."""
    return INSERT.pack(off, F_FREE_LINES if pd_flags & pg.PD_HAS_FREE_LINES else 0) + tup


def hot_update_data(off: int, flags: int, xmax: int, cmax: int, im2: int, block: int,
                    new_off: int, pd_flags: int, tup) -> bytes:
    """``xmax_data(page, off, flags, xmax, cmax, 0, new_off)`` from values the writer has
    at hand: the old version's new infomask2, its t_ctid (``block``, ``new_off``: the new
    version on the same page), pd_flags after the placement and the placed tuple's bytes."""
    if pd_flags & pg.PD_HAS_FREE_LINES:
        flags |= F_FREE_LINES
    return b"".join((XMAX.pack(off, flags | F_NEW_TUPLE, xmax, cmax, 0, im2, block, new_off),
                     NEW_OFF.pack(new_off), tup))


def xmax_data(page, off: int, flags: int, xmax: int, cmax: int, infomask_set: int,
              new_off: int = 0, item=None) -> bytes:
    """The block data of a change to the old version at ``off`` (made already): its
    infomask2 and t_ctid are read back from the page (``item``: that version's bytes in
    the page when the caller has them); ``new_off``: the new version placed on the same
    page by an update."""
    if item is None:
        item = pg.get_item(page, off)
    cblk, coff, im2 = _CTID_IM2.unpack_from(item, _OFF_CTID)
    if new_off:
        if pg.get_flags(page) & pg.PD_HAS_FREE_LINES:
            flags |= F_FREE_LINES
        return b"".join((XMAX.pack(off, flags | F_NEW_TUPLE, xmax, cmax, infomask_set, im2,
                                   cblk, coff),
                         NEW_OFF.pack(new_off), pg.get_item(page, new_off)))
    return XMAX.pack(off, flags, xmax, cmax, infomask_set, im2, cblk, coff)


# -- redo --------------------------------------------------------------------------------------
def _place(page, off: int, tup, flags: int, what: str) -> None:
    got = pg.add_item(page, tup, offset=off)
    if got != off:  # pragma: no cover - add_item with an offset returns it
        raise InternalError(f"{what} redo placed the tuple at {got}, the record says {off}")
    f = pg.get_flags(page)
    want = (f | pg.PD_HAS_FREE_LINES) if flags & F_FREE_LINES else (f & ~pg.PD_HAS_FREE_LINES)
    if want != f:
        pg.set_flags(page, want)


def redo_insert(page, blk, r) -> None:
    """Heap INSERT (and INSERT | INIT_PAGE: the page is formatted first); also block 0 of
    a two-block UPDATE."""
    if r.info & XLOG_HEAP_INIT_PAGE:
        pg.init_page(page)
    off, flags = INSERT.unpack_from(blk.data, 0)
    _place(page, off, memoryview(blk.data)[INSERT.size:], flags, "INSERT")


def redo_xmax(page, blk, r) -> None:
    """Heap DELETE, LOCK, UPDATE and HOT_UPDATE: the old version's change (and the new
    version when it stays on the page)."""
    data = blk.data
    off, flags, xmax, cmax, infomask_set, im2, cblk, coff = XMAX.unpack_from(data, 0)
    if flags & F_NEW_TUPLE:
        (new_off,) = NEW_OFF.unpack_from(data, XMAX.size)
        _place(page, new_off, memoryview(data)[XMAX.size + NEW_OFF.size:], flags, "UPDATE")
    if off > pg.max_offset(page) or pg.get_item_id(page, off)[1] != pg.LP_NORMAL:
        raise InternalError(f"heap redo: line pointer {off} is not a normal item")
    item = pg.get_item(page, off)
    _U64.pack_into(item, _OFF_XMAX, xmax)
    if flags & F_CMAX:
        _U32.pack_into(item, _OFF_CMAX, cmax)
    im = _U16.unpack_from(item, _OFF_INFOMASK)[0]
    _U16.pack_into(item, _OFF_INFOMASK, (im & ~XMAX_CLEARED) | infomask_set)
    _U16.pack_into(item, _OFF_INFOMASK2, im2)
    struct.pack_into("<IH", item, _OFF_CTID, cblk, coff)
    if flags & F_PRUNE_XID:
        old = pg.get_prune_xid(page)
        if old == 0 or xmax < old:
            pg.set_prune_xid(page, xmax)
    if flags & F_PAGE_FULL:
        pg.set_flags(page, pg.get_flags(page) | pg.PD_PAGE_FULL)


def redo_update(page, blk, r) -> None:
    """Heap UPDATE: in a two-block record (the new version on another page) block 0 is
    that page (INSERT's data, INIT_PAGE honoured) and block 1 the old version's page;
    a one-block record is the update on one page (``redo_xmax`` with the new tuple)."""
    if blk.id == 0 and len(r.blocks) > 1:
        redo_insert(page, blk, r)
    else:
        redo_xmax(page, blk, r)


def redo_routines() -> dict:
    """(rmgr, opcode) -> routine, for ``minidb.recovery.LOGICAL_REDO``."""
    return {(rec.RM_HEAP, rec.XLOG_HEAP_INSERT): redo_insert,
            (rec.RM_HEAP, rec.XLOG_HEAP_DELETE): redo_xmax,
            (rec.RM_HEAP, rec.XLOG_HEAP_LOCK): redo_xmax,
            (rec.RM_HEAP, rec.XLOG_HEAP_UPDATE): redo_update,
            (rec.RM_HEAP, rec.XLOG_HEAP_HOT_UPDATE): redo_xmax}
