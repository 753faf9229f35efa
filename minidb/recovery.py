"""Start-up, crash recovery and checkpoints (xlog.c StartupXLOG / CreateCheckPoint,
xlogrecovery.c, checkpointer.c, walwriter.c), at the instance level.

Opening a data directory (``start_wal``):

1. no control file: a new directory - the log starts at the second segment with a
   shutdown checkpoint record, and ``global/pg_control`` is written ("in production").  An
   existing directory without one is refused (the instance checks first: 58P01);
2. else verify the control file (version, CRC) and read the checkpoint record it names
   (an XLOG CHECKPOINT record, else "could not locate a valid checkpoint record");
3. recovery is needed if the state is not "shut down" or the checkpoint's redo point is
   before the record (an online checkpoint): the state becomes "in crash recovery" and
   every record from the redo point is replayed (``replay``) until the first invalid one
   - the end of the log.  An invalid record *before the end of the checkpoint record*
   (which was flushed before the control file named it) is damage in the middle: startup
   stops with an error naming the segment file and the LSN; a missing segment while later
   ones exist is an error too;
4. replay: page records through ``xloginsert.redo_blocks`` (images restored, deltas applied
   where the page LSN is older than the record), commit/abort records into the commit log
   (a commit with its LSN as the page's group LSN) and the relation files they list removed
   (the transaction's pending deletes), storage records (create, truncate); the next xid
   starts at the checkpoint's and moves past every xid seen - it is kept nowhere else - and
   the commit log is trimmed past it (``CommitLog.trim``); a transaction without a commit
   record stays "in progress" in the commit log, which after a restart reads as aborted
   (nothing runs);
5. the rest of the last segment after the end is zeroed (no stale record can follow the
   end), the log continues at the end, and an end-of-recovery checkpoint (shutdown type)
   makes the state "in production";
6. the instance then opens the catalog and removes every relation file no committed
   pg_class row names (``remove_orphan_files``): the files of transactions the crash ended.
   Their creation is durable at once while their Storage CREATE record may be lost, so
   replay alone cannot find them all; PostgreSQL leaves them as orphans.

Checkpoints (``checkpoint``): redo point = current insert position (published under the
insertion lock, so every later first change of a page logs an image) -> wait until no
backend is between its commit record and its commit-log update or inside a hint-bit image
decision (``proc_delay_chkpt``) -> write every dirty buffer (WAL flushed first for each, by
the buffer manager) -> write and fsync the commit log's dirty pages (``flush_all``, WAL
first for each) -> fsync every relation file -> insert and flush
the checkpoint record -> write the control file (atomically) -> delete the segments before
the redo point's.  Triggers: ``checkpoint_timeout`` (only if WAL was written since the last
one), half of ``max_wal_size`` written since the redo point, ``CHECKPOINT``, clean close,
end of recovery.

Spread checkpoints: the checkpointer's own checkpoints (timed, WAL volume) pace their
buffer writes (``_CheckpointPacer``: PostgreSQL's CheckpointWriteDelay): after each buffer,
if the share written times ``checkpoint_completion_target`` is ahead of both the share of
``checkpoint_timeout`` elapsed and the share of max_wal_size / 2 of WAL written since the
redo point, it sleeps (100 ms at most at a time, flushing the WAL for asynchronous commits
meanwhile).  CHECKPOINT, shutdown and end-of-recovery checkpoints are immediate; one of
them requested while a paced one runs (``WAL_CKPT_IMMEDIATE``) makes that one finish
without waiting, as PostgreSQL's CHECKPOINT_IMMEDIATE request does.  The result
(``Instance.last_checkpoint``) counts ``delays`` and ``delay_s``.

The background thread (``Background``) of the opening process plays the WAL writer
(flush every ``wal_writer_delay`` what asynchronous commits left unflushed) and the
checkpointer.  Departure: PostgreSQL runs both as processes; here they are one thread of
the process that opened the directory (the postmaster's part), which shares its file
layer with the tests.
"""

from __future__ import annotations

import os
import struct
import sys
import threading
import time

