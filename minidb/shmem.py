"""The shared-memory segment: its layout, declared in one place (PostgreSQL's ``ipci.c``).

An instance maps ONE anonymous ``MAP_SHARED`` segment when it opens a data directory and
creates every cross-process lock it will ever need, before any process is forked.  A forked
child inherits the mapping at the same address and the locks, so the numpy views below stay
valid in every process and nothing shared is ever created after a fork.

Regions (``N`` = shared_buffers, ``S`` = backend slots = max_connections +
max_worker_processes + 1 auxiliary (the checkpointer), at most 64 so a wait set fits in one
uint64 bitmask,
``B`` = mapping buckets, a power of two >= max(2N, 16 * partitions)):

=================  ==============  =========  ============================================
region             shape           dtype      guarded by
=================  ==============  =========  ============================================
buf_pages          (N, 8192)       uint8      buffer content lock of each buffer
buf_tag            (N,)            int64      partition lock of the tag (-1: no tag)
buf_part           (N,)            int16      partition lock (partition of buf_tag)
buf_next           (N,)            int32      partition lock (mapping chain link)
buf_refcount       (N,)            int32      partition lock (number of backends pinning)
buf_usage          (N,)            uint8      none: advisory clock-sweep usage count
buf_flags          (N,)            uint16     partition lock (BM_* bits)
buf_lock_shared    (N,)            int32      partition lock (share-lock holders)
buf_lock_excl      (N,)            int16      partition lock (exclusive holder slot or -1)
buf_waiters        (N,)            uint64     partition lock (slots sleeping on the buffer)
map_heads          (B,)            int32      partition lock of the bucket's partition
backend_pins       (S, N)          int32      only the owning backend writes its row
backend_locks      (S, N)          int8       only the owning backend writes its row
proc_pid           (S,)            int64      proc lock (0: slot free)
proc_xid           (S,)            int64      procarray lock (top-level xid, 0: none)
proc_xmin          (S,)            int64      procarray lock (published snapshot xmin)
proc_wait_xid      (S,)            int64      procarray lock (xid this backend waits for)
proc_xact_waiters  (S,)            uint64     procarray lock (slots waiting for this
                                              backend's transaction to end)
table_stats_oid    (T,)            int64      stats lock (oid owning each row, 0: free)
table_stats        (T, K2)         int64      stats lock (pg_stat_user_tables counters)
stats              (S + 1, K)      int64      only the owning backend writes its row; the
                                              last row collects the counts of backends
                                              that have exited (proc lock)
control            (16,)           int64      see CTL_* (each entry names its lock)
syncscan           (20, 3)         int64      syncscan lock (relfilenode, block, LRU stamp;
                                              ``minidb.heap.syncscan``)
syncscan_clock     (1,)            int64      syncscan lock (LRU stamp counter)
pscan              (P, 16)         int64      pscan[slot % 16] (one parallel scan's block
                                              allocator per row; ``minidb.heap.parallel``)
pool               (W, 4)          int64      pool lock (per worker process: state, pid,
                                              leader pid, task id; ``minidb.workers.pool``)
oc_tag             (OC,)           int64      iomodel lock (simulated OS page cache: file
                                              and block of each page, -1 empty;
                                              ``minidb.storage.iomodel``)
oc_stamp           (OC,)           int64      iomodel lock (LRU stamp of each page)
oc_ready           (OC,)           float64    iomodel lock (when each page's read ends)
io_state           (4,)            int64      iomodel lock (disk's last file and block,
                                              LRU clock)
io_busy            (1,)            float64    iomodel lock (the disk is busy until then)
io_counters        (IO,)           int64      iomodel lock (IO_COUNTERS)
=================  ==============  =========  ============================================

``P`` = parallel scan slots (max_connections), ``W`` = max_worker_processes, ``OC`` = pages
of the simulated OS cache (``os_cache_mb``; a placeholder of 8 when ``io_model`` is none).

Locks (all created before any fork):

* ``partition[i]`` - one per buffer-mapping partition (``buffer_partitions``); a buffer's
  whole descriptor is guarded by the partition lock of its current tag, so a pin, a
  content-lock change and a mapping change are one short critical section.  A tag change
  holds the old and the new partition's locks, taken in ascending order.
* ``strategy`` - the clock hand.
* ``proc`` - backend slot allocation and the ``retired`` statistics row.
* ``catalog`` - serializes catalog changes across processes.
* ``procarray`` - the proc array: xid assignment, snapshots, commit (ProcArrayLock and
  XidGenLock in one).
* ``clog[i]`` - commit-log writers, striped by xid (a byte holds four xids' status).
* ``stats`` - the shared per-table statistics.
* ``extension[i]`` - relation extension locks, striped by relfilenode.
* ``syncscan`` - the synchronized-scan position list (SyncScanLock).
* ``pscan[i]`` - parallel scan slots, striped: slot ``s`` uses ``pscan[s % 16]`` for its
  shared counter and start block.
* ``pool`` - claiming and releasing parallel worker processes.
* ``iomodel`` - the I/O model's cache, disk and counters (one lock: a lookup, the disk
  reservation and the insertion of a read are one critical section).
* ``sem[slot]`` - one semaphore per backend slot: a backend that must wait (for a buffer
  content lock, an I/O in progress, a cleanup lock; later for a transaction) sets its bit
  in the object's waiter mask and sleeps on its own semaphore, as a PostgreSQL backend
  sleeps on ``proc->sem``; whoever releases the object wakes every bit in the mask.

Every lock above is an ``LWLock``: a ``multiprocessing`` lock whose blocking acquire gives
up after ``LWLOCK_TIMEOUT_S`` (60 s) with ``LWLockTimeout`` naming the lock.  The critical
sections they guard last microseconds to milliseconds, so a wait that long means the holder
died inside one (a killed process cannot release a semaphore).  PostgreSQL's postmaster
answers such a death with a crash restart of every backend; minidb has no restart, so the
wait ends with an error that says to reopen the instance, instead of hanging.

Invariants:
  1. Every region's shape and dtype is computed here from the settings, nowhere else.
  2. The segment and the locks exist before the first fork and are never re-created.
  3. Each backend writes only its own row of ``backend_pins``, ``backend_locks`` and
     ``stats``, so those need no lock, and a crashed backend's holdings can be undone by
     reading its rows.
"""

