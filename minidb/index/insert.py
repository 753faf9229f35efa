"""Inserting into the B-tree: leaf insert, simple deletion, page splits, new roots
(nbtinsert.c and, for the split point, nbtsplitloc.c).

``insert_entry(backend, index, row, tid)`` adds the entry (key of ``row``, heap ``tid``)
after the executor has put the row in the heap.  Its path:

1. encode the key; refuse it if its pivot form (key + TID + header) is larger than
   BT_MAX_ITEM_SIZE, a third of a page (ProgramLimitExceeded names the index);
2. unique index and no NULL in the key: descend for the key alone, check duplicates
   (``unique.check_unique``; on a running conflicting transaction: release everything,
   wait for it, start over), then move right to where key + TID belongs;
   otherwise: descend for key + TID (``search.search(write=True)``); the leaf comes back
   exclusively locked, incomplete splits on the way finished;
3. binary-search the position and add the item there (line pointers shift up);
4. if the page has no room: if BTP_HAS_GARBAGE, first remove its LP_DEAD items (*simple
   deletion*, counter ``index_items_deleted``) - an exclusive lock is enough, because any
   scan that still holds a batch from this page will find its LSN changed; only if that
   freed too little, split.

Split (``_split``), holding the page exclusively:

* the items plus the new one are cut at the split point (``choose_split``): on the
  rightmost page of a level the left half is left fillfactor-full (90% for leaves, 70%
  above), which packs ascending inserts; elsewhere the cut balances bytes;
* a new page, always added at the end of the file, becomes the *right* half; it takes
  over the old right link and high key; the left half gets the first sort key of the
  right half as its new high key and its right link points to the new page; the old
  right sibling's left link is updated (locked after the left and new pages: locks are
  always taken left to right, and child before parent);
* on an internal page the right half's first item keeps only its downlink: its key
  becomes the left's high key and "minus infinity" on the right;
* the left page is flagged BTP_INCOMPLETE_SPLIT, the right page is released, and the
  downlink (left's high key -> new page) is inserted into the parent
  (``_insert_parent``) found from the descent's stack, re-found by moving right from
  where the stack says (``_getstackbuf``), since the parent may have split meanwhile;
  the flag is cleared, and the left page released, once the downlink is in;
* splitting the root creates a new root one level up holding two downlinks and points
  the metapage at it (``_new_root``);
* a page left with BTP_INCOMPLETE_SPLIT (the splitter failed between the two steps) is
  completed by the next writer that meets it (``finish_split``) before it inserts.

Lock order (no deadlock): a process holding a page lock may wait only for pages to its
right on the same level, for pages higher up, for the metapage (last), or for a heap
page (the unique check); descents hold one lock at a time; nobody waits downward or
leftward while holding a lock.

Left out: deduplication (posting lists), suffix truncation of pivots, bottom-up
deletion, the fast root, free-page reuse (pages are never deleted, so a split always
extends the file).  Each step is one WAL record (minidb/storage/xloginsert.py); a leaf
insert's is logical (``minidb.index.redo``: the items and their offsets), the others are
page deltas or images.
"""

from __future__ import annotations

import struct

import numpy as np

from minidb.errors import DataCorrupted, InternalError, ProgramLimitExceeded
from minidb.index import btpage as bt
from minidb.index import redo
from minidb.index.build import assemble_page
from minidb.index.rel import IndexRel, count, open_index, trace
from minidb.index.search import get_endpoint, get_root, moveright, release, search
from minidb.index.unique import check_unique
from minidb.storage import page as pg
from minidb.storage.bufmgr import EXCLUSIVE
from minidb.storage.xloginsert import PageRecord
from minidb.wal.record import (RM_BTREE, XLOG_BTREE_DELETE, XLOG_BTREE_INSERT_LEAF,
                               XLOG_BTREE_INSERT_UPPER, XLOG_BTREE_NEWROOT, XLOG_BTREE_SPLIT_L,
                               XLOG_BTREE_SPLIT_R)

__all__ = ["insert_entry", "insert_entries", "finish_split", "choose_split"]

_U16 = struct.Struct("<H")                # INSERT_* main data: the offset; DELETE: count
_SPLIT_MAIN = struct.Struct("<IHH")      # level, first offset going right, new item's offset
_NEWROOT_MAIN = struct.Struct("<II")     # root block, its level


