"""Savepoints: subtransactions with their own xids (minidb.txn.subxact).

SQL semantics and error codes; the commit log and the proc array at each step (a subxid at
the level's first write, ABORTED at ROLLBACK TO, the tree COMMITTED at commit); other
sessions (snapshots see subxids running, a row lock taken in a level is freed by ROLLBACK
TO and kept by RELEASE); a hypothesis state machine of savepoint / release / rollback to /
insert / update / delete / errors against a model; crashes (the commit record's subxids
are replayed, a rolled-back or unfinished subxid's rows stay invisible).
"""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition,
                                 rule)

import minidb.dbapi as dbapi
import minidb.errors as db
from minidb.txn.clog import ABORTED, COMMITTED, IN_PROGRESS


def _connect(path, **kw):
    c = dbapi.connect(str(path), **kw)
    c.autocommit = True
    return c


@pytest.fixture
def conns(tmp_path):
    opened = []

    def make(**kw):
        c = _connect(tmp_path / "data", **kw)
        opened.append(c)
        return c
    yield make
    for c in opened:
        try:
            c.close()
        except Exception:  # noqa: BLE001 - teardown after a failed test
            pass


def _rows(cur, sql="select k, v from t order by k"):
    cur.execute(sql)
    return cur.fetchall()


def _setup(c):
    cur = c.cursor()
    cur.execute("create table t (k int primary key, v int)")
    return cur


def _xact(c):
    return c._session.xact


def _slot_subxids(c):
    return c._instance.procarray.subxids_of(c._session._backend.slot)


def test_savepoint_release_rollback_to(conns):
    c = conns()
    cur = _setup(c)
    cur.execute("begin")
    cur.execute("insert into t values (1, 1)")
    cur.execute("savepoint a")
    cur.execute("insert into t values (2, 2)")
    cur.execute("update t set v = 10 where k = 1")
    cur.execute("savepoint b")
    cur.execute("insert into t values (3, 3)")
    cur.execute("delete from t where k = 2")
    assert _rows(cur) == [(1, 10), (3, 3)]
    cur.execute("rollback to savepoint b")
    assert cur.statusmessage if hasattr(cur, "statusmessage") else True
    assert _rows(cur) == [(1, 10), (2, 2)]
    cur.execute("insert into t values (4, 4)")    # b is still defined
    cur.execute("rollback to b")
    cur.execute("release savepoint b")
    cur.execute("rollback to a")
    assert _rows(cur) == [(1, 1)]
    cur.execute("insert into t values (2, 20)")
    cur.execute("release a")
    other = conns().cursor()
    assert _rows(other) == []
    cur.execute("commit")
    assert _rows(other) == [(1, 1), (2, 20)]


def test_errors(conns):
    c = conns()
    cur = _setup(c)
    for sql in ("savepoint a", "release a", "rollback to a"):
        with pytest.raises(db.Error) as e:
            cur.execute(sql)
        assert e.value.sqlstate == "25P01"
    cur.execute("begin")
    cur.execute("savepoint a")
    with pytest.raises(db.Error) as e:
        cur.execute("release nope")
    assert e.value.sqlstate == "3B001" and str(e.value) == 'savepoint "nope" does not exist'
    with pytest.raises(db.Error) as e:           # the block failed: only ROLLBACK [TO]
        cur.execute("savepoint c")
    assert e.value.sqlstate == "25P02"
    cur.execute("rollback to a")
    cur.execute("savepoint a")                   # a name may repeat: the innermost counts
    cur.execute("insert into t values (1, 1)")
    cur.execute("release a")
    cur.execute("rollback to a")                 # the outer one
    assert _rows(cur) == []
    cur.execute("rollback")


def test_statement_error_needs_rollback_to(conns):
    c = conns()
    cur = _setup(c)
    cur.execute("begin")
    cur.execute("insert into t values (1, 1)")
    cur.execute("savepoint a")
    cur.execute("insert into t values (2, 2)")
    with pytest.raises(db.IntegrityError):
        cur.execute("insert into t values (1, 5)")
    with pytest.raises(db.Error) as e:
        cur.execute("select 1")
    assert e.value.sqlstate == "25P02"
    cur.execute("rollback to a")
    assert _rows(cur) == [(1, 1)]                # the level's insert went with it
    cur.execute("insert into t values (3, 3)")
    cur.execute("commit")
    assert _rows(cur) == [(1, 1), (3, 3)]
    # without a savepoint the whole transaction is gone at the error; ROLLBACK TO cannot help
    cur.execute("begin")
    cur.execute("insert into t values (4, 4)")
    with pytest.raises(db.Error):
        cur.execute("select 1 / 0")
    with pytest.raises(db.Error) as e:
        cur.execute("rollback to a")
    assert e.value.sqlstate == "3B001"
    with pytest.raises(db.Error) as e:
        cur.execute("select 1")
    assert e.value.sqlstate == "25P02"
    cur.execute("commit")                        # = rollback
    assert _rows(cur) == [(1, 1), (3, 3)]


