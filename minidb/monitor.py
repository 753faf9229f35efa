"""The instance's monitor process: who notices a crash while the owner is busy elsewhere.

PostgreSQL's postmaster keeps no shared state, so it can always act: when a backend dies
abnormally it tells every other backend to quit, resets shared memory and starts crash
recovery.  In minidb the postmaster's part is played by the process that opened the data
directory (the *owner*), which is also the user's program - busy with anything, maybe for
a long time.  So the instance forks a small *monitor* process when it opens (and again after
each crash restart).  It takes no lock, holds no backend slot and writes nothing but the
crash flag; every ``MONITOR_INTERVAL_S`` it

1. exits if the owner is gone (the instance's death pipe reads EOF, or its parent changed);
2. looks at every backend slot whose process is not the owner: a dead process whose death
   is a crash (``crash_reason``: it held an LWLock, was inside a WAL critical section,
   held a buffer's content lock in exclusive mode, or was in a transaction that created
   relation files - a CREATE INDEX killed mid-way - whose removal needs recovery) sets
   the crash flag.  A process that
   died outside those keeps the owner reaper's cheap clean-up (its transaction aborted,
   its slot, pins and locks freed), which the monitor leaves alone;
3. once the crash flag is set (by itself, by a wait that found a dead holder, by the
   owner's reaper): SIGKILLs every other process of the instance it knows of - the
   processes of the backend slots, the parallel workers and the pool master (PostgreSQL's
   SIGQUIT to every child) - so none of them goes on with shared memory that cannot be
   trusted, and exits.

The owner's *postmaster thread* (the reaper, ``minidb.instance``) sees the crash flag at
its next tick and does the rest, at a point where no call of its own threads is inside the
instance: it kills whatever else is attached to the data directory, resets shared memory
(a new segment and new locks), runs crash recovery from the WAL and forks a new pool and a
new monitor (``Instance.crash_restart``).

Invariants:
  1. The monitor never blocks: no LWLock, no semaphore, no file of the data directory.
  2. It never signals the owner, and it exits once the owner is gone (a new owner's
     processes may reuse the old pids).
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np

from minidb.shmem import PROC_CREATED_FILES, pid_alive, set_parent_death_signal
from minidb.storage.bufmgr import EXCLUSIVE
from minidb.wal.xlog import wal_critical_section

MONITOR_INTERVAL_S = 0.05


def changing_a_page(seg, slot: int) -> str:
    """Why a dead backend's death is a crash if it held a buffer's content lock in
    exclusive mode ("" if it held none): it may have died half-way through changing the
    page (a line pointer taken, the tuple header not yet written), before the change reached
    the WAL.  Releasing the lock would let that half-change be read and written to disk,
    where recovery cannot repair it (PostgreSQL changes pages inside critical sections: a
    death there is a PANIC and shared buffers are thrown away)."""
    bufs = np.flatnonzero(seg.backend_locks[slot] == EXCLUSIVE)
    if not len(bufs):
        return ""
    return (f"holding the content lock of buffer{'s' if len(bufs) > 1 else ''} "
            f"{', '.join(str(b) for b in bufs.tolist()[:8])} in exclusive mode (a page may be "
            f"half-changed)")


def crash_reason(seg, locks, slot: int, pid: int) -> str:
    """Why the death of ``pid``, the process of backend ``slot``, is a crash that needs a
    restart ("" if its slot can simply be cleaned up)."""
    held = locks.held_by(pid)
    if held:
        return (f"process {pid} (backend slot {slot}) died holding the {', '.join(held)} "
                f"lock{'s' if len(held) > 1 else ''}")
    why = wal_critical_section(seg, slot) or changing_a_page(seg, slot)
    if not why and int(seg.proc_flags[slot]) & PROC_CREATED_FILES:
        why = ("in a transaction that created relation files (they would be left behind: "
               "recovery removes them)")
    if why:
        return f"process {pid} (backend slot {slot}) died {why}"
    return ""


def instance_pids(seg, owner: int, extra=()) -> set[int]:
    """The processes of the instance besides the owner that shared memory knows of: those
    of the backend slots and of the parallel workers (``extra``: the pool master)."""
    pids = {int(p) for p in seg.proc_pid if p > 0}
    pids.update(int(p) for p in seg.pool[:, 1] if p > 0)  # workers.pool's P_PID column
    pids.update(int(p) for p in extra if p > 0)
    pids.discard(owner)
    pids.discard(os.getpid())
    return pids


def kill_all(pids) -> int:
    """SIGKILL each of ``pids`` that is alive; returns how many were signalled."""
    n = 0
    for pid in pids:
        if pid_alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
                n += 1
            except (ProcessLookupError, PermissionError):
                pass
    return n


def find_crash(seg, locks, owner: int) -> str:
    """Look at every slot of a process other than the owner; the crash reason of the first
    dead one whose death is a crash ("" if none)."""
    pids = seg.proc_pid
    for slot in np.flatnonzero(pids > 0).tolist():
        pid = int(pids[slot])
        if pid <= 0 or pid == owner or pid_alive(pid):
            continue
        why = crash_reason(seg, locks, slot, pid)
        if why and int(pids[slot]) == pid:  # (not freed by the reaper meanwhile)
            return why
    return ""


def run(seg, locks, owner: int, death_r: int | None, extra_pids=()) -> None:
    """The monitor's loop (in the forked monitor process; returns when it should exit)."""
    while True:
        if os.getppid() != owner:
            return
        if death_r is not None:
            try:
                if os.read(death_r, 1) == b"":
                    return  # the owner is gone
            except BlockingIOError:
                pass
            except OSError:  # pragma: no cover
                return
        if not locks.crashed():
            why = find_crash(seg, locks, owner)
            if why:
                locks.mark_crashed(-1, why)
        if locks.crashed():
            kill_all(instance_pids(seg, owner, extra_pids))
            return
        time.sleep(MONITOR_INTERVAL_S)


def start(seg, locks, death_r: int | None, extra_pids=()) -> int:
    """Fork the monitor (the caller is the owner); returns its pid."""
    owner = os.getpid()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            set_parent_death_signal(signal.SIGKILL)
            run(seg, locks, owner, death_r, extra_pids)
        except BaseException:  # pragma: no cover - nothing to report it to
            code = 1
        finally:
            os._exit(code)
    return pid