def insert_entry(backend, index, row, tid) -> None:
    """Insert the index entry of heap row ``row`` (all the table's columns) at ``tid``
    (none when the row does not satisfy a partial index's predicate)."""
    irel = open_index(backend, index)
    if irel.row_filter is not None and not irel.row_filter([row])[0]:
        return
    keyvals = irel.key_of_row(row)
    key, itup, sortkey, has_null = _entry(irel, keyvals, int(tid[0]), int(tid[1]))
    b, blk, _data, stack, pos = _find_leaf(backend, irel, key, keyvals, sortkey, has_null,
                                           (int(tid[0]), int(tid[1])))
    _insert_on_page(backend, irel, b, blk, itup, pos, stack)


def _entry(irel: IndexRel, keyvals, block: int, off: int):
    """(key, leaf item, sort key, has NULL) of one entry; refuses a key too large."""
    key = irel.codec.encode(keyvals)
    has_null = any(v is None for v in keyvals)
    if not bt.leaf_item_limit_ok(len(key)):
        size = pg.maxalign(bt.ITUP_HEADER_SIZE + len(key) + bt.TID_SIZE)
        raise ProgramLimitExceeded(
            f"index row size {size} exceeds btree version {bt.BTREE_VERSION} maximum "
            f'{bt.BT_MAX_ITEM_SIZE} for index "{irel.name}"')
    return key, bt.leaf_tuple(key, block, off, has_null), key + bt.tid_bytes(block, off), \
        has_null


def _find_leaf(backend, irel: IndexRel, key: bytes, keyvals, sortkey: bytes, has_null: bool,
               tid: tuple[int, int]):
    """Descend to the leaf where ``sortkey`` goes, exclusively locked, after the unique
    check of a unique index (waiting for a running inserter of the same key and starting
    over).  Returns (buffer, block, page copy, stack, offset for the new item)."""
    bm = backend.bufmgr

    def finish(_bm, irel, b, blk, stack):  # search's hook for an INCOMPLETE_SPLIT page
        finish_split(backend, irel, b, blk, stack)

    if irel.unique and not has_null:
        hrel = backend.catalog.heap_rel(irel.table)
        settings = backend.settings
        while True:
            b, blk, data, stack = search(bm, irel, key, write=True, finish=finish)
            try:
                # the key's first entry on the leaf: where the unique check starts, and a
                # lower bound of key + TID's place
                kpos = bt.binsearch_leaf(data, key, bt.first_data(bt.opaque(data)[1]),
                                         bt.nitems(data))
                xwait = check_unique(backend, irel, hrel, b, data, key, keyvals, tid,
                                     start=kpos)
            except BaseException:
                release(bm, b)
                raise
            if xwait:
                release(bm, b)
                backend.instance.procarray.wait_for(
                    backend.slot, xwait, lock_timeout_ms=settings.lock_timeout,
                    deadlock_timeout_ms=settings.deadlock_timeout,
                    max_wait_ms=settings.lock_wait_timeout_ms,
                    what=f' (unique check of index "{irel.name}")')
                continue
            # key + TID may belong right of the key's first page (its high key <= it);
            # else the copy search made still tells offsets and keys (the unique check
            # changes at most line pointer flags, and the page stayed locked)
            nxt = bt.opaque(data)[1]
            if nxt != bt.P_NONE and sortkey >= bt.pivot_key(data, bt.P_HIKEY):
                b, blk, data = moveright(bm, irel, b, blk, sortkey, EXCLUSIVE, finish, stack)
                kpos = -1
            break
    else:
        b, blk, data, stack = search(bm, irel, sortkey, write=True, finish=finish)
        kpos = -1
    try:
        _prev, nxt, _lvl, _flags, _c = bt.opaque(data)
        maxoff = bt.nitems(data)
        if kpos >= 0:   # every item before the key's first sorts before key + TID too; the
            # key's entries (the versions of one row) are few: gallop from there
            pos = bt.gallop_leaf(data, sortkey, kpos, maxoff)
        else:
            pos = bt.binsearch_leaf(data, sortkey, bt.first_data(nxt), maxoff)
        if pos <= maxoff and bt.leaf_sortkey(data, pos) == sortkey:
            raise InternalError(f'index "{irel.name}" already has an entry for key '
                                f"{irel.codec.describe(keyvals)} and heap tid {tid}")
    except BaseException:
        release(bm, b)
        raise
    return b, blk, data, stack, pos


