"""INSERT / UPDATE / DELETE and DDL end to end: defaults, column lists, INSERT ... SELECT,
primary keys and unique indexes, TRUNCATE's new relfilenode, DROP, index maintenance."""

from __future__ import annotations

import datetime as dt

import pytest

from minidb import errors
from minidb.heap.check import check_heap


def _check_indexes(db, table):
    from minidb.index import check_btree
    cat = db.inst.catalog
    cat.refresh()
    for iname in cat.table(table).indexes:
        check_btree(db.session.backend, iname, heapallindexed=True)
    check_heap(db.session.backend, cat.heap_rel(table))


def test_all_storage_types(db):
    db.x("CREATE TABLE t (a integer, b bigint, c double precision, d boolean, e char(3), "
         "f varchar(10), g text, h timestamp, i int4, j int8, k float8, l bool)")
    ts = dt.datetime(2021, 5, 6, 7, 8, 9, 123456)
    db.x("INSERT INTO t VALUES (1, 9000000000, 0.25, true, 'x', 'vv', 'long text', ?, 2, 3, "
         "4.5, false)", ts)
    assert db.rows("SELECT * FROM t") == [(1, 9000000000, 0.25, True, "x  ", "vv", "long text",
                                           ts, 2, 3, 4.5, False)]
    d = db.x("SELECT * FROM t").description
    assert [x[1] for x in d] == ["integer", "bigint", "double precision", "boolean", "char",
                                 "varchar", "text", "timestamp", "integer", "bigint",
                                 "double precision", "boolean"]


def test_insert_forms_and_defaults(db):
    db.x("CREATE TABLE t (id int NOT NULL, name text DEFAULT 'anon', n int DEFAULT 7 * 6, "
         "at timestamp DEFAULT '2000-01-01')")
    assert db.x("INSERT INTO t (id) VALUES (1)").status == "INSERT 0 1"
    db.x("INSERT INTO t VALUES (2, DEFAULT, 1)")
    db.x("INSERT INTO t (n, id) VALUES (5, 3), (6, 4)")
    db.x("INSERT INTO t VALUES (5)")   # fewer values than columns: the rest default
    rows = db.rows("SELECT id, name, n, at FROM t ORDER BY id")
    t0 = dt.datetime(2000, 1, 1)
    assert rows == [(1, "anon", 42, t0), (2, "anon", 1, t0), (3, "anon", 5, t0),
                    (4, "anon", 6, t0), (5, "anon", 42, t0)]
    r = db.x("INSERT INTO t (id, name) SELECT id + 10, name || '!' FROM t WHERE id <= 2")
    assert r.status == "INSERT 0 2" and r.rowcount == 2
    assert db.rows("SELECT id, name, n FROM t WHERE id > 10 ORDER BY id") == \
        [(11, "anon!", 42), (12, "anon!", 42)]
    with pytest.raises(errors.NotNullViolation):
        db.x("INSERT INTO t (name) VALUES ('x')")
    with pytest.raises(errors.UndefinedColumn):
        db.x("INSERT INTO t (nope) VALUES (1)")
    with pytest.raises(errors.SyntaxError_):
        db.x("INSERT INTO t (id) VALUES (1, 2)")


def test_assignment_casts(db):
    db.x("CREATE TABLE t (i int, d double precision, s varchar(3), c char(2))")
    # 2.5 is numeric, which rounds half away from zero (as PostgreSQL: 3); int -> text
    db.x("INSERT INTO t VALUES (2.5, 3, 5, 'a')")
    assert db.rows("SELECT * FROM t") == [(3, 3.0, "5", "a ")]
    db.x("INSERT INTO t VALUES (2.5::float8, 3, 5, 'z')")  # a double rounds half to even
    assert db.rows("SELECT i FROM t WHERE c = 'z'") == [(2,)]
    db.x("DELETE FROM t WHERE c = 'z'")
    db.x("INSERT INTO t VALUES ('7', '1.5', 'ab', 'cd')")
    assert db.rows("SELECT i, d FROM t WHERE s = 'ab'") == [(7, 1.5)]
    with pytest.raises(errors.StringDataRightTruncation):
        db.x("INSERT INTO t (s) VALUES ('abcd')")
    with pytest.raises(errors.NumericValueOutOfRange):
        db.x("INSERT INTO t (i) VALUES (3000000000)")
    with pytest.raises(errors.InvalidTextRepresentation):
        db.x("INSERT INTO t (i) VALUES ('x1')")
    with pytest.raises(errors.DatatypeMismatch):
        db.x("INSERT INTO t (i) VALUES (true)")


