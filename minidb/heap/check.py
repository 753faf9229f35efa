"""``check_heap``: verify the invariants of every page of a heap relation (amcheck's heap part).

Tests call it after every write-heavy test; a user can call it on a table they distrust.  It
reads each page through the buffer manager (pin, share lock, copy, unlock, unpin; with the
bulk-read ring for relations larger than a quarter of the pool, so a check does not wipe the
pool) and checks, naming block and offset on the first failure:

  1. the page header is possible (``page.check_page_header``); an all-zero (new) page is
     allowed and holds no tuples; a heap page has no special space (pd_special == BLCKSZ);
  2. at most ``MAX_HEAP_TUPLES_PER_PAGE`` line pointers;
  3. every line pointer with storage lies inside [pd_upper, pd_special), starts 8-aligned,
     and no two tuples' storage overlaps; LP_UNUSED pointers are all-zero words;
     an LP_REDIRECT points at an existing other line pointer, and that one is an LP_NORMAL
     heap-only tuple (pruning redirects a HOT chain's root to its first surviving member);
  4. every LP_NORMAL tuple matches the relation's layout: lp_len >= the fixed part,
     ``t_hoff`` == layout.t_hoff, natts (t_infomask2 & HEAP_NATTS_MASK) == layout.natts, and
     every non-null variable-length value lies in the tuple's tail (layout invariant 4);
  5. a tuple that was never deleted, locked or updated (xmax 0) has ``t_ctid`` equal to its
     own TID (heapam invariant 1); one with xmax set has a t_ctid naming a block of the
     relation (an update points it at the new version - and keeps it there when the update
     aborts, so an XMAX_INVALID hint does not bring the own TID back); a HOT-updated tuple
     (HEAP_HOT_UPDATED, xmax not known invalid) has its t_ctid on its own page; a heap-only
     tuple (HEAP_ONLY_TUPLE) is the result of an update (HEAP_UPDATED);
  6. on a page marked PD_NO_NULLS no tuple has HEAP_HASNULL (page invariant 4a: scans
     skip reading the null bits of such pages).

Returns the number of LP_NORMAL tuples.  Raises ``DataCorrupted`` naming the relation, block
and offset.  What it does not check: visibility (whether xmin/xmax make sense against the
commit log), HOT chains beyond the redirect target's existence, the free-space map, and the
decoded values (a string that is not valid UTF-8 shows up when the row is read).
"""

from __future__ import annotations

import numpy as np

from minidb.config import BLCKSZ
from minidb.errors import DataCorrupted
from minidb.heap.heapam import MAX_HEAP_TUPLES_PER_PAGE, HeapRel
from minidb.heap.layout import BITMAP_OFFSET, decode_header
from minidb.storage.htup import (HEAP_HASNULL, HEAP_HOT_UPDATED, HEAP_NATTS_MASK,
                                 HEAP_ONLY_TUPLE, HEAP_UPDATED, HEAP_XMAX_INVALID)
from minidb.storage import page as pg
from minidb.storage.bufmgr import SHARE
from minidb.storage.freelist import AccessStrategy, is_bulk_read


def check_heap(backend, rel: HeapRel) -> int:
    """Check every page of ``rel`` (see the module docstring); returns the tuple count."""
    bm = backend.bufmgr
    rfn = rel.relfilenode
    nblocks = bm.smgr.nblocks(rfn)
    strategy = (AccessStrategy("bulkread", backend.settings.bulkread_ring_kb, bm.nbuffers)
                if is_bulk_read(nblocks, bm.nbuffers) else None)
    total = 0
    for block in range(nblocks):
        b = bm.pin(rfn, block, strategy=strategy)
        try:
            bm.lock(b, SHARE)
            try:
                page = bm.page(b).copy()
            finally:
                bm.unlock(b)
        finally:
            bm.unpin(b)
        total += check_heap_page(page, rel, block, nblocks)
    return total


