"""SELECT's row-locking clauses: FOR UPDATE / FOR NO KEY UPDATE / FOR SHARE / FOR KEY SHARE,
their conflict table, NOWAIT and SKIP LOCKED, and the errors of clauses they cannot go with.
Every expected answer below was taken from PostgreSQL 15 (two sessions, the second with
NOWAIT or lock_timeout = 100ms)."""

from __future__ import annotations

import pytest

from minidb import errors
from tests.sql.conftest import DB

MODES = ["UPDATE", "NO KEY UPDATE", "SHARE", "KEY SHARE"]
WANTS = [f"SELECT * FROM lk WHERE id = 1 FOR {m} NOWAIT" for m in MODES] + [
    "UPDATE lk SET v = v + 1 WHERE id = 1",     # a non-key update
    "UPDATE lk SET id = 9 WHERE id = 1",        # a key update
    "DELETE FROM lk WHERE id = 1"]

# PostgreSQL 15: held mode -> which of WANTS go through ("x": 55P03)
PG_TABLE = {
    "UPDATE":        "x x x x x x x",
    "NO KEY UPDATE": "x x x . x x x",
    "SHARE":         "x x . . x x x",
    "KEY SHARE":     "x . . . . x x",
}


@pytest.fixture
def two(inst):
    a, b = DB(inst, deadlock_timeout=1000), DB(inst, deadlock_timeout=1000, lock_timeout=100)
    a.x("CREATE TABLE lk (id int PRIMARY KEY, v int)")
    a.x("INSERT INTO lk VALUES (1, 10), (2, 20), (3, 30)")
    try:
        yield a, b
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("held", MODES)
def test_conflict_table(two, held):
    a, b = two
    got = []
    for want in WANTS:
        a.x("BEGIN")
        assert a.rows(f"SELECT id FROM lk WHERE id = 1 FOR {held}") == [(1,)]
        b.x("BEGIN")
        try:
            b.x(want)
            got.append(".")
        except errors.LockNotAvailable as e:
            assert e.sqlstate == "55P03"
            assert ("could not obtain lock on row in relation \"lk\"" in str(e)) \
                == want.endswith("NOWAIT"), str(e)
            got.append("x")
        b.x("ROLLBACK")
        a.x("ROLLBACK")
    assert " ".join(got) == PG_TABLE[held]


def test_skip_locked(two):
    a, b = two
    a.x("BEGIN")
    a.x("SELECT * FROM lk WHERE id = 1 FOR UPDATE")
    # LockRows sits under the Limit: the first row it can lock is the answer
    assert b.rows("SELECT id FROM lk ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED") == [(2,)]
    assert b.rows("SELECT id FROM lk ORDER BY id FOR SHARE SKIP LOCKED") == [(2,), (3,)]
    assert b.rows("SELECT id FROM lk ORDER BY id FOR KEY SHARE SKIP LOCKED") == [(2,), (3,)]
    a.x("ROLLBACK")
    a.x("BEGIN")
    a.x("SELECT * FROM lk WHERE id = 2 FOR KEY SHARE")
    assert b.rows("SELECT id FROM lk ORDER BY id FOR UPDATE SKIP LOCKED") == [(1,), (3,)]
    assert b.rows("SELECT id FROM lk ORDER BY id FOR NO KEY UPDATE SKIP LOCKED") \
        == [(1,), (2,), (3,)]
    a.x("ROLLBACK")


def test_shared_lockers_then_writers(two):
    a, b = two
    a.x("BEGIN")
    a.x("SELECT * FROM lk WHERE id = 1 FOR SHARE")
    b.x("BEGIN")
    b.x("SELECT * FROM lk WHERE id = 1 FOR SHARE")        # two holders at once
    with pytest.raises(errors.LockNotAvailable):
        b.x("UPDATE lk SET v = 0 WHERE id = 1")           # waits for a: lock_timeout
    b.x("ROLLBACK")
    a.x("UPDATE lk SET v = 11 WHERE id = 1")              # b is gone: a upgrades
    a.x("COMMIT")
    assert b.one("SELECT v FROM lk WHERE id = 1") == 11


def test_own_lock_then_update(two):
    a, _ = two
    a.x("BEGIN")
    a.x("SELECT * FROM lk WHERE id = 2 FOR NO KEY UPDATE")
    a.x("UPDATE lk SET v = 21 WHERE id = 2")
    a.x("SELECT * FROM lk WHERE id = 2 FOR SHARE")
    a.x("DELETE FROM lk WHERE id = 2")
    a.x("COMMIT")
    assert a.rows("SELECT id FROM lk ORDER BY id") == [(1,), (3,)]


@pytest.mark.parametrize("sql,err,msg", [
    ("SELECT count(*) FROM lk FOR SHARE", errors.NotSupportedError,
     "FOR SHARE is not allowed with aggregate functions"),
    ("SELECT v FROM lk GROUP BY v FOR UPDATE", errors.NotSupportedError,
     "FOR UPDATE is not allowed with GROUP BY clause"),
    ("SELECT DISTINCT v FROM lk FOR KEY SHARE", errors.NotSupportedError,
     "FOR KEY SHARE is not allowed with DISTINCT clause"),
    ("SELECT * FROM lk l FOR UPDATE OF x", errors.UndefinedTable,
     'relation "x" in FOR UPDATE clause not found in FROM clause'),
    ("SELECT generate_series(1, 2) FROM lk FOR NO KEY UPDATE", errors.NotSupportedError,
     "FOR NO KEY UPDATE is not allowed with set-returning functions in the target list"),
    ("SELECT row_number() OVER () FROM lk FOR UPDATE", errors.NotSupportedError,
     "FOR UPDATE is not allowed with window functions"),
])
def test_clause_errors(two, sql, err, msg):
    a, _ = two
    with pytest.raises(err) as ei:
        a.x(sql)
    assert msg in str(ei.value)


def test_of_own_table_and_plan(two):
    a, _ = two
    assert a.rows("SELECT id FROM lk l WHERE id = 3 FOR UPDATE OF l") == [(3,)]
    plan = a.plan("SELECT id FROM lk ORDER BY id LIMIT 1 FOR SHARE SKIP LOCKED")
    lines = [ln.strip() for ln in plan.splitlines()]
    assert lines[0].startswith("Limit")
    assert any(ln.startswith("->  LockRows") for ln in lines)