def insert_entries(backend, index, key_columns: list, blocks, offsets) -> int:
    """Insert many entries at once (a bulk load): ``key_columns`` holds, per key column,
    the rows' values (None for NULL), ``blocks`` / ``offsets`` the rows' heap TIDs.
    Returns the number of leaf-page batches written.

    The keys, items and sort keys are made for all rows at once with numpy when the key
    is fixed-width and its values are stored as given (integer, bigint, double precision,
    boolean: ``KeyCodec.encode_batch``), else row by row.

    The entries are sorted by sort key (key + TID) and inserted in that order.  The first
    entry of a batch is inserted as ``insert_entry`` does (descent, unique check, its
    position); the entries after it that belong on the same leaf page and fit in its free
    space join it, and the whole batch is added under one exclusive lock with one WAL
    record.  An entry leaves the batch to the one-at-a-time path (which may split the
    page, wait or raise) when it may meet an existing entry of the same key in a unique
    index (an equal key beside its place on the page, or a high key it is a prefix of), equals
    the previous entry's key (a duplicate inside the load: that path raises
    UniqueViolation), sorts at or after the page's high key, or no longer fits.  A load in key order into the
    rightmost leaf (the usual case: ascending keys) thus costs one descent per page, not
    per entry."""
    irel = open_index(backend, index)
    bm = backend.bufmgr
    unique = irel.unique
    ents = _entries(irel, key_columns, blocks, offsets)
    n = len(ents)
    xid = backend.xact.xid
    batches = 0
    i = 0
    while i < n:
        sortkey, key, itup, has_null, r = ents[i]
        kv = tuple(c[r] for c in key_columns)
        tid = (int(blocks[r]), int(offsets[r]))
        b, blk, data, stack, pos = _find_leaf(backend, irel, key, kv, sortkey, has_null, tid)
        page = bm.page(b)
        free = pg.free_space(page)
        used = pg.maxalign(len(itup))
        if used > free:
            _insert_on_page(backend, irel, b, blk, itup, pos, stack)
            i += 1
            continue
        _prev, nxt, _lvl, _flags, _c = bt.opaque(data)
        hikey = None if nxt == bt.P_NONE else bt.pivot_key(data, bt.P_HIKEY)
        first = bt.first_data(nxt)
        maxoff = bt.nitems(data)
        batch = [(pos, itup)]
        last = pos
        prev_key = key
        last_key = bt.leaf_key(data, maxoff) if maxoff >= first else None
        j = i + 1
        while j < n:
            sk, kj, itj, nullj, _r = ents[j]
            if hikey is not None and sk >= hikey:
                break
            need = pg.maxalign(len(itj)) + pg.ITEMID_SIZE
            if used + need > free:
                break
            p = maxoff + 1 if last > maxoff else bt.binsearch_leaf(data, sk, last, maxoff)
            if p <= maxoff and bt.leaf_sortkey(data, p) == sk:
                break
            if unique and not nullj and (
                    kj == prev_key or kj.startswith(key)
                    or (hikey is not None and hikey.startswith(kj))
                    or (p > maxoff and kj == last_key)
                    or (first < p <= maxoff and bt.leaf_key(data, p - 1) == kj)
                    or (p <= maxoff and bt.leaf_key(data, p) == kj)):
                break
            batch.append((p, itj))
            used += need
            last = p
            prev_key = kj
            j += 1
        try:
            if batch[0][0] > maxoff:       # all after the last item: one append
                _append_items(page, [it for _p, it in batch])
            else:
                for k, (p, it) in enumerate(batch):
                    pg.add_item(page, it, offset=p + k, heap=False)
            PageRecord(bm).add(b, data=redo.insert_data(
                [(p + k, it) for k, (p, it) in enumerate(batch)])).log(
                RM_BTREE, XLOG_BTREE_INSERT_LEAF, xid, _U16.pack(pos))
        finally:
            release(bm, b)
        batches += 1
        i = j
    return batches


_VECTOR_KEY_TYPES = frozenset({"integer", "bigint", "double precision", "boolean"})


