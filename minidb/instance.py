"""The instance: one open data directory, its shared memory and its backends.

Opening a data directory plays the postmaster's part:

1. create the directory if it is new, with a ``MINIDB_VERSION`` file; refuse a directory
   written by another format version;
2. take an exclusive ``fcntl`` lock on ``postmaster.pid`` and write our pid into it.  A
   second, independent process gets ``DatabaseInUse`` naming the holder's pid.  The kernel
   drops the lock when its holder dies, so a lock left by a killed process is simply taken
   over (the pid in the file is then stale and is overwritten);
3. map the shared segment and create every cross-process lock (``minidb.shmem``) - before
   any fork;
4. hand out *backends*: a ``Backend`` is one session's slot in the shared arrays, with its
   own buffer-manager handle and session settings.  Backends work from any thread of the
   process that opened the instance, and from processes forked from it (benchmark clients,
   parallel workers), which inherit the segment and the locks;
5. ``close()`` (in the opening process) writes every dirty buffer, fsyncs the files and
   releases the lock.  Without WAL, a crash of the opening process loses the changes that
   were still only in shared buffers: minidb is for studying engines, not for keeping data
   safe across power failures.

Invariants:
  1. At most one process at a time has a data directory open (the fcntl lock).
  2. ``proc_pid[slot] != 0`` iff the slot belongs to a live ``Backend`` (or to a backend of
     a process that died, until ``reap_dead_backends`` frees it).
"""

from __future__ import annotations

import fcntl
import os
import threading

from minidb.catalog import Catalog
from minidb.config import Settings
from minidb.errors import DatabaseInUse, InterfaceError, OperationalError, TooManyConnections
from minidb.shmem import COUNTERS, SharedLocks, Segment, n_slots
from minidb.storage.bufmgr import BufferManager
from minidb.storage.smgr import Smgr

FORMAT_VERSION = "minidb 1"
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
        except BaseException:
            self._release_lock()
            raise
        self.owner_pid = os.getpid()
        self._closed = False
        self._local = threading.Lock()
        self._backends: set[Backend] = set()

    # -- data directory and its lock ----------------------------------------------------------
    def _prepare_directory(self) -> None:
        vpath = os.path.join(self.datadir, VERSION_FILE)
        if not os.path.exists(self.datadir):
            os.makedirs(self.datadir)
        if os.path.exists(vpath):
            with open(vpath) as f:
                found = f.read().strip()
            if found != FORMAT_VERSION:
                raise OperationalError(
                    f'data directory "{self.datadir}" was written by "{found}", '
                    f'this is "{FORMAT_VERSION}"')
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
            raise DatabaseInUse(f'database "{self.datadir}" is in use by pid {holder}') from None
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

    # -- backends ----------------------------------------------------------------------------
    def connect(self, *, worker: bool = False, **session_settings) -> "Backend":
        """A new backend (session) with its own slot; ``worker`` uses the reserved slots."""
        if self._closed:
            raise InterfaceError("the instance is closed")
        settings = self.settings.copy()
        for k, v in session_settings.items():
            settings.set(k, v)
        slot = self._claim_slot(worker)
        b = Backend(self, slot, settings)
        with self._local:
            self._backends.add(b)
        return b

    def _claim_slot(self, worker: bool) -> int:
        nconn = self.settings.max_connections
        rng = range(nconn, n_slots(self.settings)) if worker else range(nconn)
        with self.locks.proc:
            for s in rng:
                if self.seg.proc_pid[s] == 0:
                    self.seg.proc_pid[s] = os.getpid()
                    self.seg.stats[s] = 0
                    self.seg.backend_pins[s] = 0
                    self.seg.backend_locks[s] = 0
                    return s
        kind = "worker" if worker else "connection"
        raise TooManyConnections(f"sorry, too many clients already (all {len(rng)} {kind} "
                                 "slots are in use)")

    def _free_slot(self, slot: int) -> None:
        with self.locks.proc:
            self.seg.stats[-1] += self.seg.stats[slot]
            self.seg.stats[slot] = 0
            self.seg.proc_pid[slot] = 0

    def counters(self) -> dict[str, int]:
        """Statistics summed over every backend, live and exited."""
        total = self.seg.stats.sum(axis=0)
        return {name: int(total[i]) for i, name in enumerate(COUNTERS)}

    def checkpoint(self) -> int:
        """Write every dirty buffer and fsync the relation files; returns pages written."""
        with self.connect(worker=False) as b:
            n = b.bufmgr.flush_buffers()
        self.smgr.fsync_all()
        return n

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
        try:
            self.checkpoint()
        finally:
            self._closed = True
            self.smgr.close()
            self._release_lock()
            self.seg.close()

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
        self.bufmgr = BufferManager(instance.seg, instance.locks, instance.smgr, settings,
                                    slot, describe_rel=instance.describe_rel)
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
        self.bufmgr.release_all()
        self.instance._free_slot(self.slot)
        with self.instance._local:
            self.instance._backends.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_instance(datadir: str, **settings) -> Instance:
    return Instance(datadir, **settings)

