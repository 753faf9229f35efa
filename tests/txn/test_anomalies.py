"""Scripted isolation anomalies, one session per thread, steps ordered by the test.

Each test is a small schedule in the style of PostgreSQL's isolation specs: sessions run
statements in a fixed order; a statement that must wait for another transaction runs in a
thread, and the test proves it is *waiting* (not merely slow) by finding the session's
target xid in shared memory (``proc_wait_xid[slot]``), then lets the blocker end and
checks the waiter's outcome.  Nothing asserts on time.

============================  ================  ==========================================
anomaly                       level             expected (as in PostgreSQL)
============================  ================  ==========================================
dirty read                    RC, RR            never: uncommitted insert/update/delete
                                                are invisible to others
dirty write                   RC                never: the second writer waits for the
                                                first to end, then works on its outcome
non-repeatable read           RC                allowed: each statement sees new commits
                              RR                prevented: one snapshot per transaction
phantom (insert)              RC / RR           allowed / prevented
lost update                   RR                40001 for the second updater if the first
                                                commits; it proceeds if the first aborts
                              RC                no lost update: the waiter re-evaluates
                                                the newest version (both increments land)
write skew                    RR                ALLOWED: snapshot isolation permits it;
                                                minidb, like PostgreSQL's REPEATABLE
                                                READ, has no SSI
============================  ================  ==========================================

What these tests do not prove: that the outcome holds for every interleaving (only the
scripted ones run here; ``test_si_model`` samples more), or across processes (the
sessions are threads of one process; ``test_concurrency`` and ``test_crash`` fork).
"""

from __future__ import annotations

import threading
import time

import pytest

from minidb.catalog import ColumnDef
from minidb.errors import (InFailedSqlTransaction, NotSupportedError,
                           SerializationFailure)
from minidb.heap.check import check_heap
from minidb.instance import Instance
from minidb.session import Session
from txn_steps import RC, RR, WAIT_LIMIT_S, Step, wait_blocked, key, add  # noqa: F401
from minidb.txn.clog import ABORTED, COMMITTED



# ---------------------------------------------------------------------------------------------
# helpers
def setv(v):
    return lambda r: (r[0], v)


def table(s: Session, name="t") -> dict:
    rows = s.select(name)
    d = dict(rows)
    assert len(d) == len(rows), f"duplicate keys in {rows}"
    return d


INITIAL = {k: 100 * k for k in range(1, 6)}


@pytest.fixture
def inst(tmp_path, assert_no_pins):
    inst = Instance(tmp_path / "data", shared_buffers=64)
    inst.catalog.create_table("t", [ColumnDef("k", "bigint", True), ColumnDef("v", "bigint")])
    opened: list[Session] = []

    def session(**settings) -> Session:
        s = Session(inst, **settings)
        opened.append(s)
        return s

    inst.session = session
    s = session()
    assert s.insert_many("t", sorted(INITIAL.items())) == len(INITIAL)
    try:
        yield inst
        for s in opened:
            s.rollback()
        check = session()
        check_heap(check.backend, inst.catalog.heap_rel("t"))
        assert_no_pins(inst)
        assert not (inst.seg.proc_wait_xid != 0).any()
        assert not (inst.seg.proc_xact_waiters != 0).any()
    finally:
        for s in opened:
            s.close()
        inst.close()


# ---------------------------------------------------------------------------------------------
# dirty reads
@pytest.mark.parametrize("reader_iso", [RC, RR])
@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_no_dirty_read(inst, reader_iso, outcome):
    w, r = inst.session(), inst.session()
    r.begin(reader_iso)
    assert table(r) == INITIAL  # the RR snapshot is taken here, before the writes
    w.begin()
    w.insert("t", (10, 1000))
    assert w.update("t", key(2), setv(-2)) == 1
    assert w.delete("t", key(3)) == 1
    mine = {1: 100, 2: -2, 4: 400, 5: 500, 10: 1000}
    assert table(w) == mine                       # the writer sees its own changes
    assert table(r) == INITIAL                    # the reader sees none of them
    fresh = inst.session()
    assert table(fresh) == INITIAL                # nor does an autocommit reader
    assert fresh.get("t", w.select_tids("t", key(10))[0][0]) is None
    getattr(w, outcome)()
    after = mine if outcome == "commit" else INITIAL
    assert table(fresh) == after
    # the RR reader keeps its snapshot; the RC reader sees the commit at its next statement
    assert table(r) == (INITIAL if reader_iso == RR else after)
    r.commit()
    assert table(r) == after


