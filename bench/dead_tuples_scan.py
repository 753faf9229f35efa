"""Dead-tuple benchmark: the storage scan on a table where every row has one dead version.

Setup: two pgbench_accounts-shaped tables of ``--rows`` rows each (``bench.scan_bench``'s
shape and loader), in one pool that holds both (warm):
  * ``clean``: the rows as loaded;
  * ``dead``: the same rows, then every row updated once by one transaction that
    committed before any snapshot of the run, built as heap_update leaves an UPDATE whose
    new version does not fit on the old page (bulk-loaded pages are full, fillfactor 100):
    old version xmax = the updater, cmax 0, t_ctid -> the new version, not HOT; old page
    PD_PAGE_FULL and pd_prune_xid = the updater; new version (xmin = the updater,
    HEAP_UPDATED) appended on new pages.  Written with numpy under exclusive content
    locks, because 2 M single-row updates through the per-row path would take minutes.
  Each table then gets one MVCC scan, which sets the hint bits as a first reader does
  (XMIN_COMMITTED on every version, XMAX_COMMITTED on the dead ones; counted and shown).
  No pruning hook runs: this measures what dead versions cost a scan before any pruning
  or VACUUM removes them.
Run:   ``count(*) ... WHERE abalance < 0`` (no row matches: every visible row is decoded
       and tested), best of ``--repeat``:
  1. ``clean``, plain ``HeapScan`` with no visibility filter (scan_bench's scan);
  2. ``clean``, ``mvcc.seq_scan`` (visibility from hint bits, the fast path);
  3. ``dead``, ``mvcc.seq_scan``: twice the tuples, half of them dead.
The figure: rows/s of 3 as a ratio of rows/s of 2 (rows = visible rows returned); the
table's ratio column is each scan's rows/s over that of 2.
Check: every scan counts exactly ``--rows`` rows and 0 matches; the dead table's scans
look at exactly 2 x ``--rows`` tuples; the warm scans read no block from disk and set no
hint bit.

    python bench/dead_tuples_scan.py [--rows 2000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bench.scan_bench import best_of, make_accounts, scan_count  # noqa: E402
from minidb.heap.heapam import SCAN_BATCH_PAGES, heap_bulk_insert, page_items  # noqa: E402
from minidb.heap.layout import FlatViews  # noqa: E402
from minidb.storage.htup import (HEAP_HOT_UPDATED, HEAP_UPDATED, HEAP_XMAX_COMMITTED,  # noqa: E402
                                 HEAP_XMAX_INVALID, HEAP_XMAX_LOCK_ONLY)
from minidb.heap.mvcc import seq_scan  # noqa: E402
from minidb.instance import Instance  # noqa: E402
from minidb.storage import page as pg  # noqa: E402
from minidb.storage.bufmgr import EXCLUSIVE  # noqa: E402

ABALANCE = 2          # column index in bench.scan_bench.ACCOUNTS
LOAD_CHUNK = 200_000


def add_dead_versions(inst, rel, nrows: int) -> int:
    """Update every row of ``rel`` once, physically as a non-HOT heap_update does, in one
    transaction that commits; returns its xid."""
    rfn = rel.relfilenode
    with inst.connect() as be:
        bm = be.bufmgr
        v = FlatViews(bm.seg.pool_flat)
        old_blocks = bm.smgr.nblocks(rfn)
        be.xact.begin()
        be.xact.start_statement()
        xid = be.xact.xid_for_write()
        # the new versions: same values (SET abalance = abalance + 0), on new pages
        for lo in range(0, nrows, LOAD_CHUNK):
            n = min(LOAD_CHUNK, nrows - lo)
            aid = np.arange(lo + 1, lo + n + 1, dtype=np.int32)
            heap_bulk_insert(be, rel, {"aid": aid, "bid": (aid - 1) // 100000 + 1,
                                       "abalance": np.zeros(n, dtype=np.int32),
                                       "filler": [""] * n}, n, xmin=xid)
        new_blocks = bm.smgr.nblocks(rfn) - old_blocks
        # pass 1: mark the new versions HEAP_UPDATED; collect their TIDs in row order
        new_tids = []
        for bufs, first in _locked_runs(bm, rfn, old_blocks, new_blocks):
            _, _, starts = page_items(v, bufs)
            v.u16[(starts + 32) >> 1] |= HEAP_UPDATED
            new_tids.append((v.u32[(starts + 24) >> 2].copy(), v.u16[(starts + 28) >> 1].copy()))
        ctid_block = np.concatenate([t[0] for t in new_tids])
        ctid_off = np.concatenate([t[1] for t in new_tids])
        assert len(ctid_block) == nrows
        # pass 2: the old versions get xmax, t_ctid -> new version; their pages PD_PAGE_FULL
        # and pd_prune_xid (heap_update's bookkeeping for a version that moved off-page)
        done = 0
        for bufs, first in _locked_runs(bm, rfn, 0, old_blocks):
            _, _, starts = page_items(v, bufs)
            k = len(starts)
            v.u64[(starts + 8) >> 3] = xid                               # t_xmax
            v.u32[(starts + 20) >> 2] = 0                                # t_cmax
            v.u32[(starts + 24) >> 2] = ctid_block[done:done + k]        # t_ctid
            v.u16[(starts + 28) >> 1] = ctid_off[done:done + k]
            v.u16[(starts + 30) >> 1] &= ~HEAP_HOT_UPDATED & 0xFFFF      # not HOT
            v.u16[(starts + 32) >> 1] &= ~(HEAP_XMAX_INVALID | HEAP_XMAX_COMMITTED
                                           | HEAP_XMAX_LOCK_ONLY) & 0xFFFF
            for b in bufs.tolist():
                page = bm.page(b)
                pg.set_flags(page, pg.get_flags(page) | pg.PD_PAGE_FULL)
                pg.set_prune_xid(page, xid)
                pg.bump_lsn(page)
            done += k
        assert done == nrows
        be.xact.command_done(wrote=True)
        be.xact.commit()
    return xid


def _locked_runs(bm, rfn: int, start: int, count: int):
    """Yield (buffers, first block) of runs of pages, pinned and exclusively locked; marks
    them dirty, unlocks and unpins after the caller's step."""
    pos = 0
    while pos < count:
        bufs = bm.pin_run(rfn, start + pos, min(SCAN_BATCH_PAGES, count - pos))
        try:
            for b in bufs.tolist():
                bm.lock(b, EXCLUSIVE)
            try:
                yield bufs, start + pos
                for b in bufs.tolist():
                    bm.mark_dirty(b)
            finally:
                for b in bufs.tolist():
                    bm.unlock(b)
        finally:
            bm.unpin_batch(bufs)
        pos += len(bufs)


