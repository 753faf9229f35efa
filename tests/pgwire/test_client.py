"""``minidb.pgwire.client.PGClient`` against a running ``minidb serve``: start-up, simple
and extended queries, values of every stored type both ways, COPY, errors as minidb's
classes, notices, the transaction status, cancel, and SCRAM / cleartext authentication."""

from __future__ import annotations

import base64
import datetime as dt
import os
import socket
import threading
import time

import pytest

import minidb.errors as errors
from minidb.pgwire.client import PGClient, error_class
from minidb.pgwire.scram import ScramClient, ScramExchange, Verifier


@pytest.fixture
def client(module_server):
    c = PGClient(path=module_server.sock, user="tester")
    yield c
    c.close()


def test_startup_reports_the_server(client):
    assert client.parameters["server_version"].startswith("15")
    assert client.parameters["client_encoding"] == "UTF8"
    assert client.backend_pid > 0 and client.transaction_status == "I"


def test_simple_and_extended_queries_round_trip_values(client):
    out = client.simple("CREATE TABLE v (id integer PRIMARY KEY, n bigint, f double precision, "
                        "b boolean, ts timestamp, s varchar(10), c char(3), t text); "
                        "INSERT INTO v VALUES (1, 2, 0.5, true, '2020-01-02 03:04:05.25', "
                        "'x', 'ab', 'it''s')")
    assert [r.status for r in out] == ["CREATE TABLE", "INSERT 0 1"]
    assert out[1].rowcount == 1
    row = (2, 2 ** 40, -1.25, False, dt.datetime(1999, 12, 31, 23, 59, 59, 999999), "y", "abc",
           "tab\there")
    r = client.execute("INSERT INTO v VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", row)
    assert r.status == "INSERT 0 1"
    client.execute("INSERT INTO v (id) VALUES ($1)", (3,))
    r = client.execute("SELECT * FROM v WHERE id >= $1 ORDER BY id", (1,))
    assert [c.name for c in r.columns] == ["id", "n", "f", "b", "ts", "s", "c", "t"]
    assert [d[1] for d in r.description] == ["integer", "bigint", "double precision",
                                             "boolean", "timestamp", "varchar", "char", "text"]
    assert r.rows == [(1, 2, 0.5, True, dt.datetime(2020, 1, 2, 3, 4, 5, 250000), "x", "ab ",
                       "it's"), row, (3,) + (None,) * 7]
    assert r.status == "SELECT 3" and r.rowcount == 3
    # a str parameter takes its context's type, as in the embedded engine
    assert client.execute("SELECT t FROM v WHERE id = $1", ("1",)).rows == [("it's",)]
    assert client.execute("SELECT 'Infinity'::float8, 1e300 * 10").rows[0][0] == float("inf")


def test_new_types_come_back_as_the_embedded_values(client):
    import decimal
    import uuid
    from minidb.types import Interval
    r = client.execute("SELECT 2.50::numeric(5,2), '2020-01-02'::date, '12:34:56.5'::time, "
                       "interval '1 year 2 mons -3 days 04:05:06.5', '\\x00ff'::bytea, "
                       "'00000000-0000-0000-0000-000000000005'::uuid, 7::smallint")
    n, d, t, iv, b, u, s = r.rows[0]
    assert n == decimal.Decimal("2.50") and d == dt.date(2020, 1, 2)
    assert t == dt.time(12, 34, 56, 500000) and s == 7
    assert isinstance(iv, Interval) and iv.parts() == (14, -3, 14_706_500_000)
    assert b == b"\x00\xff" and u == uuid.UUID(int=5)


def test_execute_many_parses_again_when_types_change(client):
    client.simple("CREATE TABLE m (a integer, b double precision)")
    rs = client.execute_many("INSERT INTO m VALUES ($1, $2)",
                             [(1, None), (2, 2.5), (3, None), (4, 4)])
    assert [r.status for r in rs] == ["INSERT 0 1"] * 4
    assert client.execute("SELECT a, b FROM m ORDER BY a").rows == [
        (1, None), (2, 2.5), (3, None), (4, 4.0)]


