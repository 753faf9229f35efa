"""Building an index over an existing table by sorting (nbtsort.c), and dropping one.

``build_index(backend, irel, hrel)`` fills the (empty) file of a new index:

1. **Scan the heap** in chunks of pages: each page is copied out under a share lock, and
   for every tuple of the chunk ``satisfies_vacuum_batch`` says whether anyone may still
   see it.  As in PostgreSQL's build (heapam_index_build_range_scan), every tuple that
   is not DEAD is indexed - live, recently dead, inserted or deleted by a transaction in
   progress - except a HOT-updated version that is recently dead or being deleted: its
   chain's later version stands for it.  A heap-only tuple is indexed under the TID of
   its chain's root line pointer (the TID an index entry must carry, since index scans
   enter HOT chains at the root).  Keys come from one ``RowLayout.gather`` per column
   per chunk and ``KeyCodec.encode_batch``.
2. **Sort** the sort keys (key + TID): for fixed-width keys one numpy ``argsort`` of a
   byte matrix viewed as fixed-length strings (a memcmp order); otherwise Python's sort
   of ``bytes``.  A unique index refuses two equal keys among rows that are live or being
   inserted (UniqueViolation, 23505); entries of dead-ish rows may repeat a key.
3. **Write the leaves** left to right at fillfactor 90 (each page's high key is the first
   sort key of the next), then each internal level at fillfactor 70 from the first sort
   keys of the level below, until one page remains: the root.  Pages are assembled in
   memory (line pointers with one numpy expression, item bytes with one join) and written
   with ``smgr`` directly, checksummed, as PostgreSQL's build writes through
   ``smgrextend`` rather than shared buffers: nobody else can see the relation yet.  The
   metapage (block 0) is written last.

Limits (documented departures): there is no lock manager yet, so a build does not stop
concurrent writers of the table - rows they insert between the heap scan and the catalog
entry appearing are not indexed; run CREATE INDEX while the table is quiet.  Broken HOT
chains (a HOT update made before the index existed that changed a column it covers) are
indexed under the latest version's key only; PostgreSQL then hides the index from older
snapshots (``indcheckxmin``), minidb does not.
"""

from __future__ import annotations

import numpy as np

from minidb.config import BLCKSZ
from minidb.errors import DataCorrupted, ProgramLimitExceeded, UniqueViolation
from minidb.heap.heapam import page_items, positions_to_items
from minidb.heap.layout import FlatViews, gather_header
from minidb.storage.htup import HEAP_HOT_UPDATED, HEAP_ONLY_TUPLE
from minidb.index import btpage as bt
from minidb.index.rel import IndexRel, trace
from minidb.storage import page as pg
from minidb.storage.bufmgr import SHARE
from minidb.storage.freelist import AccessStrategy, is_bulk_read
from minidb.storage.smgr import MAIN_FORKNUM
from minidb.txn import visibility as vis

__all__ = ["build_index", "assemble_page"]

CHUNK_PAGES = 256
WRITE_BATCH = 64
_CTID_BLOCK, _CTID_OFF, _INFOMASK2 = 24, 28, 30


# ---------------------------------------------------------------------------------------------
# page assembly and writing
def assemble_page(items: list[bytes], level: int, flags: int, prev: int, nxt: int
                  ) -> np.ndarray:
    """A B-tree page holding ``items`` in order at offsets 1..n (high key first if any)."""
    page = np.zeros(BLCKSZ, dtype=np.uint8)
    bt.init_page(page, level, flags)
    bt.set_opaque(page, prev, nxt, level, flags)
    n = len(items)
    if n:
        lens = np.fromiter((len(x) for x in items), dtype=np.int64, count=n)
        aligned = (lens + 7) & ~7
        starts = bt.SPECIAL_OFF - np.cumsum(aligned)
        upper = int(starts[-1])
        if upper < pg.PAGE_HEADER_SIZE + 4 * n:
            raise DataCorrupted(f"{n} items of {int(aligned.sum())} bytes do not fit a page")
        tail = b"".join(x.ljust(a, b"\0") for x, a in zip(reversed(items),
                                                         reversed(aligned.tolist())))
        page[upper:bt.SPECIAL_OFF] = np.frombuffer(tail, dtype=np.uint8)
        lower = pg.PAGE_HEADER_SIZE + 4 * n
        page[pg.PAGE_HEADER_SIZE:lower] = (
            starts | (pg.LP_NORMAL << 15) | (lens << 17)).astype("<u4").view(np.uint8)
        page[pg.OFF_LOWER:pg.OFF_LOWER + 4] = np.array([lower, upper], dtype="<u2").view(np.uint8)
    return page


