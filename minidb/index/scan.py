"""Index scans and index tuple killing (nbtsearch.c's _bt_first/_bt_readpage/_bt_steppage,
nbtutils.c's _bt_killitems, indexam.c's index_fetch_heap).

A scan is given bounds on a prefix of the index columns and a direction, and returns
heap TIDs in index order.  Bounds become raw sort-key bounds [lo, hi) (``scan_bounds``):

=====================  ===========================  ===========================
bound                  as a sort key                why
=====================  ===========================  ===========================
low K, inclusive       lo = enc(K)                  every key + TID with prefix K is >= enc(K)
low K, exclusive       lo = enc(K) + FF * 7         above enc(K) + any 6-byte TID or column
high K, inclusive      hi = enc(K) + FF * 7         same
high K, exclusive      hi = enc(K)
no high, a low         hi = 0x01                    a comparison never matches NULL: stop at
                                                    the first column's NULLs (sorted last)
high P (a prefix)      hi = enc(P) + FF * 7         the rest of P's group, NULLs included
                       (skip_nulls: enc(P) + 0x01)  (skip_nulls: up to the group's NULLs)
no bound               unbounded                    a full scan returns NULLs too
low = high, inclusive  [enc(K), enc(K) + FF * 7)    equality on a prefix (None: IS NULL)
=====================  ===========================  ===========================

Both bounds are values of a prefix of the index columns: equal values P on the leading
columns, then (on one side or both) a bound on the next column, the *range column*.  A DESC
range column has its key order reversed (``keys``: complemented bytes), so its low value
bound becomes the high sort-key bound and the other way round; a NULLS FIRST range column
keeps its NULLs out from below (lo = enc(P) + 0x01, its value flag: the first value)
instead of from above.  ``skip_nulls`` (what the executor asks for: its bounds come from
comparisons, which never match NULL) leaves the range column's NULLs out of a side bounded
only by the prefix too.

(After a complete column encoding the next byte is a null flag, 0x00 or 0x01, and a TID
is 6 bytes, so 7 bytes of 0xFF are above all continuations.)  A key with None searches
for NULL (IS NULL).

**Page at a time.**  The scan descends once, to the leaf holding its first key, and from
then on reads one leaf at a time: pin and share lock (``lock_block``: one fused call,
through the buffer the page was last found in), copy the page, note its LSN and its
left and right links, unlock and unpin (one call).  All the matching items of that copy (items marked
LP_DEAD skipped when ``kill_index_tuples`` is on) become the batch the scan hands out;
no lock or pin is held between calls.  Forward, the next page is the right link *as it
was* when the batch was read: pages split since then only moved items the scan already
has to new pages between the two, so nothing is returned twice or missed (the new pages
hold only items inserted after the scan read the page, which its snapshot cannot see).
The scan stops early when the page's high key is >= hi.

**Backward** (``_walk_left``): the left link read with the batch names the left
neighbour as it was then.  If that page split since, its right link no longer points
back to the page we came from; we then follow right links from it until a page whose
right link is ours - the rightmost piece of the old left neighbour (Lehman & Yao's
re-find; pages are never deleted here, so it always exists).

**Killing** (``kill_index_tuples``).  ``visible_rows`` fetches each TID's row with
``heap_hot_search``, whose ``all_dead`` says the whole HOT chain is dead to every
snapshot (judged against the global xmin horizon, never against the scan's own
snapshot).  Such items are remembered (offset, heap TID) and, when the scan leaves the
page (next batch, end, close), ``_kill_items`` pins and share-locks the page again and
gives up if its LSN changed since the batch was read (VACUUM or simple deletion may
have removed the entry and the heap TID may be in use by a new row whose entry now sits
there); otherwise it finds each item by heap TID from its remembered offset rightward,
marks it LP_DEAD (keeping its bytes), sets BTP_HAS_GARBAGE and marks the buffer dirty as
a hint.  Later scans skip such items without visiting the heap; the next insert that
would split the page removes them first.

Counters: ``index_items_read`` (items taken into batches), ``index_heap_fetches``
(heap_hot_search calls made for index scans), ``index_items_killed``.  ``pgstat``:
idx_scan per scan and idx_tup_fetch per row returned, on the table.

Left out: index-only scans, bitmap scans, scan keys on non-leading columns (a filter is
the executor's), array keys, mark/restore, holding the pin for non-MVCC scans.
"""

