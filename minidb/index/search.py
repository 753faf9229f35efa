"""Descending the B-tree (nbtsearch.c's ``_bt_search``, ``_bt_moveright``, ``_bt_getroot``).

A descent starts at the root named by the metapage and, on each level, binary-searches
the page for the downlink to follow, holding **one page lock at a time**: it releases a
page before it locks the child.  Between the two, the child may split; Lehman & Yao's
answer is the *move right*: every page but the rightmost of a level has a high key, an
upper bound of its sort keys, and a right link.  A descent that finds its search bound
>= the high key of the page it just locked knows that what it wants moved right, and
follows the right link (repeatedly if needed) before searching the page.  Items move only
rightward (a split moves the upper half to a new page on the right), so nothing can be
lost to the left.

Bounds are raw sort keys (``btpage``): a descent for bound B ends on the leaf holding the
first sort key >= B, or on the page just left of it when the page holds only smaller keys.
Internal pages: the last item whose key is <= B (the first item counts as minus infinity).
High keys: move right while B >= high key (PostgreSQL moves right while B > high key for
its truncated pivots; minidb's high key is the first sort key of the right page, so keys
equal to it live on the right).

Writers (``write=True``) take the leaf in exclusive mode directly (the level the parent
says the child is at tells them when), remember the path as a stack of (block, offset)
for the split that may follow, and finish any incomplete split they meet on the way
(``finish``, supplied by ``split.finish_split``): no key is ever inserted into a page
whose right half still lacks its downlink.  Readers never finish splits; a reader that
meets one just moves right like for any split.

**The descent cache** (``btree_descent_cache``, on by default).  Internal pages change
rarely (a downlink per split of a child) and are read by every descent, so each process
keeps, per index (``IndexRel.descent_cache``), its internal pages decoded: the pivot keys
as a list for ``bisect`` and the downlinks as a list, with the page's flags, right link,
level and high key, under the page's LSN (pd_lsn).  A descent still pins and share-locks
every page on its way (so buffer hits, pins and the lock protocol are unchanged); under
the lock it reads pd_lsn, and if it equals the cached one, the cached decode is the page
(``btree_cache_hits``), else the page is decoded again (``btree_cache_refreshes``; a page
seen for the first time: ``btree_cache_misses``).  This is sound because every change of
a B-tree page is WAL-logged and sets pd_lsn to the record's end under the exclusive lock
(``storage.xloginsert``), LSNs only grow, and a relfilenode is never reused; a page built
by CREATE INDEX around the pool (pd_lsn 0) gets an LSN with its first change.  LSNs only
grow *within one run of the instance*: after a crash the WAL not yet flushed is gone and
later records may end at LSNs a cache has seen, so a restart must start with new
``IndexRel`` objects (a new instance has a new catalog cache, hence new ones; an in-place
restart that kept them must drop them).  (The scan's
``_kill_items`` relies on the same rule.)  Leaves are not cached: their LP_DEAD hints
change without a new LSN, and a reader needs a copy of the leaf anyway.  Pages are found
through ``IndexRel.buf_hints``, the buffer each block was last seen in
(``read_recent``: a buffer whose tag still names the block is pinned and locked without a
mapping lookup), else ``pin_lock``; locks are released with ``unlock_unpin``.  A cached
page that needs a move right, or a writer's INCOMPLETE_SPLIT page, takes the general
path below (a copy of the page, ``moveright``).  The leaf the parent names (level 0 by
the downlink's level) is copied once under its lock and returned at once when it is a
live leaf whose high key is above the bound (``moveright``'s common case, inline); any
other page goes through ``moveright``.  Departure: PostgreSQL decodes nothing
ahead; it binary-searches the shared page in C.  Each cache holds at most
``CACHE_MAX_PAGES`` pages (emptied when full).
"""

from __future__ import annotations

import struct
from bisect import bisect_right

from minidb.errors import DataCorrupted
from minidb.index import btpage as bt
from minidb.index.rel import IndexRel, count
from minidb.shmem import C
from minidb.storage.bufmgr import EXCLUSIVE, SHARE

__all__ = ["get_root", "search", "moveright", "get_endpoint", "release", "lock_block",
           "MAX_BOUND", "CACHE_MAX_PAGES"]

# Greater than every sort key: every key starts with a null flag byte 0x00 or 0x01.
MAX_BOUND = b"\xff"

# decoded internal pages (and buffer hints) kept per index; the cache empties when full
CACHE_MAX_PAGES = 4096

_HITS = C["btree_cache_hits"]
_LSN = struct.Struct("<Q")      # pd_lsn, as BufferManager.page_lsn reads it
_SKIP = bt.BTP_DELETED | bt.BTP_HALF_DEAD
_OPAQUE = bt.OPAQUE.unpack_from
_SPECIAL_OFF = bt.SPECIAL_OFF
_LEAF = bt.BTP_LEAF
_P_NONE = bt.P_NONE