def test_commit_log_and_proc_array(conns):
    c = conns()
    cur = _setup(c)
    clog = c._instance.clog
    cur.execute("begin")
    cur.execute("savepoint a")
    assert _xact(c).xid == 0                     # lazy: no write, no xid at any level
    cur.execute("insert into t values (1, 1)")
    top = _xact(c).xid
    (sa,) = _slot_subxids(c)
    assert top and sa > top                      # the parent's xid comes first
    cur.execute("savepoint b")
    cur.execute("insert into t values (2, 2)")
    sb = _slot_subxids(c)[1]
    assert sb > sa
    other = conns()
    assert other._instance.procarray.is_in_progress(sb)
    cur.execute("rollback to a")                 # aborts a's tree: a and b
    assert clog.status(sa) == ABORTED and clog.status(sb) == ABORTED
    assert _slot_subxids(c) == [] and not c._instance.procarray.is_in_progress(sa)
    cur.execute("insert into t values (3, 3)")
    (sa2,) = _slot_subxids(c)
    cur.execute("release a")
    cur.execute("savepoint c")
    cur.execute("update t set v = 30 where k = 3")
    sc = _slot_subxids(c)[1]
    assert clog.status(top) == clog.status(sa2) == clog.status(sc) == IN_PROGRESS
    cur.execute("commit")
    assert clog.status(top) == clog.status(sa2) == clog.status(sc) == COMMITTED
    assert _slot_subxids(c) == []
    assert _rows(other.cursor()) == [(3, 30)]


def test_snapshots_see_subxids_running(conns):
    c, o = conns(), conns()
    cur = _setup(c)
    ocur = o.cursor()
    cur.execute("insert into t values (1, 1)")
    cur.execute("begin")
    cur.execute("savepoint a")
    cur.execute("update t set v = 2 where k = 1")
    cur.execute("insert into t values (2, 2)")
    ocur.execute("begin isolation level repeatable read")
    assert _rows(ocur) == [(1, 1)]               # the subxid is running for the snapshot
    cur.execute("release a")
    cur.execute("commit")
    assert _rows(ocur) == [(1, 1)]               # still, for the same snapshot
    ocur.execute("commit")
    assert _rows(ocur) == [(1, 2), (2, 2)]


def _update_in_thread(o, sql):
    out = {}

    def run():
        try:
            o.cursor().execute(sql)
            out["done"] = time.monotonic()
        except Exception as e:  # noqa: BLE001 - reported by the test
            out["error"] = e
    th = threading.Thread(target=run)
    th.start()
    return th, out


def _waiting(o, timeout=60.0) -> bool:
    inst = o._instance
    slot = o._session._backend.slot
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if inst.seg.proc_wait_xid[slot]:
            return True
        time.sleep(0.01)
    return False


def test_row_lock_of_a_level_goes_with_rollback_to(conns):
    c, o = conns(), conns(lock_timeout=60000)
    cur = _setup(c)
    cur.execute("insert into t values (1, 1)")
    cur.execute("begin")
    cur.execute("insert into t values (5, 5)")   # the top level has an xid of its own
    cur.execute("savepoint a")
    cur.execute("update t set v = 2 where k = 1")
    th, out = _update_in_thread(o, "update t set v = v + 100 where k = 1")
    assert _waiting(o)
    # the waiter waits on the top-level transaction in the wait-for graph
    assert int(o._instance.seg.proc_wait_xid[o._session._backend.slot]) == _xact(c).xid
    cur.execute("rollback to a")                 # the row lock is gone now
    th.join(60)
    assert "done" in out and "error" not in out
    assert _xact(c).state == "in progress"       # while c's transaction still runs
    cur.execute("commit")
    assert _rows(cur) == [(1, 101), (5, 5)]


