"""The pool of parallel worker processes (PostgreSQL's background workers, in miniature).

Processes, not threads (Python runs one thread at a time): a scan kernel split over two
threads ran no faster here, over two processes up to 1.9x.  The pool has ``max_worker_processes``
workers; 0 means no pool at all (every scan is the leader's alone).

Who forks whom.  When the instance opens, before its reaper thread starts, it creates
every channel the pool will ever use (``minidb.workers.channel``: one task channel and one
result channel per worker, one control channel) and forks ONE process, the *pool master*
(the postmaster's role for background workers).  The master is single-threaded, so it can
fork safely at any time; it forks worker ``w`` when a leader asks for it (a worker's
first use, or after it died), reaps dead workers, frees their backend slots, and stops
them all when the instance closes.  So opening an instance costs one fork (a few ms), not
eight, and test suites that never scan in parallel stay fast; the first parallel query
pays each worker's start (fork and connect, a few ms).

Every process of the instance can lead: the owner's threads and processes forked from the
owner after open (benchmark clients).  A leader claims workers in the shared ``pool``
table (under the ``pool`` lock), sends each a task on its task channel and reads its
results on its result channel; only the claimant uses those two channels until it
releases the worker, which it does only after the worker's final message (``done`` or
``error``) - so the channels are always left at a message boundary.  A worker that does
not answer in time is killed, and its channels are drained before they are used again.

Tasks.  The pool knows nothing of what its workers do.  A leader sends a claimed worker a
task, ``send_task(w, task_id, fn, arg)``: ``fn`` travels pickled, that is by its module and
name, and ``arg`` by value; the worker calls ``fn(backend, results, task_id, arg)`` with its
own backend and its result channel.  ``fn`` must end every outcome, its errors included, with
a final message on ``results`` tagged with ``task_id`` - the leader's protocol with the task,
which the pool does not read (the parallel sequential scan's task is
``minidb.exec.parallel_scan.run_worker_task``; its module is imported by the worker when it
unpickles the first such task).  So the pool imports nothing above it.

Worker states (``pool[w]``: STATE, PID, OWNER = leader pid, TASK)::

    state       event                                   next        performed by
    ---------   -------------------------------------   ---------   ------------------
    UNSTARTED   a leader claims it                      STARTING    claim
    STARTING    the worker sent "ready"                 BUSY        WorkerPool.start
    STARTING    no "ready" in START_TIMEOUT_S           UNSTARTED   WorkerPool.start
    IDLE        a leader claims it                      BUSY        claim
    BUSY        the leader got the final message        IDLE        release
    BUSY        the worker died / did not answer        UNSTARTED   kill (leader)
    IDLE        the worker died                         UNSTARTED   the master (reaping)
    BUSY        its leader died (noticed when sending)  IDLE        the worker itself
    BUSY, STARTING  the leader and the worker died      UNSTARTED   claim (of any leader)

``max_parallel_workers`` bounds the STARTING and BUSY workers of the whole instance;
a leader gets fewer workers than it asked for (maybe none) when the pool is busy, and
then scans with what it got, as PostgreSQL's Gather does.

Signals: workers and the master ignore SIGINT (a Ctrl-C in a terminal reaches the whole
process group); a leader cancels its workers through the shared scan slot's CANCEL flag.
Each checks every ``POLL_S`` that its parent is still there and that the instance's death
pipe has not closed (``minidb.instance``: the owner died), and exits if not; on Linux each
also asks for SIGKILL when its parent dies (``shmem.set_parent_death_signal``), so nothing
of the pool outlives the owner and a new opener of the data directory is not kept out.

A worker is killed (SIGKILL) only as a last resort - it did not start, or did not answer a
cancel within ``lock_wait_timeout_ms`` + 5 s - because a process killed while it holds a
buffer partition lock, a content lock or a buffer's I/O leaves them held, and cleaning that
up takes a crash restart of the whole instance (``minidb.instance``), as in PostgreSQL.

Invariants:
  1. A worker's channels have at most one user besides the worker: its claimant.
  2. ``pool[w].STATE`` is BUSY or STARTING iff a leader owns the worker.
  3. Worker and master processes end with ``os._exit``: no atexit handler of the owner
     (checkpoint, closing instances) ever runs in them.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback

from minidb.errors import TooManyConnections
from minidb.shmem import set_parent_death_signal
from minidb.workers.channel import POLL_S, Channel

P_STATE, P_PID, P_OWNER, P_TASK = 0, 1, 2, 3
UNSTARTED, STARTING, IDLE, BUSY = 0, 1, 2, 3
STATE_NAMES = {UNSTARTED: "unstarted", STARTING: "starting", IDLE: "idle", BUSY: "busy"}

START_TIMEOUT_S = 10.0    # a worker's fork + connect; far more than it takes
STOP_TIMEOUT_S = 5.0      # the master's shutdown of its workers
LOCK_TIMEOUT_S = 10.0
RESULT_PIPE_BYTES = 1 << 20

_task_ids = itertools.count(1)
_task_lock = threading.Lock()


def new_task_id() -> int:
    with _task_lock:
        return (os.getpid() << 24) | (next(_task_ids) & 0xFFFFFF)


def process_alive(pid: int) -> bool:
    """True unless ``pid`` is gone or a zombie (see ``minidb.instance._process_alive``)."""
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3] != b"Z"


class PoolError(Exception):
    """Internal: a worker could not be started or stopped answering."""


class WorkerPool:
    """The pool's channels and its shared table, as seen from any process."""

    def __init__(self, instance):
        self.instance = instance
        self.seg = instance.seg
        self.lock = instance.locks.pool
        self.size = instance.settings.max_worker_processes
        self.table = self.seg.pool
        self.tasks = [Channel() for _ in range(self.size)]
        self.results = [Channel(RESULT_PIPE_BYTES) for _ in range(self.size)]
        self.control = Channel()
        self.owner_pid = os.getpid()
        self.master = None
        self.master_pid = 0
        self.closed = False  # set by stop(): channels closed, nothing may be dispatched

    # -- the owner: start and stop ---------------------------------------------------------------
    def start(self) -> None:
        """Fork the pool master (call before any thread of the instance starts)."""
        ctx = multiprocessing.get_context("fork")
        self.master = ctx.Process(target=_master_main, args=(self,), name="minidb-pool",
                                  daemon=True)
        self.master.start()
        self.master_pid = self.master.pid

    def stop(self) -> None:
        """Stop the master and every worker (owner only); nothing is left running."""
        if self.master is None or os.getpid() != self.owner_pid:
            return
        self.closed = True
        try:
            self.control.send(("shutdown",), timeout=1.0)
        except (TimeoutError, OSError):
            pass
        self.master.join(STOP_TIMEOUT_S + 2.0)
        if self.master.is_alive():
            self.master.kill()
            self.master.join(2.0)
        for w in range(self.size):  # workers the master could not stop
            pid = int(self.table[w, P_PID])
            if pid and process_alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.master = None
        for ch in (*self.tasks, *self.results, self.control):
            ch.close()

    def worker_pids(self) -> list[int]:
        return [int(p) for p in self.table[:, P_PID] if p]

    def states(self) -> list[str]:
        return [STATE_NAMES[int(s)] for s in self.table[:, P_STATE]]

    # -- leaders: claim, start, release, kill ------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self):
        if not self.lock.acquire(timeout=LOCK_TIMEOUT_S):  # pragma: no cover
            raise PoolError("timed out waiting for the worker pool's lock")
        try:
            yield
        finally:
            self.lock.release()

    def claim(self, want: int, max_total: int) -> list[int]:
        """Claim up to ``want`` workers for this process (fewer if the pool is busy or
        ``max_total`` workers are already in use); returns their indexes."""
        if want <= 0 or self.size == 0 or self.closed:
            return []
        me = os.getpid()
        with self._locked():
            t = self.table
            for w in range(self.size):  # claims of leaders that died, on dead workers
                if (t[w, P_STATE] in (STARTING, BUSY) and not process_alive(int(t[w, P_OWNER]))
                        and not process_alive(int(t[w, P_PID]))):
                    self._kill_locked(w)  # (a live one frees itself when it notices)
            in_use = int(((t[:, P_STATE] == STARTING) | (t[:, P_STATE] == BUSY)).sum())
            room = min(want, max_total - in_use)
            chosen = []
            for wanted_state in (IDLE, UNSTARTED):
                for w in range(self.size):
                    if len(chosen) >= room:
                        break
                    if t[w, P_STATE] != wanted_state:
                        continue
                    if wanted_state == IDLE and not process_alive(int(t[w, P_PID])):
                        continue  # dead; the master will mark it UNSTARTED
                    t[w, P_STATE] = BUSY if wanted_state == IDLE else STARTING
                    t[w, P_OWNER] = me
                    t[w, P_TASK] = 0
                    chosen.append(w)
        return chosen

    def start_claimed(self, ws: list[int]) -> list[int]:
        """Make sure the claimed workers run: ask the master to fork the STARTING ones and
        wait for their "ready".  Returns the workers that are ready (the others are given
        back)."""
        starting = [w for w in ws if self.table[w, P_STATE] == STARTING]
        for w in starting:
            self.results[w].drain()  # whatever a dead predecessor left half-written
            self.control.send(("start", w), timeout=1.0)
        ready = [w for w in ws if w not in starting]
        deadline = time.monotonic() + START_TIMEOUT_S
        for w in starting:
            msg = None
            while time.monotonic() < deadline:
                msg = self.results[w].recv(timeout=POLL_S)
                if msg is not None and msg[0] in ("ready", "failed"):
                    break
                if not process_alive(self.master_pid):
                    break
            if msg is not None and msg[0] == "ready":
                with self._locked():
                    self.table[w, P_STATE] = BUSY
                    self.table[w, P_PID] = msg[1]
                ready.append(w)
            else:
                self.give_up(w)
        return ready

    def send_task(self, w: int, task_id: int, fn, arg, timeout: float) -> None:
        """Send a claimed worker its task: the worker calls ``fn(backend, results, task_id,
        arg)`` (see "Tasks" in the module docstring).  Raises ``TimeoutError`` or ``OSError``
        if the worker does not take it; ``pickle`` errors if ``fn`` or ``arg`` do not pickle."""
        self.tasks[w].send(("task", task_id, fn, arg), timeout=timeout)

    def release(self, w: int) -> None:
        """The worker sent its final message: back to the pool."""
        with self._locked():
            if self.table[w, P_OWNER] == os.getpid():
                self.table[w, P_STATE] = IDLE
                self.table[w, P_OWNER] = 0
                self.table[w, P_TASK] = 0

    def give_up(self, w: int) -> None:
        """The worker does not answer (or never started): kill it; it restarts on demand."""
        if self.closed:
            return
        with self._locked():
            self._kill_locked(w)

    def _kill_locked(self, w: int) -> None:
        pid = int(self.table[w, P_PID])
        if pid and process_alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.table[w, P_STATE] = UNSTARTED
        self.table[w, P_PID] = 0
        self.table[w, P_OWNER] = 0
        self.table[w, P_TASK] = 0


