"""``minidb.connect`` on a data directory a server holds: the DB-API over the socket, the
same results, descriptions and errors as the embedded engine gives, and the embedded open
again once the server has stopped."""

from __future__ import annotations

import datetime as dt

import pytest

import minidb
import minidb.errors as errors
from minidb.dbapi import Connection, RemoteConnection, served_socket

STATEMENTS = [
    ("CREATE TABLE item (id integer PRIMARY KEY, name varchar(12) NOT NULL, price double "
     "precision, ok boolean, added timestamp, big bigint, code char(3), note text)", None),
    ("CREATE TABLE IF NOT EXISTS item (id integer)", None),
    ("INSERT INTO item VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
     (1, "apple", 0.5, True, dt.datetime(2024, 5, 1, 12, 30), 2 ** 40, "ab", "red")),
    ("INSERT INTO item VALUES (2, 'pear', 1.25, false, '2024-05-02 08:00:00.5', -7, 'xyz', "
     "NULL), (3, 'fig', NULL, NULL, NULL, NULL, NULL, 'it''s')", None),
    ("SELECT * FROM item ORDER BY id", None),
    ("SELECT id, name FROM item WHERE price > ? ORDER BY id", (0.75,)),
    ("SELECT id FROM item WHERE name = ?", ("fig",)),
    ("SELECT count(*), sum(price), avg(id), max(added), min(name) FROM item", None),
    ("SELECT ok, count(*) AS n FROM item GROUP BY ok ORDER BY n, ok", None),
    ("SELECT a.id, b.name FROM item a JOIN item b ON b.id = a.id + 1 ORDER BY a.id", None),
    ("SELECT 1 / 3.0, 7 / 2, 'a' || 'b', NULL, ? + 1, ?", (41, "x")),
    ("UPDATE item SET price = price * 2 WHERE price IS NOT NULL", None),
    ("DELETE FROM item WHERE id = ?", (3,)),
    ("SELECT id, price FROM item ORDER BY id", None),
    ("SELECT * FROM missing", None),
    ("SELECT 1 / 0", None),
    ("INSERT INTO item (id, name) VALUES (1, 'again')", None),
    ("INSERT INTO item (id) VALUES (9)", None),
    ("INSERT INTO item (id, name) VALUES (9, 'a name too long')", None),
    ("SELECT nope FROM item", None),
    ("SELEC 1", None),
    ("SET no_such_setting = 1", None),
    ("SELECT ?", None),
    ("DROP TABLE item", None),
]


def _outcome(conn, sql, params):
    cur = conn.cursor()
    try:
        cur.execute(sql, params)
    except errors.Error as e:
        return ("error", type(e), e.sqlstate)
    rows = cur.fetchall() if cur.description is not None else None
    return (cur.description, rows, cur.rowcount, cur.statusmessage, cur.notices)


def test_same_statements_same_results_embedded_and_served(module_server, tmp_path):
    embedded = minidb.connect(str(tmp_path / "embedded"), max_worker_processes=0)
    served = minidb.connect(module_server.datadir)
    assert isinstance(embedded, Connection) and isinstance(served, RemoteConnection)
    try:
        embedded.autocommit = served.autocommit = True
        for sql, params in STATEMENTS:
            assert _outcome(served, sql, params) == _outcome(embedded, sql, params), sql
        # executemany and COPY through both
        for conn in (embedded, served):
            conn.execute("CREATE TABLE many (a integer PRIMARY KEY, b text)")
        rows = [(i, f"r{i}") for i in range(5)]
        got = []
        for conn in (embedded, served):
            cur = conn.cursor()
            cur.executemany("INSERT INTO many VALUES (?, ?)", rows)
            n = cur.rowcount
            # all or nothing: the duplicate key fails the whole batch
            with pytest.raises(errors.UniqueViolation):
                cur.executemany("INSERT INTO many VALUES (?, ?)", [(10, "x"), (0, "dup")])
            with cur.copy("COPY many (a, b) FROM STDIN") as cp:
                cp.write_row((20, "copied\ttab"))
            with cur.copy("COPY many TO STDOUT") as cp:
                out = list(cp.rows())
            got.append((n, out, cur.rowcount))
        assert got[0] == got[1]
        assert got[0][0] == 5 and len(got[0][1]) == 6
    finally:
        embedded.close()
        served.close()


def test_transactions_through_the_server(module_server):
    a = minidb.connect(module_server.datadir)
    b = minidb.connect(module_server.datadir)          # side by side: two backends
    try:
        a.execute("CREATE TABLE acct (id integer PRIMARY KEY, bal integer)")
        assert a.transaction_status == "in transaction"
        with pytest.raises(minidb.ProgrammingError):
            a.autocommit = True
        a.commit()
        assert a.transaction_status == "idle"
        a.execute("INSERT INTO acct VALUES (1, 100)")
        assert b.execute("SELECT count(*) FROM acct").fetchall() == [(0,)]
        a.commit()
        b.rollback()
        assert b.execute("SELECT bal FROM acct").fetchall() == [(100,)]
        b.rollback()
        # a failed transaction: commit rolls it back and raises
        with pytest.raises(errors.DivisionByZero):
            a.execute("UPDATE acct SET bal = bal / 0")
        assert a.transaction_status == "failed"
        with pytest.raises(errors.InFailedSqlTransaction):
            a.execute("SELECT 1")
        with pytest.raises(errors.InFailedSqlTransaction):
            a.commit()
        assert a.transaction_status == "idle"
        a.isolation_level = "repeatable read"
        assert a.execute("SELECT bal FROM acct").fetchall() == [(100,)]
        b.autocommit = True
        b.execute("UPDATE acct SET bal = 50")
        assert a.execute("SELECT bal FROM acct").fetchall() == [(100,)]   # its snapshot
        a.rollback()
        assert a.execute("SELECT bal FROM acct").fetchall() == [(50,)]
        with pytest.raises(minidb.NotSupportedError):
            a.session
    finally:
        a.close()
        b.close()
    with pytest.raises(minidb.InterfaceError):
        a.cursor()
    # the context manager commits, then closes
    with minidb.connect(module_server.datadir, lock_timeout=1234) as c:
        assert c.execute("SHOW lock_timeout").fetchall() == [("1234",)]
        c.execute("DROP TABLE acct")
    assert c.closed


def test_connect_chooses_remote_while_served_then_embedded(make_server, tmp_path):
    srv = make_server(datadir=str(tmp_path / "d"))
    assert served_socket(srv.datadir) == srv.sock
    with minidb.connect(srv.datadir) as c:
        assert isinstance(c, RemoteConnection)
        c.execute("CREATE TABLE kept (a integer)")
        c.execute("INSERT INTO kept VALUES (7)")
    with minidb.connect(host=srv.datadir) as c:          # libpq's host=DIRECTORY
        assert c.execute("SELECT a FROM kept").fetchall() == [(7,)]
    with pytest.raises(errors.OperationalError):
        minidb.connect(host=str(tmp_path), port=1)       # no server there
    srv.stop()
    assert served_socket(srv.datadir) is None
    with minidb.connect(srv.datadir, max_worker_processes=0) as c:
        assert isinstance(c, Connection)
        assert c.execute("SELECT a FROM kept").fetchall() == [(7,)]
