"""The proc array: running transactions, snapshots, the xmin horizon, waits for a transaction.

Shared state (``minidb.shmem``, guarded by the ``procarray`` lock, PostgreSQL's
ProcArrayLock and XidGenLock in one):

=====================  ==================================================================
``proc_xid[slot]``     the slot's top-level xid while its transaction runs, else 0
``proc_xmin[slot]``    xmin of the snapshot the slot holds (0: none), published so that
                       others know which old versions it may still read
``proc_wait_xid``      the xid the slot sleeps on (0: not waiting) - the wait-for graph
``proc_xact_waiters``  per slot, the slots sleeping until its transaction ends
``proc_subxids[slot]`` the live subtransaction xids of the slot's transaction (the first
                       ``proc_nsubxids[slot]`` entries; PGPROC's subxids cache, see
                       ``minidb.txn.subxact``)
``CTL_NEXT_XID``       the next xid to hand out
``CTL_LATEST_COMPLETED``  the newest xid that committed or aborted
``CTL_XACT_COMPLETION``   how many transactions with an xid have left the proc array
                          (PostgreSQL 14's xactCompletionCount)
``CTL_SUBXIDS``        live subtransaction xids over all slots (0: the lookups skip
                       ``proc_subxids``)
=====================  ==================================================================

Protocols (PostgreSQL's, ``procarray.c``):

* **xid assignment** happens at a transaction's first write; the new xid is published in
  ``proc_xid`` under the same lock that hands it out, so no snapshot can miss it.  The
  counter is not persisted here: at open, recovery (``minidb.recovery``) sets it from the
  last checkpoint record's next xid and moves it past every xid of a replayed record, as
  PostgreSQL does - an xid found on a page or as a final status in the commit log was
  logged before either reached the disk (WAL before data), so it is never handed out
  again; the commit log's statuses past the counter are cleared (``CommitLog.trim``).
  The first xid of a commit-log page has its page zeroed (``CommitLog.extend``) before it
  is handed out, under the same lock (ExtendCLOG).
* **snapshot**: ``xmax = latest_completed + 1``; ``xip`` = running xids below xmax except
  the caller's own; ``xmin`` = the smallest running xid (the caller's own included), or
  xmax.  The slot's ``proc_xmin`` is set if it had none.  Running xids are the top-level
  xids and the subtransaction xids of every slot (PostgreSQL's xip and subxip in one
  array); the caller's own subtransaction xids are left out of ``xip`` and listed in
  ``Snapshot.subxids`` instead: they are "me" to the visibility rules
  (TransactionIdIsCurrentTransactionId).
* **subtransactions** (``add_subxid`` / ``remove_subxids``): a subxid is published in the
  slot's cache under the same lock that hands it out; one that aborts (ROLLBACK TO) leaves
  the cache after the commit log says aborted, advancing ``latest_completed`` and the
  completion counter and waking the slot's waiters (a waiter on that subxid finds it gone;
  the others sleep again) - XidCacheRemoveRunningXids.  At the top-level end the whole
  tree leaves together.
* **end of transaction**: the commit log is written *first* (commit or abort), then the
  xid leaves the proc array and ``latest_completed`` advances, under the lock.  So a reader
  that asks "is xid still running?" checks the proc array (or its snapshot) *before* the
  commit log: in the window between the two steps the log already says committed while
  the proc array still says running, and a snapshot taken then must still see it running.
* **horizon** (``global_xmin``): the oldest xmin any slot publishes or any running xid,
  else ``latest_completed + 1``.  A version deleted by a committed transaction older than
  this is dead to everyone.
* **waiting for a transaction** (XactLockTableWait): the waiter puts its bit in the
  holder's ``proc_xact_waiters`` mask and its target xid in ``proc_wait_xid``, then sleeps
  on its own semaphore; the holder wakes the mask when it ends.  After
  ``deadlock_timeout`` the waiter runs the deadlock check of ``minidb.txn.deadlock`` over
  the one wait-for graph of xid waits and heavyweight lock waits (``minidb.txn.lmgr``)
  and, if a cycle comes back to itself, it is the victim and gets SQLSTATE 40P01.  ``lock_timeout`` (0 = wait forever, bounded anyway by
  ``lock_wait_timeout_ms``) ends the wait with 55P03.

Invariants:
  1. ``proc_xid[s] != 0`` iff the commit log says IN_PROGRESS for it, except in the short
     window of ``end_transaction`` between the log write and the proc-array update.
  2. ``latest_completed`` never decreases; ``global_xmin()`` never decreases.
  3. A slot *sets* its ``proc_xmin`` only under the lock (with the snapshot it belongs
     to), but *clears* it without: only the owner writes it, and a horizon computed by
     someone else just before the store only holds back a little more than needed.
     Likewise a transaction that never got an xid ends without the lock (nobody can be
     waiting for it: waiters look for a holder of an xid).
"""