def _entries(irel: IndexRel, key_columns: list, blocks, offsets) -> list:
    """(sort key, key, leaf item, has NULL, row) of every row, in sort-key order."""
    codec = irel.codec
    n = len(blocks)
    if codec.fixed_width is not None and all(t.name in _VECTOR_KEY_TYPES
                                             for t in codec.types):
        cols = []
        any_null = np.zeros(n, dtype=bool)
        for vals in key_columns:
            mask = None
            if None in vals:
                mask = np.fromiter((v is None for v in vals), dtype=bool, count=n)
                vals = [0 if v is None else v for v in vals]
                any_null |= mask
            cols.append((np.asarray(vals), mask))
        w = codec.fixed_width
        keys = codec.encode_batch(cols, n)
        if not bt.leaf_item_limit_ok(w):
            _entry(irel, tuple(c[0] for c in key_columns), 0, 0)   # raises
        tids = np.empty((n, 6), dtype=np.uint8)
        tids[:, :4] = np.asarray(blocks, dtype=">u4").view(np.uint8).reshape(n, 4)
        tids[:, 4:] = np.asarray(offsets, dtype=">u2").view(np.uint8).reshape(n, 2)
        sk = np.empty((n, w + 6), dtype=np.uint8)
        sk[:, :w] = keys
        sk[:, w:] = tids
        order = np.argsort(sk.view(f"S{w + 6}").reshape(-1), kind="stable")
        items = np.empty((n, bt.ITUP_HEADER_SIZE + w), dtype=np.uint8)
        items[:, :6] = tids
        size = (np.full(n, bt.ITUP_HEADER_SIZE + w, dtype=np.int64)
                | np.where(any_null, bt.INDEX_HAS_NULL, 0))
        items[:, 6:8] = size.astype(">u2").view(np.uint8).reshape(n, 2)
        items[:, 8:] = keys
        skb, kb, ib = sk[order].tobytes(), keys[order].tobytes(), items[order].tobytes()
        ws, wi = w + 6, bt.ITUP_HEADER_SIZE + w
        nulls = any_null[order].tolist()
        return [(skb[k * ws:(k + 1) * ws], kb[k * w:(k + 1) * w], ib[k * wi:(k + 1) * wi],
                 nulls[k], r) for k, r in enumerate(order.tolist())]
    ents = []
    for r, (blk, off) in enumerate(zip(np.asarray(blocks).tolist(),
                                       np.asarray(offsets).tolist())):
        key, itup, sortkey, has_null = _entry(irel, tuple(c[r] for c in key_columns), blk, off)
        ents.append((sortkey, key, itup, has_null, r))
    ents.sort(key=lambda e: e[0])
    return ents


def _append_items(page, items: list[bytes]) -> None:
    """Add ``items`` after the page's last line pointer, in order, as that many
    ``add_item`` calls would (the caller checked that they fit)."""
    lower, upper = struct.unpack_from("<HH", page, pg.OFF_LOWER)
    n = len(items)
    lens = np.fromiter(map(len, items), dtype=np.int64, count=n)
    aligned = (lens + 7) & ~7
    starts = upper - np.cumsum(aligned)
    new_upper = int(starts[-1])
    new_lower = lower + pg.ITEMID_SIZE * n
    if new_upper < new_lower:
        raise InternalError(f"{n} index items do not fit the page")
    page[new_upper:upper] = np.frombuffer(
        b"".join(x.ljust(a, b"\0") for x, a in zip(reversed(items),
                                                   reversed(aligned.tolist()))), dtype=np.uint8)
    page[lower:new_lower] = (starts | (pg.LP_NORMAL << 15) | (lens << 17)).astype(
        "<u4").view(np.uint8)
    struct.pack_into("<HH", page, pg.OFF_LOWER, new_lower, new_upper)


# ---------------------------------------------------------------------------------------------
# one page
def _sortkey_of(itup: bytes, leaf: bool) -> bytes:
    return itup[8:] + itup[:6] if leaf else itup[8:]


def _simple_delete(backend, irel: IndexRel, b: int, blk: int) -> int:
    """Remove the LP_DEAD items of an exclusively locked leaf (_bt_simpledel_pass)."""
    bm = backend.bufmgr
    page = bm.page(b)
    _off, flags, _len = bt.leaf_items(page)
    dead = (np.flatnonzero(flags == pg.LP_DEAD) + 1).tolist()
    wr = PageRecord(bm).add(b)
    if dead:
        pg.delete_items(page, dead)
        count(bm, "index_items_deleted", len(dead))
        trace(backend, irel,
              f"simple deletion removed {len(dead)} LP_DEAD items from block {blk}")
    bt.set_flags(page, bt.get_flags(page) & ~bt.BTP_HAS_GARBAGE)
    wr.log(RM_BTREE, XLOG_BTREE_DELETE, backend.xact.xid, _U16.pack(len(dead)))
    return len(dead)


