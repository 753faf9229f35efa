"""The shared-memory segment: its layout, declared in one place (PostgreSQL's ``ipci.c``).

An instance maps ONE anonymous ``MAP_SHARED`` segment when it opens a data directory and
creates every cross-process lock it will ever need, before any process is forked.  A forked
child inherits the mapping at the same address and the locks, so the numpy views below stay
valid in every process and nothing shared is ever created after a fork.

Regions (``N`` = shared_buffers, ``S`` = backend slots = max_connections +
max_worker_processes + 1 auxiliary (the checkpointer), at most 64 so a wait set fits in one
uint64 bitmask, ``X`` = ``MAX_CACHED_SUBXIDS``,
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
buf_never_used     (1,)            int64      strategy lock (first buffer never handed out:
                                              the free list, ``minidb.storage.freelist``)
map_heads          (B,)            int32      partition lock of the bucket's partition
backend_pins       (S, N)          int32      only the owning backend writes its row
backend_locks      (S, N)          int8       only the owning backend writes its row
proc_pid           (S,)            int64      proc lock (0: slot free)
proc_xid           (S,)            int64      procarray lock (top-level xid, 0: none)
proc_xmin          (S,)            int64      procarray lock (published snapshot xmin)
proc_wait_xid      (S,)            int64      procarray lock (xid this backend waits for)
proc_xact_waiters  (S,)            uint64     procarray lock (slots waiting for this
                                              backend's transaction to end)
proc_subxids       (S, X)          int64      procarray lock (the live subtransaction xids
                                              of the slot's transaction, PGPROC's subxids
                                              cache; ``minidb.txn.subxact``)
proc_nsubxids      (S,)            int32      procarray lock (how many of them)
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
oc_mark            (OC,)           int8       iomodel lock (1: the page carries a
                                              read-ahead marker, Linux's PG_readahead)
io_state           (4,)            int64      iomodel lock (disk's last file and block,
                                              LRU clock)
io_busy            (1,)            float64    iomodel lock (the disk is busy until then)
io_device          (4,)            float64    iomodel lock (the device's page transfer time,
                                              seek or latency; set at open, recalibrated
                                              by experiments)
io_slots           (QD,)           float64    iomodel lock (when each of the device's
                                              io_queue_depth command slots is free)
io_counters        (IO,)           int64      iomodel lock (IO_COUNTERS)
lock_tag           (NP*LP, 3)      int64      lockmgr[p] (heavyweight lock entries, by
                                              partition p; ``minidb.txn.lmgr``)
lock_hash          (NP*LP,)        int64      lockmgr[p] (each entry's tag hash)
lock_hold          (NP*LP, S)      uint16     lockmgr[p] (modes each slot holds)
lock_index         (NP, HP)        int32      lockmgr[p] (open-addressing index, -1 empty)
lock_seq           (NP,)           int64      lockmgr[p] (wait-queue arrival counter)
proc_wait_lock     (S,)            int32      lockmgr[p] of the entry (-1: not waiting)
proc_wait_mode     (S,)            int8       lockmgr[p] (mode asked for)
proc_wait_status   (S,)            int8       lockmgr[p] (waiting / granted / removed)
proc_wait_seq      (S,)            int64      lockmgr[p] (place in the wait queue)
fp_relid           (S, FP)         int64      fp[slot] (fast-path relation locks)
fp_bits            (S, FP)         uint8      fp[slot] (modes per fast-path entry)
fp_strong          (1024,)         int32      lockmgr[b % NP] (strong locks per bucket)
clog_pages         (X, 8192)       uint8      clog control lock (status bits; contents of a
                                              slot in I/O: that slot's clog I/O lock)
clog_pageno        (X,)            int64      clog control lock (-1: slot empty)
clog_state         (X,)            uint8      clog control lock (SLRU_* of minidb.txn.clog)
clog_dirty         (X,)            uint8      clog control lock
clog_lru           (X,)            int64      clog control lock (last-use stamp)
clog_group_lsn     (X, 1024)       int64      clog control lock (highest commit LSN per group
                                              of 32 xids of the page; lock-free reads)
clog_ctl           (CC,)           int64      clog control lock (CLOG_CTL_*; pg_stat_slru
                                              counters)
wal_ctl            (32,)           int64      wal_insert / wal_write (WAL_* of
                                              ``minidb.wal.xlog``: insert and flush
                                              positions, redo point, WAL statistics)
wal_insert_at      (S + 2,)        int64      owning backend, set under wal_insert (start
                                              of the record it is copying, 0: none)
wal_ring           (WB * 8192,)    uint8      the WAL buffers: a range reserved under
                                              wal_insert is filled by its reserver
proc_delay_chkpt   (S + 2,)        int64      owning backend (a commit between its record
                                              and its clog update delays a checkpoint)
proc_flags         (S,)            int64      owning backend (PROC_* bits; reset when the
                                              slot is claimed)
mx_tag             (MX, 4)         int64      multixact lock (the tuple version an entry of
                                              FOR KEY SHARE lockers is for: relfilenode,
                                              block, offset, xmin; ``minidb.txn.multixact``)
mx_member          (MX, S)         int64      multixact lock (per slot: the xid of its
                                              transaction holding the lock, 0: none)
mx_mode            (MX, S)         uint8      multixact lock (per slot: the lock's
                                              strength, 1 key share, 2 share, 3 no key
                                              update)
rel_size_gen       (RS,)           int64      relation size lock (bumped after every change
                                              of a relation file's size, by relfilenode
                                              and fork; ``minidb.storage.smgr``)
=================  ==============  =========  ============================================

``NP`` = 16 lock partitions, ``LP`` = lock entries per partition
(``max_locks_per_transaction`` x S x 2 / NP, at least 64), ``HP`` = index cells per partition
(a power of two >= 2 LP), ``FP`` = 16 fast-path slots per backend; ``P`` = parallel scan
slots (max_connections), ``W`` = max_worker_processes, ``OC`` = pages of the simulated OS
cache (``os_cache_mb``; a placeholder of 8 when ``io_model`` is none), ``X`` = commit-log page
buffers (``transaction_buffers``, see ``n_clog_buffers``), ``CC`` = ``N_CLOG_CTL``,
``WB`` = ``wal_buffers`` (pages), ``MX`` = ``MULTI_LOCKERS_PER_SLOT`` x S,
``RS`` = ``N_REL_SIZE_GEN``.

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
* ``clog_ctl`` - the commit log's buffer pool (PostgreSQL's XactSLRULock): slot mapping,
  state, LRU stamps and status bits; never held across file I/O.
* ``clog_io[i]`` - one per commit-log buffer, held by the process reading or writing that
  buffer's page while the control lock is released (PostgreSQL's per-buffer SLRU locks); a
  process that finds the slot in I/O waits by taking and releasing it.
* ``stats`` - the shared per-table statistics.
* ``extension[i]`` - relation extension locks, striped by relfilenode.
* ``syncscan`` - the synchronized-scan position list (SyncScanLock).
* ``relsize`` - bumping an entry of ``rel_size_gen`` (held for the increment only).
* ``multixact`` - the table of shared row lockers (``mx_tag``, ``mx_member``, ``mx_mode``).
* ``pscan[i]`` - parallel scan slots, striped: slot ``s`` uses ``pscan[s % 16]`` for its
  shared counter and start block.
* ``pool`` - claiming and releasing parallel worker processes.
* ``iomodel`` - the I/O model's cache, disk and counters (one lock: a lookup, the disk
  reservation and the insertion of a read are one critical section).
* ``lockmgr[i]`` - the heavyweight lock manager's partitions (LockManager partition locks);
  a deadlock check takes all 16 in order, then ``procarray``.
* ``fp[slot]`` - each backend's fast-path relation locks (PostgreSQL's fpInfoLock).
* ``wal_insert`` - reserving WAL space (PostgreSQL's insertion lock; one, not eight).
* ``wal_write`` - writing and flushing the WAL buffers (WALWriteLock); order: wal_insert ->
  wal_write, never the reverse.
* ``sem[slot]`` - one semaphore per backend slot: a backend that must wait (for a buffer
  content lock, an I/O in progress, a cleanup lock, a transaction's end) sets its bit
  in the object's waiter mask and sleeps on its own semaphore, as a PostgreSQL backend
  sleeps on ``proc->sem``; whoever releases the object wakes every bit in the mask.

Every lock above is an ``LWLock``: a ``multiprocessing`` lock that records its holder's
pid in a shared holder table (entry 0 of which is the instance's *crash flag*); the hottest
callers (the buffer manager's single-buffer and batch calls, the WAL insertion) take it
inline through ``LWLock.fast()``, the same semaphore operations and holder records without
its Python frames.  The
critical sections they guard last microseconds to milliseconds, and a killed process
cannot release a semaphore, so a holder that died means shared state may be half-changed:
PostgreSQL's postmaster answers with a crash restart of every backend, and so does minidb:
whoever finds such a death - the instance's monitor process or its reaper, or a blocked
wait that sees a dead holder - sets the crash flag, from then on statements and waits
raise ``CrashShutdown`` (57P02), and the owner's postmaster thread replaces the segment and
the locks with new ones and runs crash recovery (``minidb.instance``, "Crash restart"; with
``restart_after_crash`` off the instance must be reopened instead).  A blocked wait still
gives up after ``LWLOCK_TIMEOUT_S`` (60 s) with ``LWLockTimeout`` naming the lock.

Invariants:
  1. Every region's shape and dtype is computed here from the settings, nowhere else.
  2. The segment and the locks exist before the first fork and are never re-created while
     any process other than the owner uses them (a crash restart makes new ones only after
     every other process of the instance is gone).
  3. Each backend writes only its own row of ``backend_pins``, ``backend_locks`` and
     ``stats``, so those need no lock, and a crashed backend's holdings can be undone by
     reading its rows.
"""