def test_update_delete(db):
    db.x("CREATE TABLE acc (id int PRIMARY KEY, bal int, note text)")
    db.x("INSERT INTO acc SELECT 1, 100, 'a'")
    db.x("INSERT INTO acc VALUES (2, 200, 'b'), (3, 300, NULL)")
    r = db.x("UPDATE acc SET bal = bal - 10, note = 'x' WHERE id >= 2")
    assert r.status == "UPDATE 2" and r.rowcount == 2
    assert db.rows("SELECT * FROM acc ORDER BY id") == \
        [(1, 100, "a"), (2, 190, "x"), (3, 290, "x")]
    assert db.x("UPDATE acc SET bal = 0 WHERE id = 99").status == "UPDATE 0"
    db.x("UPDATE acc SET note = DEFAULT WHERE id = 1")
    assert db.one("SELECT note FROM acc WHERE id = 1") is None
    assert db.x("DELETE FROM acc WHERE bal > 200").status == "DELETE 1"
    assert db.rows("SELECT id FROM acc ORDER BY id") == [(1,), (2,)]
    assert db.x("DELETE FROM acc").status == "DELETE 2"
    assert db.rows("SELECT * FROM acc") == []


def test_update_maintains_indexes(db):
    db.x("CREATE TABLE t (id int PRIMARY KEY, k int, v text)")
    db.x("CREATE INDEX t_k ON t (k)")
    db.x("INSERT INTO t SELECT 1, 10, 'a'")
    for i in range(2, 300):
        db.x("INSERT INTO t VALUES (?, ?, ?)", i, i * 10, "v")
    db.x("UPDATE t SET k = k + 1 WHERE id % 3 = 0")       # non-HOT: indexed column changes
    db.x("UPDATE t SET v = 'w' WHERE id % 5 = 0")         # HOT where the page has room
    db.x("SET enable_seqscan = off")
    assert db.one("SELECT v FROM t WHERE id = 10") == "w"
    assert db.one("SELECT id FROM t WHERE k = 31") == 3
    assert db.rows("SELECT id FROM t WHERE k = 30") == []
    _check_indexes(db, "t")


def test_primary_key_and_unique(db):
    db.x("CREATE TABLE u (a int, b text, c int UNIQUE, PRIMARY KEY (a, b))")
    d = db.inst.catalog.table("u")
    idx = {i: db.inst.catalog.indexes[i] for i in d.indexes}
    assert idx["u_pkey"].primary and idx["u_pkey"].unique and idx["u_pkey"].columns == ["a", "b"]
    assert idx["u_c_key"].unique
    assert [c.not_null for c in d.columns] == [True, True, False]
    db.x("INSERT INTO u VALUES (1, 'x', 1), (1, 'y', 2), (2, 'x', NULL), (3, 'x', NULL)")
    with pytest.raises(errors.UniqueViolation) as ei:
        db.x("INSERT INTO u VALUES (1, 'x', 9)")
    assert ei.value.sqlstate == "23505"
    with pytest.raises(errors.UniqueViolation):
        db.x("INSERT INTO u VALUES (9, 'z', 2)")
    with pytest.raises(errors.UniqueViolation):
        db.x("UPDATE u SET c = 1 WHERE a = 2")
    with pytest.raises(errors.NotNullViolation):
        db.x("INSERT INTO u VALUES (NULL, 'q', 5)")
    assert db.one("SELECT count(*) FROM u") == 4
    _check_indexes(db, "u")


