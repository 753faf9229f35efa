"""Tuple visibility (``minidb.txn.visibility``): the decision table, scalar = batch, hint bits.

What is proven here:
  * every row of the HeapTupleSatisfiesMVCC decision table (in the module's docstring) gives the visibility *and* the hint bits PostgreSQL gives, for
    the scalar and for the batch test (rows 6, 10, 13 and 16, the ones simple engines get
    wrong, each with the variants that tell a right engine from a wrong one);
  * each satisfies_vacuum state, and surely_dead's hint-bits-only answers;
  * on hypothesis-generated tuple states (xmin / xmax from a small pool of xids with random
    commit-log states, any hint bits, random snapshots, mine or not, cmin / cmax around
    curcid) the scalar and batch versions agree on every element, for visibility and for
    hint bits, and so do satisfies_vacuum and satisfies_vacuum_batch;
  * on *realistic* states (hint bits that tell the truth, snapshots taken the way the proc
    array takes them) visibility equals a plain model of snapshot isolation, hint bits are
    set only for transactions the commit log decided, never for one still in progress,
    and surely_dead is never true unless satisfies_vacuum says DEAD (that last one on any
    state at all).

The commit log and proc array are small fakes with the real ones' interface (the real
ones are exercised with real transactions in tests/heap/test_mvcc_read.py).  Not proven:
anything about concurrency (the functions are pure given their inputs).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minidb.storage.htup import (HEAP_XMAX_COMMITTED, HEAP_XMAX_INVALID, HEAP_XMAX_LOCK_ONLY,
                                 HEAP_XMIN_COMMITTED, HEAP_XMIN_INVALID)
from minidb.txn.clog import ABORTED, COMMITTED, FIRST_NORMAL_XID, IN_PROGRESS
from minidb.txn import visibility as vis_mod
from minidb.txn.procarray import Snapshot
from minidb.txn.visibility import (DEAD, DELETE_IN_PROGRESS, INSERT_IN_PROGRESS, LIVE,
                                   RECENTLY_DEAD, satisfies_mvcc, satisfies_mvcc_batch,
                                   satisfies_vacuum, satisfies_vacuum_batch, surely_dead)

XMIN_C, XMIN_I = HEAP_XMIN_COMMITTED, HEAP_XMIN_INVALID
XMAX_C, XMAX_I, LOCK = HEAP_XMAX_COMMITTED, HEAP_XMAX_INVALID, HEAP_XMAX_LOCK_ONLY
FROZEN = XMIN_C | XMIN_I
HINT_BITS = XMIN_C | XMIN_I | XMAX_C | XMAX_I


class FakeClog:
    """``CommitLog``'s read interface over a dict (xids below 3 as the real one reads them)."""

    def __init__(self, statuses: dict[int, int]):
        self.st = dict(statuses)

    def status(self, xid: int) -> int:
        if xid < FIRST_NORMAL_XID:
            return COMMITTED if xid else ABORTED
        return self.st.get(xid, IN_PROGRESS)

    def statuses(self, xids) -> np.ndarray:
        return np.array([self.status(int(x)) for x in np.asarray(xids).tolist()],
                        dtype=np.uint8)

    def commit_hints_ok(self, xid=None) -> bool:
        return True  # every commit record flushed (synchronous commit)


class FakeProcArray:
    """``ProcArray``'s "is it running now?" interface over a set of xids."""

    def __init__(self, running):
        self.running = {x for x in running if x >= FIRST_NORMAL_XID}

    def is_in_progress(self, xid: int) -> bool:
        return xid in self.running

    def in_progress_vec(self, xids) -> np.ndarray:
        return np.isin(np.asarray(xids, dtype=np.int64),
                       np.array(sorted(self.running), dtype=np.int64))


def snapshot(xmin, xmax, xip, curcid=0, myxid=0) -> Snapshot:
    return Snapshot(xmin, xmax, np.array(sorted(xip), dtype=np.int64), curcid, myxid)


