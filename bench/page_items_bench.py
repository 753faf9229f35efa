"""HeapScan's line-pointer read (``heapam.page_items``) against the element-wise fancy index
it replaced, in one process, alternated: 512 random pages of a 2,048-page pool of 54 tuples
each (pgbench_accounts-like), median CPU time per batch over 15 rounds of 50 calls.

    python bench/page_items_bench.py
"""
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from minidb.config import BLCKSZ  # noqa: E402
from minidb.heap import heapam  # noqa: E402
from minidb.heap.layout import FlatViews  # noqa: E402
from minidb.storage import page as pg  # noqa: E402

def old_page_items(v, bufs):
    """The line-pointer read before it was one row slice per page."""
    bufs = np.asarray(bufs, dtype=np.int64)
    lower = v.u16[bufs * (BLCKSZ // 2) + pg.OFF_LOWER // 2].astype(np.int64)
    nitems = np.maximum(lower - pg.PAGE_HEADER_SIZE, 0) >> 2
    width = int(nitems.max()) if len(nitems) else 0
    col = np.arange(width, dtype=np.int64)
    lp = v.u32[(bufs * (BLCKSZ // 4) + pg.PAGE_HEADER_SIZE // 4)[:, None] + col]
    starts = (lp & 0x7FFF).astype(np.int64)
    starts += (bufs * BLCKSZ)[:, None]
    normal = (lp & 0x18000) == (pg.LP_NORMAL << 15)
    if int(nitems.min()) != width:
        normal &= col < nitems[:, None]
    if normal.all():
        return None, width, starts.reshape(-1)
    positions = np.flatnonzero(normal)
    return positions, width, starts.reshape(-1)[positions]

# a pool of 2048 pages of 56 tuples each (pgbench_accounts-like), built with the real bulk fill
npages = 2048
pool = np.zeros(npages * BLCKSZ, dtype=np.uint8)
for p in range(npages):
    page = pool[p * BLCKSZ:(p + 1) * BLCKSZ]
    pg.init_page(page)
    for k in range(54):
        pg.add_item(page, b"x" * 140)
v = FlatViews(pool)
bufs = np.random.default_rng(1).permutation(npages)[:512].astype(np.int64)
a, b = old_page_items(v, bufs), heapam.page_items(v, bufs)
assert a[0] is None and b[0] is None and a[1] == b[1] and (a[2] == b[2]).all()
res = {"old": [], "new": []}
for r in range(15):
    for name, fn in (("old", old_page_items), ("new", heapam.page_items)):
        t = time.process_time()
        for _ in range(50):
            fn(v, bufs)
        res[name].append((time.process_time() - t) / 50 * 1e6)
for k, x in res.items():  # old: the fancy index; new: heapam.page_items
    print(f"{k}: median {statistics.median(x):.0f} us per 512-page batch (min {min(x):.0f}, max {max(x):.0f})")
