"""Key encoding: byte order = SQL order (NULLS LAST, C collation), prefix-freedom, round
trips, and the vectorized encoder agreeing with the scalar one.

DESC and NULLS FIRST columns (``options``): byte order = the reversed / NULLS FIRST SQL
order per column, still prefix-free, batch = scalar, round trips.

What this does not prove: that every SQL type minidb will ever have is covered."""

from __future__ import annotations

import datetime as dt
import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minidb.index.keys import KeyCodec

INT = st.one_of(st.none(), st.integers(-2**31, 2**31 - 1))
BIG = st.one_of(st.none(), st.integers(-2**63, 2**63 - 1))
DBL = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))
RAW = st.one_of(st.none(), st.binary(max_size=6).map(lambda b: b.replace(b"\xff", b"\xfe")),
                st.sampled_from([b"", b"\x00", b"a\x00", b"a\x00b", b"a", "é".encode(),
                                 "日本".encode()]))


def _sql_key(values) -> tuple:
    """The SQL order of a row of values: NULL last; NaN above all numbers; -0.0 == 0.0."""
    out = []
    for v in values:
        if v is None:
            out.append((1,))
        elif isinstance(v, float):
            out.append((0, 1, 0.0) if math.isnan(v) else (0, 0, v + 0.0))
        else:
            out.append((0, v))
    return tuple(out)


@given(st.lists(st.tuples(INT, DBL, RAW, BIG), min_size=2, max_size=40))
@settings(max_examples=300, deadline=None)
def test_byte_order_is_sql_order(rows):
    c = KeyCodec(["integer", "double precision", "text", "bigint"])
    enc = [c.encode_stored(r) for r in rows]
    for a, ea in zip(rows, enc):
        for b, eb in zip(rows, enc):
            ka, kb = _sql_key(a), _sql_key(b)
            assert (ea < eb) == (ka < kb), (a, b)
            assert (ea == eb) == (ka == kb), (a, b)


@given(st.lists(st.tuples(INT, RAW), min_size=2, max_size=30), st.binary(min_size=6, max_size=6),
       st.binary(min_size=6, max_size=6))
@settings(max_examples=200, deadline=None)
def test_prefix_free_so_tid_suffix_keeps_order(rows, t1, t2):
    c = KeyCodec(["integer", "text"])
    for a in rows:
        for b in rows:
            ea, eb = c.encode_stored(a), c.encode_stored(b)
            if ea != eb:
                assert (ea + t1 < eb + t2) == (ea < eb)
            # the first column's encoding is a byte prefix of the whole key's
            assert ea.startswith(c.encode_stored(a[:1]))


def test_round_trip_and_special_values():
    c = KeyCodec(["integer", "bigint", "double precision", "boolean", "text", "timestamp",
                  "varchar(5)", "char(3)"])
    row = (-5, 2**62, -0.0, True, "a\u00e9\u65e5", dt.datetime(2024, 2, 29, 12, 1, 2, 3),
           "xy", "ab ")
    assert c.decode(c.encode(row)) == (-5, 2**62, 0.0, True, "a\u00e9\u65e5",
                                       dt.datetime(2024, 2, 29, 12, 1, 2, 3), "xy", "ab ")
    assert c.decode(c.encode((None,) * 8)) == (None,) * 8
    d = KeyCodec(["double precision"])
    assert d.encode((-0.0,)) == d.encode((0.0,))
    nan2 = struct.unpack(">d", bytes.fromhex("7ff8000000000001"))[0]
    assert d.encode((float("nan"),)) == d.encode((nan2,)) > d.encode((float("inf"),))
    assert d.encode((None,)) > d.encode((float("nan"),))
    assert math.isnan(d.decode(d.encode((float("nan"),)))[0])


def test_text_zero_bytes_and_c_collation():
    c = KeyCodec(["text"])
    vals = [b"", b"\x00", b"\x00\x00", b"\x00\x01", b"a", b"a\x00", b"a\x00\xff", b"a\x01",
            b"ab", "\u00e9".encode(), "\U0001F600".encode(), b"B", b"Z", b"b"]
    by_bytes = sorted(vals)
    by_key = sorted(vals, key=lambda v: c.encode_stored((v,)))
    assert by_key == by_bytes          # memcmp of UTF-8 = code point order = COLLATE "C"
    assert c.decode(c.encode_stored((b"a\x00b",))) == ("a\x00b",)
    # "Z" < "a" < "b" < "é": C collation, not a linguistic one
    assert c.encode(("Z",)) < c.encode(("a",)) < c.encode(("é",))


