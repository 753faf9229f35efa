"""Transactions through SQL: BEGIN / COMMIT / ROLLBACK, isolation levels, the READ
COMMITTED re-check of UPDATE and DELETE against a concurrent writer, SELECT ... FOR UPDATE,
and REPEATABLE READ's serialization failure.  Two sessions of one instance, the second
driven from a thread (a blocked writer waits on its backend's semaphore)."""

from __future__ import annotations

import threading
import time

import pytest

from minidb import errors


def _in_thread(fn):
    box = {}

    def run():
        try:
            box["result"] = fn()
        except BaseException as e:  # noqa: BLE001
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def _wait_blocked(db, t, timeout=10.0):
    """Wait until the thread's backend is waiting on a lock (or the thread ended)."""
    deadline = time.time() + timeout
    while time.time() < deadline and t.is_alive():
        time.sleep(0.02)
        if _is_waiting(db):
            return
    return


def _is_waiting(db):
    seg = db.inst.seg
    waits = getattr(seg, "proc_wait_xid", None)
    if waits is None:
        return True
    return bool((waits != 0).any())


@pytest.fixture
def acc(db):
    db.x("CREATE TABLE acc (id int PRIMARY KEY, bal int)")
    db.x("INSERT INTO acc VALUES (1, 100), (2, 200)")
    return db


def test_commit_rollback(acc, db2):
    db = acc
    assert db.x("BEGIN").status == "BEGIN"
    db.x("UPDATE acc SET bal = 0 WHERE id = 1")
    assert db.one("SELECT bal FROM acc WHERE id = 1") == 0
    assert db2.one("SELECT bal FROM acc WHERE id = 1") == 100      # not committed yet
    assert db.x("ROLLBACK").status == "ROLLBACK"
    assert db.one("SELECT bal FROM acc WHERE id = 1") == 100
    db.x("START TRANSACTION")
    db.x("UPDATE acc SET bal = 1 WHERE id = 1")
    assert db.x("COMMIT").status == "COMMIT"
    assert db2.one("SELECT bal FROM acc WHERE id = 1") == 1
    r = db.x("COMMIT")
    assert r.messages and "no transaction" in r.messages[0]
    db.x("BEGIN")
    assert "already" in db.x("BEGIN").messages[0]
    db.x("END")
    db.x("BEGIN")
    db.x("ABORT")


def test_statements_in_a_block_see_each_other(acc):
    db = acc
    db.x("BEGIN")
    db.x("INSERT INTO acc VALUES (3, 300)")
    db.x("UPDATE acc SET bal = bal + 1 WHERE id = 3")
    assert db.one("SELECT bal FROM acc WHERE id = 3") == 301
    db.x("DELETE FROM acc WHERE id = 3")
    assert db.rows("SELECT * FROM acc WHERE id = 3") == []
    db.x("COMMIT")


def test_repeatable_read_snapshot(acc, db2):
    db = acc
    db.x("BEGIN ISOLATION LEVEL REPEATABLE READ")
    assert db.one("SELECT bal FROM acc WHERE id = 2") == 200
    db2.x("UPDATE acc SET bal = 250 WHERE id = 2")
    assert db.one("SELECT bal FROM acc WHERE id = 2") == 200     # same snapshot
    with pytest.raises(errors.SerializationFailure) as ei:
        db.x("UPDATE acc SET bal = bal + 1 WHERE id = 2")
    assert ei.value.sqlstate == "40001"
    db.x("ROLLBACK")
    assert db.one("SELECT bal FROM acc WHERE id = 2") == 250


