"""VACUUM's index pass (nbtree.c's ``btbulkdelete`` / ``btvacuumscan`` / ``btvacuumpage``).

``bulk_delete(backend, index, dead_tids)`` removes every leaf entry whose heap TID is in
``dead_tids`` (the (n, 2) array of (block, offset) that ``heap.vacuum.vacuum_table``
collected: line pointers that will become LP_UNUSED as soon as every index callback has
returned).  It also removes entries already marked LP_DEAD on the pages it visits.

The index is read in **physical order**, block 1 to the end, re-reading the file's
length at the end and going on while it grew.  That is enough to see every entry even
while concurrent inserts split pages, because a split always puts the moved half on a
*new* page at the end of the file (minidb never reuses index pages): an entry moved out
of a page we have not reached yet is found where it went; one moved out of a page we have
passed lands on a block we have not read yet.  (PostgreSQL recycles deleted pages and so
needs the vacuum cycle id in btpo_cycleid to notice splits that moved entries to a page it
already scanned; minidb leaves btpo_cycleid 0.)

Each leaf is taken with a **cleanup lock** (exclusive, and no other backend holds a pin),
as PostgreSQL takes one on every leaf, even those it does not change: a scan that is
between reading a batch and marking items dead holds no pin here, but it checks the
page's LSN before killing, and this pass's deletion changes it.  Membership is one
vectorized ``np.isin`` per page over the packed ``block << 16 | offset`` of its items.

``index_vacuum_callbacks(backend, table)`` returns one callback per index of the table,
for ``vacuum_table(..., index_callbacks=...)``.

Left out: deleting empty pages (pages are never unlinked from the tree, so an index does
not shrink; an empty leaf keeps its place and its key range), ``btvacuumcleanup``
statistics, the vacuum cycle id.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from minidb.index import btpage as bt
from minidb.index.rel import IndexRel, open_index, trace
from minidb.index.search import release
from minidb.storage import page as pg
from minidb.storage.bufmgr import SHARE
from minidb.storage.freelist import AccessStrategy
from minidb.storage.xloginsert import PageRecord
from minidb.wal.record import RM_BTREE, XLOG_BTREE_VACUUM

__all__ = ["bulk_delete", "index_vacuum_callbacks", "BulkDeleteResult"]


@dataclass
class BulkDeleteResult:
    pages_scanned: int = 0
    leaf_pages: int = 0
    entries_removed: int = 0       # entries whose heap TID was in the dead set
    dead_items_removed: int = 0    # other LP_DEAD (killed) entries removed on the way
    entries_remaining: int = 0


def _packed(dead_tids) -> np.ndarray:
    arr = np.asarray(dead_tids, dtype=np.int64).reshape(-1, 2)
    return np.unique((arr[:, 0] << 16) | arr[:, 1])


def bulk_delete(backend, index, dead_tids) -> BulkDeleteResult:
    """Remove the entries of ``index`` whose heap TIDs are in ``dead_tids``."""
    irel: IndexRel = open_index(backend, index)
    bm = backend.bufmgr
    rfn = irel.relfilenode
    dead = _packed(dead_tids)
    res = BulkDeleteResult()
    strategy = AccessStrategy("vacuum", backend.settings.vacuum_ring_kb, bm.nbuffers)
    blk = 1
    while True:
        nblocks = bm.smgr.nblocks(rfn)
        if blk >= nblocks:
            break
        for blk in range(blk, nblocks):
            b = bm.pin(rfn, blk, strategy=strategy)
            try:
                page = bm.page(b)
                bm.lock(b, SHARE)  # a page being set up by a split is locked until ready
                leaf = not pg.page_is_new(page) and bt.get_flags(page) & bt.BTP_LEAF
                bm.unlock(b)
                if leaf:  # (a page's level never changes)
                    bm.lock_for_cleanup(b)
                    _vacuum_page(bm, irel, b, blk, dead, res)
            finally:
                release(bm, b)
            res.pages_scanned += 1
        blk = nblocks
    trace(backend, irel,
          f"bulk delete: {res.entries_removed} entries for dead heap tuples and "
          f"{res.dead_items_removed} killed entries removed, "
          f"{res.entries_remaining} remain, {res.pages_scanned} pages")
    return res


def _vacuum_page(bm, irel: IndexRel, b: int, blk: int, dead: np.ndarray,
                 res: BulkDeleteResult) -> None:
    page = bm.page(b)
    res.leaf_pages += 1
    nxt = bt.opaque(page)[1]
    first = bt.first_data(nxt)
    lp_off, lp_flags, _lp_len = bt.leaf_items(page)
    n = len(lp_off)
    if n < first:
        return
    offsets = np.arange(first, n + 1)
    tids = bt.page_tids(page, offsets, lp_off)
    gone = np.isin(tids, dead) if dead.size else np.zeros(len(offsets), dtype=bool)
    killed = lp_flags[offsets - 1] == pg.LP_DEAD
    doomed = gone | killed
    flags = bt.get_flags(page)
    if doomed.any() or flags & bt.BTP_HAS_GARBAGE:
        wr = PageRecord(bm).add(b)
        if doomed.any():
            pg.delete_items(page, offsets[doomed].tolist())
        if flags & bt.BTP_HAS_GARBAGE:
            bt.set_flags(page, flags & ~bt.BTP_HAS_GARBAGE)  # no LP_DEAD item is left
        wr.log(RM_BTREE, XLOG_BTREE_VACUUM, 0, struct.pack("<H", int(doomed.sum())))
    res.entries_removed += int(gone.sum())
    res.dead_items_removed += int((killed & ~gone).sum())
    res.entries_remaining += int((~doomed).sum())


def index_vacuum_callbacks(backend, table: str) -> list:
    """One ``cb(dead_tids)`` per index of ``table``, for ``vacuum_table``."""
    t = backend.catalog.table(table)
    return [lambda dead_tids, name=name: bulk_delete(backend, name, dead_tids)
            for name in list(t.indexes)]