from __future__ import annotations

import mmap
import multiprocessing
import multiprocessing.synchronize
import os
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np

from minidb.config import BLCKSZ, Settings
from minidb.errors import CrashShutdown, LWLockHolderDied, LWLockTimeout

MAX_SLOTS = 64  # waiter sets are uint64 bitmasks over backend slots
# PGPROC_MAX_CACHED_SUBXIDS: subtransaction xids one transaction may hold at once (minidb
# has no pg_subtrans to fall back on, so one more is 54000; ``minidb.txn.subxact``)
MAX_CACHED_SUBXIDS = 64

# control[] entries
CTL_CLOCK_HAND = 0        # strategy lock: next buffer the clock sweep looks at
CTL_CATALOG_GEN = 1       # catalog lock: bumped by every committed catalog change
CTL_NEXT_OID = 2          # catalog lock: the next OID / relfilenode to hand out
CTL_NEXT_XID = 4          # procarray lock: the next xid to assign
CTL_LATEST_COMPLETED = 5  # procarray lock: newest xid that committed or aborted
CTL_XACT_COMPLETION = 6   # procarray lock: bumped by every end of a transaction with an xid
CTL_SUBXIDS = 7           # procarray lock: live subtransaction xids over all slots (the sum
                          # of proc_nsubxids: 0 lets the xid lookups skip proc_subxids)
