"""The free-space map: how much room each heap page has, so inserts find a page fast.

PostgreSQL keeps one byte per heap page (the free space in 32-byte steps, a *category*
0..255) in a separate fork, arranged as a tree of max-values so a search is logarithmic.
minidb keeps the same one byte per page in the same kind of separate fork
(``base/<relfilenode>_fsm``, read through the buffer manager like every other page) but
flat: FSM page ``k`` holds the categories of heap blocks ``k * 8168 .. (k+1) * 8168 - 1``
after an ordinary 24-byte page header, and a search looks at a whole FSM page with one
numpy comparison.  A 1,000,000-page table (8 GB) has 123 FSM pages, so even the worst
search reads 1 MB, never the table.

========  ======  =============================================================
offset    size    content of an FSM page
========  ======  =============================================================
0         24      page header (so checksums and header checks work as anywhere)
24        8168    category of each heap block: floor(free bytes / 32)
========  ======  =============================================================

As in PostgreSQL the map is a hint, not the truth: it is updated when an insert finds a
page fuller than the map said, when pages are added, and by VACUUM and pruning; a reader
always re-checks the page itself.  Updates take the FSM page's exclusive content lock and
mark it dirty; they are never logged (PostgreSQL does not WAL-log FSM changes either).
So a page of the map may be all zeros after a crash (its extension reached the disk, its
initialisation did not) or be zeroed when read (a torn page fails its checksum): an
update initialises such a page before storing into it, and a search reads it as "no room".

Left out: the tree (a flat array is searched fast enough with numpy), ``fp_next_slot``
spreading of concurrent inserters across pages (each backend starts searching at its own
last hit instead).
"""

from __future__ import annotations

import numpy as np

from minidb.config import BLCKSZ
from minidb.storage import page as pg
from minidb.storage.bufmgr import EXCLUSIVE, SHARE
from minidb.storage.smgr import FSM_FORKNUM

FSM_CAT_STEP = BLCKSZ // 256  # 32 bytes per category
SLOTS_PER_PAGE = BLCKSZ - pg.PAGE_HEADER_SIZE


