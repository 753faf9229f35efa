"""The log itself: WAL buffers in the shared segment, inserting, writing, flushing (xlog.c).

Positions.  An LSN is a 64-bit byte position in one endless stream; the stream is cut into
segment files of ``wal_segment_size`` bytes, ``pg_wal/<timeline 1><segno / N><segno % N>``
(24 hex digits, N = 2**32 / segment size, as PostgreSQL names them).  The first record of
a new data directory starts at the second segment (``0/1000000`` with 16 MB segments).
Records start at multiples of 8; ``insert`` returns a record's *end* (the next record's
start), which becomes the changed pages' ``pd_lsn``.

Shared state (``seg.wal_ctl``, an int64 array; the lock that guards each entry)::

    WAL_CURR       insert lock   end of the space reserved so far (next record's start)
    WAL_PREV       insert lock   start of the last reserved record (the next xl_prev)
    WAL_REDO       insert lock   redo point of the running or last checkpoint
    WAL_FPW        insert lock   full_page_writes in force
    WAL_WRITTEN    write lock    everything below is written to the segment files
    WAL_FLUSHED    write lock    everything below is on disk (fdatasync)
    WAL_ASYNC      insert lock   highest end of an asynchronous commit record
    WAL_RECOVERY   (owner)       1 while recovery runs: nothing may be inserted
    WAL_CKPT_REQUEST, WAL_CKPT_IMMEDIATE  (no lock) a checkpoint requested by WAL volume;
                                 an unpaced checkpoint waiting or running (pacing stops)
    counters       insert lock (records, fpi, bytes) / write lock (writes, syncs, ...)

and ``seg.wal_ring``: ``wal_buffers`` x 8 KiB, a ring in which LSN ``p`` lives at
``p % ring size``.

Inserting (``WalHandle.insert``): assemble the record outside any lock (an image for a
block whose page LSN is at or before the redo point, when full_page_writes is on); take
the insertion lock; if the redo point or full_page_writes moved since, drop it and
assemble again (a checkpoint started meanwhile); else reserve the space (one addition),
note the start in ``wal_insert_at[slot]``, release (the lock taken inline through
``LWLock.fast()``: its holder recorded as ``acquire`` records it).  Then, outside the lock, fill in
``xl_prev`` and the CRC and copy the record into the ring, chunk by chunk; a chunk whose
ring space still holds unwritten WAL first writes the log out up to there
(``wal_buffers_full``).  ``wal_insert_at[slot]`` is the position being copied, or
``IDLE`` when done: a writer never writes past the smallest of them
(``wait_insertions``, PostgreSQL's WaitXLogInsertionsToFinish).

Flushing (``flush(lsn)``, XLogFlush): nothing to do if ``lsn <= WAL_FLUSHED``; else wait
until every insertion below ``lsn`` has been copied, take the write lock, look again
(another backend's flush may have covered us: that is group commit - the flusher writes
and syncs *everything copied so far*, not just its own record), optionally sleep
``commit_delay`` when ``commit_siblings`` other transactions run, write the ring out
from ``WAL_WRITTEN`` and fdatasync each segment touched.  Lock order: insertion lock ->
(no other); a backend never waits for copies while holding the write lock.

Rules this module keeps: an LSN is never reused; ``WAL_FLUSHED <= WAL_WRITTEN <=`` the
smallest position still being copied ``<= WAL_CURR``; nothing is inserted during
recovery; a failed write or fsync is a PANIC (``WalPanic``: the instance must be
reopened, and recovery replays the log), as in PostgreSQL.

Departures: one insertion lock (PostgreSQL has 8; reserve-then-copy is kept, so the lock
is held for an addition, not a copy); no WAL page headers or continuation records - a
record is written straight through page and segment boundaries, and the end of the log is
found by the record checks alone (length, prev-link, CRC; the reader zeroes the rest of
the last segment after recovery so no stale record can follow the end); segment files
are created sparse (``ftruncate``) instead of zero-filled, and old ones are deleted, not
recycled.
"""

from __future__ import annotations

import os
import struct
import time

import minidb.fileio as fileio
from minidb.errors import InternalError, OperationalError
from minidb.shmem import CURRENT_PID as _PID
from minidb.wal import record as rec

_LSN = struct.Struct("<Q")  # pd_lsn, the first 8 bytes of a page
# the per-record path's names, bound once
_NO_IMAGE, _FORCE_IMAGE = rec.REGBUF_NO_IMAGE, rec.REGBUF_FORCE_IMAGE
_image_ref, _build, _crc = rec.page_image_ref, rec.build, rec.crc32c_raw
_HEADER, _HEAD_CRC, _HEADER_SIZE = rec.HEADER, rec._HEAD_CRC, rec.HEADER_SIZE