N_CONTROL = 16

# proc_flags[] bits
PROC_CREATED_FILES = 1    # the open transaction created relation files (catalog.storage)

# commit-log (pg_xact) SLRU control entries (clog_ctl[]) and its pg_stat_slru counters
CLOG_CTL_CLOCK = 0        # LRU stamp counter
CLOG_CTL_LATEST_PAGE = 1  # the page the xid counter is in (never evicted), -1 before any
CLOG_CTL_OLDEST_PAGE = 2  # pages below were removed by truncation
CLOG_STATS = ("blks_zeroed", "blks_hit", "blks_read", "blks_written", "flushes",
              "truncates", "evictions", "hint_checks", "hints_deferred", "wal_records")
CLOG_LSNS_PER_PAGE = 1024   # group LSNs per commit-log page: one per 32 xids (PostgreSQL's
                            # CLOG_LSNS_PER_PAGE, CLOG_XACTS_PER_LSN_GROUP = 32)
CLOG_STAT_BASE = 3        # clog_ctl[CLOG_STAT_BASE + i] counts CLOG_STATS[i]
N_CLOG_CTL = CLOG_STAT_BASE + len(CLOG_STATS)
N_WAL_CTL = 32            # see minidb.wal.xlog (WAL_* indexes)
MAX_TABLE_STATS = 512     # tables with shared statistics (pg_stat_user_tables rows)

