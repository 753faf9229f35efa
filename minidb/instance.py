"""The instance: one open data directory, its shared memory and its backends.

Opening a data directory plays the postmaster's part:

1. create the directory if it is new, with a ``MINIDB_VERSION`` file; refuse a directory
   written by another format version;
2. take an exclusive ``fcntl`` lock on ``postmaster.pid`` and write our pid into it.  A
   second, independent process gets ``DatabaseInUse`` naming the holder's pid.  The kernel
   drops the lock when its holder dies, so a lock left by a killed process is simply taken
   over (the pid in the file is then stale and is overwritten);
3. map the shared segment and create every cross-process lock (``minidb.shmem``) - before
   any fork - then set up the I/O model (``io_model``) and fork the parallel worker pool's
   master process (``minidb.workers.pool``), before the reaper thread starts;
4. hand out *backends*: a ``Backend`` is one session's slot in the shared arrays, with its
   own buffer-manager handle and session settings.  Backends work from any thread of the
   process that opened the instance, and from processes forked from it (benchmark clients,
   parallel workers), which inherit the segment and the locks;
5. the write-ahead log is opened (``minidb.recovery.start_wal``: crash recovery if the last
   run did not shut down cleanly) before the pool is forked, and a background thread plays
   the WAL writer and the checkpointer;
6. ``close()`` (in the opening process) takes a shutdown checkpoint (every dirty buffer
   written, files fsynced, checkpoint record, control file) and releases the lock.  A crash
   of the opening process loses nothing that committed (minidb/wal/README.md).

Invariants:
  1. At most one process at a time has a data directory open (the fcntl lock).
  2. ``proc_pid[slot] != 0`` iff the slot belongs to a live ``Backend`` (or to a backend of
     a process that died, until ``reap_dead_backends`` frees it).
"""

from __future__ import annotations

import atexit
import fcntl
import os
import threading

import numpy as np

from minidb.catalog import Catalog
from minidb.config import SETTINGS, Settings
from minidb.errors import (CantChangeParameter, DatabaseInUse, InterfaceError, OperationalError,
                           TooManyConnections)
from minidb.shmem import COUNTERS, IO_COUNTERS, SharedLocks, Segment, n_slots
from minidb.storage.bufmgr import BufferManager
from minidb.storage.iomodel import IOModel
from minidb.storage.smgr import Smgr
from minidb.heap.pgstat import TableStats
from minidb.recovery import Background, checkpoint, start_wal
from minidb.txn.clog import CommitLog
from minidb.txn.procarray import ProcArray
from minidb.txn.xact import Transaction

REAPER_INTERVAL_S = 0.1

# data directories this process holds the lock of: (st_dev, st_ino) -> pid (a forked
# child inherits the dict, but not the locks: the pid tells them apart)
_HELD_DIRS: dict[tuple[int, int], int] = {}
_HELD_LOCK = threading.Lock()

FORMAT_VERSION = "minidb 2"  # 2: the write-ahead log and 64-bit page LSNs
VERSION_FILE = "MINIDB_VERSION"
LOCK_FILE = "postmaster.pid"