def _clear_incomplete(bm, cb: int) -> None:
    """The downlink of the right half is in: clear the left half's flag (the caller has
    added ``cb`` to the record that inserts the downlink)."""
    page = bm.page(cb)
    bt.set_flags(page, bt.get_flags(page) & ~bt.BTP_INCOMPLETE_SPLIT)


def _insert_on_page(backend, irel: IndexRel, b: int, blk: int, itup: bytes, pos: int, stack,
                    cb: int = -1) -> None:
    """Insert ``itup`` at offset ``pos`` of the exclusively locked page ``b``, splitting
    if it does not fit (_bt_insertonpg).  ``cb``: the locked left child whose split this
    downlink completes.  Releases ``b`` (and ``cb``) in every case."""
    bm = backend.bufmgr
    rb = -1
    try:
        page = bm.page_view(b)   # struct reads and writes cost less on the memoryview
        need = pg.maxalign(len(itup))
        flags = bt.get_flags(page)
        leaf = bool(flags & bt.BTP_LEAF)
        if leaf and need > pg.free_space(page) and flags & bt.BTP_HAS_GARBAGE:
            if _simple_delete(backend, irel, b, blk):
                data = page.tobytes()
                nxt = bt.opaque(data)[1]
                pos = bt.binsearch_leaf(data, _sortkey_of(itup, True), bt.first_data(nxt),
                                        bt.nitems(data))
        if need <= pg.free_space(page):
            # a leaf insert is logged logically (minidb.index.redo); a downlink, which
            # also clears the child's INCOMPLETE_SPLIT, as the deltas of both pages
            wr = PageRecord(bm)
            if leaf:
                wr.add(b, data=redo.insert_data(((pos, itup),)))
            else:
                wr.add(b)
            if cb >= 0:
                wr.add(cb)
            pg.add_item(page, itup, offset=pos, heap=False)
            if cb >= 0:
                _clear_incomplete(bm, cb)
            wr.log(RM_BTREE, XLOG_BTREE_INSERT_LEAF if leaf else XLOG_BTREE_INSERT_UPPER,
                   backend.xact.xid, _U16.pack(pos))
            if cb >= 0:
                cb, c = -1, cb
                release(bm, c)
            release(bm, b)
            return
        rb, rblk = _split(backend, irel, b, blk, itup, pos, cb)
        if cb >= 0:
            cb, c = -1, cb
            release(bm, c)
    except BaseException:
        release(bm, b)
        for x in (rb, cb):
            if x >= 0:
                release(bm, x)
        raise
    _insert_parent(backend, irel, b, blk, rb, rblk, stack, bool(flags & bt.BTP_ROOT))


# ---------------------------------------------------------------------------------------------
# split
def choose_split(items: list[bytes], leaf: bool, rightmost: bool, old_hikey: bytes | None
                 ) -> int:
    """The index m of the first item that goes right (_bt_findsplitloc, simplified)."""
    n = len(items)
    sizes = [pg.maxalign(len(it)) + pg.ITEMID_SIZE for it in items]
    total = sum(sizes)
    room = bt.PAGE_ROOM
    right_hk = pg.maxalign(len(old_hikey)) + pg.ITEMID_SIZE if old_hikey is not None else 0
    fill = (bt.LEAF_FILLFACTOR if leaf else bt.NONLEAF_FILLFACTOR) * room // 100
    best, best_score = -1, None
    left_sum = 0
    for m in range(1, n):
        left_sum += sizes[m - 1]
        if leaf:
            hk = pg.maxalign(len(items[m]) + bt.TID_SIZE) + pg.ITEMID_SIZE
            right = total - left_sum + right_hk
        else:
            hk = sizes[m]
            right = total - left_sum - sizes[m] + pg.maxalign(bt.ITUP_HEADER_SIZE) \
                + pg.ITEMID_SIZE + right_hk
        left = left_sum + hk
        if left > room or right > room:
            continue
        if rightmost:
            score = (0, fill - left) if left <= fill else (1, left - fill)
        else:
            score = (0, abs(left - right))
        if best_score is None or score < best_score:
            best, best_score = m, score
    if best < 0:
        raise InternalError(f"no legal split point among {n} items")
    return best