def release(bm, b: int) -> None:
    """Unlock (if locked) and unpin a buffer: the error path of everything here."""
    if bm.held[b]:
        bm.unlock_unpin(b)
    else:
        bm.unpin(b)


def lock_block(bm, irel: IndexRel, blk: int, mode: int, hints: bool = True) -> int:
    """Pin and lock block ``blk`` of the index in ``mode``: through the buffer it was last
    found in (``read_recent``) if ``hints``, else (or if that buffer holds another page
    now) ``pin_lock``."""
    if not hints:
        return bm.pin_lock(irel.relfilenode, blk, mode)
    bh = irel.buf_hints
    h = bh.get(blk)
    if h is not None:
        b = bm.read_recent(irel.relfilenode, blk, h, mode)
        if b is not None:
            return b
    b = bm.pin_lock(irel.relfilenode, blk, mode)
    if len(bh) >= CACHE_MAX_PAGES:
        bh.clear()
    bh[blk] = b
    return b


def _cached_internal(bm, irel: IndexRel, b: int, blk: int):
    """The decoded internal page in the locked buffer ``b``: (lsn, flags, right link,
    level, high key or None, keys, downlinks, first data offset), from the cache if the
    page's LSN is the cached one; None for a page that is not internal."""
    lsn = bm.page_lsn(b)
    cache = irel.descent_cache
    ent = cache.get(blk)
    if ent is not None and ent[0] == lsn:
        bm.counts[_HITS] += 1
        return ent
    data = bm.page(b).tobytes()
    _prev, nxt, level, flags, _c = bt.opaque(data)
    if flags & (bt.BTP_LEAF | bt.BTP_META) or level == 0:
        return None
    count(bm, "btree_cache_misses" if ent is None else "btree_cache_refreshes")
    keys, children = bt.internal_page_items(data)
    if not children:
        raise DataCorrupted(f'index "{irel.name}": internal block {blk} has no downlinks')
    hikey = bt.pivot_key(data, bt.P_HIKEY) if nxt != bt.P_NONE else None
    ent = (lsn, flags, nxt, level, hikey, keys, children, bt.first_data(nxt))
    if len(cache) >= CACHE_MAX_PAGES:
        cache.clear()
    cache[blk] = ent
    return ent


def get_root(bm, irel: IndexRel, refresh: bool = False) -> tuple[int, int]:
    """(root block, root level), from the per-process cache or the metapage."""
    if irel.root_cache and not refresh:
        return irel.root_cache[0], irel.root_cache[1]
    b = bm.pin_lock(irel.relfilenode, bt.BTREE_METAPAGE, SHARE)
    try:
        meta = bt.read_meta(bm.page(b), irel.name)
    finally:
        bm.unlock_unpin(b)
    irel.root_cache = [meta.root, meta.level]
    return meta.root, meta.level


def moveright(bm, irel: IndexRel, b: int, blk: int, bound: bytes, mode: int, finish=None,
              stack=None, hints: bool = False) -> tuple[int, int, bytes]:
    """Follow right links from the locked page ``b`` while ``bound`` >= its high key.

    Returns (buffer, block, bytes copy of the page) with the page locked in ``mode``.
    With ``finish``, an INCOMPLETE_SPLIT page is completed first (its lock is traded for
    an exclusive one, the split finished, and the page locked again in ``mode``).
    """
    try:
        while True:
            data = bm.page(b).tobytes()
            _prev, nxt, _level, flags, _c = bt.opaque(data)
            if finish is not None and flags & bt.BTP_INCOMPLETE_SPLIT:
                if mode != EXCLUSIVE:
                    bm.unlock(b)
                    bm.lock(b, EXCLUSIVE)
                    if not bt.get_flags(bm.page(b)) & bt.BTP_INCOMPLETE_SPLIT:
                        bm.unlock(b)
                        bm.lock(b, mode)
                        continue
                finish(bm, irel, b, blk, list(stack or ()))  # releases b
                b = -1
                b = lock_block(bm, irel, blk, mode, hints)
                continue
            if flags & _SKIP or (nxt != bt.P_NONE and bound >= bt.pivot_key(data, bt.P_HIKEY)):
                if nxt == bt.P_NONE:
                    raise DataCorrupted(f'fell off the end of index "{irel.name}" at '
                                        f"block {blk}")
                bm.unlock_unpin(b)
                b = -1
                b = lock_block(bm, irel, nxt, mode, hints)
                blk = nxt
                continue
            return b, blk, data
    except BaseException:
        if b >= 0:
            release(bm, b)
        raise