class Instance:
    """An open data directory (see the module docstring)."""

    def __init__(self, datadir: str, **settings):
        self.datadir = os.path.abspath(datadir)
        self.settings = Settings(settings)
        self.settings.freeze_instance_settings()
        self._prepare_directory()
        self._lock_fd = self._take_lock()
        try:
            self.seg = Segment(self.settings)
            self.locks = SharedLocks(self.settings)
            self.smgr = Smgr(self.datadir)
            self.catalog = Catalog(self.datadir, self.locks.catalog, self.seg.control, self.smgr)
            self.clog = CommitLog(self.datadir, self.locks.clog)
            self.procarray = ProcArray(self.datadir, self.seg, self.locks, self.clog)
            self.procarray._on_wait_tick = self.reap_dead_backends
            self._ckpt_lock = threading.Lock()
            self.checkpoints_done = 0
            self.last_checkpoint: dict = {}
            self.recovery_stats: dict = {}
            self.wal_shared = start_wal(self)  # crash recovery, if the last run crashed
            self.wal = self.wal_shared.handle(n_slots(self.settings) + 1)
        except BaseException:
            self._release_lock()
            raise
        self.owner_pid = os.getpid()
        self._closed = False
        self._local = threading.Lock()
        self._backends: set[Backend] = set()
        self.reaped: list[tuple[int, int, int]] = []  # (slot, pid, aborted xid) - for tests
        self._stop = threading.Event()
        # The I/O model (io_model) beneath every relation read, and the parallel worker
        # pool (minidb.workers.pool): its master process is forked here, after the segment,
        # the locks and the channels exist and BEFORE the reaper thread starts (a process
        # with threads must not fork).  No pool at all when max_worker_processes is 0.
        self.iomodel = (IOModel(self.seg, self.locks.iomodel, self.settings)
                        if self.settings.io_model != "none" else None)
        self.smgr.iomodel = self.iomodel
        self.pool = None
        if self.settings.max_worker_processes > 0:
            from minidb.workers.pool import WorkerPool  # the executor layer starts here
            try:
                self.pool = WorkerPool(self)
                self.pool.start()
            except BaseException:
                self._release_lock()
                raise
        self._reaper = threading.Thread(target=self._reaper_loop, name="minidb-reaper",
                                        daemon=True)
        self._reaper.start()
        self._background = Background(self)
        self._background.start()

    # -- data directory and its lock ----------------------------------------------------------
    def _prepare_directory(self) -> None:
        vpath = os.path.join(self.datadir, VERSION_FILE)
        if os.path.exists(self.datadir) and not os.path.isdir(self.datadir):
            raise OperationalError(
                f'"{self.datadir}" is a file, not a data directory: give a directory '
                f"(created if new)")
        if not os.path.exists(self.datadir):
            os.makedirs(self.datadir)
        if os.path.exists(vpath):
            with open(vpath) as f:
                found = f.read().strip()
            if found != FORMAT_VERSION:
                hint = (" (its pages have 32-bit change counters and it has no write-ahead "
                        "log; dump it with the older minidb and load it into a new "
                        "directory)") if found == "minidb 1" else ""
                raise OperationalError(
                    f'data directory "{self.datadir}" was written by "{found}", '
                    f'this is "{FORMAT_VERSION}"{hint}')
        else:
            if os.listdir(self.datadir):
                raise OperationalError(
                    f'directory "{self.datadir}" exists, is not empty and is not a minidb '
                    f"data directory (no {VERSION_FILE})")
            tmp = vpath + ".tmp"
            with open(tmp, "w") as f:
                f.write(FORMAT_VERSION + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, vpath)

    def _take_lock(self) -> int:
        # fcntl locks belong to the process: a second lockf from this process would succeed,
        # and closing any descriptor of the file would drop the first instance's lock.  So
        # the directories this process holds are also remembered here, and checked first.
        st = os.stat(self.datadir)
        key = (st.st_dev, st.st_ino)
        with _HELD_LOCK:
            if _HELD_DIRS.get(key) == os.getpid():
                raise DatabaseInUse(f'database "{self.datadir}" is already open in this '
                                    f"process (pid {os.getpid()}): close the connection "
                                    f"that holds it first, or open a different data "
                                    f"directory")
            path = os.path.join(self.datadir, LOCK_FILE)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                try:
                    holder = os.pread(fd, 64, 0).decode(errors="replace").split()[0]
                except (OSError, IndexError):
                    holder = "unknown"
                os.close(fd)
                raise DatabaseInUse(
                    f'database "{self.datadir}" is in use by pid {holder}: close the other '
                    f"process (pid {holder}), or open a different data directory") from None
            _HELD_DIRS[key] = os.getpid()
        self._lock_key = key
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n{self.datadir}\n".encode(), 0)
        return fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            try:
                os.ftruncate(self._lock_fd, 0)
                fcntl.lockf(self._lock_fd, fcntl.LOCK_UN)
            finally:
                os.close(self._lock_fd)
                self._lock_fd = None
                with _HELD_LOCK:
                    _HELD_DIRS.pop(self._lock_key, None)

    # -- backends ----------------------------------------------------------------------------
    def connect(self, *, worker: bool = False, aux: bool = False,
                **session_settings) -> "Backend":
        """A new backend (session) with its own slot; ``worker`` and ``aux`` (the
        checkpointer) use their reserved slots."""
        if self._closed:
            raise InterfaceError("the instance is closed")
        settings = self.settings.copy()
        for k, v in session_settings.items():
            settings.set(k, v)
        slot = self._claim_slot("aux" if aux else "worker" if worker else "connection")
        b = Backend(self, slot, settings)
        with self._local:
            self._backends.add(b)
        return b

    def _claim_slot(self, kind: str) -> int:
        nconn = self.settings.max_connections
        nwork = nconn + self.settings.max_worker_processes
        rng = {"connection": range(nconn), "worker": range(nconn, nwork),
               "aux": range(nwork, n_slots(self.settings))}[kind]
        with self.locks.proc:
            for s in rng:
                if self.seg.proc_pid[s] == 0:
                    self.seg.proc_pid[s] = os.getpid()
                    self.seg.stats[s] = 0
                    self.seg.backend_pins[s] = 0
                    self.seg.backend_locks[s] = 0
                    return s
        raise TooManyConnections(f"sorry, too many clients already (all {len(rng)} {kind} "
                                 "slots are in use)")

    def _free_slot(self, slot: int) -> None:
        with self.locks.proc:
            self.seg.stats[-1] += self.seg.stats[slot]
            self.seg.stats[slot] = 0
            self.seg.proc_pid[slot] = 0

    # -- backends whose process died ------------------------------------------------------------
    def _reaper_loop(self) -> None:
        while not self._stop.wait(REAPER_INTERVAL_S):
            if os.getpid() != self.owner_pid:
                return  # pragma: no cover - threads do not survive fork, but be safe
            try:
                self.reap_dead_backends()
            except Exception:  # pragma: no cover - the reaper must never die
                pass

    def reap_dead_backends(self) -> list[int]:
        """Free the slots of backends whose process has died (PostgreSQL's postmaster does
        this on SIGCHLD): abort their transaction, release their pins and content locks,
        wake everyone waiting on them.  Returns the slots freed."""
        if self._closed:
            return []
        pids = self.seg.proc_pid
        freed = []
        for slot in np.flatnonzero(pids != 0).tolist():
            pid = int(pids[slot])
            if pid == os.getpid() or _process_alive(pid):
                continue
            with self.locks.proc:
                if int(pids[slot]) != pid:
                    continue  # freed meanwhile
                pids[slot] = -pid  # claimed by this reaper
            xid = self.procarray.abort_dead_slot(slot)
            BufferManager(self.seg, self.locks, self.smgr, self.settings, slot,
                          describe_rel=self.describe_rel).release_all()
            self._free_slot(slot)
            self.reaped.append((slot, pid, xid))
            freed.append(slot)
        return freed

    def counters(self) -> dict[str, int]:
        """Statistics summed over every backend, live and exited."""
        total = self.seg.stats.sum(axis=0)
        return {name: int(total[i]) for i, name in enumerate(COUNTERS)}

    def io_counters(self) -> dict[str, int]:
        """The I/O model's exact counters, summed over all processes since open (all zero
        when io_model is none; see minidb.storage.iomodel)."""
        if self.iomodel is None:
            return {name: 0 for name in IO_COUNTERS}
        return self.iomodel.counters()

    def drop_os_cache(self) -> None:
        """Empty the simulated OS page cache, for cold runs (no-op when io_model is none)."""
        if self.iomodel is not None:
            self.iomodel.drop_cache()

    def checkpoint(self, shutdown: bool = False) -> int:
        """CHECKPOINT (minidb.recovery.checkpoint): every dirty buffer written, relation
        files fsynced, a checkpoint record, the control file; returns pages written."""
        return checkpoint(self, shutdown=shutdown)["buffers_written"]

    def wal_stats(self) -> dict[str, int]:
        """pg_stat_wal's counters since the instance opened."""
        return self.wal_shared.stats()

    def describe_rel(self, rfn: int) -> str:
        name = self.catalog.name_of_relfilenode(rfn)
        return f'"{name}" (file base/{rfn})' if name else f"base/{rfn}"

    def close(self) -> None:
        if self._closed:
            return
        me = os.getpid()
        for b in list(self._backends):
            if b.pid == me:  # a forked child inherits its parent's list: not its backends
                b.close()
        if me != self.owner_pid:
            self._closed = True  # a forked child leaves the instance to its owner
            return
        if self.pool is not None:
            self.pool.stop()  # the workers close their backends; nothing is left running
        self._stop.set()
        self._background.stop()
        try:
            self.checkpoint(shutdown=True)
        finally:
            self._closed = True
            self.wal_shared.close_files()
            self.clog.close()
            self.smgr.close()
            self._release_lock()
            self.seg.close()

    def crash_abandon(self) -> None:
        """For crash tests: drop the instance as a power loss or ``kill -9`` would - no
        checkpoint, no buffer written, the WAL left as it is - and free this process's
        hold on the directory so that it can be opened (and recovered) again."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._background.stop_event.set()
        if self.pool is not None:
            try:
                self.pool.stop()
            except BaseException:
                pass
        for fn in (self.wal_shared.close_files, self.smgr.close, self.clog.close):
            try:
                fn()
            except BaseException:
                pass
        self._release_lock()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Backend:
    """One session's slot: its buffer-manager handle and its settings."""

    def __init__(self, instance: Instance, slot: int, settings: Settings):
        self.instance = instance
        self.slot = slot
        self.settings = settings
        self.pid = os.getpid()
        self.wal = instance.wal_shared.handle(slot)
        self.bufmgr = BufferManager(instance.seg, instance.locks, instance.smgr, settings,
                                    slot, describe_rel=instance.describe_rel, wal=self.wal)
        self.pgstat = TableStats(instance.seg, instance.locks.stats)
        # relfilenode -> the heap block this backend inserted into last (rd_targblock)
        self.heap_targets: dict[int, int] = {}
        self.xact = Transaction(instance.procarray, slot, settings, on_end=self.pgstat.flush)
        self.xact.wal = self.wal
        self.closed = False

    @property
    def catalog(self) -> Catalog:
        return self.instance.catalog

    def counters(self) -> dict[str, int]:
        return self.bufmgr.counters()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.xact.rollback()
        finally:
            self.bufmgr.release_all()
        self.instance._free_slot(self.slot)
        with self.instance._local:
            self.instance._backends.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _process_alive(pid: int) -> bool:
    """True unless process ``pid`` is gone or a zombie (reading /proc does not reap it, so
    whoever forked it still gets its exit status)."""
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


