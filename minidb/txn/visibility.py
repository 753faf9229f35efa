"""Tuple visibility: PostgreSQL's MVCC rules, once per tuple and once per batch.

Every test here decides from a tuple's header (xmin, xmax, cmin, cmax, infomask), a
snapshot or horizon, the proc array and the commit log.  Two implementations of the MVCC
test must agree exactly (a hypothesis test checks it): ``satisfies_mvcc`` for paths that
touch one row (index fetch, update), ``satisfies_mvcc_batch`` for scans, which decides for
every tuple of a batch of pages with a handful of numpy operations.

HeapTupleSatisfiesMVCC (``heapam_visibility.c``), MultiXact and MOVED branches dropped::

    inserter xmin                         deleter xmax                         visible
    ------------------------------------  -----------------------------------  -------
    XMIN_INVALID hint                     any                                  no
    me, cmin >= curcid                    any                                  no
    me, cmin < curcid                     none / lock-only / XMAX_INVALID      yes
    me, cmin < curcid                     me, cmax >= curcid                   yes
    me, cmin < curcid                     me, cmax < curcid                    no
    me, cmin < curcid                     someone else (an aborted locker)     yes  +XMAX_INVALID
    other, running for the snapshot       any                                  no   (no hint)
    other, not running, clog aborted      any                                  no   +XMIN_INVALID
    committed, not running for snapshot   none / lock-only / XMAX_INVALID      yes  +XMIN_COMMITTED
    committed, running for the snapshot   any                                  no
    committed, visible                    me, cmax >= curcid                   yes
    committed, visible                    me, cmax < curcid                    no
    committed, visible                    other, running for the snapshot      yes  (no hint)
    committed, visible                    other, not running, clog aborted     yes  +XMAX_INVALID
    committed, visible                    other, not running, clog committed   no   +XMAX_COMMITTED
    committed, visible                    XMAX_COMMITTED hint, running for snap yes

Hint bits are only set when the commit log decided the answer (never for a transaction
the snapshot still considers running), and the caller writes them under a share lock and
marks the buffer dirty as a hint.  A *committed* hint is set only if
``clog.commit_hints_ok(xid)`` (``commit_hints_mask(xids)`` in the batch paths; PostgreSQL's
SetHintBits rule: not while the transaction's commit record may be unflushed - with
synchronous_commit off a page carrying the hint could reach the disk before the record, and
a crash that loses the commit would leave a row whose inserter aborted marked committed).
As in PostgreSQL the question is XLogNeedsFlush of the highest commit LSN of the xid's
group of 32 xids (the commit log keeps one per group); when no asynchronous commit
record is unflushed at all the answer is yes without looking.  A deferred hint changes
nothing but the caching: the next reader after the WAL writer's flush sets it.

"me" is the snapshot's own transaction: its top-level xid (``Snapshot.myxid``) or one of
its live subtransaction xids (``Snapshot.subxids``, ``minidb.txn.subxact``); a rolled-back
subtransaction's xid is not "me" but an aborted transaction like any other.

"Running for the snapshot" (``Snapshot.xid_running``) is asked before the commit log, and
"running now" (``ProcArray.is_in_progress``) before the commit log too, because a
committing transaction writes the log before it leaves the proc array.

``satisfies_vacuum`` classifies a tuple against the global horizon for pruning and VACUUM:
DEAD, RECENTLY_DEAD, LIVE, INSERT_IN_PROGRESS, DELETE_IN_PROGRESS.  ``surely_dead`` is the
cheap hint-bits-only version used to decide index tuple killing; when unsure it says no.

``satisfies_update`` (HeapTupleSatisfiesUpdate) tells a writer what it may do with the
newest version it found: OK, INVISIBLE, SELF_MODIFIED, BEING_MODIFIED (wait for xmax),
UPDATED (a newer version exists; follow t_ctid) or DELETED.
"""

from __future__ import annotations

import numpy as np

from minidb.storage.htup import (HEAP_XMAX_COMMITTED, HEAP_XMAX_INVALID, HEAP_XMAX_LOCK_ONLY,
                                 HEAP_XMIN_COMMITTED, HEAP_XMIN_INVALID)
from minidb.txn.clog import ABORTED, COMMITTED, FIRST_NORMAL_XID

XMIN_FROZEN = HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID

# satisfies_vacuum results (HTSV_Result)
DEAD, LIVE, RECENTLY_DEAD, INSERT_IN_PROGRESS, DELETE_IN_PROGRESS = range(5)
HTSV_NAMES = ("DEAD", "LIVE", "RECENTLY_DEAD", "INSERT_IN_PROGRESS", "DELETE_IN_PROGRESS")

# satisfies_update results (TM_Result)
TM_OK, TM_INVISIBLE, TM_SELF_MODIFIED, TM_BEING_MODIFIED, TM_UPDATED, TM_DELETED = range(6)


def _xmax_is_lock_only(infomask: int) -> bool:
    return bool(infomask & HEAP_XMAX_LOCK_ONLY)


_LOCK_ONLY_BITS = HEAP_XMAX_LOCK_ONLY   # what _xmax_is_lock_only tests, for inline use


# ---------------------------------------------------------------------------------------------
# MVCC, one tuple
def satisfies_mvcc(xmin: int, xmax: int, cmin: int, cmax: int, infomask: int, snap,
                   clog) -> tuple[bool, int]:
    """(visible, hint bits to OR into t_infomask) for one tuple and snapshot."""
    hints = 0
    me = snap.myxid
    subs = snap.subxids
    if not infomask & HEAP_XMIN_COMMITTED:
        if infomask & HEAP_XMIN_INVALID:
            return False, 0
        if me and (xmin == me or (subs and xmin in subs)):
            if cmin >= snap.curcid:
                return False, 0
            if infomask & HEAP_XMAX_INVALID or _xmax_is_lock_only(infomask) or xmax == 0:
                return True, 0
            if xmax != me and not (subs and xmax in subs):
                # an aborted locker, or one of my rolled-back subtransactions
                return True, HEAP_XMAX_INVALID
            return cmax >= snap.curcid, 0
        if snap.xid_running(xmin):
            return False, 0
        if clog.status(xmin) == COMMITTED:
            if clog.commit_hints_ok(xmin):
                hints |= HEAP_XMIN_COMMITTED
        else:
            return False, HEAP_XMIN_INVALID
    elif (infomask & XMIN_FROZEN) != XMIN_FROZEN and snap.xid_running(xmin):
        return False, 0
    # the insert is visible; now the delete
    if infomask & HEAP_XMAX_INVALID or _xmax_is_lock_only(infomask) or xmax == 0:
        return True, hints
    if not infomask & HEAP_XMAX_COMMITTED:
        if me and (xmax == me or (subs and xmax in subs)):
            return cmax >= snap.curcid, hints
        if snap.xid_running(xmax):
            return True, hints
        if clog.status(xmax) != COMMITTED:
            return True, hints | HEAP_XMAX_INVALID
        if clog.commit_hints_ok(xmax):
            hints |= HEAP_XMAX_COMMITTED
    elif snap.xid_running(xmax):
        return True, hints
    return False, hints


# ---------------------------------------------------------------------------------------------
# MVCC, a batch
_MVCC_SCALAR_MAX = 8
def satisfies_mvcc_batch(hdr: dict, snap, clog) -> tuple[np.ndarray, np.ndarray]:
    """Vectorized ``satisfies_mvcc``: (visible mask, hint bits to OR in, per tuple).

    ``hdr`` holds arrays xmin, xmax, cmin, cmax, infomask (``layout.gather_header``).  The
    common case - every xmin committed by hint, every xmax invalid - costs three array
    operations; the commit log is read only for tuples whose hint bits are missing.
    At most ``_MVCC_SCALAR_MAX`` tuples (what a scan's hint-bit pre-filter leaves of a
    small table's page: the versions of the rows updated lately) go through the scalar
    ``satisfies_mvcc`` instead - the same rules; the ~30 numpy steps below cost ~1 us each
    whatever the batch size.
    """
    im = hdr["infomask"]
    n = len(im)
    if n <= _MVCC_SCALAR_MAX:
        return _mvcc_scalar(hdr, snap, clog)
    xmin = hdr["xmin"].astype(np.int64, copy=False)
    xmax = hdr["xmax"].astype(np.int64, copy=False)
    hints = np.zeros(n, dtype=np.uint16)

    xmin_committed = (im & HEAP_XMIN_COMMITTED) != 0
    frozen = (im & XMIN_FROZEN) == XMIN_FROZEN
    xmax_gone = ((im & (HEAP_XMAX_INVALID | HEAP_XMAX_LOCK_ONLY)) != 0) | (xmax == 0)

    # fast path: every inserter known committed and older than the snapshot, no deleter
    if xmin_committed.all() and xmax_gone.all():
        vis = frozen | ~snap.xids_running(xmin) if not frozen.all() else np.ones(n, bool)
        return vis, hints

    vis = np.zeros(n, dtype=bool)
    ins_ok = _mvcc_inserter(hdr, xmin, xmax, xmin_committed, frozen, xmax_gone, snap, clog,
                            vis, hints)
    _mvcc_deleter(hdr, xmax, xmax_gone, ins_ok, snap, clog, vis, hints)
    return vis, hints


