"""Relation locks taken by SQL statements (``minidb.sql.locking``), LOCK TABLE and pg_locks.

The issue's reproduction first: a REPEATABLE READ reader that counted the rows keeps
seeing them while another session's TRUNCATE waits for its AccessShare lock; the TRUNCATE
goes on when the reader commits.  Then DROP against a reader (lock_timeout: 55P03), LOCK
TABLE's modes, NOWAIT and its refusal outside a block (25P01), a lock-upgrade deadlock
between two SQL sessions (40P01), the locks a prepared point select holds (and that it
holds nothing after it), and the pg_locks function.  Waits are read from shared memory.
"""

from __future__ import annotations

import pytest

from minidb import errors
from minidb.instance import Instance
from minidb.session import Session
from minidb.sql.engine import Engine
from minidb.sql.inspect import locks as pg_locks
from tests.txn.txn_steps import Step, poll


@pytest.fixture
def inst(tmp_path):
    inst = Instance(tmp_path / "data", shared_buffers=64, max_worker_processes=0)
    try:
        yield inst
        assert not (inst.seg.lock_tag[:, 0] != 0).any()
        assert not inst.seg.fp_bits.any() and not inst.seg.fp_strong.any()
    finally:
        inst.close()


def eng(inst, **settings) -> Engine:
    return Engine(Session(inst, **settings))


def waiting(inst, e: Engine) -> bool:
    return int(inst.seg.proc_wait_lock[e.session.backend.slot]) >= 0


def count(e: Engine) -> int:
    return e.execute("SELECT count(*) FROM t").rows[0][0]


@pytest.fixture
def t5(inst):
    e = eng(inst)
    e.execute("CREATE TABLE t (k bigint PRIMARY KEY, v bigint)")
    e.execute("INSERT INTO t SELECT 1, 1")
    for k in range(2, 6):
        e.execute("INSERT INTO t VALUES ($1, $2)", [k, k])
    return e


def test_truncate_waits_for_repeatable_read_reader(inst, t5):
    r, w = eng(inst), eng(inst)
    r.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    assert count(r) == 5
    st = Step(lambda: w.execute("TRUNCATE t"))
    poll(lambda: waiting(inst, w), "TRUNCATE waits for the reader's AccessShare", st)
    assert count(r) == 5                 # still there: the TRUNCATE has not happened
    rows = [(lt, rel, mode, g) for lt, rel, mode, g, _pid in pg_locks(r.session)]
    assert ("relation", "t", "AccessShareLock", True) in rows
    assert ("relation", "t", "AccessExclusiveLock", False) in rows
    assert ("relation", "t_pkey", "AccessShareLock", True) in rows
    r.execute("COMMIT")
    assert st.join().status == "TRUNCATE TABLE"
    assert count(r) == 0
    assert pg_locks(r.session) == []


def test_drop_against_a_reader_lock_timeout_and_nowait(inst, t5):
    r = eng(inst)
    d = eng(inst, lock_timeout=30)
    r.execute("BEGIN")
    assert count(r) == 5
    with pytest.raises(errors.LockNotAvailable) as ei:
        d.execute("DROP TABLE t")
    assert (ei.value.sqlstate, str(ei.value)) == ("55P03",
                                                  "canceling statement due to lock timeout")
    d.execute("BEGIN")
    with pytest.raises(errors.LockNotAvailable) as ei:
        d.execute("LOCK TABLE t IN ACCESS EXCLUSIVE MODE NOWAIT")
    assert str(ei.value) == 'could not obtain lock on relation "t"'
    d.execute("ROLLBACK")
    d.execute("BEGIN")
    d.execute("LOCK TABLE t IN ROW EXCLUSIVE MODE NOWAIT")   # compatible with AccessShare
    d.execute("COMMIT")
    r.execute("COMMIT")
    d.execute("DROP TABLE t")
    with pytest.raises(errors.UndefinedTable):
        count(r)