# ---------------------------------------------------------------------------------------------
# One Instance per data directory per process, shared by the DB-API's connections.
#
# ``minidb.connect(path)`` may be called many times in one process (from threads, or one after
# another); each connection is one backend of the same Instance.  The first connection opens
# the instance (with the instance settings it was given), the last one to close closes it
# (checkpoint, lock released).  Instances still open when the interpreter exits are closed by
# an atexit hook, so committed work of a program that forgot ``close()`` reaches the disk.

_SHARED: dict[str, list] = {}  # realpath of the data directory -> [Instance, references]
_SHARED_LOCK = threading.Lock()


def acquire_shared(datadir: str, **instance_settings) -> Instance:
    """The process's shared Instance of ``datadir`` (opened now if it is not open), with one
    more reference.  Instance settings given for an instance that is already open must equal
    its values (CantChangeParameter otherwise: shared memory is already sized)."""
    key = os.path.realpath(datadir)
    with _SHARED_LOCK:
        entry = _SHARED.get(key)
        if entry is not None and entry[0]._closed:
            del _SHARED[key]  # closed behind the registry's back: open afresh
            entry = None
        if entry is None:
            inst = Instance(key, **instance_settings)
            _SHARED[key] = [inst, 1]
            return inst
        inst = entry[0]
        for name, value in instance_settings.items():
            want = SETTINGS[name.lower()].parse(value)
            if inst.settings.get(name) != want:
                raise CantChangeParameter(
                    f'parameter "{name}" cannot be changed without reopening the database '
                    f"(it is open in this process with {inst.settings.get(name)})")
        entry[1] += 1
        return inst


def release_shared(inst: Instance) -> None:
    """Drop one reference taken by ``acquire_shared``; the last one closes the instance."""
    with _SHARED_LOCK:
        for key, entry in list(_SHARED.items()):
            if entry[0] is inst:
                entry[1] -= 1
                if entry[1] > 0:
                    return
                del _SHARED[key]
                break
        else:
            return
    inst.close()


@atexit.register
def _close_shared_at_exit() -> None:
    with _SHARED_LOCK:
        insts = [entry[0] for entry in _SHARED.values()]
        _SHARED.clear()
    for inst in insts:
        if inst.owner_pid == os.getpid():
            try:
                inst.close()
            except Exception:  # pragma: no cover - nothing left to report it to
                pass