def _mvcc_scalar(hdr: dict, snap, clog) -> tuple[np.ndarray, np.ndarray]:
    """``satisfies_mvcc_batch`` for a few tuples: the scalar rules, tuple by tuple."""
    n = len(hdr["infomask"])
    vis = np.zeros(n, dtype=bool)
    hints = np.zeros(n, dtype=np.uint16)
    cols = zip(hdr["xmin"].tolist(), hdr["xmax"].tolist(), hdr["cmin"].tolist(),
               hdr["cmax"].tolist(), hdr["infomask"].tolist())
    for i, (x0, x1, c0, c1, m) in enumerate(cols):
        vis[i], hints[i] = satisfies_mvcc(x0, x1, c0, c1, m, snap, clog)
    return vis, hints


def _mine_mask(xids: np.ndarray, snap) -> np.ndarray:
    """Which of ``xids`` are the snapshot's own transaction's (top-level or a live
    subtransaction): TransactionIdIsCurrentTransactionId, vectorized."""
    me = snap.myxid
    if not me:
        return np.zeros(len(xids), dtype=bool)
    m = xids == me
    if snap.subxids:
        m |= np.isin(xids, list(snap.subxids))
    return m


def _mvcc_inserter(hdr: dict, xmin, xmax, xmin_committed, frozen, xmax_gone, snap, clog,
                   vis: np.ndarray, hints: np.ndarray) -> np.ndarray:
    """The inserter half of ``satisfies_mvcc_batch``.  Decides this transaction's own
    inserts completely (into ``vis``), learns xmin hint bits (into ``hints``), and returns
    the mask of the other tuples whose insert the snapshot sees (the deleter decides)."""
    im = hdr["infomask"]
    n = len(im)
    xmin_invalid_hint = (im & XMIN_FROZEN) == HEAP_XMIN_INVALID
    ins_ok = np.zeros(n, dtype=bool)   # insert visible, go on to the deleter
    mine_ins = ~xmin_committed & ~xmin_invalid_hint & _mine_mask(xmin, snap)
    other = ~xmin_committed & ~xmin_invalid_hint & ~mine_ins
    # own inserts decide completely here
    if mine_ins.any():
        m = mine_ins & (hdr["cmin"] < snap.curcid)
        gone = m & xmax_gone
        vis |= gone
        m2 = m & ~xmax_gone
        my_del = m2 & _mine_mask(xmax, snap)
        vis |= my_del & (hdr["cmax"] >= snap.curcid)
        aborted_locker = m2 & ~my_del
        vis |= aborted_locker
        hints[aborted_locker] |= HEAP_XMAX_INVALID
    if other.any():
        running = np.zeros(n, dtype=bool)
        running[other] = snap.xids_running(xmin[other])
        ask = other & ~running
        if ask.any():
            st = np.zeros(n, dtype=np.uint8)
            st[ask] = clog.statuses(xmin[ask])
            committed = ask & (st == COMMITTED)
            _hint_committed(clog, hints, committed, xmin, HEAP_XMIN_COMMITTED)
            hints[ask & ~committed] |= HEAP_XMIN_INVALID
            ins_ok |= committed
    known = xmin_committed & ~frozen
    if known.any():
        kr = np.zeros(n, dtype=bool)
        kr[known] = snap.xids_running(xmin[known])
        ins_ok |= known & ~kr
    ins_ok |= frozen
    return ins_ok