def batch_of(tuples) -> dict:
    """Header arrays as ``layout.gather_header`` returns them, from (xmin, xmax, cmin,
    cmax, infomask) tuples."""
    a = np.array(tuples, dtype=np.int64).reshape(-1, 5)
    return {"xmin": a[:, 0].astype(np.uint64), "xmax": a[:, 1].astype(np.uint64),
            "cmin": a[:, 2].astype(np.uint32), "cmax": a[:, 3].astype(np.uint32),
            "infomask": a[:, 4].astype(np.uint16)}


# -- the decision table ---------------------------------------------------------------------------
#
# The world of the table tests.  Snapshot taken by ME (xid 9) at command 3, when 8 and 11
# were running and 12 was the newest xid to have finished:
#   xid  3   committed long ago            xid  8   running (in the snapshot)
#   xid  5   committed before the snapshot xid  9   me
#   xid  6   committed before the snapshot xid 11   committed AFTER the snapshot (in xip)
#   xid  7   aborted                       xid 12   aborted, not in the snapshot
#   xid  4   crashed: never recorded, not running (clog says in progress)
#   xid 14   committed after the snapshot (>= snapshot xmax 13)
ME, CURCID = 9, 3
CLOG = FakeClog({3: COMMITTED, 4: IN_PROGRESS, 5: COMMITTED, 6: COMMITTED, 7: ABORTED,
                 8: IN_PROGRESS, 9: IN_PROGRESS, 11: COMMITTED, 12: ABORTED, 14: COMMITTED})
SNAP = snapshot(8, 13, [8, 11], CURCID, ME)


def decide(xmin, xmax, cmin, cmax, infomask, snap=SNAP, clog=CLOG):
    """Both implementations; they must agree.  Returns (visible, hints)."""
    vis, hints = satisfies_mvcc(xmin, xmax, cmin, cmax, infomask, snap, clog)
    bvis, bhints = mvcc_batch(batch_of([(xmin, xmax, cmin, cmax, infomask)]),
                                        snap, clog)
    assert (bool(bvis[0]), int(bhints[0])) == (vis, hints), "scalar and batch disagree"
    # the batch's fast path and slow path must also agree: decide it again among others
    # that force the slow path
    other = (5, 6, 0, 0, XMIN_C)                    # committed insert, deleter unhinted
    bvis, bhints = mvcc_batch(
        batch_of([other, (xmin, xmax, cmin, cmax, infomask), other]), snap, clog)
    assert (bool(bvis[1]), int(bhints[1])) == (vis, hints), "batch depends on its neighbours"
    return vis, hints


def test_row1_xmin_invalid_hint_is_never_visible():
    # the hint wins even over a commit log that says committed
    assert decide(5, 0, 0, 0, XMIN_I | XMAX_I) == (False, 0)
    assert decide(ME, 0, 0, 0, XMIN_I | XMAX_I) == (False, 0)


def test_row2_my_insert_by_a_later_command_is_invisible():
    assert decide(ME, 0, CURCID, 0, XMAX_I) == (False, 0)
    assert decide(ME, 0, CURCID + 1, 0, XMAX_I) == (False, 0)
    assert decide(ME, ME, CURCID, CURCID + 5, 0) == (False, 0)


def test_row3_my_insert_by_an_earlier_command_no_deleter_or_a_lock():
    assert decide(ME, 0, CURCID - 1, 0, XMAX_I) == (True, 0)
    assert decide(ME, 0, 0, 0, 0) == (True, 0)                      # xmax 0, no hint
    assert decide(ME, ME, 0, 1, LOCK) == (True, 0)                  # I locked it


def test_row4_my_insert_deleted_by_my_later_command_is_visible():
    assert decide(ME, ME, 0, CURCID, 0) == (True, 0)
    assert decide(ME, ME, 1, CURCID + 2, 0) == (True, 0)