# ---------------------------------------------------------------------------------------------
# dirty writes
@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_no_dirty_write_update_waits(inst, outcome):
    w1, w2 = inst.session(), inst.session()
    w1.begin()
    assert w1.update("t", key(1), add(1)) == 1
    xid1 = w1.xact.xid
    assert xid1
    step = Step(lambda: w2.update("t", key(1), add(10)))   # autocommit
    wait_blocked(inst, w2, step, xid1)
    assert table(inst.session()) == INITIAL                # nothing of either is visible
    getattr(w1, outcome)()
    assert step.join() == 1
    expect = 111 if outcome == "commit" else 110
    assert table(inst.session())[1] == expect
    assert inst.clog.status(xid1) == (COMMITTED if outcome == "commit" else ABORTED)


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_update_waits_for_delete(inst, outcome):
    w1, w2 = inst.session(), inst.session()
    w1.begin()
    assert w1.delete("t", key(1)) == 1
    step = Step(lambda: w2.update("t", key(1), add(10)))
    wait_blocked(inst, w2, step, w1.xact.xid)
    getattr(w1, outcome)()
    if outcome == "commit":
        assert step.join() == 0          # the row is gone when the waiter looks again
        assert 1 not in table(inst.session())
    else:
        assert step.join() == 1
        assert table(inst.session())[1] == 110


def test_select_for_update_blocks_writers_not_readers(inst):
    w1, w2, r = inst.session(), inst.session(), inst.session()
    w1.begin()
    assert w1.select_for_update("t", key(1)) == [(1, 100)]
    assert table(r) == INITIAL                      # a row lock does not block a reader
    step = Step(lambda: w2.update("t", key(1), add(10)))
    wait_blocked(inst, w2, step, w1.xact.xid)
    w1.commit()
    assert step.join() == 1
    assert table(r)[1] == 110


def test_second_locker_waits_and_sees_the_newest_version(inst):
    """SELECT FOR UPDATE under RC after a concurrent update: returns the new version."""
    w1, w2 = inst.session(), inst.session()
    w1.begin()
    assert w1.update("t", key(2), setv(222)) == 1
    w2.begin()
    step = Step(lambda: w2.select_for_update("t", key(2)))
    wait_blocked(inst, w2, step, w1.xact.xid)
    w1.commit()
    assert step.join() == [(2, 222)]
    w2.commit()


# ---------------------------------------------------------------------------------------------
# non-repeatable reads and phantoms
def test_non_repeatable_read_allowed_under_read_committed(inst):
    r, w = inst.session(), inst.session()
    r.begin(RC)
    assert table(r)[1] == 100
    assert w.update("t", key(1), setv(200)) == 1   # autocommit
    assert table(r)[1] == 200                       # the same query, another answer
    r.commit()


def test_non_repeatable_read_prevented_under_repeatable_read(inst):
    r, w = inst.session(), inst.session()
    r.begin(RR)
    assert table(r) == INITIAL
    assert w.update("t", key(1), setv(200)) == 1
    assert w.delete("t", key(2)) == 1
    assert table(r) == INITIAL                      # the snapshot of the first statement
    assert r.select("t", key(1), columns=[1]) == [(100,)]
    r.commit()
    assert table(r) == {1: 200, 3: 300, 4: 400, 5: 500}


def test_repeatable_read_snapshot_is_taken_at_first_statement(inst):
    """As in PostgreSQL: BEGIN takes no snapshot; the first statement does."""
    r, w = inst.session(), inst.session()
    r.begin(RR)
    assert w.update("t", key(1), setv(200)) == 1
    assert table(r)[1] == 200
    assert w.update("t", key(1), setv(300)) == 1
    assert table(r)[1] == 200
    r.commit()


