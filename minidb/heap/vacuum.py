"""Lazy VACUUM of one table (``vacuumlazy.c``): dead versions out, line pointers recycled.

Opportunistic pruning (``minidb.heap.prune``) frees the storage of dead versions, but the
root line pointers stay as LP_DEAD stubs, because an index entry may still name them, and
pages nobody reads are never pruned.  VACUUM finishes the job in three passes:

  1. **Scan the heap.**  Every page, through a VACUUM ring (``vacuum_ring_kb``, so VACUUM
     does not evict the pool), under a cleanup lock (``lock_for_cleanup``: waits for other
     pins to go) is pruned against the horizon taken at the start (``prune._prune``: dead
     versions removed, HOT chains shortened, hint bits set, page compacted).  The TIDs of
     all LP_DEAD items are collected, and the remaining versions counted: live (LIVE and
     DELETE_IN_PROGRESS, as PostgreSQL counts them: the deleter will report its delete),
     recently dead (not yet removable: a snapshot may see them), inserts in progress (not
     counted: the inserter reports them).
  2. **Indexes.**  Each callback of ``index_callbacks`` gets the collected TIDs as an int64
     array of (block, offset) rows and must remove every index entry that points at one
     of them (``ambulkdelete``).  A table without indexes passes none.  Callbacks are
     called only when there are dead TIDs.
  3. **Heap again.**  The pages that had LP_DEAD items are revisited and those items - and
     only those still LP_DEAD - become LP_UNUSED: only now, with no index entry left
     pointing at them, may an insert reuse the TID.  An LP_DEAD item has no storage, so
     nothing moves: an exclusive content lock suffices (as in PostgreSQL's
     ``lazy_vacuum_heap_page``), and there is nothing to compact.  Each page's free space
     goes to the free-space map.  The change is logged as a logical Heap2 VACUUM record
     (main data: the number of items; block data: their offsets, u16 each); redo
     (``redo_vacuum``, in ``recovery.LOGICAL_REDO``) makes the same items LP_UNUSED through
     the same ``_set_unused``, so the page comes out byte for byte as the primary left it.
     Pass 1's prunes log Heap2 PRUNE records (``minidb.heap.prune``).
  4. **Statistics.**  ``relpages`` / ``reltuples`` in the catalog, and ``n_live_tup`` /
     ``n_dead_tup`` (set, not adjusted) plus ``vacuum_count`` in the table statistics.

Line-pointer life cycle across pruning and VACUUM::

    NORMAL --prune: dead root / plain--> DEAD --VACUUM pass 3--> UNUSED --insert--> NORMAL
    NORMAL --prune: dead heap-only ------------------------------> UNUSED
    NORMAL --prune: root of a live chain--> REDIRECT --prune: chain dead--> DEAD

Invariants:
  1. An LP_DEAD item becomes LP_UNUSED only after every index callback returned for a TID
     set containing it (no index entry can then point at a recycled TID).
  2. One VACUUM at a time per relation (all processes): a second one gets ObjectInUse.
     Two concurrent pass-3s could otherwise recycle TIDs the other's index pass has not
     seen.
  3. VACUUM never removes a version some snapshot may still see (pruning's invariant 3).

Departures and what is left out:
  * No truncation of empty pages at the end of the file.  It would need to keep scans and
    inserts off those blocks while the file shrinks (PostgreSQL takes an
    AccessExclusiveLock on the table, conditionally): minidb has no relation-level locks
    yet, a ``HeapScan`` fixes its block count when it starts, and an insert may be
    extending the file at that moment.  Empty pages stay, are recorded in the FSM, and get
    reused by inserts.
  * No visibility map (every page is visited), no freezing (64-bit xids never wrap), no
    limit on the memory for dead TIDs (``maintenance_work_mem``: all are kept at once, 16
    bytes each, so the index pass runs once), no ``PageTruncateLinePointerArray``.
  * The horizon is computed once, at the start (PostgreSQL's OldestXmin); versions that
    become dead during the run are left for the next VACUUM or pruning.
  * An all-zero page (a backend that died between extending the file and formatting the
    page) is formatted and recorded as free: minidb extends pages with their buffer
    exclusively locked until they are formatted, so a zero page under our cleanup lock is
    abandoned, never a page being set up.
"""

from __future__ import annotations

import fcntl
import os
import struct
import sys
import threading
from dataclasses import dataclass

import numpy as np