def test_set_transaction_isolation(acc):
    db = acc
    db.x("BEGIN")
    db.x("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    assert db.one("SHOW transaction_isolation") == "repeatable read"
    db.x("COMMIT")
    with pytest.raises(errors.NotSupportedError):
        db.x("BEGIN ISOLATION LEVEL SERIALIZABLE")


def test_read_committed_recheck_counts_both_updates(acc, db2):
    db = acc
    db.x("BEGIN")
    db.x("UPDATE acc SET bal = bal + 10 WHERE id = 1")
    t, box = _in_thread(lambda: db2.x("UPDATE acc SET bal = bal + 1 WHERE id = 1"))
    _wait_blocked(db2, t)
    time.sleep(0.2)
    assert t.is_alive()                    # waiting for our row lock
    db.x("COMMIT")
    t.join(10)
    assert "error" not in box, box
    assert box["result"].status == "UPDATE 1"
    assert db.one("SELECT bal FROM acc WHERE id = 1") == 111     # both increments count


def test_read_committed_recheck_drops_rows_that_no_longer_match(acc, db2):
    db = acc
    db.x("BEGIN")
    db.x("UPDATE acc SET bal = 0 WHERE id = 2")
    t, box = _in_thread(lambda: db2.x("DELETE FROM acc WHERE bal >= 200"))
    _wait_blocked(db2, t)
    time.sleep(0.2)
    db.x("COMMIT")
    t.join(10)
    assert box["result"].status == "DELETE 0"     # the newest version has bal 0
    assert db.one("SELECT bal FROM acc WHERE id = 2") == 0


def test_select_for_update_blocks_writers(acc, db2):
    db = acc
    db.x("BEGIN")
    assert db.rows("SELECT id, bal FROM acc WHERE id = 1 FOR UPDATE") == [(1, 100)]
    t, box = _in_thread(lambda: db2.x("UPDATE acc SET bal = 5 WHERE id = 1"))
    _wait_blocked(db2, t)
    time.sleep(0.2)
    assert t.is_alive()
    db.x("UPDATE acc SET bal = bal - 1 WHERE id = 1")
    db.x("COMMIT")
    t.join(10)
    assert box["result"].status == "UPDATE 1"
    assert db.one("SELECT bal FROM acc WHERE id = 1") == 5


def test_for_update_returns_newest_version(acc, db2):
    db = acc
    db2.x("BEGIN")
    db2.x("UPDATE acc SET bal = 7 WHERE id = 2")
    t, box = _in_thread(lambda: db.rows("SELECT bal FROM acc WHERE id = 2 FOR UPDATE"))
    _wait_blocked(db, t)
    time.sleep(0.2)
    db2.x("COMMIT")
    t.join(10)
    assert box.get("result") == [(7,)], box


def test_unique_violation_waits_for_inserter(acc, db2):
    db = acc
    db.x("BEGIN")
    db.x("INSERT INTO acc VALUES (5, 1)")
    t, box = _in_thread(lambda: db2.x("INSERT INTO acc VALUES (5, 2)"))
    _wait_blocked(db2, t)
    time.sleep(0.2)
    db.x("ROLLBACK")                        # the other insert may now go in
    t.join(10)
    assert box.get("result") is not None and box["result"].status == "INSERT 0 1", box
    assert db.one("SELECT bal FROM acc WHERE id = 5") == 2


def test_vacuum_not_in_block(acc):
    db = acc
    db.x("BEGIN")
    with pytest.raises(errors.ActiveSqlTransaction):
        db.x("VACUUM acc")
    db.x("ROLLBACK")
    assert db.x("VACUUM acc").status == "VACUUM"


def test_read_only_transactions_take_no_xid_and_leave_no_trace(db):
    """A read-only statement - autocommit or in a block - assigns no xid (PostgreSQL's
    lazy xid assignment), and its end clears the slot's published xmin (the no-xid path
    of ``ProcArray.end_transaction``, which takes no lock)."""
    db.x("CREATE TABLE t (a int PRIMARY KEY, b int)")
    db.x("INSERT INTO t VALUES (1, 10)")
    seg, slot = db.inst.seg, db.session.backend.slot
    pa = db.inst.procarray
    before = pa.next_xid()
    sel = db.engine.prepare("SELECT b FROM t WHERE a = ?")
    for _ in range(3):
        assert sel.execute([1]).rows == [(10,)]
        assert seg.proc_xid[slot] == 0 and seg.proc_xmin[slot] == 0
    db.x("BEGIN ISOLATION LEVEL REPEATABLE READ")
    assert sel.execute([1]).rows == [(10,)]
    assert seg.proc_xmin[slot] != 0          # the transaction's snapshot is published
    assert db.session.xact.xid == 0
    db.x("COMMIT")
    assert seg.proc_xid[slot] == 0 and seg.proc_xmin[slot] == 0
    assert pa.next_xid() == before
    db.x("UPDATE t SET b = 11 WHERE a = 1")  # a writer does take one
    assert pa.next_xid() == before + 1
    assert seg.proc_xid[slot] == 0 and seg.proc_xmin[slot] == 0