def test_row5_my_insert_deleted_by_my_earlier_command_is_invisible():
    assert decide(ME, ME, 0, CURCID - 1, 0) == (False, 0)


def test_row6_my_insert_with_another_xmax_is_visible_and_gets_xmax_invalid():
    # The deleter can only be a subtransaction of mine that aborted: PostgreSQL sets
    # XMAX_INVALID without asking the commit log.  Wrong engines: report it invisible
    # (treating xmax as a committed deleter) or skip the hint.
    assert decide(ME, 7, 0, 0, 0) == (True, XMAX_I)
    assert decide(ME, 12, 1, 2, 0) == (True, XMAX_I)
    # even the "committed" hint on xmax does not apply to my own insert's deleter
    assert decide(ME, 7, 0, 0, XMAX_C) == (True, XMAX_I)


def test_row7_inserter_running_for_the_snapshot_is_invisible_and_not_hinted():
    assert decide(8, 0, 0, 0, XMAX_I) == (False, 0)                 # running now
    assert decide(11, 0, 0, 0, XMAX_I) == (False, 0)                # committed since: no
    assert decide(14, 0, 0, 0, XMAX_I) == (False, 0)                # XMIN_COMMITTED hint


def test_row8_inserter_aborted_or_crashed_is_invisible_and_hinted_invalid():
    assert decide(7, 0, 0, 0, XMAX_I) == (False, XMIN_I)
    assert decide(12, 0, 0, 0, XMAX_I) == (False, XMIN_I)           # between xmin and xmax
    assert decide(4, 0, 0, 0, XMAX_I) == (False, XMIN_I)            # crashed
    assert decide(7, 5, 0, 0, 0) == (False, XMIN_I)                 # no look at xmax


def test_row9_committed_inserter_no_deleter():
    assert decide(5, 0, 0, 0, XMAX_I) == (True, XMIN_C)             # newly learned
    assert decide(5, 0, 0, 0, XMIN_C | XMAX_I) == (True, 0)         # already known
    assert decide(2, 0, 0, 0, XMAX_I) == (True, XMIN_C)             # bootstrap xid
    assert decide(5, 8, 0, 0, XMIN_C | LOCK) == (True, 0)           # locked by a runner
    assert decide(5, 6, 0, 0, LOCK) == (True, XMIN_C)               # old lock: no xmax hint


def test_row10_hinted_committed_inserter_running_for_the_snapshot_is_invisible():
    # 11 committed after the snapshot was taken; a later reader set XMIN_COMMITTED.  The
    # hint must not make the row visible to this older snapshot.
    assert decide(11, 0, 0, 0, XMIN_C | XMAX_I) == (False, 0)
    assert decide(14, 0, 0, 0, XMIN_C | XMAX_I) == (False, 0)       # >= snapshot xmax
    # the same tuple, for a snapshot taken after 11 committed, is visible
    later = snapshot(8, 15, [8], CURCID, ME)
    assert decide(11, 0, 0, 0, XMIN_C | XMAX_I, snap=later) == (True, 0)


def test_row11_committed_row_deleted_by_my_later_command_is_visible():
    assert decide(5, ME, 0, CURCID, XMIN_C) == (True, 0)
    assert decide(5, ME, 0, CURCID, 0) == (True, XMIN_C)


def test_row12_committed_row_deleted_by_my_earlier_command_is_invisible():
    assert decide(5, ME, 0, CURCID - 1, XMIN_C) == (False, 0)
    assert decide(5, ME, 0, 0, 0) == (False, XMIN_C)


def test_row13_deleter_running_for_the_snapshot_keeps_the_row_visible_without_hints():
    assert decide(5, 8, 0, 0, XMIN_C) == (True, 0)                  # deleter running
    # deleter committed after the snapshot: still visible, and the commit log's "committed"
    # is *not* cached (XMAX_COMMITTED) by this reader
    assert decide(5, 11, 0, 0, XMIN_C) == (True, 0)
    assert decide(5, 14, 0, 0, XMIN_C) == (True, 0)
    assert decide(5, 14, 0, 0, 0) == (True, XMIN_C)                 # xmin's hint only