from __future__ import annotations

import time

import numpy as np

from minidb.errors import LockNotAvailable, ProgramLimitExceeded
from minidb.shmem import CURRENT_PID as _PID
from minidb.shmem import CTL_LATEST_COMPLETED, CTL_NEXT_XID, CTL_SUBXIDS, CTL_XACT_COMPLETION
from minidb.txn import deadlock
from minidb.txn.clog import ABORTED, COMMITTED, FIRST_NORMAL_XID, IN_PROGRESS


_NO_SUBXIDS: frozenset = frozenset()
_EMPTY_XIP = np.zeros(0, dtype=np.int64)   # shared by the snapshots that have no xip
_EMPTY_XIP.flags.writeable = False


class Snapshot:
    """An MVCC snapshot: which transactions had committed when it was taken."""

    __slots__ = ("xmin", "xmax", "xip", "_xip_set", "curcid", "myxid", "subxids")

    def __init__(self, xmin: int, xmax: int, xip: np.ndarray, curcid: int = 0, myxid: int = 0,
                 subxids: frozenset = frozenset()):
        self.xmin = xmin
        self.xmax = xmax
        self.xip = xip  # sorted int64
        self._xip_set = frozenset(xip.tolist())
        self.curcid = curcid
        self.myxid = myxid      # the top-level xid of the snapshot's own transaction
        self.subxids = subxids  # its live subtransaction xids (also "me")

    def is_mine(self, xid: int) -> bool:
        """TransactionIdIsCurrentTransactionId for the snapshot's own transaction."""
        return bool(xid) and (xid == self.myxid or xid in self.subxids)

    def xid_running(self, xid: int) -> bool:
        """XidInMVCCSnapshot: does this snapshot consider ``xid`` still running?"""
        if xid < self.xmin:
            return False
        if xid >= self.xmax:
            return True
        return xid in self._xip_set

    def xids_running(self, xids: np.ndarray) -> np.ndarray:
        """Vectorized ``xid_running``."""
        xids = np.asarray(xids, dtype=np.int64)
        res = xids >= self.xmax
        if self.xip.size:
            mid = (xids >= self.xmin) & ~res
            if mid.any():
                pos = np.searchsorted(self.xip, xids[mid])
                pos = np.minimum(pos, self.xip.size - 1)
                res[mid] = self.xip[pos] == xids[mid]
        return res

    def with_cid(self, curcid: int) -> "Snapshot":
        s = Snapshot.__new__(Snapshot)
        s.xmin, s.xmax, s.xip, s._xip_set = self.xmin, self.xmax, self.xip, self._xip_set
        s.curcid, s.myxid, s.subxids = curcid, self.myxid, self.subxids
        return s

    def __repr__(self) -> str:
        return (f"Snapshot(xmin={self.xmin}, xmax={self.xmax}, xip={self.xip.tolist()}, "
                f"curcid={self.curcid}, myxid={self.myxid}"
                + (f", subxids={sorted(self.subxids)})" if self.subxids else ")"))


