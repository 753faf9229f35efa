"""``minidb serve`` with a real PostgreSQL driver (psycopg 3) and with raw sockets.

psycopg uses the simple protocol for ``execute`` without parameters, the extended protocol
(Parse / Bind / Describe / Execute / Sync) for parameters, named prepared statements with
``prepare=True``, binary results with ``binary=True``, COPY for ``cursor.copy``.
"""

from __future__ import annotations

import datetime as dt
import socket
import struct
import threading
import time

import pytest

psycopg = pytest.importorskip("psycopg")


def test_simple_and_extended_queries(server):
    with server.connect(autocommit=True) as c:
        cur = c.cursor()
        cur.execute("CREATE TABLE t (id integer PRIMARY KEY, v text, f double precision, "
                    "b boolean, ts timestamp, n bigint)")
        assert cur.statusmessage == "CREATE TABLE"
        cur.execute("INSERT INTO t VALUES (%s, %s, %s, %s, %s, %s)",
                    (1, "one", 1.5, True, dt.datetime(2020, 1, 2, 3, 4, 5, 600000), 2 ** 40))
        assert cur.statusmessage == "INSERT 0 1" and cur.rowcount == 1
        cur.execute("INSERT INTO t VALUES (2, 'two', NULL, false, NULL, NULL), "
                    "(3, 'it''s', -0.25, NULL, '2021-06-30 12:00:00', 7)")
        assert cur.rowcount == 2
        cur.execute("SELECT * FROM t WHERE id = %s", (1,))
        assert cur.fetchall() == [(1, "one", 1.5, True, dt.datetime(2020, 1, 2, 3, 4, 5, 600000),
                                   2 ** 40)]
        assert [d.name for d in cur.description] == ["id", "v", "f", "b", "ts", "n"]
        assert [d.type_code for d in cur.description] == [23, 25, 701, 16, 1114, 20]
        cur.execute("SELECT id, v FROM t ORDER BY id")
        assert cur.fetchall() == [(1, "one"), (2, "two"), (3, "it's")]
        assert cur.statusmessage == "SELECT 3"
        # a parameter of unknown type takes its context's type, as PostgreSQL's $n does
        cur.execute("SELECT v FROM t WHERE id = %s::text::integer", ("3",))
        assert cur.fetchall() == [("it's",)]
        cur.execute("UPDATE t SET n = n + %s WHERE id >= %s", (1, 2))
        assert cur.statusmessage == "UPDATE 2"
        cur.execute("SELECT id, n FROM t ORDER BY id")
        assert cur.fetchall() == [(1, 2 ** 40), (2, None), (3, 8)]
        # several statements in one Query message, as psql -c sends them
        cur.execute("SELECT 1; SELECT 2")
        assert cur.fetchall() == [(1,)]
        assert cur.nextset() and cur.fetchall() == [(2,)]


def test_prepared_statements_and_binary_results(server):
    with server.connect(autocommit=True) as c:
        cur = c.cursor()
        cur.execute("CREATE TABLE p (k integer PRIMARY KEY, x double precision, s text, "
                    "b boolean, ts timestamp)")
        for i in range(10):
            cur.execute("INSERT INTO p VALUES (%s, %s, %s, %s, %s)",
                        (i, i / 4, f"s{i}", i % 2 == 0, dt.datetime(2000, 1, 1 + i)),
                        prepare=True)
        for i in range(10):
            cur.execute("SELECT k, x, s, b, ts FROM p WHERE k = %s", (i,), prepare=True)
            assert cur.fetchone() == (i, i / 4, f"s{i}", i % 2 == 0, dt.datetime(2000, 1, 1 + i))
        cur.execute("SELECT k, x, s, b, ts FROM p WHERE k < %s ORDER BY k", (3,), binary=True)
        assert cur.fetchall() == [(i, i / 4, f"s{i}", i % 2 == 0, dt.datetime(2000, 1, 1 + i))
                                  for i in range(3)]
        # psycopg frees its prepared statements with DEALLOCATE
        c.execute("DEALLOCATE ALL")


def test_errors_carry_sqlstate_and_position(server):
    with server.connect() as c:
        cur = c.cursor()
        with pytest.raises(psycopg.errors.UndefinedTable):
            cur.execute("SELECT * FROM missing")
        c.rollback()
        with pytest.raises(psycopg.errors.SyntaxError) as ei:
            cur.execute("SELECT 1; selec 2")
        assert ei.value.sqlstate == "42601"
        assert ei.value.diag.statement_position == "11"     # 1-based, in the whole text
        assert "(line" not in ei.value.diag.message_primary
        c.rollback()
        cur.execute("CREATE TABLE u (id integer PRIMARY KEY)")
        cur.execute("INSERT INTO u VALUES (1)")
        c.commit()
        with pytest.raises(psycopg.errors.UniqueViolation):
            cur.execute("INSERT INTO u VALUES (%s)", (1,))
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            cur.execute("SELECT 1")
        c.rollback()
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        cur.execute("SELECT count(*) FROM u")
        assert cur.fetchone() == (1,)
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS


def test_copy_in_and_out(server):
    with server.connect() as c:
        cur = c.cursor()
        cur.execute("CREATE TABLE cp (id integer, name text)")
        with cur.copy("COPY cp FROM STDIN") as cp:
            for i in range(100):
                cp.write_row((i, None if i % 10 == 0 else f"n{i}"))
        assert cur.rowcount == 100
        c.commit()
        with cur.copy("COPY cp (name, id) TO STDOUT") as cp:
            rows = list(cp.rows())
        assert len(rows) == 100
        assert rows[1] == ("n1", "1") and rows[10] == (None, "10")
        # a COPY the client fails ends with an error and loads nothing
        with pytest.raises(psycopg.errors.QueryCanceled):
            with cur.copy("COPY cp FROM STDIN") as cp:
                cp.write_row((1000, "x"))
                raise psycopg.errors.QueryCanceled("client gave up")
        c.rollback()
        cur.execute("SELECT count(*) FROM cp")
        assert cur.fetchone() == (100,)


def test_disconnect_mid_transaction_rolls_back(server):
    c1 = server.connect()
    cur = c1.cursor()
    cur.execute("CREATE TABLE d (id integer PRIMARY KEY, v integer)")
    cur.execute("INSERT INTO d VALUES (1, 0)")
    c1.commit()
    cur.execute("UPDATE d SET v = 99 WHERE id = 1")   # holds the row lock, uncommitted
    c1.pgconn.finish()                                 # the client goes away mid-transaction
    with server.connect(autocommit=True) as c2:
        c2.execute("SET lock_timeout = 60000")
        # the row lock is released: this update does not wait out the timeout
        c2.execute("UPDATE d SET v = v + 1 WHERE id = 1")
        assert c2.execute("SELECT v FROM d").fetchone() == (1,)


def test_cancel_request_stops_a_running_statement(server):
    with server.connect(autocommit=True) as c:
        c.execute("CREATE TABLE big (a integer)")
        c.execute("INSERT INTO big SELECT g FROM generate_series(1, 200000) g")
        got = {}

        def run():
            try:
                # a cross join big enough to run for minutes: only the cancel ends it
                c.execute("SELECT count(*) FROM big x, big y WHERE x.a + y.a < 0")
                got["result"] = "finished"
            except psycopg.Error as e:
                got["error"] = e

        th = threading.Thread(target=run)
        th.start()
        time.sleep(1.0)
        deadline = time.monotonic() + 60
        while th.is_alive() and time.monotonic() < deadline:
            c.cancel()
            th.join(0.5)
        th.join(60)
        assert isinstance(got.get("error"), psycopg.errors.QueryCanceled), got
        assert c.execute("SELECT count(*) FROM big").fetchone() == (200000,)


def test_too_many_connections(make_server):
    srv = make_server(settings={"max_worker_processes": 0, "max_connections": 3})
    conns = [srv.connect() for _ in range(3)]
    try:
        with pytest.raises(psycopg.OperationalError, match="too many clients"):
            srv.connect()
    finally:
        for c in conns:
            c.close()
    # slots come back when clients leave
    deadline = time.monotonic() + 60
    while True:
        try:
            with srv.connect() as c:
                assert c.execute("SELECT 1").fetchone() == (1,)
            break
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# -- raw sockets: what a broken or hostile client sends ------------------------------------------
def _raw(server) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(server.sock)
    return s


def _startup(user="raw") -> bytes:
    body = struct.pack("!i", 196608) + b"user\0" + user.encode() + b"\0\0"
    return struct.pack("!i", len(body) + 4) + body


def _read_until_ready_or_close(s) -> bytes:
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
        if data.endswith(b"Z\0\0\0\x05I") or data.endswith(b"Z\0\0\0\x05E"):
            break
    return data


def test_ssl_request_is_refused_and_startup_goes_on(server):
    s = _raw(server)
    s.sendall(struct.pack("!ii", 8, 80877103))
    assert s.recv(1) == b"N"
    s.sendall(_startup())
    data = _read_until_ready_or_close(s)
    assert data.startswith(b"R\0\0\0\x08\0\0\0\0")      # AuthenticationOk
    assert b"server_version\x00" in data and data.endswith(b"Z\0\0\0\x05I")
    s.close()


