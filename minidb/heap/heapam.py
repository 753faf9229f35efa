"""Heap access: insert, bulk insert, fetch by TID and the batch sequential scan.

A heap relation is a file of slotted pages (``minidb.storage.page``) holding rows in the
layout of its table (``minidb.heap.layout``).  Every page is reached through the buffer
manager; nothing here reads a file.  Every function takes the *backend* as its first
argument, like the rest of the heap: its buffer manager is ``backend.bufmgr``, its settings
``backend.settings`` (``heap_fillfactor``, the ring sizes, ``synchronize_seqscans``).

Insert (``heap_insert``).  The row is encoded once, then placed on a page with room:
first the page this backend inserted into last (PostgreSQL's ``rd_targblock``, here the
backend's ``heap_targets``: relfilenode -> block), else a page the free-space map
recommends, else a new page at the end of the file.  A page that turns out to be fuller
than the map said gets its real free space recorded before the next candidate is tried,
so the search always ends.  ``heap_fillfactor`` keeps that percentage of each page free
for later updates, as ``fillfactor`` does.

An insert is logged as a logical Heap INSERT (``minidb.heap.redo``: the offset and the
tuple; INSERT+INIT when it starts a new page, whose redo formats the page instead of
restoring an image).

The new version of an update that does not fit on its old page gets its page from
``buffer_for_update`` (RelationGetBufferForTuple with the other buffer): chosen as an
insert's page, never the old page, and returned exclusively locked together with the old
page, the lower block first; ``minidb.heap.modify`` places the tuple itself and logs one
Heap UPDATE for both pages.

Bulk insert (``heap_bulk_insert``).  For loading many rows: the rows are encoded by numpy
in one go, cut into page-sized groups, and each new page is built with three array copies
(tuple bytes, line pointers, ctids) through the bulk-write ring, so a load does not evict
the buffer pool.  New rows always go to new pages at the end, as a ``COPY`` into a
freshly created table does.

Sequential scan (``HeapScan``).  Page-at-a-time as in PostgreSQL, but a batch of pages at
a time: pin a run of pages (one vectorized lookup), share-lock them (in the same pass over
the partition locks when there is no ``prepare_pages`` hook: ``pin_run(share=True)``),
decode all their line pointers as one row slice per page, decide which tuples to return
while the locks are held, gather the requested columns with one fancy index per column
over the whole pool, then unlock and unpin in one pass (``unlock_unpin_batch``).  The
gather runs under the locks only to save that pass (the pins alone would do: buffer rule
2, nothing moves a tuple while a pin is held), and only when every requested column is
fixed-width: a gather of strings is slow, so such a batch unlocks before it.  When every page of the batch has
``PD_NO_NULLS`` (``pages_without_nulls``; storage/page.py invariant 4a) the gather skips
reading each tuple's t_infomask.  A scan of a table larger than a quarter of ``shared_buffers`` uses
the bulk-read ring and, if ``synchronize_seqscans`` is on, is *synchronized*
(``minidb.heap.syncscan``): it starts where another scan of the table is, wraps around the
end, and reports its position after each batch (the last multiple of 16 among the blocks
it reads next, so that another scan joining there finds the pages still in this scan's
ring).  One threshold for both, as PostgreSQL's ``initscan``.  The number of blocks is
fixed when the scan starts.  A run of at most ``SMALL_SCAN_PAGES`` pages (a tiny table:
pgbench's tellers and branches) takes the *small-batch path* instead, the same steps in
plain Python (``HeapScan._read_small``): the vectorized batch's fixed cost of ~40 numpy
steps would be most of such a scan.

A parallel participant gives ``HeapScan`` a ``block_source`` (``minidb.heap.parallel``'s
``BlockAllocator``) instead of a range: the scan then takes runs of blocks from it (the
rest of its current chunk, or a new chunk) and gathers several runs into one batch (up to
``batch_pages`` pages, and while cold at most half its ring's worth of pages read), so
that the fixed cost of a batch (about 0.2 ms of numpy steps) is paid per batch and not per
run: CPU per page does not depend on the allocation policy (``batches_read`` counts the
batches; a ``block`` scan's single-block runs make as many as a chunked scan's chunks).
The *reads* are still issued one run at a time, in the order the runs are allocated, each
when its run is pinned (a single-block run with ``pin``): the buffer manager and the
(simulated) kernel see a participant's requests in PostgreSQL's order.  After each pin the
scan tells the source how many of its blocks were read (``pages_read``, if it has one),
so that a synchronized parallel scan reports its position when a page is read.  A source
that is *paced by reads* (``paced_by_reads``: the ``block`` policy) gets its next block
only once the previous read completed: the I/O model charges a read by advancing the
reader's virtual clock and collects the time in sleeps of at least 1 ms, so without a wait
a participant would take several blocks within one such slice while another sleeps; the
scan calls the model's ``pace`` (sleep off what is owed) before each ``next_run``
(``paced_waits`` counts the waits).  As in PostgreSQL, where a participant reads and
processes a page before it asks for the next, the participants' single blocks then
alternate while their reads cost time, and each process's file sees a strided pattern.
What still differs is the processing: it is done per batch, so a participant whose reads
cost nothing (pages already in the OS cache) may take a batch's adjacent blocks before
another participant asks.  Chunked sources are not paced.  Once a batch has read
nothing, it (and the next) takes its runs first and pins each group of adjacent runs at
once (see ``_source_batches``): a warm participant costs what a serial scan costs per
batch.  Every participant has its own ring.

Invariants:
  1. A tuple's ``t_ctid`` is its own TID when it is stored.
  2. Every page written here has at most ``MAX_HEAP_TUPLES_PER_PAGE`` line pointers.

MVCC (which tuples a snapshot sees) belongs to the transaction layer: the scan takes a
``tuple_filter`` that decides, from the tuple headers of a whole batch, which to return,
and a ``prepare_pages`` hook where opportunistic pruning runs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from minidb.config import BLCKSZ
from minidb.errors import InternalError, ProgramLimitExceeded
from minidb.heap import redo
from minidb.heap.layout import FlatViews, HEAP_TUPLE_HEADER_SIZE, RowLayout
from minidb.heap.syncscan import SyncScanTable
from minidb.shmem import C as _COUNTER
from minidb.storage import freespace
from minidb.storage import page as pg
from minidb.storage.bufmgr import EXCLUSIVE, SHARE, BufferManager
from minidb.storage.freelist import AccessStrategy, is_bulk_read
from minidb.storage.htup import HEAP_HASNULL
from minidb.storage.xloginsert import PageRecord
from minidb.wal.record import (RM_HEAP, RM_HEAP2, XLOG_HEAP2_MULTI_INSERT, XLOG_HEAP_INIT_PAGE,
                               XLOG_HEAP_INSERT)

MAX_HEAP_TUPLES_PER_PAGE = (BLCKSZ - pg.PAGE_HEADER_SIZE) // (
    pg.maxalign(HEAP_TUPLE_HEADER_SIZE) + pg.ITEMID_SIZE)
SCAN_BATCH_PAGES = 1024  # capped by BufferManager.max_batch_pins (a backend's share of the pool)
TAIL_BATCH_PAGES = 32  # near a shared scan's end, batches shrink down to this (_source_batches)
EXTEND_BATCH_PAGES = 64

_XMIN = struct.Struct("<Q")     # t_xmin, at offset 0 of the tuple header
_OFFNUM = struct.Struct("<H")   # INSERT's main data: the offset number (MULTI_INSERT: count)
_CTID_OFFSET = 24  # t_ctid's offset inside the tuple header
_INFOMASK_OFFSET = 32  # t_infomask's
_LOWER_UPPER = struct.Struct("<HH")


@dataclass
class HeapRel:
    """What the heap needs to know of a table: its file, its row layout, its oid (for
    statistics) and which columns some index covers (an update that changes none of them
    may be HOT)."""
    name: str
    relfilenode: int
    layout: RowLayout
    oid: int = 0
    indexed_columns: frozenset = frozenset()


# MaxHeapTupleSize - (MaxHeapTuplesPerPage / 8 * sizeof(ItemIdData)), as in hio.c
_NEARLY_EMPTY_FREE_SPACE = (BLCKSZ - pg.maxalign(pg.PAGE_HEADER_SIZE + pg.ITEMID_SIZE)
                            - MAX_HEAP_TUPLES_PER_PAGE // 8 * pg.ITEMID_SIZE)


def _save_free_space(settings) -> int:
    return BLCKSZ * (100 - settings.heap_fillfactor) // 100


# ---------------------------------------------------------------------------------------------
# insert
def heap_insert(backend, rel: HeapRel, values, *, xmin: int, cmin: int = 0
                ) -> tuple[int, int]:
    """Insert one row; returns its TID (block, offset)."""
    return insert_tuple(backend, rel, rel.layout.encode_row(values, xmin, cmin, 0, 0, 0))


def _room_wanted(backend, data_len: int) -> tuple[int, int]:
    """(maxaligned size, free space wanted on a page) for a tuple of ``data_len`` bytes:
    the row plus what fillfactor keeps free, but never more than a nearly empty page has
    (PostgreSQL's nearlyEmptyFreeSpace): else an empty page would be refused by the check
    yet recommended by the FSM forever.  ProgramLimitExceeded for a row that fits on no
    page."""
    size = pg.maxalign(data_len)
    if size > BLCKSZ - pg.PAGE_HEADER_SIZE - pg.ITEMID_SIZE:
        raise ProgramLimitExceeded(f"row is too big: size {data_len}, maximum size "
                                   f"{BLCKSZ - pg.PAGE_HEADER_SIZE - pg.ITEMID_SIZE}")
    need = size + _save_free_space(backend.settings)
    if need > _NEARLY_EMPTY_FREE_SPACE:
        need = max(size, _NEARLY_EMPTY_FREE_SPACE)
    return size, need


def insert_tuple(backend, rel: HeapRel, data: bytes) -> tuple[int, int]:
    """Place encoded tuple bytes on a page with room; sets t_ctid; returns the TID."""
    bm: BufferManager = backend.bufmgr
    targets = backend.heap_targets
    rfn = rel.relfilenode
    need = _room_wanted(backend, len(data))[1]
    target = targets.get(rfn, -1)
    full, avail = -1, 0   # a page just found too full (and its room): recorded in the FSM
                          # by the next search
    while True:
        # the last target is checked with has_block (an fstat only past the largest size
        # this process saw: heaps never shrink); the size is asked only for the FSM
        if target < 0 or not bm.smgr.has_block(rfn, target):
            target = _fsm_target(bm, rfn, need, full, avail)
            if target < 0:
                return _insert_on_new_page(backend, rel, data)
        b = bm.pin_lock(rfn, target, EXCLUSIVE)
        try:
            page = bm.page(b)
            avail = pg.heap_free_space(page, MAX_HEAP_TUPLES_PER_PAGE)
            if avail >= need:
                off, start, flags = pg.add_heap_tuple(page, data, target,
                                                      MAX_HEAP_TUPLES_PER_PAGE)
                PageRecord(bm).add(b, data=redo.insert_data(
                    off, flags, memoryview(page)[start:start + len(data)])).log(
                    RM_HEAP, XLOG_HEAP_INSERT, _XMIN.unpack_from(data, 0)[0], _OFFNUM.pack(off))
                targets[rfn] = target
                return target, off
        finally:
            bm.unlock_unpin(b)
        full = target
        target = -1


def _fsm_target(bm, rfn: int, need: int, full: int, avail: int) -> int:
    """The next page the free-space map offers with ``need`` bytes, or -1; ``full`` (>= 0)
    is a page just found too full, recorded with its ``avail`` bytes in the same visit."""
    if full >= 0:
        return freespace.record_and_search(bm, rfn, full, avail, need, bm.smgr.nblocks(rfn),
                                           start=full + 1)
    return freespace.search(bm, rfn, need, bm.smgr.nblocks(rfn))


def buffer_for_update(backend, rel: HeapRel, data_len: int, other: int, other_block: int,
                      other_avail: int) -> tuple[int, int, bool]:
    """A page for the new version of an update that does not fit on its old page
    (PostgreSQL's RelationGetBufferForTuple with ``otherBuffer``): returns (block, buffer,
    fresh) with the chosen page pinned and BOTH it and ``other`` (the old page's buffer:
    pinned, unlocked on entry) exclusively locked, lower block first.  The page is chosen
    as for an insert (the backend's target block, the free-space map, else a new page at
    the end), never the old page itself (``other_block``: it was found with
    ``other_avail`` bytes free, too few, and cannot gain any while our pin keeps pruning
    away).  ``fresh``: a page this call added, still all zeros - the caller formats it and
    logs the record with XLOG_HEAP_INIT_PAGE.

    A page found fuller than the map said (another backend filled it between the search
    and the lock) is recorded in the map and the search goes on, both locks released
    first.  A new page is added and exclusively locked by ``bm.extend``; its block is above
    the old page's, so the old page's lock is then taken conditionally, and when that
    fails the new page's lock is given up while waiting for it (no lock held on a higher
    block while waiting for a lower one); nobody else places a tuple on a page the map and
    their target blocks do not know yet, so the page is still empty once relocked (checked
    all the same).  On an error ``other`` is left pinned and unlocked."""
    bm: BufferManager = backend.bufmgr
    targets = backend.heap_targets
    rfn = rel.relfilenode
    need = _room_wanted(backend, data_len)[1]
    target = targets.get(rfn, -1)
    full, avail = -1, 0
    while True:
        if target == other_block:
            full, avail, target = target, other_avail, -1
        if target < 0 or not bm.smgr.has_block(rfn, target):
            target = _fsm_target(bm, rfn, need, full, avail)
            if target == other_block:
                continue
            if target < 0:
                return _new_page_for_update(backend, rel, other, need)
        if target < other_block:
            b = bm.pin_lock(rfn, target, EXCLUSIVE)
            try:
                bm.lock(other, EXCLUSIVE)
            except BaseException:
                bm.unlock_unpin(b)
                raise
        else:
            b = bm.pin(rfn, target)
            try:
                bm.lock(other, EXCLUSIVE)
                bm.lock(b, EXCLUSIVE)
            except BaseException:
                _release_pair(bm, b, other)
                raise
        avail = pg.heap_free_space(bm.page(b), MAX_HEAP_TUPLES_PER_PAGE)
        if avail >= need:
            targets[rfn] = target
            return target, b, False
        _release_pair(bm, b, other)
        full = target
        target = -1


def _release_pair(bm, b: int, other: int) -> None:
    """Undo ``buffer_for_update``'s locks: both pages unlocked, ``b`` unpinned."""
    if bm.held[other]:
        bm.unlock(other)
    if bm.held[b]:
        bm.unlock(b)
    bm.unpin(b)