from __future__ import annotations

import mmap
import multiprocessing
import multiprocessing.synchronize
from dataclasses import dataclass

import numpy as np

from minidb.config import BLCKSZ, Settings
from minidb.errors import LWLockTimeout

MAX_SLOTS = 64  # waiter sets are uint64 bitmasks over backend slots

# control[] entries
CTL_CLOCK_HAND = 0        # strategy lock: next buffer the clock sweep looks at
CTL_CATALOG_GEN = 1       # catalog lock: bumped by every catalog change
CTL_NEXT_XID = 4          # procarray lock: the next xid to assign
CTL_LATEST_COMPLETED = 5  # procarray lock: newest xid that committed or aborted
CTL_XID_LIMIT = 6         # procarray lock: xids below this are reserved in pg_control
N_CONTROL = 16

N_CLOG_LOCKS = 16
N_WAL_CTL = 32            # see minidb.wal.xlog (WAL_* indexes)
MAX_TABLE_STATS = 512     # tables with shared statistics (pg_stat_user_tables rows)

N_EXTENSION_LOCKS = 16

# synchronized scans, parallel scans, the worker pool, the I/O model (see their modules)
SYNC_SCAN_NELEM = 20
N_PSCAN_FIELDS = 16
N_PSCAN_LOCKS = 16
N_POOL_FIELDS = 4
OS_CACHE_WAYS = 8
N_IO_STATE = 4
IO_COUNTERS = (
    "requests",         # disk requests (one per run of consecutive missing blocks)
    "bytes",            # bytes transferred by the disk
    "seeks",            # requests that paid the seek
    "cache_hits",       # demanded pages found in the simulated OS cache
    "cache_misses",     # demanded pages read from the disk
    "readahead_pages",  # pages the disk read that nobody had demanded yet
    "pages_written",    # pages written into the cache by the buffer manager
    "disk_busy_us",     # time the disk was occupied
    "wait_us",          # time readers were owed (and slept)
)

# statistics counters, one column each (per backend slot, plus the retired row)
COUNTERS = (
    "buffers_hit",        # pin found the page in the pool
    "buffers_read",       # page read from the relation file into the pool
    "buffers_written",    # dirty page written back (eviction, checkpoint, close)
    "buffers_evicted",    # a valid page was replaced to make room
    "buffers_extended",   # new pages added to relations
    "ring_reused",        # a ring strategy reused one of its own buffers
    "checksum_failures",  # pages that failed verification on read
    "index_items_read",   # B-tree leaf items a scan took into its batches
    "index_items_killed",  # B-tree items marked LP_DEAD (scans and unique checks)
    "index_heap_fetches",  # heap fetches (HOT chain walks) made by index scans
    "index_items_deleted",  # LP_DEAD items removed by simple deletion before a split
    "index_splits",       # B-tree page splits (any level; a new root is not a split)
    "buffers_wal_flushed",  # page writes that first had to flush the WAL (WAL before data)
    "wal_rule_violations",  # pages written with an LSN beyond the flushed WAL (must stay 0)
)
C = {name: i for i, name in enumerate(COUNTERS)}