class _Writer:
    """Appends page images to a new relation file, a batch per system call."""

    def __init__(self, smgr, rfn: int):
        self.smgr = smgr
        self.rfn = rfn
        self.next_block = smgr.nblocks(rfn)
        self.written = self.next_block
        self.pending: list[np.ndarray] = []

    def reserve(self) -> int:
        self.pending.append(None)
        blk = self.next_block
        self.next_block += 1
        return blk

    def add(self, page: np.ndarray) -> int:
        blk = self.next_block
        self.pending.append(page)
        self.next_block += 1
        if len(self.pending) >= WRITE_BATCH:
            self.flush()
        return blk

    def flush(self) -> None:
        if not self.pending:
            return
        first = self.written
        pages = [p if p is not None else np.zeros(BLCKSZ, dtype=np.uint8) for p in self.pending]
        for i, p in enumerate(pages):
            if self.pending[i] is not None:
                pg.set_checksum(p, first + i)
        self.smgr.extend(self.rfn, MAIN_FORKNUM, first, len(pages))
        self.smgr.write_blocks(self.rfn, MAIN_FORKNUM, first, pages)
        self.written += len(pages)
        self.pending = []

    def overwrite(self, blk: int, page: np.ndarray) -> None:
        pg.set_checksum(page, blk)
        self.smgr.write_blocks(self.rfn, MAIN_FORKNUM, blk, [page])


# ---------------------------------------------------------------------------------------------
# heap scan
def _root_map(page: np.ndarray, block: int) -> dict[int, int]:
    """offset of every HOT chain member -> offset of its chain's root (line pointer)."""
    out: dict[int, int] = {}
    n = pg.max_offset(page)
    for off in range(1, n + 1):
        lp_off, flags, _len = pg.get_item_id(page, off)
        if flags == pg.LP_REDIRECT:
            cur = lp_off
        elif flags == pg.LP_NORMAL:
            if int(page[lp_off + _INFOMASK2 + 1]) << 8 & HEAP_ONLY_TUPLE:
                continue
            cur = off
        else:
            continue
        prev_xmax = None
        for _ in range(n):
            if not 1 <= cur <= n:
                break
            c_off, c_flags, _l = pg.get_item_id(page, cur)
            if c_flags != pg.LP_NORMAL:
                break
            xmin = int(page[c_off:c_off + 8].view("<u8")[0])
            xmax = int(page[c_off + 8:c_off + 16].view("<u8")[0])
            if prev_xmax is not None and xmin != prev_xmax:
                break
            out[cur] = off
            im2 = int(page[c_off + _INFOMASK2:c_off + _INFOMASK2 + 2].view("<u2")[0])
            cblk = int(page[c_off + _CTID_BLOCK:c_off + _CTID_BLOCK + 4].view("<u4")[0])
            coff = int(page[c_off + _CTID_OFF:c_off + _CTID_OFF + 2].view("<u2")[0])
            if not im2 & HEAP_HOT_UPDATED or cblk != block or coff == cur:
                break
            prev_xmax, cur = xmax, coff
    return out


