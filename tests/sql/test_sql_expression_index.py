"""Expression indexes (CREATE INDEX ON t (lower(name)), ((a + 1))): keys computed from the
expression on build, INSERT, UPDATE and bulk load (amcheck's heapallindexed agrees); the
planner uses the index when a clause compares the same expression with a value, and for
ORDER BY of the expression; results equal a sequential scan's; a unique expression index
enforces uniqueness of the expression's values; pg_get_indexdef and pg_index show the
expression; volatile expressions are refused."""

from __future__ import annotations

import pytest

import minidb.errors as errors
from minidb import index as ix


@pytest.fixture
def t(db):
    db.x("CREATE TABLE t (id int, name text, a int)")
    db.x("INSERT INTO t SELECT g, CASE WHEN g % 2 = 0 THEN 'Name' || g ELSE 'NAME' || g END, "
         "g % 50 FROM generate_series(1, 2000) g")
    db.x("INSERT INTO t VALUES (NULL, NULL, NULL)")
    return db


def _same_as_seqscan(db, sql, index):
    db.x("SET enable_seqscan = off")
    try:
        assert f"Index Scan using {index}" in db.plan(sql) or \
            f"Index Scan Backward using {index}" in db.plan(sql), sql
        got = db.rows(sql)
    finally:
        db.x("RESET enable_seqscan")
    db.x("SET enable_indexscan = off")
    try:
        want = db.rows(sql)
    finally:
        db.x("RESET enable_indexscan")
    if "ORDER BY" not in sql:
        got, want = sorted(got, key=repr), sorted(want, key=repr)
    assert got == want, sql


def test_function_index_is_used_and_agrees(t):
    t.x("CREATE INDEX ON t (lower(name))")
    assert t.one("SELECT indexdef FROM pg_indexes") == (
        "CREATE INDEX t_lower_idx ON public.t USING btree (lower(name))")
    for where in ("lower(name) = 'name42'", "lower(name) > 'name998'",
                  "lower(name) >= 'name5' AND lower(name) < 'name6'", "'name7' = lower(name)"):
        _same_as_seqscan(t, f"SELECT * FROM t WHERE {where}", "t_lower_idx")
    _same_as_seqscan(t, "SELECT lower(name) FROM t ORDER BY lower(name) LIMIT 5", "t_lower_idx")
    _same_as_seqscan(t, "SELECT lower(name) FROM t ORDER BY lower(name) DESC LIMIT 5",
                     "t_lower_idx")
    t.x("SET enable_seqscan = off")
    assert "t_lower_idx" not in t.plan("SELECT * FROM t WHERE name = 'name42'")
    assert "t_lower_idx" not in t.plan("SELECT * FROM t WHERE upper(name) = 'NAME42'")


def test_keys_follow_writes(t):
    t.x("CREATE INDEX t_low ON t (lower(name))")
    t.x("INSERT INTO t VALUES (5000, 'ZZZ', 1), (5001, NULL, 2)")
    t.x("UPDATE t SET name = 'QQQ' WHERE id = 7")
    t.x("INSERT INTO t SELECT g, 'Bulk' || g, 0 FROM generate_series(6000, 6009) g")
    assert t.rows("SELECT id FROM t WHERE lower(name) = 'zzz'") == [(5000,)]
    assert t.rows("SELECT id FROM t WHERE lower(name) = 'qqq'") == [(7,)]
    assert t.rows("SELECT id FROM t WHERE lower(name) = 'name7'") == []
    assert t.one("SELECT count(*) FROM t WHERE lower(name) >= 'bulk' AND "
                 "lower(name) < 'bulk9999'") == 10
    r = ix.check_btree(t.session.backend, "t_low")
    n = t.one("SELECT count(*) FROM t")
    assert r["heap_tuples_checked"] == n
    t.x("VACUUM t")
    t.x("ALTER TABLE t ADD COLUMN z int")      # a rewrite rebuilds the index
    assert ix.check_btree(t.session.backend, "t_low")["leaf_items"] == n
    assert t.rows("SELECT id FROM t WHERE lower(name) = 'qqq'") == [(7,)]


def test_arithmetic_expression_with_a_plain_column(t):
    t.x("CREATE UNIQUE INDEX t_a1 ON t ((a + 1), id DESC)")
    assert t.one("SELECT indexdef FROM pg_indexes") == (
        "CREATE UNIQUE INDEX t_a1 ON public.t USING btree ((a + 1), id DESC)")
    assert t.rows("SELECT indkey, indexprs FROM pg_index") == [("0 1", '["a + 1"]')]
    _same_as_seqscan(t, "SELECT * FROM t WHERE a + 1 = 5 AND id < 300", "t_a1")
    _same_as_seqscan(t, "SELECT id FROM t WHERE a + 1 = 5 ORDER BY id DESC LIMIT 3", "t_a1")
    with pytest.raises(errors.UniqueViolation):
        t.x("INSERT INTO t VALUES (4, 'x', 4)")
    t.x("INSERT INTO t VALUES (4, 'x', 5)")


def test_unique_lower(db):
    db.x("CREATE TABLE u (email text)")
    db.x("CREATE UNIQUE INDEX u_email ON u (lower(email))")
    db.x("INSERT INTO u VALUES ('A@x.org'), ('b@x.org'), (NULL), (NULL)")
    with pytest.raises(errors.UniqueViolation, match="already exists"):
        db.x("INSERT INTO u VALUES ('a@X.org')")


def test_bad_expressions_are_refused(db):
    db.x("CREATE TABLE u (a int)")
    with pytest.raises(errors.InvalidObjectDefinition):
        db.x("CREATE INDEX u_r ON u ((a + random()))")
    with pytest.raises(errors.UndefinedColumn):
        db.x("CREATE INDEX u_r ON u (lower(nope))")
    assert db.rows("SELECT indexname FROM pg_indexes") == []
