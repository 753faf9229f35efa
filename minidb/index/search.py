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
"""

from __future__ import annotations

from minidb.errors import DataCorrupted
from minidb.index import btpage as bt
from minidb.index.rel import IndexRel
from minidb.storage.bufmgr import EXCLUSIVE, SHARE

__all__ = ["get_root", "search", "moveright", "get_endpoint", "release", "MAX_BOUND"]

# Greater than every sort key: every key starts with a null flag byte 0x00 or 0x01.
MAX_BOUND = b"\xff"


def release(bm, b: int) -> None:
    """Unlock (if locked) and unpin a buffer: the error path of everything here."""
    if bm.held[b]:
        bm.unlock(b)
    bm.unpin(b)


def get_root(bm, irel: IndexRel, refresh: bool = False) -> tuple[int, int]:
    """(root block, root level), from the per-process cache or the metapage."""
    if irel.root_cache and not refresh:
        return irel.root_cache[0], irel.root_cache[1]
    b = bm.pin(irel.relfilenode, bt.BTREE_METAPAGE)
    try:
        bm.lock(b, SHARE)
        meta = bt.read_meta(bm.page(b), irel.name)
        bm.unlock(b)
    finally:
        bm.unpin(b)
    irel.root_cache = [meta.root, meta.level]
    return meta.root, meta.level


def moveright(bm, irel: IndexRel, b: int, blk: int, bound: bytes, mode: int, finish=None,
              stack=None) -> tuple[int, int, bytes]:
    """Follow right links from the locked page ``b`` while ``bound`` >= its high key.

    Returns (buffer, block, bytes copy of the page) with the page locked in ``mode``.
    With ``finish``, an INCOMPLETE_SPLIT page is completed first (its lock is traded for
    an exclusive one, the split finished, and the page locked again in ``mode``).
    """
    rfn = irel.relfilenode
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
                b = bm.pin(rfn, blk)
                bm.lock(b, mode)
                continue
            if flags & (bt.BTP_DELETED | bt.BTP_HALF_DEAD) or (
                    nxt != bt.P_NONE and bound >= bt.pivot_key(data, bt.P_HIKEY)):
                if nxt == bt.P_NONE:
                    raise DataCorrupted(f'fell off the end of index "{irel.name}" at '
                                        f"block {blk}")
                bm.unlock(b)
                bm.unpin(b)
                b = -1
                b = bm.pin(rfn, nxt)
                blk = nxt
                bm.lock(b, mode)
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
    rfn = irel.relfilenode
    for _attempt in range(100):
        root, level = get_root(bm, irel)
        blk, expect = root, level
        stack: list[tuple[int, int]] = []
        at_root = True
        while True:
            mode = EXCLUSIVE if (write and expect == 0) else SHARE
            b = bm.pin(rfn, blk)
            try:
                bm.lock(b, mode)
            except BaseException:
                release(bm, b)
                raise
            b, blk, data = moveright(bm, irel, b, blk, bound, mode,
                                     finish if write else None, stack)
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
                    b, blk, data = moveright(bm, irel, b, blk, bound, EXCLUSIVE, finish, stack)
                return b, blk, data, stack
            off = bt.binsearch_internal(data, bound, bt.first_data(nxt), bt.nitems(data))
            child = bt.downlink(data, off)
            stack.append((blk, off))
            bm.unlock(b)
            bm.unpin(b)
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
        b = bm.pin(rfn, blk)
        try:
            bm.lock(b, SHARE)
            data = bm.page(b).tobytes()
        finally:
            release(bm, b)
        _prev, nxt, lvl, _flags, _c = bt.opaque(data)
        if lvl == level:
            return blk
        if lvl < level:
            raise DataCorrupted(f'index "{irel.name}": level {level} not found below the root')
        blk = bt.downlink(data, bt.first_data(nxt))