def test_copy_in_and_out(client):
    client.simple("CREATE TABLE cp (a integer, b text)")
    r = client.simple("COPY cp FROM STDIN", copy_data=["1\tone\n2\t\\N\n", b"3\tthree\n"])[0]
    assert r.status == "COPY 3"
    r = client.simple("COPY cp TO STDOUT (FORMAT csv)")[0]
    assert r.status == "COPY 3"
    assert b"".join(r.copy_out) == b"1,one\n2,\n3,three\n"
    with pytest.raises(errors.QueryCanceled):      # CopyFail when no data is given
        client.simple("COPY cp FROM STDIN")
    assert client.transaction_status == "I"


def test_errors_are_minidb_classes_and_the_connection_goes_on(client):
    with pytest.raises(errors.UndefinedTable) as ei:
        client.simple("SELECT * FROM missing")
    assert ei.value.sqlstate == "42P01" and ei.value.severity == "ERROR"
    with pytest.raises(errors.SyntaxError_) as ei:
        client.execute("SELEC 1")
    assert ei.value.position == 1
    with pytest.raises(errors.InvalidParameterCount):
        client.execute("SELECT $1 + $2", (1,))
    assert client.execute("SELECT 1").rows == [(1,)]
    # the transaction status follows BEGIN, the failure and ROLLBACK
    client.simple("BEGIN")
    assert client.transaction_status == "T"
    with pytest.raises(errors.DivisionByZero):
        client.execute("SELECT 1 / 0")
    assert client.transaction_status == "E"
    with pytest.raises(errors.InFailedSqlTransaction):
        client.execute("SELECT 1")
    client.simple("ROLLBACK")
    assert client.transaction_status == "I"


def test_error_class_by_sqlstate():
    assert error_class("23505") is errors.UniqueViolation
    assert error_class("42704", 'unrecognized configuration parameter "x"') \
        is errors.UndefinedParameter
    assert error_class("42704", 'index "i" does not exist') is errors.UndefinedObject
    assert error_class("XX000") is errors.InternalError
    assert error_class("22P99") is errors.DataError          # no class: by the first two
    assert issubclass(error_class("53100"), errors.OperationalError)


def test_notices_are_kept(client):
    client.simple("CREATE TABLE IF NOT EXISTS nt (a integer)")
    r = client.simple("CREATE TABLE IF NOT EXISTS nt (a integer)")[0]
    assert r.notices == ['NOTICE:  relation "nt" already exists, skipping']


def test_cancel_stops_a_running_statement(client):
    client.simple("CREATE TABLE big (a integer); "
                  "INSERT INTO big SELECT g FROM generate_series(1, 20000) g")
    got = {}

    def run():
        try:
            client.simple("SELECT count(*) FROM big x, big y WHERE x.a + y.a < 0")
            got["result"] = "finished"
        except errors.Error as e:
            got["error"] = e

    th = threading.Thread(target=run)
    th.start()
    time.sleep(0.5)
    deadline = time.monotonic() + 60
    while th.is_alive() and time.monotonic() < deadline:
        client.cancel()
        th.join(0.5)
    th.join(60)
    assert isinstance(got.get("error"), errors.QueryCanceled), got
    assert got["error"].sqlstate == "57014"
    assert client.execute("SELECT count(*) FROM big").rows == [(20000,)]


def test_scram_client_matches_rfc7677():
    # RFC 7677 section 3: user "user", password "pencil"
    c = ScramClient("pencil", user="user", client_nonce="rOprNGfwEbeRWgbNEkqO")
    assert c.first() == "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = c.final("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == ("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    c.verify("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    # and against the server's side, with a random nonce
    v = Verifier.from_password("pw", base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096)
    ex, cl = ScramExchange(v), ScramClient("pw")
    cl.verify(ex.final(cl.final(ex.first(cl.first()))))


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("auth", ["scram-sha-256", "password"])
def test_tcp_authentication(make_server, tmp_path, auth):
    pwfile = tmp_path / "passwords"
    pwfile.write_text("alice:secret\n")
    port = _free_port()
    srv = make_server(port=port, extra=["--listen", "127.0.0.1", "--password-file",
                                        str(pwfile), "--auth", auth])
    c = PGClient(host="127.0.0.1", port=port, user="alice", password="secret")
    assert c.execute("SELECT 41 + 1").rows == [(42,)]
    c.close()
    with pytest.raises(errors.OperationalError) as ei:
        PGClient(host="127.0.0.1", port=port, user="alice", password="wrong")
    assert ei.value.sqlstate == "28P01"
    with pytest.raises(errors.OperationalError):
        PGClient(host="127.0.0.1", port=port, user="alice")
    assert os.path.exists(srv.sock)
