"""RETURNING with UPDATE ... FROM and DELETE ... USING: the target's new (or deleted) row and
the other FROM items' columns from the row that joined it; ``*`` is every FROM item's
columns.  Expected rows from PostgreSQL 15."""

from __future__ import annotations

import pytest


@pytest.fixture
def tu(db):
    db.x("CREATE TABLE t1 (id int PRIMARY KEY, v int)")
    db.x("INSERT INTO t1 VALUES (1, 10), (2, 20), (3, 30)")
    db.x("CREATE TABLE u1 (id int, w int)")
    db.x("INSERT INTO u1 VALUES (1, 100), (2, 200), (2, 201), (9, 900)")
    return db


def test_update_from_returning(tu):
    assert sorted(tu.rows("UPDATE t1 SET v = t1.v + u1.w FROM u1 WHERE u1.id = t1.id "
                          "AND u1.w < 201 RETURNING *")) == [(1, 110, 1, 100), (2, 220, 2, 200)]
    r = tu.x("UPDATE t1 SET v = 0 FROM u1 WHERE u1.id = t1.id AND t1.id = 1 "
             "RETURNING t1.id, v, u1.w * 2 AS w2")
    assert r.rows == [(1, 0, 200)] and r.status == "UPDATE 1"
    assert [d[0] for d in r.description] == ["id", "v", "w2"]
    assert tu.rows("UPDATE t1 SET v = 1 FROM (SELECT 3 AS k) s WHERE t1.id = s.k "
                   "RETURNING s.k, t1.v") == [(3, 1)]


def test_update_from_returning_one_row_per_target(tu):
    # row 2 joins two rows of u1: it is updated (and returned) once
    rows = tu.rows("UPDATE t1 SET v = -1 FROM u1 WHERE u1.id = t1.id RETURNING t1.id, t1.v")
    assert sorted(rows) == [(1, -1), (2, -1)]


def test_delete_using_returning(tu):
    tu.x("DELETE FROM u1 WHERE w = 201")
    assert sorted(tu.rows("DELETE FROM t1 USING u1 WHERE u1.id = t1.id "
                          "RETURNING t1.*, u1.w")) == [(1, 10, 100), (2, 20, 200)]
    assert tu.rows("SELECT * FROM t1") == [(3, 30)]
    assert tu.rows("DELETE FROM t1 USING u1 WHERE u1.id = t1.id RETURNING *") == []
