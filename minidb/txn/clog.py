"""The commit log (``pg_xact``): two status bits per transaction id, as an SLRU.

============  =====  ===========================================================
status        bits   meaning
============  =====  ===========================================================
IN_PROGRESS   0      running, or crashed before it could record anything
COMMITTED     1      committed
ABORTED       2      rolled back, or found dead by the instance
SUB_COMMITTED 3      a subtransaction whose top-level transaction is committing
                     (transient: only while the tree's statuses spread over pages)
============  =====  ===========================================================

Layout (PostgreSQL's ``clog.c``, with 64-bit xids): four xids share a byte, lowest bits
first; 8 KB pages hold 32,768 xids; 32 pages make a 256 KB segment file
``DATADIR/pg_xact/SSSS`` (the segment number in upper-case hex, at least four digits: it
just gets longer past 2^32 xids).  For xid ``x``:

=================  ===========================  ==========================================
what               formula                      e.g. x = 1,100,000
=================  ===========================  ==========================================
page               ``x >> 15``  (x // 32768)    33
segment (file)     ``x >> 20``  (page // 32)    1  -> ``pg_xact/0001``
offset in file     ``(page % 32) * 8192``       8192
byte in page       ``(x & 32767) >> 2``         4,376
bit shift          ``(x & 3) * 2``              0
=================  ===========================  ==========================================

A file grows a page at a time as pages are written (a new data directory has
``pg_xact/0000`` of 8192 bytes); a page or a file that does not exist reads as zeros
(IN_PROGRESS): after a crash the pages of the last xids may never have been written, and
their transactions are exactly the ones that never finished.

**Buffers.**  ``transaction_buffers`` slots in the shared segment (``minidb.shmem``:
``clog_pages``, ``clog_pageno``, ``clog_state``, ``clog_dirty``, ``clog_lru``,
``clog_group_lsn``, ``clog_ctl``), guarded by one control lock (``clog_ctl``, PostgreSQL's
XactSLRULock) plus one I/O lock per slot.  A slot is EMPTY, READ_IN_PROGRESS, VALID or
WRITE_IN_PROGRESS.  File I/O never happens under the control lock: the process that reads
or writes a slot marks its state, takes the slot's I/O lock, releases the control lock,
does the I/O, and retakes the control lock to finish; a process that finds the slot in
I/O takes and releases the slot's I/O lock to wait, then looks again (SimpleLruReadPage,
SlruInternalWritePage).  A writer copies the page under the control lock and clears its
dirty flag, so statuses set while the write runs dirty it again and are written later.
Replacement is LRU among slots not in I/O, never the page the xid counter is in; a dirty
victim is written (and fsynced) first.

**Writes.**  Pages are written only by explicit writes: when evicted, and by
``flush_all()`` (checkpoints, clean close), which writes every dirty page and fsyncs each
segment it wrote.  All file I/O goes through ``_write_page(segno, offset, data)``,
``_fsync(segno)`` and ``_read_file_page``, which use ``minidb.fileio`` (the crash-test
layer intercepts them).  WAL before clog: each page has
1,024 *group LSNs*, one per group of 32 xids (PostgreSQL's grouping): the highest ``lsn`` given to ``set_status``
for a status in the group; before a page is written, ``wal_flush(highest group LSN of
the page)`` is called if both are set (``wal_flush`` is None
until the instance has a WAL).  ENOSPC is ``DiskFull`` (53100, "could not write to file
"pg_xact/0000" at offset N: No space left on device"); the page stays dirty in its buffer
and the database stays usable, as PostgreSQL's SLRU errors are.

**New pages.**  ``extend(xid, slot)`` is called from xid assignment under the proc-array
lock (ExtendCLOG): when ``xid`` is the first of its page, a CLOG ZEROPAGE record is
inserted through the backend in ``slot`` (not flushed: nothing on the page matters before
a commit record, which is flushed after it) and the page is zeroed in a buffer
(``zero_page``: never read, whatever a file holds there is stale) and marked dirty.  Replay
of ZEROPAGE calls ``zero_page``.  ``wal`` (the SharedWAL) is set by the instance; without
it (tests of the log alone) nothing is logged.

**Lookups.**  Statuses only ever move from IN_PROGRESS to a final value, so a copy of a
page taken at any moment is right about every xid it shows as final.  Each process keeps
copies of the last ``LOCAL_PAGES`` pages it looked at (immutable ``bytes``, replaced,
never overwritten, so threads need no lock): a lookup that finds a final status in its copy
is done without any lock; one that finds IN_PROGRESS (or no copy) takes the control lock,
brings the page into a shared buffer if needed and takes a fresh copy.  This generalizes
PostgreSQL's one-entry cache of the last xid fetched (``cachedFetchXid``).  Batch lookups
(``statuses``) gather from the copies with numpy indexing, page by page.

**After a crash.**  ``trim(next_xid)`` (TrimCLOG) clears the statuses from the xid
counter to the end of its page: the counter restarts from the WAL, and an xid the crash
ended before anything of it was logged may have had its abort written; it is handed out
again.

**Hint bits.**  ``commit_hints_ok(xid)`` says whether a COMMITTED hint bit for ``xid`` may
be set now (``minidb.txn.visibility``): yes when no asynchronous commit record is
unflushed (two loads of the WAL's positions); else only if the group LSN of ``xid``'s group
is flushed (PostgreSQL's SetHintBits / XLogNeedsFlush(TransactionIdGetCommitLSN)).  Read
without the control lock: a group LSN is set under it, before any copy of the page can
show the status COMMITTED, and a slot reused for another page was written (after the WAL
up to its group LSNs was flushed) - if the slot no longer holds the page the answer is
yes.  ``commit_hints_mask(xids)`` is the vector form.  Counters ``hint_checks`` and
``hints_deferred`` (updated without the lock: approximate under concurrency).

**Truncation.**  ``truncate_before(xid, slot)`` logs CLOG TRUNCATE and flushes it, then
removes whole segments before the one holding ``xid``'s page and drops their buffers (replay
calls it without a slot: nothing logged); a later lookup below the cut is an error.  Nothing
calls it yet: without freezing there is no xid below which no tuple still needs the log
(hint bits alone do not make old pages unnecessary).  The caller must know that nothing
will ask about an xid below the cut.

**Old data directories.**  A ``pg_xact`` that is a file (the sparse 4 GiB map of earlier
versions) is converted once at open: renamed to ``pg_xact.sparse``, its non-zero pages
copied into segment files, fsynced, then removed.  A conversion interrupted by a crash
starts over at the next open (``pg_xact.sparse`` still exists).

**Trees** (``set_tree``, TransactionIdSetTreeStatus): a transaction with subtransactions
gets its statuses and its subxids' together.  The ones on the top-level xid's page are set
under one hold of the control lock; a commit whose subxids lie on other pages first marks
those SUB_COMMITTED, then sets the top-level page, then the others COMMITTED, so no reader
of the log alone ever sees part of the tree committed.  (Readers ask the proc array first
anyway, where the whole tree is still running until all of it is set.)  SUB_COMMITTED is
not final: the page copies are not trusted for it.

Departures from PostgreSQL: an eviction write fsyncs at once (PostgreSQL before 14; since
14 the checkpointer's sync queue does it); no pg_subtrans (``minidb.txn.subxact``).

Invariants:
  1. A status moves IN_PROGRESS -> COMMITTED or IN_PROGRESS -> ABORTED (or, a subxid,
     IN_PROGRESS -> SUB_COMMITTED -> COMMITTED), never back, never between the final states
     (asserted in ``set_status``).
  2. xids below ``FIRST_NORMAL_XID`` are special: 0 invalid reads as ABORTED, 1 bootstrap
     and 2 frozen read as COMMITTED; their bits are never set.
  3. A slot is EMPTY iff its ``clog_pageno`` is -1; at most one slot holds a page.
  4. A page is written only after ``wal_flush(lsn)`` returned for an ``lsn`` at least its
     highest group LSN at the moment it was copied for the write.
"""