def test_row14_deleter_aborted_row_visible_and_hinted_xmax_invalid():
    assert decide(5, 7, 0, 0, XMIN_C) == (True, XMAX_I)
    assert decide(5, 12, 0, 0, 0) == (True, XMIN_C | XMAX_I)
    assert decide(5, 4, 0, 0, XMIN_C) == (True, XMAX_I)             # crashed deleter


def test_row15_deleter_committed_before_the_snapshot_row_invisible_hinted():
    assert decide(5, 6, 0, 0, XMIN_C) == (False, XMAX_C)
    assert decide(3, 6, 0, 0, 0) == (False, XMIN_C | XMAX_C)
    assert decide(5, 6, 0, 0, XMIN_C | XMAX_C) == (False, 0)        # already known


def test_row16_xmax_committed_hint_but_deleter_running_for_the_snapshot_is_visible():
    # Another reader with a newer snapshot set XMAX_COMMITTED; for this snapshot the
    # delete has not happened.  Wrong engines trust the hint and hide the row.
    assert decide(5, 11, 0, 0, XMIN_C | XMAX_C) == (True, 0)
    assert decide(5, 14, 0, 0, XMIN_C | XMAX_C) == (True, 0)
    assert decide(5, 11, 0, 0, XMAX_C) == (True, XMIN_C)
    later = snapshot(8, 15, [8], CURCID, ME)
    assert decide(5, 11, 0, 0, XMIN_C | XMAX_C, snap=later) == (False, 0)


def test_row17_frozen_inserter_skips_the_snapshot_check_on_xmin():
    # frozen = both xmin bits; even an xmin "running" for this snapshot is not asked about
    assert decide(11, 0, 0, 0, FROZEN | XMAX_I) == (True, 0)
    assert decide(11, 8, 0, 0, FROZEN) == (True, 0)                 # as row 13
    assert decide(11, 6, 0, 0, FROZEN) == (False, XMAX_C)           # as row 15
    assert decide(11, 7, 0, 0, FROZEN) == (True, XMAX_I)            # as row 14
    assert decide(11, ME, 0, CURCID - 1, FROZEN) == (False, 0)      # as row 12
    assert decide(11, 11, 0, 0, FROZEN | XMAX_C) == (True, 0)       # as row 16


def test_batch_fast_path_all_hinted():
    """A batch of hinted, undeleted tuples (the fast path) answers per tuple."""
    rows = [(5, 0, 0, 0, XMIN_C | XMAX_I), (11, 0, 0, 0, XMIN_C | XMAX_I),
            (14, 0, 0, 0, XMIN_C | XMAX_I), (11, 0, 0, 0, FROZEN | XMAX_I),
            (6, 8, 0, 0, XMIN_C | LOCK)]
    vis, hints = mvcc_batch(batch_of(rows), SNAP, CLOG)
    assert vis.tolist() == [True, False, False, True, True]
    assert not hints.any()


# -- satisfies_vacuum and surely_dead -------------------------------------------------------------
RUNNING = FakeProcArray([8, 9])
HORIZON = 8   # the oldest xmin any snapshot holds: 3, 5, 6 are older; 11 is not


def mvcc_batch(hdr, snap, clog):
    """``satisfies_mvcc_batch`` both ways - fully vectorized, and with its scalar shortcut
    for small batches - which must agree exactly."""
    saved = vis_mod._MVCC_SCALAR_MAX
    try:
        vis_mod._MVCC_SCALAR_MAX = -1
        vec = satisfies_mvcc_batch(hdr, snap, clog)
        vis_mod._MVCC_SCALAR_MAX = 1 << 30
        sca = satisfies_mvcc_batch(hdr, snap, clog)
    finally:
        vis_mod._MVCC_SCALAR_MAX = saved
    assert vec[0].tolist() == sca[0].tolist() and vec[1].tolist() == sca[1].tolist()
    assert vec[0].dtype == sca[0].dtype and vec[1].dtype == sca[1].dtype
    return vec


