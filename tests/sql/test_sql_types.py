"""SQL over smallint, real, numeric(p,s), date, time, timestamptz, interval, bytea and uuid:
a round trip of each through a table and a B-tree index (range scans and ORDER BY equal a
sort in Python), casts and arithmetic against PostgreSQL 15's results (computed once with
PostgreSQL 15 and written here: the tests do not need it), error SQLSTATEs, the functions
over the types, the TimeZone setting, and a hypothesis round trip of a table of every type."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minidb.errors as errors
from minidb.types import Interval

D = decimal.Decimal
UTC = dt.timezone.utc

# (expression, its ::text in PostgreSQL 15)
PG_TEXT = [
    ("1.5 + 1", "2.5"),
    ("10::numeric / 3", "3.3333333333333333"),
    ("1::numeric / 7", "0.14285714285714285714"),
    ("2.50 * 2.0", "5.000"),
    ("-7.5 % 2", "-1.5"),
    ("round(2.5)", "3"),
    ("round(-2.5)", "-3"),
    ("round(2.345, 2)", "2.35"),
    ("trunc(2.345, 1)", "2.3"),
    ("floor(-1.5)", "-2"),
    ("ceil(1.2)", "2"),
    ("12345.678::numeric(7,2)", "12345.68"),
    ("0.005::numeric(3,2)", "0.01"),
    ("1e3", "1000"),
    ("'1.50'::numeric", "1.50"),
    ("'Infinity'::numeric", "Infinity"),
    ("1.1::real", "1.1"),
    ("0.1::real + 0.2::real", "0.3"),
    ("1.1::real::double precision", "1.100000023841858"),
    ("1.1::real::numeric", "1.1"),
    ("0.1::float8::numeric", "0.1"),
    ("1::smallint + 1::smallint", "2"),
    ("'  12  '::smallint", "12"),
    ("2.5::numeric::integer", "3"),
    ("(-2.5)::numeric::integer", "-3"),
    ("2.5::float8::integer", "2"),
    ("date '2020-02-29' + 1", "2020-03-01"),
    ("date '2020-03-01' - 1", "2020-02-29"),
    ("date '2021-01-01' - date '2020-01-01'", "366"),
    ("date '2020-01-31' + interval '1 month'", "2020-02-29 00:00:00"),
    ("date '2020-01-01' + time '10:30'", "2020-01-01 10:30:00"),
    ("timestamp '2020-01-31 10:00' + interval '1 month 1 day 1 hour'", "2020-03-01 11:00:00"),
    ("timestamp '2020-03-01' - timestamp '2020-01-01 12:00'", "59 days 12:00:00"),
    ("timestamp '2020-01-01' - interval '1 year'", "2019-01-01 00:00:00"),
    ("interval '1 day' * 2.5", "2 days 12:00:00"),
    ("interval '1 month' * 1.5", "1 mon 15 days"),
    ("interval '3 days' / 2", "1 day 12:00:00"),
    ("interval '1 day' - interval '25 hours'", "1 day -25:00:00"),
    ("interval '1 year 2 months 3 days 04:05:06.789'", "1 year 2 mons 3 days 04:05:06.789"),
    ("interval '-1 day 2 hours'", "-1 days +02:00:00"),
    ("interval '90 minutes'", "01:30:00"),
    ("interval '1.5 years'", "1 year 6 mons"),
    ("'25:00'::interval", "25:00:00"),
    ("'1 2:03'::interval", "1 day 02:03:00"),
    ("'@ 1 hour ago'::interval", "-01:00:00"),
    ("'P1Y2M3DT4H5M6S'::interval", "1 year 2 mons 3 days 04:05:06"),
    ("time '23:30' + interval '1 hour'", "00:30:00"),
    ("time '10:00' - time '08:30'", "01:30:00"),
    ("'2020-01-01 10:00:00+05:30'::timestamptz", "2020-01-01 04:30:00+00"),
    ("'\\x00ff'::bytea", "\\x00ff"),
    ("'abc'::bytea", "\\x616263"),
    ("'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
    ("'{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}'::uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
    ("to_char(timestamp '2021-03-04 15:06:07.5', "
     "'YYYY-MM-DD HH24:MI:SS.MS Day Mon FMDay DDth HH12 AM Q WW IW DDD')",
     "2021-03-04 15:06:07.500 Thursday  Mar Thursday 04th 03 PM 1 09 09 063"),
    ("to_char(date '2021-03-04', 'FMMonth DD, YYYY')", "March 04, 2021"),
    ("to_char(timestamptz '2021-03-04 10:00+00', 'YYYY-MM-DD HH24:MI TZ OF')",
     "2021-03-04 10:00 UTC +00"),
    ("to_char(timestamp '2021-03-04 05:06:07', 'Dy, DD Mon YYYY HH12:MI:SS am')",
     "Thu, 04 Mar 2021 05:06:07 am"),
    ("to_char(interval '1 day 02:03:04', 'HH24:MI:SS')", "02:03:04"),
    ("age(timestamp '2021-03-04', timestamp '2019-12-25 10:00')", "1 year 2 mons 9 days 14:00:00"),
    ("age(date '2000-02-29', date '1990-03-31')", "9 years 10 mons 29 days"),
    ("age(timestamp '2020-03-01', timestamp '2020-01-31')", "1 mon 1 day"),
    ("date_trunc('month', timestamptz '2021-03-04 10:00+00')", "2021-03-01 00:00:00+00"),
    ("date_trunc('month', date '2021-03-15')", "2021-03-01 00:00:00+00"),
    ("date_trunc('hour', interval '1 day 10:11:12')", "1 day 10:00:00"),
    ("date_trunc('week', timestamp '2021-03-04 10:00')", "2021-03-01 00:00:00"),
    ("extract(year from date '2021-03-04')", "2021"),
    ("extract(quarter from date '2021-08-01')", "3"),
    ("extract(hour from time '10:11')", "10"),
    ("extract(dow from date '2021-03-04')", "4"),
    ("extract(epoch from interval '1 day')", "86400"),
    ("extract(month from interval '1 year 14 mons')", "2"),
    ("extract(epoch from timestamptz '2021-01-01 00:00+00')", "1609459200"),
    ("make_date(2020, 2, 29)", "2020-02-29"),
    ("make_time(10, 11, 12.5)", "10:11:12.5"),
]


@pytest.mark.parametrize("expr, want", PG_TEXT)
def test_casts_and_arithmetic_as_postgresql(db, expr, want):
    assert db.one(f"SELECT ({expr})::text") == want


def test_result_types_as_postgresql(db):
    r = db.x("SELECT 1.5, 1::smallint * 2::smallint, now(), date '2020-01-01' - date "
             "'2019-01-01', date '2020-01-01' + interval '1 day', 1::real + 1, "
             "1::real + 1::real, 1::int + 1.5")
    assert [d[1] for d in r.description] == [
        "numeric", "smallint", "timestamptz", "integer", "timestamp", "double precision",
        "real", "numeric"]


def test_comparisons_as_postgresql(db):
    assert db.one("SELECT '1 day'::interval = '24 hours'::interval, '1 mon'::interval = "
                  "'30 days', interval '1 day' < interval '25 hours', date '2020-01-01' < "
                  "timestamp '2020-01-01 00:00:01', 1 = 1.0, 1::real = 1.0, 0.1::real = 0.1, "
                  "timestamptz '2020-01-01 00:00+00' = timestamp '2020-01-01'") == \
        (True, True, True, True, True, True, False, True)


@pytest.mark.parametrize("expr, sqlstate", [
    ("'x'::date", "22007"), ("'2020-13-01'::date", "22008"), ("'2020-02-30'::date", "22008"),
    ("'abc'::interval", "22007"), ("'25:00'::time", "22008"), ("'zz'::uuid", "22P02"),
    ("'\\xzz'::bytea", "22023"), ("'x'::numeric", "22P02"), ("'1.5'::smallint", "22P02"),
    ("40000::smallint", "22003"), ("32767::smallint + 1::smallint", "22003"),
    ("1e39::real", "22003"), ("1000::numeric(4,2)", "22003"), ("1::numeric / 0", "22012"),
    ("make_date(2021, 2, 29)", "22008"), ("date '9999-12-31' + 1", "22008"),
    ("'NaN'::numeric::integer", "0A000"), ("interval '1 day' / 0", "22012"),
])
def test_errors_have_postgresql_sqlstates(db, expr, sqlstate):
    with pytest.raises(errors.Error) as ei:
        db.x(f"SELECT {expr}")
    assert ei.value.sqlstate == sqlstate, str(ei.value)


def test_bad_operators_and_casts_are_refused(db):
    with pytest.raises(errors.DatatypeMismatch):
        db.x("SELECT date '2020-01-01' + date '2020-01-02'")
    with pytest.raises(errors.DatatypeMismatch):
        db.x("SELECT 1::uuid")
    with pytest.raises(errors.DatatypeMismatch):
        db.x("SELECT now() * 2")


VALUES = {
    "smallint": [3, -32768, 32767, 0, -5],
    "real": [1.5, -2.25, 0.0, 2.0 ** 100, -(2.0 ** -100)],       # float32 values
    "numeric(10,2)": [D("1.50"), D("-3.25"), D("0.00"), D("99999999.99"), D("-0.01")],
    "numeric": [D("1.5"), D("-3.25"), D("0"), D("123456789012345678901234567890.5"),
                D("-0.000001")],
    "date": [dt.date(2020, 1, 1), dt.date(1, 1, 1), dt.date(9999, 12, 31),
             dt.date(1999, 12, 31), dt.date(2000, 1, 1)],
    "time": [dt.time(10, 11, 12, 5), dt.time(0), dt.time(23, 59, 59, 999999),
             dt.time(12), dt.time(1, 2, 3)],
    "timestamptz": [dt.datetime(2020, 1, 1, tzinfo=UTC), dt.datetime(1, 1, 2, tzinfo=UTC),
                    dt.datetime(9999, 12, 30, tzinfo=UTC),
                    dt.datetime(2000, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
                    dt.datetime(1999, 12, 31, 23, tzinfo=UTC)],
    "interval": [Interval(1, 0, 0), Interval(0, 29, 0), Interval(0, 0, -1),
                 Interval(-2, 5, 10 ** 10), Interval(0, 31, 0)],
    "bytea": [b"", b"\x00", b"\x00\x00", b"\xff", b"ab"],
    "uuid": [uuid.UUID(int=0), uuid.UUID(int=2 ** 128 - 1),
             uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), uuid.UUID(int=1),
             uuid.UUID(int=2 ** 127)],
}


@pytest.mark.parametrize("tname", sorted(VALUES))
def test_table_and_index_round_trip(db, tname):
    vals = VALUES[tname]
    db.x(f"CREATE TABLE t (id integer, v {tname})")
    for i, v in enumerate(vals + [None]):
        db.x("INSERT INTO t VALUES (?, ?)", i, v)
    rows = db.rows("SELECT id, v FROM t ORDER BY id")
    assert [r[1] for r in rows] == vals + [None]
    want_sorted = sorted(vals) + [None]                 # NULLS LAST, as PostgreSQL
    assert [r[0] for r in db.rows("SELECT v FROM t ORDER BY v")] == want_sorted
    db.x("CREATE INDEX t_v ON t (v)")
    db.x("ANALYZE t")
    db.x("SET enable_seqscan = off")
    try:
        lo, hi = sorted(vals)[1], sorted(vals)[3]
        q = "SELECT v FROM t WHERE v >= ? AND v < ? ORDER BY v"
        assert "Index" in db.plan(q, lo, hi)
        assert [r[0] for r in db.rows(q, lo, hi)] == [v for v in sorted(vals) if lo <= v < hi]
        assert [r[0] for r in db.rows("SELECT v FROM t WHERE v = ?", lo)] == [lo]
        desc = [r[0] for r in db.rows("SELECT v FROM t WHERE v IS NOT NULL ORDER BY v DESC")]
        assert desc == sorted(vals, reverse=True)
    finally:
        db.x("RESET enable_seqscan")
    # the text form reads back to the same value
    for (v,) in db.rows("SELECT v FROM t WHERE v IS NOT NULL"):
        assert db.one(f"SELECT ?::{tname}::text::{tname} = ?", v, v) is True


def test_unique_index_compares_numeric_and_interval_by_value(db):
    db.x("CREATE TABLE u (n numeric, i interval)")
    db.x("CREATE UNIQUE INDEX u_n ON u (n)")
    db.x("INSERT INTO u VALUES (1.0, '1 mon')")
    with pytest.raises(errors.UniqueViolation):
        db.x("INSERT INTO u VALUES (1.00, '30 days')")          # 1.0 = 1.00
    db.x("CREATE UNIQUE INDEX u_i ON u (i)")
    with pytest.raises(errors.UniqueViolation):
        db.x("INSERT INTO u VALUES (2, '30 days')")             # '1 mon' = '30 days'


def test_numeric_literal_against_columns(db):
    db.x("CREATE TABLE n (i integer, f double precision, r real, d numeric(6,2))")
    db.x("INSERT INTO n VALUES (1, 1.5, 1.5, 1.5), (2, 2.5, 2.5, 2.5), (-1, -1, -1, -1)")
    assert db.rows("SELECT i FROM n WHERE i < 1.5 ORDER BY i") == [(-1,), (1,)]
    assert db.rows("SELECT i FROM n WHERE i >= 1.5 ORDER BY i") == [(2,)]
    assert db.rows("SELECT i FROM n WHERE i = 1.5") == []
    assert db.rows("SELECT i FROM n WHERE i <> 1.5 ORDER BY i") == [(-1,), (1,), (2,)]
    assert db.rows("SELECT i FROM n WHERE f = 2.5") == [(2,)]
    assert db.rows("SELECT i FROM n WHERE r > 1.5") == [(2,)]
    assert db.rows("SELECT d FROM n WHERE d BETWEEN 0 AND 2 ORDER BY d") == [(D("1.50"),)]
    assert db.one("SELECT sum(d), avg(d), sum(f), sum(r) FROM n") == \
        (D("3.00"), D("1.00000000000000000000"), 3.0, 3.0)
    assert db.x("SELECT sum(r), avg(d) FROM n").description[0][1] == "real"
    assert db.one("SELECT pg_d FROM (SELECT d * 2 AS pg_d FROM n WHERE i = 1) s") == D("3.00")
    assert db.rows("SELECT i, d FROM n ORDER BY d DESC LIMIT 1") == [(2, D("2.50"))]
    g = db.rows("SELECT i > 0, sum(d), avg(d), min(d), max(d) FROM n GROUP BY 1 ORDER BY 1")
    assert g == [(False, D("-1.00"), D("-1.00000000000000000000"), D("-1.00"), D("-1.00")),
                 (True, D("4.00"), D("2.0000000000000000"), D("1.50"), D("2.50"))]


def test_interval_aggregates_and_date_columns(db):
    db.x("CREATE TABLE e (d date, i interval, ts timestamptz)")
    db.x("INSERT INTO e VALUES ('2020-01-31', '1 day', '2020-01-01 10:00+00'), "
         "('2020-02-29', '2 days 12:00', '2020-06-01 10:00+00')")
    assert db.one("SELECT sum(i)::text, avg(i)::text, max(d) - min(d) FROM e") == \
        ("3 days 12:00:00", "1 day 18:00:00", 29)
    assert db.rows("SELECT (d + i)::text FROM e ORDER BY d") == [
        ("2020-02-01 00:00:00",), ("2020-03-02 12:00:00",)]
    assert db.rows("SELECT d FROM e WHERE d > '2020-02-01'") == [(dt.date(2020, 2, 29),)]
    assert db.rows("SELECT d FROM e WHERE ts < timestamptz '2020-03-01 00:00+00'") == \
        [(dt.date(2020, 1, 31),)]
    assert db.one("SELECT count(*) FROM e WHERE d + 1 = date '2020-02-01'") == 1


def test_timezone_setting(db):
    assert db.one("SHOW timezone") == "UTC"
    db.x("SET TimeZone = 'Europe/Paris'")
    assert db.one("SHOW timezone") == "Europe/Paris"
    assert db.one("SELECT (timestamptz '2021-07-01 12:00+00')::text") == "2021-07-01 14:00:00+02"
    assert db.one("SELECT (timestamptz '2021-01-01 12:00+00')::text") == "2021-01-01 13:00:00+01"
    # the day added across the DST change is 23 hours long, as PostgreSQL adds it
    assert db.one("SELECT (timestamptz '2021-03-27 12:00' + interval '1 day')::text") == \
        "2021-03-28 12:00:00+02"
    assert db.one("SELECT to_char(timestamptz '2021-07-01 12:00+00', 'HH24 TZ OF')") == \
        "14 CEST +02"
    v = db.one("SELECT timestamptz '2021-07-01 12:00+00'")
    assert v == dt.datetime(2021, 7, 1, 12, tzinfo=UTC) and v.utcoffset() == dt.timedelta(hours=2)
    assert db.one("SELECT (timestamptz '2021-07-01 23:30+00')::date") == dt.date(2021, 7, 2)
    db.x("SET timezone = '-05:30'")
    assert db.one("SELECT (timestamptz '2021-07-01 12:00+00')::text") == "2021-07-01 06:30:00-05:30"
    with pytest.raises(errors.InvalidParameterValue):
        db.x("SET timezone = 'Mars/Olympus'")
    db.x("RESET timezone")
    assert db.one("SELECT (timestamptz '2021-07-01 12:00+00')::text") == "2021-07-01 12:00:00+00"


def test_now_current_date_and_uuid(db):
    now, today, t = db.one("SELECT now(), current_date, localtime")
    assert now.tzinfo is not None and today == now.date() and isinstance(t, dt.time)
    a, b = db.rows("SELECT gen_random_uuid() FROM generate_series(1, 2)")
    assert isinstance(a[0], uuid.UUID) and a[0] != b[0] and a[0].version == 4


def test_copy_text_round_trip(db, tmp_path):
    db.x("CREATE TABLE c (a numeric(5,1), b bytea, c interval, d timestamptz, e uuid)")
    db.x("INSERT INTO c VALUES (1.5, '\\x0001', '1 day 02:00', '2020-01-01 10:00+02', "
         "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11')")
    f = tmp_path / "c.txt"
    db.x(f"COPY c TO '{f}'")
    assert f.read_text() == ("1.5\t\\\\x0001\t1 day 02:00:00\t2020-01-01 08:00:00+00\t"
                             "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\n")
    db.x(f"COPY c FROM '{f}'")
    a, b = db.rows("SELECT * FROM c")
    assert a == b


@st.composite
def _row(draw):
    return (
        draw(st.none() | st.integers(-2 ** 15, 2 ** 15 - 1)),
        draw(st.none() | st.floats(width=32, allow_nan=False, allow_infinity=False)),
        draw(st.none() | st.decimals(min_value=D("-9999999.999"), max_value=D("9999999.999"),
                                     places=3)),
        draw(st.none() | st.dates()),
        draw(st.none() | st.times()),
        draw(st.none() | st.datetimes(min_value=dt.datetime(2, 1, 1),
                                      max_value=dt.datetime(9998, 1, 1), timezones=st.just(UTC))),
        draw(st.none() | st.builds(Interval, st.integers(-1000, 1000), st.integers(-1000, 1000),
                                   st.integers(-10 ** 12, 10 ** 12))),
        draw(st.none() | st.binary(max_size=20)),
        draw(st.none() | st.uuids()),
    )


def test_hypothesis_table_of_every_type(db):
    db.x("CREATE TABLE h (id integer, a smallint, b real, c numeric(10,3), d date, e time, "
         "f timestamptz, g interval, h bytea, i uuid)")
    db.x("CREATE INDEX h_c ON h (c)")
    db.x("CREATE INDEX h_f ON h (f)")
    counter = iter(range(10 ** 9))

    @settings(max_examples=15, deadline=None, suppress_health_check=[
        HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(st.lists(_row(), min_size=1, max_size=6))
    def check(rows):
        db.x("DELETE FROM h")
        ids = []
        for r in rows:
            i = next(counter)
            ids.append(i)
            db.x("INSERT INTO h VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", i, *r)
        got = {g[0]: g[1:] for g in db.rows("SELECT * FROM h")}
        for i, r in zip(ids, rows):
            assert got[i] == r
        cs = [r[2] for r in rows if r[2] is not None]
        assert [x[0] for x in db.rows("SELECT c FROM h WHERE c IS NOT NULL ORDER BY c")] == \
            sorted(cs)
        fs = [r[5] for r in rows if r[5] is not None]
        if fs:
            m = sorted(fs)[len(fs) // 2]
            assert sorted(x[0] for x in db.rows("SELECT f FROM h WHERE f >= ?", m)) == \
                [x for x in sorted(fs) if x >= m]

    check()


def test_index_search_keeps_the_value_searched_for(db):
    """A bound is not rounded to the column's typmod or to float32: the index scan finds what
    the filter of a sequential scan finds (PostgreSQL compares numeric(10,2) = 1.005 and
    real = 0.1 (a double) without rounding the constant)."""
    db.x("CREATE TABLE t (c numeric(10,2), r real)")
    db.x("INSERT INTO t VALUES (1.01, 0.1), (1.00, 0.5), (2, 1)")
    db.x("CREATE INDEX t_c ON t (c)")
    db.x("CREATE INDEX t_r ON t (r)")
    queries = ["SELECT c FROM t WHERE c = 1.005", "SELECT c FROM t WHERE c >= 1.005 ORDER BY c",
               "SELECT c FROM t WHERE c < 1.005", "SELECT r FROM t WHERE r = 0.1",
               "SELECT r FROM t WHERE r = 0.1::real", "SELECT r FROM t WHERE r < 0.5"]
    seq = [db.rows(q) for q in queries]
    db.x("SET enable_seqscan = off")
    assert "Index" in db.plan(queries[0])
    assert [db.rows(q) for q in queries] == seq
    assert seq[:2] == [[], [(D("1.01"),), (D("2.00"),)]] and seq[3] == []


def test_numeric_nan_orders_above_numbers(db):
    db.x("CREATE TABLE n (c numeric)")
    db.x("INSERT INTO n VALUES (1), ('NaN'), (2)")
    assert sorted(map(str, (r[0] for r in db.rows("SELECT c FROM n WHERE c > 1")))) == \
        ["2", "NaN"]
    assert db.one("SELECT 'NaN'::numeric > 1000") is True


def test_joins_on_the_new_types(db):
    db.x("CREATE TABLE a (d date, n numeric, u uuid)")
    db.x("CREATE TABLE b (d date, n numeric(6,2), u uuid)")
    u1, u2 = uuid.UUID(int=1), uuid.UUID(int=2)
    for i in range(20):
        db.x("INSERT INTO a VALUES (?, ?, ?)", dt.date(2020, 1, 1 + i), D(i) / 2, u1 if i % 2
             else u2)
    db.x("INSERT INTO b VALUES ('2020-01-03', 1.5, ?), ('2020-01-05', 9, ?)", u1, u2)
    assert db.rows("SELECT a.d FROM a JOIN b ON a.d = b.d ORDER BY 1") == \
        [(dt.date(2020, 1, 3),), (dt.date(2020, 1, 5),)]
    assert db.rows("SELECT a.d FROM a JOIN b ON a.n = b.n ORDER BY 1") == \
        [(dt.date(2020, 1, 4),), (dt.date(2020, 1, 19),)]
    assert db.one("SELECT count(*) FROM a JOIN b ON a.u = b.u") == 20
