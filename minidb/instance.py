"""The instance: one open data directory, its shared memory and its backends.

Opening a data directory plays the postmaster's part:

1. create the directory if it is new, with a ``MINIDB_VERSION`` file; refuse a directory
   written by another format version;
2. take an exclusive ``flock`` on ``postmaster.pid`` and write the owner's pid, the data
   directory, the start time and the status into it.  A BSD lock belongs to the open file
   description, which every forked child inherits: the lock is released only when the owner
   *and every process forked from it* have closed it (PostgreSQL gets the same from the
   attach count of its SysV segment).  So a second opener gets ``DatabaseInUse`` naming the
   owner's pid while the owner lives, and after the owner died naming the orphaned children
   still attached, until they have exited (they do so at their next wait or statement, see
   "The owner's death" below); then it takes the lock over;
3. map the shared segment and create every cross-process lock (``minidb.shmem``) - before
   any fork - then set up the I/O model (``io_model``) and fork the parallel worker pool's
   master process (``minidb.workers.pool``), before the reaper thread starts;
4. hand out *backends*: a ``Backend`` is one session's slot in the shared arrays, with its
   own buffer-manager handle and session settings.  Backends work from any thread of the
   process that opened the instance, and from processes forked from it (benchmark clients,
   parallel workers), which inherit the segment and the locks;
5. the write-ahead log is opened (``minidb.recovery.start_wal``: crash recovery if the last
   run did not shut down cleanly) right after the shared segment, before the catalog is
   read and before the pool is forked, and a background thread plays the WAL writer and
   the checkpointer.  The control file (``global/pg_control``, with its CRC) must exist
   unless the directory is new: a missing or damaged one refuses to open;
6. ``close()`` (in the opening process) takes a shutdown checkpoint (every dirty buffer and
   commit-log page written, files fsynced, checkpoint record, control file) and releases
   the lock.  A crash of the opening process loses nothing that committed
   (minidb/wal/README.md).

The owner's death.  Every process of an instance - the pool master and its workers, the
user's forked DB-API and benchmark clients, children of those - stops soon after the owner
dies, as PostgreSQL's backends do when the postmaster dies:

* the death pipe: the owner creates a pipe at open and keeps its write end; a fork hook
  closes the write end in every child, so the read end reads EOF once the owner is gone.
  Children look at it (``check_interrupts``) when they connect, at a statement when
  ``OWNER_CHECK_S`` has passed since they last looked (a periodic check, as PostgreSQL's
  backends make, not a system call per statement), in every blocked LWLock wait and
  transaction wait; on EOF they close their copy of the lock file (detach) and raise
  ``AdminShutdown`` (57P01) - every later call does the same;
* ``PR_SET_PDEATHSIG`` (Linux): a child forked by the owner's main thread asks the kernel
  for SIGTERM when its parent dies (the pool's processes for SIGKILL), so even a child
  busy elsewhere ends.  The kernel ties the signal to the forking *thread*, hence the
  main-thread rule (``minidb.shmem.set_parent_death_signal``).

A process that dies holding a shared-memory lock.  Every LWLock records its holder's pid in
shared memory (``minidb.shmem``).  The reaper never blocks on a lock a dead process may
hold: before cleaning up after a dead backend it looks up the LWLocks recorded as held by
it (``minidb.monitor.crash_reason``); if there are any, the shared state it was changing
may be half-changed, and the answer is the instance's *crash flag*: from then on every
statement, connect and wait raises ``CrashShutdown`` (57P02, "terminating connection
because of crash of another server process"), until the crash restart below.  A blocked
LWLock wait finds the same by itself (a dead holder, or a lock taken with no holder
recorded for ``HOLDERLESS_S``).  So does a backend that died inside a WAL critical section
(``minidb.wal.xlog.wal_critical_section``: copying a record into the WAL buffers, or
between its commit record and the commit log - PostgreSQL PANICs there) or holding a
buffer's content lock in exclusive mode, and a failed WAL write or fsync (the WAL's PANIC);
the WAL's waits and the buffer content-lock waits look at the flag.  A backend killed
outside those sections (the usual case) is cleaned up as before: its transaction aborted,
its slot, pins and locks freed - by the reaper, never by a restart.

Crash restart (``restart_after_crash``, on by default).  The owner is the user's program,
busy with anything, so a small *monitor* process (``minidb.monitor``, forked at open)
watches too: it takes no lock and holds no slot; when it finds a dead backend whose death
is a crash it sets the flag, and once the flag is set it SIGKILLs every process of the
instance it knows of (the slots' processes, the pool master and workers) and exits.  The
owner's reaper thread - the *postmaster thread* - then runs ``crash_restart``:

1. kill whatever else is still attached to the data directory (a forked client between
   two connections has the lock file open: ``attached_pids``), and the monitor;
2. make every backend of this process *stale* (``generation``: its next call raises 57P02
   "the instance has restarted since this connection began"; closing it frees nothing,
   its slot went with the old memory) and make the old file handles (relation files, the
   WAL, the commit log) raise too, so a straggling thread cannot write an old page after
   recovery;
3. wait until no call of this process's threads is inside the instance (``enter_call`` /
   ``leave_call``, around each DB-API call and session statement; a waiting call sees the
   crash flag within ``LWLOCK_POLL_S``), at most ``RESTART_TIMEOUT_S``;
4. new shared memory and locks, crash recovery from the WAL (``start_wal``, then the
   orphan files of the transactions the crash ended are removed), a new pool master, a new
   monitor and a new WAL writer / checkpointer thread.

The owner survives; a DB-API connection that was open gets 57P02 at its next call, and
``connect`` during the restart waits for it to end (bounded) instead of failing.  If
recovery itself fails (the disk still full), the instance stays down ("the crash restart
failed": close and reopen).  With ``restart_after_crash`` off the crash flag stays set until
the instance is closed (no checkpoint then: the next open replays the WAL).  Departures:
PostgreSQL's backends are all children of the postmaster; here the owner's own threads are
backends too, so they are not killed but made stale, and processes the user forked from the
owner are killed as PostgreSQL's backends are.

Invariants:
  1. At most one process at a time owns a data directory (the flock), and no process of
     an earlier owner is still attached when a new owner opens it.
  2. ``proc_pid[slot] != 0`` iff the slot belongs to a live ``Backend`` (or to a backend of
     a process that died, until ``reap_dead_backends`` frees it).
"""

