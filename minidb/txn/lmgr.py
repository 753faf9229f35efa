"""The heavyweight lock manager: relation (and object) locks held to transaction end
(PostgreSQL's ``lock.c`` and ``lmgr.c``, in the shared segment).

Lock tags are tuples ``(type, field1, field2)`` of ints: ``(LOCKTAG_RELATION, oid, 0)`` for a
table or an index (minidb has one database, so no database field), ``(LOCKTAG_OBJECT,
classid, objid)`` for other catalog objects.  Row locks are not here: they live in the
tuples' xmax and a waiter sleeps on the holder's transaction (``ProcArray.wait_for``); the
deadlock detector (``minidb.txn.deadlock``) sees both kinds of wait in one graph.

The eight modes and their conflict table are PostgreSQL's (``CONFLICTS[m]`` is the bitmask
``1 << m'`` of the modes that conflict with ``m``); a backend never conflicts with itself.

Shared state (``minidb.shmem``; ``NP`` = 16 partitions, ``LP`` lock entries per partition,
``HP`` index cells per partition, ``S`` backend slots, ``FP`` fast-path slots):

====================  ===========  =====================================================
region                shape        meaning (guard)
====================  ===========  =====================================================
lock_tag              (NP*LP, 3)   the tag of each entry, type 0 = free (partition lock)
lock_hash             (NP*LP,)     the tag's hash, for the index (partition lock)
lock_hold             (NP*LP, S)   per entry and slot, the bitmask of modes held: the
                                   PROCLOCK holdMask as a dense matrix (partition lock)
lock_index            (NP, HP)     open-addressing (linear probing) index of the
                                   partition's entries by tag hash, -1 empty
                                   (partition lock)
lock_seq              (NP,)        queue arrival counter of the partition (partition lock)
proc_wait_lock        (S,)         entry the slot waits for, -1 none (partition lock)
proc_wait_mode        (S,)         mode it asked for (partition lock)
proc_wait_status      (S,)         WAITING, GRANTED or REMOVED, set by whoever decides
                                   (partition lock; the sleeper reads it without)
proc_wait_seq         (S,)         its place in the wait queue (partition lock)
fp_relid, fp_bits     (S, FP)      fast path: weak relation locks of each backend
                                   (``fp[slot]`` lock)
fp_strong             (1024,)      strong relation locks per hash bucket; bucket ``b``
                                   is guarded by partition lock ``b % NP``
====================  ===========  =====================================================

A lock's partition is ``hash & 15``; its fast-path strong counter ``hash & 1023`` (so the
counter's partition lock is the lock's).  The wait queue of an entry is the set of slots
whose ``proc_wait_lock`` names it, in ``proc_wait_seq`` order (no linked list to repair).

State machine of one request (``LockManager.acquire``)::

    local hit ─────────────────────────────────────────────────────────────> held
    weak relation mode, strong counter 0, fast-path slot free ──(fp lock)──> held
    shared table (partition lock):
        no conflict with granted modes of others nor with waiters ahead ───> held
        conflict, NOWAIT ───────────────────────────────────────────────────> 55P03
        conflict ──> WAITING (in queue) ──woken by a releaser──> GRANTED ──> held
                         │ deadlock_timeout passed, a cycle through us ────> 40P01
                         │ lock_timeout / lock_wait_timeout_ms passed ─────> 55P03
                         └ (each error path leaves the queue under the partition lock
                            and wakes whoever is now grantable)

Queue rules (``JoinWaitQueue``): a request that conflicts with a waiter's mode waits behind
it (no jumping the queue); a request from a backend that already holds a mode some waiter
waits for is placed just ahead of the first such waiter, and granted at once if it then
conflicts neither with the other holders nor with the waiters ahead.  Wakeup
(``ProcLockWakeup``, run by every releaser): walk the queue in order, granting each waiter
whose mode conflicts neither with other holders nor with the modes of waiters kept asleep
ahead of it.

Fast path (PostgreSQL 9.2's): AccessShare, RowShare and RowExclusive on a relation are
recorded in the backend's own ``fp_relid``/``fp_bits`` row under its own ``fp[slot]`` lock
if the relation's strong counter is 0.  A strong request (Share and above) first raises the
counter, then visits every backend's fast-path row under that backend's lock and moves
matching entries into the shared table, so the conflict check sees them.  A weak locker
reads the counter under its own fp lock, a strong locker raises it before taking that lock,
so one of the two always sees the other.  The common statement (a read of one table and
its index) costs a dict lookup per lock, one uncontended fp-lock cycle to take them all and
one to release them at transaction end.

Release (``release_all``) happens at transaction end (``minidb.txn.xact``), after the
transaction has left the proc array, as in PostgreSQL.  There is no early release of one
lock: every lock here is transaction-scoped, except that a savepoint rolled back releases
the locks its subtransaction took (``release_keys``, after its xids are aborted; as
PostgreSQL's subtransaction resource owner).  A crashed backend's locks (its fast-path row
and its column of ``lock_hold``) are released by ``release_slot``, which the instance's
reaper runs, waking the waiters.

Invariants:
  1. A backend's bit in ``lock_hold[e]`` or ``fp_bits`` for mode m is set iff the backend
     holds m on the tag; ``LockManager.local`` has a key for each (tag, mode) it holds.
  2. An entry is in use (type != 0) iff some slot holds a mode on it or waits for it; it is
     freed (and its index cell deleted by backward shift) when the last one goes.
  3. ``fp_strong[b]`` counts the strong relation locks held or awaited in bucket b; while it
     is nonzero no fast-path entry for a relation of bucket b is created.
  4. ``proc_wait_status[s] == WAITING`` iff ``proc_wait_lock[s] >= 0``.

Departures from PostgreSQL: no per-mode granted/requested counts (the dense hold matrix
gives them); no queue rearrangement by the deadlock detector (any cycle through the waiter
is a deadlock; the insert-ahead rule handles the common upgrade case); no lock groups:
parallel workers take no relation locks at all, because the leader holds them for the
whole scan (its statement) and the workers only read; no session-level or advisory locks.
"""