def _new_page_for_update(backend, rel: HeapRel, other: int, need: int
                         ) -> tuple[int, int, bool]:
    bm: BufferManager = backend.bufmgr
    block, bufs = bm.extend(rel.relfilenode, 1)
    b = bufs[0]   # pinned and exclusively locked, all zeros
    try:
        if not bm.conditional_lock(other, EXCLUSIVE):
            bm.unlock(b)
            bm.lock(other, EXCLUSIVE)
            bm.lock(b, EXCLUSIVE)
        page = bm.page(b)
        fresh = pg.page_is_new(page)
        if not fresh and pg.heap_free_space(page, MAX_HEAP_TUPLES_PER_PAGE) < need:
            raise InternalError(   # pragma: no cover - nobody else knows the page yet
                f'page {block} just added to "{rel.name}" was filled by another backend')
    except BaseException:
        _release_pair(bm, b, other)
        raise
    backend.heap_targets[rel.relfilenode] = block
    return block, b, fresh


def _insert_on_new_page(backend, rel: HeapRel, data: bytes) -> tuple[int, int]:
    bm: BufferManager = backend.bufmgr
    block, bufs = bm.extend(rel.relfilenode, 1)
    b = bufs[0]   # pinned and exclusively locked
    try:
        page = bm.page(b)
        pg.init_page(page)
        off, start, flags = pg.add_heap_tuple(page, data, block, MAX_HEAP_TUPLES_PER_PAGE)
        avail = pg.heap_free_space(page, MAX_HEAP_TUPLES_PER_PAGE)
        PageRecord(bm).add(b, new=True, data=redo.insert_data(
            off, flags, memoryview(page)[start:start + len(data)])).log(
            RM_HEAP, XLOG_HEAP_INSERT | XLOG_HEAP_INIT_PAGE, _XMIN.unpack_from(data, 0)[0],
            _OFFNUM.pack(off))
    finally:
        bm.unlock_unpin(b)
    freespace.record(bm, rel.relfilenode, block, avail)
    backend.heap_targets[rel.relfilenode] = block
    return block, off


