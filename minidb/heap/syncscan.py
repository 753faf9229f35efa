"""Synchronized sequential scans (PostgreSQL's ``access/common/syncscan.c``).

When several backends scan the same large table at once, each would read it from the
start, and each would read from the disk what the others read a moment ago.  Instead, a
scan of a large table starts where another scan of it is now, and wraps around the end to
cover the blocks before that point.  The scans then move as a pack: the first one waits
for the I/O, the others find its pages in the OS cache (or still in its 256 kB ring), so
the pack reads the table about once.  Nothing else keeps them together; a scan that falls
behind is not waited for.

Shared state (``minidb.shmem``: region ``syncscan``, guarded by the ``syncscan`` lock): a
list of ``SYNC_SCAN_NELEM`` = 20 entries (relfilenode, block last reported, LRU stamp),
initially all invalid.  PostgreSQL keeps the list in LRU order with links; minidb keeps a
stamp per entry from a counter (``syncscan_clock``) and takes the smallest stamp as the
least recently used, which is the same order.

* ``get_location(rfn, nblocks)`` (``ss_get_location``): under the lock, find the entry of
  the relation; if there is one, it becomes the most recently used and its block is the
  answer; if not, the least recently used entry is taken over for the relation with block
  0, and 0 is the answer.  A block beyond the table's end (it was truncated) means 0.
* ``report_location(rfn, block)`` (``ss_report_location``): only for a block that is a
  multiple of ``SYNC_SCAN_REPORT_INTERVAL`` = 16 (128 kB), and only if the lock is free
  right now (a *conditional* acquire: a missed report only means a newcomer starts a bit
  behind, where the pages are still cached); it updates or creates the relation's entry.

Who uses it (``minidb.heap.heapam.HeapScan``, ``minidb.heap.parallel``): scans of tables
larger than ``shared_buffers / 4`` when ``synchronize_seqscans`` is on - the same
threshold as the bulk-read ring, on purpose (two behaviours to tune, not four).  A serial
scan reports, after each batch of pages, the last multiple of 16 among the blocks it will
read next (PostgreSQL reports the next block after every page and lets only multiples of
16 through); its final report is its start block, so that repeating the same query does
not make the hint creep backwards.  A parallel participant reports the last multiple of
16 among the pages it has just read (``BlockAllocator.pages_read``: when a page is read,
not when its chunk is handed out).  The interval must stay below the ring's 32 buffers so
that a scan joining at a reported block still finds the pages in shared buffers.

Invariants:
  1. Every stored block is 0 or a multiple of 16, so every synchronized start block is.
  2. A relation has at most one entry (entries are found and created under the lock).

Keyed by relfilenode, so a TRUNCATE (which gives the table a new file) starts afresh.
"""

from __future__ import annotations

import numpy as np

from minidb.config import BLCKSZ
from minidb.shmem import SYNC_SCAN_NELEM

__all__ = ["SYNC_SCAN_NELEM", "SYNC_SCAN_REPORT_INTERVAL", "SyncScanTable"]

SYNC_SCAN_REPORT_INTERVAL = 128 * 1024 // BLCKSZ  # 16 blocks; below the 32-buffer ring

# columns of the syncscan region
E_REL, E_BLOCK, E_STAMP = 0, 1, 2


class SyncScanTable:
    """One process's handle on the shared scan-position list."""

    __slots__ = ("tab", "clock", "lock", "_t", "_c")

    def __init__(self, seg, lock):
        self.tab = seg.syncscan
        self.clock = seg.syncscan_clock
        self.lock = lock
        # scalar access through memoryviews: a parallel participant reports once per run
        self._t = memoryview(self.tab.reshape(-1))
        self._c = memoryview(self.clock)

    def _entry(self, rfn: int) -> int:
        """Index of the relation's entry, or of the least recently used one (lock held)."""
        t = self._t
        lru, lru_stamp = 0, None
        for i in range(len(t) // 3):
            if t[3 * i + E_REL] == rfn:
                return i
            stamp = t[3 * i + E_STAMP]
            if lru_stamp is None or stamp < lru_stamp:
                lru, lru_stamp = i, stamp
        t[3 * lru + E_REL] = rfn
        t[3 * lru + E_BLOCK] = 0
        return lru

    def _touch(self, i: int) -> None:
        c = self._c[0] + 1
        self._c[0] = c
        self._t[3 * i + E_STAMP] = c

    def get_location(self, rfn: int, nblocks: int) -> int:
        """Where a new scan of the relation should start (``ss_get_location``)."""
        with self.lock:
            i = self._entry(rfn)
            self._touch(i)
            loc = self._t[3 * i + E_BLOCK]
        return loc if loc < nblocks else 0

    def report_location(self, rfn: int, block: int) -> bool:
        """Record that a scan of the relation is at ``block`` (``ss_report_location``).
        Returns True if it was stored (a multiple of 16 and the lock was free)."""
        if block % SYNC_SCAN_REPORT_INTERVAL:
            return False
        if not self.lock.acquire(False):
            return False
        try:
            i = self._entry(rfn)
            self._t[3 * i + E_BLOCK] = block
            self._touch(i)
        finally:
            self.lock.release()
        return True

    def report_run(self, rfn: int, first: int, n: int, nblocks: int) -> bool:
        """A serial scan has read [first, first + n) (not crossing the end of the table):
        report the last multiple of 16 among the blocks it would have reported after each
        page, i.e. among first + 1 .. first + n, where first + n == nblocks means block 0."""
        nxt = first + n
        if nxt >= nblocks:
            return self.report_location(rfn, 0)
        last = nxt - nxt % SYNC_SCAN_REPORT_INTERVAL
        if last <= first:
            return False
        return self.report_location(rfn, last)

    def report_pages(self, rfn: int, first: int, n: int) -> bool:
        """A parallel participant read [first, first + n) (no wrap): report the last
        multiple of 16 among them (PostgreSQL reports each page it goes on to read)."""
        last = first + n - 1
        last -= last % SYNC_SCAN_REPORT_INTERVAL
        if last < first:
            return False
        return self.report_location(rfn, last)

    def entries(self) -> list[tuple[int, int]]:
        """(relfilenode, block) of the valid entries, most recently used first."""
        with self.lock:
            t = self.tab.copy()
        order = np.argsort(-t[:, E_STAMP], kind="stable")
        return [(int(t[i, E_REL]), int(t[i, E_BLOCK])) for i in order if t[i, E_REL] >= 0]