def vacuum_batch(hdr, horizon, procarray, clog):
    """``satisfies_vacuum_batch`` both ways - fully vectorized, and with its scalar
    shortcut for batches with few unsettled tuples - which must agree exactly."""
    saved = vis_mod._VACUUM_SCALAR_MAX
    try:
        vis_mod._VACUUM_SCALAR_MAX = -1
        vec = satisfies_vacuum_batch(hdr, horizon, procarray, clog)
        vis_mod._VACUUM_SCALAR_MAX = 1 << 30
        sca = satisfies_vacuum_batch(hdr, horizon, procarray, clog)
    finally:
        vis_mod._VACUUM_SCALAR_MAX = saved
    assert vec[0].tolist() == sca[0].tolist() and vec[1].tolist() == sca[1].tolist()
    assert vec[0].dtype == sca[0].dtype and vec[1].dtype == sca[1].dtype
    return vec


def vac(xmin, xmax, infomask, horizon=HORIZON, procarray=RUNNING, clog=CLOG):
    state, hints = satisfies_vacuum(xmin, xmax, infomask, horizon, procarray, clog)
    bstate, bhints = vacuum_batch(batch_of([(xmin, xmax, 0, 0, infomask)]),
                                  horizon, procarray, clog)
    assert (int(bstate[0]), int(bhints[0])) == (state, hints), "scalar and batch disagree"
    return state, hints


@pytest.mark.parametrize("xmin, xmax, infomask, expect", [
    # inserter aborted (hint or commit log) or crashed
    (5, 0, XMIN_I | XMAX_I, (DEAD, 0)),
    (7, 0, XMAX_I, (DEAD, XMIN_I)),
    (4, 0, XMAX_I, (DEAD, XMIN_I)),
    # inserter running
    (8, 0, XMAX_I, (INSERT_IN_PROGRESS, 0)),
    (8, 8, 0, (DELETE_IN_PROGRESS, 0)),             # inserted and deleted by one running xact
    (8, 8, LOCK, (INSERT_IN_PROGRESS, 0)),
    # inserter committed
    (5, 0, XMAX_I, (LIVE, XMIN_C)),
    (5, 0, XMIN_C | XMAX_I, (LIVE, 0)),
    (5, 8, XMIN_C | LOCK, (LIVE, 0)),               # locker running
    (5, 6, XMIN_C | LOCK, (LIVE, XMAX_I)),          # locker gone (committed or not)
    (5, 7, XMIN_C | LOCK, (LIVE, XMAX_I)),
    (5, 8, XMIN_C, (DELETE_IN_PROGRESS, 0)),
    (5, 7, XMIN_C, (LIVE, XMAX_I)),                 # deleter aborted
    (5, 6, XMIN_C, (DEAD, XMAX_C)),                 # deleter committed before the horizon
    (5, 11, XMIN_C, (RECENTLY_DEAD, XMAX_C)),       # some snapshot may still see it
    (5, 11, XMIN_C | XMAX_C, (RECENTLY_DEAD, 0)),
    (3, 6, 0, (DEAD, XMIN_C | XMAX_C)),
])
def test_satisfies_vacuum_states(xmin, xmax, infomask, expect):
    assert vac(xmin, xmax, infomask) == expect