@pytest.mark.parametrize("payload,code", [
    (struct.pack("!ii", 8, 2 << 16), b"0A000"),                    # protocol 2.0
    (struct.pack("!i", 1 << 20), b"08P01"),                        # start-up packet too long
])
def test_bad_startup_packet_ends_connection(server, payload, code):
    s = _raw(server)
    s.sendall(payload)
    data = _read_until_ready_or_close(s)
    assert data[:1] == b"E" and code in data
    s.close()
    with server.connect() as c:       # the server goes on
        assert c.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.parametrize("message", [
    b"?\0\0\0\x04",                                    # unknown message type
    b"Q\x7f\xff\xff\xff",                              # length beyond the limit
    b"B\0\0\0\x05\0",                                  # a Bind cut short
])
def test_malformed_message_ends_connection(server, message):
    s = _raw(server)
    s.sendall(_startup())
    _read_until_ready_or_close(s)
    s.sendall(message)
    data = _read_until_ready_or_close(s)
    assert data[:1] == b"E" and b"08P01" in data
    assert s.recv(10) == b""           # the server closed this connection
    s.close()
    with server.connect() as c:
        assert c.execute("SELECT 1").fetchone() == (1,)


def test_fast_shutdown_terminates_clients_and_keeps_data(make_server, tmp_path):
    srv = make_server()
    c = srv.connect(autocommit=True)
    c.execute("CREATE TABLE keep (id integer)")
    c.execute("INSERT INTO keep VALUES (1), (2)")
    assert srv.stop() == 0
    with pytest.raises(psycopg.OperationalError):
        c.execute("SELECT 1")
    c.close()
    srv2 = make_server()
    with srv2.connect() as c2:
        assert c2.execute("SELECT count(*) FROM keep").fetchone() == (2,)


def test_embedded_opener_is_refused_while_served(server):
    import minidb
    from minidb.dbapi import Connection, RemoteConnection
    with pytest.raises(minidb.OperationalError, match="in use"):
        Connection(server.datadir)          # the embedded open, as minidb.connect was
    # minidb.connect goes through the server's socket instead (tests/pgwire)
    with minidb.connect(server.datadir) as c:
        assert isinstance(c, RemoteConnection)


@pytest.mark.parametrize("binary", [False, True])
def test_every_type_round_trips_in_text_and_binary(server, binary):
    import decimal
    import uuid
    vals = (decimal.Decimal("-12345.0678"), dt.date(2020, 1, 2),
            dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc),
            dt.timedelta(days=2, hours=3), b"\x00\xff", uuid.UUID(int=5), 2.5,
            dt.time(1, 2, 3, 400000), 7, dt.datetime(1999, 12, 31, 23, 59, 59, 5))
    with server.connect(autocommit=True) as c:
        c.execute("CREATE TABLE ty (n numeric(12,4), d date, ts timestamptz, iv interval, "
                  "b bytea, u uuid, r real, t time, s smallint, tsz timestamp)")
        ph = ", ".join(["%b" if binary else "%s"] * len(vals))
        c.execute(f"INSERT INTO ty VALUES ({ph})", vals)
        assert c.execute("SELECT * FROM ty", binary=binary).fetchone() == vals
        # PostgreSQL's text forms: a real with float4's digits, an interval with months
        row = c.execute("SELECT 1.1::real, interval '1 year 2 mons 3 days 01:02:03', "
                        "2.50::numeric(5,2)").fetchone()
        assert row[0] == 1.1 and row[2] == decimal.Decimal("2.50")
        assert row[1] == dt.timedelta(days=365 + 60 + 3, hours=1, minutes=2, seconds=3)


def test_several_statements_in_one_query_are_one_transaction(server):
    with server.connect(autocommit=True) as c:
        c.execute("CREATE TABLE one (id integer PRIMARY KEY)")
        with pytest.raises(psycopg.errors.UniqueViolation):
            c.execute("INSERT INTO one VALUES (1); INSERT INTO one VALUES (2), (2)")
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert c.execute("SELECT count(*) FROM one").fetchone() == (0,)   # both undone
        c.execute("INSERT INTO one VALUES (1); INSERT INTO one VALUES (2)")
        assert c.execute("SELECT count(*) FROM one").fetchone() == (2,)
        # with transaction control in the text, each statement stands on its own
        with pytest.raises(psycopg.errors.UniqueViolation):
            c.execute("BEGIN; INSERT INTO one VALUES (3); COMMIT; INSERT INTO one VALUES (3)")
        assert c.execute("SELECT count(*) FROM one").fetchone() == (3,)
