"""Logging page changes, and replaying them (xloginsert.c, generic_xlog.c, xlogutils.c).

Every change to a relation page follows PostgreSQL's protocol (access/transam/README):

1. pin and exclusively lock every page to change; check everything that can fail;
2. ``rec = PageRecord(bm)``; ``rec.add(buf)`` for each page *before* changing it (a copy
   of the page is kept: the before-image), ``rec.add(buf, new=True)`` for a page that is
   (re)initialised from scratch;
3. change the pages;
4. ``lsn = rec.log(rmgr, info, xid, main_data)``: marks every page dirty (before the
   insert, so a checkpoint that begins meanwhile either precedes the record or finds the
   buffers dirty), inserts one WAL record with a block reference per page, sets each page's
   ``pd_lsn`` to the record's end;
5. unlock and unpin.

The block data of a changed page is the *delta* between its before- and after-image
(PostgreSQL's generic WAL: fragments of changed bytes, see ``minidb.wal.record``); a new
page is logged as an image; the WAL layer replaces the delta by an image on the first change
of a page after a checkpoint (full_page_writes).  The record's resource manager and opcode
name the operation (Heap INSERT, Btree SPLIT_L ...), and its main data carries the
operation's own fields for waldump; redo does not need them: ``redo_blocks`` replays every
page record the same way - restore the image, or paste the fragments if the page's LSN is
older than the record (``BLK_RESTORED`` / ``BLK_NEEDS_REDO`` / ``BLK_DONE``).

A caller may instead register a page with the operation's own data,
``rec.add(buf, data=...)`` (PostgreSQL's XLogRegisterBufData): no before-image is copied and
no delta computed; recovery replays such a block through the routine it keeps for the
record's resource manager and opcode (``minidb.recovery.LOGICAL_REDO``), which must rebuild
the page byte for byte.

``log_hint(bm, buf)`` is MarkBufferDirtyHint's logging half: the first hint-bit change of a
page after a checkpoint logs the page as ``XLOG_FPI_FOR_HINT`` (pages carry checksums, so a
torn write of a hint-only change must be repairable: PostgreSQL's wal_log_hints).

Departure: PostgreSQL logs logical ("physiological") records for every operation (a heap
insert carries the tuple; redo calls PageAddItem) and page images or generic deltas only
for a few; minidb logs the hot path logically (``minidb.heap.redo``: INSERT, DELETE, LOCK,
UPDATE, HOT_UPDATE; ``minidb.heap.prune`` / ``minidb.heap.vacuum``: PRUNE, VACUUM;
``minidb.index.redo``: INSERT_LEAF) and the byte delta for the rest (minidb/wal/README.md:
the list).
"""

from __future__ import annotations

import struct

import numpy as np

from minidb.storage import page as pg
from minidb.wal import record as rec

DELTA_LIMIT = 4096  # a delta larger than this is logged as an image instead
_LSN = struct.Struct("<Q")  # pd_lsn at offset 0 of every page


def unlogged(bm) -> set:
    """The relfilenodes of the temporary tables of the backend whose buffer manager ``bm``
    is (``minidb.sql.temp``): their pages are written without WAL, as PostgreSQL's local
    buffers are (only that backend writes them); a crash loses them, and the tables are
    dropped when the data directory is next opened."""
    got = bm.__dict__.get("unlogged_rels")
    if got is None:
        got = bm.unlogged_rels = set()
    return got


# A block registered with its logical data (``PageRecord.add(b, data=...)``) is kept as the
# tuple ``(data, REGBUF_* flags)`` among the before-images (which are None or an array).


_LOGICAL_FLAGS = rec.REGBUF_STANDARD | rec.REGBUF_LOGICAL
# a page the record's redo formats from scratch: no image, not read (RBM_ZERO_AND_LOCK)
_LOGICAL_INIT_FLAGS = rec.REGBUF_WILL_INIT | rec.REGBUF_LOGICAL