from __future__ import annotations

import time

import numpy as np

from minidb.errors import LockNotAvailable, OutOfSharedMemory
from minidb.shmem import (FP_SLOTS, FP_STRONG, N_LOCK_PARTITIONS, lock_index_cells,
                          locks_per_partition)
import minidb.shmem as _shmem
from minidb.txn.lockdefs import (  # noqa: F401  (re-exported: callers name them lmgr.X)
    NoLock, AccessShareLock, RowShareLock, RowExclusiveLock, ShareUpdateExclusiveLock,
    ShareLock, ShareRowExclusiveLock, ExclusiveLock, AccessExclusiveLock, MAX_LOCKMODES,
    MODE_NAMES, SQL_MODES, CONFLICTS, FASTPATH_MAX_MODE, STRONG_MIN_MODE, LOCKTAG_RELATION,
    LOCKTAG_TRANSACTION, LOCKTAG_OBJECT, LOCKTYPE_NAMES, NOT_WAITING, WAITING, GRANTED, REMOVED,
    relation_tag, object_tag, tag_hash, describe_tag)

_FASTPATH = -1                             # LOCALLOCK value: held in the fast path
_FP_ZEROS = bytes(FP_SLOTS)                # (release_all clears a row's slots at once)
_FP_ZERO_LIST = [0] * FP_SLOTS

WAKE_TICK_S = 0.1                          # a sleeper wakes this often (reaper, timers)


def prepare_requests(keys) -> tuple:
    """``(key, oid, bucket, mode)`` per ``key = (tag, mode)``: what the fast path needs,
    computed once (a plan keeps its statement's); bucket -1 = not fast-path eligible."""
    out = []
    for key in keys:
        tag, mode = key
        if tag[0] == LOCKTAG_RELATION and mode <= FASTPATH_MAX_MODE:
            out.append((key, tag[1], tag_hash(tag) & (FP_STRONG - 1), mode))
        else:
            out.append((key, tag[1], -1, mode))
    return tuple(out)