@pytest.mark.parametrize("iso", [RC, RR])
def test_phantom_insert(inst, iso):
    r, w = inst.session(), inst.session()
    r.begin(iso)
    big = lambda row: row[1] >= 300  # noqa: E731
    assert len(r.select("t", big)) == 3
    w.insert("t", (6, 600))
    w.insert_many("t", [(7, 700), (8, 800)])
    n = len(r.select("t", big))
    assert n == (3 if iso == RR else 6)
    r.commit()
    assert len(r.select("t", big)) == 6


# ---------------------------------------------------------------------------------------------
# lost updates
def test_lost_update_rr_second_updater_fails_when_first_commits(inst):
    a, b = inst.session(), inst.session()
    a.begin(RR)
    b.begin(RR)
    assert table(a)[1] == 100 and table(b)[1] == 100
    assert a.update("t", key(1), add(1)) == 1
    step = Step(lambda: b.update("t", key(1), add(1)))
    wait_blocked(inst, b, step, a.xact.xid)
    a.commit()
    with pytest.raises(SerializationFailure) as ei:
        step.join()
    assert ei.value.sqlstate == "40001"
    with pytest.raises(InFailedSqlTransaction):  # the block is failed until ROLLBACK
        b.select("t")
    b.rollback()
    assert table(b)[1] == 101                    # a's increment only
    # the retry, in a new transaction, sees a's commit and succeeds
    b.begin(RR)
    assert b.update("t", key(1), add(1)) == 1
    b.commit()
    assert table(inst.session())[1] == 102


def test_lost_update_rr_second_updater_proceeds_when_first_aborts(inst):
    a, b = inst.session(), inst.session()
    a.begin(RR)
    b.begin(RR)
    assert table(a)[1] == 100 and table(b)[1] == 100
    assert a.update("t", key(1), add(1)) == 1
    step = Step(lambda: b.update("t", key(1), add(5)))
    wait_blocked(inst, b, step, a.xact.xid)
    a.rollback()
    assert step.join() == 1
    assert table(b)[1] == 105                    # its own write, on the version it saw
    b.commit()
    assert table(inst.session())[1] == 105


@pytest.mark.parametrize("op", ["update", "delete", "select_for_update"])
@pytest.mark.parametrize("concurrent", ["update", "delete"])
def test_rr_write_after_concurrent_commit_fails_at_once(inst, op, concurrent):
    """The concurrent writer committed after our snapshot: no wait, straight to 40001."""
    a, b = inst.session(), inst.session()
    a.begin(RR)
    assert table(a)[1] == 100
    if concurrent == "update":
        assert b.update("t", key(1), add(1)) == 1
    else:
        assert b.delete("t", key(1)) == 1
    with pytest.raises(SerializationFailure):
        if op == "update":
            a.update("t", key(1), add(1))
        elif op == "delete":
            a.delete("t", key(1))
        else:
            a.select_for_update("t", key(1))
    a.rollback()
    expect = {**INITIAL, 1: 101} if concurrent == "update" else {
        k: v for k, v in INITIAL.items() if k != 1}
    assert table(a) == expect


def test_serialization_failure_aborts_the_transaction_at_once(inst):
    """As PostgreSQL's AbortTransaction at the error: the failed block's xid is aborted and
    its row locks released before the client's ROLLBACK; only the block stays failed."""
    a, b = inst.session(), inst.session()
    c = inst.session(lock_timeout=5000)  # if it had to wait, 55P03 instead of a hang
    a.begin(RR)
    assert table(a)[1] == 100
    assert a.update("t", key(2), add(1)) == 1          # a holds row 2
    xid = a.xact.xid
    assert b.update("t", key(1), add(1)) == 1          # committed after a's snapshot
    with pytest.raises(SerializationFailure):
        a.update("t", key(1), add(1))
    assert inst.clog.status(xid) == ABORTED
    assert c.update("t", key(2), add(10)) == 1         # no wait for a's ROLLBACK
    with pytest.raises(InFailedSqlTransaction):
        a.select("t")
    assert a.commit() is False                         # COMMIT of a failed block
    assert table(a) == {**INITIAL, 1: 101, 2: 210}