def heap_bulk_insert(backend, rel: HeapRel, columns: dict, nrows: int, *,
                     xmin: int, cmin: int = 0, return_tids: bool = False):
    """Append ``nrows`` rows given as columns (numpy arrays or sequences) on new pages.

    Returns ``nrows``, or with ``return_tids`` the rows' TIDs as two int64 arrays (blocks,
    offsets) in row order, for the index entries of a bulk load."""
    if nrows == 0:
        return (np.empty(0, np.int64), np.empty(0, np.int64)) if return_tids else 0
    bm: BufferManager = backend.bufmgr
    settings = backend.settings
    data, lengths = rel.layout.encode_batch(columns, nrows, xmin=xmin, cmin=cmin)
    lengths = np.asarray(lengths, dtype=np.int64)
    padded = (lengths + 7) & ~7
    ends = np.cumsum(padded)
    starts = ends - padded
    hasnull = (data[starts + _INFOMASK_OFFSET] & HEAP_HASNULL) != 0  # pages without: PD_NO_NULLS
    cost_end = np.cumsum(padded + pg.ITEMID_SIZE)  # bytes used by rows 0..i on fresh pages
    room = BLCKSZ - pg.PAGE_HEADER_SIZE - _save_free_space(settings)
    # cut rows into pages: each page takes as many as fit (and at most the line-pointer cap)
    cuts = [0]
    while cuts[-1] < nrows:
        i = cuts[-1]
        used_before = cost_end[i - 1] if i else 0
        j = int(np.searchsorted(cost_end, used_before + room, side="right"))
        j = min(max(j, i + 1), i + MAX_HEAP_TUPLES_PER_PAGE, nrows)
        cuts.append(j)
    strategy = AccessStrategy("bulkwrite", settings.bulkwrite_ring_kb, bm.nbuffers)
    npages = len(cuts) - 1
    fsm_blocks, fsm_avail = [], []
    # Never hold more new pages pinned than the ring has buffers: with a small pool, 64
    # pinned pages would leave the clock sweep nothing to evict.
    step = min(EXTEND_BATCH_PAGES, strategy.nbuffers)
    for first_page in range(0, npages, step):
        k = min(step, npages - first_page)
        block0, bufs = bm.extend(rel.relfilenode, k, strategy=strategy)
        try:
            for n, b in enumerate(bufs):
                i, j = cuts[first_page + n], cuts[first_page + n + 1]
                wr = PageRecord(bm).add(b, new=True)
                avail = _fill_page(bm.page(b), block0 + n, data, starts[i:j], ends[j - 1],
                                   lengths[i:j], not hasnull[i:j].any())
                fsm_blocks.append(block0 + n)
                fsm_avail.append(avail)
                wr.log(RM_HEAP2, XLOG_HEAP2_MULTI_INSERT | XLOG_HEAP_INIT_PAGE, xmin,
                       _OFFNUM.pack(j - i))
        finally:
            for b in bufs:
                bm.unlock(b)
                bm.unpin(b)
    freespace.record_many(bm, rel.relfilenode, np.array(fsm_blocks), np.array(fsm_avail))
    if not return_tids:
        return nrows
    cuts_arr = np.asarray(cuts, dtype=np.int64)
    per_page = np.diff(cuts_arr)
    blocks = np.repeat(np.asarray(fsm_blocks, dtype=np.int64), per_page)
    offsets = np.arange(nrows, dtype=np.int64) - np.repeat(cuts_arr[:-1], per_page) + 1
    return blocks, offsets


