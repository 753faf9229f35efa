"""``minidb.session.Session``: statements, transaction blocks, and concurrent writers.

What is proven here, with sessions in threads of one process (waits are detected from the
proc array's wait-for state, never from elapsed time):
  * autocommit statements, blocks that commit or roll back, visibility of each between
    two sessions (no dirty reads; READ COMMITTED sees new commits per statement,
    REPEATABLE READ does not); ``get`` finds the visible version through a HOT chain;
  * an error inside a block fails it: later statements raise InFailedSqlTransaction
    until rollback; commit of a failed block rolls back; an error in an autocommit
    statement rolls back just that statement; SERIALIZABLE is refused;
  * a writer meeting a running updater waits for it; then READ COMMITTED re-checks the
    newest version (two concurrent ``balance + 1`` both count; a row that no longer
    matches the WHERE clause, or was deleted, is skipped; an aborted updater leaves the
    original row to the waiter), and REPEATABLE READ raises 40001;
  * lock_timeout gives 55P03; a two-session deadlock gives 40P01 to exactly one of them
    and the other completes; SELECT FOR UPDATE blocks a concurrent UPDATE until commit,
    after which the update applies on top of the locker's change;
  * pg_stat counters after commit and after rollback follow pgstat's table.

Not proven here: anything across processes (tests of the anomaly suite do that), or
pruning (tests for minidb.heap.prune).
"""

from __future__ import annotations

import threading
import time

import pytest

from minidb.catalog import ColumnDef
from minidb.errors import (ActiveSqlTransaction, DatabaseError, DeadlockDetected,
                           InFailedSqlTransaction, LockNotAvailable, NotSupportedError,
                           SerializationFailure)
from minidb.heap.check import check_heap
from minidb.instance import Instance
from minidb.shmem import TC
from minidb.session import Session

COLS = [ColumnDef("id", "integer"), ColumnDef("bal", "integer"), ColumnDef("note", "text")]


@pytest.fixture
def inst(tmp_path):
    i = Instance(tmp_path / "data", shared_buffers=64)
    try:
        yield i
    finally:
        i.close()


@pytest.fixture
def sessions(inst):
    """``sessions(n, **settings)``: n sessions (deadlock_timeout 100 ms), closed after."""
    made = []

    def make(n=2, **settings):
        settings.setdefault("deadlock_timeout", 100)
        new = [Session(inst, **settings) for _ in range(n)]
        made.extend(new)
        return new
    yield make
    for s in made:
        s.close()


def load(inst, rows=((1, 100, "a"), (2, 200, "b"), (3, 300, "c"))):
    inst.catalog.create_table("acct", list(COLS))
    with Session(inst) as s:
        s.insert_many("acct", rows)


def by_id(i):
    return lambda r: r[0] == i


def bal(s, i):
    (row,) = s.select("acct", by_id(i))
    return row[1]


def add(k):
    return lambda r: (r[0], r[1] + k, r[2])


class Bg(threading.Thread):
    """Run ``fn`` in a thread; ``outcome()`` joins and returns (result, exception)."""

    def __init__(self, fn):
        super().__init__(daemon=True)
        self.fn, self.result, self.error = fn, None, None
        self.start()

    def run(self):
        try:
            self.result = self.fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            self.error = e

    def outcome(self, timeout=30.0):
        self.join(timeout)
        assert not self.is_alive(), "background statement did not finish"
        return self.result, self.error