def test_lock_table_outside_a_block_is_25P01(inst, t5):
    with pytest.raises(errors.NoActiveSqlTransaction) as ei:
        t5.execute("LOCK TABLE t")
    assert (ei.value.sqlstate, str(ei.value)) == (
        "25P01", "LOCK TABLE can only be used in transaction blocks")


@pytest.mark.parametrize("sql_mode,name", [
    ("ACCESS SHARE", "AccessShareLock"), ("ROW SHARE", "RowShareLock"),
    ("ROW EXCLUSIVE", "RowExclusiveLock"),
    ("SHARE UPDATE EXCLUSIVE", "ShareUpdateExclusiveLock"), ("SHARE", "ShareLock"),
    ("SHARE ROW EXCLUSIVE", "ShareRowExclusiveLock"), ("EXCLUSIVE", "ExclusiveLock"),
    ("ACCESS EXCLUSIVE", "AccessExclusiveLock")])
def test_lock_table_modes(inst, t5, sql_mode, name):
    t5.execute("BEGIN")
    t5.execute(f"LOCK TABLE t IN {sql_mode} MODE")
    got = [(rel, mode) for _lt, rel, mode, g, _p in pg_locks(t5.session) if g]
    assert ("t", name) in got
    t5.execute("COMMIT")
    t5.execute("BEGIN")
    t5.execute("LOCK t")                                   # default: AccessExclusive
    assert ("t", "AccessExclusiveLock") in [(r_, m) for _l, r_, m, _g, _p
                                             in pg_locks(t5.session)]
    t5.execute("ROLLBACK")


def test_upgrade_deadlock_in_sql(inst, t5):
    a, b = eng(inst, deadlock_timeout=20), eng(inst, deadlock_timeout=20)
    for e in (a, b):
        e.execute("BEGIN")
        assert count(e) == 5
    sa = Step(lambda: a.execute("LOCK TABLE t"))
    poll(lambda: waiting(inst, a), "a waits", sa)
    sb = Step(lambda: b.execute("LOCK TABLE t"))
    poll(lambda: sa.done or sb.done, "a victim")
    victim, ve, other, oe = (sa, a, sb, b) if sa.done else (sb, b, sa, a)
    with pytest.raises(errors.DeadlockDetected) as ei:
        victim.join()
    assert ei.value.sqlstate == "40P01"
    assert "waits for AccessExclusiveLock on relation" in str(ei.value)
    ve.execute("ROLLBACK")
    other.join()
    oe.execute("COMMIT")


def test_dml_locks_and_statement_release(inst, t5):
    e = t5
    p = e.prepare("SELECT v FROM t WHERE k = $1")
    assert p.execute([3]).rows == [(3,)]
    assert e.session.backend.lockmgr.local == {}          # autocommit: all released
    e.execute("BEGIN")
    p.execute([3])
    e.execute("UPDATE t SET v = v + 1 WHERE k = 2")
    got = sorted((rel, mode) for _l, rel, mode, _g, _p in pg_locks(e.session))
    assert got == [("t", "AccessShareLock"), ("t", "RowExclusiveLock"),
                   ("t_pkey", "AccessShareLock"), ("t_pkey", "RowExclusiveLock")]
    e.execute("COMMIT")
    assert pg_locks(e.session) == []


def test_select_waits_for_truncate_and_sees_the_new_catalog(inst, t5):
    a, r = eng(inst), eng(inst)
    p = r.prepare("SELECT count(*) FROM t")
    assert p.execute().rows == [(5,)]
    a.execute("BEGIN")
    a.execute("TRUNCATE t")
    st = Step(lambda: p.execute())
    poll(lambda: waiting(inst, r), "the reader waits for the TRUNCATE", st)
    a.execute("INSERT INTO t VALUES (9, 9)")
    a.execute("COMMIT")
    assert st.join().rows == [(1,)]                     # re-planned on the new file