WAL_CURR, WAL_PREV, WAL_REDO, WAL_FPW, WAL_WRITTEN, WAL_FLUSHED, WAL_ASYNC = range(7)
WAL_RECOVERY = 7
WAL_CKPT_REQUEST = 8     # set when max_wal_size worth of WAL was written since redo
WAL_CKPT_IMMEDIATE = 9   # a CHECKPOINT / shutdown checkpoint waits or runs: no pacing
# counters (pg_stat_wal)
WAL_RECORDS, WAL_FPI, WAL_BYTES, WAL_BUFFERS_FULL, WAL_WRITE, WAL_SYNC = range(10, 16)
WAL_FLUSH_REQUESTS = 16  # XLogFlush calls that had something to flush
WAL_WRITE_TIME_US, WAL_SYNC_TIME_US = 17, 18
STAT_NAMES = {"wal_records": WAL_RECORDS, "wal_fpi": WAL_FPI, "wal_bytes": WAL_BYTES,
              "wal_buffers_full": WAL_BUFFERS_FULL, "wal_write": WAL_WRITE,
              "wal_sync": WAL_SYNC, "wal_flush_requests": WAL_FLUSH_REQUESTS}

IDLE = 1 << 62
WAL_DIR = "pg_wal"


class WalPanic(OperationalError):
    """Writing or syncing the WAL failed: the instance cannot go on (PostgreSQL PANICs);
    reopen the data directory and recovery replays the log."""


def segment_name(segno: int, segsize: int) -> str:
    per = (1 << 32) // segsize
    return f"{1:08X}{segno // per:08X}{segno % per:08X}"