from __future__ import annotations

import struct

from minidb.errors import DataCorrupted, InternalError
from minidb.heap.mvcc import heap_hot_search, walk_chain
from minidb.heap.prune import heap_page_prune_opt
from minidb.index import btpage as bt
from minidb.index.keys import INDOPTION_DESC, INDOPTION_NULLS_FIRST
from minidb.index.rel import IndexRel, count, open_index, trace
from minidb.index.search import MAX_BOUND, lock_block, release, search
from minidb.storage import page as pg
from minidb.shmem import C
from minidb.storage.bufmgr import SHARE

__all__ = ["IndexScan", "index_scan", "lookup_visible", "fetch_equal", "kill_items",
           "scan_bounds", "FORWARD", "BACKWARD"]

FORWARD, BACKWARD = "forward", "backward"
_ABOVE = b"\xff" * 7
_OPAQUE = bt.OPAQUE.unpack_from
_SPECIAL_OFF = bt.SPECIAL_OFF
_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from
_LOWER = pg.OFF_LOWER
_HEADER = pg.PAGE_HEADER_SIZE
_ITEMS_READ, _HEAP_FETCHES = C["index_items_read"], C["index_heap_fetches"]
# fetch_equal's heap buffer hints kept per caller's dict: at most this many or one per buffer
# of the pool, whichever is more (a hint is right only while its page stays in the pool)
_MAX_HEAP_HINTS = 4096
_PRUNE_XID = pg.OFF_PRUNE_XID


def _as_tuple(v) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


def scan_bounds(codec, low, high, low_inclusive: bool = True, high_inclusive: bool = True,
                skip_nulls: bool = False) -> tuple[bytes | None, bytes | None]:
    """Sort-key bounds [lo, hi) of a scan (see the module docstring).  ``low`` and ``high``
    are values of a prefix of the index columns; when both are given, one's columns but
    the last are the other's (equal values on a prefix, a range on the next column)."""
    if low is None and high is None:
        return None, None
    low = _as_tuple(low) if low is not None else None
    high = _as_tuple(high) if high is not None else None
    if low is not None and high is not None and low == high and low_inclusive \
            and high_inclusive:
        enc = codec.encode_prefix(low)        # equality (or IS NULL) on a prefix
        return enc, enc + _ABOVE
    longer = low if high is None or (low is not None and len(low) >= len(high)) else high
    col = len(longer) - 1                     # the range column
    prefix = longer[:col]
    for b in (low, high):
        if b is not None and tuple(b[:col]) != tuple(prefix):
            raise InternalError("index scan bounds must share their leading columns")
    # a side that bounds only the prefix (or, with no prefix, is absent) covers the rest of
    # the prefix's group; its NULLs of the range column are left out when asked, and always
    # for an absent side of a range on the first column (a comparison never matches NULL)
    skip = skip_nulls or not prefix
    lv = low if low is not None and len(low) == col + 1 else None
    hv = high if high is not None and len(high) == col + 1 else None
    option = codec.options[col]
    if option & INDOPTION_DESC:               # the key order of this column is reversed
        lv, hv = hv, lv
        low_inclusive, high_inclusive = high_inclusive, low_inclusive
    nulls_first = bool(option & INDOPTION_NULLS_FIRST)
    enc_prefix = codec.encode_prefix(prefix)
    if lv is not None:
        enc = codec.encode_prefix(lv)
        lo = enc if low_inclusive else enc + _ABOVE
    elif skip and nulls_first:
        lo = enc_prefix + codec.value_flag(col)   # the group's first value
    else:
        lo = enc_prefix or None
    if hv is not None:
        enc = codec.encode_prefix(hv)
        hi = enc + _ABOVE if high_inclusive else enc
    elif skip and not nulls_first:
        hi = enc_prefix + codec.null_flag(col)    # the group's first NULL
    else:
        hi = enc_prefix + _ABOVE if enc_prefix else None
    return lo, hi


