"""DB-API conversions of the types beyond the first eight, both ways: decimal.Decimal,
datetime.date / time / datetime (aware for timestamptz) / timedelta, bytes (bytearray,
memoryview), uuid.UUID as parameters and as results, and the type objects of
``cursor.description``."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

import pytest

import minidb
import minidb.errors as errors
from minidb.types import Interval

D = decimal.Decimal
UTC = dt.timezone.utc


@pytest.fixture
def cur(tmp_path):
    conn = minidb.connect(str(tmp_path / "db"), shared_buffers=64)
    conn.autocommit = True
    try:
        yield conn.cursor()
    finally:
        conn.close()


def test_parameters_and_results_both_ways(cur):
    cur.execute("CREATE TABLE t (a smallint, b real, c numeric(8,3), d date, e time, "
                "f timestamptz, g interval, h bytea, i uuid, j timestamp)")
    u = uuid.uuid4()
    paris = dt.timezone(dt.timedelta(hours=2))
    row = (7, 0.5, D("12.3456"), dt.date(2021, 3, 4), dt.time(1, 2, 3, 4),
           dt.datetime(2021, 3, 4, 12, tzinfo=paris), dt.timedelta(days=1, seconds=7),
           bytearray(b"\x00\x01"), u, dt.datetime(2021, 3, 4, 5, 6))
    cur.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
    cur.execute("INSERT INTO t (h, c) VALUES (?, ?)", (memoryview(b"xy"), 5))
    cur.execute("SELECT * FROM t WHERE a = ?", (7,))
    got = cur.fetchone()
    assert got == (7, 0.5, D("12.346"), dt.date(2021, 3, 4), dt.time(1, 2, 3, 4),
                   dt.datetime(2021, 3, 4, 10, tzinfo=UTC), Interval(0, 1, 7_000_000),
                   b"\x00\x01", u, dt.datetime(2021, 3, 4, 5, 6))
    assert got[5].tzinfo is not None and isinstance(got[6], dt.timedelta)
    assert isinstance(got[2], D) and isinstance(got[7], bytes) and isinstance(got[8], uuid.UUID)
    cur.execute("SELECT h, c FROM t WHERE a IS NULL")
    assert cur.fetchone() == (b"xy", D("5.000"))
    # parameters in comparisons take the column's type
    for sql, param in [("c > ?", D("6")), ("c > ?", 6), ("c > ?", 6.5), ("d = ?", dt.date(2021, 3, 4)),
                       ("e < ?", dt.time(2)), ("f = ?", dt.datetime(2021, 3, 4, 10, tzinfo=UTC)),
                       ("f = ?", dt.datetime(2021, 3, 4, 10)), ("g > ?", dt.timedelta(hours=1)),
                       ("h = ?", b"\x00\x01"), ("i = ?", u), ("d < ?", dt.datetime(2021, 3, 4, 1))]:
        cur.execute(f"SELECT a FROM t WHERE {sql}", (param,))
        assert cur.fetchall() == [(7,)], sql


def test_parameters_without_context_have_their_own_types(cur):
    cur.execute("SELECT ?, ?, ?, ?, ?, ?", (D("1.50"), dt.date(2020, 1, 1), dt.time(10),
                                           dt.timedelta(hours=1), b"\x01", uuid.UUID(int=3)))
    assert [d[1] for d in cur.description] == ["numeric", "date", "time", "interval", "bytea",
                                               "uuid"]
    assert cur.fetchone() == (D("1.50"), dt.date(2020, 1, 1), dt.time(10),
                              dt.timedelta(hours=1), b"\x01", uuid.UUID(int=3))
    cur.execute("SELECT ? + 1, ? * 2", (D("1.5"), dt.timedelta(days=1)))
    assert cur.fetchone() == (D("2.5"), dt.timedelta(days=2))


def test_type_objects(cur):
    cur.execute("SELECT 1::smallint, 1.5, 1::real, date '2020-01-01', now(), interval '1 day', "
                "time '10:00', '\\x01'::bytea")
    codes = [d[1] for d in cur.description]
    assert codes[:3] == [minidb.NUMBER] * 3
    assert codes[3:7] == [minidb.DATETIME] * 4
    assert codes[7] == minidb.BINARY


def test_timestamptz_results_are_in_the_session_time_zone(cur):
    cur.execute("SET timezone = 'America/New_York'")
    cur.execute("SELECT timestamptz '2021-01-01 12:00+00'")
    v = cur.fetchone()[0]
    assert v == dt.datetime(2021, 1, 1, 12, tzinfo=UTC)
    assert v.utcoffset() == dt.timedelta(hours=-5)


def test_wrong_python_types_are_refused(cur):
    cur.execute("CREATE TABLE w (u uuid, d date)")
    with pytest.raises(errors.DatatypeMismatch):
        cur.execute("INSERT INTO w (u) VALUES (?)", (12,))
    with pytest.raises(errors.DatatypeMismatch):
        cur.execute("INSERT INTO w (d) VALUES (?)", (dt.time(1),))
    cur.execute("INSERT INTO w VALUES (?, ?)", ("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
                                                "2020-01-02"))   # text is read by the type
    cur.execute("SELECT * FROM w")
    assert cur.fetchone() == (uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
                              dt.date(2020, 1, 2))