from minidb.config import BLCKSZ
from minidb.errors import ActiveSqlTransaction, ObjectInUse
from minidb.heap import pgstat
from minidb.heap.heapam import MAX_HEAP_TUPLES_PER_PAGE, HeapRel
from minidb.heap.prune import _prune
from minidb.storage import freespace
from minidb.storage import page as pg
from minidb.storage.bufmgr import EXCLUSIVE
from minidb.storage.freelist import AccessStrategy
from minidb.storage.xloginsert import PageRecord, log_page
from minidb.wal.record import RM_HEAP2, XLOG_HEAP2_VACUUM

FSM_FLUSH_PAGES = 1024  # free-space records are written to the FSM in groups of this many
VACUUM_LOCK_FILE = "vacuum.lock"
_VACUUM_MAIN = struct.Struct("<H")  # VACUUM main data: number of items made unused


@dataclass
class VacuumResult:
    """What one VACUUM did (VACUUM VERBOSE's figures)."""
    relpages: int = 0              # pages in the table (all scanned)
    pages_scanned: int = 0
    pages_pruned: int = 0          # pages where pruning removed or redirected something
    tuples_removed: int = 0        # dead versions whose storage was freed
    redirects: int = 0             # chain roots made LP_REDIRECT
    dead_item_ids_removed: int = 0  # LP_DEAD line pointers made LP_UNUSED (pass 3)
    live_tuples: int = 0
    dead_tuples: int = 0           # recently dead: kept because a snapshot may see them
    pages_with_free_space: int = 0  # pages recorded in the FSM with at least 32 bytes
    free_bytes: int = 0            # their free space in total
    index_passes: int = 0          # index callbacks called

    def __str__(self) -> str:
        return (f"pages: {self.pages_scanned} scanned, {self.pages_pruned} pruned; tuples: "
                f"{self.tuples_removed} removed, {self.live_tuples} remain, "
                f"{self.dead_tuples} are dead but not yet removable; "
                f"{self.dead_item_ids_removed} dead item identifiers removed; "
                f"{self.pages_with_free_space} pages with {self.free_bytes} bytes free")


def vacuum_table(backend, rel: HeapRel, *, index_callbacks=()) -> VacuumResult:
    """VACUUM ``rel`` (see the module docstring); not inside a transaction block."""
    if backend.xact.in_block:
        raise ActiveSqlTransaction("VACUUM cannot run inside a transaction block")
    with _relation_vacuum_lock(backend.instance.datadir, rel):
        return _vacuum(backend, rel, list(index_callbacks))


def _vacuum(backend, rel: HeapRel, index_callbacks) -> VacuumResult:
    bm = backend.bufmgr
    rfn = rel.relfilenode
    strategy = AccessStrategy("vacuum", backend.settings.vacuum_ring_kb, bm.nbuffers)
    horizon = backend.instance.procarray.global_xmin()
    nblocks = bm.smgr.nblocks(rfn)
    res = VacuumResult(relpages=nblocks)
    fsm = _FsmBatch(bm, rfn, res)

    # -- pass 1: prune every page, collect LP_DEAD items ---------------------------------
    dead_blocks: list[np.ndarray] = []
    dead_offsets: list[np.ndarray] = []
    for block in range(nblocks):
        b = bm.pin(rfn, block, strategy=strategy)
        try:
            bm.lock_for_cleanup(b)
            try:
                page = bm.page(b)
                if pg.page_is_new(page):
                    pg.init_page(page)
                    log_page(bm, b)
                    r = None
                    avail = pg.heap_free_space(page, MAX_HEAP_TUPLES_PER_PAGE)
                else:
                    r = _prune(backend, rel, b, horizon, block=block)
                    avail = r.free_space
            finally:
                bm.unlock(b)
        finally:
            bm.unpin(b)
        res.pages_scanned += 1
        if r is None:
            fsm.add(block, avail)
            continue
        res.pages_pruned += r.changed
        res.tuples_removed += r.ndeleted
        res.redirects += r.nredirected
        res.live_tuples += r.live + r.delete_in_progress
        res.dead_tuples += r.recently_dead
        if r.dead_offsets.size:
            dead_blocks.append(np.full(r.dead_offsets.size, block, dtype=np.int64))
            dead_offsets.append(r.dead_offsets)
        else:
            fsm.add(block, avail)

    # -- pass 2: indexes ---------------------------------------------------------------------
    if dead_offsets:
        dead_tids = np.stack([np.concatenate(dead_blocks), np.concatenate(dead_offsets)],
                             axis=1)
        for cb in index_callbacks:
            cb(dead_tids)
            res.index_passes += 1

        # -- pass 3: recycle the LP_DEAD items ---------------------------------------------
        for blk_arr, offs in zip(dead_blocks, dead_offsets):
            block = int(blk_arr[0])
            b = bm.pin(rfn, block, strategy=strategy)
            try:
                bm.lock(b, EXCLUSIVE)
                try:
                    page = bm.page(b)
                    _, flags, _ = pg.line_pointer_arrays(page)
                    still = offs[flags[offs - 1] == pg.LP_DEAD]
                    if still.size:
                        offs = still.tolist()
                        _set_unused(page, offs)
                        PageRecord(bm).add(b, data=struct.pack(f"<{len(offs)}H", *offs)).log(
                            RM_HEAP2, XLOG_HEAP2_VACUUM, 0, _VACUUM_MAIN.pack(len(offs)))
                    avail = pg.heap_free_space(page, MAX_HEAP_TUPLES_PER_PAGE)
                finally:
                    bm.unlock(b)
            finally:
                bm.unpin(b)
            res.dead_item_ids_removed += int(still.size)
            fsm.add(block, avail)
    fsm.flush()

    # -- statistics ----------------------------------------------------------------------------
    inst = backend.instance
    backend.catalog.set_stats(rel.name, nblocks, res.live_tuples)
    oid = rel.oid or backend.catalog.table(rel.name).oid
    pgstat.set_live_dead(inst.seg, inst.locks.stats, oid, res.live_tuples, res.dead_tuples,
                         vacuum=True)
    if backend.settings.trace_pruning:
        print(f'[vacuum slot {bm.slot}] "{rel.name}": {res}', file=sys.stderr)
    return res