def check_heap_page(page: np.ndarray, rel: HeapRel, block: int, nblocks: int) -> int:
    """Check one heap page image (see the module docstring); returns its LP_NORMAL count."""
    what = f'block {block} of relation "{rel.name}" (file base/{rel.relfilenode})'

    def fail(off, msg):
        where = f"{what}, offset {off}" if off else what
        raise DataCorrupted(f"heap check failed in {where}: {msg}")

    pg.check_page_header(page, what)
    if pg.page_is_new(page):
        return 0
    upper, special = pg.get_upper(page), pg.get_special(page)
    if special != BLCKSZ:
        fail(0, f"pd_special {special}: a heap page has no special space")
    n = pg.max_offset(page)
    if n > MAX_HEAP_TUPLES_PER_PAGE:
        fail(0, f"{n} line pointers, more than MAX_HEAP_TUPLES_PER_PAGE "
                f"{MAX_HEAP_TUPLES_PER_PAGE}")
    layout = rel.layout
    ranges = []
    count = 0
    no_nulls = bool(pg.get_flags(page) & pg.PD_NO_NULLS)
    lps = pg.items(page)
    for off, lp_off, flags, lp_len in lps:
        if flags == pg.LP_UNUSED:
            if lp_off or lp_len:
                fail(off, f"LP_UNUSED line pointer with offset {lp_off}, length {lp_len}")
            continue
        if flags == pg.LP_REDIRECT:
            if lp_len or not 1 <= lp_off <= n or lp_off == off:
                fail(off, f"LP_REDIRECT to offset {lp_off} (page has {n}), length {lp_len}")
            _t_off, t_flags, _t_len = lps[lp_off - 1][1:]
            if t_flags != pg.LP_NORMAL or _t_off + layout.fixed_size > BLCKSZ or not (
                    decode_header(page, _t_off)["infomask2"] & HEAP_ONLY_TUPLE):
                fail(off, f"LP_REDIRECT to offset {lp_off}, which is not a heap-only tuple")
            continue
        if flags == pg.LP_NORMAL and lp_len == 0:
            fail(off, "LP_NORMAL line pointer without storage")
        if lp_len:
            if lp_off < upper or lp_off + lp_len > special:
                fail(off, f"tuple storage [{lp_off}, {lp_off + lp_len}) outside "
                          f"[pd_upper {upper}, pd_special {special})")
            if lp_off % pg.MAXALIGN:
                fail(off, f"tuple starts at {lp_off}, not {pg.MAXALIGN}-byte aligned")
            ranges.append((lp_off, lp_off + lp_len, off))
        if flags != pg.LP_NORMAL:
            continue
        count += 1
        if lp_len < layout.fixed_size:
            fail(off, f"tuple length {lp_len} is shorter than the fixed part "
                      f"({layout.fixed_size} bytes) of the table's rows")
        h = decode_header(page, lp_off)
        if h["t_hoff"] != layout.t_hoff:
            fail(off, f"t_hoff {h['t_hoff']}, the table's rows have {layout.t_hoff}")
        if h["infomask2"] & HEAP_NATTS_MASK != layout.natts:
            fail(off, f"tuple has {h['infomask2'] & HEAP_NATTS_MASK} attributes, the table "
                      f"has {layout.natts}")
        if h["xmax"] == 0:
            if h["ctid"] != (block, off):
                fail(off, f"t_ctid {h['ctid']} is not the tuple's own TID {(block, off)}")
        elif not (h["ctid"][0] < nblocks and h["ctid"][1] >= 1):
            fail(off, f"t_ctid {h['ctid']} names no tuple of the relation")
        elif (h["infomask2"] & HEAP_HOT_UPDATED and not h["infomask"] & HEAP_XMAX_INVALID
              and h["ctid"][0] != block):
            fail(off, f"HOT-updated tuple's t_ctid {h['ctid']} is not on its own page")
        if h["infomask"] & HEAP_HASNULL and no_nulls:
            fail(off, "tuple has a NULL on a page marked PD_NO_NULLS")
        if h["infomask2"] & HEAP_ONLY_TUPLE and not h["infomask"] & HEAP_UPDATED:
            fail(off, "heap-only tuple is not the result of an update (no HEAP_UPDATED)")
        if layout.var_columns:
            _check_tail(page, layout, lp_off, lp_len, off, fail)
    ranges.sort()
    for (_s1, e1, o1), (s2, _e2, o2) in zip(ranges, ranges[1:]):
        if s2 < e1:
            fail(o2, f"tuple storage overlaps that of offset {o1}")
    return count


def _check_tail(page, layout, lp_off: int, lp_len: int, off: int, fail) -> None:
    """Layout invariant 4: the varlena values follow each other in the tail, no gaps."""
    bits = int.from_bytes(bytes(page[lp_off + BITMAP_OFFSET:
                                     lp_off + BITMAP_OFFSET + layout.bitmap_size]), "little")
    pos = layout.fixed_size
    for c in layout.var_columns:
        d = lp_off + layout.offsets[c]
        voff = int(page[d]) | int(page[d + 1]) << 8
        vlen = int(page[d + 2]) | int(page[d + 3]) << 8
        if not bits >> c & 1:
            if voff or vlen:
                fail(off, f"NULL column {layout.names[c]!r} has descriptor ({voff}, {vlen})")
            continue
        if voff != pos or voff + vlen > lp_len:
            fail(off, f"column {layout.names[c]!r} value at [{voff}, {voff + vlen}) "
                      f"(expected to start at {pos}, tuple length {lp_len})")
        pos += vlen
    if pos != lp_len:
        fail(off, f"tuple length {lp_len}, but its fixed part and values end at {pos}")
