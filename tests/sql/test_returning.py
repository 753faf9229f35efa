"""INSERT / UPDATE / DELETE ... RETURNING (minidb.exec.modify's _Returning), embedded and
over the server."""

from __future__ import annotations

import pytest

import minidb.dbapi as dbapi
import minidb.errors as errors


def test_insert_returning(db):
    db.x("CREATE TABLE t (id serial PRIMARY KEY, v text, n int DEFAULT 5)")
    r = db.x("INSERT INTO t (v) VALUES ('a') RETURNING id")
    assert r.rows == [(1,)] and r.rowcount == 1 and r.status == "INSERT 0 1"
    assert [d[0] for d in r.description] == ["id"]
    r = db.x("INSERT INTO t (v) VALUES ('b'), ('c') RETURNING *")
    assert r.rows == [(2, "b", 5), (3, "c", 5)]
    assert [d[0] for d in r.description] == ["id", "v", "n"]
    r = db.x("INSERT INTO t (v) SELECT 'x' || g FROM generate_series(1, 3) g "
             "RETURNING id, v || '!' AS w, n * 2")
    assert r.rows == [(4, "x1!", 10), (5, "x2!", 10), (6, "x3!", 10)]
    assert [d[0] for d in r.description] == ["id", "w", "?column?"]
    # a parameterized one-row INSERT (the compiled point path steps aside)
    assert db.rows("INSERT INTO t (v) VALUES (?) RETURNING id, v", "p") == [(7, "p")]
    assert db.rows("INSERT INTO t (v) VALUES (?) RETURNING id, v", "q") == [(8, "q")]
    # more rows than a bulk batch: the rows come back, one value per row
    r = db.x("INSERT INTO t (v) SELECT 'y' FROM generate_series(1, 2100) RETURNING id")
    assert r.rowcount == 2100 and [x[0] for x in r.rows] == list(range(9, 2109))
    r = db.x("INSERT INTO t (v) VALUES " + ",".join(f"('{i}')" for i in range(1100))
             + " RETURNING id")
    assert r.rowcount == 1100 and len(r.rows) == 1100
    with pytest.raises(errors.GroupingError):
        db.x("INSERT INTO t (v) VALUES ('z') RETURNING count(*)")


def test_update_delete_returning(db):
    db.x("CREATE TABLE t (id int PRIMARY KEY, n int)")
    db.x("INSERT INTO t SELECT g, g * 10 FROM generate_series(1, 6) g")
    r = db.x("UPDATE t SET n = n + 1 WHERE id <= 2 RETURNING id, n")
    assert sorted(r.rows) == [(1, 11), (2, 21)] and r.status == "UPDATE 2"
    r = db.x("UPDATE t SET n = 0 WHERE id = ? RETURNING *", 3)
    assert r.rows == [(3, 0)]
    r = db.x("DELETE FROM t WHERE id > 4 RETURNING *")
    assert sorted(r.rows) == [(5, 50), (6, 60)] and r.status == "DELETE 2"
    r = db.x("DELETE FROM t WHERE id = 99 RETURNING id")
    assert r.rows == [] and r.rowcount == 0 and [d[0] for d in r.description] == ["id"]
    assert db.rows("SELECT id, n FROM t ORDER BY id") == [(1, 11), (2, 21), (3, 0), (4, 40)]


def test_returning_through_dbapi(tmp_path):
    conn = dbapi.connect(str(tmp_path / "d"), max_worker_processes=0)
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (id serial, v int)")
    cur.execute("INSERT INTO t (v) VALUES (?), (?) RETURNING id, v", (7, 8))
    assert cur.fetchall() == [(1, 7), (2, 8)] and cur.rowcount == 2
    cur.execute("DELETE FROM t WHERE v = 7 RETURNING id")
    assert cur.fetchone() == (1,)
    conn.commit()
    conn.close()


def test_returning_over_the_server(server):
    psycopg = pytest.importorskip("psycopg")
    with server.connect(autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id serial, v int)")
        cur = conn.execute("INSERT INTO t (v) VALUES (1), (2) RETURNING id, v")
        assert cur.fetchall() == [(1, 1), (2, 2)]
        assert cur.statusmessage == "INSERT 0 2"
        cur = conn.execute("UPDATE t SET v = v + %s RETURNING v", (10,))   # extended protocol
        assert sorted(cur.fetchall()) == [(11,), (12,)]
        cur = conn.execute("DELETE FROM t WHERE id = %s RETURNING *", (1,))
        assert cur.fetchall() == [(1, 11)]
        assert psycopg is not None