class ProcArray:
    """Access to the shared proc array for one process."""

    def __init__(self, seg, locks, clog):
        self.seg = seg
        self.locks = locks
        self.lock = locks.procarray
        self._lock_fast = self.lock.fast()   # (sem_try, sem_give, holder words, index)
        self.clog = clog
        ctl = seg.control
        ctl[CTL_NEXT_XID] = FIRST_NORMAL_XID  # recovery moves it on (see the docstring)
        ctl[CTL_LATEST_COMPLETED] = FIRST_NORMAL_XID - 1
        self._on_wait_tick = None  # set by the instance: reap dead backends while waiting
        self._table = None         # the shared lock table, for the deadlock check
        # per slot of this process: (completion count, xmax, myxid, xmin, xip, xip set) of
        # its last snapshot, for reuse (see the docstring)
        self._last_snapshot: dict[int, tuple] = {}
        self._horizon_bound = 0    # the newest global_xmin() seen: a lower bound forever
        self.snapshots_taken = 0   # snapshots computed by scanning the proc array
        self.snapshots_reused = 0  # snapshots reused (tests read both)
        # memoryviews of the arrays the per-statement paths read (a scalar read through
        # one costs about half of numpy's element access)
        self._ctl = memoryview(seg.control)
        self._xmin = memoryview(seg.proc_xmin)
        self._xid = memoryview(seg.proc_xid)
        self._wait_xid = memoryview(seg.proc_wait_xid)
        self._waiters = memoryview(seg.proc_xact_waiters)
        self._nsub = memoryview(seg.proc_nsubxids)
        # a committer's delay_chkpt flag (set and cleared by ``minidb.txn.xact``)
        self.delay_chkpt = memoryview(seg.proc_delay_chkpt)

    # -- xids -----------------------------------------------------------------------------------
    def assign_xid(self, slot: int) -> int:
        cv = self._ctl
        with self.lock:
            xid = cv[CTL_NEXT_XID]
            self.clog.extend(xid, slot)  # zero (and log) a new commit-log page first
            cv[CTL_NEXT_XID] = xid + 1
            self._xid[slot] = xid
        return xid

    def add_subxid(self, slot: int, parent: int) -> int:
        """Assign a subtransaction xid to the transaction of ``slot`` (whose top-level xid
        ``parent`` is) and publish it in the slot's subxids cache (54000 when full: minidb
        has no pg_subtrans to overflow into)."""
        seg = self.seg
        ctl = seg.control
        with self.lock:
            n = int(seg.proc_nsubxids[slot])
            if n >= seg.proc_subxids.shape[1]:
                raise ProgramLimitExceeded(
                    f"too many subtransactions with an xid in one transaction (at most "
                    f"{seg.proc_subxids.shape[1]})")
            assert seg.proc_xid[slot] == parent
            xid = int(ctl[CTL_NEXT_XID])
            self.clog.extend(xid, slot)
            ctl[CTL_NEXT_XID] = xid + 1
            seg.proc_subxids[slot, n] = xid
            seg.proc_nsubxids[slot] = n + 1
            ctl[CTL_SUBXIDS] += 1
        return xid

    def subxids_of(self, slot: int) -> list[int]:
        n = int(self.seg.proc_nsubxids[slot])
        return self.seg.proc_subxids[slot, :n].tolist() if n else []

    def remove_subxids(self, slot: int, xids) -> None:
        """Aborted subtransactions leave the slot's cache (their commit-log status is
        already ABORTED): XidCacheRemoveRunningXids, then wake the slot's waiters."""
        if not xids:
            return
        seg = self.seg
        gone = set(xids)
        with self.lock:
            n = int(seg.proc_nsubxids[slot])
            keep = [x for x in seg.proc_subxids[slot, :n].tolist() if x not in gone]
            seg.proc_subxids[slot, :len(keep)] = keep
            seg.proc_subxids[slot, len(keep):n] = 0
            seg.proc_nsubxids[slot] = len(keep)
            seg.control[CTL_SUBXIDS] -= n - len(keep)
            top = max(gone)
            if top > seg.control[CTL_LATEST_COMPLETED]:
                seg.control[CTL_LATEST_COMPLETED] = top
            seg.control[CTL_XACT_COMPLETION] += 1
            waiters = int(seg.proc_xact_waiters[slot])
            seg.proc_xact_waiters[slot] = 0
            # the woken no longer wait (they name the top-level xid, which still runs)
            # until they find their xid running again and sleep anew
            w, s = waiters, 0
            while w:
                if w & 1:
                    seg.proc_wait_xid[s] = 0
                w >>= 1
                s += 1
        self._wake(waiters)

    def next_xid(self) -> int:
        return int(self.seg.control[CTL_NEXT_XID])

    # -- snapshots --------------------------------------------------------------------------------
    def get_snapshot(self, slot: int, myxid: int, curcid: int) -> Snapshot:
        seg = self.seg
        cv = self._ctl
        last = self._last_snapshot.get(slot)
        # the ProcArray lock inline (``LWLock.fast``: the same semaphore operations and
        # holder record as ``with self.lock``, without its two Python frames)
        try_, give, hw, hidx = self._lock_fast
        if hw is not None and try_(False):
            hw[hidx] = _PID[0]
        else:
            self.lock.acquire()     # (the blocking path; it records the holder too)
        try:
            count = cv[CTL_XACT_COMPLETION]
            xmax = cv[CTL_LATEST_COMPLETED] + 1
            # an xid of our own got since (myxid at or past xmax) changes nothing: it is
            # not below xmax, so neither in xip nor the xmin
            if (last is not None and last[0] == count and last[1] == xmax
                    and (last[2] == myxid or (not last[2] and myxid >= xmax))):
                xmin = last[3]
                xmins = self._xmin
                if not xmins[slot]:
                    xmins[slot] = xmin
                self.snapshots_reused += 1
                s = Snapshot.__new__(Snapshot)
                s.xmin, s.xmax, s.xip, s._xip_set = xmin, xmax, last[4], last[5]
                s.curcid, s.myxid = curcid, myxid
                s.subxids = _NO_SUBXIDS
                if myxid and cv[CTL_SUBXIDS]:
                    n = seg.proc_nsubxids[slot]
                    if n:
                        s.subxids = frozenset(seg.proc_subxids[slot, :n].tolist())
                return s
            if not cv[CTL_SUBXIDS]:
                # no subtransaction xids anywhere (the common case): plain Python over the
                # few running xids, fewer steps than the numpy way below
                plain = [x for x in seg.proc_xid[seg.proc_xid != 0].tolist() if x < xmax]
                xmin = min(plain) if plain else xmax
                if myxid and myxid < xmin:
                    xmin = myxid
                xmins = self._xmin
                if not xmins[slot]:
                    xmins[slot] = xmin
            else:
                plain = None
                xids = seg.proc_xid[seg.proc_xid != 0]
                nsub = seg.proc_nsubxids
                subs = seg.proc_subxids[np.arange(seg.proc_subxids.shape[1]) < nsub[:, None]]
                xids = np.concatenate([xids, subs])
                running = xids[xids < xmax]
                xmin = int(running.min()) if running.size else xmax
                if myxid:
                    xmin = min(xmin, myxid)
                if seg.proc_xmin[slot] == 0:
                    seg.proc_xmin[slot] = xmin
                own = (frozenset(seg.proc_subxids[slot, :nsub[slot]].tolist())
                       if myxid and nsub[slot] else _NO_SUBXIDS)
        finally:
            if hw is not None:
                hw[hidx] = 0
                give()
            else:
                self.lock.release()
        self.snapshots_taken += 1
        if plain is not None:
            xs = [x for x in plain if x != myxid]
            if xs:
                xs.sort()
                xip = np.array(xs, dtype=np.int64)
            else:
                xip = _EMPTY_XIP
            snap = Snapshot.__new__(Snapshot)
            snap.xmin, snap.xmax, snap.xip, snap._xip_set = xmin, xmax, xip, frozenset(xs)
            snap.curcid, snap.myxid, snap.subxids = curcid, myxid, _NO_SUBXIDS
        else:
            mine = running != myxid
            if own:
                mine &= ~np.isin(running, list(own))
            xip = np.sort(running[mine])
            snap = Snapshot(xmin, xmax, xip, curcid, myxid, own)
        self._last_snapshot[slot] = (count, xmax, myxid, xmin, xip, snap._xip_set)
        return snap

    def clear_xmin(self, slot: int) -> None:
        """The slot holds no snapshot any more (SnapshotResetXmin).

        No lock, as in PostgreSQL: only the owner writes its xmin, and a horizon computed
        just before the store is merely older than it could be (invariant 3)."""
        self._xmin[slot] = 0

    def global_xmin(self) -> int:
        """The horizon: versions deleted before it are dead to every snapshot."""
        seg = self.seg
        with self.lock:
            h = int(seg.control[CTL_LATEST_COMPLETED]) + 1
            xs = seg.proc_xid.tolist()
            ms = seg.proc_xmin.tolist()
        # plain Python over the slots' values: fewer steps than numpy's at MAX_SLOTS
        for x in xs:
            if x and x < h:
                h = x
        for x in ms:
            if x and x < h:
                h = x
        if h > self._horizon_bound:
            self._horizon_bound = h
        return h

    def vis_horizon(self, xid: int, slot: int = -1) -> int:
        """A horizon to test ``xid`` against (GlobalVisTestIsRemovableXid's way): the
        bound kept from the last ``global_xmin()`` when it already lies past ``xid``, or
        when no horizon can (``xid`` after ``latest_completed``, or not before the xmin
        that ``slot``, the caller's, publishes), else the exact ``global_xmin()``.  Never
        newer than the true horizon, and ``xid < vis_horizon(xid)`` is exactly
        ``xid < global_xmin()``; other xids tested against the value may be judged
        conservatively."""
        b = self._horizon_bound
        if xid < b:
            return b
        seg = self.seg
        if xid > seg.control[CTL_LATEST_COMPLETED]:
            return b
        if slot >= 0:
            own = seg.proc_xmin[slot]
            if own and xid >= own:
                return b
        return self.global_xmin()

    def is_in_progress(self, xid: int) -> bool:
        """TransactionIdIsInProgress: is ``xid`` (top-level or subtransaction) in the proc
        array now?"""
        if xid < FIRST_NORMAL_XID:
            return False
        seg = self.seg
        if (seg.proc_xid == xid).any():
            return True
        return bool(seg.control[CTL_SUBXIDS] and (seg.proc_subxids == xid).any())

    def in_progress_vec(self, xids: np.ndarray) -> np.ndarray:
        seg = self.seg
        running = seg.proc_xid[seg.proc_xid != 0]
        if seg.control[CTL_SUBXIDS]:
            running = np.concatenate([running, seg.proc_subxids[seg.proc_subxids != 0]])
        return np.isin(xids, running)

    def _holder(self, xid: int) -> tuple[int, int]:
        """(slot, its top-level xid) of the transaction running ``xid``, or (-1, 0); under
        the lock."""
        seg = self.seg
        holders = np.flatnonzero(seg.proc_xid == xid)
        if holders.size:
            return int(holders[0]), xid
        if seg.control[CTL_SUBXIDS]:
            rows = np.flatnonzero((seg.proc_subxids == xid).any(axis=1))
            if rows.size:
                h = int(rows[0])
                return h, int(seg.proc_xid[h])
        return -1, 0

    # -- end of transaction -----------------------------------------------------------------------
    def end_transaction(self, slot: int, xid: int, committed: bool, lsn: int = 0,
                        subxids=()) -> None:
        """Record the outcome (``lsn``: the end of the commit record, the commit-log page's
        group LSN) of ``xid`` and its live ``subxids`` together (``CommitLog.set_tree``),
        then leave the proc array (the subxids with it), then wake the waiters."""
        seg = self.seg
        if not xid and not self._xid[slot] and not self._wait_xid[slot] \
                and not self._waiters[slot]:
            # A transaction without an xid (read-only) has nothing to publish: nobody can
            # wait for it and latest_completed does not move.  Only the snapshot's xmin
            # goes, without the lock (ProcArrayEndTransaction's no-xid path; invariant 3).
            self._xmin[slot] = 0
            return
        if xid:
            if subxids:
                self.clog.set_tree(xid, subxids, COMMITTED if committed else ABORTED, lsn=lsn)
            else:
                self.clog.set_status(xid, COMMITTED if committed else ABORTED, lsn=lsn)
        cv = self._ctl   # (memoryviews: one element each, see __init__)
        with self.lock:
            self._xid[slot] = 0
            n = self._nsub[slot]
            if n:
                top = int(seg.proc_subxids[slot, :n].max())
                if top > cv[CTL_LATEST_COMPLETED]:
                    cv[CTL_LATEST_COMPLETED] = top
                seg.proc_subxids[slot, :n] = 0
                self._nsub[slot] = 0
                cv[CTL_SUBXIDS] -= n
            self._xmin[slot] = 0
            self._wait_xid[slot] = 0
            if xid and xid > cv[CTL_LATEST_COMPLETED]:
                cv[CTL_LATEST_COMPLETED] = xid
            cv[CTL_XACT_COMPLETION] += 1  # every slot's last snapshot is stale
            waiters = self._waiters[slot]
            if waiters:
                self._waiters[slot] = 0
        if waiters:
            self._wake(waiters)

    def abort_dead_slot(self, slot: int) -> int:
        """End the transaction of a backend whose process died: its xid becomes aborted.
        Returns the xid (0 if it had none)."""
        xid = int(self.seg.proc_xid[slot])
        if xid and self.clog.status(xid) == IN_PROGRESS:
            subs = [x for x in self.subxids_of(slot) if self.clog.status(x) == IN_PROGRESS]
            self.end_transaction(slot, xid, committed=False, subxids=subs)
        else:
            self.end_transaction(slot, 0, committed=False)
        return xid

    def _wake(self, mask: int) -> None:
        slot = 0
        while mask:
            if mask & 1:
                self.locks.sem[slot].release()
            mask >>= 1
            slot += 1

    # -- waiting for a transaction ------------------------------------------------------------------
    def wait_for(self, slot: int, xid: int, *, lock_timeout_ms: int, deadlock_timeout_ms: int,
                 max_wait_ms: int, what: str = "") -> None:
        """Sleep until transaction ``xid`` has ended (XactLockTableWait)."""
        seg = self.seg
        bit = 1 << slot
        start = time.monotonic()
        limit_ms = lock_timeout_ms if lock_timeout_ms > 0 else max_wait_ms
        deadline = start + limit_ms / 1000.0
        check_at = start + deadlock_timeout_ms / 1000.0
        checked = False
        try:
            while True:
                with self.lock:
                    holder, top = self._holder(xid)
                    if holder < 0:
                        return
                    seg.proc_xact_waiters[holder] |= np.uint64(bit)
                    # a subxid's waiter waits on its top-level transaction in the graph
                    seg.proc_wait_xid[slot] = top
                now = time.monotonic()
                if not checked and now >= check_at:
                    checked = True
                    cycle = deadlock.check(seg, self.locks, slot, self._lock_table())
                    if cycle is not None:
                        raise deadlock.deadlock_error(cycle)
                if now >= deadline:
                    raise LockNotAvailable(
                        "canceling statement due to lock timeout" if lock_timeout_ms > 0
                        else f"timed out after {max_wait_ms} ms waiting for transaction {xid}")
                wake_at = min(deadline, check_at if not checked else deadline, now + 0.1)
                self.locks.sem[slot].acquire(timeout=max(0.001, wake_at - now))
                if self._on_wait_tick is not None:
                    self._on_wait_tick()
        finally:
            with self.lock:
                seg.proc_wait_xid[slot] = 0
                for h in np.flatnonzero(seg.proc_xact_waiters & np.uint64(bit)).tolist():
                    seg.proc_xact_waiters[h] &= ~np.uint64(bit)

    def _lock_table(self):
        if self._table is None:
            from minidb.txn.lmgr import SharedLockTable
            self._table = SharedLockTable(self.seg, self.locks)
        return self._table
