"""Partial indexes (CREATE INDEX ... WHERE): the index holds exactly the rows that satisfy
its predicate (build, INSERT, UPDATE, bulk load; amcheck's heapallindexed agrees), the
planner uses it only when the query's WHERE implies the predicate (equal conjuncts, ranges
on one column, IS NOT NULL), results equal a sequential scan's, a unique partial index
enforces uniqueness only among its rows, and pg_get_indexdef shows the WHERE."""

from __future__ import annotations

import pytest

import minidb.errors as errors
from minidb import index as ix


@pytest.fixture
def t(db):
    db.x("CREATE TABLE t (id int, a int, s text)")
    db.x("INSERT INTO t SELECT g, g % 100, CASE WHEN g % 10 = 0 THEN 'open' ELSE 'closed' END "
         "FROM generate_series(1, 3000) g")
    db.x("INSERT INTO t VALUES (NULL, NULL, NULL)")
    return db


def _check(db, name, expected_items):
    r = ix.check_btree(db.session.backend, name)
    assert r["leaf_items"] == expected_items and r["heap_tuples_checked"] == expected_items


def _same_as_seqscan(db, sql):
    db.x("SET enable_indexscan = off")
    try:
        want = sorted(db.rows(sql), key=repr)
    finally:
        db.x("RESET enable_indexscan")
    assert sorted(db.rows(sql), key=repr) == want, sql


USES = [
    ("s = 'open'", "s = 'open' AND id < 200"),
    ("a > 90", "a > 95 AND id < 1000"),
    ("a > 90", "a >= 91 AND id < 1000"),
    ("a > 90", "a = 97"),
    ("a >= 10 AND a < 20", "a > 12 AND a <= 15"),
    ("a <> 5", "a = 7 AND id > 10"),
    ("a IS NOT NULL", "a < 3"),
    ("id IS NOT NULL AND s = 'open'", "s = 'open' AND id > 2990"),
]
SKIPS = [
    ("s = 'open'", "id < 200"),
    ("s = 'open'", "s = 'closed' AND id < 200"),
    ("a > 90", "a > 85 AND id < 1000"),
    ("a > 90", "a >= 90"),
    ("a >= 10 AND a < 20", "a > 12"),
    ("a <> 5", "a < 7"),
    ("a > 90", "a > 95 OR id < 3"),
]


def test_implied_predicate_uses_the_index(t):
    for pred, where in USES:
        t.x(f"CREATE INDEX t_p ON t (id) WHERE {pred}")
        t.x("SET enable_seqscan = off")
        assert "Index Scan using t_p" in t.plan(f"SELECT * FROM t WHERE {where}"), (pred, where)
        t.x("RESET enable_seqscan")
        _same_as_seqscan(t, f"SELECT * FROM t WHERE {where}")
        t.x("DROP INDEX t_p")


def test_not_implied_predicate_never_uses_the_index(t):
    for pred, where in SKIPS:
        t.x(f"CREATE INDEX t_p ON t (id) WHERE {pred}")
        t.x("SET enable_seqscan = off")
        assert "t_p" not in t.plan(f"SELECT * FROM t WHERE {where}"), (pred, where)
        t.x("RESET enable_seqscan")
        _same_as_seqscan(t, f"SELECT * FROM t WHERE {where}")
        t.x("DROP INDEX t_p")


def test_index_holds_exactly_the_matching_rows(t):
    t.x("CREATE INDEX t_open ON t (id) WHERE s = 'open'")
    _check(t, "t_open", 300)
    t.x("INSERT INTO t VALUES (5001, 1, 'open'), (5002, 1, 'closed')")
    t.x("UPDATE t SET s = 'open' WHERE id = 3")          # joins the index (not HOT)
    t.x("UPDATE t SET s = 'closed' WHERE id = 10")       # its old entry stays until VACUUM
    t.x("INSERT INTO t SELECT g, 0, 'open' FROM generate_series(6000, 6009) g")
    assert t.one("SELECT count(*) FROM t WHERE s = 'open' AND id > 0") == 311
    _same_as_seqscan(t, "SELECT id FROM t WHERE s = 'open' AND id > 0")
    t.x("VACUUM t")
    _check(t, "t_open", 311)
    t.x("REINDEX INDEX t_open")
    _check(t, "t_open", 311)