import minidb.fileio as fileio
import minidb.heap.prune as heap_prune
import minidb.heap.vacuum as heap_vacuum
from minidb.errors import OperationalError
from minidb.heap import redo as heap_redo
from minidb.index import redo as index_redo
from minidb.shmem import CTL_LATEST_COMPLETED, CTL_NEXT_OID, CTL_NEXT_XID
from minidb.storage.bufmgr import BufferManager
from minidb.storage.xloginsert import SMGR_CREATE, SMGR_TRUNCATE, redo_blocks
from minidb.txn.clog import ABORTED, COMMITTED, IN_PROGRESS, SUB_COMMITTED
from minidb.txn.xact import XACT, unpack_xact  # noqa: F401 (XACT: the layout, for tests)
from minidb.wal import control as ctlfile
from minidb.wal import record as rec
from minidb.wal.reader import EndOfWal, MissingSegment, WalReader
from minidb.wal.xlog import (WAL_CKPT_IMMEDIATE, WAL_CKPT_REQUEST, WAL_RECOVERY, SharedWAL,
                             first_lsn)

CHECKPOINT = struct.Struct("<QQQBd")   # redo, next_xid, next_oid, full_page_writes, time


class StartupError(OperationalError):
    pass


# -- start-up -------------------------------------------------------------------------------------

def start_wal(inst, new: bool = True) -> SharedWAL:
    """Open (or create) the log of ``inst`` and recover if needed (see the docstring).  A
    directory that is not ``new`` must have its control file (the instance checks)."""
    cd = ctlfile.read_control(inst.datadir)
    if cd is None:
        if not new:
            raise StartupError(f'could not open file "{ctlfile.control_path(inst.datadir)}": '
                               "No such file or directory", sqlstate="58P01")
        segsize = inst.settings.wal_segment_size
        wal = SharedWAL(inst.datadir, inst.seg, inst.locks, inst.settings, segsize)
        inst.wal_shared = wal
        start = first_lsn(segsize)
        wal.start_at(start, 0, start)
        cd = ctlfile.ControlData(system_identifier=ctlfile.new_system_identifier(),
                                 wal_segment_size=segsize)
        inst.control = cd
        checkpoint(inst, shutdown=True, state=ctlfile.DB_IN_PRODUCTION)
        return wal
    inst.control = cd
    wal = SharedWAL(inst.datadir, inst.seg, inst.locks, inst.settings, cd.wal_segment_size)
    inst.wal_shared = wal
    reader = WalReader(inst.datadir, cd.wal_segment_size)
    try:
        ck = reader.read(cd.checkpoint, None)
    except (EndOfWal, MissingSegment) as e:
        raise StartupError(f"could not locate a valid checkpoint record at "
                           f"{rec.format_lsn(cd.checkpoint)} in file "
                           f'"{reader.segment_of(cd.checkpoint)}": {e}') from None
    if ck.rmid != rec.RM_XLOG or ck.info not in (rec.XLOG_CHECKPOINT_SHUTDOWN,
                                                  rec.XLOG_CHECKPOINT_ONLINE):
        raise StartupError(f"invalid checkpoint record at {rec.format_lsn(cd.checkpoint)}")
    redo, next_xid, next_oid, _fpw, _t = CHECKPOINT.unpack_from(ck.main, 0)
    _advance_xid(inst, next_xid - 1)
    _advance_oid(inst, next_oid)
    if cd.state == ctlfile.DB_SHUTDOWNED and redo == ck.lsn:
        wal.start_at(ck.end, ck.lsn, redo)
        inst.clog.trim(int(inst.seg.control[CTL_NEXT_XID]))
        cd.state = ctlfile.DB_IN_PRODUCTION
        ctlfile.write_control(inst.datadir, cd, sync=inst.settings.fsync)
        return wal
    _recover(inst, wal, reader, cd, ck, redo)
    return wal


def _advance_xid(inst, xid: int) -> None:
    c = inst.seg.control
    if xid + 1 > c[CTL_NEXT_XID]:
        c[CTL_NEXT_XID] = xid + 1
        c[CTL_LATEST_COMPLETED] = xid


def _advance_oid(inst, next_oid: int) -> None:
    """The OID counter is not before a checkpoint's NextOID (the catalog moves it on past
    every OID and file it finds when it opens)."""
    c = inst.seg.control
    if next_oid > c[CTL_NEXT_OID]:
        c[CTL_NEXT_OID] = next_oid


