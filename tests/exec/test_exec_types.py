"""The executor's side of the new types: input and output functions (exec/datatypes.py,
exec/datetimes.py), the operators and casts of exec/typeops.py (vectorized paths agree with
value-by-value ones), numeric division's scale and interval multiplication as PostgreSQL's
(expected values computed with PostgreSQL 15)."""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pytest

import minidb.errors as errors
from minidb.exec import datatypes as T
from minidb.exec import datetimes as dtx
from minidb.exec import typeops
from minidb.types import Interval, parse_type, set_timezone

D = decimal.Decimal


@pytest.mark.parametrize("text, months, days, us", [
    ("1 day", 0, 1, 0), ("1 day 2 hours", 0, 1, 7_200_000_000),
    ("-1 day +02:00:00", 0, -1, 7_200_000_000), ("1 year 14 mons", 26, 0, 0),
    ("1.5 months", 1, 15, 0), ("1.5 days", 0, 1, 43_200_000_000), ("1 week", 0, 7, 0),
    ("90 minutes", 0, 0, 5_400_000_000), ("@ 1 hour ago", 0, 0, -3_600_000_000),
    ("P1Y2M3DT4H5M6S", 14, 3, 14_706_000_000), ("10", 0, 0, 10_000_000),
    ("1 02:03", 0, 1, 7_380_000_000), ("2hours", 0, 0, 7_200_000_000),
    ("00:00:00.5", 0, 0, 500_000), ("1 day 2", 0, 1, 2_000_000),
])
def test_parse_interval(text, months, days, us):
    assert dtx.parse_interval(text).parts() == (months, days, us)


@pytest.mark.parametrize("text", ["", "abc", "1 fortnight", "1 2", "P"])
def test_parse_interval_refuses(text):
    with pytest.raises(errors.Error) as ei:
        dtx.parse_interval(text)
    assert ei.value.sqlstate == "22007"


@pytest.mark.parametrize("parts, text", [
    ((0, 0, 0), "00:00:00"), ((0, 1, 0), "1 day"), ((0, 2, 0), "2 days"),
    ((0, -1, 0), "-1 days"), ((14, 3, 14_706_789_000), "1 year 2 mons 3 days 04:05:06.789"),
    ((0, -1, 7_200_000_000), "-1 days +02:00:00"), ((0, 1, -90_000_000_000), "1 day -25:00:00"),
    ((-14, 0, 0), "-1 years -2 mons"), ((1, 0, 0), "1 mon"), ((0, 0, 90_000_000_000), "25:00:00"),
])
def test_format_interval(parts, text):
    assert dtx.format_interval(Interval(*parts)) == text


def test_dates_times_and_timestamptz_text():
    assert dtx.format_date(dtx.parse_date("2020-02-29")) == "2020-02-29"
    assert dtx.format_date(dtx.parse_date("0099-01-02")) == "0099-01-02"
    assert dtx.parse_date("2020-01-01 10:00") == 7305
    assert dtx.format_time(dtx.parse_time("10:11:12.5")) == "10:11:12.5"
    assert dtx.parse_time("24:00") == dtx.USECS_PER_DAY
    assert dtx.format_time(dtx.parse_time("allballs")) == "00:00:00"
    us = dtx.parse_timestamptz("2020-01-01 10:00:00+05:30")
    assert dtx.format_timestamptz(us) == "2020-01-01 04:30:00+00"
    assert dtx.parse_timestamptz("2020-01-01T04:30Z") == us
    assert dtx.parse_timestamptz("2020-01-01 04:30 UTC") == us
    assert dtx.parse_timestamptz("2020-01-01 05:30 Europe/Paris") == us
    set_timezone("Asia/Kolkata")
    try:
        assert dtx.parse_timestamptz("2020-01-01 10:00") == us
        assert dtx.format_timestamptz(us) == "2020-01-01 10:00:00+05:30"
    finally:
        set_timezone("UTC")
    with pytest.raises(errors.DatetimeFieldOverflow):
        dtx.parse_date("2021-02-29")
    with pytest.raises(errors.DataError) as ei:
        dtx.parse_timestamptz("2020-01-01 10:00 Nowhere/Land")
    assert ei.value.sqlstate == "22007"


def test_numeric_bytea_uuid_text():
    assert T.parse_literal(" 1.50 ", T.NUMERIC) == D("1.50")
    assert str(T.parse_literal("1e3", T.NUMERIC)) == "1000"
    assert T.format_value(D("-0.00"), T.NUMERIC) == "0.00"
    assert T.parse_literal("\\x 01 ff", T.BYTEA) == b"\x01\xff"
    assert T.parse_literal("a\\\\b\\001", T.BYTEA) == b"a\\b\x01"
    assert T.format_value(b"\x01\xff", T.BYTEA) == "\\x01ff"
    with pytest.raises(errors.InvalidParameterValue):
        T.parse_literal("\\x0", T.BYTEA)
    u = T.parse_literal("A0EEBC999C0B4EF8BB6D6BB9BD380A11", T.UUID)
    assert T.format_value(u, T.UUID) == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    for bad in ("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1", "-a0eebc999c0b4ef8bb6d6bb9bd380a11"):
        with pytest.raises(errors.InvalidTextRepresentation):
            T.parse_literal(bad, T.UUID)
    assert T.format_value(T.parse_literal("1.1", T.REAL), T.REAL) == "1.1"
    assert T.format_value(T.parse_literal("1e10", T.REAL), T.REAL) == "1e+10"


