"""Deadlock detection over ONE wait-for graph: heavyweight lock waits and transaction waits
(PostgreSQL's ``deadlock.c``, without queue rearrangement).

A backend waits for one thing at a time, either

* a heavyweight lock (``minidb.txn.lmgr``: ``proc_wait_lock[s]``, ``proc_wait_mode[s]``),
  giving a *hard* edge to every other slot holding a conflicting mode and a *soft* edge to
  every slot ahead of it in the same queue asking for a conflicting mode (it cannot be
  woken before them); or
* the end of a transaction (a row lock: ``ProcArray.wait_for``: ``proc_wait_xid[s]``),
  giving an edge to the slot whose ``proc_xid`` is that xid - PostgreSQL's ShareLock on
  the transaction tag.

``check(seg, locks, slot, table)`` is run once by a waiter whose ``deadlock_timeout`` has
passed (the optimistic scheme: waits usually end sooner, and only the waiter pays).  It
takes every lock-manager partition lock in order and then the procarray lock, so the graph
is one consistent picture, and looks for a cycle through ``slot`` by depth-first search.
A cycle elsewhere is left to its own members' timers: the process that closed a cycle is
waiting, so its check finds it.  On a cycle the caller is the victim: still under the same
locks it leaves its queue (waking whoever that unblocks) or clears its ``proc_wait_xid``,
so two members checking at once cannot both see the cycle and both give up.

Departure from PostgreSQL: a cycle through a soft edge is a deadlock too; PostgreSQL would
first try to reorder the wait queue to break it.  The insert-ahead rule of the lock
manager already avoids the usual soft cycle (two holders upgrading behind each other).
"""

from __future__ import annotations

import numpy as np

from minidb.errors import DeadlockDetected
from minidb.shmem import N_LOCK_PARTITIONS
from minidb.txn import lockdefs


def _edges(seg, table, lockdefs) -> dict[int, list[tuple[int, str]]]:
    """slot -> [(blocking slot, what the slot waits for)]"""
    out: dict[int, list] = {}
    xids = seg.proc_xid
    for s in np.flatnonzero(seg.proc_wait_xid).tolist():
        x = int(seg.proc_wait_xid[s])
        hs = np.flatnonzero(xids == x).tolist()
        for t in hs:
            if t != s:
                out.setdefault(s, []).append((t, f"ShareLock on transaction {x}"))
    for s in np.flatnonzero(seg.proc_wait_lock >= 0).tolist():
        if seg.proc_wait_status[s] != lockdefs.WAITING:
            continue
        e = int(seg.proc_wait_lock[s])
        mode = int(seg.proc_wait_mode[s])
        conf = lockdefs.CONFLICTS[mode]
        tag = tuple(int(v) for v in seg.lock_tag[e])
        what = f"{lockdefs.MODE_NAMES[mode]} on {lockdefs.describe_tag(tag)}"
        lst = out.setdefault(s, [])
        hold = seg.lock_hold[e]
        for t in np.flatnonzero(hold).tolist():
            if t != s and int(hold[t]) & conf:
                lst.append((t, what))
        for t in table.waiters(e):
            if t == s:
                break
            if conf >> int(seg.proc_wait_mode[t]) & 1:
                lst.append((t, what))
    return out


def find_cycle(edges: dict, start: int) -> list[tuple[int, int, str]] | None:
    """A cycle of ``edges`` through ``start`` as [(waiter, blocker, what)], or None."""
    path: list[tuple[int, int, str]] = []
    seen: set[int] = set()

    def dfs(s: int) -> bool:
        for t, what in edges.get(s, ()):
            path.append((s, t, what))
            if t == start:
                return True
            if t not in seen:
                seen.add(t)
                if dfs(t):
                    return True
            path.pop()
        return False

    seen.add(start)
    return list(path) if dfs(start) else None


def check(seg, locks, slot: int, table):
    """DeadLockCheck for ``slot`` (see the module docstring); returns the cycle (and has
    taken ``slot`` out of the graph) or None."""
    for p in range(N_LOCK_PARTITIONS):
        locks.lockmgr[p].acquire()
    try:
        with locks.procarray:
            hw = seg.proc_wait_lock[slot] >= 0 and \
                seg.proc_wait_status[slot] == lockdefs.WAITING
            if not hw and not seg.proc_wait_xid[slot]:
                return None   # granted (or woken) meanwhile
            cycle = find_cycle(_edges(seg, table, lockdefs), slot)
            if cycle is None:
                return None
            pids = [int(seg.proc_pid[s]) for s, _, _ in cycle]
            cycle = [(s, t, what, pid, int(seg.proc_pid[t]))
                     for (s, t, what), pid in zip(cycle, pids)]
            if hw:
                part = int(seg.proc_wait_lock[slot]) // table.lp
                table.leave_queue(part, slot)
            else:
                seg.proc_wait_xid[slot] = 0
            return cycle
    finally:
        for p in reversed(range(N_LOCK_PARTITIONS)):
            locks.lockmgr[p].release()


def deadlock_error(cycle, describe=None) -> DeadlockDetected:
    """PostgreSQL's DeadLockReport: 40P01 with one DETAIL line per edge of the cycle."""
    lines = [f"Process {pid} waits for {what}; blocked by process {bpid}."
             for _s, _t, what, pid, bpid in cycle]
    err = DeadlockDetected("deadlock detected\nDETAIL:  " + "\n".join(lines)
                           + "\nHINT:  See server log for query details.")
    err.detail = "\n".join(lines)
    err.cycle_slots = [s for s, *_ in cycle]
    return err