def collect_entries(backend, irel: IndexRel, hrel):
    """Scan the heap: (keys, blocks, offsets, alive, has_null) of every tuple to index;
    keys is an (n, width) uint8 matrix for fixed-width keys, else a list of bytes."""
    bm = backend.bufmgr
    inst = backend.instance
    procarray, clog = inst.procarray, inst.clog
    horizon = procarray.global_xmin()
    rfn = hrel.relfilenode
    nblocks = bm.smgr.nblocks(rfn)
    strategy = (AccessStrategy("bulkread", backend.settings.bulkread_ring_kb, bm.nbuffers)
                if is_bulk_read(nblocks, bm.nbuffers) else None)
    fixed = irel.codec.fixed_width is not None
    keys_parts, blk_parts, off_parts, alive_parts, null_parts = [], [], [], [], []
    for first in range(0, nblocks, CHUNK_PAGES):
        k = min(CHUNK_PAGES, nblocks - first)
        chunk = np.empty((k, BLCKSZ), dtype=np.uint8)
        for i in range(k):
            b = bm.pin(rfn, first + i, strategy=strategy)
            try:
                bm.lock(b, SHARE)
                chunk[i] = bm.page(b)
                bm.unlock(b)
            finally:
                bm.unpin(b)
        v = FlatViews(chunk.reshape(-1))
        positions, width, starts = page_items(v, np.arange(k, dtype=np.int64))
        if not len(starts):
            continue
        page_idx, item_idx = positions_to_items(positions, width, len(starts))
        hdr = gather_header(v, starts)
        state, _hints = vis.satisfies_vacuum_batch(hdr, horizon, procarray, clog)
        im2 = hdr["infomask2"]
        hot_updated = (im2 & HEAP_HOT_UPDATED) != 0
        keep = (state != vis.DEAD) & ~(hot_updated & (
            (state == vis.RECENTLY_DEAD) | (state == vis.DELETE_IN_PROGRESS)))
        if not keep.any():
            continue
        sel = np.flatnonzero(keep)
        rows = None
        if irel.row_filter is not None or irel.key_fn is not None:
            blob = chunk.tobytes()
            rows = [hrel.layout.decode(blob, s) for s in starts[sel].tolist()]
        if irel.row_filter is not None:     # a partial index: only rows its WHERE accepts
            ok = np.asarray(irel.row_filter(rows), dtype=bool)
            sel = sel[ok]
            rows = [r for r, k in zip(rows, ok.tolist()) if k]
            if not len(sel):
                continue
        offs = (item_idx[sel] + 1).astype(np.int64)
        pidx = page_idx[sel]
        heap_only = (im2[sel] & HEAP_ONLY_TUPLE) != 0
        if heap_only.any():
            for p in np.unique(pidx[heap_only]).tolist():
                roots = _root_map(chunk[p], first + p)
                for j in np.flatnonzero(heap_only & (pidx == p)).tolist():
                    r = roots.get(int(offs[j]))
                    if r is None:
                        raise DataCorrupted(
                            f'failed to find parent tuple for heap-only tuple at '
                            f'({first + p},{int(offs[j])}) in table "{hrel.name}"')
                    offs[j] = r
        if irel.key_fn is not None:         # expression columns: computed, encoded one by one
            kv = irel.keys_of_rows(rows)
            enc = [irel.codec.encode(k) for k in kv]
            keys_parts.append(np.frombuffer(b"".join(enc), dtype=np.uint8).reshape(
                len(enc), irel.codec.fixed_width) if fixed else enc)
            nulls = np.array([any(x is None for x in k) for k in kv], dtype=bool)
        else:
            cols = hrel.layout.gather(v, starts[sel], irel.col_idx,
                                      infomask=hdr["infomask"][sel])
            keys_parts.append(irel.codec.encode_batch(cols, len(sel)))
            nulls = np.zeros(len(sel), dtype=bool)
            for _vals, mask in cols:
                if mask is not None:
                    nulls |= np.asarray(mask, dtype=bool)
        null_parts.append(nulls)
        blk_parts.append((first + pidx).astype(np.int64))
        off_parts.append(offs)
        st = state[sel]
        alive_parts.append((st == vis.LIVE) | (st == vis.INSERT_IN_PROGRESS))
    if blk_parts:
        blocks = np.concatenate(blk_parts)
        offsets = np.concatenate(off_parts)
        alive = np.concatenate(alive_parts)
        nulls = np.concatenate(null_parts)
    else:
        blocks = offsets = np.empty(0, dtype=np.int64)
        alive = nulls = np.empty(0, dtype=bool)
    if fixed:
        keys = (np.concatenate(keys_parts) if keys_parts
                else np.empty((0, irel.codec.fixed_width), dtype=np.uint8))
    else:
        keys = [x for part in keys_parts for x in part]
    return keys, blocks, offsets, alive, nulls