def mvcc_count(be, rel) -> tuple[int, int, int, int]:
    """(rows, matches, tuples looked at, hint bits set) of one MVCC scan in its own
    read-only statement."""
    snap = be.xact.start_statement()
    rows = matches = 0
    scan = seq_scan(be, rel, [ABALANCE], snap)
    for batch in scan:
        vals, _ = batch.columns[0]
        rows += len(vals)
        matches += int(np.count_nonzero(vals < 0))
    be.xact.command_done(wrote=False)
    be.xact.commit()
    return rows, matches, scan.heap_scan.tuples_seen, scan.filter.hint_writes


def run(nrows: int, repeat: int) -> dict:
    datadir = tempfile.mkdtemp(prefix="minidb-bench-dead-")
    try:
        pages_needed = 3 * nrows // 50 + 2048
        with Instance(datadir, shared_buffers=pages_needed) as inst:
            clean = make_accounts(inst, nrows, "accounts_clean")
            dead = make_accounts(inst, nrows, "accounts_dead")
            t0 = time.perf_counter()
            xid = add_dead_versions(inst, dead, nrows)
            build_s = time.perf_counter() - t0
            with inst.connect() as be:
                bm = be.bufmgr
                # first readers: they set the hint bits (and prewarm the pool)
                t0 = time.perf_counter()
                first_clean = mvcc_count(be, clean)
                first_clean_s = time.perf_counter() - t0
                t0 = time.perf_counter()
                first_dead = mvcc_count(be, dead)
                first_dead_s = time.perf_counter() - t0
                assert first_clean == (nrows, 0, nrows, nrows), first_clean
                assert first_dead == (nrows, 0, 2 * nrows, 2 * nrows), first_dead
                assert scan_count(be, clean, use_ring=False) == (nrows, 0)
                assert scan_count(be, dead, use_ring=False) == (2 * nrows, 0)
                before = be.counters()
                t_raw, res = best_of(lambda: scan_count(be, clean), repeat)
                assert res == (nrows, 0), res
                t_clean, res = best_of(lambda: mvcc_count(be, clean), repeat)
                assert res == (nrows, 0, nrows, 0), res
                t_dead, res = best_of(lambda: mvcc_count(be, dead), repeat)
                assert res == (nrows, 0, 2 * nrows, 0), res
                after = be.counters()
                assert after["buffers_read"] == before["buffers_read"], "scans were not warm"
                pages = {r.name: bm.smgr.nblocks(r.relfilenode) for r in (clean, dead)}
        return {"rows": nrows, "xid": xid, "build_s": build_s, "pages": pages,
                "first_clean_s": first_clean_s, "first_dead_s": first_dead_s,
                "hints_clean": first_clean[3], "hints_dead": first_dead[3],
                "raw_s": t_raw, "clean_s": t_clean, "dead_s": t_dead}
    finally:
        shutil.rmtree(datadir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    r = run(args.rows, args.repeat)
    n = r["rows"]
    mrows = lambda s: n / s / 1e6  # noqa: E731
    pc, pd = r["pages"]["accounts_clean"], r["pages"]["accounts_dead"]
    print(f"{n:,} visible rows per table; clean {pc:,} pages, with dead versions {pd:,} "
          f"pages; dead versions built in {r['build_s']:.1f} s (updater xid {r['xid']})")
    print(f"first MVCC scans (set hint bits): clean {r['first_clean_s']:.2f} s, "
          f"{r['hints_clean']:,} hints; dead {r['first_dead_s']:.2f} s, "
          f"{r['hints_dead']:,} hints")
    print()
    print("| scan, warm, abalance < 0 (0 matches), best of "
          f"{args.repeat} | tuples looked at | visible rows | M rows/s | ratio |")
    print("| --- | ---: | ---: | ---: | ---: |")
    print(f"| no visibility filter (HeapScan), clean table | {n:,} | {n:,} | "
          f"{mrows(r['raw_s']):.1f} | {r['clean_s'] / r['raw_s']:.2f} |")
    print(f"| MVCC seq_scan, clean table (baseline) | {n:,} | {n:,} | "
          f"{mrows(r['clean_s']):.1f} | 1.00 |")
    print(f"| MVCC seq_scan, every row with one dead version | {2 * n:,} | {n:,} | "
          f"{mrows(r['dead_s']):.1f} | {r['clean_s'] / r['dead_s']:.2f} |")
    print()
    print(f"ratio (rows/s with one dead version per row) / (rows/s without) = "
          f"{r['clean_s'] / r['dead_s']:.2f}")
    print(f"ratio (MVCC filter) / (no filter), clean hinted table = "
          f"{r['raw_s'] / r['clean_s']:.2f}")


if __name__ == "__main__":
    main()
