"""Temporary tables (``minidb.sql.temp``).

Proven here: a temporary table is seen only by its session and hides a permanent table of
the same name; two sessions each have their own of one name; indexes, CHECKs, CTAS and
SELECT INTO TEMP work on them; ON COMMIT DELETE ROWS empties, ON COMMIT DROP drops (a
rolled-back creation leaves nothing); the session's end drops them; their pages write no
WAL (the backend's WAL bytes grow by far less than for the same rows in a permanent table);
after the owner is killed, the next open has no temporary table and a clean catalog.
"""

from __future__ import annotations

import os
import signal

import pytest

import minidb
import minidb.errors as errors
from minidb.catalog import check_catalog

from tests.sql.conftest import DB


def test_private_and_shadowing(inst, db, db2):
    db.x("CREATE TABLE t (x int)")
    db.x("INSERT INTO t VALUES (1)")
    db.x("CREATE TEMP TABLE t (x int PRIMARY KEY, y int CHECK (y > 0))")
    db.x("INSERT INTO t VALUES (5, 1), (6, 2)")
    assert db.rows("SELECT x FROM t ORDER BY x") == [(5,), (6,)]
    assert db2.rows("SELECT x FROM t") == [(1,)]
    db2.x("CREATE TEMPORARY TABLE t (z text)")
    db2.x("INSERT INTO t VALUES ('b')")
    assert db2.rows("SELECT * FROM t") == [("b",)]
    assert db.rows("SELECT x FROM t WHERE x = 6") == [(6,)]          # its primary key
    with pytest.raises(errors.CheckViolation):
        db.x("INSERT INTO t VALUES (7, -1)")
    with pytest.raises(errors.UniqueViolation):
        db.x("INSERT INTO t VALUES (5, 1)")
    db.x("CREATE TEMP TABLE c2 AS SELECT 1 AS q")
    db.x("SELECT 2 AS w INTO TEMP c3")
    assert db.one("SELECT q FROM c2") == 1 and db.one("SELECT w FROM c3") == 2
    with pytest.raises(errors.UndefinedTable):
        db2.x("SELECT * FROM c2")
    db.x("DROP TABLE t")                       # the temporary one
    assert db.rows("SELECT x FROM t") == [(1,)]
    db.close()
    assert db2.rows("SELECT c.relname, n.nspname FROM pg_class c JOIN pg_namespace n ON "
                    "n.oid = c.relnamespace WHERE c.relpersistence = 't'") == [
        ("t", f"pg_temp_{db2.session.backend.slot}")]        # db2's only
    db2.close()
    check = DB(inst)
    try:
        assert check.rows("SELECT relname FROM pg_class WHERE relpersistence = 't'") == []
        assert check_catalog(check.session.backend) == []
    finally:
        check.close()


def test_on_commit(db):
    db.x("CREATE TEMP TABLE oc (x int) ON COMMIT DELETE ROWS")
    db.x("BEGIN")
    db.x("INSERT INTO oc VALUES (1), (2)")
    assert db.one("SELECT count(*) FROM oc") == 2
    db.x("COMMIT")
    assert db.one("SELECT count(*) FROM oc") == 0
    db.x("ALTER TABLE oc RENAME TO oc2")       # the action follows the table
    db.x("INSERT INTO oc2 VALUES (3)")
    assert db.one("SELECT count(*) FROM oc2") == 0
    db.x("CREATE TEMP TABLE keep (x int) ON COMMIT PRESERVE ROWS")
    db.x("INSERT INTO keep VALUES (1)")
    assert db.one("SELECT count(*) FROM keep") == 1
    db.x("BEGIN")
    db.x("CREATE TEMP TABLE od (x int) ON COMMIT DROP")
    db.x("INSERT INTO od VALUES (1)")
    assert db.one("SELECT x FROM od") == 1
    db.x("COMMIT")
    with pytest.raises(errors.UndefinedTable):
        db.x("SELECT * FROM od")
    db.x("BEGIN")
    db.x("CREATE TEMP TABLE gone (x int)")
    db.x("ROLLBACK")
    with pytest.raises(errors.UndefinedTable):
        db.x("SELECT * FROM gone")
    with pytest.raises(errors.ProgrammingError) as ei:
        db.x("CREATE TABLE p (x int) ON COMMIT DROP")
    assert ei.value.sqlstate == "42P16"


def test_no_wal_for_their_pages(db):
    wal = db.session.backend.wal
    db.x("CREATE TABLE p (x int, s text)")
    db.x("CREATE TEMP TABLE tt (x int, s text)")
    rows = ", ".join(f"({i}, 'some text {i}')" for i in range(20))

    def grown(table):
        start = wal.usage()[2]                  # bytes this backend wrote to the WAL
        for _ in range(10):
            db.x(f"INSERT INTO {table} VALUES {rows}")
        return wal.usage()[2] - start
    permanent, temporary = grown("p"), grown("tt")
    assert temporary * 4 < permanent, (temporary, permanent)


def _child(d, w):  # pragma: no cover - runs in a forked process
    conn = minidb.connect(d, max_worker_processes=0)
    cur = conn.cursor()
    conn.autocommit = True
    cur.execute("CREATE TEMP TABLE tt (x int PRIMARY KEY)")
    cur.execute("INSERT INTO tt SELECT g FROM generate_series(1, 500) g")
    os.write(w, b"ready\n")
    import time
    time.sleep(60)


def test_gone_after_the_owner_is_killed(tmp_path):
    d = str(tmp_path / "data")
    conn = minidb.connect(d, max_worker_processes=0)
    conn.cursor().execute("CREATE TABLE keep (x int)")
    conn.cursor().execute("INSERT INTO keep VALUES (1)")
    conn.commit()
    conn.close()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        try:
            _child(d, w)
        finally:
            os._exit(1)
    os.close(w)
    assert os.read(r, 100).startswith(b"ready")
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(r)
    conn = minidb.connect(d, max_worker_processes=0)
    try:
        cur = conn.cursor()
        cur.execute("SELECT relname FROM pg_class WHERE relpersistence = 't'")
        assert cur.fetchall() == []
        cur.execute("SELECT x FROM keep")
        assert cur.fetchall() == [(1,)]
        with pytest.raises(errors.UndefinedTable):
            cur.execute("SELECT * FROM tt")
        conn.rollback()
        assert check_catalog(conn._session.backend) == []
    finally:
        conn.close()