class PageRecord:
    """The pages changed together by one WAL record (see the module docstring)."""

    __slots__ = ("bm", "bufs", "befores")

    def __init__(self, bm):
        self.bm = bm
        self.bufs: list[int] = []
        self.befores: list = []

    def add(self, b: int, new: bool = False, data: bytes | None = None) -> "PageRecord":
        """Register buffer ``b`` before changing it.  ``new``: the page is (re)initialised
        and logged as an image.  ``data``: the operation's own description of the change
        (a *logical* block: no before-image is copied; redo calls the routine recovery
        registers for the record's resource manager and opcode, which must rebuild the
        page byte for byte, hint bits aside); with ``new`` too, the routine formats the
        page itself (``WILL_INIT``: no image is taken, and redo zeroes the buffer instead
        of reading the block, PostgreSQL's XLOG_HEAP_INIT_PAGE).  ``data`` may be given
        after the page changed (it is not a before-image), but must not be empty."""
        if b in self.bufs:
            return self
        self.bufs.append(b)
        if data is not None:
            self.befores.append((data, _LOGICAL_INIT_FLAGS if new else _LOGICAL_FLAGS))
        else:
            self.befores.append(None if new or self.bm.wal is None
                                else self.bm.page(b).copy())
        return self

    def log(self, rmgr: int, info: int, xid: int = 0, main: bytes = b"") -> int:
        bm = self.bm
        bufs = self.bufs
        for b in bufs:
            bm.mark_dirty(b)
        wal = bm.wal
        if wal is None:
            return 0
        skip = bm.__dict__.get("unlogged_rels")
        if skip and all(bm.buffer_tag(b)[0] in skip for b in bufs):
            return 0
        if len(bufs) == 1 and type(self.befores[0]) is tuple:
            # the usual record: one page with the operation's own data (the page's view
            # and its tag read inline: ``bm.page_view`` / ``bm.buffer_tag``)
            b = bufs[0]
            data, flags = self.befores[0]
            view = bm._pages[b] or bm.page_view(b)
            tag = bm._tag[b]
            lsn = wal.insert(rmgr, info, xid, main,
                             ((tag >> 34, (tag >> 32) & 3, tag & 0xFFFFFFFF, view,
                               flags, data),))
            _LSN.pack_into(view, 0, lsn)   # PageSetLSN
            return lsn
        blocks = []
        views = []   # each page as a memoryview (struct reads and writes cost less there)
        pages, tags = bm._pages, bm._tag
        for b, before in zip(self.bufs, self.befores):
            view = pages[b] or bm.page_view(b)
            views.append(view)
            if type(before) is tuple:
                # a logical block (a two-page heap UPDATE's): its tag read inline
                tag = tags[b]
                blocks.append((tag >> 34, (tag >> 32) & 3, tag & 0xFFFFFFFF, view,
                               before[1], before[0]))
                continue
            rfn, fork, blk = bm.buffer_tag(b)
            if before is None:
                blocks.append((rfn, fork, blk, view, rec.REGBUF_FORCE_IMAGE, b""))
                continue
            delta = rec.page_delta(before, bm.page(b))
            if len(delta) > DELTA_LIMIT:
                blocks.append((rfn, fork, blk, view, rec.REGBUF_FORCE_IMAGE, b""))
            else:
                blocks.append((rfn, fork, blk, view, rec.REGBUF_STANDARD, delta))
        lsn = wal.insert(rmgr, info, xid, main, blocks)
        for view in views:
            _LSN.pack_into(view, 0, lsn)   # PageSetLSN
        return lsn


def log_page(bm, b: int, rmgr: int = rec.RM_XLOG, info: int = rec.XLOG_FPI, xid: int = 0,
             main: bytes = b"") -> int:
    """Log the whole page of an exclusively locked buffer (log_newpage)."""
    return PageRecord(bm).add(b, new=True).log(rmgr, info, xid, main)


SMGR_CREATE = struct.Struct("<QB")     # relfilenode, fork
SMGR_TRUNCATE = struct.Struct("<QBI")  # relfilenode, fork, new number of blocks


def log_smgr_create(wal, rfn: int, fork: int = 0, xid: int = 0) -> int:
    """log_smgrcreate: a Storage CREATE record for a relation file just created (not
    flushed: a commit record later in the log flushes it).  Replay creates the file if it
    is missing; a file whose creating transaction did not commit is removed at the end of
    recovery (``minidb.recovery``)."""
    if wal is None:
        return 0
    return wal.insert(rec.RM_SMGR, rec.XLOG_SMGR_CREATE, xid, SMGR_CREATE.pack(rfn, fork))