def parse_segment_name(name: str, segsize: int) -> int | None:
    if len(name) != 24:
        return None
    try:
        hi, lo = int(name[8:16], 16), int(name[16:24], 16)
    except ValueError:
        return None
    return hi * ((1 << 32) // segsize) + lo


class SharedWAL:
    """The log of one instance, as seen by one process (fds are per process)."""

    def __init__(self, datadir: str, seg, locks, settings, segsize: int):
        self.datadir = datadir
        self.dir = os.path.join(datadir, WAL_DIR)
        os.makedirs(self.dir, exist_ok=True)
        self.seg = seg
        self.ctl = seg.wal_ctl
        self.insert_at = seg.wal_insert_at
        # memoryviews of the same words for the per-record path (a scalar read or write
        # through them costs a fraction of numpy's)
        self.ctl_words = memoryview(seg.wal_ctl)
        self.insert_words = memoryview(seg.wal_insert_at)
        self.ring = seg.wal_ring
        self.ring_mv = memoryview(seg.wal_ring)
        self.R = len(seg.wal_ring)
        self.locks = locks
        self.insert_lock = locks.wal_insert
        self.insert_acquire = locks.wal_insert.acquire
        self.insert_release = locks.wal_insert.release
        self.insert_fast = locks.wal_insert.fast()   # (sem_try, sem_give, holders, index)
        self.write_lock = locks.wal_write
        self.settings = settings
        self.segsize = segsize
        self.fsync = settings.fsync
        self.sync_fn = fileio.fdatasync if settings.wal_sync_method == "fdatasync" \
            else fileio.fsync
        self._fds: dict[int, int] = {}
        self._pid = os.getpid()
        self.insert_at[:] = IDLE
        self.panicked = False

    # -- start-up ------------------------------------------------------------------------------
    def start_at(self, end_lsn: int, prev_lsn: int, redo: int) -> None:
        """Position the log after recovery (or in a new directory): the next record goes at
        ``end_lsn``; everything before is on disk."""
        c = self.ctl
        c[WAL_CURR] = end_lsn
        c[WAL_PREV] = prev_lsn
        c[WAL_WRITTEN] = end_lsn
        c[WAL_FLUSHED] = end_lsn
        c[WAL_REDO] = redo
        c[WAL_FPW] = int(self.settings.full_page_writes)
        # the ring must hold the partial tail of the current position's region: nothing to
        # do, because we write byte-exact ranges (not whole pages) from WAL_WRITTEN on.

    def handle(self, slot: int) -> "WalHandle":
        return WalHandle(self, slot)

    # -- segment files ----------------------------------------------------------------------
    def segment_path(self, segno: int) -> str:
        return os.path.join(self.dir, segment_name(segno, self.segsize))

    def _segment_fd(self, segno: int) -> int:
        if os.getpid() != self._pid:
            self._fds = {}
            self._pid = os.getpid()
        fd = self._fds.get(segno)
        if fd is None:
            path = self.segment_path(segno)
            if not os.path.exists(path):
                tmp = os.path.join(self.dir, f"xlogtemp.{os.getpid()}")
                tfd = fileio.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
                try:
                    fileio.ftruncate(tfd, self.segsize)
                    if self.fsync:
                        fileio.fsync(tfd)
                finally:
                    fileio.close(tfd)
                fileio.rename(tmp, path)
                if self.fsync:
                    fileio.fsync_dir(self.dir)
            fd = self._fds[segno] = fileio.open(path, os.O_RDWR)
        return fd

    def close_files(self) -> None:
        for fd in self._fds.values():
            try:
                fileio.close(fd)
            except OSError:
                pass
        self._fds = {}

    def remove_segments_before(self, lsn: int) -> int:
        """Delete every segment wholly before the one holding ``lsn``; returns how many."""
        keep = lsn // self.segsize
        n = 0
        for name in sorted(os.listdir(self.dir)):
            segno = parse_segment_name(name, self.segsize)
            if segno is None or segno >= keep:
                continue
            fd = self._fds.pop(segno, None)
            if fd is not None:
                fileio.close(fd)
            try:
                fileio.unlink(os.path.join(self.dir, name))
                n += 1
            except FileNotFoundError:
                pass
        return n

    # -- writing ------------------------------------------------------------------------------
    def finished_upto(self) -> int:
        """Everything below the returned LSN has been copied into the ring."""
        with self.insert_lock:
            reserved = int(self.ctl[WAL_CURR])
            busy = int(self.insert_at.min())
        return min(reserved, busy)

    def wait_insertions(self, target: int) -> int:
        """Wait until every insertion below ``target`` is copied; returns the LSN below
        which all copies are done (>= target)."""
        spins = 0
        deadline = None
        while True:
            fin = self.finished_upto()
            if fin >= target:
                return fin
            spins += 1
            if spins > 50:
                time.sleep(0.0002)
                if spins % 1000 == 0:
                    self.locks.check_crash()  # an inserter died mid-copy (the reaper saw it)
                deadline = deadline or time.monotonic() + 60
                if time.monotonic() > deadline:
                    raise InternalError(f"waited 60 s for WAL insertions below "
                                        f"{rec.format_lsn(target)} to finish")

    def _write_locked(self, upto: int, flush: bool) -> None:
        """Write the ring out from WAL_WRITTEN to ``upto`` (write lock held, copies below
        ``upto`` complete); with ``flush`` fdatasync what was not yet synced."""
        c = self.ctl
        written = int(c[WAL_WRITTEN])
        try:
            if upto > written:
                t0 = time.perf_counter()
                pos = written
                while pos < upto:
                    segno = pos // self.segsize
                    seg_end = (segno + 1) * self.segsize
                    roff = pos % self.R
                    n = min(upto, seg_end, pos - roff + self.R) - pos
                    fd = self._segment_fd(segno)
                    got = fileio.pwrite(fd, self.ring_mv[roff:roff + n], pos - segno * self.segsize)
                    if got != n:
                        raise OSError(f"wrote only {got} of {n} bytes")
                    pos += n
                    c[WAL_WRITE] += 1
                c[WAL_WRITTEN] = upto
                c[WAL_WRITE_TIME_US] += int((time.perf_counter() - t0) * 1e6)
                if upto - int(c[WAL_REDO]) >= self.settings.max_wal_size * (1 << 20) // 2:
                    c[WAL_CKPT_REQUEST] = 1
            flushed = int(c[WAL_FLUSHED])
            if flush and upto > flushed:
                if self.fsync:
                    t0 = time.perf_counter()
                    for segno in range(flushed // self.segsize, (upto - 1) // self.segsize + 1):
                        self.sync_fn(self._segment_fd(segno))
                        c[WAL_SYNC] += 1
                    c[WAL_SYNC_TIME_US] += int((time.perf_counter() - t0) * 1e6)
                c[WAL_FLUSHED] = upto
        except fileio.SimulatedCrash:
            raise
        except OSError as e:
            self.panicked = True
            msg = (f"PANIC: could not write or sync the write-ahead log at "
                   f"{rec.format_lsn(written)}: {e}")
            self.locks.mark_crashed(os.getpid(), msg)  # every backend stops: crash restart
            raise WalPanic(f"{msg}; crash recovery replays the log (the instance restarts "
                           f"itself, or reopen the data directory)") from e

    def write_upto(self, target: int, flush: bool, commit_delay_us: int = 0,
                   siblings_ok=None) -> None:
        """XLogWrite/XLogFlush's loop: make the log written (and flushed) at least to
        ``target``, writing everything copied so far (group commit)."""
        c = self.ctl
        key = WAL_FLUSHED if flush else WAL_WRITTEN
        while True:
            if c[key] >= target:
                return
            upto = self.wait_insertions(target)
            with self.write_lock:
                if c[key] >= target:
                    return
                if flush and commit_delay_us and self.fsync and \
                        (siblings_ok is None or siblings_ok()):
                    time.sleep(commit_delay_us / 1e6)
                    upto = max(upto, self.finished_upto())
                if flush:
                    c[WAL_FLUSH_REQUESTS] += 1
                self._write_locked(upto, flush)
                return

    def flushed_lsn(self) -> int:
        return int(self.ctl[WAL_FLUSHED])

    def insert_lsn(self) -> int:
        return int(self.ctl[WAL_CURR])

    def redo_lsn(self) -> int:
        return int(self.ctl[WAL_REDO])

    def in_recovery(self) -> bool:
        return bool(self.ctl[WAL_RECOVERY])

    def async_pending(self) -> bool:
        """True while some asynchronous commit record is not yet flushed (committed hint
        bits must then wait: see minidb.heap.mvcc)."""
        return self.ctl[WAL_ASYNC] > self.ctl[WAL_FLUSHED]

    def background_flush(self) -> bool:
        """The WAL writer's round: flush whatever is copied and not yet flushed."""
        c = self.ctl
        if c[WAL_RECOVERY] or self.panicked:
            return False
        fin = self.finished_upto()
        if fin > c[WAL_FLUSHED]:
            self.write_upto(fin, flush=True)
            return True
        return False

    def begin_checkpoint(self) -> int:
        """The redo point of a new checkpoint: the current insert position, published so
        every later first change of a page logs an image."""
        with self.insert_lock:
            redo = int(self.ctl[WAL_CURR])
            self.ctl[WAL_REDO] = redo
            self.ctl[WAL_FPW] = int(self.settings.full_page_writes)
            self.ctl[WAL_CKPT_REQUEST] = 0
        return redo

    def stats(self) -> dict[str, int]:
        return {name: int(self.ctl[i]) for name, i in STAT_NAMES.items()}


class WalHandle:
    """One backend's access to the log: ``insert``, ``flush``, and its WalUsage counters
    (``records``, ``fpi``, ``bytes``: EXPLAIN (ANALYZE, WAL) reads their differences)."""

    def __init__(self, shared: SharedWAL, slot: int):
        self.shared = shared
        self.slot = slot
        self.records = 0
        self.fpi = 0
        self.bytes = 0
        self.last_start = 0  # start LSN of this handle's last record (ProcLastRecPtr)

    # -- the agreed interface ---------------------------------------------------------------
    def insert(self, rmgr: int, info: int, xid: int, data: bytes = b"",
               blocks: list | tuple = (), async_commit: bool = False) -> int:
        """Insert one record; returns its end LSN.  ``blocks``: (relfilenode, fork, block,
        page or None, flags, block data) - ``page`` (a uint8 array or a memoryview of one)
        is where an image is taken from when the rules ask for one (REGBUF_* flags).
        ``async_commit``: the record is an asynchronous commit's; its end raises the
        async-commit mark (``WAL_ASYNC``, XLogSetAsyncXactLSN) in the same hold of the
        insertion lock that reserves its space (no second hold of the lock for it).

        The per-record path: one buffer built and its body's CRC taken before the lock
        (``record.build`` / ``body_crc``), the shared words read through memoryviews, the
        insertion lock taken inline (``LWLock.fast``: its holder recorded as ``acquire``
        records it), the header sealed (``record.seal``, inline) and the record copied with
        one slice assignment after it (``_copy``'s usual case, inline)."""
        sh = self.shared
        c = sh.ctl_words
        if c[WAL_RECOVERY]:
            raise InternalError("cannot insert WAL during recovery")
        if sh.panicked:
            raise WalPanic("the write-ahead log failed earlier: reopen the data directory")
        try_, give, hw, hidx = sh.insert_fast
        while True:
            redo = c[WAL_REDO]
            fpw = c[WAL_FPW]
            images = None
            i = 0
            for blk in blocks:
                page, flags = blk[3], blk[4]
                if (page is not None and not flags & _NO_IMAGE
                        and (flags & _FORCE_IMAGE
                             or (fpw and _LSN.unpack_from(page)[0] <= redo))):
                    if images is None:
                        images = [None] * len(blocks)
                    images[i] = _image_ref(page)  # copied once, by build
                i += 1
            buf, tot, nimg = _build(blocks, data, images)
            body_crc = _crc(memoryview(buf)[_HEADER_SIZE:tot])   # record.body_crc
            size = len(buf)
            if size > sh.R // 2:
                raise InternalError(f"WAL record of {tot} bytes is larger than half of "
                                    f"wal_buffers ({sh.R} bytes)")
            if not try_(False):
                sh.insert_acquire()   # the blocking path (records the holder too)
            hw[hidx] = _PID[0]
            try:
                if c[WAL_REDO] != redo or c[WAL_FPW] != fpw:
                    continue  # a checkpoint started: the image decisions may be stale
                start = c[WAL_CURR]
                prev = c[WAL_PREV]
                c[WAL_CURR] = start + size
                c[WAL_PREV] = start
                sh.insert_words[self.slot] = start
                c[WAL_RECORDS] += 1
                if nimg:
                    c[WAL_FPI] += nimg
                c[WAL_BYTES] += size
                if async_commit and start + size > c[WAL_ASYNC]:
                    c[WAL_ASYNC] = start + size
            finally:
                hw[hidx] = 0
                give()
            break
        try:
            # record.seal: the CRC continued over header bytes 0..27, the header written
            _HEADER.pack_into(buf, 0, tot, xid, prev, info, rmgr,
                              _crc(_HEAD_CRC.pack(tot, xid, prev, info, rmgr), body_crc))
            R = sh.R
            roff = start % R
            if roff + size <= R and c[WAL_WRITTEN] >= start + size - R:
                sh.ring_mv[roff:roff + size] = buf  # one piece, its ring space free
            else:
                self._copy(start, buf)
        finally:
            sh.insert_words[self.slot] = IDLE
        self.last_start = start
        self.records += 1
        self.fpi += nimg
        self.bytes += size
        return start + size

    def _copy(self, start: int, data) -> None:
        sh = self.shared
        R = sh.R
        n = len(data)
        roff = start % R
        if roff + n <= R and sh.ctl_words[WAL_WRITTEN] >= start + n - R:
            sh.ring_mv[roff:roff + n] = data  # one piece, its ring space free: the usual case
            return
        data = memoryview(data)
        pos, off = start, 0
        while off < n:
            roff = pos % R
            chunk = min(n - off, R - roff)
            if sh.ctl[WAL_WRITTEN] < pos + chunk - R:
                # the ring slot still holds WAL not yet written: write it out first
                sh.insert_at[self.slot] = pos
                sh.ctl[WAL_BUFFERS_FULL] += 1
                sh.write_upto(pos + chunk - R, flush=False)
            sh.ring_mv[roff:roff + chunk] = data[off:off + chunk]
            pos += chunk
            off += chunk

    def flush(self, upto_lsn: int, commit_delay_us: int = 0, siblings_ok=None) -> None:
        """Make the log durable up to ``upto_lsn`` (XLogFlush)."""
        sh = self.shared
        if upto_lsn <= sh.ctl[WAL_FLUSHED] or sh.ctl[WAL_RECOVERY]:
            return
        if upto_lsn > sh.ctl[WAL_CURR]:
            raise InternalError(f"xlog flush request {rec.format_lsn(upto_lsn)} is not "
                                f"satisfied --- flushed only to "
                                f"{rec.format_lsn(int(sh.ctl[WAL_FLUSHED]))}")
        sh.write_upto(upto_lsn, flush=True, commit_delay_us=commit_delay_us,
                      siblings_ok=siblings_ok)

    def flushed_lsn(self) -> int:
        return self.shared.flushed_lsn()

    def insert_lsn(self) -> int:
        return self.shared.insert_lsn()

    def usage(self) -> tuple[int, int, int]:
        return self.records, self.fpi, self.bytes


def wal_critical_section(seg, slot: int) -> str:
    """What WAL critical section backend ``slot`` is in ("" if none): copying a record into
    the WAL buffers (its reserved space would never be filled, and every flush past it
    would wait), or between a commit record and the commit log's update (``delay_chkpt``;
    also set while a hint-bit image is logged).  A process that dies there leaves the log
    and the commit log disagreeing: PostgreSQL PANICs (a crash restart), and so the
    instance's reaper sets the crash flag."""
    if int(seg.wal_insert_at[slot]) != IDLE:
        return "while copying a WAL record into the WAL buffers"
    if int(seg.proc_delay_chkpt[slot]):
        return "between a WAL record and the change it logs (delay_chkpt)"
    return ""


def first_lsn(segsize: int) -> int:
    """Where the log of a new data directory starts (the second segment, as initdb's)."""
    return segsize