class SharedLockTable:
    """Operations on the shared lock table for any process (no per-backend state); the
    caller holds the partition lock named in each method's docstring."""

    def __init__(self, seg, locks):
        self.seg = seg
        self.locks = locks
        self.lp = locks_per_partition(seg.settings)
        self.hp = lock_index_cells(seg.settings)

    # -- index ---------------------------------------------------------------------------------
    def find(self, part: int, tag: tuple, h: int) -> int:
        """Entry of ``tag`` or -1 (partition lock held)."""
        seg = self.seg
        index = seg.lock_index[part]
        mask = self.hp - 1
        pos = (h >> 4) & mask
        t, a, b = tag
        tags = seg.lock_tag
        while True:
            e = int(index[pos])
            if e < 0:
                return -1
            row = tags[e]
            if row[0] == t and row[1] == a and row[2] == b:
                return e
            pos = (pos + 1) & mask

    def find_or_create(self, part: int, tag: tuple, h: int) -> int:
        e = self.find(part, tag, h)
        if e >= 0:
            return e
        seg = self.seg
        lo = part * self.lp
        free = np.flatnonzero(seg.lock_tag[lo:lo + self.lp, 0] == 0)
        if not free.size:
            raise OutOfSharedMemory(
                "out of shared memory\nHINT:  You might need to increase "
                "max_locks_per_transaction.")
        e = lo + int(free[0])
        seg.lock_tag[e] = tag
        seg.lock_hash[e] = h
        seg.lock_hold[e] = 0
        index = seg.lock_index[part]
        mask = self.hp - 1
        pos = (h >> 4) & mask
        while index[pos] >= 0:
            pos = (pos + 1) & mask
        index[pos] = e
        return e

    def free_if_unused(self, part: int, e: int) -> None:
        """Free entry ``e`` if nobody holds or awaits it (partition lock held)."""
        seg = self.seg
        if seg.lock_hold[e].any() or (seg.proc_wait_lock == e).any():
            return
        index = seg.lock_index[part]
        mask = self.hp - 1
        i = (int(seg.lock_hash[e]) >> 4) & mask
        while int(index[i]) != e:
            i = (i + 1) & mask
        # backward-shift deletion (linear probing): close the hole so no probe stops early
        j = i
        while True:
            j = (j + 1) & mask
            f = int(index[j])
            if f < 0:
                break
            k = (int(seg.lock_hash[f]) >> 4) & mask
            if (j > i and (k <= i or k > j)) or (j < i and (k <= i and k > j)):
                index[i] = f
                i = j
        index[i] = -1
        seg.lock_tag[e] = 0

    # -- queue -------------------------------------------------------------------------------
    def waiters(self, e: int) -> list[int]:
        """Slots waiting for entry ``e``, in queue order."""
        seg = self.seg
        ws = np.flatnonzero(seg.proc_wait_lock == e)
        if ws.size <= 1:
            return ws.tolist()
        order = np.lexsort((ws, seg.proc_wait_seq[ws]))
        return ws[order].tolist()

    def granted_to_others(self, e: int, slot: int) -> int:
        hold = self.seg.lock_hold[e]
        mine = int(hold[slot])
        if not mine:
            return int(np.bitwise_or.reduce(hold))
        hold[slot] = 0
        try:
            return int(np.bitwise_or.reduce(hold))
        finally:
            hold[slot] = mine

    def wakeup(self, e: int) -> None:
        """ProcLockWakeup: grant every waiter of ``e`` that may go now (partition lock)."""
        seg = self.seg
        ahead = 0
        for w in self.waiters(e):
            mode = int(seg.proc_wait_mode[w])
            conf = CONFLICTS[mode]
            if not (conf & ahead) and not (conf & self.granted_to_others(e, w)):
                seg.lock_hold[e, w] |= 1 << mode
                seg.proc_wait_lock[w] = -1
                seg.proc_wait_status[w] = GRANTED
                self.locks.sem[w].release()
            else:
                ahead |= 1 << mode

    def leave_queue(self, part: int, slot: int) -> bool:
        """Take ``slot`` out of the queue it waits in (partition lock held); True if it
        was still waiting (False: it had been granted meanwhile)."""
        seg = self.seg
        e = int(seg.proc_wait_lock[slot])
        if e < 0 or seg.proc_wait_status[slot] != WAITING:
            return False
        seg.proc_wait_lock[slot] = -1
        seg.proc_wait_status[slot] = REMOVED
        self.wakeup(e)
        self.free_if_unused(part, e)
        return True

    # -- a whole slot ----------------------------------------------------------------------------
    def release_slot(self, slot: int) -> int:
        """Release every lock ``slot`` holds (shared table and fast path) and take it out
        of any queue: the reaper's path for a backend whose process died.  Returns the
        number of lock modes released."""
        seg, locks = self.seg, self.locks
        n = 0
        with locks.fp[slot]:
            n += int(np.count_nonzero(seg.fp_bits[slot]))
            seg.fp_bits[slot] = 0
        for part in range(N_LOCK_PARTITIONS):
            lo = part * self.lp
            with locks.lockmgr[part]:
                if seg.proc_wait_lock[slot] >= 0 and \
                        int(seg.proc_wait_lock[slot]) // self.lp == part:
                    e = int(seg.proc_wait_lock[slot])
                    mode = int(seg.proc_wait_mode[slot])
                    self.leave_queue(part, slot)
                    self._unstrong(e, mode)
                held = np.flatnonzero(seg.lock_hold[lo:lo + self.lp, slot])
                for e in (held + lo).tolist():
                    bits = int(seg.lock_hold[e, slot])
                    seg.lock_hold[e, slot] = 0
                    for m in range(STRONG_MIN_MODE, MAX_LOCKMODES):
                        if bits >> m & 1:
                            self._unstrong(e, m)
                    n += bin(bits).count("1")
                    self.wakeup(e)
                    self.free_if_unused(part, e)
        seg.proc_wait_status[slot] = NOT_WAITING
        return n

    def _unstrong(self, e: int, mode: int) -> None:
        """Drop the strong count of a relation lock in ``mode`` (partition lock held)."""
        seg = self.seg
        if mode >= STRONG_MIN_MODE and seg.lock_tag[e, 0] == LOCKTAG_RELATION:
            seg.fp_strong[int(seg.lock_hash[e]) & (FP_STRONG - 1)] -= 1

    # -- reading -------------------------------------------------------------------------------
    def snapshot(self) -> list[tuple]:
        """Every held or awaited mode: (tag, mode, granted, slot, fastpath), taken under
        every partition lock in order (pg_locks)."""
        seg, locks = self.seg, self.locks
        out = []
        for part in range(N_LOCK_PARTITIONS):
            locks.lockmgr[part].acquire()
        try:
            for s in range(seg.fp_bits.shape[0]):
                with locks.fp[s]:
                    for j in np.flatnonzero(seg.fp_bits[s]).tolist():
                        bits = int(seg.fp_bits[s, j])
                        tag = relation_tag(int(seg.fp_relid[s, j]))
                        for m in range(1, FASTPATH_MAX_MODE + 1):
                            if bits >> m & 1:
                                out.append((tag, m, True, s, True))
            used = np.flatnonzero(seg.lock_tag[:, 0] != 0)
            for e in used.tolist():
                tag = tuple(int(x) for x in seg.lock_tag[e])
                for s in np.flatnonzero(seg.lock_hold[e]).tolist():
                    bits = int(seg.lock_hold[e, s])
                    for m in range(1, MAX_LOCKMODES):
                        if bits >> m & 1:
                            out.append((tag, m, True, s, False))
                for s in self.waiters(e):
                    out.append((tag, int(seg.proc_wait_mode[s]), False, s, False))
        finally:
            for part in reversed(range(N_LOCK_PARTITIONS)):
                locks.lockmgr[part].release()
        return out