def _split(backend, irel: IndexRel, b: int, blk: int, itup: bytes, pos: int, cb: int = -1
           ) -> tuple[int, int]:
    """Split the exclusively locked page ``b`` with ``itup`` going to ``pos``.  Returns the
    new right page (pinned, locked); ``b`` stays locked, flagged INCOMPLETE_SPLIT.  ``cb``:
    the locked child whose split the new item's downlink completes (its flag is cleared in
    the same WAL record, SPLIT_L / SPLIT_R with four blocks as PostgreSQL's)."""
    bm = backend.bufmgr
    rfn = irel.relfilenode
    page = bm.page(b)
    data = page.tobytes()
    prev, nxt, level, flags, _c = bt.opaque(data)
    leaf = bool(flags & bt.BTP_LEAF)
    first = bt.first_data(nxt)
    maxoff = bt.nitems(data)
    items = [bt.item_bytes(data, o) for o in range(first, maxoff + 1)]
    items.insert(pos - first, itup)
    old_hikey = bt.item_bytes(data, bt.P_HIKEY) if nxt != bt.P_NONE else None
    m = choose_split(items, leaf, nxt == bt.P_NONE, old_hikey)
    sep = _sortkey_of(items[m], leaf)
    right_items = items[m:]
    if not leaf:
        right_items[0] = bt.pivot_tuple(b"", bt.ITUP.unpack_from(items[m])[0])

    # every wait first (new page, old right sibling), so a failure changes nothing
    rblk, bufs = bm.extend(rfn, 1)
    rb = bufs[0]
    sb = -1
    try:
        if nxt != bt.P_NONE:
            sb = bm.pin_lock(rfn, nxt, EXCLUSIVE)
        wr = PageRecord(bm).add(b).add(rb, new=True)
        if sb >= 0:
            wr.add(sb)
        if cb >= 0:
            wr.add(cb)
        # both halves assembled as whole pages (what adding the items one by one to an
        # empty page would make, in one pass)
        page_flags = flags & bt.BTP_LEAF
        rpage = bm.page(rb)
        rpage[:] = assemble_page(([old_hikey] if old_hikey is not None else []) + right_items,
                                 level, page_flags, blk, nxt)
        lflags = (flags & ~(bt.BTP_ROOT | bt.BTP_HAS_GARBAGE)) | bt.BTP_INCOMPLETE_SPLIT
        tmp = assemble_page([bt.pivot_tuple(sep, 0)] + items[:m], level, lflags, prev, rblk)

        if sb >= 0:
            bt.set_prev(bm.page(sb), rblk)
        lsn = pg.get_lsn(page)
        page[:] = tmp
        pg.set_lsn(page, lsn)
        if cb >= 0:
            _clear_incomplete(bm, cb)
        wr.log(RM_BTREE, XLOG_BTREE_SPLIT_L if pos - first < m else XLOG_BTREE_SPLIT_R,
               backend.xact.xid, _SPLIT_MAIN.pack(level, m + first, pos))
    except BaseException:
        bm.mark_dirty(rb)  # an orphan page: harmless, never linked
        release(bm, rb)
        raise
    finally:
        if sb >= 0:
            release(bm, sb)
    count(bm, "index_splits")
    trace(backend, irel, f"split {'leaf' if leaf else 'level ' + str(level)} block {blk}: "
                         f"{m} items stay, {len(items) - m} go to new block {rblk}")
    return rb, rblk


def _new_root(backend, irel: IndexRel, lb: int, lblk: int, rb: int, rblk: int) -> None:
    """The root split: a new root above the two halves (_bt_newroot).  Releases all."""
    bm = backend.bufmgr
    rfn = irel.relfilenode
    nb = mb = -1
    try:
        lpage = bm.page(lb)
        level = bt.opaque(lpage)[2]
        sep = bt.pivot_key(lpage, bt.P_HIKEY)
        nblk, bufs = bm.extend(rfn, 1)
        nb = bufs[0]
        mb = bm.pin_lock(rfn, bt.BTREE_METAPAGE, EXCLUSIVE)
        wr = PageRecord(bm).add(nb, new=True).add(lb).add(mb)
        npage = bm.page(nb)
        bt.init_page(npage, level + 1, bt.BTP_ROOT)
        pg.add_item(npage, bt.pivot_tuple(b"", lblk), heap=False)
        pg.add_item(npage, bt.pivot_tuple(sep, rblk), heap=False)
        bt.write_meta(bm.page(mb), nblk, level + 1)
        _clear_incomplete(bm, lb)
        wr.log(RM_BTREE, XLOG_BTREE_NEWROOT, backend.xact.xid, _NEWROOT_MAIN.pack(nblk, level + 1))
        irel.root_cache = [nblk, level + 1]
        trace(backend, irel, f"new root block {nblk} at level {level + 1} over blocks {lblk} "
                             f"and {rblk}")
    finally:
        for x in (mb, nb, rb, lb):
            if x >= 0:
                release(bm, x)