def _fill_page(page: np.ndarray, block: int, data: np.ndarray, starts: np.ndarray,
               end: int, lengths: np.ndarray, no_nulls: bool) -> int:
    """Build a heap page from consecutive encoded rows; returns its free space.
    ``no_nulls``: no row has a NULL, the page gets PD_NO_NULLS (see ``pages_without_nulls``)."""
    pg.init_page(page)
    if no_nulls:
        pg.set_flags(page, pg.PD_NO_NULLS)
    m = len(starts)
    first = int(starts[0])
    total = int(end) - first
    upper = BLCKSZ - total
    page[upper:] = data[first:int(end)]
    lp_off = upper + (starts - first)
    lower = pg.PAGE_HEADER_SIZE + pg.ITEMID_SIZE * m
    page[pg.PAGE_HEADER_SIZE:lower].view("<u4")[:] = (
        lp_off | (pg.LP_NORMAL << 15) | (lengths << 17)).astype(np.uint32)
    page.view("<u4")[(lp_off + _CTID_OFFSET) >> 2] = block
    page.view("<u2")[(lp_off + _CTID_OFFSET + 4) >> 1] = np.arange(1, m + 1, dtype=np.uint16)
    _LOWER_UPPER.pack_into(page, pg.OFF_LOWER, lower, upper)
    return pg.heap_free_space(page, MAX_HEAP_TUPLES_PER_PAGE)