from __future__ import annotations

import atexit
import fcntl
import os
import signal
import sys
import threading
import time
import weakref

import numpy as np

from minidb.catalog import Catalog, CatalogCache, at_xact_end, bootstrap
from minidb.catalog.storage import at_subxact_abort
from minidb.catalog.bootstrap import PG_CLASS, add_missing_catalogs
from minidb.catalog.cache import temp_backend
from minidb.config import SETTINGS, Settings
import minidb.monitor as monitor
from minidb.errors import (AdminShutdown, CantChangeParameter, CrashShutdown, DatabaseInUse,
                           QueryCanceled,
                           InsufficientPrivilege, InterfaceError, OperationalError,
                           TooManyConnections)
from minidb.shmem import (COUNTERS, H_CRASHED, IO_COUNTERS, SharedLocks, Segment, current_pid,
                          n_slots, pid_alive, set_parent_death_signal)
from minidb.storage.bufmgr import EXCLUSIVE, BufferManager
from minidb.storage.iomodel import IOModel
from minidb.storage.smgr import Smgr
from minidb.heap.pgstat import TableStats
from minidb.recovery import Background, checkpoint, remove_orphan_files, start_wal
from minidb.txn.clog import CommitLog
from minidb.txn.lmgr import LockManager, SharedLockTable
from minidb.txn.procarray import ProcArray
from minidb.txn.xact import Transaction
from minidb.wal.control import control_path

REAPER_INTERVAL_S = 0.1
ORPHAN_WAIT_S = 2.0  # an opener waits this long for a dead owner's children to exit
OWNER_CHECK_S = 0.05  # a forked child's statements read the death pipe at most this often

# data directories this process holds the lock of: (st_dev, st_ino) -> pid (a forked
# child inherits the dict, but not the locks: the pid tells them apart)
_HELD_DIRS: dict[tuple[int, int], int] = {}
_HELD_LOCK = threading.Lock()

FORMAT_VERSION = "minidb 3"  # 3: the write-ahead log and 64-bit page LSNs, with the
#                              catalog in heap tables (2: heap catalog, no WAL; 1: catalog.json)
VERSION_FILE = "MINIDB_VERSION"
LOCK_FILE = "postmaster.pid"