class IndexScan:
    """An iterator of heap TIDs (block, offset) in index order; see the module docstring.

    ``kill_prior()`` after a TID was returned marks its item for killing (the caller
    found its whole chain dead); ``visible_rows()`` does the heap fetch and the killing.
    """

    def __init__(self, backend, index, low=None, high=None, *, low_inclusive: bool = True,
                 high_inclusive: bool = True, direction: str = FORWARD,
                 skip_nulls: bool = False):
        if direction not in (FORWARD, BACKWARD):
            raise ValueError(f"direction must be {FORWARD!r} or {BACKWARD!r}")
        self.backend = backend
        self.bm = backend.bufmgr
        self.irel: IndexRel = open_index(backend, index)
        self.lo, self.hi = scan_bounds(self.irel.codec, low, high, low_inclusive,
                                       high_inclusive, skip_nulls)
        self.forward = direction == FORWARD
        self.kill = bool(backend.settings.kill_index_tuples)
        self.hints = bool(backend.settings.btree_descent_cache)  # read_recent for leaves
        self.items: list = []      # (offset, heap tid) of the current batch, in scan order
        self.pos = -1
        self.block = -1            # the page the batch came from, its LSN and links
        self.lsn = 0
        self.next_block = bt.P_NONE
        self.prev_block = bt.P_NONE
        self.more = True
        self.started = False
        self.killed: list = []     # (offset, tid bytes) to mark when leaving the page
        self.heap_fetches = 0
        self.items_killed = 0
        self.left_refinds = 0      # backward steps that found the left neighbour split
        self.empty = (self.lo is not None and self.hi is not None and self.lo >= self.hi)

    # -- iteration -------------------------------------------------------------------------------
    def __iter__(self):
        return self

    def __next__(self) -> tuple[int, int]:
        while True:
            self.pos += 1
            if self.pos < len(self.items):
                return self.items[self.pos][1]
            if not self._next_batch():
                raise StopIteration
            self.pos = -1

    def kill_prior(self) -> None:
        """The TID just returned points at a chain dead to everyone: kill its item."""
        if self.kill and 0 <= self.pos < len(self.items):
            off, tid = self.items[self.pos]
            self.killed.append((off, bt.tid_bytes(*tid)))

    def close(self) -> None:
        self._kill_items()
        self.items, self.pos, self.more = [], -1, False

    def _next_batch(self) -> bool:
        self._kill_items()
        if self.empty:
            return False
        if not self.started:
            self.started = True
            self.backend.pgstat.count(self.irel.table_oid, "idx_scan")
            bound = (self.lo or b"") if self.forward else (self.hi or MAX_BOUND)
            b, blk, data, _stack = search(self.bm, self.irel, bound)
            release(self.bm, b)
            self._take(data, blk)
            return True
        if not self.more:
            self.items = []
            return False
        if self.forward:
            self._take(self._read(self.next_block), self.next_block)
        else:
            self._walk_left()
        return True

    def _read(self, blk: int) -> bytes:
        b = lock_block(self.bm, self.irel, blk, SHARE, self.hints)
        try:
            return self.bm.page(b).tobytes()
        finally:
            self.bm.unlock_unpin(b)

    def _walk_left(self) -> None:
        cur, blk = self.block, self.prev_block
        for _ in range(1 << 30):
            data = self._read(blk)
            nxt = bt.opaque(data)[1]
            if nxt == cur:
                self._take(data, blk)
                return
            if nxt == bt.P_NONE:
                raise DataCorrupted(f'index "{self.irel.name}": block {cur} is not reachable '
                                    f"from its left neighbour {self.prev_block}")
            blk = nxt  # the left neighbour split: its rightmost piece is further right
            self.left_refinds += 1

    def _take(self, data: bytes, blk: int) -> None:
        """Make the batch from a leaf page copy (_bt_readpage)."""
        prev, nxt, _lvl, flags, _c = bt.opaque(data)
        if not flags & bt.BTP_LEAF:
            raise DataCorrupted(f'index "{self.irel.name}": scan reached non-leaf block {blk}')
        first = bt.first_data(nxt)
        maxoff = bt.nitems(data)
        lo, hi = self.lo, self.hi
        start = bt.binsearch_leaf(data, lo, first, maxoff) if lo is not None else first
        end = bt.gallop_leaf(data, hi, start, maxoff) if hi is not None else maxoff + 1
        if self.forward:
            self.more = (nxt != bt.P_NONE and end > maxoff
                         and not (hi is not None and bt.pivot_key(data, bt.P_HIKEY) >= hi))
        else:
            self.more = prev != bt.P_NONE and start == first
        items = []
        unpack = bt.TID_BE.unpack_from
        kill = self.kill
        for off in range(start, end):
            w = bt.lp_word(data, off)
            if kill and (w >> 15) & 3 == pg.LP_DEAD:
                continue
            items.append((off, unpack(data, w & 0x7FFF)))
        if not self.forward:
            items.reverse()
        self.items = items
        self.block, self.lsn = blk, pg.get_lsn(data)
        self.next_block, self.prev_block = nxt, prev
        count(self.bm, "index_items_read", len(items))

    # -- killing ---------------------------------------------------------------------------------
    def _kill_items(self) -> None:
        """Mark the remembered items LP_DEAD if the page did not change (_bt_killitems)."""
        if not self.killed:
            return
        killed, self.killed = self.killed, []
        self.items_killed += kill_items(self.backend, self.irel, self.block, self.lsn, killed,
                                        self.hints)

    # -- heap fetch ------------------------------------------------------------------------------
    def visible_rows(self, snapshot=None, *, prepare_pages="prune"):
        """Yield (TID of the visible version, row) for each entry whose HOT chain holds a
        version ``snapshot`` sees (index_getnext_slot); kills dead chains' items.  Each
        heap page is first offered to opportunistic pruning (``heap_page_prune_opt``, as
        PostgreSQL's index fetch does) unless ``prepare_pages`` is None or another hook."""
        backend = self.backend
        inst = backend.instance
        if snapshot is None:
            snapshot = backend.xact.current_snapshot()
        hrel = backend.catalog.heap_rel(self.irel.table)
        bm = self.bm
        if prepare_pages == "prune":
            pages = bm.seg.buf_pages

            def prepare_pages(bufs, first_block, _rel=hrel):
                # PageIsPrunable's cheap half first: most pages have no pd_prune_xid
                if pg.get_prune_xid(pages[int(bufs[0])]):
                    heap_page_prune_opt(backend, _rel, bufs, first_block)
        decode = hrel.layout.decode
        stats = backend.pgstat
        chain_cache = backend.chain_cache
        try:
            for tid in self:
                found, data, all_dead = heap_hot_search(bm, hrel, tid, snapshot, inst.clog,
                                                        inst.procarray,
                                                        prepare_pages=prepare_pages,
                                                        chain_cache=chain_cache)
                count(bm, "index_heap_fetches")
                self.heap_fetches += 1
                if all_dead:
                    self.kill_prior()
                if found is not None:
                    stats.count(hrel.oid, "idx_tup_fetch")
                    yield found, decode(data)
        finally:
            self.close()