@pytest.mark.parametrize("xmax, infomask, horizon, expect", [
    (0, XMIN_I | XMAX_I, 8, True),                  # inserter aborted
    (6, XMIN_C | XMAX_C, 8, True),                  # deleted before the horizon
    (6, XMIN_C | XMAX_C, 6, False),                 # not before it
    (11, XMIN_C | XMAX_C, 8, False),
    (6, XMIN_C, 8, False),                          # deleter not known committed: unsure
    (6, 0, 8, False),                               # nothing known
    (6, XMIN_C | XMAX_C | LOCK, 8, False),          # only a lock
    (6, XMAX_C, 8, False),                          # inserter not known committed
    (0, XMIN_C | XMAX_C, 8, False),                 # no deleter at all
    (6, FROZEN | XMAX_C, 8, True),
])
def test_surely_dead_reads_hint_bits_only(xmax, infomask, horizon, expect):
    assert surely_dead(xmax, infomask, horizon) is expect


# -- hypothesis: scalar = batch on any state -----------------------------------------------------
POOL = list(range(3, 13))           # normal xids of the generated worlds
STATUS = st.sampled_from([IN_PROGRESS, COMMITTED, ABORTED])
ANY_BITS = st.sets(st.sampled_from([XMIN_C, XMIN_I, XMAX_C, XMAX_I, LOCK])).map(sum)


@st.composite
def any_world(draw):
    """Commit log, a snapshot (any xmin <= xmax, any xip between), any tuples."""
    clog = FakeClog({x: draw(STATUS) for x in POOL})
    xmin = draw(st.integers(3, 13))
    xmax = draw(st.integers(xmin, 14))
    xip = draw(st.sets(st.integers(xmin, max(xmin, xmax - 1)))) if xmax > xmin else set()
    myxid = draw(st.sampled_from([0] + POOL))
    xip.discard(myxid)
    curcid = draw(st.integers(0, 3))
    snap = snapshot(xmin, xmax, xip, curcid, myxid)
    xids = st.sampled_from([2] + POOL + [13, 14])
    tuples = draw(st.lists(st.tuples(xids, st.sampled_from([0] + POOL + [13, 14]),
                                     st.integers(0, 4), st.integers(0, 4), ANY_BITS),
                           min_size=1, max_size=40))
    running = draw(st.sets(st.sampled_from(POOL)))
    horizon = draw(st.integers(3, 15))
    return clog, snap, tuples, FakeProcArray(running), horizon


@settings(max_examples=400, deadline=None)
@given(any_world())
def test_mvcc_scalar_and_batch_agree_on_any_state(world):
    clog, snap, tuples, _, _ = world
    vis, hints = mvcc_batch(batch_of(tuples), snap, clog)
    for i, t in enumerate(tuples):
        v, h = satisfies_mvcc(*t, snap, clog)
        assert (bool(vis[i]), int(hints[i])) == (v, h), (i, t, snap)


@settings(max_examples=400, deadline=None)
@given(any_world())
def test_vacuum_scalar_and_batch_agree_on_any_state(world):
    clog, _, tuples, procarray, horizon = world
    state, hints = vacuum_batch(batch_of(tuples), horizon, procarray, clog)
    for i, (xmin, xmax, _cmin, _cmax, im) in enumerate(tuples):
        s, h = satisfies_vacuum(xmin, xmax, im, horizon, procarray, clog)
        assert (int(state[i]), int(hints[i])) == (s, h), (i, tuples[i], horizon)


class DeferringClog(FakeClog):
    """A commit log whose listed xids' commit records are unflushed (asynchronous commit):
    their COMMITTED hints are deferred; counts the checks as the real one does."""

    def __init__(self, statuses, unflushed):
        super().__init__(statuses)
        self.unflushed = set(unflushed)
        self.counts = {"hint_checks": 0, "hints_deferred": 0}

    def commit_hints_ok(self, xid=None) -> bool:
        return self.commit_hint_check(xid) != 2

    def commit_hint_check(self, xid) -> int:
        self.counts["hint_checks"] += 1
        if xid in self.unflushed:
            self.counts["hints_deferred"] += 1
            return 2
        return 1

    def _count(self, name, n=1):
        self.counts[name] += n