def category(avail: int) -> int:
    return min(255, max(0, avail) // FSM_CAT_STEP)


def _needed_category(need: int) -> int:
    """Smallest category that guarantees ``need`` bytes."""
    return min(255, -(-need // FSM_CAT_STEP))


def _fsm_page_for(bm, rfn: int, fsm_block: int, create: bool, mode: int) -> int:
    """Pin and lock (``mode``) FSM page ``fsm_block``, extending the fork with initialised
    pages if asked (-1 if it does not exist and ``create`` is false).  The fork's size
    comes from the relation size cache (no system call per store; another process's
    extension of the fork changes the shared size generation)."""
    while bm.smgr.nblocks(rfn, FSM_FORKNUM) <= fsm_block:
        if not create:
            return -1
        first, bufs = bm.extend(rfn, 1, fork=FSM_FORKNUM)
        b = bufs[0]
        pg.init_page(bm.page(b))
        bm.mark_dirty(b)
        bm.unlock(b)
        bm.unpin(b)
    return bm.pin_lock(rfn, fsm_block, mode, fork=FSM_FORKNUM)


def record(bm, rfn: int, block: int, avail: int) -> None:
    """Remember that heap block ``block`` has ``avail`` free bytes."""
    _store(bm, rfn, block // SLOTS_PER_PAGE, block % SLOTS_PER_PAGE, category(avail))


def record_many(bm, rfn: int, blocks: np.ndarray, avails: np.ndarray) -> None:
    if len(blocks) == 1:  # one page (pruning after an index fetch): no numpy grouping
        block = int(blocks[0])
        _store(bm, rfn, block // SLOTS_PER_PAGE, block % SLOTS_PER_PAGE,
               category(int(avails[0])))
        return
    blocks = np.asarray(blocks, dtype=np.int64)
    cats = np.minimum(255, np.maximum(0, np.asarray(avails)) // FSM_CAT_STEP).astype(np.uint8)
    fsm_blocks = blocks // SLOTS_PER_PAGE
    for fb in np.unique(fsm_blocks).tolist():
        sel = fsm_blocks == fb
        _store(bm, rfn, fb, blocks[sel] % SLOTS_PER_PAGE, cats[sel])


def _store(bm, rfn: int, fsm_block: int, slots, cats, keep: bool = False) -> int:
    """Write categories into slots of one FSM page (a scalar or arrays).  ``keep``: return
    the page's buffer still pinned and exclusively locked (the caller releases it), else -1."""
    b = _fsm_page_for(bm, rfn, fsm_block, True, EXCLUSIVE)
    try:
        page = bm.page(b)
        if pg.page_is_new(page):  # an extension a crash left as zeros, or a page zeroed
            pg.init_page(page)    # after it failed its check: the map starts again there
        page[pg.PAGE_HEADER_SIZE + slots] = cats
        bm.mark_dirty(b)
    except BaseException:
        bm.unlock_unpin(b)
        raise
    if keep:
        return b
    bm.unlock_unpin(b)
    return -1


def record_and_search(bm, rfn: int, block: int, avail: int, need: int, nblocks: int,
                      start: int = 0) -> int:
    """``record(block, avail)`` then ``search(need, nblocks, start)``, with the same answer,
    but the FSM page written is searched under the exclusive lock the write took when the
    search begins there (PostgreSQL's RecordAndGetPageWithFreeSpace: an insert that found
    its target page full records it and looks further in one visit of the map page)."""
    fb = block // SLOTS_PER_PAGE
    b = _store(bm, rfn, fb, block % SLOTS_PER_PAGE, category(avail), keep=True)
    return search(bm, rfn, need, nblocks, start, held=(fb, b))


def search(bm, rfn: int, need: int, nblocks: int, start: int = 0, held=None) -> int:
    """A heap block below ``nblocks`` recorded with at least ``need`` free bytes, or -1.

    Looks from ``start`` to the end, then from the beginning (each backend passes its last
    hit, so concurrent inserters tend to stay on different pages).  ``held``: (FSM block,
    buffer) of a map page the caller has pinned and locked; it is searched through that
    buffer when the search visits it first, and released in every case."""
    want = _needed_category(need)
    nfsm = min(bm.smgr.nblocks(rfn, FSM_FORKNUM), -(-nblocks // SLOTS_PER_PAGE))
    if nfsm == 0:
        if held is not None:
            bm.unlock_unpin(held[1])
        return -1
    first = min(start // SLOTS_PER_PAGE, nfsm - 1)
    lo = start % SLOTS_PER_PAGE if first == start // SLOTS_PER_PAGE else 0
    # pages first .. nfsm-1, 0 .. first-1, then the part of page `first` below `start`
    # (with one FSM page, that part is searched under the same pin)
    for k in range(nfsm + (1 if lo and nfsm > 1 else 0)):
        fb = (first + k) % nfsm
        base = fb * SLOTS_PER_PAGE
        limit = min(SLOTS_PER_PAGE, nblocks - base)  # only slots of blocks below nblocks
        a, z = (min(lo, limit), limit) if k == 0 else (0, limit if k < nfsm else min(lo, limit))
        if held is not None:
            if fb == held[0]:
                b = held[1]
            else:
                bm.unlock_unpin(held[1])
                b = bm.pin_lock(rfn, fb, SHARE, fork=FSM_FORKNUM)
            held = None
        else:
            b = bm.pin_lock(rfn, fb, SHARE, fork=FSM_FORKNUM)
        try:
            cats = bm.page(b)[pg.PAGE_HEADER_SIZE:pg.PAGE_HEADER_SIZE + limit]
            hit = _first_at_least(cats, a, z, want)
            if hit < 0 and k == 0 and nfsm == 1 and a:
                hit = _first_at_least(cats, 0, a, want)
        finally:
            bm.unlock_unpin(b)
        if hit >= 0:
            return base + hit
    return -1


def _first_at_least(cats: np.ndarray, a: int, z: int, want: int) -> int:
    """The first index in [a, z) whose category is at least ``want``, or -1.  ``argmax``
    of the comparison stops at the first hit and builds no index array (``flatnonzero``
    listed every page with room, ~2.5 us more per search of a 1,640-page table)."""
    m = cats[a:z] >= want
    if not m.size:
        return -1
    i = int(m.argmax())
    return a + i if i or m[0] else -1


def get(bm, rfn: int, block: int) -> int:
    """The recorded free space of ``block`` (a lower bound, in bytes)."""
    fb = block // SLOTS_PER_PAGE
    if bm.smgr.nblocks(rfn, FSM_FORKNUM) <= fb:
        return 0
    b = bm.pin_lock(rfn, fb, SHARE, fork=FSM_FORKNUM)
    try:
        cat = int(bm.page(b)[pg.PAGE_HEADER_SIZE + block % SLOTS_PER_PAGE])
    finally:
        bm.unlock_unpin(b)
    return cat * FSM_CAT_STEP


def truncate(bm, rfn: int, nblocks: int) -> None:
    """Forget heap blocks from ``nblocks`` on (after the heap was truncated)."""
    nfsm = bm.smgr.nblocks(rfn, FSM_FORKNUM)
    keep = -(-nblocks // SLOTS_PER_PAGE)
    bm.drop_relation_buffers(rfn, from_block=keep, fork=FSM_FORKNUM)
    if nfsm > keep:
        bm.smgr.truncate(rfn, FSM_FORKNUM, keep)
    if keep and nblocks % SLOTS_PER_PAGE:
        b = bm.pin(rfn, keep - 1, fork=FSM_FORKNUM)
        try:
            bm.lock(b, EXCLUSIVE)
            bm.page(b)[pg.PAGE_HEADER_SIZE + nblocks % SLOTS_PER_PAGE:] = 0
            bm.mark_dirty(b)
            bm.unlock(b)
        finally:
            bm.unpin(b)