def _mvcc_deleter(hdr: dict, xmax, xmax_gone, ins_ok, snap, clog, vis: np.ndarray,
                  hints: np.ndarray) -> None:
    """The deleter half of ``satisfies_mvcc_batch``, for the tuples whose insert is visible
    and not mine (``ins_ok``): visible unless a deleter the snapshot sees as committed (or
    this command's earlier one) removed them; learns xmax hint bits."""
    im = hdr["infomask"]
    n = len(im)
    d = ins_ok & ~xmax_gone
    vis |= ins_ok & xmax_gone
    if d.any():
        xmax_hint = (im & HEAP_XMAX_COMMITTED) != 0
        my_del = d & ~xmax_hint & _mine_mask(xmax, snap)
        vis |= my_del & (hdr["cmax"] >= snap.curcid)
        rest = d & ~my_del
        if rest.any():
            r = np.zeros(n, dtype=bool)
            r[rest] = snap.xids_running(xmax[rest])
            vis |= rest & r                       # deleter still running for us: visible
            ask = rest & ~r & ~xmax_hint
            if ask.any():
                st = np.zeros(n, dtype=np.uint8)
                st[ask] = clog.statuses(xmax[ask])
                committed = ask & (st == COMMITTED)
                _hint_committed(clog, hints, committed, xmax, HEAP_XMAX_COMMITTED)
                aborted = ask & ~committed
                hints[aborted] |= HEAP_XMAX_INVALID
                vis |= aborted


def _hint_committed(clog, hints: np.ndarray, which: np.ndarray, xids: np.ndarray,
                    bit: int) -> None:
    """``hints[which] |= bit`` for the committed xids whose commit record is flushed
    (all of them unless an asynchronous commit record is unflushed)."""
    if clog.commit_hints_ok():
        hints[which] |= bit
        return
    idx = np.flatnonzero(which)
    if idx.size:
        ok = clog.commit_hints_mask(xids[idx])
        hints[idx if ok is True else idx[ok]] |= bit


# ---------------------------------------------------------------------------------------------
# VACUUM and pruning
def satisfies_vacuum(xmin: int, xmax: int, infomask: int, horizon: int, procarray,
                     clog) -> tuple[int, int]:
    """(HTSV state, hint bits) of one tuple against the global xmin ``horizon``."""
    hints = 0
    if not infomask & HEAP_XMIN_COMMITTED:
        if infomask & HEAP_XMIN_INVALID:
            return DEAD, 0
        if procarray.is_in_progress(xmin):
            if infomask & HEAP_XMAX_INVALID or _xmax_is_lock_only(infomask) or xmax == 0:
                return INSERT_IN_PROGRESS, 0
            # inserted and deleted by the same running transaction
            return DELETE_IN_PROGRESS if xmax == xmin else INSERT_IN_PROGRESS, 0
        st = clog.status(xmin)
        if st == COMMITTED:
            if clog.commit_hints_ok(xmin):
                hints |= HEAP_XMIN_COMMITTED
        else:  # aborted, or crashed (not running, never committed)
            return DEAD, HEAP_XMIN_INVALID
    # inserter committed
    if infomask & HEAP_XMAX_INVALID or xmax == 0:
        return LIVE, hints
    if _xmax_is_lock_only(infomask):
        if not infomask & HEAP_XMAX_COMMITTED and not procarray.is_in_progress(xmax):
            hints |= HEAP_XMAX_INVALID  # the locker is gone
        return LIVE, hints
    if not infomask & HEAP_XMAX_COMMITTED:
        if procarray.is_in_progress(xmax):
            return DELETE_IN_PROGRESS, hints
        if clog.status(xmax) == COMMITTED:
            if clog.commit_hints_ok(xmax):
                hints |= HEAP_XMAX_COMMITTED
        else:
            return LIVE, hints | HEAP_XMAX_INVALID
    # deleter committed
    if xmax >= horizon:
        return RECENTLY_DEAD, hints
    return DEAD, hints


class RunningAfter:
    """The proc array as ``satisfies_vacuum`` / ``satisfies_update`` ask it, told an xid
    ``running_from`` that no running transaction precedes - a ``ProcArray.global_xmin()``
    computed before (it is at most every running xid and every published xmin, a
    subtransaction's xid follows its top-level one, and a new xid is newer still), or a
    snapshot's xmin (every xid below it had ended when the snapshot was taken).  ``is_in_progress`` of an older xid is
    then false without the scan of the proc array (TransactionIdIsInProgress's
    ``RecentXmin`` test)."""

    __slots__ = ("procarray", "running_from")

    def __init__(self, procarray, running_from: int):
        self.procarray = procarray
        self.running_from = running_from

    def is_in_progress(self, xid: int) -> bool:
        return xid >= self.running_from and self.procarray.is_in_progress(xid)