def log_hint(bm, b: int, page) -> None:
    """XLogSaveBufferForHint: called by the buffer manager for a clean buffer whose hint
    bits just changed; logs an image if the page was last logged before the redo point."""
    wal = bm.wal
    sh = wal.shared
    if not sh.ctl[3] or pg.get_lsn(page) > sh.redo_lsn():   # WAL_FPW, WAL_REDO
        return
    rfn, fork, blk = bm.buffer_tag(b)
    skip = bm.__dict__.get("unlogged_rels")
    if skip and rfn in skip:
        return
    copy = page.copy()
    lsn = wal.insert(rec.RM_XLOG, rec.XLOG_FPI_FOR_HINT, 0, b"",
                     [(rfn, fork, blk, copy, rec.REGBUF_FORCE_IMAGE, b"")])
    pg.set_lsn(page, lsn)


# -- redo --------------------------------------------------------------------------------------

BLK_NEEDS_REDO, BLK_DONE, BLK_RESTORED, BLK_NOTFOUND = range(4)


def redo_blocks(bm, r: rec.Record, invalid: dict | None = None, logical=None) -> list[int]:
    """Replay the block references of a page record; returns each block's outcome.
    ``logical(page, blk, r)``: the resource manager's routine for logical blocks."""
    out = []
    for blk in r.blocks:
        out.append(redo_block(bm, r, blk, invalid, logical))
    return out


def redo_block(bm, r: rec.Record, blk: rec.BlockRef, invalid: dict | None = None,
               logical=None) -> int:
    smgr = bm.smgr
    if blk.will_init and blk.logical and not blk.has_image:
        # the routine formats the page: zero the buffer, never read the block
        if logical is None:
            raise ValueError(f"no redo routine for the logical block data of "
                             f"{rec.op_name(r.rmid, r.info)} at {rec.format_lsn(r.lsn)}")
        _redo_fresh(bm, r, blk, invalid, lambda page: logical(page, blk, r))
        return BLK_NEEDS_REDO
    if blk.has_image:
        _redo_fresh(bm, r, blk, invalid,
                    lambda page: rec.restore_image(page, blk.image, blk.hole_off, blk.hole_len))
        return BLK_RESTORED
    if not smgr.exists(blk.relfilenode, blk.fork) or \
            blk.block >= smgr.nblocks(blk.relfilenode, blk.fork):
        if invalid is not None:
            invalid[(blk.relfilenode, blk.fork, blk.block)] = r.lsn
        return BLK_NOTFOUND
    b = bm.pin_for_redo(blk.relfilenode, blk.fork, blk.block, zero=False)
    try:
        page = bm.page(b)
        if pg.page_is_new(page) and not blk.will_init:
            if invalid is not None:
                invalid[(blk.relfilenode, blk.fork, blk.block)] = r.lsn
            return BLK_NOTFOUND
        if pg.get_lsn(page) >= r.end:
            return BLK_DONE
        if blk.logical:
            if logical is None:
                raise ValueError(f"no redo routine for the logical block data of "
                                 f"{rec.op_name(r.rmid, r.info)} at {rec.format_lsn(r.lsn)}")
            logical(page, blk, r)
        else:
            rec.apply_delta(page, blk.data)
        pg.set_lsn(page, r.end)
        bm.mark_dirty(b)
        return BLK_NEEDS_REDO
    finally:
        bm.unlock(b)
        bm.unpin(b)


def _redo_fresh(bm, r: rec.Record, blk: rec.BlockRef, invalid: dict | None, fill) -> None:
    """A block whose content the record gives whole (an image, or a logical block that
    formats a new page): the buffer is zeroed, never read, then ``fill(page)`` writes it
    (XLogInitBufferForRedo)."""
    smgr = bm.smgr
    if not smgr.exists(blk.relfilenode, blk.fork):
        smgr.create(blk.relfilenode, blk.fork)
    b = bm.pin_for_redo(blk.relfilenode, blk.fork, blk.block, zero=True)
    try:
        page = bm.page(b)
        fill(page)
        if not pg.page_is_new(page):
            pg.set_lsn(page, r.end)
        bm.mark_dirty(b)
    finally:
        bm.unlock(b)
        bm.unpin(b)
    if invalid is not None:
        invalid.pop((blk.relfilenode, blk.fork, blk.block), None)


def page_lsns(pages: np.ndarray) -> np.ndarray:
    """pd_lsn of an (n, BLCKSZ) batch."""
    return np.ascontiguousarray(pages[:, :8]).view("<u8")[:, 0]