# ---------------------------------------------------------------------------------------------
# sort
def _tid_matrix(blocks: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    n = len(blocks)
    m = np.empty((n, 6), dtype=np.uint8)
    m[:, :4] = blocks.astype(">u4").view(np.uint8).reshape(n, 4)
    m[:, 4:] = offsets.astype(">u2").view(np.uint8).reshape(n, 2)
    return m


def sorted_entries(keys, blocks, offsets):
    """(list of key bytes, tid matrix) in sort-key order."""
    n = len(blocks)
    tids = _tid_matrix(blocks, offsets)
    if isinstance(keys, np.ndarray):
        w = keys.shape[1]
        sk = np.empty((n, w + 6), dtype=np.uint8)
        sk[:, :w] = keys
        sk[:, w:] = tids
        order = np.argsort(sk.view(f"S{w + 6}").reshape(-1), kind="stable")
        ks = keys[order]
        blob = ks.tobytes()
        key_list = [blob[i * w:(i + 1) * w] for i in range(n)]
        return key_list, tids[order], order
    tb = tids.tobytes()
    sks = [keys[i] + tb[6 * i:6 * i + 6] for i in range(n)]
    order = np.array(sorted(range(n), key=sks.__getitem__), dtype=np.int64)
    return [keys[i] for i in order.tolist()], tids[order], order


def _check_sizes(irel: IndexRel, keys) -> None:
    longest = keys.shape[1] if isinstance(keys, np.ndarray) else max(map(len, keys), default=0)
    if not bt.leaf_item_limit_ok(longest):
        size = pg.maxalign(bt.ITUP_HEADER_SIZE + longest + bt.TID_SIZE)
        raise ProgramLimitExceeded(
            f"index row size {size} exceeds btree version {bt.BTREE_VERSION} maximum "
            f'{bt.BT_MAX_ITEM_SIZE} for index "{irel.name}"')


def _check_unique_sorted(irel: IndexRel, key_list, alive_sorted: np.ndarray) -> None:
    prev = None
    for i in np.flatnonzero(alive_sorted).tolist():
        k = key_list[i]
        if k == prev:
            vals = irel.codec.decode(k)
            if any(v is None for v in vals):
                continue
            raise UniqueViolation(f'could not create unique index "{irel.name}": '
                                  f"Key {irel.codec.describe(vals)} is duplicated.")
        prev = k


# ---------------------------------------------------------------------------------------------
# write
def _cut(sizes: np.ndarray, hikey_sizes: np.ndarray, fill: int) -> list[int]:
    """Page boundaries: page p holds items cuts[p]..cuts[p+1]-1, filled to ``fill`` bytes
    with room kept for the high key taken from the next page's first item."""
    n = len(sizes)
    cum = np.concatenate([[0], np.cumsum(sizes)])
    reserve = int(hikey_sizes.max()) if n else 0
    cuts = [0]
    while cuts[-1] < n:
        i = cuts[-1]
        j = int(np.searchsorted(cum, cum[i] + fill - reserve, side="right")) - 1
        if j >= n:
            j = n if cum[n] - cum[i] <= bt.PAGE_ROOM else j
        j = max(j, i + 2 if n - i >= 2 else n)
        cuts.append(min(j, n))
    return cuts


def write_tree(smgr, irel: IndexRel, leaf_items: list[bytes], leaf_sortkeys
               ) -> tuple[int, int, int]:
    """Write the leaves then the internal levels; returns (root, level, pages)."""
    rfn = irel.relfilenode
    w = _Writer(smgr, rfn)
    meta_blk = w.reserve()
    n = len(leaf_items)
    if n == 0:
        root = w.add(assemble_page([], 0, bt.BTP_LEAF | bt.BTP_ROOT, bt.P_NONE, bt.P_NONE))
        level = 0
    else:
        level = 0
        items, lowkeys = leaf_items, leaf_sortkeys  # lowkeys[i]: sort key of items[i]
        while True:
            leaf = level == 0
            lens = np.fromiter((len(x) for x in items), dtype=np.int64, count=len(items))
            sizes = ((lens + 7) & ~7) + pg.ITEMID_SIZE
            if leaf:
                hk = ((lens + bt.TID_SIZE + 7) & ~7) + pg.ITEMID_SIZE
            else:
                hk = sizes
            fill = (bt.LEAF_FILLFACTOR if leaf else bt.NONLEAF_FILLFACTOR) * bt.PAGE_ROOM // 100
            cuts = _cut(sizes, hk, fill)
            npages = len(cuts) - 1
            first_blk = w.next_block
            flags = bt.BTP_LEAF if leaf else 0
            if npages == 1:
                flags |= bt.BTP_ROOT
            uplinks, upkeys = [], []
            for p in range(npages):
                i, j = cuts[p], cuts[p + 1]
                blk = first_blk + p
                prev = blk - 1 if p else bt.P_NONE
                nxt = blk + 1 if p + 1 < npages else bt.P_NONE
                page_items_ = items[i:j]
                if not leaf:  # the first item of an internal page is minus infinity
                    page_items_ = [bt.pivot_tuple(b"", bt.ITUP.unpack_from(items[i])[0])] \
                        + page_items_[1:]
                if nxt != bt.P_NONE:
                    page_items_ = [bt.pivot_tuple(lowkeys[j], 0)] + page_items_
                w.add(assemble_page(page_items_, level, flags, prev, nxt))
                uplinks.append(blk)
                upkeys.append(lowkeys[i])
            if npages == 1:
                root = first_blk
                break
            items = [bt.pivot_tuple(k if p else b"", blk)
                     for p, (k, blk) in enumerate(zip(upkeys, uplinks))]
            lowkeys = upkeys
            level += 1
    w.flush()
    meta = np.zeros(BLCKSZ, dtype=np.uint8)
    bt.init_meta_page(meta, root, level)
    w.overwrite(meta_blk, meta)
    return root, level, w.next_block


def build_index(backend, irel: IndexRel, hrel) -> int:
    """Fill the empty file of index ``irel`` from table ``hrel``; returns the entries."""
    keys, blocks, offsets, alive, nulls = collect_entries(backend, irel, hrel)
    _check_sizes(irel, keys)
    key_list, tids, order = sorted_entries(keys, blocks, offsets)
    null_flag = nulls[order].tolist()
    if irel.unique:
        _check_unique_sorted(irel, key_list, alive[order] & ~nulls[order])
    tb = tids.tobytes()
    n = len(key_list)
    leaf_items = [tb[6 * i:6 * i + 6]
                  + ((8 + len(k)) | (bt.INDEX_HAS_NULL if null_flag[i] else 0)).to_bytes(2, "big")
                  + k for i, k in enumerate(key_list)]
    sortkeys = [k + tb[6 * i:6 * i + 6] for i, k in enumerate(key_list)]
    root, level, pages = write_tree(backend.bufmgr.smgr, irel, leaf_items, sortkeys)
    if backend.settings.fsync:
        # written around the buffer pool and not WAL-logged (PostgreSQL's wal_level=minimal
        # index build): durable before the index can be used, and every later change of a
        # page logs an image first (its pd_lsn is older than any redo point)
        backend.bufmgr.smgr.fsync_rels([irel.relfilenode])
    trace(backend, irel, f"built: {n} entries, {pages} pages, root {root} at level "
                         f"{level}")
    return n