def test_row_lock_of_a_released_level_is_kept_to_the_end(conns):
    c, o = conns(), conns(lock_timeout=60000)
    cur = _setup(c)
    cur.execute("insert into t values (1, 1)")
    cur.execute("begin")
    cur.execute("savepoint a")
    cur.execute("update t set v = 2 where k = 1")
    cur.execute("release a")
    th, out = _update_in_thread(o, "update t set v = v + 100 where k = 1")
    assert _waiting(o)
    time.sleep(0.2)
    assert "done" not in out
    cur.execute("commit")
    th.join(60)
    assert "done" in out and "error" not in out
    assert _rows(cur) == [(1, 102)]


def test_own_subxid_rows_are_mine_for_unique_checks_and_locks(conns):
    c = conns(lock_timeout=5000)
    cur = _setup(c)
    cur.execute("begin")
    cur.execute("savepoint a")
    cur.execute("insert into t values (1, 1)")
    cur.execute("release a")
    with pytest.raises(db.IntegrityError):       # no wait on my own subxid
        cur.execute("insert into t values (1, 2)")
    cur.execute("rollback")
    cur.execute("begin")
    cur.execute("savepoint a")
    cur.execute("insert into t values (1, 1)")
    cur.execute("savepoint b")
    cur.execute("delete from t where k = 1")
    cur.execute("insert into t values (1, 3)")   # the delete was mine: no conflict
    cur.execute("select k, v from t where k = 1 for update")
    assert cur.fetchall() == [(1, 3)]
    cur.execute("rollback to b")
    cur.execute("update t set v = 4 where k = 1")
    cur.execute("commit")
    assert _rows(cur) == [(1, 4)]


def test_too_many_live_subxids(conns):
    c = conns()
    cur = _setup(c)
    cur.execute("begin")
    with pytest.raises(db.Error) as e:
        for i in range(70):
            cur.execute(f"savepoint s{i}")
            cur.execute(f"insert into t values ({i}, {i})")
    assert e.value.sqlstate == "54000"
    cur.execute("rollback to s0")
    cur.execute("insert into t values (100, 100)")
    cur.execute("commit")
    assert _rows(cur) == [(100, 100)]


# -- the state machine ---------------------------------------------------------------------------
NAMES = ["a", "b", "c"]
KEYS = st.integers(1, 6)


class SavepointMachine(RuleBasedStateMachine):
    """One session against a model: ``committed`` (what others see), ``cur`` (what the
    session sees), ``stack`` (per savepoint: its name and ``cur`` when it was made),
    ``failed`` (an error aborted the innermost level, or the transaction when none)."""

    def __init__(self):
        super().__init__()
        self.committed: dict = {}
        self.cur: dict | None = None
        self.stack: list = []
        self.failed = False
        self.top_lost = False

    @initialize()
    def open(self):
        import tempfile
        self.dir = tempfile.mkdtemp(prefix="subxact-")
        self.c = _connect(f"{self.dir}/data", lock_timeout=5000)
        self.o = _connect(f"{self.dir}/data")
        self.sql = self.c.cursor()
        _setup(self.c)

    def teardown(self):
        if hasattr(self, "c"):
            self.c.close()
            self.o.close()
            import shutil
            shutil.rmtree(self.dir, ignore_errors=True)

    def _error(self):
        """What an error does to the model (AbortSubTransaction / AbortTransaction)."""
        if self.failed:
            return
        self.failed = True
        if self.stack:
            self.cur = dict(self.stack[-1][1])
        else:
            self.top_lost = True

    def _expect_error(self, sql):
        with pytest.raises(db.Error):
            self.sql.execute(sql)
        self._error()

    @precondition(lambda self: self.cur is None)
    @rule()
    def begin(self):
        self.sql.execute("begin")
        self.cur = dict(self.committed)

    def _writable(self):
        return self.cur is not None and not self.failed

    @precondition(_writable)
    @rule(k=KEYS, v=st.integers(0, 99))
    def write(self, k, v):
        if k in self.cur:
            self.sql.execute(f"update t set v = {v} where k = {k}")
        else:
            self.sql.execute(f"insert into t values ({k}, {v})")
        self.cur[k] = v

    @precondition(_writable)
    @rule(k=KEYS)
    def delete(self, k):
        self.sql.execute(f"delete from t where k = {k}")
        self.cur.pop(k, None)

    @precondition(_writable)
    @rule(k=KEYS)
    def duplicate(self, k):
        if k in self.cur:
            self._expect_error(f"insert into t values ({k}, 0)")

    @precondition(_writable)
    @rule()
    def division_by_zero(self):
        self._expect_error("select 1 / 0")

    @precondition(_writable)
    @rule(name=st.sampled_from(NAMES))
    def savepoint(self, name):
        self.sql.execute(f"savepoint {name}")
        self.stack.append((name, dict(self.cur)))

    def _find(self, name):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == name:
                return i
        return -1

    @precondition(_writable)
    @rule(name=st.sampled_from(NAMES))
    def release(self, name):
        i = self._find(name)
        if i < 0:
            self._expect_error(f"release {name}")
            return
        self.sql.execute(f"release savepoint {name}")
        del self.stack[i:]

    @precondition(lambda self: self.cur is not None)
    @rule(name=st.sampled_from(NAMES))
    def rollback_to(self, name):
        i = self._find(name) if not self.top_lost else -1
        if i < 0:
            self._expect_error(f"rollback to {name}")
            return
        self.sql.execute(f"rollback to savepoint {name}")
        del self.stack[i + 1:]
        self.cur = dict(self.stack[i][1])
        self.failed = False

    @precondition(lambda self: self.cur is not None)
    @rule(commit=st.booleans())
    def end(self, commit):
        self.sql.execute("commit" if commit else "rollback")
        if commit and not self.failed:
            self.committed = self.cur
        self.cur, self.stack, self.failed, self.top_lost = None, [], False, False

    @invariant()
    def sees_the_model(self):
        if not hasattr(self, "c"):
            return
        assert dict(_rows(self.o.cursor())) == self.committed
        if not self.failed:
            expect = self.cur if self.cur is not None else self.committed
            assert dict(_rows(self.sql)) == expect