def _recover(inst, wal: SharedWAL, reader: WalReader, cd, ck, redo: int) -> None:
    verbose = inst.settings.trace_recovery
    cd.state = ctlfile.DB_IN_CRASH_RECOVERY
    ctlfile.write_control(inst.datadir, cd, sync=inst.settings.fsync)
    wal.ctl[WAL_RECOVERY] = 1
    slot = inst._claim_slot("aux")
    bm = BufferManager(inst.seg, inst.locks, inst.smgr, inst.settings, slot,
                       describe_rel=inst.describe_rel, wal=None)
    stats = inst.recovery_stats = {"records": 0, "redo_start": redo, "redo_end": 0,
                                   "stop_reason": "", "max_xid": 0, "invalid_pages": 0}
    invalid: dict = {}
    try:
        max_xid = 0
        t0 = time.monotonic()
        try:
            for r in reader.records(redo):
                if r.xid > max_xid:
                    max_xid = r.xid
                replay(inst, bm, r, invalid)
                stats["records"] += 1
                if verbose and stats["records"] % 10000 == 0:
                    print(f"redo in progress at {rec.format_lsn(r.lsn)} "
                          f"({stats['records']} records, {time.monotonic() - t0:.1f} s)",
                          file=sys.stderr)
        except MissingSegment as e:
            raise StartupError(str(e)) from None
        end, last = reader.end, reader.last
        stats["stop_reason"] = reader.stop_reason
        if end < ck.end:
            raise StartupError(
                f"WAL is damaged before the end of the last checkpoint record: "
                f"{reader.stop_reason} (file \"{reader.segment_of(end)}\", LSN "
                f"{rec.format_lsn(end)}); replay cannot go on without losing committed work")
        stats["redo_end"] = end
        stats["max_xid"] = max_xid
        stats["invalid_pages"] = len(invalid)
        _advance_xid(inst, max_xid)
        inst.clog.trim(int(inst.seg.control[CTL_NEXT_XID]))
        bm.flush_buffers()
    finally:
        bm.release_all()
        inst._free_slot(slot)
        wal.ctl[WAL_RECOVERY] = 0
    _zero_tail(wal, end)
    wal.start_at(end, last, redo)
    if verbose:
        print(f"redo done at {rec.format_lsn(last)}: {stats['records']} records; "
              f"{reader.stop_reason}", file=sys.stderr)
    checkpoint(inst, shutdown=True, state=ctlfile.DB_IN_PRODUCTION)


def _zero_tail(wal: SharedWAL, end: int) -> None:
    segno = end // wal.segsize
    path = wal.segment_path(segno)
    if not os.path.exists(path):
        return
    fd = fileio.open(path, os.O_RDWR)
    try:
        off = end - segno * wal.segsize
        size = fileio.size(fd)
        if off < size:
            fileio.pwrite(fd, bytes(size - off), off)
            if wal.fsync:
                fileio.fsync(fd)
    finally:
        fileio.close(fd)
    # segments after the end are stale (written before the crash, never reached)
    for s in range(segno + 1, segno + 1 + 1024):
        p = wal.segment_path(s)
        if not os.path.exists(p):
            break
        fileio.unlink(p)


# Redo routines of records whose blocks carry logical data (``PageRecord.add(b, data=)``),
# by (resource manager, opcode): ``fn(page, blk, record)`` changes the page (a uint8 array)
# as the operation changed it; the page's LSN is checked and set by ``redo_block``.
# Heap INSERT, DELETE, LOCK, UPDATE, HOT_UPDATE: minidb.heap.redo; Btree INSERT_LEAF:
# minidb.index.redo.
LOGICAL_REDO: dict = {}
LOGICAL_REDO.update(heap_redo.redo_routines())
LOGICAL_REDO.update(index_redo.redo_routines())
LOGICAL_REDO[(rec.RM_HEAP2, rec.XLOG_HEAP2_PRUNE)] = heap_prune.redo_prune
LOGICAL_REDO[(rec.RM_HEAP2, rec.XLOG_HEAP2_VACUUM)] = heap_vacuum.redo_vacuum