# per-table statistics, one column each (pg_stat_user_tables)
TABLE_COUNTERS = (
    "seq_scan", "seq_tup_read", "idx_scan", "idx_tup_fetch",
    "n_tup_ins", "n_tup_upd", "n_tup_del", "n_tup_hot_upd",
    "n_live_tup", "n_dead_tup", "vacuum_count", "analyze_count",
)
TC = {name: i for i, name in enumerate(TABLE_COUNTERS)}


@dataclass(frozen=True)
class Region:
    name: str
    shape: tuple[int, ...]
    dtype: str
    guard: str
    fill: int = 0


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


N_AUX_SLOTS = 1  # the checkpointer: close() must never fail for want of a free slot


def n_slots(settings: Settings) -> int:
    """Backend slots: connections, then parallel workers, then auxiliary processes."""
    return settings.max_connections + settings.max_worker_processes + N_AUX_SLOTS


def n_pscan_slots(settings: Settings) -> int:
    """Parallel scans that can run at once: one per connection."""
    return settings.max_connections


def os_cache_pages(settings: Settings) -> int:
    """Pages of the simulated OS cache (a multiple of its associativity)."""
    if settings.io_model == "none":
        return OS_CACHE_WAYS  # a placeholder: nothing uses it
    pages = settings.os_cache_mb * (1 << 20) // BLCKSZ
    return max(OS_CACHE_WAYS, pages // OS_CACHE_WAYS * OS_CACHE_WAYS)


def n_buckets(settings: Settings) -> int:
    return _next_pow2(max(2 * settings.shared_buffers, 16 * _next_pow2(settings.buffer_partitions)))


def regions(settings: Settings) -> list[Region]:
    """The layout of the segment: every shared array, its shape, dtype and guard."""
    n = settings.shared_buffers
    s = n_slots(settings)
    if s > MAX_SLOTS:
        raise ValueError(f"max_connections + max_worker_processes must be <= "
                         f"{MAX_SLOTS - N_AUX_SLOTS}")
    return [
        Region("buf_pages", (n, BLCKSZ), "u1", "buffer content lock"),
        Region("buf_tag", (n,), "<i8", "partition lock", fill=-1),
        Region("buf_part", (n,), "<i2", "partition lock"),
        Region("buf_next", (n,), "<i4", "partition lock", fill=-1),
        Region("buf_refcount", (n,), "<i4", "partition lock"),
        Region("buf_usage", (n,), "u1", "advisory"),
        Region("buf_flags", (n,), "<u2", "partition lock"),
        Region("buf_lock_shared", (n,), "<i4", "partition lock"),
        Region("buf_lock_excl", (n,), "<i2", "partition lock", fill=-1),
        Region("buf_waiters", (n,), "<u8", "partition lock"),
        Region("map_heads", (n_buckets(settings),), "<i4", "partition lock", fill=-1),
        Region("backend_pins", (s, n), "<i4", "owning backend"),
        Region("backend_locks", (s, n), "i1", "owning backend"),
        Region("proc_pid", (s,), "<i8", "proc lock"),
        Region("proc_xid", (s,), "<i8", "procarray lock"),
        Region("proc_xmin", (s,), "<i8", "procarray lock"),
        Region("proc_wait_xid", (s,), "<i8", "procarray lock"),
        Region("proc_xact_waiters", (s,), "<u8", "procarray lock"),
        Region("table_stats_oid", (MAX_TABLE_STATS,), "<i8", "stats lock"),
        Region("table_stats", (MAX_TABLE_STATS, len(TABLE_COUNTERS)), "<i8", "stats lock"),
        Region("stats", (s + 1, len(COUNTERS)), "<i8", "owning backend / proc lock"),
        Region("control", (N_CONTROL,), "<i8", "see CTL_*"),
        Region("syncscan", (SYNC_SCAN_NELEM, 3), "<i8", "syncscan lock", fill=-1),
        Region("syncscan_clock", (1,), "<i8", "syncscan lock"),
        Region("pscan", (n_pscan_slots(settings), N_PSCAN_FIELDS), "<i8", "pscan lock stripe"),
        Region("pool", (max(1, settings.max_worker_processes), N_POOL_FIELDS), "<i8",
               "pool lock"),
        Region("oc_tag", (os_cache_pages(settings),), "<i8", "iomodel lock", fill=-1),
        Region("oc_stamp", (os_cache_pages(settings),), "<i8", "iomodel lock"),
        Region("oc_ready", (os_cache_pages(settings),), "<f8", "iomodel lock"),
        Region("io_state", (N_IO_STATE,), "<i8", "iomodel lock"),
        Region("io_busy", (1,), "<f8", "iomodel lock"),
        Region("io_counters", (len(IO_COUNTERS),), "<i8", "iomodel lock"),
        Region("wal_ctl", (N_WAL_CTL,), "<i8", "wal insert / wal write lock (minidb.wal.xlog)"),
        Region("wal_insert_at", (s + 2,), "<i8", "owning backend (set under wal insert lock)"),
        Region("wal_ring", (settings.wal_buffers * BLCKSZ,), "u1",
               "reserved by the wal insert lock, then the reserving backend"),
        Region("proc_delay_chkpt", (s + 2,), "<i8", "owning backend"),
    ]


class Segment:
    """One anonymous shared mapping viewed as the numpy arrays named by ``regions()``."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.regions = regions(settings)
        offsets = []
        size = 0
        for r in self.regions:
            align = 4096 if r.name == "buf_pages" else 64
            size = (size + align - 1) // align * align
            offsets.append(size)
            size += int(np.prod(r.shape)) * np.dtype(r.dtype).itemsize
        self.size = size
        self._mmap = mmap.mmap(-1, max(size, 1), flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        for r, off in zip(self.regions, offsets):
            arr = np.ndarray(r.shape, dtype=r.dtype, buffer=self._mmap, offset=off)
            if r.fill:
                arr.fill(r.fill)
            setattr(self, r.name, arr)
        # Flat views of the whole pool: scans gather fields of many pages with one index.
        self.pool_flat = self.buf_pages.reshape(-1)

    def close(self) -> None:
        for r in self.regions:
            setattr(self, r.name, None)
        self.pool_flat = None
        try:
            self._mmap.close()
        except BufferError:
            pass  # views still alive somewhere; the mapping goes with the process


LWLOCK_TIMEOUT_S = 60.0  # read at each wait, so a test can lower it


class LWLock(multiprocessing.synchronize.Lock):
    """A cross-process lock (a POSIX semaphore) whose blocking waits end.

    ``acquire()`` and ``with lock:`` wait at most ``LWLOCK_TIMEOUT_S``, then raise
    ``LWLockTimeout`` naming the lock; ``acquire(False)`` and ``acquire(timeout=t)`` behave
    as ``multiprocessing.Lock``'s.  The uncontended path is the semaphore's trywait, as
    before: the timeout costs nothing until a wait actually blocks.
    """

    def __init__(self, name: str, ctx):
        self.name = name
        super().__init__(ctx=ctx)

    def _make_methods(self):
        sem, name = self._semlock, self.name

        def acquire(block: bool = True, timeout: float | None = None) -> bool:
            if not block or timeout is not None:
                return sem.acquire(block, timeout)
            if sem.acquire(True, LWLOCK_TIMEOUT_S):
                return True
            raise LWLockTimeout(
                f"waited {LWLOCK_TIMEOUT_S:g} s for the {name} lock: a process probably died "
                f"holding it; close and reopen the instance")

        self.acquire = acquire
        self.release = sem.release

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()

    def __getstate__(self):
        return (super().__getstate__(), self.name)

    def __setstate__(self, state):
        base, self.name = state
        super().__setstate__(base)

    def __repr__(self):
        return f"<LWLock {self.name}>"


class SharedLocks:
    """Every cross-process lock and semaphore, created before any fork."""

    def __init__(self, settings: Settings):
        ctx = multiprocessing.get_context("fork")

        def lw(name):
            return LWLock(name, ctx)

        self.partition = [lw(f"buffer mapping partition {i}")
                          for i in range(settings.buffer_partitions)]
        self.strategy = lw("buffer strategy")
        self.proc = lw("proc")
        self.catalog = lw("catalog")
        self.procarray = lw("procarray")
        self.clog = [lw(f"clog {i}") for i in range(N_CLOG_LOCKS)]
        self.stats = lw("stats")
        self.extension = [lw(f"relation extension {i}") for i in range(N_EXTENSION_LOCKS)]
        self.syncscan = lw("syncscan")
        self.pscan = [lw(f"parallel scan {i}") for i in range(N_PSCAN_LOCKS)]
        self.pool = lw("worker pool")
        self.iomodel = lw("I/O model")
        self.wal_insert = lw("WAL insert")
        self.wal_write = lw("WAL write")
        self.sem = [ctx.Semaphore(0) for _ in range(n_slots(settings))]