def test_rr_write_to_rows_untouched_by_others_succeeds(inst):
    """40001 is only for rows changed concurrently, not for any concurrent commit."""
    a, b = inst.session(), inst.session()
    a.begin(RR)
    assert table(a) == INITIAL
    assert b.update("t", key(2), add(1)) == 1
    assert a.update("t", key(1), add(1)) == 1
    a.commit()
    assert table(a) == {**INITIAL, 1: 101, 2: 201}


def test_no_lost_update_under_read_committed(inst):
    a, b = inst.session(), inst.session()
    a.begin(RC)
    assert a.update("t", key(1), add(1)) == 1
    b.begin(RC)
    step = Step(lambda: b.update("t", key(1), add(1)))
    wait_blocked(inst, b, step, a.xact.xid)
    a.commit()
    assert step.join() == 1           # re-evaluated on a's version: 101 + 1
    b.commit()
    assert table(inst.session())[1] == 102


def test_read_committed_rechecks_the_where_clause_on_the_newest_version(inst):
    """EvalPlanQual: the waiter's predicate is re-checked on the row the first writer left."""
    a, b = inst.session(), inst.session()
    a.begin()
    assert a.update("t", key(1), setv(150)) == 1
    step = Step(lambda: b.update("t", lambda r: r[1] == 100, setv(-1)))
    wait_blocked(inst, b, step, a.xact.xid)
    a.commit()
    assert step.join() == 0           # v is 150 now: no longer matches
    assert table(inst.session())[1] == 150


def test_read_committed_waiter_follows_a_key_change(inst):
    a, b = inst.session(), inst.session()
    a.begin()
    assert a.update("t", key(1), lambda r: (9, r[1])) == 1
    step = Step(lambda: b.delete("t", key(1)))
    wait_blocked(inst, b, step, a.xact.xid)
    a.commit()
    assert step.join() == 0
    assert table(inst.session()) == {9: 100, 2: 200, 3: 300, 4: 400, 5: 500}


# ---------------------------------------------------------------------------------------------
# write skew: the anomaly snapshot isolation allows
def test_write_skew_is_allowed_under_repeatable_read(inst):
    """Two doctors on call; each checks that at least two are, then takes itself off.

    Under SERIALIZABLE (SSI) PostgreSQL would abort one of them; minidb has no SSI, and
    under REPEATABLE READ (snapshot isolation) both commit: the invariant "at least one
    doctor on call" is broken.  This is documented behaviour, asserted so that a change
    to it is noticed.
    """
    inst.catalog.create_table("doctors", [ColumnDef("name", "text", True),
                                          ColumnDef("on_call", "boolean", True)])
    setup = inst.session()
    setup.insert_many("doctors", [("alice", True), ("bob", True)])
    a, b = inst.session(), inst.session()
    on_call = lambda r: r[1]  # noqa: E731
    a.begin(RR)
    b.begin(RR)
    assert len(a.select("doctors", on_call)) >= 2
    assert len(b.select("doctors", on_call)) >= 2
    assert a.update("doctors", lambda r: r[0] == "alice", lambda r: (r[0], False)) == 1
    assert b.update("doctors", lambda r: r[0] == "bob", lambda r: (r[0], False)) == 1
    a.commit()
    b.commit()                         # no 40001: they wrote different rows
    assert setup.select("doctors", on_call) == []
    check_heap(setup.backend, inst.catalog.heap_rel("doctors"))


def test_serializable_is_refused_clearly(inst):
    s = inst.session()
    with pytest.raises(NotSupportedError, match="(?i)serializable"):
        s.begin("serializable")
    s.begin(RR)                        # the session is still usable
    assert table(s) == INITIAL
    s.commit()