@settings(max_examples=300, deadline=None)
@given(any_world(), st.sets(st.sampled_from(POOL)), st.integers(0, 12))
def test_vacuum_judge_equals_satisfies_vacuum(world, unflushed, running_from):
    """``VacuumJudge`` (the scalar prune's satisfies_vacuum with each ended xid's facts kept
    for the page) gives satisfies_vacuum's states and hint bits and the same hint-check
    counts, given a ``running_from`` below every running xid."""
    clog, _, tuples, procarray, horizon = world
    running_from = min([running_from] + sorted(procarray.running))
    plain = DeferringClog(clog.st, unflushed)
    judged = DeferringClog(clog.st, unflushed)
    judge = vis_mod.VacuumJudge(procarray, judged, running_from)
    for xmin, xmax, _cmin, _cmax, im in tuples:
        assert judge(xmin, xmax, im, horizon) == satisfies_vacuum(
            xmin, xmax, im, horizon, procarray, plain), (xmin, xmax, hex(im), horizon)
    judge.done()
    assert judged.counts == plain.counts


@settings(max_examples=400, deadline=None)
@given(any_world())
def test_surely_dead_implies_vacuum_dead_on_any_state(world):
    clog, _, tuples, procarray, horizon = world
    for xmin, xmax, _cmin, _cmax, im in tuples:
        if surely_dead(xmax, im, horizon):
            s, _ = satisfies_vacuum(xmin, xmax, im, horizon, procarray, clog)
            assert s == DEAD, (xmin, xmax, hex(im), horizon)


# -- hypothesis: realistic states against a model -------------------------------------------------
@st.composite
def real_world(draw):
    """A state the engine can really be in.

    The commit log decides each xid of the pool; the snapshot is taken as the proc array
    takes it (every xid in progress below xmax is in xip, except my own; some xids that
    finished since are in xip too; xmin = the smallest of those and mine, else xmax); the
    proc array runs exactly the xids in progress.  Tuples: a deleter exists only for a
    committed insert, or is the inserter itself; my insert has only me (or an aborted
    subtransaction-like xid) as deleter; hint bits tell the truth (any subset of it).
    """
    status = {x: draw(STATUS) for x in POOL}
    in_progress = sorted(x for x in POOL if status[x] == IN_PROGRESS)
    myxid = draw(st.sampled_from([0] + in_progress)) if in_progress else 0
    xmax = draw(st.integers(3, 13))
    finished_since = draw(st.sets(st.sampled_from(
        [x for x in POOL if x < xmax and status[x] != IN_PROGRESS] or [0])))
    xip = {x for x in in_progress if x < xmax and x != myxid} | (finished_since - {0})
    xmin = min(xip | ({myxid} if myxid and myxid < xmax else set()) | {xmax})
    curcid = draw(st.integers(0, 3))
    snap = snapshot(xmin, xmax, xip, curcid, myxid)
    clog = FakeClog(status)

    def truthful_bits(xmin_, xmax_, lock):
        bits = 0
        sx = clog.status(xmin_)
        if sx == COMMITTED and draw(st.booleans()):
            bits |= XMIN_C
            if xmin_ < xmin and xmin_ not in xip and draw(st.booleans()):
                bits |= XMIN_I                      # frozen: visible to every snapshot
        if sx == ABORTED and xmin_ >= FIRST_NORMAL_XID and draw(st.booleans()):
            bits |= XMIN_I
        if xmax_ == 0:
            bits |= XMAX_I if draw(st.booleans()) else 0
        else:
            if lock:
                bits |= LOCK
            sm = clog.status(xmax_)
            if sm == COMMITTED and not lock and draw(st.booleans()):
                bits |= XMAX_C
            if sm == ABORTED and draw(st.booleans()):
                bits |= XMAX_I
        return bits

    tuples = []
    for _ in range(draw(st.integers(1, 30))):
        ins = draw(st.sampled_from([2] + POOL))
        if ins == myxid or clog.status(ins) != COMMITTED:
            choices = [0, ins] + [x for x in POOL if status[x] == ABORTED and ins == myxid]
        else:
            choices = [0] + POOL
        dele = draw(st.sampled_from(choices))
        lock = dele != 0 and draw(st.booleans())
        tuples.append((ins, dele, draw(st.integers(0, 4)), draw(st.integers(0, 4)),
                       truthful_bits(ins, dele, lock)))
    running = FakeProcArray(in_progress)
    # the horizon: no older than any xid in progress or the snapshot's xmin
    horizon = draw(st.integers(3, min(in_progress + [xmin, 14])))
    return clog, snap, tuples, running, horizon