SavepointMachine.TestCase.settings = settings(
    max_examples=12, stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
test_savepoint_machine = SavepointMachine.TestCase


@pytest.mark.long
@pytest.mark.timeout(900)
def test_savepoint_machine_long():
    run = SavepointMachine.TestCase
    run.settings = settings(max_examples=80, stateful_step_count=40, deadline=None,
                            suppress_health_check=[HealthCheck.too_slow])
    run().runTest()


# -- crashes -------------------------------------------------------------------------------------
def _power_loss(c) -> None:
    """Drop the instance as a power loss would (no checkpoint, no buffer or commit-log page
    written) and forget it: the next connect recovers the directory from the WAL."""
    import minidb.instance
    c._instance.crash_abandon()
    minidb.instance._SHARED.clear()


def test_crash_replays_subxids_and_keeps_aborted_ones_invisible(tmp_path):
    path = tmp_path / "data"
    c = _connect(path)
    cur = _setup(c)
    cur.execute("checkpoint")            # the commit log's pages now come from the WAL only
    cur.execute("begin")
    cur.execute("insert into t values (1, 1)")
    top = _xact(c).xid
    cur.execute("savepoint a")
    cur.execute("insert into t values (2, 2)")
    cur.execute("release a")
    cur.execute("savepoint b")
    cur.execute("insert into t values (3, 3)")
    cur.execute("update t set v = 10 where k = 1")
    sa, sb = _slot_subxids(c)
    cur.execute("rollback to b")
    cur.execute("savepoint c")
    cur.execute("delete from t where k = 2")
    cur.execute("insert into t values (4, 4)")
    sc = _slot_subxids(c)[-1]
    cur.execute("commit")
    # a transaction cut off by the crash: its top level and a released level
    cur.execute("begin")
    cur.execute("insert into t values (5, 5)")
    cur.execute("savepoint d")
    cur.execute("insert into t values (6, 6)")
    cur.execute("update t set v = 40 where k = 4")
    cur.execute("release d")
    open_top = _xact(c).xid
    (sd,) = _slot_subxids(c)
    _power_loss(c)
    c2 = _connect(path)
    try:
        assert c2._instance.recovery_stats["records"] > 0   # it did recover from the WAL
        clog = c2._instance.clog
        assert clog.status(top) == clog.status(sa) == clog.status(sc) == COMMITTED
        assert clog.status(sb) == ABORTED    # its ABORT record went out with the commit's flush
        assert clog.status(open_top) != COMMITTED and clog.status(sd) != COMMITTED
        assert _rows(c2.cursor()) == [(1, 1), (4, 4)]
        cur2 = c2.cursor()
        cur2.execute("update t set v = v + 1")   # nothing of the dead ones is in the way
        assert _rows(cur2) == [(1, 2), (4, 5)]
    finally:
        c2.close()


def test_waldump_lists_subxacts(tmp_path):
    from minidb.wal import record as rec
    from minidb.wal.dump import _xact_desc
    from minidb.txn.xact import pack_xact, unpack_xact
    data = pack_xact(0, [16384], [7, 9])
    assert unpack_xact(data)[1:] == ([16384], [7, 9])
    assert unpack_xact(pack_xact(0, []))[1:] == ([], [])
    r = rec.Record.__new__(rec.Record)
    r.main = data
    assert _xact_desc(r).endswith("; rels: base/16384; subxacts: 7 9")


def test_ddl_in_a_rolled_back_level(conns):
    c = conns()
    cur = _setup(c)
    cur.execute("insert into t values (1, 1)")
    cur.execute("begin")
    cur.execute("savepoint a")
    cur.execute("create table u (x int)")
    cur.execute("insert into u values (1)")
    cur.execute("drop table t")
    cur.execute("rollback to a")
    with pytest.raises(db.Error) as e:
        cur.execute("select * from u")
    assert e.value.sqlstate == "42P01"
    cur.execute("rollback to a")
    assert _rows(cur) == [(1, 1)]                # the drop went with the level
    cur.execute("savepoint b")
    cur.execute("create table w (x int)")
    cur.execute("release b")
    cur.execute("commit")
    assert _rows(cur) == [(1, 1)]                # t's file was kept at commit
    cur.execute("insert into w values (7)")
    assert _rows(cur, "select x from w") == [(7,)]
    assert _rows(conns().cursor()) == [(1, 1)]


def test_commit_log_tree_across_pages(tmp_path):
    from minidb.txn.clog import SUB_COMMITTED, XACTS_PER_PAGE
    c = _connect(tmp_path / "data")
    try:
        clog = c._instance.clog
        base = XACTS_PER_PAGE - 2            # top on page 0, two subxids on page 1
        top, same, far = base, base + 1, XACTS_PER_PAGE + 5
        clog.zero_page(1)
        seen = []
        real = clog.set_status

        def spy(xid, status, lsn=0):
            seen.append((xid, status, clog.status(top)))
            real(xid, status, lsn)
        clog.set_status = spy
        clog.set_tree(top, [same, far], COMMITTED)
        assert seen[0] == (far, SUB_COMMITTED, IN_PROGRESS)   # before the top commits
        assert seen[-1] == (far, COMMITTED, COMMITTED)
        assert clog.status(top) == clog.status(same) == clog.status(far) == COMMITTED
    finally:
        c.close()


def test_rollback_to_releases_the_levels_relation_locks(conns):
    c, o = conns(), conns(lock_timeout=60000)
    cur = _setup(c)
    cur.execute("create table u (x int)")
    cur.execute("begin")
    cur.execute("select * from u")               # AccessShare on u before the savepoint
    cur.execute("savepoint a")
    cur.execute("lock table t in access exclusive mode")
    cur.execute("insert into u values (1)")      # RowExclusive on u: taken in the level
    lm = c._session._backend.lockmgr
    modes = {(tag[1], mode) for tag, mode in lm.local}
    assert len(modes) >= 3
    th, out = _update_in_thread(o, "insert into t values (9, 9)")
    assert _waiting_for_lock(o)
    cur.execute("rollback to a")                 # t's AccessExclusive goes: o inserts
    th.join(60)
    assert "done" in out and "error" not in out
    left = {(tag[1], mode) for tag, mode in lm.local}
    assert len(left) == 1                        # only the AccessShare on u from before
    cur.execute("commit")
    assert _rows(cur) == [(9, 9)]


def _waiting_for_lock(o, timeout=60.0) -> bool:
    seg = o._instance.seg
    slot = o._session._backend.slot
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if seg.proc_wait_lock[slot] >= 0:
            return True
        time.sleep(0.01)
    return False


def test_rolled_back_drop_keeps_the_tables_statistics(conns):
    c = conns()
    cur = _setup(c)
    cur.execute("insert into t values (1, 1)")
    cur.execute("begin")
    cur.execute("savepoint a")
    cur.execute("drop table t")
    cat = c._session._backend.catalog
    assert cat.dropped_oids
    cur.execute("rollback to a")
    assert cat.dropped_oids == []
    cur.execute("commit")