class Instance:
    """An open data directory (see the module docstring)."""

    def __init__(self, datadir: str, *, background=None, **settings):
        """``background``: None - the WAL writer / checkpointer and the postmaster's reaper
        run as threads of this process (an embedded opener); else a callable ``f(instance)``
        returning an object with ``start()``, ``stop()`` and ``stop_event.set()`` that runs
        the WAL writer / checkpointer elsewhere - ``minidb serve``'s postmaster, which stays
        single-threaded (it forks backends), runs it in a process of its own and calls
        ``postmaster_tick`` from its own loop instead of a reaper thread."""
        self.datadir = os.path.abspath(datadir)
        self._new_background = background or Background
        self.settings = Settings(settings)
        self.settings.freeze_instance_settings()
        try:
            new = self._prepare_directory()
        except OSError as e:
            raise _directory_error(self.datadir, e.filename or self.datadir, e) from None
        self._lock_fd = self._take_lock()
        self._death_r = self._death_w = None
        self._orphaned = False  # set in a forked child that saw the owner die
        self._owner_check_at = 0.0  # check_interrupts' next read of the death pipe
        self.cancel_pending = False  # a server backend's CancelRequest (check_interrupts)
        self.owner_pid = os.getpid()
        self._closed = False
        self.abandoned = False   # crash_abandon: its sessions must not touch the directory
        _OPEN.add(self)  # the fork hook finds it (death pipe, parent-death signal)
        self._local = threading.Lock()
        self._backends: set[Backend] = set()
        self.generation = 0  # crash restarts so far: a backend of an older one is stale
        self.restarts: list[dict] = []  # what each crash restart did (for tests and users)
        self._active: dict[int, int] = {}  # thread id -> depth of its calls into the instance
        self._restart_lock = threading.RLock()
        self.restart_error: BaseException | None = None
        self.restart_failed = False  # a crash restart's recovery failed: the instance is down
        self._restarting = 0  # the thread running crash_restart (connect waits for it)
        self._ckpt_lock = threading.Lock()
        self.checkpoints_done = 0
        self.last_checkpoint: dict = {}
        self.monitor_pid = 0
        self.pool = None
        try:
            self._death_r, self._death_w = os.pipe()
            os.set_blocking(self._death_r, False)
            self._start_shared(new)
        except BaseException:
            self._closed = True
            self._release_lock()
            raise
        self.reaped: list[tuple[int, int, int]] = []  # (slot, pid, aborted xid) - for tests
        self._stop = threading.Event()
        try:
            self._start_processes()
        except BaseException:
            self._closed = True
            self._stop_monitor()
            self._release_lock()
            raise
        self._reaper = None
        if background is None:
            self._reaper = threading.Thread(target=self._reaper_loop, name="minidb-postmaster",
                                            daemon=True)
            self._reaper.start()
        self._background = self._new_background(self)
        self._background.start()

    def _start_shared(self, new: bool) -> None:
        """Shared memory, the files' handles, the WAL (crash recovery if the last run
        crashed) and the catalog: at open, and again at each crash restart."""
        self.seg = Segment(self.settings)
        self.locks = SharedLocks(self.settings)
        if self.settings.restart_after_crash:
            self.locks.after_crash = ("so the instance restarts itself (crash recovery): "
                                      "open a new connection")
        self.smgr = Smgr(self.datadir)
        self.clog = CommitLog(self.datadir, self.seg, self.locks)
        control = control_path(self.datadir)
        if not new and not os.path.exists(control):
            raise OperationalError(
                f'could not open file "{control}": No such file or directory: the data '
                f'directory "{self.datadir}" has lost its control file, without which '
                "transaction ids would be reused and rolled-back rows could show as "
                "committed; restore the directory from a copy", sqlstate="58P01")
        self.procarray = ProcArray(self.seg, self.locks, self.clog)
        self.procarray._on_wait_tick = self.reap_dead_backends
        self.catalog_cache = CatalogCache(self)
        self.catalog = Catalog(self.catalog_cache)  # runs each call in its own transaction
        self.recovery_stats: dict = {}
        self.wal_shared = start_wal(self, new)  # crash recovery, if the last run crashed
        self.wal = self.wal_shared.handle(n_slots(self.settings) + 1)
        self.clog.wal_flush = self.wal.flush  # WAL before a commit-log page
        self.clog.wal = self.wal_shared       # its ZEROPAGE / TRUNCATE records
        self._open_catalog(new)
        if self.recovery_stats:
            remove_orphan_files(self)  # created by transactions the crash ended

    def _start_processes(self) -> None:
        """The I/O model (io_model) beneath every relation read, the parallel worker pool
        (minidb.workers.pool) and the monitor (minidb.monitor).  At open the pool master
        and the monitor are forked here, after the segment, the locks and the channels exist
        and BEFORE the reaper thread starts (a process with threads should not fork); after
        a crash restart the postmaster thread forks them again.  No pool at all when
        max_worker_processes is 0."""
        self.iomodel = (IOModel(self.seg, self.locks.iomodel, self.settings)
                        if self.settings.io_model != "none" else None)
        self.smgr.iomodel = self.iomodel
        self.pool = None
        if self.settings.max_worker_processes > 0:
            from minidb.workers.pool import WorkerPool  # the executor layer starts here
            self.pool = WorkerPool(self)
            self.pool.start()
        sys.stdout.flush()
        sys.stderr.flush()
        self.monitor_pid = monitor.start(self.seg, self.locks, self._death_r,
                                         [self.pool.master_pid] if self.pool else [])

    # -- data directory and its lock ----------------------------------------------------------
    def _open_catalog(self, new: bool) -> None:
        """A new directory gets its catalog tables (bootstrap); an existing one must have
        them.  Then the OID counter starts past every OID and file there is."""
        if new:
            with temp_backend(self) as b:
                bootstrap(b)
                b.xact.commit()
        elif not self.smgr.exists(PG_CLASS.oid):
            raise OperationalError(
                f'data directory "{self.datadir}" has no catalog: the file of pg_class '
                f"(base/{PG_CLASS.oid}) is missing; the directory is damaged or its "
                f"initialisation was interrupted")
        else:
            with temp_backend(self) as b:
                if add_missing_catalogs(b):   # a directory older than pg_rewrite / pg_constraint
                    b.xact.commit()
                b.catalog.drop_temp_tables(own=False)   # left by a crash or a killed session
        with temp_backend(self) as b:
            self.catalog_cache.init_next_oid(b)

    def _prepare_directory(self) -> bool:
        """Check (or create, mode 0700) the directory; True if it is new."""
        vpath = os.path.join(self.datadir, VERSION_FILE)
        if os.path.exists(self.datadir) and not os.path.isdir(self.datadir):
            raise OperationalError(
                f'"{self.datadir}" is a file, not a data directory: give a directory '
                f"(created if new)")
        if not os.path.exists(self.datadir):
            os.makedirs(self.datadir, mode=0o700)
            os.chmod(self.datadir, 0o700)
        if os.path.exists(vpath):
            with open(vpath) as f:
                found = f.read().strip()
            if found != FORMAT_VERSION:
                old = os.path.exists(os.path.join(self.datadir, "catalog.json"))
                raise OperationalError(
                    f'data directory "{self.datadir}" was written by "{found}", '
                    f'this is "{FORMAT_VERSION}"'
                    + ((" (its catalog is catalog.json, the format before the catalog moved "
                        "into heap tables" if old else " (it has no write-ahead log and its "
                        "pages have 32-bit change counters")
                       + "; dump the data with the older minidb and load it into a new "
                       "directory)" if found in ("minidb 1", "minidb 2") else ""))
            return False
        else:
            if os.listdir(self.datadir):
                raise OperationalError(
                    f'directory "{self.datadir}" exists, is not empty and is not a minidb '
                    f"data directory (no {VERSION_FILE})")
            os.chmod(self.datadir, 0o700)
            tmp = vpath + ".tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(FORMAT_VERSION + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, vpath)
            return True

    def _take_lock(self) -> int:
        # A second open from this process would conflict with our own flock on its new
        # file description; the directories this process holds are remembered to say so.
        st = os.stat(self.datadir)
        key = (st.st_dev, st.st_ino)
        with _HELD_LOCK:
            if _HELD_DIRS.get(key) == os.getpid():
                raise DatabaseInUse(f'database "{self.datadir}" is already open in this '
                                    f"process (pid {os.getpid()}): close the connection "
                                    f"that holds it first, or open a different data "
                                    f"directory")
            path = os.path.join(self.datadir, LOCK_FILE)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as e:
                raise _directory_error(self.datadir, path, e) from None
            try:
                self._flock_or_refuse(fd, path)
            except BaseException:
                os.close(fd)
                raise
            _HELD_DIRS[key] = os.getpid()
        self._lock_key = key
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n{self.datadir}\n{int(time.time())}\nready\n".encode(),
                  0)
        return fd

    def _flock_or_refuse(self, fd: int, path: str) -> None:
        """Take the flock, or raise DatabaseInUse naming the owner (alive) or the processes
        still attached (the owner died: its children exit soon, so wait ORPHAN_WAIT_S)."""
        deadline = None
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError:
                pass
            try:
                holder = int(os.pread(fd, 64, 0).decode(errors="replace").split()[0])
            except (OSError, IndexError, ValueError):
                holder = 0
            if holder and pid_alive(holder):
                raise DatabaseInUse(
                    f'database "{self.datadir}" is in use by pid {holder}: close the other '
                    f"process (pid {holder}), or open a different data directory")
            now = time.monotonic()
            if deadline is None:
                deadline = now + ORPHAN_WAIT_S
            if now < deadline:
                time.sleep(0.02)
                continue
            pids = [p for p in attached_pids(path) if p != os.getpid()]
            who = ", ".join(map(str, pids)) if pids else "unknown"
            owner = f"pid {holder}, which opened it, has died" if holder else \
                "the process that opened it has died"
            raise DatabaseInUse(
                f'database "{self.datadir}" is still in use by pid {who}: {owner}, and its '
                f"processes still attached (forked from it) exit at their next statement or "
                f"wait; wait for them to exit (or kill them), then open it again")

    def _release_lock(self) -> None:
        # no LOCK_UN: that would release the lock for every process sharing the open file
        # description; closing our descriptor drops only our share of it
        if self._lock_fd is not None:
            try:
                if os.getpid() == getattr(self, "owner_pid", os.getpid()):
                    os.ftruncate(self._lock_fd, 0)
            finally:
                os.close(self._lock_fd)
                self._lock_fd = None
                with _HELD_LOCK:
                    if _HELD_DIRS.get(self._lock_key) == os.getpid():
                        _HELD_DIRS.pop(self._lock_key, None)
        for attr in ("_death_r", "_death_w"):
            fd = getattr(self, attr, None)
            if fd is not None:
                setattr(self, attr, None)
                os.close(fd)

    # -- the owner's death (see the module docstring) -------------------------------------------
    def owner_alive(self) -> bool:
        """False once the owner process has exited (the death pipe reads EOF); always True
        in the owner itself."""
        if os.getpid() == self.owner_pid:
            return True
        if self._orphaned:
            return False
        r = self._death_r
        if r is None:
            return True  # this process closed the instance; nothing to watch
        try:
            data = os.read(r, 1)
        except BlockingIOError:
            return True
        except OSError:  # pragma: no cover
            return True
        if data:  # pragma: no cover - nobody writes into the pipe
            return True
        return False

    def _check_owner(self) -> None:
        if not self.owner_alive():
            self._detach_orphan()
            raise AdminShutdown(
                "terminating connection due to unexpected exit of the instance's owner "
                f"(pid {self.owner_pid}, which opened {self.datadir!r}): this process no "
                "longer uses the data directory")

    def _detach_orphan(self) -> None:
        """This forked child saw the owner die: stop counting as attached (close our copy
        of the lock file), and refuse everything from now on."""
        self._orphaned = True
        if self._lock_fd is not None:
            fd, self._lock_fd = self._lock_fd, None
            try:
                os.close(fd)
            except OSError:  # pragma: no cover
                pass

    def check_interrupts(self, backend: "Backend | None" = None) -> None:
        """CHECK_FOR_INTERRUPTS, at connect and at each statement: AdminShutdown (57P01) in
        a forked child whose owner died (the pipe read at most every ``OWNER_CHECK_S``),
        CrashShutdown (57P02) once the crash flag is set,
        and for a ``backend`` made before the last crash restart (stale: its shared memory
        is gone)."""
        if current_pid() != self.owner_pid:   # (os.getpid() is a system call)
            # the death pipe is read at most every OWNER_CHECK_S (a read is a system call
            # and a BlockingIOError each time: two a statement were ~3 us of a forked
            # client's statement); an orphan refuses every call at once
            now = time.monotonic()
            if now >= self._owner_check_at or self._orphaned:
                self._owner_check_at = now + OWNER_CHECK_S
                self._check_owner()
        if backend is not None and backend.generation != self.generation:
            raise _stale_error(backend)
        locks = self.locks
        if locks.holder_words[H_CRASHED]:   # (the flag read here, check_crash only when set)
            locks.check_crash()
        if self.cancel_pending:     # set by a server backend's SIGINT (a CancelRequest)
            self.cancel_pending = False
            raise QueryCanceled("canceling statement due to user request")

    def _await_restart(self) -> None:
        """A new connection in the owner while the crash flag is set waits (bounded) for
        the postmaster thread's crash restart, instead of failing with 57P02."""
        if (os.getpid() != self.owner_pid or not self.settings.restart_after_crash
                or self._restarting == threading.get_ident() or self.enter_depth()):
            return  # (a call of this thread inside holds up the restart: fail at once)
        deadline = time.monotonic() + RESTART_TIMEOUT_S
        while time.monotonic() < deadline and not self._closed:
            if self._restart_lock.acquire(timeout=max(0.01, deadline - time.monotonic())):
                try:
                    if self.locks.crashed() is None and not self._restarting:
                        return
                finally:
                    self._restart_lock.release()
            time.sleep(0.01)

    def enter_depth(self) -> int:
        """How deep this thread is in calls into the instance (0: none)."""
        return self._active.get(threading.get_ident(), 0)

    # -- calls of the owner's threads (a crash restart waits until none is inside) -----------
    def enter_call(self) -> None:
        """A thread of this process starts a call that uses shared memory (a statement,
        a commit, a DB-API call); calls nest.  ``leave_call`` ends it."""
        tid = threading.get_ident()
        self._active[tid] = self._active.get(tid, 0) + 1  # only this thread writes its key

    def leave_call(self) -> None:
        tid = threading.get_ident()
        depth = self._active.get(tid, 0) - 1
        if depth > 0:
            self._active[tid] = depth
        else:
            self._active.pop(tid, None)

    def _after_fork_in_child(self) -> None:
        # called by the fork hook in every child: give up the death pipe's write end (the
        # owner's alone), watch the owner in blocked waits
        if self._death_w is not None:
            fd, self._death_w = self._death_w, None
            try:
                os.close(fd)
            except OSError:  # pragma: no cover
                pass
        self.locks.check_owner = self._check_owner

    # -- backends ----------------------------------------------------------------------------
    def connect(self, *, worker: bool = False, aux: bool = False,
                **session_settings) -> "Backend":
        """A new backend (session) with its own slot; ``worker`` and ``aux`` (the
        checkpointer) use their reserved slots."""
        if self._closed:
            raise InterfaceError("the instance is closed")
        if self._restarting or self.locks.crashed() is not None:
            self._await_restart()
        self._owner_check_at = 0.0      # (a connect always reads the death pipe)
        self.check_interrupts()
        settings = self.settings.copy()
        for k, v in session_settings.items():
            settings.set(k, v)
        slot = self._claim_slot("aux" if aux else "worker" if worker else "connection")
        try:
            b = Backend(self, slot, settings)
        except BaseException:
            self._free_slot(slot)
            raise
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
                    self.seg.proc_flags[s] = 0
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
        """The postmaster thread: frees the slots of dead backends, and restarts the
        instance after a crash (``crash_restart``)."""
        while not self._stop.wait(REAPER_INTERVAL_S):
            if os.getpid() != self.owner_pid:
                return  # pragma: no cover - threads do not survive fork, but be safe
            self.postmaster_tick()

    def postmaster_tick(self) -> None:
        """One round of the postmaster's duties, every ``REAPER_INTERVAL_S``: free the
        slots of dead backends, or run the crash restart once the crash flag is set.  The
        reaper thread calls it; ``minidb serve``'s single-threaded postmaster calls it from
        its own loop (``background=``)."""
        if self._closed or self._stop.is_set():
            return
        try:
            if self.locks.crashed() is not None:
                if self.settings.restart_after_crash and not self.restart_failed:
                    self.crash_restart()
            else:
                self.reap_dead_backends()
        except Exception as e:  # pragma: no cover - the postmaster must never die
            self.restart_error = e

    def reap_dead_backends(self) -> list[int]:
        """Free the slots of backends whose process has died (PostgreSQL's postmaster does
        this on SIGCHLD): abort their transaction, release their pins and content locks,
        wake everyone waiting on them.  Returns the slots freed."""
        if self._closed:
            return []
        if os.getpid() != self.owner_pid:
            self._check_owner()  # an orphan cleans up nothing
        if self.locks.crashed():
            return []  # nothing can be trusted any more: the instance must be reopened
        pids = self.seg.proc_pid
        freed = []
        for slot in np.flatnonzero(pids > 0).tolist():
            pid = int(pids[slot])
            if pid <= 0 or pid == os.getpid() or _process_alive(pid):
                continue  # freed (or being reaped) since the scan above, or alive
            why = monitor.crash_reason(self.seg, self.locks, slot, pid)
            if why:  # it died inside a critical section (PostgreSQL's PANIC): never wait
                self.locks.mark_crashed(pid, why)  # for its locks - a crash restart
                return freed
            with self.locks.proc:
                if int(pids[slot]) != pid:
                    continue  # freed meanwhile
                pids[slot] = -pid  # claimed by this reaper
            xid = self.procarray.abort_dead_slot(slot)
            SharedLockTable(self.seg, self.locks).release_slot(slot)
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
        """CHECKPOINT (minidb.recovery.checkpoint): every dirty buffer written, the commit
        log's dirty pages written, relation files fsynced, a checkpoint record, the control
        file; returns the relation pages written."""
        return checkpoint(self, shutdown=shutdown)["buffers_written"]

    def wal_stats(self) -> dict[str, int]:
        """pg_stat_wal's counters since the instance opened."""
        return self.wal_shared.stats()

    def describe_lock_tag(self, tag) -> str | None:
        """The name of a relation lock tag's relation (None if unknown)."""
        oid = tag[1]
        cat = self.catalog
        for _ in range(2):  # perhaps created by another process since we last looked
            for defs in (cat.tables, cat.indexes):
                for name, d in list(defs.items()):
                    if d.oid == oid:
                        return name
            cat.refresh()
        return None

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
            self._closed = True  # a forked child leaves the instance to its owner...
            self._detach_orphan()  # ...and stops counting as attached to it
            return
        self._stop.set()
        if self._reaper is not None and threading.current_thread() is not self._reaper:
            self._reaper.join(RESTART_TIMEOUT_S)  # (a crash restart in progress ends first)
        if self.pool is not None:
            self.pool.stop()  # the workers close their backends; nothing is left running
        self._background.stop()
        self._stop_monitor()
        try:
            if self.locks.crashed() is None:
                self.checkpoint(shutdown=True)
            # else: the shared buffers are not trusted - nothing of them is written, and
            # the next open replays the log from the last checkpoint (a crash restart)
        finally:
            self._closed = True
            try:
                for fn in (self.wal_shared.close_files, self.clog.close, self.smgr.close):
                    try:
                        fn()
                    except CrashShutdown:  # left stale by a failed crash restart
                        pass
            finally:
                self._release_lock()
                self.seg.close()

    def crash_abandon(self) -> None:
        """For crash tests: drop the instance as a power loss or ``kill -9`` would - no
        checkpoint, no buffer written, the WAL left as it is - and free this process's
        hold on the directory so that it can be opened (and recovered) again."""
        if self._closed:
            return
        self._closed = True
        self.abandoned = True
        self._stop.set()
        self._background.stop_event.set()
        if self.pool is not None:
            try:
                self.pool.stop()
            except BaseException:
                pass
        self._stop_monitor()
        # (not clog.close(): it would write the commit log's dirty pages)
        for fn in (self.wal_shared.close_files, self.smgr.close):
            try:
                fn()
            except BaseException:
                pass
        self._release_lock()

    def _stop_monitor(self) -> None:
        pid, self.monitor_pid = self.monitor_pid, 0
        if pid and os.getpid() == self.owner_pid:
            _kill_and_reap(pid)

    # -- crash restart (see the module docstring) ---------------------------------------------
    def crash_restart(self) -> dict:
        """PostgreSQL's crash restart, run by the postmaster thread once the crash flag is
        set: kill every other process of the instance, make the backends of this process
        stale (57P02 at their next call), wait until no call of this process's threads is
        inside the instance, then new shared memory and locks, crash recovery from the WAL,
        a new pool and monitor.  Returns what it did (also appended to ``restarts``)."""
        with self._restart_lock:
            if self._closed or self._stop.is_set() or self.locks.crashed() is None:
                return {}
            self._restarting = threading.get_ident()  # (its own connects do not wait)
            try:
                return self._crash_restart()
            finally:
                self._restarting = 0

    def _crash_restart(self) -> dict:
        t0 = time.monotonic()
        reason = self.locks.crashed()
        me = os.getpid()
        lock_path = os.path.join(self.datadir, LOCK_FILE)
        # 1. every other process: the slots' and the pool's, and whatever else is
        # attached to the data directory (forked clients between two connections)
        extra = [self.monitor_pid] + ([self.pool.master_pid] if self.pool else [])
        killed: set[int] = set()
        deadline = time.monotonic() + RESTART_TIMEOUT_S
        while True:
            pids = (monitor.instance_pids(self.seg, me, extra)
                    | set(attached_pids(lock_path))) - {me}
            alive = {p for p in pids if pid_alive(p)}
            if not alive or time.monotonic() > deadline:
                break
            monitor.kill_all(alive)
            killed |= alive
            time.sleep(0.01)
        self._stop_monitor()
        if self.pool is not None:
            self.pool.stop()  # its processes are dead: reaped, channels closed
        # 2. this process's backends are stale from now on; the old file handles refuse
        # (a straggler cannot write a page of the old shared buffers after recovery)
        self.generation += 1
        with self._local:
            stale, self._backends = self._backends, set()
        self._background.stop_event.set()
        old_smgr, old_wal = self.smgr, self.wal_shared
        for obj in (self.smgr, self.clog, self.wal_shared):
            _poison(obj, reason)
        # 3. no call of our threads inside (their waits see the crash flag at once)
        me_thread = threading.get_ident()
        waited_out = True
        while any(t != me_thread for t in list(self._active)):
            if self._stop.is_set():  # closing (perhaps from inside a call): no restart
                return {"reason": reason, "abandoned": "the instance is closing"}
            if time.monotonic() > deadline:
                waited_out = False
                break
            time.sleep(0.005)
        self._background.stop()
        for obj, method in ((old_wal, "close_files"), (old_smgr, "close")):
            try:
                getattr(type(obj), method)(obj)  # (the class's: the object's are poisoned)
            except Exception:  # pragma: no cover
                pass
        # 4. shared memory anew, crash recovery, the processes and threads again
        done = {"reason": reason, "killed": sorted(killed), "stale_backends": len(stale),
                "calls_waited_out": waited_out, "generation": self.generation}
        try:
            self._start_shared(False)
            self._start_processes()
        except Exception as e:  # recovery failed (the disk still full...): stay down
            self.restart_failed = True
            self.locks.after_crash = ("and the crash restart failed: close every "
                                      "connection and open the data directory again")
            self.locks.mark_crashed(-1, f"crash recovery failed: {e}")
            done["error"] = f"{type(e).__name__}: {e}"
            self.restarts.append(done)
            return done
        self._background = self._new_background(self)
        self._background.start()
        done.update(recovery=dict(self.recovery_stats), seconds=time.monotonic() - t0)
        self.restarts.append(done)
        if self.settings.trace_recovery:
            print(f"crash restart {self.generation}: {reason}; "
                  f"{done['recovery'].get('records', 0)} WAL records replayed",
                  file=sys.stderr)
        return done

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
        self.generation = instance.generation
        self.wal = instance.wal_shared.handle(slot)
        self.bufmgr = BufferManager(instance.seg, instance.locks, instance.smgr, settings,
                                    slot, describe_rel=instance.describe_rel, wal=self.wal)
        self.pgstat = TableStats(instance.seg, instance.locks.stats, self.settings)
        # relfilenode -> the heap block this backend inserted into last (rd_targblock)
        self.heap_targets: dict[int, int] = {}
        # (relfilenode, block, root offset) -> the HOT chain's dead run (heap/mvcc.py)
        self.chain_cache: dict = {}
        self.lockmgr = LockManager(instance.seg, instance.locks, slot, settings,
                                   on_wait_tick=instance.procarray._on_wait_tick)
        self.lockmgr.describe = instance.describe_lock_tag
        self.xact = Transaction(instance.procarray, slot, settings, on_end=self._at_xact_end,
                                lockmgr=self.lockmgr)
        self.xact.wal = self.wal
        self.xact.on_subabort = lambda: at_subxact_abort(self)
        # this slot's PROC_* flags word, as a memoryview element (read at every transaction
        # end: ~0.04 us against ~0.15 for a numpy element)
        self.proc_flags = memoryview(instance.seg.proc_flags)
        self.closed = False

    @property
    def catalog(self) -> Catalog:
        """This backend's view of the catalog (its own uncommitted DDL included)."""
        cat = self.__dict__.get("_catalog")
        if cat is None:
            cat = self._catalog = Catalog(self.instance.catalog_cache, self)
        return cat

    def _at_xact_end(self, committed: bool) -> None:
        try:
            at_xact_end(self, committed)  # catalog invalidation, pending deletes
        finally:
            self.pgstat.flush(committed)

    def counters(self) -> dict[str, int]:
        return self.bufmgr.counters()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.generation != self.instance.generation or self.instance.abandoned:
            # stale: its slot, pins and locks went with the old shared memory; or the
            # instance was dropped as a power loss drops it - a rollback now would act on
            # files (an aborted CREATE's pending delete) that recovery has since restored
            return
        try:
            if self.instance.locks.crashed() is None:
                try:
                    self.xact.rollback()
                    try:
                        self.catalog.drop_temp_tables(own=True)   # the session's temp tables
                    except Exception:  # noqa: BLE001 - closing goes on
                        pass            # left for the next open (or the slot's next session)
                finally:
                    try:
                        self.lockmgr.release_all()
                    finally:
                        self.bufmgr.release_all()
                        self.pgstat.close()
                self.instance._free_slot(self.slot)
        except CrashShutdown:
            # another process died inside a critical section (before this close or during
            # it): shared memory is not trusted, so nothing more is undone through it - as a
            # PostgreSQL backend quits without cleanup then; the instance must be reopened
            # (recovery replays the WAL), and closing it must not fail on this backend
            pass
        with self.instance._local:
            self.instance._backends.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_process_alive = pid_alive