def _getstackbuf(backend, irel: IndexRel, blk: int, start: int, child: int, stack):
    """Lock (exclusively) the parent page holding the downlink to ``child``, starting at
    ``blk``/``start`` and moving right (_bt_getstackbuf).  (buffer, block, offset), or
    None if the downlink is nowhere."""
    bm = backend.bufmgr
    rfn = irel.relfilenode
    while True:
        b = bm.pin_lock(rfn, blk, EXCLUSIVE)
        try:
            data = bm.page(b).tobytes()
        except BaseException:
            release(bm, b)
            raise
        _prev, nxt, _lvl, flags, _c = bt.opaque(data)
        if flags & bt.BTP_INCOMPLETE_SPLIT:
            finish_split(backend, irel, b, blk, stack)
            continue
        if not flags & (bt.BTP_DELETED | bt.BTP_HALF_DEAD):
            first = bt.first_data(nxt)
            maxoff = bt.nitems(data)
            s = max(start, first)
            for off in range(s, maxoff + 1):
                if bt.downlink(data, off) == child:
                    return b, blk, off
            for off in range(min(s - 1, maxoff), first - 1, -1):
                if bt.downlink(data, off) == child:
                    return b, blk, off
        release(bm, b)
        if nxt == bt.P_NONE:
            return None
        blk, start = nxt, 1


def _insert_parent(backend, irel: IndexRel, lb: int, lblk: int, rb: int, rblk: int, stack,
                   was_root: bool) -> None:
    """Insert the downlink to the new right half ``rb`` into the parent of ``lb``
    (_bt_insert_parent).  Releases both."""
    bm = backend.bufmgr
    if was_root:
        _new_root(backend, irel, lb, lblk, rb, rblk)
        return
    try:
        lpage = bm.page(lb)
        level = bt.opaque(lpage)[2]
        itup = bt.pivot_tuple(bt.pivot_key(lpage, bt.P_HIKEY), rblk)
        release(bm, rb)
        rb = -1
        if stack:
            pblk, poff = stack[-1]
            rest = stack[:-1]
        else:
            # the tree grew above us since our descent: start at the parent level's left end
            trace(backend, irel, f"block {lblk} split with no parent on the stack: searching "
                                 f"level {level + 1} from its left end")
            pblk, poff, rest = get_endpoint(bm, irel, level + 1), 1, []
        found = _getstackbuf(backend, irel, pblk, poff, lblk, rest)
        if found is None:
            raise DataCorrupted(f'failed to re-find parent key in index "{irel.name}" for '
                                f"split pages {lblk}/{rblk}")
    except BaseException:
        if rb >= 0:
            release(bm, rb)
        release(bm, lb)
        raise
    pb, pblk, poff = found
    _insert_on_page(backend, irel, pb, pblk, itup, poff + 1, rest, cb=lb)


def finish_split(backend, irel: IndexRel, lb: int, lblk: int, stack) -> None:
    """Complete the split of the exclusively locked INCOMPLETE_SPLIT page ``lb``: insert
    its right sibling's downlink into the parent (_bt_finish_split).  Releases ``lb``."""
    bm = backend.bufmgr
    try:
        nxt = bt.opaque(bm.page(lb))[1]
        rb = bm.pin_lock(irel.relfilenode, nxt, EXCLUSIVE)
    except BaseException:
        release(bm, lb)
        raise
    try:
        root, _level = get_root(bm, irel, refresh=True)
    except BaseException:
        release(bm, rb)
        release(bm, lb)
        raise
    trace(backend, irel, f"finishing the incomplete split of block {lblk} (right half {nxt})")
    _insert_parent(backend, irel, lb, lblk, rb, nxt, stack, root == lblk)