from __future__ import annotations

import errno
import os
import struct
import threading
import weakref

import numpy as np

import minidb.fileio as fileio
from minidb.config import BLCKSZ
from minidb.errors import DataCorrupted, DiskFull, IOError_, ProgramLimitExceeded
from minidb.shmem import (CLOG_CTL_CLOCK, CLOG_CTL_LATEST_PAGE, CLOG_CTL_OLDEST_PAGE,
                          CLOG_LSNS_PER_PAGE, CLOG_STAT_BASE, CLOG_STATS)
from minidb.wal import record as walrec
from minidb.wal.xlog import WAL_ASYNC, WAL_FLUSHED, WAL_RECOVERY

IN_PROGRESS, COMMITTED, ABORTED, SUB_COMMITTED = 0, 1, 2, 3
INVALID_XID, BOOTSTRAP_XID, FROZEN_XID, FIRST_NORMAL_XID = 0, 1, 2, 3
MAX_XID = 1 << 62            # page numbers and file offsets stay in int64
CLOG_DIR = "pg_xact"

XACTS_PER_BYTE = 4
XACTS_PER_PAGE = BLCKSZ * XACTS_PER_BYTE           # 32768
PAGES_PER_SEGMENT = 32
XACTS_PER_SEGMENT = XACTS_PER_PAGE * PAGES_PER_SEGMENT   # 1,048,576
SEGMENT_SIZE = BLCKSZ * PAGES_PER_SEGMENT           # 256 KB
PAGE_SHIFT = 15                                     # log2(XACTS_PER_PAGE)
PAGE_MASK = XACTS_PER_PAGE - 1
XACTS_PER_LSN_GROUP = XACTS_PER_PAGE // CLOG_LSNS_PER_PAGE   # 32
GROUP_SHIFT = XACTS_PER_LSN_GROUP.bit_length() - 1  # log2(XACTS_PER_LSN_GROUP)
assert 1 << GROUP_SHIFT == XACTS_PER_LSN_GROUP

# slot states (clog_state)
SLRU_EMPTY, SLRU_READ_IN_PROGRESS, SLRU_VALID, SLRU_WRITE_IN_PROGRESS = 0, 1, 2, 3

LOCAL_PAGES = 16             # per-process copies of pages (final statuses only are trusted)

CLOG_PAGE = struct.Struct("<q")      # ZEROPAGE: page number
CLOG_TRUNC = struct.Struct("<qq")    # TRUNCATE: first page kept, oldest xid kept