def test_unique_partial_index(db):
    db.x("CREATE TABLE u (id int, k int, active boolean)")
    db.x("CREATE UNIQUE INDEX u_k_active ON u (k) WHERE active")
    db.x("INSERT INTO u VALUES (1, 7, true), (2, 7, false), (3, 7, false), (4, 8, NULL)")
    with pytest.raises(errors.UniqueViolation, match=r"\(k\)=\(7\)"):
        db.x("INSERT INTO u VALUES (5, 7, true)")
    db.x("UPDATE u SET active = false WHERE id = 1")
    db.x("INSERT INTO u VALUES (5, 7, true)")
    db.x("CREATE TABLE v (k int, f boolean)")
    db.x("INSERT INTO v VALUES (1, true), (1, false), (1, false)")
    db.x("CREATE UNIQUE INDEX v_k ON v (k) WHERE f")
    with pytest.raises(errors.UniqueViolation, match="is duplicated"):
        db.x("CREATE UNIQUE INDEX v_k2 ON v (k) WHERE NOT f")


def test_indexdef_and_catalog(db):
    db.x("CREATE TABLE u (a int, s text)")
    db.x("CREATE INDEX u_p ON u (a DESC) WHERE s = 'x' AND a > 3")
    assert db.one("SELECT pg_get_indexdef(indexrelid) FROM pg_index") == (
        "CREATE INDEX u_p ON public.u USING btree (a DESC) WHERE (s = 'x' AND a > 3)")
    assert db.one("SELECT indpred FROM pg_index") == "s = 'x' AND a > 3"


def test_bad_predicates_are_refused(db):
    db.x("CREATE TABLE u (a int, s text)")
    with pytest.raises(errors.UndefinedColumn):
        db.x("CREATE INDEX u_p ON u (a) WHERE nope > 1")
    with pytest.raises(errors.DatatypeMismatch):
        db.x("CREATE INDEX u_p ON u (a) WHERE a + 1")
    with pytest.raises(errors.InvalidObjectDefinition):
        db.x("CREATE INDEX u_p ON u (a) WHERE random() > 0.5")
    assert db.rows("SELECT indexname FROM pg_indexes") == []


def test_literals_stay_in_the_text_for_partial_index_tables(db):
    db.x("CREATE TABLE u (id int, s text)")
    db.x("INSERT INTO u SELECT g, CASE WHEN g % 50 = 0 THEN 'open' ELSE 'x' END "
         "FROM generate_series(1, 2000) g")
    db.x("CREATE INDEX u_open ON u (id) WHERE s = 'open'")
    db.x("ANALYZE u")
    for _ in range(3):   # the same shape again: still planned with the value
        assert db.one("SELECT count(*) FROM u WHERE s = 'open' AND id < 500") == 9
        assert db.one("SELECT count(*) FROM u WHERE s = 'x' AND id < 500") == 490
    assert "u_open" in db.plan("SELECT count(*) FROM u WHERE s = 'open' AND id < 500")


def test_drop_column_of_the_predicate_drops_the_index(db):
    db.x("CREATE TABLE u (a int, s text, b int)")
    db.x("INSERT INTO u VALUES (1, 'x', 2)")
    db.x("CREATE INDEX u_p ON u (a) WHERE s = 'x'")
    db.x("CREATE INDEX u_q ON u (a) WHERE b > 0")
    db.x("ALTER TABLE u DROP COLUMN s")
    assert db.rows("SELECT indexname FROM pg_indexes ORDER BY 1") == [("u_q",)]
    _check(db, "u_q", 1)