def kill_items(backend, irel: IndexRel, block: int, lsn: int, killed: list,
               hints: bool = True) -> int:
    """Mark the items ``killed`` ((offset, heap TID bytes) as read from leaf ``block`` at
    ``lsn``) LP_DEAD, unless the page changed since (see the module docstring); returns how
    many were marked."""
    bm = backend.bufmgr
    b = lock_block(bm, irel, block, SHARE, hints)
    try:
        page = bm.page(b)
        if pg.get_lsn(page) != lsn:
            trace(backend, irel, f"not killing {len(killed)} items of block {block}: "
                  "the page changed since it was read")
            return 0
        maxoff = pg.max_offset(page)
        first = bt.first_data(bt.opaque(page)[1])
        n = 0
        for off, tidb in killed:
            o = max(off, first)
            while o <= maxoff:
                if bt.item_tid_bytes(page, o) == tidb:
                    if not bt.lp_is_dead(bt.lp_word(page, o)):
                        pg.set_item_dead(page, o, keep_storage=True)
                        n += 1
                    break
                o += 1
        if n:
            bt.set_flags(page, bt.get_flags(page) | bt.BTP_HAS_GARBAGE)
            bm.mark_dirty_hint(b)
            count(bm, "index_items_killed", n)
            trace(backend, irel, f"killed {n} items of block {block}")
        return n
    finally:
        bm.unlock_unpin(b)