def test_numeric_division_scale_as_postgresql():
    cases = [("10", "3", "3.3333333333333333"), ("1", "7", "0.14285714285714285714"),
             ("3.46", "3", "1.15333333333333333333"), ("1", "3000", "0.00033333333333333333"),
             ("100000", "3", "33333.333333333333"), ("4.47", "2", "2.2350000000000000"),
             ("-1", "8", "-0.12500000000000000000"), ("2", "3.000000000000000000001",
                                                       "0.666666666666666666666")]
    for a, b, want in cases:
        assert str(typeops.numeric_div(D(a), D(b))) == want, (a, b)
    with pytest.raises(errors.DivisionByZero):
        typeops.numeric_div(D(1), D(0))


def test_interval_multiplication_spills_as_postgresql():
    assert dtx.format_interval(dtx.interval_mul(Interval(0, 1, 0), 2.5)) == "2 days 12:00:00"
    assert dtx.format_interval(dtx.interval_mul(Interval(1, 0, 0), 1.5)) == "1 mon 15 days"
    assert dtx.format_interval(dtx.interval_div(Interval(0, 3, 0), 2)) == "1 day 12:00:00"
    assert dtx.format_interval(dtx.interval_mul(Interval(1, 1, 1_000_000), -1)) == \
        "-1 mons -1 days -00:00:01"


def test_timestamp_plus_interval_vector_and_row_paths_agree():
    ts = np.array([dtx.parse_date(d) * dtx.USECS_PER_DAY for d in
                   ("2020-01-31", "2020-02-29", "2021-12-31")], dtype=np.int64)
    for iv in (Interval(0, 1, 3_600_000_000), Interval(1, 0, 0), Interval(-13, 2, -5)):
        vec = typeops.arith_fn("+", T.TIMESTAMP, T.TIMESTAMP, T.INTERVAL)(ts, iv, None)
        rows = [dtx.add_interval_ts(int(x), iv) for x in ts]
        assert vec.tolist() == rows
    # timestamptz in a zone with DST: days on the wall clock
    set_timezone("Europe/Paris")
    try:
        f = typeops.arith_fn("+", T.TIMESTAMPTZ, T.TIMESTAMPTZ, T.INTERVAL)
        start = dtx.parse_timestamptz("2021-03-27 12:00")
        r = f(np.array([start]), Interval(0, 1, 0), None)
        assert dtx.format_timestamptz(int(r[0])) == "2021-03-28 12:00:00+02"
        assert int(r[0]) - start == 23 * 3_600_000_000
    finally:
        set_timezone("UTC")


def test_errors_only_for_live_rows():
    f = typeops.arith_fn("/", T.NUMERIC, T.NUMERIC, T.NUMERIC)
    a = np.array([D(1), D(2)], dtype=object)
    b = np.array([D(0), D(4)], dtype=object)
    with pytest.raises(errors.DivisionByZero):
        f(a, b, None)
    out = f(a, b, np.array([False, True]))
    assert out[1] == D("0.50000000000000000000")
    g = typeops.arith_fn("+", T.DATE, T.DATE, T.INTEGER)
    with pytest.raises(errors.DatetimeFieldOverflow):
        g(np.array([3_000_000]), np.array([1]), None)      # past 9999-12-31


def test_vector_casts_agree_with_value_casts():
    src = np.array([0, 86_400_000_000 * 3 + 5, -1], dtype=np.int64)
    for s, d in [(T.TIMESTAMP, T.DATE), (T.TIMESTAMP, T.TIME), (T.TIMESTAMP, T.TIMESTAMPTZ),
                 (T.TIMESTAMPTZ, T.DATE), (T.TIMESTAMPTZ, T.TIMESTAMP)]:
        vec = typeops.cast_fn(s, d)(src, None, None)
        one = [T.to_repr(T.cast_value(T.from_repr(int(x), s), s, d), d) for x in src]
        assert [int(x) for x in vec] == one, (s, d)
    ints = np.array([1, -7, 123456789], dtype=np.int64)
    num = typeops.cast_fn(T.INTEGER, parse_type("numeric(12,2)"))(ints, None, None)
    assert [str(x) for x in num] == ["1.00", "-7.00", "123456789.00"]
    with pytest.raises(errors.NumericValueOutOfRange):
        typeops.cast_fn(T.INTEGER, parse_type("numeric(3,1)"))(ints, None, None)
    with pytest.raises(errors.NumericValueOutOfRange):
        typeops.cast_fn(T.DOUBLE, T.REAL)(np.array([1e39]), None, None)


def test_casts_between_dates_and_timestamps():
    assert T.cast_value(dt.date(2020, 1, 2), T.DATE, T.TIMESTAMP) == dt.datetime(2020, 1, 2)
    assert T.cast_value(dt.datetime(2020, 1, 2, 23), T.TIMESTAMP, T.DATE) == dt.date(2020, 1, 2)
    assert T.cast_value(dt.time(1, 30), T.TIME, T.INTERVAL).parts() == (0, 0, 5_400_000_000)
    assert T.cast_value(D("2.5"), T.NUMERIC, T.SMALLINT) == 3
    with pytest.raises(errors.NumericValueOutOfRange):
        T.cast_value(D("40000"), T.NUMERIC, T.SMALLINT)
    with pytest.raises(errors.DatatypeMismatch):
        T.cast_value(dt.date(2020, 1, 1), T.DATE, T.INTEGER)
    with pytest.raises(errors.DatatypeMismatch):            # assignment: no numeric -> bool
        T.cast_value(D(1), T.NUMERIC, T.BOOLEAN, explicit=False, column="c")