def replay(inst, bm, r: rec.Record, invalid: dict) -> None:
    """Apply one record (the resource managers' redo routines)."""
    rmid = r.rmid
    if rmid in (rec.RM_HEAP, rec.RM_HEAP2, rec.RM_BTREE, rec.RM_SEQ):
        redo_blocks(bm, r, invalid, LOGICAL_REDO.get((rmid, rec.opcode(rmid, r.info))))
    elif rmid == rec.RM_XLOG:
        if r.info in (rec.XLOG_FPI, rec.XLOG_FPI_FOR_HINT):
            redo_blocks(bm, r, invalid)
        elif r.info in (rec.XLOG_CHECKPOINT_ONLINE, rec.XLOG_CHECKPOINT_SHUTDOWN):
            _redo, next_xid, next_oid, _fpw, _t = CHECKPOINT.unpack_from(r.main, 0)
            _advance_xid(inst, next_xid - 1)
            _advance_oid(inst, next_oid)
    elif rmid == rec.RM_XACT:
        _when, rels, subxids = unpack_xact(r.main)
        op = r.info & 0x70
        clog = inst.clog
        if subxids:   # the subtransactions end with the record's xid (their tree)
            _advance_xid(inst, max(subxids))
            status, lsn = ((COMMITTED, r.end) if op == rec.XLOG_XACT_COMMIT else (ABORTED, 0))
            todo = [x for x in subxids if clog.status(x) in (IN_PROGRESS, SUB_COMMITTED)]
            if clog.status(r.xid) == IN_PROGRESS:
                clog.set_tree(r.xid, todo, status, lsn=lsn)
            else:   # the top-level page reached the disk, another page did not
                for x in todo:
                    clog.set_status(x, status, lsn=lsn)
        elif op == rec.XLOG_XACT_COMMIT:
            if clog.status(r.xid) == IN_PROGRESS:
                clog.set_status(r.xid, COMMITTED, lsn=r.end)
        elif op == rec.XLOG_XACT_ABORT:
            if clog.status(r.xid) == IN_PROGRESS:
                clog.set_status(r.xid, ABORTED)
        for rfn in rels:  # the transaction's pending deletes (DropRelationFiles)
            bm.drop_relation_buffers(rfn)
            inst.smgr.unlink(rfn)
            for k in [k for k in invalid if k[0] == rfn]:
                del invalid[k]
    elif rmid == rec.RM_CLOG:
        _redo_clog(inst, r)
    elif rmid == rec.RM_SMGR:
        if r.info == rec.XLOG_SMGR_CREATE:
            rfn, fork = SMGR_CREATE.unpack_from(r.main, 0)
            if not inst.smgr.exists(rfn, fork):
                inst.smgr.create(rfn, fork)
        elif r.info == rec.XLOG_SMGR_TRUNCATE:
            rfn, fork, nblocks = SMGR_TRUNCATE.unpack_from(r.main, 0)
            if inst.smgr.exists(rfn, fork):
                bm.drop_relation_buffers(rfn, nblocks, fork)
                inst.smgr.truncate(rfn, fork, nblocks)
            for k in [k for k in invalid if k[0] == rfn and k[2] >= nblocks]:
                del invalid[k]


def _redo_clog(inst, r: rec.Record) -> None:
    """The commit log's records: ZEROPAGE zeroes the page in a buffer (its later statuses
    are replayed from their commit and abort records); TRUNCATE removes the segments
    before the page it names."""
    from minidb.txn.clog import CLOG_PAGE, CLOG_TRUNC
    if r.info == rec.CLOG_ZEROPAGE:
        inst.clog.zero_page(CLOG_PAGE.unpack_from(r.main, 0)[0])
    elif r.info == rec.CLOG_TRUNCATE:
        _page, oldest_xid = CLOG_TRUNC.unpack_from(r.main, 0)
        inst.clog.truncate_before(oldest_xid)


def remove_orphan_files(inst) -> list[int]:
    """After crash recovery: remove every relation file no committed pg_class row names -
    the files of transactions the crash ended (created, then neither committed nor rolled
    back).  Returns the relfilenodes removed.  Departure: PostgreSQL leaves such files
    behind as orphans; minidb's catalog checker treats an orphan as a problem."""
    from minidb.catalog.cache import temp_backend
    from minidb.catalog.check import named_relfilenodes, relation_files
    from minidb.catalog.storage import drop_relation_storage
    removed = []
    with temp_backend(inst) as b:
        named = named_relfilenodes(b)
        for rfn in sorted(relation_files(b, forks=True) - named):
            drop_relation_storage(b, rfn)
            removed.append(rfn)
        b.xact.commit()
    inst.recovery_stats["orphans_removed"] = removed
    return removed