class VacuumJudge:
    """``satisfies_vacuum`` for the tuples of one page, one after the other (the scalar
    prune), with what it learns of each xid kept for the rest of the page: in a HOT chain
    a version's xmax is the next version's xmin, and under asynchronous commit (hint
    bits deferred until the commit record is flushed) a long chain stays unhinted, so
    every xid would be looked up twice in the commit log and twice for its hint.  Kept:
    that a committed or aborted xid ended so (final), and the answer to its hint check
    (``clog.commit_hint_check``); a repeat counts the ``hint_checks`` / ``hints_deferred``
    the check counted, added at ``done()``.  ``running_from``: an xid no running
    transaction precedes (a ``ProcArray.global_xmin()`` computed before, as
    ``RunningAfter``): older xids skip the proc array; 0 = not known.  The
    same states and hint bits as ``satisfies_vacuum`` asked at the first look."""

    __slots__ = ("procarray", "clog", "running_from", "_facts", "_repeats")

    def __init__(self, procarray, clog, running_from: int = 0):
        self.procarray = procarray
        self.clog = clog
        self.running_from = running_from
        self._facts: dict[int, tuple[int, int]] = {}   # xid -> (status, hint check code)
        self._repeats: list[int] = []   # the hint check codes of the repeats

    def _ended(self, xid: int) -> tuple[int, int] | None:
        """A first look at ``xid``: None while it runs, else (its commit-log status, its
        hint check's code), kept when final."""
        if xid >= self.running_from and self.procarray.is_in_progress(xid):
            return None
        clog = self.clog
        st = clog.status(xid)
        f = (st, clog.commit_hint_check(xid) if st == COMMITTED else 0)
        if st == COMMITTED or st == ABORTED:
            self._facts[xid] = f
        return f

    def __call__(self, xmin: int, xmax: int, infomask: int, horizon: int
                 ) -> tuple[int, int]:
        hints = 0
        if not infomask & HEAP_XMIN_COMMITTED:
            if infomask & HEAP_XMIN_INVALID:
                return DEAD, 0
            f = self._facts.get(xmin)
            if f is None:
                f = self._ended(xmin)
                if f is None:
                    if (infomask & HEAP_XMAX_INVALID or xmax == 0
                            or infomask & _LOCK_ONLY_BITS):
                        return INSERT_IN_PROGRESS, 0
                    return DELETE_IN_PROGRESS if xmax == xmin else INSERT_IN_PROGRESS, 0
            elif f[1]:
                self._repeats.append(f[1])
            if f[0] != COMMITTED:
                return DEAD, HEAP_XMIN_INVALID
            if f[1] != 2:
                hints = HEAP_XMIN_COMMITTED
        if infomask & HEAP_XMAX_INVALID or xmax == 0:
            return LIVE, hints
        if infomask & _LOCK_ONLY_BITS:
            if not infomask & HEAP_XMAX_COMMITTED and not (
                    xmax >= self.running_from and self.procarray.is_in_progress(xmax)):
                hints |= HEAP_XMAX_INVALID
            return LIVE, hints
        if not infomask & HEAP_XMAX_COMMITTED:
            f = self._facts.get(xmax)
            if f is None:
                f = self._ended(xmax)
                if f is None:
                    return DELETE_IN_PROGRESS, hints
            elif f[1]:
                self._repeats.append(f[1])
            if f[0] != COMMITTED:
                return LIVE, hints | HEAP_XMAX_INVALID
            if f[1] != 2:
                hints |= HEAP_XMAX_COMMITTED
        if xmax >= horizon:
            return RECENTLY_DEAD, hints
        return DEAD, hints

    def done(self) -> None:
        """Add the repeats' hint-check counts to the commit log's counters."""
        rep = self._repeats
        if rep:
            self.clog._count("hint_checks", len(rep))
            deferred = rep.count(2)
            if deferred:
                self.clog._count("hints_deferred", deferred)
            rep.clear()


_SETTLED_LIVE = HEAP_XMIN_COMMITTED | HEAP_XMAX_INVALID
_VACUUM_SCALAR_MAX = 8