N_EXTENSION_LOCKS = 16
N_REL_SIZE_GEN = 1024     # relation size generations (minidb.storage.smgr)

# the heavyweight lock manager (minidb.txn.lmgr)
N_LOCK_PARTITIONS = 16
FP_SLOTS = 16             # fast-path relation locks per backend (FP_LOCK_SLOTS_PER_BACKEND)
FP_STRONG = 1024          # FAST_PATH_STRONG_LOCK_HASH_PARTITIONS

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
    "drive_cache_pages",  # pages a late contiguous request found in the drive's cache
    "overlapped",       # requests started while another was in flight (queue depth > 1)
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
    "btree_cache_hits",   # descents through a decoded internal page whose LSN was unchanged
    "btree_cache_misses",  # internal pages decoded for the descent cache the first time
    "btree_cache_refreshes",  # cached internal pages re-decoded: the page's LSN had moved
    "buffers_wal_flushed",  # page writes that first had to flush the WAL (WAL before data)
    "wal_rule_violations",  # pages written with an LSN beyond the flushed WAL (must stay 0)
    "partition_lock_busy",  # mapping partitions a batch found held by another backend
                            # (done after the free ones: BufferManager._by_partition)
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
MULTI_LOCKERS_PER_SLOT = 64  # FOR KEY SHARE-locked tuple versions (minidb.txn.multixact)


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