@given(st.lists(st.tuples(INT, DBL, st.one_of(st.none(), st.booleans())), max_size=50))
@settings(max_examples=100, deadline=None)
def test_batch_encoder_matches_scalar_fixed(rows):
    c = KeyCodec(["integer", "double precision", "boolean"])
    n = len(rows)
    cols = []
    for j, dtype in enumerate([np.int32, np.float64, bool]):
        vals = np.array([0 if r[j] is None else r[j] for r in rows], dtype=dtype)
        mask = np.array([r[j] is None for r in rows], dtype=bool)
        cols.append((vals, mask if mask.any() else None))
    m = c.encode_batch(cols, n)
    assert m.shape == (n, c.fixed_width)
    assert [bytes(x) for x in m] == [c.encode(r) for r in rows]


@given(st.lists(st.tuples(INT, st.one_of(st.none(), st.text(max_size=5).filter(
    lambda s: "\x00" not in s))), max_size=40))
@settings(max_examples=100, deadline=None)
def test_batch_encoder_matches_scalar_var(rows):
    c = KeyCodec(["integer", "text"])
    n = len(rows)
    ints = np.array([0 if r[0] is None else r[0] for r in rows], dtype=np.int32)
    imask = np.array([r[0] is None for r in rows], dtype=bool)
    strs = np.array([r[1] for r in rows], dtype=object)
    smask = np.array([r[1] is None for r in rows], dtype=bool)
    out = c.encode_batch([(ints, imask), (strs, smask)], n)
    assert out == [c.encode(r) for r in rows]


def test_bad_values_are_refused_with_sql_errors():
    from minidb.errors import NumericValueOutOfRange, DatatypeMismatch
    c = KeyCodec(["integer"])
    with pytest.raises(NumericValueOutOfRange):
        c.encode((2**31,))
    with pytest.raises(DatatypeMismatch):
        c.encode(("x",))


# -- DESC / NULLS FIRST columns (pg_index.indoption) ---------------------------------------------
class _Rev:
    """Reverses the order of what it wraps (a DESC column in a sort key)."""

    def __init__(self, v):
        self.v = v

    def __lt__(self, other):
        return other.v < self.v

    def __eq__(self, other):
        return self.v == other.v


def _sql_key_opts(values, options) -> tuple:
    out = []
    for v, o in zip(values, options):
        if v is None:
            out.append((0,) if o & 2 else (2,))
            continue
        k = (1, 0.0) if isinstance(v, float) and math.isnan(v) else (0, v + 0.0) \
            if isinstance(v, float) else (0, v)
        out.append((1, _Rev(k) if o & 1 else k))
    return tuple(out)


@given(st.lists(st.tuples(INT, DBL, RAW), min_size=2, max_size=30),
       st.lists(st.integers(0, 3), min_size=3, max_size=3))
@settings(max_examples=120, deadline=None)
def test_desc_and_nulls_first_order(rows, options):
    c = KeyCodec(["integer", "double precision", "text"], options=options)
    enc = [c.encode_stored(r) for r in rows]
    for a, ea in zip(rows, enc):
        for b, eb in zip(rows, enc):
            ka, kb = _sql_key_opts(a, options), _sql_key_opts(b, options)
            assert (ea < eb) == (ka < kb), (a, b, options)
            assert (ea == eb) == (ka == kb), (a, b, options)
        # prefix-free: the first column's encoding is a prefix of the key's
        assert ea.startswith(c.encode_stored(a[:1]))


@given(st.lists(st.tuples(INT, DBL, st.one_of(st.none(), st.text(max_size=4).filter(
    lambda s: "\x00" not in s))), min_size=1, max_size=30),
       st.lists(st.integers(0, 3), min_size=3, max_size=3))
@settings(max_examples=80, deadline=None)
def test_desc_batch_matches_scalar_and_decodes(rows, options):
    c = KeyCodec(["integer", "double precision", "text"], options=options)
    n = len(rows)
    cols = []
    for j in range(3):
        vals = [r[j] for r in rows]
        mask = np.array([v is None for v in vals])
        fill = "" if j == 2 else 0
        arr = np.array([fill if v is None else v for v in vals],
                       dtype=object if j == 2 else (np.int64 if j == 0 else np.float64))
        cols.append((arr, mask))
    batch = c.encode_batch(cols, n)
    for r, k in zip(rows, batch):
        k = bytes(k)
        assert k == c.encode(r)
        got = c.decode(k)
        for v, g in zip(r, got):
            if isinstance(v, float) and math.isnan(v):
                assert math.isnan(g)
            else:
                assert g == v