def _set_unused(page, offsets) -> None:
    """Pass 3 on one page: the LP_DEAD items at ``offsets`` become LP_UNUSED (no storage
    moves).  The primary and redo (``redo_vacuum``) both come here."""
    for off in offsets:
        pg.set_item_unused(page, off)


def redo_vacuum(page, blk, record) -> None:
    """Redo of Heap2 VACUUM (``recovery.LOGICAL_REDO``): the block data is the offsets
    made unused, u16 each (the main data their number)."""
    data = blk.data
    _set_unused(page, struct.unpack_from(f"<{len(data) // 2}H", data, 0))


class _FsmBatch:
    """Free-space records, written to the FSM in groups (no heap page locked meanwhile)."""

    def __init__(self, bm, rfn: int, res: VacuumResult):
        self.bm, self.rfn, self.res = bm, rfn, res
        self.blocks: list[int] = []
        self.avails: list[int] = []

    def add(self, block: int, avail: int) -> None:
        self.blocks.append(block)
        self.avails.append(avail)
        if avail >= freespace.FSM_CAT_STEP:
            self.res.pages_with_free_space += 1
            self.res.free_bytes += avail
        if len(self.blocks) >= FSM_FLUSH_PAGES:
            self.flush()

    def flush(self) -> None:
        if self.blocks:
            freespace.record_many(self.bm, self.rfn, np.array(self.blocks),
                                  np.array(self.avails))
            self.blocks, self.avails = [], []


# ---------------------------------------------------------------------------------------------
# one VACUUM per relation at a time
_local_locks: dict[tuple[int, str, int], threading.Lock] = {}
_local_guard = threading.Lock()


class _relation_vacuum_lock:
    """Exclusive right to VACUUM one relation: a thread lock within this process, and a
    one-byte ``fcntl`` record lock at offset relfilenode of ``DATADIR/vacuum.lock`` across
    processes (POSIX record locks belong to a process, hence both).  Never waits: a VACUUM
    already running gets ObjectInUse."""

    def __init__(self, datadir: str, rel: HeapRel):
        self.path = os.path.join(datadir, VACUUM_LOCK_FILE)
        self.rel = rel
        key = (os.getpid(), datadir, rel.relfilenode)  # a forked child gets fresh locks
        with _local_guard:
            self.tlock = _local_locks.setdefault(key, threading.Lock())
        self.fd = -1

    def _busy(self):
        return ObjectInUse(f'VACUUM of relation "{self.rel.name}" is already running in '
                           "another session")

    def __enter__(self):
        if not self.tlock.acquire(blocking=False):
            raise self._busy()
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, self.rel.relfilenode)
            except OSError:
                raise self._busy() from None
        except BaseException:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1
            self.tlock.release()
            raise
        return self

    def __exit__(self, *exc):
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, self.rel.relfilenode)
        finally:
            os.close(self.fd)
            self.fd = -1
            self.tlock.release()


assert BLCKSZ // freespace.FSM_CAT_STEP == 256