def fetch_equal(backend, irel: IndexRel, hrel, key: tuple, snapshot, prepare_pages=None,
                heap_hints: dict | None = None, *, bound: bytes | None = None
                ) -> list[tuple[tuple[int, int], tuple]]:
    """(TID, row) of every version ``snapshot`` sees whose index key (prefix) equals
    ``key`` (no None in it): what ``list(IndexScan(backend, irel, key, key)
    .visible_rows(snapshot, prepare_pages=prepare_pages))`` returns, with the same counts
    (buffer hits and reads, idx_scan, index_items_read, index_heap_fetches, idx_tup_fetch,
    index_items_killed) and the same killing, but no scan object: the point path's lookup
    (``minidb.exec.point``).

    The descent (``search``, with the descent cache), the leaf's binary search and its
    items as ``_take`` makes them; then, for each TID, the heap page pinned and
    share-locked in one call (through ``heap_hints``, block -> the buffer it was last
    found in, if given: ``read_recent``; a hit there also stands for the check that the
    block exists), offered to the pruning hook only when its pd_prune_xid is set and
    older than the horizon (the hook - ``PagePruner`` - does nothing for other pages; it
    runs on the pinned page with the lock let go, as ``heap_hot_search`` calls it), the
    HOT chain walked (``mvcc.walk_chain``, ``hot_search_page`` without its frame, through
    the backend's dead-run cache), unlocked and unpinned in one call; all of it inline
    in the loop over the items.  A key
    whose items go on past the leaf (duplicates on the right sibling) continues as an
    ``IndexScan`` from that leaf.  Raises what ``scan_bounds`` raises for a key the index
    columns cannot hold; ``bound``: ``irel.codec.encode_prefix(key)`` if the caller has
    it already."""
    bm = backend.bufmgr
    settings = backend.settings
    lo = irel.codec.encode_prefix(key) if bound is None else bound
    hi = lo + _ABOVE
    stats = backend.pgstat
    tcounts = stats.counts    # (TableStats.count, inline: one call fewer per count)
    oid = irel.table_oid
    if oid:
        k = (oid, "idx_scan")
        tcounts[k] = tcounts.get(k, 0) + 1
    b, blk, data, _stack = search(bm, irel, lo)
    bm.unlock_unpin(b)      # (search returns the leaf pinned and share-locked)
    # (bt.opaque, nitems, first_data and lp_word below, inline)
    _prev, nxt, _lvl, flags, _c = _OPAQUE(data, _SPECIAL_OFF)
    if not flags & bt.BTP_LEAF:
        raise DataCorrupted(f'index "{irel.name}": scan reached non-leaf block {blk}')
    maxoff = (_U16(data, _LOWER)[0] - _HEADER) >> 2
    start = bt.binsearch_leaf(data, lo, 1 if nxt == bt.P_NONE else 2, maxoff)
    end = bt.gallop_leaf(data, hi, start, maxoff)
    if nxt != bt.P_NONE and end > maxoff and not bt.pivot_key(data, bt.P_HIKEY) >= hi:
        scan = IndexScan(backend, irel, key, key)   # the key goes on to the right
        scan.started = True
        scan._take(data, blk)
        return list(scan.visible_rows(snapshot, prepare_pages=prepare_pages))
    kill = settings.kill_index_tuples
    items = []
    unpack = bt.TID_BE.unpack_from
    for off in range(start, end):
        w = _U32(data, _HEADER - 4 + 4 * off)[0]
        if kill and (w >> 15) & 3 == pg.LP_DEAD:
            continue
        items.append((off, unpack(data, w & 0x7FFF)))
    counts = bm.counts
    counts[_ITEMS_READ] += len(items)
    out: list = []
    if not items:
        return out
    inst = backend.instance
    clog, procarray = inst.clog, inst.procarray
    rfn = hrel.relfilenode
    decode = hrel.layout.decode
    fetch_key = (hrel.oid, "idx_tup_fetch")
    has_block = bm.smgr.has_block
    chain_cache = backend.chain_cache
    pages = bm._pages
    killed = None
    slot = backend.slot
    try:
        for off, tid in items:
            block = tid[0]
            # the buffer this backend found the block in last, pinned and share-locked
            # if it still holds it: then the block exists (a truncation drops the
            # buffers of the blocks it cuts), no size check needed
            h = heap_hints.get(block) if heap_hints is not None else None
            b = bm.read_recent(rfn, block, h, SHARE) if h is not None else None
            if b is None:
                if has_block(rfn, block):
                    b = bm.pin_lock(rfn, block, SHARE)
                    if heap_hints is not None:
                        if len(heap_hints) >= max(_MAX_HEAP_HINTS, bm.nbuffers):
                            heap_hints.clear()
                        heap_hints[block] = b
                else:
                    # a block past the heap's end: the general walk raises the error (or
                    # fetches, had the file grown meanwhile)
                    b = -1
                    found, tdata, all_dead = heap_hot_search(bm, hrel, tid, snapshot, clog,
                                                             procarray,
                                                             prepare_pages=prepare_pages,
                                                             chain_cache=chain_cache)
            if b >= 0:
                # heap_hot_search on the page pinned and share-locked: pruning offered
                # only to a prunable page (PageIsPrunable: pd_prune_xid set and older
                # than the horizon - ``vis_horizon``'s bound, as the hook asks it for
                # this backend's slot; the hook, ``PagePruner``, does nothing for other
                # pages and would cost an unlock and a lock); the walk
                # (``mvcc.walk_chain``) through the backend's dead-run cache
                locked = True
                try:
                    page = pages[b]       # (page_view, inline: the kept memoryview)
                    if page is None:
                        page = bm.page_view(b)
                    if (prepare_pages is not None and (pxid := _U32(page, _PRUNE_XID)[0])
                            and pxid < procarray.vis_horizon(pxid, slot)):
                        bm.unlock(b)      # the hook runs on the pinned, unlocked page
                        locked = False
                        prepare_pages(b, block)
                        bm.lock(b, SHARE)
                        locked = True
                    hinted: list = []
                    found, tdata, all_dead = walk_chain(page, block, tid[1], snapshot, clog,
                                                        procarray, None, False, hinted,
                                                        chain_cache, rfn)
                    if hinted:
                        bm.mark_dirty_hint(b)
                finally:
                    if locked:
                        bm.unlock_unpin(b)
                    else:
                        bm.unpin(b)
            counts[_HEAP_FETCHES] += 1
            if all_dead and kill:
                if killed is None:
                    killed = []
                killed.append((off, bt.tid_bytes(*tid)))
            if found is not None:
                if fetch_key[0]:
                    tcounts[fetch_key] = tcounts.get(fetch_key, 0) + 1
                out.append((found, decode(tdata)))
    finally:
        if killed:
            kill_items(backend, irel, blk, pg.get_lsn(data), killed,
                       bool(settings.btree_descent_cache))
    return out


def index_scan(backend, index, low=None, high=None, *, low_inclusive: bool = True,
               high_inclusive: bool = True, direction: str = FORWARD,
               skip_nulls: bool = False) -> IndexScan:
    """An ``IndexScan`` of ``index`` between ``low`` and ``high`` (values of a prefix of
    the index columns; a scalar for the first column; None = unbounded); ``skip_nulls``:
    the range column's NULLs are not returned (``scan_bounds``)."""
    return IndexScan(backend, index, low, high, low_inclusive=low_inclusive,
                     high_inclusive=high_inclusive, direction=direction,
                     skip_nulls=skip_nulls)


def lookup_visible(backend, index, key, snapshot=None) -> list[tuple[tuple[int, int], tuple]]:
    """The rows ``snapshot`` sees whose index key (or key prefix) equals ``key``."""
    scan = IndexScan(backend, index, key, key)
    return list(scan.visible_rows(snapshot))