def locks_per_partition(settings: Settings) -> int:
    """Heavyweight lock entries of one partition's pool (a shared pool, as PostgreSQL's)."""
    return max(64, settings.max_locks_per_transaction * n_slots(settings) * 2
               // N_LOCK_PARTITIONS)


def lock_index_cells(settings: Settings) -> int:
    return _next_pow2(2 * locks_per_partition(settings))


def n_clog_buffers(settings: Settings) -> int:
    """Commit-log page buffers: ``transaction_buffers``, or PostgreSQL 13-16's
    ``Min(128, Max(4, NBuffers / 512))`` when it is 0."""
    if settings.transaction_buffers:
        return max(4, settings.transaction_buffers)
    return min(128, max(4, settings.shared_buffers // 512))


def n_buckets(settings: Settings) -> int:
    return _next_pow2(max(2 * settings.shared_buffers, 16 * _next_pow2(settings.buffer_partitions)))


def regions(settings: Settings) -> list[Region]:
    """The layout of the segment: every shared array, its shape, dtype and guard."""
    n = settings.shared_buffers
    s = n_slots(settings)
    lp = locks_per_partition(settings)
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
        Region("buf_never_used", (1,), "<i8", "strategy lock"),
        Region("map_heads", (n_buckets(settings),), "<i4", "partition lock", fill=-1),
        Region("backend_pins", (s, n), "<i4", "owning backend"),
        Region("backend_locks", (s, n), "i1", "owning backend"),
        Region("proc_pid", (s,), "<i8", "proc lock"),
        Region("proc_xid", (s,), "<i8", "procarray lock"),
        Region("proc_xmin", (s,), "<i8", "procarray lock"),
        Region("proc_wait_xid", (s,), "<i8", "procarray lock"),
        Region("proc_xact_waiters", (s,), "<u8", "procarray lock"),
        Region("proc_subxids", (s, MAX_CACHED_SUBXIDS), "<i8", "procarray lock"),
        Region("proc_nsubxids", (s,), "<i4", "procarray lock"),
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
        Region("oc_mark", (os_cache_pages(settings),), "i1", "iomodel lock"),
        Region("io_state", (N_IO_STATE,), "<i8", "iomodel lock"),
        Region("io_busy", (1,), "<f8", "iomodel lock"),
        Region("io_device", (4,), "<f8", "iomodel lock"),
        # the device's command slots: io_queue_depth for `custom`, a preset's own depth
        # (the ssd preset's 32) otherwise - sized for either
        Region("io_slots", (max(32, settings.io_queue_depth),), "<f8", "iomodel lock"),
        Region("io_counters", (len(IO_COUNTERS),), "<i8", "iomodel lock"),
        Region("lock_tag", (N_LOCK_PARTITIONS * lp, 3), "<i8", "lockmgr partition"),
        Region("lock_hash", (N_LOCK_PARTITIONS * lp,), "<i8", "lockmgr partition"),
        Region("lock_hold", (N_LOCK_PARTITIONS * lp, s), "<u2", "lockmgr partition"),
        Region("lock_index", (N_LOCK_PARTITIONS, lock_index_cells(settings)), "<i4",
               "lockmgr partition", fill=-1),
        Region("lock_seq", (N_LOCK_PARTITIONS,), "<i8", "lockmgr partition"),
        Region("proc_wait_lock", (s,), "<i4", "lockmgr partition", fill=-1),
        Region("proc_wait_mode", (s,), "i1", "lockmgr partition"),
        Region("proc_wait_status", (s,), "i1", "lockmgr partition"),
        Region("proc_wait_seq", (s,), "<i8", "lockmgr partition"),
        Region("fp_relid", (s, FP_SLOTS), "<i8", "fp lock of the slot"),
        Region("fp_bits", (s, FP_SLOTS), "u1", "fp lock of the slot"),
        Region("fp_strong", (FP_STRONG,), "<i4", "lockmgr partition"),
        Region("clog_pages", (n_clog_buffers(settings), BLCKSZ), "u1", "clog control lock"),
        Region("clog_pageno", (n_clog_buffers(settings),), "<i8", "clog control lock",
               fill=-1),
        Region("clog_state", (n_clog_buffers(settings),), "u1", "clog control lock"),
        Region("clog_dirty", (n_clog_buffers(settings),), "u1", "clog control lock"),
        Region("clog_lru", (n_clog_buffers(settings),), "<i8", "clog control lock"),
        Region("clog_group_lsn", (n_clog_buffers(settings), CLOG_LSNS_PER_PAGE), "<i8",
               "clog control lock"),
        Region("clog_ctl", (N_CLOG_CTL,), "<i8", "clog control lock"),
        Region("wal_ctl", (N_WAL_CTL,), "<i8", "wal insert / wal write lock (minidb.wal.xlog)"),
        Region("wal_insert_at", (s + 2,), "<i8", "owning backend (set under wal insert lock)"),
        Region("wal_ring", (settings.wal_buffers * BLCKSZ,), "u1",
               "reserved by the wal insert lock, then the reserving backend"),
        Region("proc_delay_chkpt", (s + 2,), "<i8", "owning backend"),
        Region("proc_flags", (s,), "<i8", "owning backend"),
        Region("mx_tag", (MULTI_LOCKERS_PER_SLOT * s, 4), "<i8", "multixact lock", fill=-1),
        Region("mx_member", (MULTI_LOCKERS_PER_SLOT * s, s), "<i8", "multixact lock"),
        Region("mx_mode", (MULTI_LOCKERS_PER_SLOT * s, s), "u1", "multixact lock"),
        Region("rel_size_gen", (N_REL_SIZE_GEN,), "<i8", "relation size lock"),
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
LWLOCK_POLL_S = 0.2      # a blocked wait looks at the holder this often
HOLDERLESS_S = 5.0       # held with no holder recorded this long: the acquirer died
MAX_LWLOCKS = 4096       # entries of the holder table (locks are numbered as created)
H_CRASHED = 0            # holder table entry 0: pid of a process that died holding a lock

# this process's pid, kept current across forks (os.getpid() is a system call), and whether
# this process was forked by its parent's main thread (see set_parent_death_signal)
_PID = [0]
_FORK = {"from_main": True, "parent": 0}


def _before_fork() -> None:
    _FORK["from_main"] = threading.current_thread() is threading.main_thread()
    _FORK["parent"] = os.getpid()


def _refresh_pid() -> None:
    _PID[0] = os.getpid()


_refresh_pid()
os.register_at_fork(before=_before_fork, after_in_child=_refresh_pid)


CURRENT_PID = _PID  # the one-element list itself, for hot paths: CURRENT_PID[0]


def current_pid() -> int:
    """``os.getpid()`` without the system call (kept current by the fork hook)."""
    return _PID[0]

PR_SET_PDEATHSIG = 1


def set_parent_death_signal(sig: int) -> bool:
    """In a freshly forked child: ask the kernel for ``sig`` when the parent dies (Linux's
    prctl(PR_SET_PDEATHSIG), through ctypes).  The kernel sends it when the *thread* that
    forked us ends, so this is done only for children forked by the parent's main thread
    (a thread of the parent may end long before the parent does); the others rely on the
    death pipe alone.  Returns True if the signal was armed.  If the parent is already gone
    (it died between the fork and this call) the signal is sent to ourselves at once."""
    if not _FORK["from_main"] or not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:  # pragma: no cover
            return False
    except (OSError, AttributeError):  # pragma: no cover - no libc prctl
        return False
    if _FORK["parent"] and os.getppid() != _FORK["parent"]:
        os.kill(os.getpid(), sig)  # pragma: no cover - the parent died meanwhile
    return True


def pid_alive(pid: int) -> bool:
    """True unless process ``pid`` is gone or a zombie (reading /proc does not reap it, so
    whoever forked it still gets its exit status)."""
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:  # pragma: no cover - no /proc: fall back to signal 0
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3] != b"Z"


class LWLock(multiprocessing.synchronize.Lock):
    """A cross-process lock (a POSIX semaphore) that records its holder and whose blocking
    waits end.

    The holder table (``SharedLocks.holders``, shared memory) has one entry per lock: the
    pid of the process holding it, written right after the semaphore is taken and cleared
    right before it is given back.  ``acquire()`` and ``with lock:`` first try the
    semaphore (the uncontended path: one trywait and one store); a wait that blocks looks
    every ``LWLOCK_POLL_S`` at

    * the instance's crash flag: set -> ``CrashShutdown``;
    * the holder: a dead one (SIGKILLed inside the critical section: the kernel does not
      give a semaphore back) -> set the crash flag, raise ``LWLockHolderDied``;
    * no holder recorded for ``HOLDERLESS_S`` while the lock stays taken -> the acquirer
      died between taking the semaphore and recording itself (or between clearing and
      giving back): the same;
    * ``SharedLocks.check_owner`` (set in forked children: the instance owner's death);

    and gives up after ``LWLOCK_TIMEOUT_S`` with ``LWLockTimeout`` naming the lock.
    ``acquire(False)`` and ``acquire(timeout=t)`` behave as ``multiprocessing.Lock``'s (and
    record the holder too).  ``with lock:`` runs the uncontended path inline; ``fast()``
    hands a hot caller the pieces to do the same in its own code.
    """

    def __init__(self, name: str, ctx, locks: "SharedLocks | None" = None, index: int = 0):
        self.name = name
        self._locks = locks
        self._index = index
        super().__init__(ctx=ctx)

    def _make_methods(self):
        sem, name, locks, idx = self._semlock, self.name, self._locks, self._index
        holders = locks.holder_words if locks is not None else None
        pid = _PID
        try_acquire = sem.acquire
        give_back = sem.release
        # the inline protocol's pieces (see ``LWLock.fast``): C-level methods of the
        # semaphore, so a hot caller spends no Python frame on the lock itself
        self.sem_try, self.sem_give, self.holder_words = try_acquire, give_back, holders

        if holders is None:  # unpickled elsewhere: no holder table to keep
            def acquire(block: bool = True, timeout: float | None = None) -> bool:
                if block and timeout is None:
                    return try_acquire(False) or _wait_blocked(sem, name, locks, idx)
                return try_acquire(block, timeout)

            self.acquire = acquire
            self.release = give_back
            return

        def acquire(block: bool = True, timeout: float | None = None) -> bool:
            if block and timeout is None:
                if try_acquire(False) or _wait_blocked(sem, name, locks, idx):
                    holders[idx] = pid[0]
                    return True
                return False  # pragma: no cover - _wait_blocked raises instead
            if try_acquire(block, timeout):
                holders[idx] = pid[0]
                return True
            return False

        def release() -> None:
            holders[idx] = 0
            give_back()

        self.acquire = acquire
        self.release = release

    def fast(self) -> tuple:
        """``(sem_try, sem_give, holder_words, index)`` for a caller that inlines the
        uncontended path (the buffer manager's partition locks, the WAL insertion lock):

            if not sem_try(False):
                lock.acquire()            # the blocking path (it records the holder too)
            holder_words[index] = CURRENT_PID[0]
            ...                           # the critical section
            holder_words[index] = 0
            sem_give()

        - the same semaphore operations and holder records as ``acquire`` / ``release``,
        in the same order, so a process killed anywhere in between is found exactly as
        before.  ``holder_words`` is None for a lock without a holder table (unpickled):
        such a caller must use ``acquire`` / ``release``."""
        return self.sem_try, self.sem_give, self.holder_words, self._index

    def holder(self) -> int:
        """The pid recorded as holding the lock (0: free, or not recorded yet)."""
        return int(self._locks.holders[self._index]) if self._locks is not None else 0

    def __enter__(self):
        # the uncontended path inline (one Python frame less than ``acquire``)
        if self.holder_words is not None and self.sem_try(False):
            self.holder_words[self._index] = _PID[0]
            return True
        return self.acquire()

    def __exit__(self, *exc):
        hw = self.holder_words
        if hw is not None:
            hw[self._index] = 0
        self.sem_give()

    def __getstate__(self):
        return (super().__getstate__(), self.name)

    def __setstate__(self, state):
        base, self.name = state
        self._locks, self._index = None, 0  # unpickled elsewhere: no holder table
        super().__setstate__(base)

    def __repr__(self):
        return f"<LWLock {self.name}>"


def _wait_blocked(sem, name: str, locks: "SharedLocks | None", idx: int) -> bool:
    """The blocking path of ``LWLock.acquire`` (see its docstring)."""
    now = time.monotonic()
    deadline = now + LWLOCK_TIMEOUT_S
    holderless_since = None
    while True:
        if sem.acquire(True, max(0.001, min(LWLOCK_POLL_S, deadline - now))):
            return True
        now = time.monotonic()
        if locks is not None:
            locks.check_crash()
            if locks.check_owner is not None:
                locks.check_owner()
            h = int(locks.holders[idx])
            if h and not pid_alive(h):
                locks.mark_crashed(h, f"process {h} died holding the {name} lock")
                locks.check_crash(LWLockHolderDied)
            if h:
                holderless_since = None
            elif holderless_since is None:
                holderless_since = now
            elif now - holderless_since >= HOLDERLESS_S:
                if sem.acquire(False):  # given back meanwhile after all
                    return True
                locks.mark_crashed(-1, f"a process died taking or giving back the {name} "
                                       "lock")
                locks.check_crash(LWLockHolderDied)
        if now >= deadline:
            raise LWLockTimeout(
                f"waited {LWLOCK_TIMEOUT_S:g} s for the {name} lock: a process probably died "
                f"holding it; close and reopen the instance")


class SharedLocks:
    """Every cross-process lock and semaphore, created before any fork."""

    def __init__(self, settings: Settings):
        ctx = multiprocessing.get_context("fork")
        # the holder table: entry 0 is the crash flag (H_CRASHED), lock i uses entry i
        self._holder_map = mmap.mmap(-1, MAX_LWLOCKS * 8,
                                     flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        self.holders = np.ndarray((MAX_LWLOCKS,), dtype="<i8", buffer=self._holder_map)
        self.holder_words = memoryview(self._holder_map).cast("q")  # the hot path's view
        # the reason of a crash, for the error text (shared: written by whoever detects it)
        self._reason_map = mmap.mmap(-1, 512, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        self.check_owner = None  # set by the instance in forked children (owner's death)
        # what the 57P02 message tells the user to do (the instance sets it: restart or not)
        self.after_crash = ("so the instance must be reopened (close every connection, then "
                            "open the data directory again)")
        self.all_lwlocks: list[LWLock] = []

        def lw(name):
            if len(self.all_lwlocks) + 1 >= MAX_LWLOCKS:  # pragma: no cover
                raise ValueError("too many LWLocks for the holder table")
            lock = LWLock(name, ctx, self, len(self.all_lwlocks) + 1)
            self.all_lwlocks.append(lock)
            return lock

        self.partition = [lw(f"buffer mapping partition {i}")
                          for i in range(settings.buffer_partitions)]
        self.strategy = lw("buffer strategy")
        self.proc = lw("proc")
        self.catalog = lw("catalog")
        self.procarray = lw("procarray")
        self.clog_ctl = lw("pg_xact control")
        self.clog_io = [lw(f"pg_xact buffer {i}") for i in range(n_clog_buffers(settings))]
        self.stats = lw("stats")
        self.extension = [lw(f"relation extension {i}") for i in range(N_EXTENSION_LOCKS)]
        self.syncscan = lw("syncscan")
        self.multixact = lw("multixact")
        self.pscan = [lw(f"parallel scan {i}") for i in range(N_PSCAN_LOCKS)]
        self.pool = lw("worker pool")
        self.iomodel = lw("I/O model")
        self.lockmgr = [lw(f"lock manager {i}") for i in range(N_LOCK_PARTITIONS)]
        self.fp = [lw(f"fast path {s}") for s in range(n_slots(settings))]
        self.wal_insert = lw("WAL insert")
        self.wal_write = lw("WAL write")
        self.relsize = lw("relation size")
        self.sem = [ctx.Semaphore(0) for _ in range(n_slots(settings))]

    # -- a process that died holding a lock: the crash flag ----------------------------------------
    def held_by(self, pid: int) -> list[str]:
        """Names of the LWLocks recorded as held by ``pid`` (none for a pid <= 0: a free
        lock's entry is 0)."""
        if pid <= 0:
            return []
        idx = np.flatnonzero(self.holders[1:len(self.all_lwlocks) + 1] == pid)
        return [self.all_lwlocks[i].name for i in idx.tolist()]

    def mark_crashed(self, pid: int, reason: str) -> None:
        """Record that shared memory can no longer be trusted (the first reason wins)."""
        if int(self.holders[H_CRASHED]) == 0:
            data = reason.encode()[:500]
            self._reason_map[:len(data) + 1] = data + b"\0"
            self.holders[H_CRASHED] = pid or -1

    def crashed(self) -> str | None:
        """The crash reason, or None while the instance is healthy."""
        if int(self.holders[H_CRASHED]) == 0:
            return None
        raw = bytes(self._reason_map[:512])
        return raw.split(b"\0", 1)[0].decode(errors="replace") or "a process crashed"

    def check_crash(self, cls=CrashShutdown) -> None:
        """Raise ``cls`` (57P02) if the crash flag is set."""
        if self.holders[H_CRASHED]:
            raise cls(
                "terminating connection because of crash of another server process: "
                f"{self.crashed()}; shared memory may be inconsistent, {self.after_crash}")

    def reset_crash(self) -> None:
        """Clear the crash flag (what a restart would do; tests only)."""
        self.holders[H_CRASHED] = 0
