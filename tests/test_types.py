"""minidb.types for the types beyond the first eight (smallint, real, numeric(p,s), date, time,
timestamptz, interval, bytea, uuid): spellings, coerce's rules and errors, and a hypothesis
round trip per type through the heap tuple (encode / decode / gather / encode_batch) and the
B-tree key encoding (decode and order)."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minidb.errors as errors
from minidb.heap.layout import Column, FlatViews, RowLayout
from minidb.index.keys import KeyCodec
from minidb.types import (Interval, coerce, fit_numeric, parse_type, session_timezone,
                          set_timezone)

D = decimal.Decimal
UTC = dt.timezone.utc


@pytest.mark.parametrize("spelling, shown", [
    ("smallint", "smallint"), ("int2", "smallint"),
    ("real", "real"), ("float4", "real"), ("float(1)", "real"), ("float(24)", "real"),
    ("float(25)", "double precision"), ("float(53)", "double precision"),
    ("float", "double precision"), ("double precision", "double precision"),
    ("float8", "double precision"),
    ("numeric", "numeric"), ("decimal", "numeric"), ("numeric(10,2)", "numeric(10,2)"),
    ("decimal(5)", "numeric(5,0)"), ("numeric(10, 2)", "numeric(10,2)"),
    ("numeric(3,-1)", "numeric(3,-1)"),
    ("date", "date"), ("time", "time without time zone"),
    ("time without time zone", "time without time zone"),
    ("timestamptz", "timestamp with time zone"),
    ("timestamp with time zone", "timestamp with time zone"),
    ("interval", "interval"), ("bytea", "bytea"), ("uuid", "uuid"),
])
def test_spellings(spelling, shown):
    t = parse_type(spelling)
    assert str(t) == shown
    assert parse_type(str(t)) == t          # the stored spelling parses back


@pytest.mark.parametrize("spelling", ["float(0)", "float(54)", "numeric(0)", "numeric(1001)",
                                      "numeric(5,1001)"])
def test_bad_typmods(spelling):
    with pytest.raises(errors.InvalidParameterValue):
        parse_type(spelling)


def test_physical_properties():
    expect = {"smallint": (True, 2, 2), "real": (True, 4, 4), "numeric": (False, 4, 4),
              "date": (True, 4, 4), "time": (True, 8, 8), "timestamptz": (True, 8, 8),
              "interval": (True, 16, 8), "uuid": (True, 16, 1), "bytea": (False, 4, 4)}
    for name, props in expect.items():
        t = parse_type(name)
        assert (t.fixed, t.size, t.align) == props


def test_fit_numeric_rounds_half_away_from_zero_and_checks_precision():
    t = parse_type("numeric(5,2)")
    assert fit_numeric(D("2.345"), t) == D("2.35")
    assert str(fit_numeric(D("-2.345"), t)) == "-2.35"
    assert str(fit_numeric(D("1"), t)) == "1.00"        # the scale is kept for display
    assert str(fit_numeric(D("-0.001"), t)) == "0.00"   # no negative zero
    assert fit_numeric(D("999.994"), t) == D("999.99")
    with pytest.raises(errors.NumericValueOutOfRange, match="numeric field overflow"):
        fit_numeric(D("999.995"), t)                     # rounds to 1000.00: 4 digits
    with pytest.raises(errors.NumericValueOutOfRange) as ei:
        fit_numeric(D("Infinity"), t)
    assert ei.value.sqlstate == "22003"
    assert str(fit_numeric(D("1234"), parse_type("numeric(3,-1)"))) == "1230"
    assert fit_numeric(D("NaN"), t).is_nan()


def test_coerce_rules():
    assert coerce(parse_type("smallint"), 32767) == 32767
    with pytest.raises(errors.NumericValueOutOfRange, match="smallint out of range"):
        coerce(parse_type("smallint"), 32768)
    assert coerce(parse_type("real"), 1.1) == float(np.float32(1.1))
    with pytest.raises(errors.NumericValueOutOfRange, match="overflow"):
        coerce(parse_type("real"), 1e39)
    with pytest.raises(errors.NumericValueOutOfRange, match="underflow"):
        coerce(parse_type("real"), 1e-50)
    assert coerce(parse_type("numeric"), 0.1) == D("0.1")        # 15 significant digits
    assert coerce(parse_type("numeric"), 7) == D(7)
    with pytest.raises(errors.DatatypeMismatch):
        coerce(parse_type("numeric"), True)
    assert coerce(parse_type("date"), dt.datetime(2020, 1, 2, 3, 4)) == dt.date(2020, 1, 2)
    assert coerce(parse_type("bytea"), bytearray(b"ab")) == b"ab"
    assert coerce(parse_type("bytea"), memoryview(b"ab")) == b"ab"
    iv = coerce(parse_type("interval"), dt.timedelta(days=1, seconds=5))
    assert iv.parts() == (0, 1, 5_000_000)
    with pytest.raises(errors.DatatypeMismatch):
        coerce(parse_type("uuid"), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")   # SQL parses text


def test_timestamptz_reads_naive_values_in_the_session_time_zone():
    t = parse_type("timestamptz")
    aware = dt.datetime(2020, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert coerce(t, aware) == dt.datetime(2020, 1, 1, 10, tzinfo=UTC)
    assert coerce(t, dt.datetime(2020, 1, 1, 12)) == dt.datetime(2020, 1, 1, 12, tzinfo=UTC)
    set_timezone("Europe/Paris")
    try:
        assert coerce(t, dt.datetime(2020, 7, 1, 12)) == dt.datetime(2020, 7, 1, 10,
                                                                       tzinfo=UTC)
    finally:
        set_timezone("UTC")
    assert session_timezone() is UTC


def test_interval_compares_as_postgresql():
    assert Interval(months=1) == Interval(days=30)            # '1 mon' = '30 days'
    assert hash(Interval(months=1)) == hash(Interval(days=30))
    assert Interval(days=1) == dt.timedelta(days=1)
    assert Interval(days=1, microseconds=-1) < Interval(microseconds=86_400_000_000 + 1)
    assert Interval(1, 2, 3).parts() == (1, 2, 3)
    with pytest.raises(errors.DatetimeFieldOverflow):
        Interval(months=2 ** 31)


# -- hypothesis: one round trip per type -----------------------------------------------------

_US = 10 ** 6
STRATEGIES = {
    "smallint": st.integers(-2 ** 15, 2 ** 15 - 1),
    "real": st.floats(width=32, allow_nan=False),
    "numeric": st.decimals(allow_nan=False, allow_infinity=False, min_value=D("-1e30"),
                           max_value=D("1e30"), places=None).map(
        lambda d: d if d.as_tuple().exponent <= 0 else d.quantize(D(1))),
    "numeric(12,3)": st.decimals(min_value=D("-999999999.999"), max_value=D("999999999.999"),
                                 places=3),
    "date": st.dates(),
    "time": st.times(),
    "timestamptz": st.datetimes(timezones=st.sampled_from(
        [UTC, dt.timezone(dt.timedelta(hours=5, minutes=30)), dt.timezone(-dt.timedelta(hours=8))]),
        min_value=dt.datetime(2, 1, 1), max_value=dt.datetime(9998, 12, 31)),
    "interval": st.builds(Interval, st.integers(-10 ** 6, 10 ** 6), st.integers(-10 ** 6, 10 ** 6),
                          st.integers(-10 ** 15, 10 ** 15)),
    "bytea": st.binary(max_size=40),
    "uuid": st.uuids(),
}


@pytest.mark.parametrize("tname", sorted(STRATEGIES))
def test_round_trip_through_tuple_and_key(tname):
    t = parse_type(tname)
    layout = RowLayout([Column("k", "integer"), Column("v", t)])
    codec = KeyCodec([t])

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(st.one_of(st.none(), STRATEGIES[tname]), min_size=1, max_size=12))
    def check(values):
        stored = [None if v is None else coerce(t, v) for v in values]
        # one row at a time
        bufs = [layout.encode((i, v)) for i, v in enumerate(values)]
        for b, want in zip(bufs, stored):
            assert layout.decode(b)[1] == want
        # a batch, then gather from the flat buffer
        data, lens = layout.encode_batch({"k": list(range(len(values))), "v": values},
                                         len(values))
        padded = (lens + 7) & ~7
        starts = np.cumsum(padded) - padded
        (vals, mask), = layout.gather(FlatViews(data), starts, [1])
        for i, want in enumerate(stored):
            if want is None:
                assert mask is not None and mask[i]
            else:
                got = vals[i]
                if tname in ("date", "time", "timestamptz"):
                    from minidb.exec.datatypes import from_repr
                    got = from_repr(int(got), t)
                assert got == want, (got, want)
        # keys: decode, and byte order is value order (NULLs last)
        present = [v for v in stored if v is not None]
        keys = [codec.encode([v]) for v in present]
        for k, v in zip(keys, present):
            assert codec.decode(k) == (v,)
        by_key = [v for _, v in sorted(zip(keys, present), key=lambda kv: kv[0])]
        assert by_key == sorted(present)
        assert all(codec.encode([None]) > k for k in keys)
        batch = codec.encode_batch([(vals, mask)], len(values))
        batch = [bytes(r) for r in batch] if isinstance(batch, np.ndarray) else batch
        assert [b for b, v in zip(batch, stored) if v is not None] == keys

    check()


def test_numeric_key_order_around_zero_and_prefixes():
    codec = KeyCodec(["numeric"])
    vals = [D("-Infinity"), D("-1000"), D("-0.123"), D("-0.12"), D("0"), D("0.12"),
            D("0.123"), D("1.0"), D("10"), D("Infinity"), D("NaN")]
    keys = [codec.encode([v]) for v in vals]
    assert keys == sorted(keys)
    assert codec.encode([D("1.0")]) == codec.encode([D("1.000")])


def test_uuid_and_bytea_values():
    t = parse_type("uuid")
    u = uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
    layout = RowLayout([Column("u", t), Column("b", "bytea")])
    assert layout.decode(layout.encode((u, b"\x00\xff"))) == (u, b"\x00\xff")