# ---------------------------------------------------------------------------------------------
# the master
def _owner_gone(pool: WorkerPool) -> bool:
    """The instance's owner died (its death pipe reads EOF; see minidb.instance)."""
    alive = getattr(pool.instance, "owner_alive", None)
    return alive is not None and not alive()


def _master_main(pool: WorkerPool) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    set_parent_death_signal(signal.SIGKILL)  # nothing of ours may outlive the owner
    owner = pool.owner_pid
    children: dict[int, int] = {}  # pid -> worker index
    try:
        while True:
            msg = pool.control.recv(timeout=POLL_S)
            _reap(pool, children, block=False)
            if os.getppid() != owner or _owner_gone(pool):
                break  # the instance's process is gone
            if msg is None:
                continue
            if msg[0] == "shutdown":
                break
            if msg[0] == "start":
                _fork_worker(pool, children, int(msg[1]))
    finally:
        _stop_workers(pool, children)
        os._exit(0)


def _fork_worker(pool: WorkerPool, children: dict, w: int) -> None:
    for pid, ww in list(children.items()):  # a predecessor that is still dying
        if ww == w:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            children.pop(pid, None)
    if pool.table[w, P_STATE] != STARTING:
        return  # the leader gave up meanwhile
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the worker
        code = 0
        try:
            _worker_main(pool, w)
        except BaseException:  # pragma: no cover - a bug in the loop itself
            traceback.print_exc()
            code = 1
        finally:
            os._exit(code)
    children[pid] = w
    with pool.lock:
        pool.table[w, P_PID] = pid