RESTART_TIMEOUT_S = 60.0  # a crash restart's bound on waiting for processes and calls


def _stale_error(backend) -> CrashShutdown:
    return CrashShutdown(
        "terminating connection because of crash of another server process: the instance "
        f"has restarted since this connection began (crash restart {backend.instance.generation}"
        f": {backend.instance.restarts[-1]['reason'] if backend.instance.restarts else 'crash'})"
        "; open a new connection")


_POISON_SPARES = {"_reset_local"}  # fork hooks: they only reset process-local state


def _poison(obj, reason: str) -> None:
    """Make every method of ``obj`` (a file handle object of the shared memory a crash
    restart drops) raise CrashShutdown, so that a thread still using it cannot write."""
    def stale(*_a, **_k):
        raise CrashShutdown("terminating connection because of crash of another server "
                            f"process: {reason}; open a new connection")
    for name in dir(type(obj)):
        if name.startswith("__") or name in _POISON_SPARES \
                or not callable(getattr(type(obj), name, None)):
            continue
        if isinstance(getattr(type(obj), name), type):
            continue
        try:
            setattr(obj, name, stale)
        except (AttributeError, TypeError):  # pragma: no cover - slots
            pass


def _kill_and_reap(pid: int) -> None:
    """SIGKILL a child of this process and wait for it (bounded)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done:
            return
        time.sleep(0.005)


def attached_pids(lock_path: str) -> list[int]:
    """Pids of the processes that have the lock file open (Linux: /proc/*/fd), sorted."""
    try:
        st = os.stat(lock_path)
    except OSError:
        return []
    target = (st.st_dev, st.st_ino)
    found = []
    try:
        procs = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:  # pragma: no cover - no /proc
        return []
    for p in procs:
        fd_dir = f"/proc/{p}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                fst = os.stat(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if (fst.st_dev, fst.st_ino) == target:
                found.append(int(p))
                break
    return sorted(found)


def _directory_error(datadir: str, path: str, e: OSError) -> OperationalError:
    """A clear error for a data directory the process cannot use (PostgreSQL's mapping of
    errno: EACCES/EPERM/EROFS are 42501)."""
    import errno as _errno
    if e.errno in (_errno.EACCES, _errno.EPERM, _errno.EROFS):
        why = "Read-only file system" if e.errno == _errno.EROFS else "Permission denied"
        return InsufficientPrivilege(
            f'could not open file "{path}": {why}: the data directory "{datadir}" must be '
            "readable and writable by this process (fix its permissions, or open a copy)")
    code = {_errno.ENOENT: "58P01", _errno.ENOSPC: "53100", _errno.EIO: "58030"}.get(
        e.errno, "58000")
    return OperationalError(f'could not open file "{path}": {e.strerror}', sqlstate=code)


# the instances open in this process, for the fork hook
_OPEN: "weakref.WeakSet[Instance]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    attached = False
    for inst in list(_OPEN):
        if not inst._closed:
            inst._after_fork_in_child()
            attached = True
    if attached:  # a child of an instance exits when its parent does (main thread forks)
        set_parent_death_signal(signal.SIGTERM)


os.register_at_fork(after_in_child=_after_fork_in_child)


# ---------------------------------------------------------------------------------------------
# One Instance per data directory per process, shared by the DB-API's connections.
#
# ``minidb.connect(path)`` may be called many times in one process (from threads, or one after
# another); each connection is one backend of the same Instance.  The first connection opens
# the instance (with the instance settings it was given), the last one to close closes it
# (checkpoint, lock released).  Instances still open when the interpreter exits are closed by
# an atexit hook, so committed work of a program that forgot ``close()`` reaches the disk.

_SHARED: dict[str, list] = {}  # realpath of the data directory -> [Instance, references]
# reentrant: opening an Instance under it allocates, a garbage collection then may run a
# forgotten Connection's __del__, which releases its reference under the same lock
_SHARED_LOCK = threading.RLock()


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