# ---------------------------------------------------------------------------------------------
# fetch
def heap_fetch(backend, rel: HeapRel, tid: tuple[int, int]) -> tuple | None:
    """The row at ``tid`` if its line pointer is LP_NORMAL, else None (no MVCC here)."""
    bm: BufferManager = backend.bufmgr
    block, off = tid
    if off < 1 or not bm.smgr.has_block(rel.relfilenode, block):
        return None
    b = bm.pin_lock(rel.relfilenode, block, SHARE)
    try:
        page = bm.page(b)
        if off > pg.max_offset(page) or pg.get_item_id(page, off)[1] != pg.LP_NORMAL:
            data = None
        else:
            data = bytes(pg.get_item(page, off))
    finally:
        bm.unlock_unpin(b)
    return None if data is None else rel.layout.decode(data)


# ---------------------------------------------------------------------------------------------
# scan
class Batch:
    """The rows a scan returns from a run of pages: requested columns, and TIDs on demand
    (a ``count(*)`` never needs them, so they are computed only when asked for)."""

    __slots__ = ("columns", "_first_block", "_positions", "_width", "_n", "_tids")

    def __init__(self, columns, first_block, positions, width, n):
        self.columns = columns  # per requested column: (values, null mask or None)
        self._first_block = first_block
        self._positions = positions
        self._width = width
        self._n = n
        self._tids = None

    def __len__(self) -> int:
        return self._n

    def _compute_tids(self):
        if self._tids is None:
            page_idx, item_idx = positions_to_items(self._positions, self._width, self._n)
            fb = self._first_block  # a block number, or one per page (a gathered batch)
            blocks = fb[page_idx] if isinstance(fb, np.ndarray) else fb + page_idx
            self._tids = (blocks, item_idx + 1)
        return self._tids

    @property
    def blocks(self) -> np.ndarray:
        return self._compute_tids()[0]

    @property
    def offsets(self) -> np.ndarray:
        return self._compute_tids()[1]