# -- checkpoints -----------------------------------------------------------------------------------

def checkpoint(inst, shutdown: bool = False, state: int | None = None,
               paced: bool = False, stop: threading.Event | None = None) -> dict:
    """Create a checkpoint (see the module docstring); returns what it did.  ``paced``
    (the checkpointer's timed and WAL-triggered checkpoints) spreads the buffer writes
    over ``checkpoint_completion_target`` (``_CheckpointPacer``); any other checkpoint is
    immediate and tells a paced one that is running to stop waiting."""
    wal = inst.wal_shared
    if not paced:
        wal.ctl[WAL_CKPT_IMMEDIATE] += 1
    try:
        with inst._ckpt_lock:
            return _checkpoint(inst, shutdown, state, paced, stop)
    finally:
        if not paced:
            wal.ctl[WAL_CKPT_IMMEDIATE] -= 1


class _CheckpointPacer:
    """CheckpointWriteDelay / IsCheckpointOnSchedule: after each buffer written, the
    checkpoint's progress (buffers written / buffers to write, times
    ``checkpoint_completion_target``) is compared with the time elapsed as a fraction of
    ``checkpoint_timeout`` and with the WAL written since the redo point as a fraction of
    max_wal_size / 2 (the volume that requests the next checkpoint); while the progress is
    ahead of both, the checkpointer sleeps (at most 100 ms at a time, doing the WAL
    writer's flushes meanwhile).  It stops waiting for good when an immediate checkpoint is
    requested (``WAL_CKPT_IMMEDIATE``: CHECKPOINT, shutdown), the background thread is
    stopped, or the instance crashed.  Counts: ``delays`` (sleeps), ``delay_s``."""

    def __init__(self, inst, redo: int, t0: float, stop):
        s = inst.settings
        self.inst, self.wal, self.redo, self.t0, self.stop = inst, inst.wal_shared, redo, t0, stop
        self.target = float(s.checkpoint_completion_target)
        self.timeout = float(s.checkpoint_timeout)
        self.wal_budget = max(1, s.max_wal_size * (1 << 20) // 2)
        self.flush_every = s.wal_writer_delay / 1000.0
        self.delays = 0
        self.delay_s = 0.0
        self.immediate = False

    def _interrupted(self) -> bool:
        if (self.wal.ctl[WAL_CKPT_IMMEDIATE] > 0 or self.inst.locks.crashed()
                or (self.stop is not None and self.stop.is_set())):
            self.immediate = True
        return self.immediate

    def behind(self, progress: float) -> float:
        """Seconds to wait before the next write (0: behind schedule, write now)."""
        elapsed = (time.monotonic() - self.t0) / self.timeout
        wal_used = (self.wal.insert_lsn() - self.redo) / self.wal_budget
        ahead = progress - max(elapsed, wal_used)
        return max(0.0, ahead * self.timeout) if ahead > 0 else 0.0

    def __call__(self, done: int, total: int) -> None:
        if self.target <= 0 or self.immediate:
            return
        progress = done / total * self.target
        last_flush = time.monotonic()
        while not self._interrupted():
            wait = self.behind(progress)
            if wait <= 0:
                return
            nap = min(0.1, wait)
            time.sleep(nap)
            self.delays += 1
            self.delay_s += nap
            if time.monotonic() - last_flush >= self.flush_every:
                self.wal.background_flush()   # the WAL writer's work, meanwhile
                last_flush = time.monotonic()


def _checkpoint(inst, shutdown: bool, state: int | None, paced: bool = False,
                stop=None) -> dict:
    wal = inst.wal_shared
    seg = inst.seg
    t0 = time.monotonic()
    redo = wal.begin_checkpoint()
    pacer = _CheckpointPacer(inst, redo, t0, stop) if paced else None
    deadline = time.monotonic() + 60
    while seg.proc_delay_chkpt.any():
        inst.locks.check_crash()  # a backend died in its critical section: no checkpoint
        if time.monotonic() > deadline:
            raise OperationalError("checkpoint waited 60 s for a backend's delay_chkpt")
        time.sleep(0.001)
    slot = inst._claim_slot("aux")
    try:
        handle = wal.handle(slot)
        bm = BufferManager(seg, inst.locks, inst.smgr, inst.settings, slot,
                           describe_rel=inst.describe_rel, wal=handle)
        try:
            written = bm.flush_buffers(pace=pacer)
        finally:
            bm.release_all()
        inst.clog.flush_all()  # CheckPointCLOG: WAL flushed first, page by page
        synced = _fsync_relation_files(inst)
        next_xid = int(seg.control[CTL_NEXT_XID])
        next_oid = int(seg.control[CTL_NEXT_OID])
        info = rec.XLOG_CHECKPOINT_SHUTDOWN if shutdown else rec.XLOG_CHECKPOINT_ONLINE
        end = handle.insert(rec.RM_XLOG, info, 0,
                            CHECKPOINT.pack(redo, next_xid, next_oid,
                                            int(inst.settings.full_page_writes), time.time()))
        start = handle.last_start
        handle.flush(end)
    finally:
        inst._free_slot(slot)
    cd = inst.control
    cd.checkpoint = start
    cd.redo = redo
    cd.next_xid = next_xid
    cd.next_oid = next_oid
    cd.full_page_writes = int(inst.settings.full_page_writes)
    cd.checkpoint_time = time.time()
    if state is not None:
        cd.state = state
    elif shutdown:
        cd.state = ctlfile.DB_SHUTDOWNED
    else:
        cd.state = ctlfile.DB_IN_PRODUCTION
    ctlfile.write_control(inst.datadir, cd, sync=inst.settings.fsync)
    removed = wal.remove_segments_before(redo)
    inst.last_checkpoint = {"redo": redo, "lsn": start, "buffers_written": written,
                            "files_synced": synced, "segments_removed": removed,
                            "shutdown": shutdown, "seconds": time.monotonic() - t0,
                            "paced": paced, "delays": pacer.delays if pacer else 0,
                            "delay_s": pacer.delay_s if pacer else 0.0,
                            "immediate_requested": bool(pacer and pacer.immediate)}
    inst.checkpoints_done += 1
    return inst.last_checkpoint


def _fsync_relation_files(inst) -> int:
    """fsync every relation file (any fd of a file syncs the pages any process wrote)."""
    if not inst.settings.fsync:
        return 0
    base = inst.smgr.base
    n = 0
    for name in sorted(os.listdir(base)):
        path = os.path.join(base, name)
        try:
            fd = fileio.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            fileio.fsync(fd)
            n += 1
        finally:
            fileio.close(fd)
    return n


# -- the background thread ----------------------------------------------------------------------

class Background(threading.Thread):
    """WAL writer and checkpointer of an instance: a thread of its opening process, or
    (``minidb serve``) the main loop of a process of its own, which calls ``run`` directly;
    either way the process that made it runs it."""

    def __init__(self, inst):
        super().__init__(name="minidb-walwriter-checkpointer", daemon=True)
        self.inst = inst
        self.pid = os.getpid()
        self.stop_event = threading.Event()
        self.last_checkpoint_time = time.monotonic()
        self.last_checkpoint_insert = -1
        self.error: BaseException | None = None

    def run(self) -> None:
        inst = self.inst
        wal = inst.wal_shared
        delay = inst.settings.wal_writer_delay / 1000.0
        while not self.stop_event.wait(delay):
            if os.getpid() != self.pid:
                return  # pragma: no cover
            if inst.locks.crashed():
                continue  # nothing is trusted until the directory is reopened (recovery)
            try:
                wal.background_flush()
                now = time.monotonic()
                timed = now - self.last_checkpoint_time >= inst.settings.checkpoint_timeout
                if wal.ctl[WAL_CKPT_REQUEST] or (
                        timed and wal.insert_lsn() != self.last_checkpoint_insert):
                    checkpoint(inst, paced=True, stop=self.stop_event)
                    self.last_checkpoint_time = time.monotonic()
                    self.last_checkpoint_insert = wal.insert_lsn()
                elif timed:
                    self.last_checkpoint_time = now
            except fileio.SimulatedCrash:
                return
            except OperationalError as e:  # a full or failing disk: try again later
                self.error = e
                self.last_checkpoint_time = time.monotonic()
            except BaseException as e:  # pragma: no cover - reported at close
                self.error = e
                return

    def stop(self) -> None:
        self.stop_event.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout=30)


