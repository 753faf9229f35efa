"""CREATE TABLE ... AS and SELECT ... INTO (``minidb.sql.ctas``).

Proven here: the new table's columns are the query's names and types (numeric(p,s) kept,
an untyped literal text, a column list renames), its rows the query's (SELECT n tag),
WITH NO DATA makes it empty, IF NOT EXISTS skips with a NOTICE, a duplicate name is 42P07,
too many column names 42601, the statement rolls back with its transaction, and an error
in the query leaves no table behind.
"""

from __future__ import annotations

import pytest

import minidb.errors as errors


@pytest.fixture
def t(db):
    db.x("CREATE TABLE t (a int, b text, c numeric(5,2))")
    db.x("INSERT INTO t VALUES (1, 'x', 1.5), (2, 'y', NULL), (3, NULL, 2)")
    return db


def _types(db, name):
    return db.rows("SELECT attname, atttypname FROM pg_attribute WHERE attrelid = "
                   f"'{name}'::regclass ORDER BY attnum")


def test_create_table_as_columns_and_rows(t):
    r = t.x("CREATE TABLE t2 AS SELECT a, b || 'z' AS bz, c, 'lit' AS l, NULL AS n "
            "FROM t WHERE a > 1")
    assert r.status == "SELECT 2" and r.rowcount == 2
    assert _types(t, "t2") == [("a", "integer"), ("bz", "text"), ("c", "numeric(5,2)"),
                               ("l", "text"), ("n", "text")]
    assert sorted(t.rows("SELECT a, bz, l FROM t2")) == [(2, "yz", "lit"), (3, None, "lit")]
    t.x("INSERT INTO t2 (a) VALUES (9)")              # an ordinary table
    assert t.one("SELECT count(*) FROM t2") == 3


def test_column_names_with_no_data_and_set_operations(t):
    assert t.x("CREATE TABLE t3 (x, y) AS SELECT a, b, c FROM t WITH NO DATA").status \
        == "SELECT 0"
    assert [n for n, _ in _types(t, "t3")] == ["x", "y", "c"]
    assert t.rows("SELECT * FROM t3") == []
    t.x("CREATE TABLE u AS SELECT a FROM t UNION SELECT 7")
    assert sorted(t.rows("SELECT a FROM u")) == [(1,), (2,), (3,), (7,)]


def test_select_into(t):
    r = t.x("SELECT a + 1 AS q INTO t4 FROM t WHERE b IS NOT NULL")
    assert r.status == "SELECT 2"
    assert sorted(t.rows("SELECT q FROM t4")) == [(2,), (3,)]


def test_errors_and_if_not_exists(t, dumper):
    t.x("CREATE TABLE t2 AS SELECT 1 AS one")
    with pytest.raises(errors.DuplicateTable):
        t.x("CREATE TABLE t2 AS SELECT 1 AS one")
    r = t.x("CREATE TABLE IF NOT EXISTS t2 AS SELECT 1 AS one")
    assert r.messages == ['NOTICE:  relation "t2" already exists, skipping']
    with pytest.raises(errors.SyntaxError_, match="too many column names"):
        t.x("CREATE TABLE t5 (a, b, c, d) AS SELECT * FROM t")
    with pytest.raises(errors.DuplicateColumn):
        t.x("CREATE TABLE t5 AS SELECT a, a FROM t")
    before = dumper(t)
    with pytest.raises(errors.Error):
        t.x("CREATE TABLE t5 AS SELECT 1 / (a - 2) AS q FROM t")   # division by zero
    assert dumper(t) == before


def test_rolls_back(t):
    t.x("BEGIN")
    t.x("CREATE TABLE t5 AS SELECT * FROM t")
    assert t.one("SELECT count(*) FROM t5") == 3
    t.x("ROLLBACK")
    with pytest.raises(errors.UndefinedTable):
        t.x("SELECT * FROM t5")