_SHIFT = np.array([0, 2, 4, 6], dtype=np.uint8)
_ZERO_PAGE = bytes(BLCKSZ)
_STAT = {name: CLOG_STAT_BASE + i for i, name in enumerate(CLOG_STATS)}
_BLKS_HIT = _STAT["blks_hit"]
_HINT_CHECKS, _HINTS_DEFERRED = _STAT["hint_checks"], _STAT["hints_deferred"]


def segment_name(segno: int) -> str:
    return f"{segno:04X}"


class CommitLog:
    """The commit log of one instance; create before forking, use from every process."""

    def __init__(self, datadir: str, seg, locks):
        self.dir = os.path.join(datadir, CLOG_DIR)
        self.ctl_lock = locks.clog_ctl
        self.io_locks = locks.clog_io
        # numpy views for vector work, memoryviews for one element (several times faster)
        self._pages = seg.clog_pages
        self._np_pageno = seg.clog_pageno
        self._np_state = seg.clog_state
        self._np_lru = seg.clog_lru
        self._flat = _mv(seg.clog_pages, "B")
        self._pageno = _mv(seg.clog_pageno, "q")
        self._state = _mv(seg.clog_state, "B")
        self._dirty = _mv(seg.clog_dirty, "B")
        self._lru = _mv(seg.clog_lru, "q")
        self._group_lsn = _mv(seg.clog_group_lsn, "q")   # [slot * 1024 + group]
        self._np_group_lsn = seg.clog_group_lsn
        self._ctl = _mv(seg.clog_ctl, "q")
        self.nslots = len(self._pageno)
        self.wal_flush = None          # set by the instance once a WAL exists
        self.wal = None                # its SharedWAL (the ZEROPAGE / TRUNCATE records)
        # positions of the WAL (commit_hints_ok), read as plain ints
        self._wal_ctl = _mv(seg.wal_ctl, "q")
        self._reset_local()
        ref = weakref.ref(self)  # a child forked while a thread held the rows lock
        os.register_at_fork(after_in_child=lambda: (o := ref()) is not None and o._reset_local())
        self._slot_hint: dict[int, int] = {}
        self._open_directory(datadir)
        self._ctl[CLOG_CTL_LATEST_PAGE] = -1

    def _reset_local(self) -> None:
        # scalar lookups: page -> bytes; batch lookups: rows of a private array
        self._local: dict[int, bytes] = {}
        self._rows = np.zeros((LOCAL_PAGES, BLCKSZ), dtype=np.uint8)
        self._rows_flat = self._rows.reshape(-1)
        self._row_of: dict[int, int] = {}
        self._row_page = [-1] * LOCAL_PAGES
        self._row_next = 0
        self._rows_lock = threading.Lock()

    # -- the directory -----------------------------------------------------------------------
    def _open_directory(self, datadir: str) -> None:
        old = os.path.join(datadir, CLOG_DIR + ".sparse")
        if os.path.isfile(self.dir):
            os.rename(self.dir, old)
        if os.path.exists(old):
            self._convert_sparse(old)
        if not os.path.isdir(self.dir):
            os.mkdir(self.dir, 0o700)
        segs = self._segments()
        if not segs:  # a new data directory: page 0 exists, zeroed (BootStrapCLOG)
            self._write_page(0, 0, _ZERO_PAGE)
            self._fsync(0)
            _fsync_dir(self.dir)
        self._ctl[CLOG_CTL_OLDEST_PAGE] = min(segs) * PAGES_PER_SEGMENT if segs else 0

    def _segments(self) -> list[int]:
        out = []
        for name in os.listdir(self.dir):
            try:
                out.append(int(name, 16))
            except ValueError:
                continue
        return out

    def _convert_sparse(self, old: str) -> None:
        """The sparse single-file log of earlier versions into segment files (once)."""
        if os.path.isdir(self.dir):  # a conversion that a crash interrupted: start over
            for name in os.listdir(self.dir):
                os.unlink(os.path.join(self.dir, name))
        else:
            os.mkdir(self.dir, 0o700)
        written = set()
        with open(old, "rb") as f:
            fd = f.fileno()
            size = os.fstat(fd).st_size
            for start, end in _data_extents(fd, size):
                page = start // BLCKSZ
                while page * BLCKSZ < end:
                    data = os.pread(fd, BLCKSZ, page * BLCKSZ).ljust(BLCKSZ, b"\0")
                    if data != _ZERO_PAGE or page == 0:
                        segno = page // PAGES_PER_SEGMENT
                        self._write_page(segno, (page % PAGES_PER_SEGMENT) * BLCKSZ, data)
                        written.add(segno)
                    page += 1
        for segno in sorted(written):
            self._fsync(segno)
        _fsync_dir(self.dir)
        os.unlink(old)

    def _path(self, segno: int) -> str:
        return os.path.join(self.dir, segment_name(segno))

    # -- file I/O: the only places that touch the files (a test layer intercepts them) ------
    def _write_page(self, segno: int, offset: int, data: bytes) -> None:
        fd = fileio.open(self._path(segno), os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            n = fileio.pwrite(fd, data, offset)
            if n != len(data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        finally:
            fileio.close(fd)

    def _fsync(self, segno: int) -> None:
        fd = fileio.open(self._path(segno), os.O_RDONLY)
        try:
            fileio.fsync(fd)
        finally:
            fileio.close(fd)

    def _read_file_page(self, pageno: int) -> bytes:
        segno, off = divmod(pageno, PAGES_PER_SEGMENT)
        try:
            fd = fileio.open(self._path(segno), os.O_RDONLY)
        except FileNotFoundError:
            return _ZERO_PAGE
        try:
            data = fileio.pread(fd, BLCKSZ, off * BLCKSZ)
        finally:
            fileio.close(fd)
        return data.ljust(BLCKSZ, b"\0")

    # -- lookups -------------------------------------------------------------------------------
    def status(self, xid: int) -> int:
        if xid < FIRST_NORMAL_XID:
            return COMMITTED if xid else ABORTED
        data = self._local.get(xid >> PAGE_SHIFT)
        if data is not None:
            s = (data[(xid & PAGE_MASK) >> 2] >> ((xid & 3) << 1)) & 3
            if s and s != SUB_COMMITTED:
                return s
        data = self._copy_page(xid >> PAGE_SHIFT, xid)
        self._local_put(xid >> PAGE_SHIFT, data)
        return (data[(xid & PAGE_MASK) >> 2] >> ((xid & 3) << 1)) & 3

    def statuses(self, xids: np.ndarray) -> np.ndarray:
        """Vectorized ``status`` (uint8 array): one gather from this process's page copies."""
        xids = np.asarray(xids, dtype=np.int64)
        if xids.size == 0:
            return np.zeros(0, dtype=np.uint8)
        pages = xids >> PAGE_SHIFT
        idx = xids & PAGE_MASK
        idx >>= 2
        shift = _SHIFT[xids & 3]
        with self._rows_lock:
            lo, hi = int(pages.min()), int(pages.max())
            if hi - lo >= LOCAL_PAGES:            # too spread for the copies: page by page
                return self._statuses_spread(xids, pages, idx, shift)
            idx += self._row_offsets(lo, hi, pages, xids)
            st = self._rows_flat[idx]
            st >>= shift
            st &= 3
            zero = st % 3 == 0   # in progress or sub-committed: not final
            if zero.any():
                special = xids < FIRST_NORMAL_XID
                if special.any():
                    st[special] = np.where(xids[special] == INVALID_XID, ABORTED, COMMITTED)
                    zero &= ~special
                if zero.any():  # maybe finished since the copy was taken: copy again
                    for p in np.unique(pages[zero]).tolist():
                        self._row_put(p, self._copy_page(p, int(xids[zero][0])))
                    st[zero] = (self._rows_flat[idx[zero]] >> shift[zero]) & 3
        return st

    def _row_offsets(self, lo: int, hi: int, pages: np.ndarray, xids: np.ndarray):
        """Offset of each xid's page copy in the rows (a scalar if all share one page),
        copying missing pages (rows lock held)."""
        row_of = self._row_of
        if lo == hi:
            r = row_of.get(lo)
            if r is None:
                r = self._row_put(lo, self._copy_page(lo, int(xids[0])))
            return r * BLCKSZ
        table = np.array([row_of.get(p, -1) for p in range(lo, hi + 1)], dtype=np.int64)
        if (table < 0).any():
            present = np.zeros(hi - lo + 1, dtype=bool)
            present[pages - lo] = True
            wanted = (lo + np.flatnonzero(present)).tolist()
            for i in np.flatnonzero(present & (table < 0)).tolist():
                xid = int(xids[np.argmax(pages == lo + i)])
                table[i] = self._row_put(lo + i, self._copy_page(lo + i, xid), keep=wanted)
        return table[pages - lo] * BLCKSZ

    def _statuses_spread(self, xids, pages, byte, shift) -> np.ndarray:
        st = np.empty(xids.shape, dtype=np.uint8)
        for p in np.unique(pages).tolist():
            on = pages == p
            r = self._row_of.get(p)
            if r is None:
                r = self._row_put(p, self._copy_page(p, int(xids[on][0])))
            s = (self._rows[r][byte[on]] >> shift[on]) & 3
            zero = (s % 3 == 0) & (xids[on] >= FIRST_NORMAL_XID)
            if zero.any():
                r = self._row_put(p, self._copy_page(p, int(xids[on][0])))
                s[zero] = (self._rows[r][byte[on][zero]] >> shift[on][zero]) & 3
            st[on] = s
        special = xids < FIRST_NORMAL_XID
        if special.any():
            st[special] = np.where(xids[special] == INVALID_XID, ABORTED, COMMITTED)
        return st

    # -- this process's page copies --------------------------------------------------------------
    def _local_put(self, page: int, data: bytes) -> None:
        """Keep ``data`` as the scalar lookups' copy of ``page`` (bytes are never changed in
        place, so a thread reading an older copy is never disturbed)."""
        local = self._local
        local.pop(page, None)
        while len(local) >= LOCAL_PAGES:
            try:
                del local[next(iter(local))]
            except (KeyError, StopIteration, RuntimeError):
                break
        local[page] = data

    def _row_put(self, page: int, data: bytes, keep=()) -> int:
        """Copy ``data`` into the batch lookups' row for ``page`` (rows lock held); another
        page's row is reused round-robin, skipping the pages in ``keep``."""
        r = self._row_of.get(page)
        if r is None:
            for _ in range(LOCAL_PAGES):
                r = self._row_next
                self._row_next = (r + 1) % LOCAL_PAGES
                if self._row_page[r] not in keep:
                    break
            old = self._row_page[r]
            if old >= 0:
                del self._row_of[old]
            self._row_page[r] = page
            self._row_of[page] = r
        self._rows[r] = np.frombuffer(data, dtype=np.uint8)
        self._local_put(page, data)
        return r

    def _copy_page(self, page: int, xid: int) -> bytes:
        """A fresh copy of ``page`` from the shared buffers (read from disk if needed)."""
        with self.ctl_lock:
            if page < self._ctl[CLOG_CTL_OLDEST_PAGE]:
                raise DataCorrupted(
                    f"could not access status of transaction {xid}: file "
                    f'"{CLOG_DIR}/{segment_name(page // PAGES_PER_SEGMENT)}" was removed by '
                    f"truncation of the commit log")
            slot = self._read_page(page)
            return self._pages[slot].tobytes()

    def commit_hints_ok(self, xid: int | None = None) -> bool:
        """May a COMMITTED hint bit for committed ``xid`` be set now?  Not while its commit
        record may be unflushed (PostgreSQL's SetHintBits asking XLogNeedsFlush of the
        commit LSN): when an asynchronous commit record is unflushed at all, the highest
        commit LSN of ``xid``'s group of 32 xids on its page is compared with the flushed
        position.  A page no longer in a buffer was written, after the WAL up to its group
        LSNs was flushed.  Without ``xid``: whether every commit record is flushed.  Always
        true with synchronous_commit on."""
        c = self._wal_ctl
        flushed = c[WAL_FLUSHED]
        if c[WAL_ASYNC] <= flushed:
            return True
        if xid is None:
            return False
        ctl = self._ctl
        ctl[_HINT_CHECKS] += 1   # _count, inline
        page = xid >> PAGE_SHIFT
        slot = self._slot_hint.get(page)   # _find's remembered slot, checked
        if slot is None or self._pageno[slot] != page:
            slot = self._find(page)
            if slot < 0:
                return True
        lsn = self._group_lsn[slot * CLOG_LSNS_PER_PAGE + ((xid & PAGE_MASK) >> GROUP_SHIFT)]
        if lsn <= flushed or self._pageno[slot] != page:  # (reused meanwhile: written)
            return True
        ctl[_HINTS_DEFERRED] += 1
        return False

    def commit_hint_check(self, xid: int) -> int:
        """``commit_hints_ok(xid)`` telling also what it counted: 0 = may be set, nothing
        asked (every commit record flushed), 1 = may be set after a check (one ``hint_checks``), 2 = deferred
        (``hint_checks`` and ``hints_deferred``).  For a caller that asks about the same
        xid many times in one go and counts its repeats (``visibility.VacuumJudge``)."""
        c = self._wal_ctl
        flushed = c[WAL_FLUSHED]
        if c[WAL_ASYNC] <= flushed:
            return 0
        ctl = self._ctl
        ctl[_HINT_CHECKS] += 1
        page = xid >> PAGE_SHIFT
        slot = self._slot_hint.get(page)
        if slot is None or self._pageno[slot] != page:
            slot = self._find(page)
            if slot < 0:
                return 1
        lsn = self._group_lsn[slot * CLOG_LSNS_PER_PAGE + ((xid & PAGE_MASK) >> GROUP_SHIFT)]
        if lsn <= flushed or self._pageno[slot] != page:
            return 1
        ctl[_HINTS_DEFERRED] += 1
        return 2

    def commit_hints_mask(self, xids):
        """``commit_hints_ok`` for an array of committed xids: True when every commit
        record is flushed, else a bool array."""
        c = self._wal_ctl
        flushed = c[WAL_FLUSHED]
        if c[WAL_ASYNC] <= flushed:
            return True
        xids = np.asarray(xids, dtype=np.int64)
        lsns = np.zeros(xids.shape, dtype=np.int64)
        pages = xids >> PAGE_SHIFT
        for p in np.unique(pages).tolist():
            slot = self._find(p)
            if slot < 0:
                continue
            on = pages == p
            got = self._np_group_lsn[slot][(xids[on] & PAGE_MASK) >> GROUP_SHIFT]
            if self._pageno[slot] == p:
                lsns[on] = got
        ok = lsns <= flushed
        self._count("hint_checks", int(xids.size))
        self._count("hints_deferred", int(xids.size - np.count_nonzero(ok)))
        return ok

    # -- setting a status ----------------------------------------------------------------------
    def set_status(self, xid: int, status: int, lsn: int = 0) -> None:
        """Record ``xid``'s outcome; ``lsn`` (its commit record's end, 0 if none) raises the
        page's group LSN, so the page is not written before the WAL up to it is flushed."""
        # (the one-xid case of ``_set_page_statuses``, written out: every commit runs it)
        if xid >= MAX_XID:
            raise ProgramLimitExceeded(f"transaction id {xid} beyond the commit log's "
                                       f"{MAX_XID} entries")
        assert xid >= FIRST_NORMAL_XID, f"xid {xid} has a fixed status"
        off = xid & PAGE_MASK
        shift = (xid & 3) << 1
        flat = self._flat
        with self.ctl_lock:
            slot = self._read_page(xid >> PAGE_SHIFT)
            at = slot * BLCKSZ + (off >> 2)
            old_byte = flat[at]
            old = (old_byte >> shift) & 3
            assert old in (IN_PROGRESS, status) or (old, status) == (SUB_COMMITTED,
                                                                     COMMITTED), \
                f"xid {xid}: status {old} -> {status} is not a legal transition"
            flat[at] = (old_byte & ~(3 << shift) & 0xFF) | (status << shift)
            if lsn:
                g = slot * CLOG_LSNS_PER_PAGE + (off >> GROUP_SHIFT)
                if lsn > self._group_lsn[g]:
                    self._group_lsn[g] = lsn
            self._dirty[slot] = 1

    def _set_page_statuses(self, xids, status: int, lsn: int) -> None:
        """Set the status of ``xids`` (all on one page) under one hold of the control lock."""
        for xid in xids:
            if xid >= MAX_XID:
                raise ProgramLimitExceeded(f"transaction id {xid} beyond the commit log's "
                                           f"{MAX_XID} entries")
            assert xid >= FIRST_NORMAL_XID, f"xid {xid} has a fixed status"
        page = xids[0] >> PAGE_SHIFT
        with self.ctl_lock:
            slot = self._read_page(page)
            for xid in xids:
                byte = (xid & PAGE_MASK) >> 2
                shift = (xid & 3) << 1
                at = slot * BLCKSZ + byte
                old_byte = self._flat[at]
                old = (old_byte >> shift) & 3
                assert old in (IN_PROGRESS, status) or (old, status) == (SUB_COMMITTED,
                                                                         COMMITTED), \
                    f"xid {xid}: status {old} -> {status} is not a legal transition"
                self._flat[at] = (old_byte & ~(3 << shift) & 0xFF) | (status << shift)
                if lsn:
                    g = slot * CLOG_LSNS_PER_PAGE + ((xid & PAGE_MASK) >> GROUP_SHIFT)
                    if lsn > self._group_lsn[g]:
                        self._group_lsn[g] = lsn
            self._dirty[slot] = 1

    set = set_status  # the name callers used before the SLRU

    def set_tree(self, xid: int, subxids, status: int, lsn: int = 0) -> None:
        """Record the outcome of ``xid`` and its ``subxids`` together (see "Trees" in the
        module docstring)."""
        page = xid >> PAGE_SHIFT
        same = [x for x in subxids if x >> PAGE_SHIFT == page]
        other = [x for x in subxids if x >> PAGE_SHIFT != page]
        if other and status == COMMITTED:
            for x in other:
                self.set_status(x, SUB_COMMITTED, lsn=lsn)
        self._set_page_statuses(same + [xid], status, lsn)  # the top-level page at once
        for x in other:
            self.set_status(x, status, lsn=lsn)

    def extend(self, xid: int, slot: int | None = None) -> None:
        """ExtendCLOG: called as ``xid`` is assigned (by the backend in ``slot``, under the
        proc-array lock); zero its page if it is the first, after logging CLOG ZEROPAGE
        (not flushed: a crash before the page's first commit loses nothing)."""
        if xid & PAGE_MASK and xid != FIRST_NORMAL_XID:
            return
        page = xid >> PAGE_SHIFT
        self._log(slot, walrec.CLOG_ZEROPAGE, CLOG_PAGE.pack(page))
        self.zero_page(page)

    def _log(self, slot: int | None, info: int, data: bytes, flush: bool = False) -> int:
        """Insert one CLOG record through the backend in ``slot`` (0 when there is no WAL
        yet, no slot, or replay is running)."""
        wal = self.wal
        if wal is None or slot is None or wal.ctl[WAL_RECOVERY]:
            return 0
        h = wal.handle(slot)
        lsn = h.insert(walrec.RM_CLOG, info, 0, data)
        if flush:
            h.flush(lsn)
        self._count("wal_records")
        return lsn

    def zero_page(self, page: int) -> None:
        """ZeroCLOGPage without the record (also the ZEROPAGE redo): ``page`` zeroed in a
        buffer (never read: whatever a file holds there is stale), dirty, the latest."""
        with self.ctl_lock:
            while True:
                slot = self._find(page)
                if slot >= 0 and self._state[slot] == SLRU_READ_IN_PROGRESS:
                    self._wait_io(slot)   # the read would overwrite the zeroes
                    continue
                if slot < 0:
                    slot = self._take_victim()
                    if slot < 0:
                        continue
                break
            self._assign(slot, page)
            self._pages[slot] = 0
            self._state[slot] = SLRU_VALID
            self._dirty[slot] = 1
            self._touch(slot)
            self._ctl[CLOG_CTL_LATEST_PAGE] = page
            self._count("blks_zeroed")
        self._local.pop(page, None)

    def trim(self, next_xid: int) -> None:
        """After crash recovery (TrimCLOG): clear the statuses of ``next_xid`` and every
        later xid of its page, and make it the latest page.  An xid the crash ended before
        anything of it was logged may have had its abort written to a page; it will be
        handed out again, and must start IN_PROGRESS.  Later pages are zeroed by
        ``extend`` before their first xid is used."""
        if next_xid < FIRST_NORMAL_XID:
            return
        page = next_xid >> PAGE_SHIFT
        first = next_xid & PAGE_MASK
        with self.ctl_lock:
            slot = self._read_page(page)
            base = slot * BLCKSZ
            byte, shift = first >> 2, (first & 3) << 1
            if shift:
                self._flat[base + byte] &= (1 << shift) - 1
                byte += 1
            self._pages[slot][byte:] = 0
            self._dirty[slot] = 1
            self._ctl[CLOG_CTL_LATEST_PAGE] = page
        self._local.pop(page, None)

    # -- the buffer pool (control lock held) -------------------------------------------------------
    def _count(self, name: str, n: int = 1) -> None:
        self._ctl[_STAT[name]] += n

    def _touch(self, slot: int) -> None:
        clock = int(self._ctl[CLOG_CTL_CLOCK]) + 1
        self._ctl[CLOG_CTL_CLOCK] = clock
        self._lru[slot] = clock

    def _find(self, page: int) -> int:
        s = self._slot_hint.get(page)
        if s is not None and self._pageno[s] == page:
            return s
        hits = np.flatnonzero(self._np_pageno == page)
        if not hits.size:
            return -1
        s = int(hits[0])
        self._slot_hint[page] = s
        if len(self._slot_hint) > 4 * self.nslots:
            self._slot_hint.clear()
        return s

    def _assign(self, slot: int, page: int) -> None:
        self._pageno[slot] = page
        self._dirty[slot] = 0
        self._np_group_lsn[slot] = 0
        self._slot_hint[page] = slot

    def _wait_io(self, slot: int) -> None:
        """Wait for the I/O in progress on ``slot`` (control lock released meanwhile)."""
        self.ctl_lock.release()
        try:
            with self.io_locks[slot]:
                pass
        finally:
            self.ctl_lock.acquire()

    def _read_page(self, page: int) -> int:
        """SimpleLruReadPage: the slot holding ``page``, valid (a write may be running)."""
        slot = self._slot_hint.get(page)   # the common case (``_find``'s hint, a valid
        if (slot is not None and self._pageno[slot] == page   # page), written out
                and self._state[slot] != SLRU_READ_IN_PROGRESS):
            ctl = self._ctl
            clock = ctl[CLOG_CTL_CLOCK] + 1
            ctl[CLOG_CTL_CLOCK] = clock
            self._lru[slot] = clock
            ctl[_BLKS_HIT] += 1
            return slot
        while True:
            slot = self._find(page)
            if slot >= 0:
                if self._state[slot] == SLRU_READ_IN_PROGRESS:
                    self._wait_io(slot)
                    continue
                self._touch(slot)
                self._count("blks_hit")
                return slot
            slot = self._take_victim()
            if slot < 0:
                continue  # the lock was released: look again
            self._assign(slot, page)
            self._state[slot] = SLRU_READ_IN_PROGRESS
            io = self.io_locks[slot]
            io.acquire()
            self.ctl_lock.release()
            data = err = None
            try:
                data = self._read_file_page(page)
            except OSError as e:
                err = e
            finally:
                self.ctl_lock.acquire()
                if data is not None:
                    self._pages[slot] = np.frombuffer(data, dtype=np.uint8)
                    self._state[slot] = SLRU_VALID
                    self._touch(slot)
                    self._count("blks_read")
                else:
                    self._pageno[slot] = -1
                    self._state[slot] = SLRU_EMPTY
                io.release()
            if err is not None:
                segno, off = divmod(page, PAGES_PER_SEGMENT)
                raise IOError_(f'could not read from file "{CLOG_DIR}/{segment_name(segno)}" '
                               f"at offset {off * BLCKSZ}: {err.strerror}") from err
            return slot

    def _take_victim(self) -> int:
        """A slot free for a new page, or -1 after the lock was released (look again)."""
        empty = np.flatnonzero(self._np_state == SLRU_EMPTY)
        if empty.size:
            return int(empty[0])
        ok = ((self._np_state == SLRU_VALID)
              & (self._np_pageno != self._ctl[CLOG_CTL_LATEST_PAGE]))
        cand = np.flatnonzero(ok)
        if not cand.size:  # every other slot in I/O: wait for one
            busy = np.flatnonzero((self._np_state == SLRU_READ_IN_PROGRESS)
                                  | (self._np_state == SLRU_WRITE_IN_PROGRESS))
            self._wait_io(int(busy[0]))
            return -1
        slot = int(cand[np.argmin(self._np_lru[cand])])
        if self._dirty[slot]:
            self._write_slot(slot, sync=True)
            return -1
        self._slot_hint.pop(int(self._pageno[slot]), None)
        self._pageno[slot] = -1
        self._state[slot] = SLRU_EMPTY
        self._count("evictions")
        return slot

    def _write_slot(self, slot: int, sync: bool) -> int:
        """SlruInternalWritePage: write ``slot``'s page if dirty; returns its segment number
        (-1 if nothing was written).  Releases the control lock during the I/O."""
        while self._state[slot] == SLRU_WRITE_IN_PROGRESS:
            self._wait_io(slot)
        if self._state[slot] != SLRU_VALID or not self._dirty[slot]:
            return -1
        page = int(self._pageno[slot])
        segno, poff = divmod(page, PAGES_PER_SEGMENT)
        offset = poff * BLCKSZ
        data = self._pages[slot].tobytes()
        lsn = int(self._np_group_lsn[slot].max())
        self._dirty[slot] = 0
        self._state[slot] = SLRU_WRITE_IN_PROGRESS
        io = self.io_locks[slot]
        io.acquire()
        self.ctl_lock.release()
        ok = False
        err = None
        try:
            wal_flush = self.wal_flush
            if lsn and wal_flush is not None:
                wal_flush(lsn)
            self._write_page(segno, offset, data)
            if sync:
                self._fsync(segno)
            ok = True
        except OSError as e:
            err = e
        finally:
            self.ctl_lock.acquire()
            self._state[slot] = SLRU_VALID
            if ok:
                self._count("blks_written")
            else:
                self._dirty[slot] = 1
            io.release()
        if err is not None:
            raise _write_error(segno, offset, err) from err
        return segno

    # -- checkpoints, truncation, close ------------------------------------------------------------
    def flush_all(self) -> int:
        """Write every dirty page (WAL first) and fsync the segments written (SimpleLruWriteAll
        at a checkpoint); returns the pages written."""
        written: set[int] = set()
        n = 0
        with self.ctl_lock:
            self._count("flushes")
            for slot in range(self.nslots):
                if self._dirty[slot] or self._state[slot] == SLRU_WRITE_IN_PROGRESS:
                    segno = self._write_slot(slot, sync=False)
                    if segno >= 0:
                        written.add(segno)
                        n += 1
        for segno in sorted(written):
            try:
                self._fsync(segno)
            except OSError as e:
                raise _write_error(segno, 0, e, "fsync") from e
        return n

    def truncate_before(self, xid: int, slot: int | None = None) -> int:
        """Remove every segment wholly before ``xid``'s page (TruncateCLOG); returns how many
        files were removed.  Nothing may ask about an xid below the cut afterwards.  With
        the backend's ``slot`` a CLOG TRUNCATE record is logged and flushed first (as
        PostgreSQL: the files must not go before the record is durable, or replay of
        older records could ask for them); replay calls this without a slot."""
        cut_seg = (xid >> PAGE_SHIFT) // PAGES_PER_SEGMENT
        cut_page = cut_seg * PAGES_PER_SEGMENT
        if cut_page <= self._ctl[CLOG_CTL_OLDEST_PAGE]:
            return 0
        self._log(slot, walrec.CLOG_TRUNCATE, CLOG_TRUNC.pack(cut_page, xid), flush=True)
        with self.ctl_lock:
            if cut_page <= self._ctl[CLOG_CTL_OLDEST_PAGE]:
                return 0
            self._ctl[CLOG_CTL_OLDEST_PAGE] = cut_page
            while True:
                behind = np.flatnonzero((self._np_pageno >= 0) & (self._np_pageno < cut_page))
                busy = [s for s in behind.tolist() if self._state[s] != SLRU_VALID]
                if busy:
                    self._wait_io(busy[0])
                    continue
                for s in behind.tolist():
                    self._slot_hint.pop(int(self._pageno[s]), None)
                    self._pageno[s] = -1
                    self._state[s] = SLRU_EMPTY
                    self._dirty[s] = 0
                break
            self._count("truncates")
        removed = 0
        for segno in self._segments():
            if segno < cut_seg:
                fileio.unlink(self._path(segno))
                removed += 1
        for page in [p for p in list(self._local) if p < cut_page]:
            self._local.pop(page, None)
        return removed

    def stats(self) -> dict[str, int]:
        """pg_stat_slru's row for the commit log (counts since the instance opened)."""
        return {name: int(self._ctl[i]) for name, i in _STAT.items()}

    def flush(self) -> None:
        self.flush_all()

    def close(self) -> None:
        self.flush_all()
        self._local.clear()
        for name in ("_flat", "_pageno", "_state", "_dirty", "_lru", "_group_lsn", "_ctl"):
            getattr(self, name).release()


def _mv(arr: np.ndarray, fmt: str) -> memoryview:
    """A flat memoryview of a shared array, for fast access to single elements."""
    return memoryview(arr.reshape(-1)).cast("B").cast(fmt)


def _write_error(segno: int, offset: int, err: OSError, what: str = "write to"):
    msg = (f'could not {what} file "{CLOG_DIR}/{segment_name(segno)}"'
           + (f" at offset {offset}" if what == "write to" else "")
           + f": {err.strerror or os.strerror(err.errno or 0)}")
    if err.errno == errno.ENOSPC:
        return DiskFull(msg)
    return IOError_(msg)


def _data_extents(fd: int, size: int):
    """(start, end) of the parts of a file that hold data (the whole file where the file
    system cannot tell holes)."""
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:  # only a hole after pos
                return
            yield pos, size              # no SEEK_DATA here
            return
        end = os.lseek(fd, start, os.SEEK_HOLE)
        yield start, end
        pos = end


def _fsync_dir(path: str) -> None:
    fileio.fsync_dir(path)