def satisfies_vacuum_batch(hdr: dict, horizon: int, procarray, clog
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Vectorized ``satisfies_vacuum``: (state per tuple (uint8), hint bits per tuple).

    A tuple whose hint bits say "inserter committed, no deleter" is LIVE with nothing to
    learn.  When at most ``_VACUUM_SCALAR_MAX`` tuples are not such (pruning one page of
    a table updated here and there: the new and the old version of a row or two), those
    few go through the scalar ``satisfies_vacuum`` - the same rules; the ~40 numpy steps
    below cost ~1 us each whatever the batch size."""
    im = hdr["infomask"]
    n = len(im)
    unsettled = np.flatnonzero((im & _SETTLED_LIVE) != _SETTLED_LIVE)
    if len(unsettled) <= _VACUUM_SCALAR_MAX:
        state = np.full(n, LIVE, dtype=np.uint8)
        hints = np.zeros(n, dtype=np.uint16)
        xmin_l, xmax_l = hdr["xmin"], hdr["xmax"]
        for i in unsettled.tolist():
            state[i], hints[i] = satisfies_vacuum(int(xmin_l[i]), int(xmax_l[i]), int(im[i]),
                                                  horizon, procarray, clog)
        return state, hints
    xmin = hdr["xmin"].astype(np.int64, copy=False)
    xmax = hdr["xmax"].astype(np.int64, copy=False)
    state = np.full(n, LIVE, dtype=np.uint8)
    hints = np.zeros(n, dtype=np.uint16)
    todo = np.ones(n, dtype=bool)

    xmin_c = (im & HEAP_XMIN_COMMITTED) != 0
    xmin_bad = ~xmin_c & ((im & HEAP_XMIN_INVALID) != 0)
    state[xmin_bad] = DEAD
    todo &= ~xmin_bad
    no_xmax = ((im & HEAP_XMAX_INVALID) != 0) | (xmax == 0)
    lock_only = (im & HEAP_XMAX_LOCK_ONLY) != 0
    u = todo & ~xmin_c
    if u.any():
        running = np.zeros(n, dtype=bool)
        running[u] = procarray.in_progress_vec(xmin[u])
        ins = u & running
        state[ins] = INSERT_IN_PROGRESS
        state[ins & ~no_xmax & ~lock_only & (xmax == xmin)] = DELETE_IN_PROGRESS
        todo &= ~ins
        ask = u & ~running
        st = np.zeros(n, dtype=np.uint8)
        st[ask] = clog.statuses(xmin[ask])
        ok = ask & (st == COMMITTED)
        _hint_committed(clog, hints, ok, xmin, HEAP_XMIN_COMMITTED)
        bad = ask & ~ok
        hints[bad] |= HEAP_XMIN_INVALID
        state[bad] = DEAD
        todo &= ~bad
    # inserter committed from here on
    state[todo & no_xmax] = LIVE
    todo &= ~no_xmax
    lk = todo & lock_only
    if lk.any():
        gone = lk & ((im & HEAP_XMAX_COMMITTED) == 0)
        r = np.zeros(n, dtype=bool)
        r[gone] = procarray.in_progress_vec(xmax[gone])
        hints[gone & ~r] |= HEAP_XMAX_INVALID
        state[lk] = LIVE
        todo &= ~lk
    uc = todo & ((im & HEAP_XMAX_COMMITTED) == 0)
    if uc.any():
        r = np.zeros(n, dtype=bool)
        r[uc] = procarray.in_progress_vec(xmax[uc])
        state[uc & r] = DELETE_IN_PROGRESS
        todo &= ~(uc & r)
        ask = uc & ~r
        st = np.zeros(n, dtype=np.uint8)
        st[ask] = clog.statuses(xmax[ask])
        ok = ask & (st == COMMITTED)
        _hint_committed(clog, hints, ok, xmax, HEAP_XMAX_COMMITTED)
        ab = ask & ~ok
        hints[ab] |= HEAP_XMAX_INVALID
        state[ab] = LIVE
        todo &= ~ab
    state[todo & (xmax >= horizon)] = RECENTLY_DEAD
    state[todo & (xmax < horizon)] = DEAD
    return state, hints


def surely_dead(xmax: int, infomask: int, horizon: int) -> bool:
    """HeapTupleIsSurelyDead: dead to everyone, judged from hint bits alone.

    As PostgreSQL: an inserter not known committed decides alone (dead iff known
    aborted); then a deleter that is invalid, only a locker or not known committed means
    "not dead".  Plus minidb's xmax 0 = no deleter, as everywhere in this module."""
    if not infomask & HEAP_XMIN_COMMITTED:
        return bool(infomask & HEAP_XMIN_INVALID)
    if infomask & HEAP_XMAX_INVALID or xmax == 0 or _xmax_is_lock_only(infomask):
        return False
    if not infomask & HEAP_XMAX_COMMITTED:
        return False
    return xmax < horizon


# ---------------------------------------------------------------------------------------------
# writers
def satisfies_update(xmin: int, xmax: int, cmin: int, cmax: int, infomask: int,
                     curcid: int, myxid: int, procarray, clog, *, ctid_is_self: bool,
                     mine: frozenset | None = None) -> tuple[int, int]:
    """(TM result, hint bits) for a writer that wants to update/delete/lock this version.

    The writer has already found the version visible to its snapshot (or, in READ
    COMMITTED, is re-checking the newest version of a chain).  BEING_MODIFIED means: wait
    for ``xmax`` to end, then ask again.  ``ctid_is_self`` (t_ctid is the tuple's own TID)
    tells a committed delete (DELETED) from a committed update (UPDATED: follow t_ctid).
    ``mine``: all the writer's live xids when it has subtransactions (``myxid`` is then
    the one it writes with), else None.
    """
    gone = TM_DELETED if ctid_is_self else TM_UPDATED
    hints = 0
    if not infomask & HEAP_XMIN_COMMITTED:
        if infomask & HEAP_XMIN_INVALID:
            return TM_INVISIBLE, 0
        if myxid and (xmin == myxid or (mine and xmin in mine)):
            if cmin >= curcid:
                return TM_INVISIBLE, 0  # inserted by a later command
            if infomask & HEAP_XMAX_INVALID or xmax == 0 or _xmax_is_lock_only(infomask):
                return TM_OK, 0
            if xmax != myxid and not (mine and xmax in mine):
                return TM_OK, HEAP_XMAX_INVALID
            # PostgreSQL: changed by this command (or later) -> SELF_MODIFIED, the caller
            # skips it; by an earlier command -> INVISIBLE (the scan could not have seen it)
            return (TM_SELF_MODIFIED if cmax >= curcid else TM_INVISIBLE), 0
        if procarray.is_in_progress(xmin):
            return TM_INVISIBLE, 0
        if clog.status(xmin) == COMMITTED:
            if clog.commit_hints_ok(xmin):
                hints |= HEAP_XMIN_COMMITTED
        else:
            return TM_INVISIBLE, HEAP_XMIN_INVALID
    # inserter committed
    if infomask & HEAP_XMAX_INVALID or xmax == 0:
        return TM_OK, hints
    if infomask & HEAP_XMAX_COMMITTED and not _xmax_is_lock_only(infomask):
        return gone, hints
    if myxid and (xmax == myxid or (mine and xmax in mine)):
        if _xmax_is_lock_only(infomask):
            return TM_OK, hints  # locked by me: I may go on
        return (TM_SELF_MODIFIED if cmax >= curcid else TM_INVISIBLE), hints
    if procarray.is_in_progress(xmax):
        return TM_BEING_MODIFIED, hints
    if _xmax_is_lock_only(infomask):
        return TM_OK, hints | HEAP_XMAX_INVALID  # the locker has gone
    if clog.status(xmax) == COMMITTED:
        return gone, hints | (HEAP_XMAX_COMMITTED if clog.commit_hints_ok(xmax) else 0)
    return TM_OK, hints | HEAP_XMAX_INVALID


__all__ = [
    "satisfies_mvcc", "satisfies_mvcc_batch", "satisfies_vacuum", "satisfies_vacuum_batch",
    "surely_dead", "satisfies_update", "RunningAfter", "VacuumJudge", "DEAD", "LIVE",
    "RECENTLY_DEAD", "INSERT_IN_PROGRESS", "DELETE_IN_PROGRESS", "HTSV_NAMES", "TM_OK", "TM_INVISIBLE", "TM_SELF_MODIFIED",
    "TM_BEING_MODIFIED", "TM_UPDATED", "TM_DELETED", "ABORTED", "FIRST_NORMAL_XID",
]