def test_create_drop_index(db):
    db.x("CREATE TABLE t (a int, b int)")
    db.x("INSERT INTO t VALUES (1, 1), (1, 2)")
    with pytest.raises(errors.UniqueViolation):
        db.x("CREATE UNIQUE INDEX t_a ON t (a)")
    assert "t_a" not in db.inst.catalog.indexes
    db.x("CREATE INDEX ON t (a, b)")
    assert "t_a_b_idx" in db.inst.catalog.indexes
    db.x("CREATE INDEX IF NOT EXISTS t_a_b_idx ON t (b)")
    with pytest.raises(errors.DuplicateTable):
        db.x("CREATE INDEX t_a_b_idx ON t (b)")
    db.x("DROP INDEX t_a_b_idx")
    with pytest.raises(errors.UndefinedObject):
        db.x("DROP INDEX t_a_b_idx")
    assert db.x("DROP INDEX IF EXISTS t_a_b_idx").messages
    db.x("CREATE TABLE k (id int PRIMARY KEY)")
    with pytest.raises(errors.ProgrammingError):
        db.x("DROP INDEX k_pkey")


def test_drop_table(db):
    db.x("CREATE TABLE t (a int PRIMARY KEY)")
    db.x("INSERT INTO t VALUES (1)")
    rfn = db.inst.catalog.table("t").relfilenode
    db.x("DROP TABLE t")
    assert "t" not in db.inst.catalog.tables and "t_pkey" not in db.inst.catalog.indexes
    assert not db.inst.smgr.exists(rfn)
    with pytest.raises(errors.UndefinedTable):
        db.x("SELECT * FROM t")
    with pytest.raises(errors.UndefinedTable):
        db.x("DROP TABLE t")
    assert db.x("DROP TABLE IF EXISTS t").messages
    db.x("CREATE TABLE IF NOT EXISTS t2 (a int)")
    assert db.x("CREATE TABLE IF NOT EXISTS t2 (a int)").messages
    with pytest.raises(errors.DuplicateTable):
        db.x("CREATE TABLE t2 (b int)")


def test_truncate_new_relfilenode(db):
    db.x("CREATE TABLE t (a int PRIMARY KEY, b text)")
    db.x("INSERT INTO t VALUES (1, 'x'), (2, 'y')")
    old = db.inst.catalog.table("t").relfilenode
    assert db.x("TRUNCATE t").status == "TRUNCATE TABLE"
    new = db.inst.catalog.table("t").relfilenode
    assert new != old and not db.inst.smgr.exists(old) and db.inst.smgr.exists(new)
    assert db.rows("SELECT * FROM t") == []
    db.x("INSERT INTO t VALUES (1, 'again')")         # the key is free again
    assert db.rows("SELECT * FROM t") == [(1, "again")]
    assert db.inst.catalog.indexes["t_pkey"].primary
    with pytest.raises(errors.UniqueViolation):
        db.x("INSERT INTO t VALUES (1, 'dup')")
    _check_indexes(db, "t")


def test_bulk_insert_select_without_indexes(db):
    db.x("CREATE TABLE src (a int, b text)")
    db.x("INSERT INTO src SELECT 1, 'x'")
    for _ in range(12):                      # 4096 rows
        db.x("INSERT INTO src SELECT a + 1, b FROM src")
    db.x("CREATE TABLE dst (a int, b text, c int DEFAULT 5)")
    r = db.x("INSERT INTO dst (a, b) SELECT a, b FROM src")
    assert r.rowcount == 4096
    assert db.rows("SELECT count(*), min(c), max(c) FROM dst") == [(4096, 5, 5)]
    assert db.one("SELECT sum(a) FROM dst") == db.one("SELECT sum(a) FROM src")
    assert db.one("SELECT count(*) FROM dst WHERE c = 5") == 4096
    check_heap(db.session.backend, db.inst.catalog.heap_rel("dst"))