def wait_until(pred, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition never reached"
        time.sleep(0.002)


def waiting_on(inst, waiter: Session, holder: Session) -> bool:
    """``waiter`` sleeps on ``holder``'s transaction (the wait-for graph says so)."""
    x = holder.xact.xid
    return x != 0 and int(inst.seg.proc_wait_xid[waiter.backend.slot]) == x


# -- statements and blocks -------------------------------------------------------------------------

def test_autocommit_and_blocks_between_two_sessions(inst, sessions):
    load(inst)
    a, b = sessions()
    assert a.insert("acct", (4, 400, "d"))[0] == 0           # autocommit: visible at once
    assert len(b.select("acct")) == 4
    a.begin()
    a.insert("acct", (5, 500, "e"))
    assert a.update("acct", by_id(1), add(1)) == 1
    assert a.delete("acct", by_id(2)) == 1
    assert sorted(r[0] for r in a.select("acct")) == [1, 3, 4, 5]   # own writes
    assert sorted(b.select("acct")) == [(1, 100, "a"), (2, 200, "b"), (3, 300, "c"),
                                        (4, 400, "d")]             # no dirty read
    assert a.commit() is True
    assert sorted(b.select("acct", columns=[0, 1])) == [(1, 101), (3, 300), (4, 400),
                                                        (5, 500)]
    a.begin()
    a.delete("acct", lambda r: True)
    a.rollback()
    assert len(b.select("acct")) == 4
    assert b.select("acct", lambda r: r[1] > 350, columns=[2]) == [("d",), ("e",)]


def test_read_committed_vs_repeatable_read_snapshots(inst, sessions):
    load(inst)
    a, rc, rr = sessions(3)
    rc.begin()
    rr.begin("repeatable read")
    assert bal(rc, 1) == bal(rr, 1) == 100
    a.update("acct", by_id(1), add(5))
    assert bal(rc, 1) == 105          # non-repeatable read: allowed in READ COMMITTED
    assert bal(rr, 1) == 100          # prevented in REPEATABLE READ
    rc.commit(), rr.commit()
    assert bal(rr, 1) == 105


def test_get_follows_hot_chain(inst, sessions):
    load(inst)
    a, b = sessions()
    ((tid, row),) = a.select_tids("acct", by_id(1))
    assert row == (1, 100, "a") and a.get("acct", tid) == row
    a.begin()
    a.update("acct", by_id(1), add(1))
    assert a.get("acct", tid) == (1, 101, "a")     # the root TID leads to the new version
    assert b.get("acct", tid) == (1, 100, "a")
    a.commit()
    assert b.get("acct", tid) == (1, 101, "a")
    ((new_tid, _),) = b.select_tids("acct", by_id(1))
    assert new_tid != tid and new_tid[0] == tid[0]
    assert b.get("acct", new_tid) == (1, 101, "a")
    a.delete("acct", by_id(1))
    assert b.get("acct", tid) is None


def test_error_in_block_fails_it_until_rollback(inst, sessions):
    load(inst)
    (a,) = sessions(1)
    a.begin()
    a.insert("acct", (7, 700, "g"))
    with pytest.raises(DatabaseError):
        a.insert("acct", ("not a number", 1, "x"))
    with pytest.raises(InFailedSqlTransaction):
        a.select("acct")
    with pytest.raises(InFailedSqlTransaction):
        a.update("acct", by_id(1), add(1))
    assert a.commit() is False            # COMMIT of a failed block rolls back
    assert len(a.select("acct")) == 3     # (7, ...) is gone; the session works again
    # an error in an autocommit statement rolls back only that statement
    with pytest.raises(DatabaseError):
        a.update("acct", lambda r: True, lambda r: (r[0], "bad", r[2]))
    assert a.select("acct", columns=[1]) == [(100,), (200,), (300,)]
    assert a.xact.state == "idle"
    a.begin()
    with pytest.raises(ActiveSqlTransaction):
        a.begin()
    a.rollback()


def test_error_in_predicate_fails_block(inst, sessions):
    load(inst)
    (a,) = sessions(1)
    a.begin()
    with pytest.raises(ZeroDivisionError):
        a.select("acct", lambda r: 1 / 0)
    with pytest.raises(InFailedSqlTransaction):
        a.insert("acct", (9, 9, "z"))
    a.rollback()
    assert a.insert("acct", (9, 9, "z"))


def test_serializable_is_not_supported(inst, sessions):
    load(inst)
    (a,) = sessions(1)
    with pytest.raises(NotSupportedError, match="SERIALIZABLE"):
        a.begin("serializable")
    assert a.xact.state == "idle"
    (s,) = sessions(1, default_transaction_isolation="serializable")
    with pytest.raises(NotSupportedError):
        s.select("acct")


# -- concurrent writers ---------------------------------------------------------------------------

def test_two_concurrent_increments_both_count_read_committed(inst, sessions):
    load(inst)
    a, b = sessions()
    a.begin()
    assert a.update("acct", by_id(1), add(1)) == 1
    b.begin()
    bg = Bg(lambda: b.update("acct", by_id(1), add(1)))
    wait_until(lambda: waiting_on(inst, b, a))
    assert bg.is_alive()
    a.commit()
    assert bg.outcome() == (1, None)
    b.commit()
    assert bal(a, 1) == 102
    with Session(inst) as c:
        assert c.table_stats("acct")["n_tup_upd"] == 2
    check_heap(a.backend, inst.catalog.heap_rel("acct"))


def test_waiter_after_rollback_updates_original(inst, sessions):
    load(inst)
    a, b = sessions()
    a.begin()
    a.update("acct", by_id(1), add(50))
    bg = Bg(lambda: b.update("acct", by_id(1), add(1)))     # autocommit statement
    wait_until(lambda: waiting_on(inst, b, a))
    a.rollback()
    assert bg.outcome() == (1, None)
    assert bal(a, 1) == 101


def test_recheck_walks_on_when_newest_version_is_updated_meanwhile(inst, sessions,
                                                                    monkeypatch):
    """The chain walk found version v1 whose updater C was still running; C commits
    before the re-check's fresh snapshot.  The re-check must walk on to v2, not skip the
    row (that would lose B's update).  The hooks order the steps deterministically."""
    import minidb.heap.epq as epq_mod
    load(inst)
    a, b, c = sessions(3)
    real_follow = epq_mod.follow_update_chain
    calls = []

    def follow(backend, rel, tid):
        if not calls:                      # B's first walk: let C update v1 first
            c.begin()
            assert c.update("acct", by_id(1), add(10)) == 1
        got = real_follow(backend, rel, tid)
        if not calls:                      # ... and commit right after the walk
            c.commit()
        calls.append(got)
        return got

    monkeypatch.setattr(epq_mod, "follow_update_chain", follow)
    a.begin()
    a.update("acct", by_id(1), add(1))                       # v0 -> v1, running
    bg = Bg(lambda: b.update("acct", by_id(1), add(100)))    # B saw v0: waits for A
    wait_until(lambda: waiting_on(inst, b, a))
    a.commit()
    assert bg.outcome() == (1, None)
    assert len(calls) == 2 and calls[0] != calls[1]
    assert bal(a, 1) == 100 + 1 + 10 + 100


def test_recheck_skips_row_that_no_longer_matches(inst, sessions):
    load(inst)
    a, b = sessions()
    a.begin()
    a.update("acct", by_id(1), add(1000))                    # bal 100 -> 1100
    bg = Bg(lambda: b.update("acct", lambda r: r[1] < 500, lambda r: (r[0], -1, r[2])))
    wait_until(lambda: waiting_on(inst, b, a))
    a.commit()
    assert bg.outcome() == (2, None)                         # rows 2 and 3 only
    assert sorted(a.select("acct", columns=[0, 1])) == [(1, 1100), (2, -1), (3, -1)]


def test_recheck_sees_row_deleted_meanwhile(inst, sessions):
    load(inst)
    a, b = sessions()
    a.begin()
    a.delete("acct", by_id(2))
    upd = Bg(lambda: b.update("acct", lambda r: True, add(1)))
    wait_until(lambda: waiting_on(inst, b, a))
    a.commit()
    assert upd.outcome() == (2, None)
    assert sorted(a.select("acct", columns=[0, 1])) == [(1, 101), (3, 301)]


def test_delete_waits_for_update_then_deletes_newest(inst, sessions):
    load(inst)
    a, b = sessions()
    a.begin()
    a.update("acct", by_id(3), add(1))
    dele = Bg(lambda: b.delete("acct", lambda r: r[1] >= 300))
    wait_until(lambda: waiting_on(inst, b, a))
    a.commit()
    assert dele.outcome() == (1, None)
    assert [r[0] for r in a.select("acct")] == [1, 2]


def test_repeatable_read_concurrent_update_is_40001(inst, sessions):
    load(inst)
    a, b = sessions()
    b.begin("repeatable read")
    assert bal(b, 1) == 100
    a.begin()
    a.update("acct", by_id(1), add(1))
    bg = Bg(lambda: b.update("acct", by_id(1), add(1)))
    wait_until(lambda: waiting_on(inst, b, a))
    a.commit()
    _, err = bg.outcome()
    assert isinstance(err, SerializationFailure) and err.sqlstate == "40001"
    with pytest.raises(InFailedSqlTransaction):
        b.select("acct")
    b.rollback()
    # without waiting: the update committed before the RR transaction's write
    b.begin("repeatable read")
    assert bal(b, 2) == 200
    a.delete("acct", by_id(2))
    with pytest.raises(SerializationFailure, match="delete"):
        b.update("acct", by_id(2), add(1))
    b.rollback()
    # a concurrent aborted update does not fail RR
    b.begin("repeatable read")
    bal(b, 3)
    a.begin()
    a.update("acct", by_id(3), add(1))
    a.rollback()
    assert b.update("acct", by_id(3), add(7)) == 1
    b.commit()
    assert bal(a, 1) == 101 and bal(a, 3) == 307


def test_lock_timeout_is_honoured(inst, sessions):
    load(inst)
    a, = sessions(1)
    b, = sessions(1, lock_timeout=100)
    a.begin()
    a.update("acct", by_id(1), add(1))
    b.begin()
    with pytest.raises(LockNotAvailable) as ei:
        b.update("acct", by_id(1), add(1))
    assert ei.value.sqlstate == "55P03"
    b.rollback()
    a.commit()
    assert b.update("acct", by_id(1), add(1)) == 1
    assert bal(a, 1) == 102


def test_deadlock_has_exactly_one_victim(inst, sessions):
    load(inst)
    a, b = sessions()
    a.begin(), b.begin()
    a.update("acct", by_id(1), add(1))
    b.update("acct", by_id(2), add(1))

    def second(s, row):
        try:
            return s.update("acct", by_id(row), add(10))
        except DeadlockDetected:
            s.rollback()
            raise

    ta = Bg(lambda: second(a, 2))
    wait_until(lambda: waiting_on(inst, a, b))
    tb = Bg(lambda: second(b, 1))
    ra, rb = ta.outcome(), tb.outcome()
    errors = [r[1] for r in (ra, rb) if r[1] is not None]
    assert len(errors) == 1 and isinstance(errors[0], DeadlockDetected)
    assert errors[0].sqlstate == "40P01"
    winner, loser = (a, b) if ra[1] is None else (b, a)
    assert (ra if winner is a else rb)[0] == 1
    assert winner.commit() is True
    assert loser.xact.state == "idle"
    rows = dict(a.select("acct", columns=[0, 1]))
    if winner is a:
        assert (rows[1], rows[2]) == (101, 210)
    else:
        assert (rows[1], rows[2]) == (110, 201)


def test_select_for_update_blocks_update_until_commit(inst, sessions):
    load(inst)
    a, b = sessions()
    a.begin()
    assert a.select_for_update("acct", by_id(1)) == [(1, 100, "a")]
    assert bal(b, 1) == 100                                   # readers are not blocked
    bg = Bg(lambda: b.update("acct", by_id(1), add(1)))
    wait_until(lambda: waiting_on(inst, b, a))
    assert bg.is_alive()
    a.update("acct", by_id(1), add(10))                       # the locker may write
    assert bg.is_alive()
    a.commit()
    assert bg.outcome() == (1, None)
    assert bal(a, 1) == 111                                   # applied on top of a's change


def test_select_for_update_rechecks_in_read_committed(inst, sessions):
    load(inst)
    a, b = sessions()
    a.begin()
    a.update("acct", by_id(1), add(1))
    a.delete("acct", by_id(2))
    b.begin()
    bg = Bg(lambda: b.select_for_update("acct", lambda r: r[1] < 250))
    wait_until(lambda: waiting_on(inst, b, a))
    a.commit()
    rows, err = bg.outcome()
    assert err is None and rows == [(1, 101, "a")]            # newest version; 2 deleted
    c, = sessions(1, lock_timeout=50)
    with pytest.raises(LockNotAvailable):
        c.update("acct", by_id(1), add(1))                    # b holds the lock
    assert c.update("acct", by_id(3), add(1)) == 1            # not locked
    b.commit()
    assert c.update("acct", by_id(1), add(1)) == 1


# -- statistics -----------------------------------------------------------------------------------

def test_pgstat_live_estimate_does_not_depend_on_publish_order(inst, sessions):
    """A delete published before the insert it follows (its backend's interval ran out
    first) still gives live = inserted - deleted: the sums are clamped when read, not at
    each publish (clamping at publish would have floored -1 at 0 and shown 3)."""
    inst.catalog.create_table("acct", list(COLS))
    inst.catalog.create_table("other", list(COLS))
    (a,) = sessions(1, stats_flush_interval=60_000)
    (b,) = sessions(1, stats_flush_interval=0)
    a.insert_many("other", [(0, 0, "x")])                     # a's first publish, used up
    a.insert_many("acct", [(i, 0, "x") for i in range(6)])    # held back (60 s)
    b.delete("acct", by_id(4))                                # published at once: live -1
    row = inst.seg.table_stats_oid.tolist().index(a.backend.catalog.table("acct").oid)
    assert int(inst.seg.table_stats[row][TC["n_live_tup"]]) == -1   # for a moment
    st = b.table_stats("acct")                                # a's +6 published now
    assert (st["n_live_tup"], st["n_dead_tup"]) == (5, 1)


def test_pgstat_published_at_most_every_interval_and_read_after_a_flush(inst, sessions):
    """stats_flush_interval: transactions ending within it publish once; a reader of this
    process (another session or the same) flushes first, so it sees every transaction
    that ended, aborted ones with their dead versions; closing a session publishes."""
    inst.catalog.create_table("acct", list(COLS))
    a, b = sessions(2, stats_flush_interval=60_000)
    ts = a.backend.pgstat
    assert a.insert_many("acct", [(i, 0, "x") for i in range(10)]) == 10  # publishes: first
    first = ts.publishes
    for i in range(5):
        a.update("acct", by_id(i), add(1))                  # five transactions, unpublished
    a.begin()
    a.insert_many("acct", [(i, 0, "y") for i in range(20, 24)])
    a.update("acct", by_id(5), add(1))
    a.delete("acct", by_id(6))
    a.rollback()
    a.delete("acct", by_id(9))
    assert ts.publishes == first and ts.unflushed
    row = inst.seg.table_stats_oid.tolist().index(a.backend.catalog.table("acct").oid)
    assert int(inst.seg.table_stats[row][TC["n_tup_upd"]]) == 0  # not yet in shared memory
    st = b.table_stats("acct")                                # another session: flushed
    assert ts.publishes == first + 1 and not ts.unflushed
    assert (st["n_tup_ins"], st["n_tup_upd"], st["n_tup_del"]) == (14, 6, 2)
    assert (st["n_live_tup"], st["n_dead_tup"]) == (9, 5 + 4 + 1 + 1)
    a.update("acct", by_id(0), add(1))
    assert a.table_stats("acct")["n_tup_upd"] == 7            # the same session
    a.update("acct", by_id(0), add(1))
    a.close()                                                 # closing publishes
    assert int(inst.seg.table_stats[row][TC["n_tup_upd"]]) == 8


def test_pgstat_after_commit_and_abort(inst, sessions):
    inst.catalog.create_table("acct", list(COLS))
    a, = sessions(1)
    assert a.insert_many("acct", [(i, 0, "x") for i in range(10)]) == 10
    st = a.table_stats("acct")
    assert (st["n_tup_ins"], st["n_live_tup"], st["n_dead_tup"]) == (10, 10, 0)
    assert a.update("acct", lambda r: r[0] < 3, add(1)) == 3
    assert a.delete("acct", lambda r: r[0] >= 8) == 2
    st = a.table_stats("acct")
    assert (st["n_tup_upd"], st["n_tup_hot_upd"], st["n_tup_del"]) == (3, 3, 2)
    assert (st["n_live_tup"], st["n_dead_tup"]) == (8, 5)
    a.begin()
    a.insert_many("acct", [(i, 0, "y") for i in range(20, 24)])
    a.update("acct", by_id(5), add(1))
    a.delete("acct", by_id(6))
    before = a.table_stats("acct")
    assert before == st                                     # nothing published yet
    a.rollback()
    st = a.table_stats("acct")
    assert (st["n_tup_ins"], st["n_tup_upd"], st["n_tup_del"]) == (14, 4, 3)
    assert (st["n_live_tup"], st["n_dead_tup"]) == (8, 10)  # aborted ins + upd are dead
    assert st["seq_scan"] >= 4
    assert len(a.select("acct")) == 8
