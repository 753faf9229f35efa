"""UPDATE ... FROM and DELETE ... USING (``minidb.sql.updfrom``).

Proven here: SET and WHERE read the joined relations (several, comma-separated or with
JOIN ... ON, a subquery, the target itself under another alias), a target row that joins
several rows is changed once and counted once, the result equals the same change written
with correlated subqueries (random data, each join method forced in turn), CHECK
constraints hold, the target's alias clash is 42712, a view target 42809; all of it rolls
back.
"""

from __future__ import annotations

import random

import pytest

import minidb.errors as errors


@pytest.fixture
def t(db):
    db.x("CREATE TABLE t (id int PRIMARY KEY, a int, k int)")
    db.x("CREATE TABLE s (id int, v int)")
    db.x("CREATE TABLE u (k int, w int)")
    db.x("INSERT INTO t SELECT g, 0, g % 3 FROM generate_series(1, 10) g")
    db.x("INSERT INTO s VALUES (1, 10), (2, 20), (2, 21), (5, 50)")
    db.x("INSERT INTO u VALUES (0, 100), (1, 101), (2, 102)")
    return db


def test_update_from(t):
    r = t.x("UPDATE t SET a = s.v FROM s WHERE t.id = s.id")
    assert r.rowcount == 3                          # id 2 joins two rows: changed once
    got = dict(t.rows("SELECT id, a FROM t WHERE a <> 0"))
    assert got[1] == 10 and got[5] == 50 and got[2] in (20, 21)
    t.x("UPDATE t x SET a = s.v + u.w FROM s, u WHERE x.id = s.id AND x.k = u.k "
        "AND s.v <> 21")
    assert dict(t.rows("SELECT id, a FROM t WHERE id IN (1, 5)")) == {1: 111, 5: 152}
    t.x("UPDATE t SET a = q.m FROM (SELECT max(v) AS m FROM s) q WHERE t.id = 3")
    assert t.one("SELECT a FROM t WHERE id = 3") == 50
    t.x("UPDATE t SET a = s.v FROM s JOIN u ON s.id = u.k WHERE t.id = s.id AND s.v = 10")
    assert t.one("SELECT a FROM t WHERE id = 1") == 10
    t.x("UPDATE t SET a = t2.id * 2 FROM t t2 WHERE t.id = t2.id + 1")
    assert t.one("SELECT a FROM t WHERE id = 10") == 18


def test_delete_using(t):
    assert t.x("DELETE FROM t USING s WHERE t.id = s.id AND s.v > 15").rowcount == 2
    assert [r[0] for r in t.rows("SELECT id FROM t ORDER BY id")] == [1, 3, 4, 6, 7, 8, 9, 10]
    t.x("BEGIN")
    assert t.x("DELETE FROM t USING u, s WHERE t.k = u.k AND u.w = 101 AND s.id = 1"
               ).rowcount == 4
    t.x("ROLLBACK")
    assert t.one("SELECT count(*) FROM t") == 8


def test_errors(t):
    with pytest.raises(errors.ProgrammingError) as ei:
        t.x("UPDATE t SET a = 1 FROM t WHERE t.id = 1")
    assert ei.value.sqlstate == "42712"
    t.x("CREATE VIEW v AS SELECT * FROM t")
    with pytest.raises(errors.WrongObjectType):
        t.x("UPDATE v SET a = 1 FROM s WHERE v.id = s.id")
    with pytest.raises(errors.UndefinedColumn):
        t.x("UPDATE t SET a = s.nope FROM s WHERE t.id = s.id")
    t.x("ALTER TABLE t ADD CONSTRAINT apos CHECK (a >= 0)")
    with pytest.raises(errors.CheckViolation, match='"apos"'):
        t.x("UPDATE t SET a = -s.v FROM s WHERE t.id = s.id")


@pytest.mark.parametrize("method", ["hash", "nestloop", "index"])
def test_same_as_correlated_subqueries(db, method):
    rnd = random.Random(7)
    db.x("CREATE TABLE t (id int PRIMARY KEY, a int)")
    db.x("CREATE TABLE s (id int PRIMARY KEY, v int)")
    db.x("INSERT INTO t VALUES " + ", ".join(f"({i}, {rnd.randint(0, 9)})" for i in range(60)))
    db.x("INSERT INTO s VALUES " + ", ".join(
        f"({i}, {rnd.choice(['NULL', rnd.randint(0, 9)])})"
        for i in rnd.sample(range(90), 40)))
    off = {"hash": ["enable_nestloop"], "nestloop": ["enable_hashjoin", "enable_indexscan"],
           "index": ["enable_hashjoin"]}[method]
    for name in off:
        db.x(f"SET {name} = off")
    db.x("CREATE TABLE t2 AS SELECT * FROM t")
    n = db.x("UPDATE t SET a = s.v + t.a FROM s WHERE t.id = s.id AND s.v > 3").rowcount
    m = db.x("UPDATE t2 SET a = (SELECT s.v FROM s WHERE s.id = t2.id) + a WHERE EXISTS "
             "(SELECT 1 FROM s WHERE s.id = t2.id AND s.v > 3)").rowcount
    assert n == m
    assert sorted(db.rows("SELECT * FROM t")) == sorted(db.rows("SELECT * FROM t2"))
    n = db.x("DELETE FROM t USING s WHERE t.id = s.id AND s.v < 5").rowcount
    m = db.x("DELETE FROM t2 WHERE id IN (SELECT id FROM s WHERE v < 5)").rowcount
    assert n == m
    assert sorted(db.rows("SELECT * FROM t")) == sorted(db.rows("SELECT * FROM t2"))