def search(bm, irel: IndexRel, bound: bytes, *, write: bool = False, finish=None
           ) -> tuple[int, int, bytes, list]:
    """Descend to the leaf for ``bound`` (_bt_search).

    Returns (buffer, block, page copy, stack): the leaf is pinned and locked, in
    exclusive mode if ``write``; the stack lists (block, offset of the downlink followed)
    from the root down to the leaf's parent.
    """
    cached = bm._settings.btree_descent_cache  # a session setting (bufmgr keeps them)
    fin = finish if write else None
    # the common step of a cached descent inline (a lookup's ~9 calls per level were a
    # tenth of a point select): the buffer hint's read_recent, and the cached page when
    # its LSN is the page's; anything else through lock_block / _cached_internal
    hints = irel.buf_hints
    dcache = irel.descent_cache
    rfn = irel.relfilenode
    counts = bm.counts
    pages = bm._pages
    for _attempt in range(100):
        rc = irel.root_cache
        if rc:
            blk, expect = rc[0], rc[1]
        else:
            blk, expect = get_root(bm, irel)
        stack: list[tuple[int, int]] = []
        at_root = True
        while True:
            mode = EXCLUSIVE if (write and expect == 0) else SHARE
            if cached:      # lock_block, inline
                h = hints.get(blk)
                b = None if h is None else bm.read_recent(rfn, blk, h, mode)
                if b is None:
                    b = bm.pin_lock(rfn, blk, mode)
                    if len(hints) >= CACHE_MAX_PAGES:
                        hints.clear()
                    hints[blk] = b
            else:
                b = bm.pin_lock(rfn, blk, mode)
            if cached and expect > 0:
                ent = dcache.get(blk)
                mv = pages[b]
                if ent is not None and mv is not None and ent[0] == _LSN.unpack_from(mv)[0]:
                    counts[_HITS] += 1
                else:
                    try:
                        ent = _cached_internal(bm, irel, b, blk)
                    except BaseException:
                        release(bm, b)
                        raise
                if ent is not None:
                    _lsn, flags, nxt, lvl, hikey, keys, children, first = ent
                    if not (flags & _SKIP or (hikey is not None and bound >= hikey)
                            or (fin is not None and flags & bt.BTP_INCOMPLETE_SPLIT)):
                        if at_root:
                            if not flags & bt.BTP_ROOT:  # the cached root split
                                release(bm, b)
                                get_root(bm, irel, refresh=True)
                                break
                            at_root = False
                        k = bisect_right(keys, bound)
                        stack.append((blk, first + k))
                        bm.unlock_unpin(b)
                        blk, expect = children[k], lvl - 1
                        continue
            elif cached and expect == 0 and not at_root:
                # the leaf the parent names, moveright's common case inline: the page
                # copied once, its opaque read once, no move right needed (the buffer's
                # memoryview made here if this process has none yet: a page another
                # process read in)
                mv = pages[b]
                if mv is None:
                    mv = bm.page_view(b)
                try:
                    data = mv.tobytes()
                    _prev, nxt, lvl, flags, _c = _OPAQUE(data, _SPECIAL_OFF)
                    if (flags & _LEAF and not flags & _SKIP
                            and (fin is None or not flags & bt.BTP_INCOMPLETE_SPLIT)
                            and (nxt == _P_NONE or bound < bt.pivot_key(data, bt.P_HIKEY))
                            and (not write or mode == EXCLUSIVE)):
                        return b, blk, data, stack
                except BaseException:
                    release(bm, b)
                    raise
            b, blk, data = moveright(bm, irel, b, blk, bound, mode, fin, stack, cached)
            _prev, nxt, lvl, flags, _c = bt.opaque(data)
            if at_root:
                if not flags & bt.BTP_ROOT:  # the cached root split: ask the metapage
                    release(bm, b)
                    get_root(bm, irel, refresh=True)
                    break
                at_root = False
            if flags & bt.BTP_LEAF:
                if write and mode != EXCLUSIVE:  # only if the level went stale; re-lock
                    bm.unlock(b)
                    bm.lock(b, EXCLUSIVE)
                    b, blk, data = moveright(bm, irel, b, blk, bound, EXCLUSIVE, finish, stack,
                                             cached)
                return b, blk, data, stack
            off = bt.binsearch_internal(data, bound, bt.first_data(nxt), bt.nitems(data))
            child = bt.downlink(data, off)
            stack.append((blk, off))
            bm.unlock_unpin(b)
            blk, expect = child, lvl - 1
        continue
    raise DataCorrupted(f'could not find the root of index "{irel.name}"')


def get_endpoint(bm, irel: IndexRel, level: int) -> int:
    """The leftmost page of ``level`` (_bt_get_endpoint), found from the current root."""
    rfn = irel.relfilenode
    blk, root_level = get_root(bm, irel, refresh=True)
    if root_level < level:
        raise DataCorrupted(f'index "{irel.name}" has no level {level} (root is at '
                            f"{root_level})")
    while True:
        b = bm.pin_lock(rfn, blk, SHARE)
        try:
            data = bm.page(b).tobytes()
        finally:
            bm.unlock_unpin(b)
        _prev, nxt, lvl, _flags, _c = bt.opaque(data)
        if lvl == level:
            return blk
        if lvl < level:
            raise DataCorrupted(f'index "{irel.name}": level {level} not found below the root')
        blk = bt.downlink(data, bt.first_data(nxt))