def model_visible(t, snap, clog) -> bool:
    """Snapshot isolation, stated plainly: the insert happened for me, the delete did not."""
    xmin, xmax, cmin, cmax, im = t

    def happened(xid, cid):
        if snap.myxid and xid == snap.myxid:
            return cid < snap.curcid
        if xid < FIRST_NORMAL_XID:
            return xid != 0
        return clog.status(xid) == COMMITTED and not snap.xid_running(xid)

    inserted = happened(xmin, cmin) or (im & FROZEN) == FROZEN
    deleted = xmax != 0 and not im & LOCK and happened(xmax, cmax)
    return inserted and not deleted


@settings(max_examples=500, deadline=None)
@given(real_world())
def test_realistic_states_match_the_model_and_hint_only_decided_xids(world):
    clog, snap, tuples, _, _ = world
    vis, hints = mvcc_batch(batch_of(tuples), snap, clog)
    for i, t in enumerate(tuples):
        xmin, xmax = t[0], t[1]
        v, h = satisfies_mvcc(*t, snap, clog)
        assert (bool(vis[i]), int(hints[i])) == (v, h)
        assert v == model_visible(t, snap, clog), (t, snap)
        assert not h & ~HINT_BITS
        if h & XMIN_C:
            assert clog.status(xmin) == COMMITTED
        if h & XMIN_I:
            assert clog.status(xmin) == ABORTED
        if h & XMAX_C:
            assert clog.status(xmax) == COMMITTED
        if h & XMAX_I:
            assert clog.status(xmax) == ABORTED
        # a hint never claims an outcome the snapshot still considers running... unless
        # the snapshot is mine and it is my own aborted "subtransaction" - not in this model
        for xid, mask in ((xmin, XMIN_C | XMIN_I), (xmax, XMAX_C | XMAX_I)):
            if h & mask:
                assert clog.status(xid) != IN_PROGRESS


@settings(max_examples=500, deadline=None)
@given(real_world())
def test_realistic_vacuum_hints_only_for_finished_xids(world):
    clog, _, tuples, procarray, horizon = world
    state, hints = vacuum_batch(batch_of(tuples), horizon, procarray, clog)
    for i, (xmin, xmax, _c, _c2, im) in enumerate(tuples):
        s, h = satisfies_vacuum(xmin, xmax, im, horizon, procarray, clog)
        assert (int(state[i]), int(hints[i])) == (s, h)
        if h & XMIN_C:
            assert clog.status(xmin) == COMMITTED
        if h & XMIN_I:
            assert clog.status(xmin) == ABORTED
        if h & XMAX_C:
            assert clog.status(xmax) == COMMITTED
        if h & XMAX_I:      # an aborted deleter, or a locker that has gone either way
            assert clog.status(xmax) == ABORTED or (im & LOCK and
                                                    not procarray.is_in_progress(xmax))
        for xid, mask in ((xmin, XMIN_C | XMIN_I), (xmax, XMAX_C | XMAX_I)):
            if h & mask:
                assert not procarray.is_in_progress(xid)
        if surely_dead(xmax, im | h, horizon):
            assert s == DEAD