class LockManager:
    """One backend's view of the lock manager: its LOCALLOCK table and its requests."""

    def __init__(self, seg, locks, slot: int, settings, on_wait_tick=None):
        self.seg = seg
        self.locks = locks
        self.slot = slot
        self.settings = settings
        self.table = SharedLockTable(seg, locks)
        self.local: dict[tuple, int] = {}   # (tag, mode) -> _FASTPATH or shared entry
        self.on_wait_tick = on_wait_tick
        self.describe = None                # tag -> name for messages (set by the instance)
        # fast path: this backend's row, flat views, and a local mirror of its relids
        self._fp_sem = locks.fp[slot]._semlock
        self._fp_base = slot * FP_SLOTS
        self._fp_relid = seg.fp_relid.reshape(-1)
        self._fp_mv_bits = memoryview(seg.fp_bits.reshape(-1))
        self._fp_of: dict[int, int] = {}   # relid -> its fast-path slot (kept as a cache)
        self._fp_rel = [0] * FP_SLOTS       # mirror of this backend's fp_relid row
        self._fp_live = 0                    # bitmask of fast-path slots with bits set
        self._fp_expect = [0] * FP_SLOTS     # the bits this backend set in each slot
        self._strong = memoryview(seg.fp_strong)
        self._nshared = 0                    # LOCALLOCK entries in the shared table
        self.stats = {"shared": 0, "waits": 0}

    # -- acquiring ------------------------------------------------------------------------------
    def lock_relation(self, oid: int, mode: int, nowait: bool = False) -> None:
        """LockRelationOid: ``mode`` on relation ``oid`` until transaction end."""
        tag = (LOCKTAG_RELATION, oid, 0)
        if (tag, mode) not in self.local:
            self.acquire(tag, mode, nowait)

    def lock_relations(self, keys) -> None:
        """Take every ``(tag, mode)`` of ``keys`` (see ``lock_prepared``)."""
        self.lock_prepared(prepare_requests(keys))

    def lock_prepared(self, reqs) -> None:
        """Take every request of ``reqs`` (``prepare_requests``' tuple: a statement's
        locks, computed once per plan); the weak relation locks not held yet go into the
        fast path under one hold of this backend's fp lock, the others through
        ``acquire``.  The common path: a dict hit per lock, or one fp-lock cycle."""
        local = self.local
        for r in reqs:
            if r[0] not in local:
                break
        else:
            return
        rest = None
        sem = self._fp_sem
        if not sem.acquire(True, _shmem.LWLOCK_TIMEOUT_S):
            rest = [r[0] for r in reqs]
        else:
            try:
                strong = self._strong
                bits = self._fp_mv_bits
                expect = self._fp_expect
                base = self._fp_base
                fp_of = self._fp_of
                for key, oid, bucket, mode in reqs:
                    if key in local:
                        continue
                    if rest is not None:
                        # an earlier request took the slow path (it may wait): take the
                        # later ones after it, in the statement's order, or a waiter
                        # would sit holding a lock the strong locker it waits for needs
                        rest.append(key)
                        continue
                    if bucket < 0 or strong[bucket]:
                        rest = [key]
                        continue
                    j = fp_of.get(oid)
                    if j is None:
                        j = self._fp_slot_for(oid)
                        if j < 0:
                            rest = [key]
                            continue
                    bit = 1 << mode
                    i = base + j
                    bits[i] = bits[i] | bit
                    expect[j] |= bit
                    self._fp_live |= 1 << j
                    local[key] = _FASTPATH
            finally:
                sem.release()
        if rest is not None:
            for tag, mode in rest:
                if (tag, mode) not in local:
                    self.acquire(tag, mode, False)

    def _fp_slot_for(self, oid: int) -> int:
        """A fast-path slot for ``oid`` (fp lock held): one without live bits."""
        live = self._fp_live
        for j in range(FP_SLOTS):
            if not live >> j & 1:
                old = self._fp_rel[j]
                if old:
                    self._fp_of.pop(old, None)
                self._fp_rel[j] = oid
                self._fp_of[oid] = j
                self._fp_relid[self._fp_base + j] = oid
                return j
        return -1

    def acquire(self, tag: tuple, mode: int, nowait: bool = False) -> None:
        """LockAcquire: hold ``mode`` on ``tag`` until transaction end, waiting if another
        backend holds a conflicting mode (see the module docstring)."""
        key = (tag, mode)
        if key in self.local:
            return
        if mode <= FASTPATH_MAX_MODE and tag[0] == LOCKTAG_RELATION:
            self._fastpath_only(prepare_requests([key]))
            if key in self.local:
                return
        self._acquire_shared(tag, mode, nowait)

    def _fastpath_only(self, reqs) -> None:
        sem = self._fp_sem
        if not sem.acquire(True, _shmem.LWLOCK_TIMEOUT_S):
            return
        try:
            for key, oid, bucket, mode in reqs:
                if bucket < 0 or self._strong[bucket]:
                    continue
                j = self._fp_of.get(oid)
                if j is None:
                    j = self._fp_slot_for(oid)
                    if j < 0:
                        continue
                bit = 1 << mode
                i = self._fp_base + j
                self._fp_mv_bits[i] = self._fp_mv_bits[i] | bit
                self._fp_expect[j] |= bit
                self._fp_live |= 1 << j
                self.local[key] = _FASTPATH
        finally:
            sem.release()

    def _acquire_shared(self, tag: tuple, mode: int, nowait: bool) -> None:
        key = (tag, mode)
        h = tag_hash(tag)
        part = h & (N_LOCK_PARTITIONS - 1)
        strong = mode >= STRONG_MIN_MODE and tag[0] == LOCKTAG_RELATION
        seg, locks, table = self.seg, self.locks, self.table
        if strong:
            with locks.lockmgr[part]:
                seg.fp_strong[h & (FP_STRONG - 1)] += 1
            try:
                self._transfer_fastpath(tag, h)
            except BaseException:
                with locks.lockmgr[part]:
                    seg.fp_strong[h & (FP_STRONG - 1)] -= 1
                raise
        slot = self.slot
        self.stats["shared"] += 1
        try:
            with locks.lockmgr[part]:
                e = table.find_or_create(part, tag, h)
                mine = int(seg.lock_hold[e, slot])
                conf = CONFLICTS[mode]
                queue = table.waiters(e)
                pos = len(queue)
                if mine:
                    for i, w in enumerate(queue):
                        if CONFLICTS[int(seg.proc_wait_mode[w])] & mine:
                            pos = i
                            break
                ahead = 0
                for w in queue[:pos]:
                    ahead |= 1 << int(seg.proc_wait_mode[w])
                if not (conf & ahead) and not (conf & table.granted_to_others(e, slot)):
                    seg.lock_hold[e, slot] |= 1 << mode
                    self.local[key] = e
                    self._nshared += 1
                    return
                if nowait:
                    table.free_if_unused(part, e)
                    raise LockNotAvailable(f"could not obtain lock on {self._what(tag)}")
                if pos < len(queue):
                    seq = int(seg.proc_wait_seq[queue[pos]]) - 1
                else:
                    seg.lock_seq[part] += 1 << 16
                    seq = int(seg.lock_seq[part])
                seg.proc_wait_mode[slot] = mode
                seg.proc_wait_seq[slot] = seq
                seg.proc_wait_status[slot] = WAITING
                seg.proc_wait_lock[slot] = e
            self._sleep(tag, mode, part, e)
            self.local[key] = e
            self._nshared += 1
        except BaseException:
            if strong:
                with locks.lockmgr[part]:
                    seg.fp_strong[h & (FP_STRONG - 1)] -= 1
            raise

    def _what(self, tag: tuple) -> str:
        if tag[0] == LOCKTAG_RELATION:
            name = self.describe(tag) if self.describe is not None else None
            return f'relation "{name}"' if name else f"relation {tag[1]}"
        return describe_tag(tag)

    def _transfer_fastpath(self, tag: tuple, h: int) -> None:
        """Move every backend's fast-path entries for relation ``tag`` into the shared
        table (FastPathTransferRelationLocks); the strong counter is already raised."""
        seg, locks = self.seg, self.locks
        oid = tag[1]
        part = h & (N_LOCK_PARTITIONS - 1)
        for s in range(seg.fp_bits.shape[0]):
            with locks.fp[s]:
                hits = np.flatnonzero((seg.fp_relid[s] == oid) & (seg.fp_bits[s] != 0))
                if not hits.size:
                    continue
                with locks.lockmgr[part]:
                    e = self.table.find_or_create(part, tag, h)
                    for j in hits.tolist():
                        seg.lock_hold[e, s] |= int(seg.fp_bits[s, j])
                        seg.fp_bits[s, j] = 0

    def _sleep(self, tag: tuple, mode: int, part: int, e: int) -> None:
        """ProcSleep: wait until a releaser grants the request, checking for a deadlock
        once after deadlock_timeout and giving up after lock_timeout (or the bound)."""
        from minidb.txn import deadlock
        seg, locks, table, slot = self.seg, self.locks, self.table, self.slot
        settings = self.settings
        self.stats["waits"] += 1
        lock_timeout = settings.lock_timeout
        limit_ms = lock_timeout if lock_timeout > 0 else settings.lock_wait_timeout_ms
        start = time.monotonic()
        deadline = start + limit_ms / 1000.0
        check_at = start + settings.deadlock_timeout / 1000.0
        checked = False
        sem = locks.sem[slot]
        while True:
            if seg.proc_wait_status[slot] == GRANTED:
                seg.proc_wait_status[slot] = NOT_WAITING
                return
            now = time.monotonic()
            if not checked and now >= check_at:
                checked = True
                cycle = deadlock.check(seg, locks, slot, self.table)
                if cycle is not None:
                    seg.proc_wait_status[slot] = NOT_WAITING
                    raise deadlock.deadlock_error(cycle, self.describe)
                continue
            if now >= deadline:
                with locks.lockmgr[part]:
                    still = table.leave_queue(part, slot)
                if still:
                    seg.proc_wait_status[slot] = NOT_WAITING
                    if lock_timeout > 0:
                        raise LockNotAvailable("canceling statement due to lock timeout")
                    raise LockNotAvailable(
                        f"timed out after {limit_ms} ms waiting for {MODE_NAMES[mode]} on "
                        f"{self._what(tag)} (lock_wait_timeout_ms)")
                continue  # granted meanwhile
            wake_at = min(deadline, now + WAKE_TICK_S, deadline if checked else check_at)
            sem.acquire(True, max(0.001, wake_at - now))
            if self.on_wait_tick is not None and seg.proc_wait_status[slot] == WAITING:
                self.on_wait_tick()

    # -- releasing ------------------------------------------------------------------------------
    def release_all(self) -> None:
        """LockReleaseAll at transaction end: every lock this backend holds."""
        local = self.local
        if not local:
            return
        shared = None
        live = self._fp_live
        if live:
            sem = self._fp_sem
            sem.acquire(True, _shmem.LWLOCK_TIMEOUT_S)
            try:
                bits = self._fp_mv_bits
                expect = self._fp_expect
                base = self._fp_base
                n = live.bit_length()
                if live == (1 << n) - 1 and bits[base:base + n].tolist() == expect[:n]:
                    # the common case: slots 0..n-1 live, none moved by a strong locker
                    bits[base:base + n] = _FP_ZEROS[:n]
                    expect[:n] = _FP_ZERO_LIST[:n]
                    live = 0
                j = 0
                while live:
                    if live & 1:
                        if bits[base + j] != expect[j]:
                            # a strong locker moved some of them into the shared table
                            shared = self._transferred(j, bits[base + j], shared)
                        bits[base + j] = 0
                        expect[j] = 0
                    live >>= 1
                    j += 1
                self._fp_live = 0
            finally:
                sem.release()
        if self._nshared:
            self._nshared = 0
            for key, e in local.items():
                if e != _FASTPATH:
                    if shared is None:
                        shared = []
                    shared.append(key)
        local.clear()
        if shared:
            self._release_shared(shared)

    def release_keys(self, keys) -> None:
        """LockRelease of several held ``(tag, mode)`` keys before transaction end: the
        locks a rolled-back subtransaction took (``minidb.txn.subxact``).  A fast-path
        lock is cleared in this backend's row unless a strong locker moved it into the
        shared table meanwhile; shared-table locks go as at ``release_all`` (waking)."""
        local = self.local
        keys = [k for k in keys if k in local]
        if not keys:
            return
        shared = []
        fast = []
        for key in keys:
            if local[key] == _FASTPATH:
                fast.append(key)
            else:
                shared.append(key)
                self._nshared -= 1
            del local[key]
        if fast:
            sem = self._fp_sem
            sem.acquire(True, _shmem.LWLOCK_TIMEOUT_S)
            try:
                bits = self._fp_mv_bits
                expect = self._fp_expect
                base = self._fp_base
                for key in fast:
                    (tag, mode) = key
                    j = self._fp_of[tag[1]]
                    bit = 1 << mode
                    if bits[base + j] & bit:
                        bits[base + j] = bits[base + j] & ~bit
                    else:   # moved into the shared table by a strong locker
                        shared.append(key)
                    expect[j] &= ~bit
                    if not expect[j]:
                        self._fp_live &= ~(1 << j)
            finally:
                sem.release()
        if shared:
            self._release_shared(shared)

    def _transferred(self, j: int, now: int, shared):
        """The fast-path keys of slot ``j`` whose bit is no longer in ``now``."""
        oid = self._fp_rel[j]
        gone = self._fp_expect[j] & ~now
        shared = shared if shared is not None else []
        for m in range(1, FASTPATH_MAX_MODE + 1):
            if gone >> m & 1:
                shared.append(((LOCKTAG_RELATION, oid, 0), m))
        return shared

    def _release_shared(self, keys) -> None:
        seg, locks, table, slot = self.seg, self.locks, self.table, self.slot
        by_part: dict[int, list] = {}
        for tag, mode in keys:
            h = tag_hash(tag)
            by_part.setdefault(h & (N_LOCK_PARTITIONS - 1), []).append((tag, mode, h))
        for part in sorted(by_part):
            with locks.lockmgr[part]:
                touched = set()
                for tag, mode, h in by_part[part]:
                    e = table.find(part, tag, h)
                    if e < 0:
                        continue
                    seg.lock_hold[e, slot] &= ~(1 << mode) & 0xFFFF
                    if mode >= STRONG_MIN_MODE and tag[0] == LOCKTAG_RELATION:
                        seg.fp_strong[h & (FP_STRONG - 1)] -= 1
                    touched.add(e)
                for e in touched:
                    table.wakeup(e)
                    table.free_if_unused(part, e)

    def holds(self, tag: tuple, mode: int) -> bool:
        return (tag, mode) in self.local


__all__ = ["LockManager", "SharedLockTable", "CONFLICTS", "MODE_NAMES", "SQL_MODES",
           "prepare_requests", "relation_tag", "object_tag", "tag_hash", "describe_tag"]