def _reap(pool: WorkerPool, children: dict, block: bool) -> None:
    reaped = False
    while children:
        try:
            pid, _status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            children.clear()
            break
        if pid == 0:
            break
        w = children.pop(pid, None)
        reaped = True
        if w is not None:
            with pool.lock:
                if pool.table[w, P_PID] == pid:
                    pool.table[w, P_PID] = 0
                    if pool.table[w, P_STATE] == IDLE:
                        pool.table[w, P_STATE] = UNSTARTED
    if reaped:
        try:  # free the dead workers' backend slots now, not at the reaper's next tick
            pool.instance.reap_dead_backends()
        except Exception:  # pragma: no cover
            pass


def _stop_workers(pool: WorkerPool, children: dict) -> None:
    for pid, w in list(children.items()):
        try:
            pool.tasks[w].send(("stop",), timeout=0.5)
        except (TimeoutError, OSError):
            pass
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while children and time.monotonic() < deadline:
        _reap(pool, children, block=False)
        time.sleep(0.01)
    for pid in list(children):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _reap(pool, children, block=True)
    with pool.lock:
        pool.table[:, P_STATE] = UNSTARTED
        pool.table[:, P_PID] = 0
        pool.table[:, P_OWNER] = 0


# ---------------------------------------------------------------------------------------------
# a worker
def _worker_main(pool: WorkerPool, w: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    set_parent_death_signal(signal.SIGKILL)  # the master's death (it follows the owner's)
    master = os.getppid()
    inst = pool.instance
    tasks, results = pool.tasks[w], pool.results[w]
    tasks.drain()  # a task half-written to a predecessor that was killed
    backend = None
    deadline = time.monotonic() + START_TIMEOUT_S / 2
    while backend is None:
        try:
            backend = inst.connect(worker=True)
        except TooManyConnections as e:  # a dead worker's slot not freed yet
            inst.reap_dead_backends()
            if time.monotonic() > deadline:
                results.send(("failed", repr(e)), timeout=1.0)
                return
            time.sleep(0.02)
    results.send(("ready", os.getpid()), timeout=START_TIMEOUT_S)
    try:
        while True:
            msg = tasks.recv(timeout=POLL_S * 5)
            if msg is None:
                if os.getppid() != master or _owner_gone(pool):
                    return
                continue
            if msg[0] == "stop":
                return
            if msg[0] == "task":
                _, task_id, fn, arg = msg
                with pool.lock:
                    pool.table[w, P_TASK] = task_id
                fn(backend, results, task_id, arg)
                with pool.lock:  # a leader that died cannot give us back: do it ourselves
                    owner = int(pool.table[w, P_OWNER])
                    if pool.table[w, P_STATE] == BUSY and owner and not process_alive(owner):
                        pool.table[w, P_STATE] = IDLE
                        pool.table[w, P_OWNER] = 0
                        pool.table[w, P_TASK] = 0
    finally:
        try:
            backend.close()
        except Exception:  # pragma: no cover
            pass