class HeapScan:
    """Sequential scan of a heap in batches of pages (see the module docstring).

    Two hooks let the layers above take part without this module knowing MVCC:

    * ``prepare_pages(bufs, first_block)`` is called with each batch's pinned but
      unlocked buffers (opportunistic pruning goes here: it needs a cleanup lock);
    * ``tuple_filter(views, starts, bufs) -> bool mask`` is called while the batch is
      share-locked, with the absolute byte offsets of every LP_NORMAL tuple, and says
      which tuples the scan returns (visibility; it may also set hint bits, since it runs
      under the share locks, and mark the buffers dirty as hints).

    ``syncscan``: None (the default) synchronizes a scan of a table larger than
    ``shared_buffers / 4`` when ``synchronize_seqscans`` is on and no ``start_block`` was
    asked for; False never; True always.  ``block_source``: an object with ``nblocks`` and
    ``next_run(max_n) -> (block, n) | None`` (a parallel participant's block allocator);
    the scan then reads what it hands out (see the module docstring).
    """

    def __init__(self, backend, rel: HeapRel, columns: list[int], *,
                 batch_pages: int = SCAN_BATCH_PAGES, tuple_filter=None, prepare_pages=None,
                 use_ring: bool | None = None, start_block: int = 0,
                 syncscan: bool | None = None, block_source=None):
        bm: BufferManager = backend.bufmgr
        settings = backend.settings
        self.backend = backend
        self.bm = bm
        self.rel = rel
        self.columns = list(columns)
        self.batch_pages = batch_pages
        self.tuple_filter = tuple_filter
        self.prepare_pages = prepare_pages
        self.block_source = block_source
        self.nblocks = (block_source.nblocks if block_source is not None
                        else bm.smgr.nblocks(rel.relfilenode))
        large = is_bulk_read(self.nblocks, bm.nbuffers)
        if use_ring is None:
            use_ring = large
        self.strategy = (AccessStrategy("bulkread", settings.bulkread_ring_kb, bm.nbuffers)
                         if use_ring else None)
        self.start_block = start_block if start_block < self.nblocks else 0
        self.syncscan: SyncScanTable | None = None
        if syncscan is None:
            syncscan = large and start_block == 0 and settings.synchronize_seqscans
        if syncscan and block_source is None and self.nblocks:
            self.syncscan = SyncScanTable(bm.seg, bm.locks.syncscan)
            self.start_block = self.syncscan.get_location(rel.relfilenode, self.nblocks)
            if settings.trace_syncscan:
                _trace_syncscan(rel, self.start_block, self.nblocks)
        self.views = FlatViews(bm.seg.pool_flat)
        # a variable-length column makes the gather slow (Python strings): it then runs
        # after the share locks are released, under the pins only (see _read_pages)
        self._slow_gather = any(not rel.layout.columns[c].type.fixed for c in self.columns)
        self.pages_scanned = 0
        self.tuples_seen = 0  # LP_NORMAL tuples looked at (before the filter)
        self.batches_read = 0  # decode batches (one page_items + tuple_filter + gather each)
        self.paced_waits = 0  # waits for a read before taking the next block (paced source)

    def __iter__(self):
        return self.batches()

    def batches(self):
        if self.block_source is not None:
            yield from self._source_batches()
            return
        n = self.nblocks
        rfn = self.rel.relfilenode
        ss = self.syncscan
        pos = 0
        while pos < n:
            block = (self.start_block + pos) % n
            want = min(self.batch_pages, n - pos, n - block)
            if want <= SMALL_SCAN_PAGES and want <= self.bm.max_batch_pins:
                # a tiny table (or the tail of a run): plain Python, see _read_small
                pos += want
                self.pages_scanned += want
                if ss is not None:
                    ss.report_run(rfn, block, want, n)
                batch = self._read_small(block, want)
                if batch is not None and len(batch):
                    yield batch
                continue
            # without a prepare_pages hook the pages are share-locked as they are pinned
            fuse = self.prepare_pages is None
            bufs = self.bm.pin_run(rfn, block, want, strategy=self.strategy, share=fuse)
            pos += len(bufs)
            self.pages_scanned += len(bufs)
            if ss is not None:
                try:
                    ss.report_run(rfn, block, len(bufs), n)
                except BaseException:
                    self.bm.release_batch(bufs)
                    raise
            batch = self._read_pages(bufs, block, locked=fuse)
            if batch is not None and len(batch):
                yield batch

    def _source_batches(self):
        """Batches of the runs a block source hands out, several runs to a batch.

        Cold (the previous batch read pages, or this is the first): take a run, pin it
        (which reads its missing pages), then the next, one at a time in the order they
        are allocated, until the batch holds ``batch_pages`` pages or has read half its
        ring's worth (the ring must keep buffers to reuse); then decode them all at once.
        The reads reach the buffer manager and the (simulated) kernel one run at a time,
        in allocation order, as a PostgreSQL participant's do, but the CPU cost of
        decoding is paid per batch, not per run: a ``block`` scan's single-block runs
        decode in batches of the same size as a chunked or serial scan's
        (``batches_read`` counts them).  Warm (the previous batch read nothing, or every
        page pinned so far in this batch was a hit): take the batch's runs first - with
        the source's ``next_runs`` when it has one, one lock round trip for all the
        chunks, as many as end at a chunk's end (the source's ``whole_chunks``) - then
        pin each group of adjacent runs with one ``pin_run`` (one
        participant's chunks are mostly adjacent: it takes them in a burst while the
        others work); while the batch has read nothing, ``pin_run``'s own cut (half the
        ring's worth of misses) is the read budget, so a warm group is one call.  Runs
        taken but not pinned (a pin limit, or the read budget) are pinned first in the
        next batch; at most one batch's worth is ever held.  A source paced by reads (the
        ``block`` policy) is asked for its next run, cold, only after the I/O model's
        ``pace``: the previous block's read has completed.  A source shared with other
        participants (``participants`` > 1, with ``remaining``): near its end a warm batch
        takes at most half of what is left, down to ``TAIL_BATCH_PAGES``, so that the
        participants finish together.
        """
        bm, src, strategy = self.bm, self.block_source, self.strategy
        rfn = self.rel.relfilenode
        target = max(1, min(self.batch_pages, bm.max_batch_pins))
        # pages one batch may read: half the ring (pin_run's own rule), else a batch
        read_cap = max(1, strategy.nbuffers // 2) if strategy is not None else target
        stats, reads = bm.stats, _COUNTER["buffers_read"]
        one_block_reads = self.backend.settings.io_combine_limit == 1
        take_runs = getattr(src, "next_runs", None)  # optional: a batch's runs at once
        # optional: a batch size rounded to end at a chunk's end (no piece of a chunk left
        # to start the next batch with a run of its own)
        whole_chunks = getattr(src, "whole_chunks", None)
        # optional: what is left to hand out, when others share the source - near the end a
        # warm batch takes at most half of it, so that the participants finish together
        # instead of one idling while another decodes a whole last batch
        left = getattr(src, "remaining", None) if getattr(src, "participants", 1) > 1 else None
        pages_read = getattr(src, "pages_read", None)  # optional: told what was read
        # paced (the block policy): the next block is taken once the previous read
        # completed - the I/O model's owed time is slept off first (with no model a read
        # completes when pin returns)
        io = bm.smgr.iomodel if getattr(src, "paced_by_reads", False) else None
        queue: list[list[int]] = []  # [first block, count] taken and not pinned yet

        def take_batch(want: int) -> bool:
            """Queue runs until ``want`` blocks are queued (adjacent runs merged, to be
            pinned by one ``pin_run``); True if the source is exhausted."""
            queued = sum(c for _, c in queue)
            if queued >= want:
                return False
            ended = False
            if take_runs is not None:  # one lock round trip for all
                runs, ended = take_runs(want - queued)
            else:
                runs = []
                while queued < want:
                    r = src.next_run(want - queued)
                    if r is None:
                        ended = True
                        break
                    runs.append(r)
                    queued += r[1]
            for first, count in runs:
                if queue and queue[-1][0] + queue[-1][1] == first:
                    queue[-1][1] += count  # adjacent: one pin_run for both
                else:
                    queue.append([first, count])
            return ended
        warm = False
        done = False
        while True:
            firsts: list[int] = []
            counts: list[int] = []
            pinned: list[np.ndarray] = []
            have = 0
            read_before = int(stats[reads])
            # the runs' reads are issued one at a time as they are pinned, and verified
            # together when the batch is complete (one checksum pass, not one per run)
            bm.start_read_batch()
            try:
                if warm and not done:  # take the whole batch's runs first
                    want = target
                    if left is not None:
                        rest = left()
                        if rest < 2 * target:
                            want = min(target, max(TAIL_BATCH_PAGES, rest // 2))
                    if whole_chunks is not None and not queue:
                        want = whole_chunks(want)
                    done = take_batch(want)
                while have < target:
                    budget = read_cap - (int(stats[reads]) - read_before) - bm.pending_reads()
                    if budget <= 0:
                        break  # read enough for one batch: decode it
                    if not queue:
                        if warm or done:
                            break
                        if have and budget == read_cap:
                            # cold so far, but every page pinned was a hit: the table is
                            # warm after all, take the rest of the batch's runs at once
                            warm = True
                            done = take_batch(target - have)
                            continue
                        if io is not None and io.pace():
                            self.paced_waits += 1
                        r = src.next_run(min(target - have, budget))
                        if r is None:
                            done = True
                            break
                        queue.append([r[0], r[1]])
                    block, n = queue[0]
                    # nothing read yet in this batch: pin_run's own cut (half the ring's
                    # worth of reads) is the budget, so a warm run is pinned in one call
                    want = min(n, target - have, budget if budget < read_cap else n)
                    if want == 1 or (want <= SMALL_SCAN_PAGES and one_block_reads):
                        # a few blocks read one at a time anyway: scalar pins are cheaper
                        # than pin_run's vectorized steps
                        bufs = np.empty(want, dtype=np.int64)
                        for j in range(want):
                            try:
                                bufs[j] = bm.pin(rfn, block + j, strategy=strategy)
                            except BaseException:
                                for b in bufs[:j].tolist():
                                    bm.unpin(b)
                                raise
                    else:
                        bufs = bm.pin_run(rfn, block, want, strategy=strategy)
                    k = len(bufs)
                    if pages_read is not None:  # the syncscan position, as pages are read
                        pages_read(k)
                    firsts.append(block)
                    counts.append(k)
                    pinned.append(bufs)
                    have += k
                    if k < n:
                        queue[0] = [block + k, n - k]
                    else:
                        queue.pop(0)
                    if k < want:
                        break  # a pin limit: process what we have
                bm.finish_reads()
            except BaseException:
                bm.abandon_reads()
                for bufs in pinned:
                    bm.unpin_batch(bufs)
                raise
            if not pinned:
                if done and not queue:
                    return
                warm = False
                continue
            warm = int(stats[reads]) == read_before
            self.pages_scanned += have
            if len(pinned) == 1:
                batch = self._read_pages(pinned[0], firsts[0])
            else:
                blocks = np.concatenate([np.arange(f, f + k, dtype=np.int64)
                                         for f, k in zip(firsts, counts)])
                batch = self._read_pages(np.concatenate(pinned), blocks)
            if batch is not None and len(batch):
                yield batch

    def _read_pages(self, bufs: np.ndarray, first_block, locked: bool = False
                    ) -> Batch | None:
        """``first_block``: the block of ``bufs[0]`` when the pages are consecutive, else an
        array with the block of every page (``prepare_pages`` then gets the first one: the
        pruning hook names pages by their buffer tags).  ``locked``: ``bufs`` come
        share-locked already (``pin_run(share=True)``: no ``prepare_pages`` hook, which
        needs them unlocked).  Fixed-width columns are gathered before the locks go, so
        that one ``unlock_unpin_batch`` releases both: one pass over the partition locks;
        a batch with a variable-length column (its gather builds Python strings, many
        times slower) unlocks first, so writers of those pages do not wait for it."""
        bm, v = self.bm, self.views
        self.batches_read += 1
        if not locked:
            try:
                if self.prepare_pages is not None:
                    self.prepare_pages(bufs, first_block if not isinstance(
                        first_block, np.ndarray) else int(first_block[0]))
                bm.lock_share_batch(bufs)
            except BaseException:
                bm.release_batch(bufs)  # those locked before a lock wait failed, too
                raise
        try:
            positions, width, tuple_starts = page_items(v, bufs)
            self.tuples_seen += len(tuple_starts)
            if self.tuple_filter is not None and len(tuple_starts):
                keep = self.tuple_filter(v, tuple_starts, bufs)
                if positions is None:
                    positions = np.arange(len(tuple_starts), dtype=np.int64)
                positions, tuple_starts = positions[keep], tuple_starts[keep]
            if not len(tuple_starts):
                return None
            no_nulls = pages_without_nulls(v, bufs)
            if self._slow_gather:
                # strings take long to gather: not under the locks (the pins suffice)
                bm.unlock_batch(bufs)
                try:
                    cols = self.rel.layout.gather(v, tuple_starts, self.columns,
                                                  no_nulls=no_nulls)
                finally:
                    bm.unpin_batch(bufs)
                    bufs = None
            else:
                cols = self.rel.layout.gather(v, tuple_starts, self.columns,
                                              no_nulls=no_nulls)
        finally:
            if bufs is not None:
                bm.unlock_unpin_batch(bufs)
        return Batch(cols, first_block, positions, width, len(tuple_starts))


    def _read_small(self, block: int, count: int) -> Batch | None:
        """``_read_pages`` for a run of at most ``SMALL_SCAN_PAGES`` pages, done in plain
        Python (the small-batch path).

        The vectorized path costs ~40 numpy steps per batch whatever its size (``pin_run``,
        ``page_items``, ``lock_share_batch`` / ``unlock_batch``, ``unpin_batch``), ~100 us:
        more than an OLTP statement's whole scan of a one-page table (pgbench_tellers and
        pgbench_branches, which the planner seq-scans by cost as PostgreSQL does).  Here the
        same steps are done page by page and line pointer by line pointer: pin (one page:
        ``pin``; several: still one ``pin_run``, so a cold run is read with the same single
        ``preadv``), the ``prepare_pages`` hook, a share lock per page, the LP_NORMAL items
        read with ``struct``, the ``tuple_filter`` under the locks, unlock, the column
        gather under the pins, unpin.  Same pins, locks, hooks, filter calls, counters
        (buffers hit / read, ``pages_scanned``, ``tuples_seen``) and the same ``Batch``
        (positions on the same grid) as ``_read_pages``; ``tests/heap/test_small_scan.py``
        runs both and compares.
        """
        bm, v = self.bm, self.views
        rfn = self.rel.relfilenode
        self.batches_read += 1
        if count == 1:
            bufs = [bm.pin(rfn, block, strategy=self.strategy)]
        else:
            bufs = bm.pin_run(rfn, block, count, strategy=self.strategy).tolist()
        barr = None
        try:
            if self.prepare_pages is not None:
                barr = np.array(bufs, dtype=np.int64)
                self.prepare_pages(barr, block)
            locked = []
            try:
                for b in bufs:
                    bm.lock(b, SHARE)
                    locked.append(b)
                positions, width, tuple_starts = _page_items_small(v.flat, bufs)
                self.tuples_seen += len(tuple_starts)
                if self.tuple_filter is not None and len(tuple_starts):
                    if barr is None:
                        barr = np.array(bufs, dtype=np.int64)
                    keep = self.tuple_filter(v, tuple_starts, barr)
                    if positions is None:
                        positions = np.arange(len(tuple_starts), dtype=np.int64)
                    positions, tuple_starts = positions[keep], tuple_starts[keep]
            finally:
                for b in locked:
                    bm.unlock(b)
            if not len(tuple_starts):
                return None
            cols = self.rel.layout.gather(v, tuple_starts, self.columns)
        finally:
            for b in bufs:
                bm.unpin(b)
        return Batch(cols, block, positions, width, len(tuple_starts))


# Runs of at most this many pages take HeapScan's small-batch path (``_read_small``).
SMALL_SCAN_PAGES = 4
_LP_FLAGS, _LP_NORMAL_BITS = 0x18000, pg.LP_NORMAL << 15
_U16 = struct.Struct("<H")


def _page_items_small(flat, bufs: list[int]):
    """``page_items`` for a few share-locked pages, read with ``struct`` (same results:
    positions on a (len(bufs), width) grid or None, width, absolute tuple starts)."""
    lps = []
    for b in bufs:
        base = b * BLCKSZ
        lower = _U16.unpack_from(flat, base + pg.OFF_LOWER)[0]
        k = max(lower - pg.PAGE_HEADER_SIZE, 0) >> 2
        lps.append((base, struct.unpack_from(f"<{k}I", flat, base + pg.PAGE_HEADER_SIZE)))
    width = max(len(lp) for _, lp in lps)
    if width == 0:
        return np.empty(0, dtype=np.int64), 0, np.empty(0, dtype=np.int64)
    positions, starts = [], []
    for i, (base, lp) in enumerate(lps):
        row = i * width
        for j, x in enumerate(lp):
            if x & _LP_FLAGS == _LP_NORMAL_BITS:
                positions.append(row + j)
                starts.append(base + (x & 0x7FFF))
    starts_arr = np.array(starts, dtype=np.int64)
    if len(positions) == len(lps) * width:
        return None, width, starts_arr
    return np.array(positions, dtype=np.int64), width, starts_arr


def _trace_syncscan(rel: HeapRel, start: int, nblocks: int) -> None:
    import os
    import sys
    print(f"[syncscan pid {os.getpid()}] \"{rel.name}\" (base/{rel.relfilenode}): start block "
          f"{start} of {nblocks}", file=sys.stderr)


def page_items(v: FlatViews, bufs: np.ndarray):
    """The LP_NORMAL items of the share-locked pages in ``bufs``, in page then item order.

    Returns (positions, width, starts): ``starts`` are absolute byte offsets of the tuples
    in the flat pool; ``positions`` index a (len(bufs), width) grid of line pointers, so
    page index = position // width and item index = position % width (``None`` when every
    slot of the grid is a normal item, the common case for a loaded table).  Vectorized:
    the line pointers of the batch are read as one row slice per page (the pool viewed as
    an (npages, BLCKSZ / 4) array of words), not one fancy index per line pointer.
    """
    bufs = np.asarray(bufs, dtype=np.int64)
    lower = v.u16[bufs * (BLCKSZ // 2) + pg.OFF_LOWER // 2].astype(np.int64)
    nitems = np.maximum(lower - pg.PAGE_HEADER_SIZE, 0) >> 2
    width = int(nitems.max()) if len(nitems) else 0
    if width == 0:
        return np.empty(0, dtype=np.int64), 0, np.empty(0, dtype=np.int64)
    col = np.arange(width, dtype=np.int64)
    # each page's line pointers are one contiguous row slice of the pool seen as pages
    u32 = v.u32
    pages = u32[:len(u32) - len(u32) % (BLCKSZ // 4)].reshape(-1, BLCKSZ // 4)
    first = pg.PAGE_HEADER_SIZE // 4
    lp = pages[bufs, first:first + width]
    starts = (lp & 0x7FFF).astype(np.int64)
    starts += (bufs * BLCKSZ)[:, None]
    normal = (lp & 0x18000) == (pg.LP_NORMAL << 15)
    if int(nitems.min()) != width:
        normal &= col < nitems[:, None]
    if normal.all():
        return None, width, starts.reshape(-1)
    positions = np.flatnonzero(normal)
    return positions, width, starts.reshape(-1)[positions]


def pages_without_nulls(v: FlatViews, bufs: np.ndarray) -> bool:
    """True if every (share-locked) page in ``bufs`` has PD_NO_NULLS: no tuple on them has
    a NULL, and ``RowLayout.gather(..., no_nulls=True)`` need not read their t_infomask
    (one small gather of the page headers instead of one of every tuple's header)."""
    flags = v.u16[np.asarray(bufs, dtype=np.int64) * (BLCKSZ // 2) + pg.OFF_FLAGS // 2]
    return not ((flags & pg.PD_NO_NULLS) == 0).any()


def positions_to_items(positions, width: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(page index, item index) of grid positions from ``page_items``."""
    if positions is None:
        positions = np.arange(count, dtype=np.int64)
    return positions // width, positions % width
