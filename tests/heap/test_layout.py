"""Tests of minidb.types and minidb.heap.layout: the tuple format, one row and many rows.

The oracle is the one-row path: `coerce` says what a value must come back as, `encode` then
`decode` must give it back, and `gather` (vectorized) and `encode_batch` (vectorized) must agree
with them byte for byte and value for value, for hypothesis-generated schemas and rows.

Not proven here: anything about pages (line pointers, placement), visibility, or speed.
"""

from __future__ import annotations

import datetime as dt
import math
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minidb import errors
from minidb.heap import layout as layout_mod
from minidb.heap.layout import (HEAP_TUPLE_HEADER_SIZE, MAX_COLUMNS, MAX_TUPLE_SIZE, Column,
                                FlatViews, RowLayout, decode_header, gather_header)
from minidb.storage.htup import HEAP_HASNULL, HEAP_HASVARWIDTH, HEAP_XMAX_INVALID
from minidb.types import (
    SqlType, coerce, datetime64_to_ints, int_to_timestamp, ints_to_datetime64, parse_type,
    timestamp_to_int,
)


# -- helpers -----------------------------------------------------------------------------------

def place(tuples: list[bytes], gaps: list[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Lay tuples in one flat buffer at 8-aligned starts (with optional gaps of 8*k bytes)."""
    starts, pos = [], 0
    for k, t in enumerate(tuples):
        pos += 8 * (gaps[k] if gaps else 0)
        starts.append(pos)
        pos += (len(t) + 7) & ~7
    flat = np.full(pos + 3, 0xEE, dtype=np.uint8)   # garbage around, odd total length
    for s, t in zip(starts, tuples):
        flat[s:s + len(t)] = np.frombuffer(t, dtype=np.uint8)
        flat[s + len(t): (s + len(t) + 7) & ~7] = 0
    return flat, np.array(starts, dtype=np.int64)


def gathered_as_python(layout: RowLayout, col: int, vals: np.ndarray, mask) -> list:
    """Turn one column of gather's output into the Python values decode would give."""
    t = layout.columns[col].type
    out = []
    for k in range(len(vals)):
        if mask is not None and mask[k]:
            out.append(None)
            continue
        v = vals[k]
        if t.name == "timestamp":
            out.append(int_to_timestamp(int(v)))
        elif t.name == "boolean":
            assert isinstance(v, np.bool_)
            out.append(bool(v))
        elif t.name == "double precision":
            out.append(float(v))
        elif t.fixed:
            out.append(int(v))
        else:
            assert type(v) is str
            out.append(v)
    return out


def same(a, b) -> bool:
    """Equal and of the same type; NaN equals NaN, 0.0 and -0.0 differ."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))
    return a == b


def split_batch(data: np.ndarray, lengths: np.ndarray) -> list[bytes]:
    padded = (lengths + 7) & ~7
    starts = np.cumsum(padded) - padded
    assert data.size == int(padded.sum())
    rows = []
    for s, n, p in zip(starts.tolist(), lengths.tolist(), padded.tolist()):
        assert not data[s + n: s + p].any(), "padding must be zero"
        rows.append(data[s:s + n].tobytes())
    return rows


# -- strategies --------------------------------------------------------------------------------

sql_types = st.sampled_from(["integer", "bigint", "double precision", "boolean", "text",
                             "timestamp", "varchar", "char(n)", "varchar(n)"]).flatmap(
    lambda k: st.integers(1, 12).map(lambda n: SqlType(k[:-3], n)) if k.endswith("(n)")
    else st.just(parse_type(k)))
text_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")


def values_for(t: SqlType):
    """Python values acceptable for ``t`` (possibly needing coercion: padding, trimming)."""
    if t.name == "integer":
        return st.integers(-(2 ** 31), 2 ** 31 - 1)
    if t.name == "bigint":
        return st.integers(-(2 ** 63), 2 ** 63 - 1)
    if t.name == "double precision":
        return st.one_of(st.floats(), st.sampled_from([math.nan, -math.inf, -0.0]))
    if t.name == "boolean":
        return st.booleans()
    if t.name == "timestamp":
        return st.datetimes()
    if t.length is None:
        return st.text(text_chars, max_size=20)
    return st.tuples(st.text(text_chars, max_size=t.length), st.integers(0, 3)).map(
        lambda p: p[0] + " " * p[1])      # trailing blanks past n are trimmed, not an error


@st.composite
def schemas(draw, min_cols=1, max_cols=20):
    types = draw(st.lists(sql_types, min_size=min_cols, max_size=max_cols))
    not_null = draw(st.lists(st.booleans(), min_size=len(types), max_size=len(types)))
    return [Column(f"c{i}", t, nn) for i, (t, nn) in enumerate(zip(types, not_null))]


@st.composite
def rows_for(draw, columns, min_rows=1, max_rows=12):
    n = draw(st.integers(min_rows, max_rows))
    rows = []
    for _ in range(n):
        row = []
        for c in columns:
            v = draw(values_for(c.type))
            if not c.not_null and draw(st.integers(0, 3)) == 0:
                v = None
            row.append(v)
        rows.append(row)
    return rows


@st.composite
def schema_and_rows(draw):
    columns = draw(schemas())
    return columns, draw(rows_for(columns))


# -- types ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("spelling, name, length, shown", [
    ("int", "integer", None, "integer"),
    ("INT4", "integer", None, "integer"),
    ("Integer", "integer", None, "integer"),
    ("int8", "bigint", None, "bigint"),
    ("BIGINT", "bigint", None, "bigint"),
    ("float8", "double precision", None, "double precision"),
    ("float", "double precision", None, "double precision"),
    ("double   precision", "double precision", None, "double precision"),
    ("bool", "boolean", None, "boolean"),
    ("boolean", "boolean", None, "boolean"),
    ("char", "char", 1, "character(1)"),
    ("character", "char", 1, "character(1)"),
    ("char(84)", "char", 84, "character(84)"),
    ("CHARACTER (10)", "char", 10, "character(10)"),
    ("varchar(10)", "varchar", 10, "character varying(10)"),
    ("character varying(7)", "varchar", 7, "character varying(7)"),
    ("varchar", "varchar", None, "character varying"),
    ("text", "text", None, "text"),
    ("timestamp", "timestamp", None, "timestamp without time zone"),
    ("timestamp without time zone", "timestamp", None, "timestamp without time zone"),
])
def test_parse_type_spellings(spelling, name, length, shown):
    t = parse_type(spelling)
    assert (t.name, t.length, str(t)) == (name, length, shown)
    assert parse_type(str(t)) == t         # the SQL spelling parses back to the same type


@pytest.mark.parametrize("spelling", ["money", "int(4)", "text(3)", "varchar(x)",
                                      "time with time zone", "", "int4[]", "date(3)",
                                      "int(4,2)"])
def test_parse_type_unknown(spelling):
    with pytest.raises(errors.NotSupportedError, match="is not supported"):
        parse_type(spelling)


def test_parse_type_bad_length():
    with pytest.raises(errors.InvalidParameterValue):
        parse_type("char(0)")
    with pytest.raises(errors.InvalidParameterValue):
        parse_type("varchar(99999999)")


def test_type_physical_properties():
    expect = {"integer": (True, 4, 4, "<i4"), "bigint": (True, 8, 8, "<i8"),
              "double precision": (True, 8, 8, "<f8"), "boolean": (True, 1, 1, "u1"),
              "timestamp": (True, 8, 8, "<i8"), "text": (False, 4, 4, None),
              "char(3)": (False, 4, 4, None), "varchar(3)": (False, 4, 4, None)}
    for spelling, props in expect.items():
        t = parse_type(spelling)
        assert (t.fixed, t.size, t.align, t.np_dtype) == props


def test_coerce_integers():
    i4, i8 = parse_type("int"), parse_type("bigint")
    assert coerce(i4, 2 ** 31 - 1) == 2 ** 31 - 1
    assert coerce(i4, np.int64(-5)) == -5 and type(coerce(i4, np.int64(-5))) is int
    assert coerce(i4, 3.0) == 3 and type(coerce(i4, 3.0)) is int
    assert coerce(i8, -(2 ** 63)) == -(2 ** 63)
    assert coerce(i4, None) is None
    with pytest.raises(errors.NumericValueOutOfRange, match="^integer out of range"):
        coerce(i4, 2 ** 31)
    with pytest.raises(errors.NumericValueOutOfRange, match="^bigint out of range"):
        coerce(i8, 2 ** 63)
    with pytest.raises(errors.NumericValueOutOfRange):
        coerce(i8, np.uint64(2 ** 64 - 1))
    for bad in (True, np.bool_(False), 2.5, float("nan"), float("inf"), "1", b"1", [1]):
        with pytest.raises(errors.DatatypeMismatch):
            coerce(i4, bad)
    with pytest.raises(errors.DatatypeMismatch, match='column "aid"'):
        coerce(i4, "x", column="aid")


def test_coerce_double_boolean():
    f8, b = parse_type("float8"), parse_type("bool")
    assert coerce(f8, 1) == 1.0 and type(coerce(f8, 1)) is float
    assert coerce(f8, np.float32(0.5)) == 0.5
    assert math.isnan(coerce(f8, float("nan")))
    with pytest.raises(errors.DatatypeMismatch):
        coerce(f8, True)
    with pytest.raises(errors.NumericValueOutOfRange):
        coerce(f8, 10 ** 400)
    assert coerce(b, np.bool_(True)) is True
    for bad in (1, 0, "t", None.__class__):
        with pytest.raises(errors.DatatypeMismatch):
            coerce(b, bad)


def test_coerce_strings():
    c3, v3, t = parse_type("char(3)"), parse_type("varchar(3)"), parse_type("text")
    assert coerce(c3, "a") == "a  "
    assert coerce(c3, "") == "   "
    assert coerce(c3, "ab     ") == "ab "              # excess blanks are cut, as PostgreSQL
    assert coerce(v3, "ab     ") == "ab "
    assert coerce(v3, "ab") == "ab"                    # varchar is not padded
    assert coerce(v3, "äöü") == "äöü"                  # length counts characters, not bytes
    assert coerce(t, np.str_("x")) == "x" and type(coerce(t, np.str_("x"))) is str
    with pytest.raises(errors.StringDataRightTruncation,
                       match=r"^value too long for type character\(3\)$"):
        coerce(c3, "abcd")
    with pytest.raises(errors.StringDataRightTruncation,
                       match=r"^value too long for type character varying\(3\)$"):
        coerce(v3, "ab  x")
    for bad in (1, b"abc", None.__class__):
        with pytest.raises(errors.DatatypeMismatch):
            coerce(t, bad)
    for bad in ("a\x00b", "\ud800"):
        with pytest.raises(errors.DataError) as e:
            coerce(t, bad)
        assert e.value.sqlstate == "22021"


def test_coerce_timestamps():
    ts = parse_type("timestamp")
    naive = dt.datetime(2024, 5, 6, 7, 8, 9, 123456)
    assert coerce(ts, naive) == naive
    aware = dt.datetime(2024, 5, 6, 9, 8, 9, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert coerce(ts, aware) == naive and coerce(ts, aware).tzinfo is None
    assert coerce(ts, dt.date(2024, 5, 6)) == dt.datetime(2024, 5, 6)
    assert coerce(ts, np.datetime64("2024-05-06T07:08:09.123456")) == naive
    for bad in ("2024-05-06", 0, 1.5, np.datetime64("NaT")):
        with pytest.raises(errors.DatatypeMismatch):
            coerce(ts, bad)


def test_timestamp_conversions():
    assert timestamp_to_int(dt.datetime(2000, 1, 1)) == 0
    assert timestamp_to_int(dt.datetime(2000, 1, 1, 0, 0, 1)) == 1_000_000
    assert timestamp_to_int(dt.datetime(1999, 12, 31, 23, 59, 59, 999999)) == -1
    for d in (dt.datetime.min, dt.datetime.max, dt.datetime(1970, 1, 1), dt.datetime(2024, 2, 29)):
        i = timestamp_to_int(d)
        assert int_to_timestamp(i) == d
        assert ints_to_datetime64([i])[0] == np.datetime64(d, "us")
        assert datetime64_to_ints(np.array([d], dtype="datetime64[us]"))[0] == i
    arr = ints_to_datetime64(np.array([0, 86_400_000_000]))
    assert arr.dtype == np.dtype("datetime64[us]")
    assert arr.tolist() == [dt.datetime(2000, 1, 1), dt.datetime(2000, 1, 2)]


# -- layout: shape -------------------------------------------------------------------------------

def pgbench_accounts() -> RowLayout:
    return RowLayout([Column("aid", "int", True), Column("bid", "int"),
                      Column("abalance", "int"), Column("filler", "char(84)")])


def test_pgbench_accounts_shape():
    lay = pgbench_accounts()
    assert (lay.natts, lay.bitmap_size, lay.t_hoff) == (4, 1, 40)
    assert lay.offsets == [40, 44, 48, 52] and lay.fixed_size == 56
    assert lay.var_columns == [3]
    assert lay.dtype.itemsize == 56
    assert lay.dtype.fields["filler.off"][1] == 52 and lay.dtype.fields["filler.len"][1] == 54
    t = lay.encode([1, 1, 0, ""], xmin=7, cmin=2, ctid=(3, 4))
    assert len(t) == 140
    rec = np.frombuffer(t[:56], dtype=lay.dtype)[0]
    assert (rec["t_xmin"], rec["t_xmax"], rec["t_cmin"], rec["t_cmax"]) == (7, 0, 2, 0)
    assert (rec["t_ctid_block"], rec["t_ctid_offset"]) == (3, 4)
    assert rec["t_infomask2"] == 4 and rec["t_hoff"] == 40
    assert rec["t_infomask"] == HEAP_XMAX_INVALID | HEAP_HASVARWIDTH
    assert rec["t_bits"].tolist() == [0b1111]
    assert (rec["aid"], rec["filler.off"], rec["filler.len"]) == (1, 56, 84)
    assert t[56:] == b" " * 84


def test_alignment_and_offsets():
    lay = RowLayout([Column("a", "bool"), Column("b", "bigint"), Column("c", "bool"),
                     Column("d", "int"), Column("e", "text"), Column("f", "bool"),
                     Column("g", "timestamp"), Column("h", "float8")])
    assert lay.offsets == [40, 48, 56, 60, 64, 68, 72, 80]
    assert lay.fixed_size == 88
    for c, off in zip(lay.columns, lay.offsets):
        assert off % c.type.align == 0


@pytest.mark.parametrize("natts, bitmap, hoff", [(0, 0, 40), (1, 1, 40), (8, 1, 40), (9, 2, 40),
                                                 (40, 5, 40), (41, 6, 48), (1600, 200, 240)])
def test_bitmap_and_hoff(natts, bitmap, hoff):
    lay = RowLayout([Column(f"c{i}", "bool") for i in range(natts)])
    assert (lay.bitmap_size, lay.t_hoff) == (bitmap, hoff)
    assert lay.t_hoff >= HEAP_TUPLE_HEADER_SIZE + bitmap and lay.t_hoff % 8 == 0
    row = [None if i % 3 == 1 else bool(i % 2) for i in range(natts)]
    t = lay.encode(row)
    assert lay.decode(t) == tuple(row)
    bits = t[35:35 + bitmap]
    for i in range(natts):
        assert bool(bits[i // 8] >> (i % 8) & 1) == (row[i] is not None)


def test_bad_schemas():
    with pytest.raises(errors.ProgramLimitExceeded):
        RowLayout([Column(f"c{i}", "int") for i in range(MAX_COLUMNS + 1)])
    with pytest.raises(errors.ProgrammingError, match='"a" specified more than once'):
        RowLayout([Column("a", "int"), Column("a", "text")])
    with pytest.raises(errors.ProgrammingError, match="conflicts"):
        RowLayout([Column("t_xmin", "int")])
    with pytest.raises(errors.NotSupportedError):
        Column("a", "money")


def test_max_tuple_size_fits_on_an_empty_page():
    # 24-byte page header + one 4-byte line pointer + the tuple padded to 8 bytes
    assert 24 + 4 + ((MAX_TUPLE_SIZE + 7) & ~7) <= 8192
    assert 24 + 4 + ((MAX_TUPLE_SIZE + 1 + 7) & ~7) > 8192


# -- layout: one row -------------------------------------------------------------------------

ALL_TYPES = [Column("i", "int"), Column("b", "bigint"), Column("f", "float8"),
             Column("o", "bool"), Column("c", "char(5)"), Column("v", "varchar(6)"),
             Column("t", "text"), Column("ts", "timestamp")]
ALL_VALUES = [-7, 2 ** 40, 2.5, True, "ab", "héllo", "naïve ☃ text", dt.datetime(1999, 1, 2, 3, 4)]


@pytest.mark.parametrize("null_at", [None] + list(range(len(ALL_TYPES))) + ["all"])
def test_every_type_roundtrips_with_a_null_anywhere(null_at):
    lay = RowLayout(ALL_TYPES)
    row = list(ALL_VALUES)
    if null_at == "all":
        row = [None] * len(row)
    elif null_at is not None:
        row[null_at] = None
    expect = tuple(coerce(c.type, v) for c, v in zip(ALL_TYPES, row))
    t = lay.encode(row, xmin=12, cmin=3)
    assert lay.decode(t) == expect
    assert lay.decode(b"\x00" * 16 + t, 16) == expect      # at an offset
    hdr = decode_header(t)
    assert hdr["infomask"] & HEAP_HASNULL == (0 if null_at is None else HEAP_HASNULL)
    assert hdr["natts"] == len(ALL_TYPES) and hdr["xmin"] == 12 and hdr["cmin"] == 3
    # NULL fixed slots are zero, NULL descriptors are (0, 0)
    rec = np.frombuffer(t[:lay.fixed_size], dtype=lay.dtype)[0]
    for c, v in zip(ALL_TYPES, row):
        if v is None:
            if c.type.fixed:
                assert rec[c.name] == 0
            else:
                assert rec[f"{c.name}.off"] == 0 and rec[f"{c.name}.len"] == 0
    # the same row through gather, placed among other rows
    flat, starts = place([lay.encode(ALL_VALUES), t, lay.encode([None] * 8)], gaps=[1, 0, 2])
    got = lay.gather(flat, starts, list(range(8)))
    for k, (vals, mask) in enumerate(got):
        assert gathered_as_python(lay, k, vals, mask)[1] == expect[k]


def test_decode_accepts_any_buffer():
    lay = RowLayout(ALL_TYPES)
    t = lay.encode(ALL_VALUES)
    expect = lay.decode(t)
    assert lay.decode(bytearray(t)) == expect
    assert lay.decode(memoryview(t)) == expect
    assert lay.decode(np.frombuffer(t, dtype=np.uint8)) == expect


def test_encode_errors():
    lay = RowLayout([Column("a", "int", not_null=True), Column("s", "varchar(3)")])
    with pytest.raises(errors.NotNullViolation,
                       match='^null value in column "a" violates not-null constraint$'):
        lay.encode([None, "x"])
    with pytest.raises(errors.DatatypeMismatch):
        lay.encode([1])
    with pytest.raises(errors.DatatypeMismatch):
        lay.encode([1, "x", 3])
    with pytest.raises(errors.NumericValueOutOfRange, match="integer out of range"):
        lay.encode([2 ** 31, "x"])
    with pytest.raises(errors.DatatypeMismatch, match='column "a"'):
        lay.encode([True, "x"])
    with pytest.raises(errors.StringDataRightTruncation):
        lay.encode([1, "abcd"])
    assert lay.decode(lay.encode([1, "abc   "])) == (1, "abc")


def test_row_too_big():
    lay = RowLayout([Column("a", "int"), Column("t", "text")])
    room = MAX_TUPLE_SIZE - lay.fixed_size
    assert len(lay.encode([1, "x" * room])) == MAX_TUPLE_SIZE
    with pytest.raises(errors.ProgramLimitExceeded,
                       match=rf"^row is too big: size {MAX_TUPLE_SIZE + 1}, maximum size "
                             rf"{MAX_TUPLE_SIZE}$"):
        lay.encode([1, "x" * (room + 1)])
    with pytest.raises(errors.ProgramLimitExceeded):
        lay.encode([1, "é" * room])            # bytes count, not characters
    with pytest.raises(errors.ProgramLimitExceeded):
        lay.encode_batch({"a": [1, 2], "t": ["x", "x" * (room + 1)]}, 2)


def test_decode_detects_wrong_natts():
    lay = RowLayout([Column("a", "int"), Column("b", "int")])
    t = bytearray(lay.encode([1, 2]))
    struct.pack_into("<H", t, 30, 3)
    with pytest.raises(errors.DataCorrupted):
        lay.decode(t)


# -- layout: many rows, against the one-row path -----------------------------------------------

@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema_and_rows(), st.data())
def test_decode_gather_and_batch_agree(sr, data):
    columns, rows = sr
    lay = RowLayout(columns)
    expect = [tuple(coerce(c.type, v) for c, v in zip(columns, row)) for row in rows]
    tuples = [lay.encode(row, xmin=5, cmin=1) for row in rows]
    for t, e in zip(tuples, expect):
        assert all(same(a, b) for a, b in zip(lay.decode(t), e))

    gaps = data.draw(st.lists(st.integers(0, 2), min_size=len(rows), max_size=len(rows)))
    flat, starts = place(tuples, gaps)
    views = FlatViews(flat)
    cols = data.draw(st.permutations(range(len(columns))))
    got = lay.gather(views, starts, cols)
    for c, (vals, mask) in zip(cols, got):
        assert len(vals) == len(rows)
        if mask is not None:
            assert mask.any()
        py = gathered_as_python(lay, c, vals, mask)
        assert all(same(a, r[c]) for a, r in zip(py, expect)), (c, py)
        assert np.array_equal(lay.null_mask(views, starts, c), [r[c] is None for r in expect])

    hdr = gather_header(views, starts)
    assert hdr["xmin"].tolist() == [5] * len(rows) and hdr["cmin"].tolist() == [1] * len(rows)
    assert not hdr["xmax"].any() and not hdr["cmax"].any()
    assert (hdr["infomask2"] == len(columns)).all()
    assert hdr["infomask"].tolist() == [decode_header(t)["infomask"] for t in tuples]

    # encode_batch, columns given as lists with None, must produce exactly encode's bytes
    batch = {c.name: [row[i] for row in rows] for i, c in enumerate(columns)}
    bdata, blens = lay.encode_batch(batch, len(rows), xmin=5, cmin=1)
    assert blens.tolist() == [len(t) for t in tuples]
    assert split_batch(bdata, blens) == tuples
    # ... and as numpy arrays where a fixed column can be one
    batch2 = {}
    for i, c in enumerate(columns):
        col = [row[i] for row in rows]
        if c.type.fixed and c.type.name != "timestamp":
            dtype = {"integer": np.int64, "bigint": np.int64, "double precision": np.float64,
                     "boolean": bool}[c.type.name]
            mask = [v is None for v in col]
            arr = np.array([0 if v is None else v for v in col], dtype=dtype)
            batch2[c.name] = np.ma.masked_array(arr, mask=mask) if any(mask) else arr
        elif c.type.name == "timestamp":
            batch2[c.name] = np.array([np.datetime64("NaT") if v is None else np.datetime64(v, "us")
                                       for v in col], dtype="datetime64[us]")
        else:
            batch2[c.name] = np.array(col, dtype=object)
    bdata2, blens2 = lay.encode_batch(batch2, len(rows), xmin=5, cmin=1)
    assert split_batch(bdata2, blens2) == tuples


def test_encode_batch_pgbench_uniform_path():
    lay = pgbench_accounts()
    n = 1000
    data, lens = lay.encode_batch({"aid": np.arange(1, n + 1), "bid": np.ones(n, np.int32),
                                   "abalance": np.zeros(n, np.int64), "filler": [""] * n},
                                  n, xmin=3)
    assert (lens == 140).all() and data.size == 144 * n
    rows = split_batch(data, lens)
    assert rows[0] == lay.encode([1, 1, 0, ""], xmin=3)
    assert rows[-1] == lay.encode([n, 1, 0, ""], xmin=3)
    starts = np.arange(n, dtype=np.int64) * 144
    (aid, m1), (filler, m2) = lay.gather(data, starts, [0, 3])
    assert m1 is None and m2 is None
    assert aid.dtype == np.int32 and aid.tolist() == list(range(1, n + 1))
    assert filler[0] == " " * 84 and type(filler[0]) is str and (filler == " " * 84).all()


def test_encode_batch_general_path_chunks(monkeypatch):
    """Varying lengths and NULLs, with chunks smaller than the batch."""
    monkeypatch.setattr(layout_mod, "_BATCH_CHUNK", 7)
    lay = RowLayout([Column("k", "bigint", True), Column("s", "text"), Column("c", "char(3)"),
                     Column("v", "varchar(10)")])
    n = 50
    rows = [[k, None if k % 5 == 0 else "é" * (k % 7), "ab" if k % 2 else None,
             None if k % 3 == 0 else str(k)] for k in range(n)]
    batch = {"k": np.arange(n), "s": [r[1] for r in rows],
             "c": np.ma.masked_array(np.array(["ab"] * n, dtype=object),
                                     mask=[r[2] is None for r in rows]),
             "v": [r[3] for r in rows]}
    data, lens = lay.encode_batch(batch, n)
    assert split_batch(data, lens) == [lay.encode(r) for r in rows]


def test_encode_batch_missing_column_is_null_and_empty_batch():
    lay = RowLayout([Column("a", "int"), Column("b", "text"), Column("c", "bool", True)])
    data, lens = lay.encode_batch({"c": [True, False]}, 2)
    assert split_batch(data, lens) == [lay.encode([None, None, True]),
                                       lay.encode([None, None, False])]
    data, lens = lay.encode_batch({"a": [], "c": []}, 0)
    assert data.size == 0 and lens.size == 0
    with pytest.raises(errors.NotNullViolation, match='"c"'):
        lay.encode_batch({"a": [1]}, 1)
    with pytest.raises(errors.UndefinedColumn):
        lay.encode_batch({"zz": [1], "c": [True]}, 1)
    with pytest.raises(errors.InvalidParameterValue):
        lay.encode_batch({"a": [1, 2], "c": [True]}, 1)


@pytest.mark.parametrize("column, value, error", [
    ("i", np.array([1, 2 ** 31]), errors.NumericValueOutOfRange),
    ("i", [1, 2 ** 31], errors.NumericValueOutOfRange),
    ("i", [1, 2 ** 70], errors.NumericValueOutOfRange),
    ("b", np.array([2 ** 64 - 1], dtype=np.uint64), errors.NumericValueOutOfRange),
    ("i", np.array([True, False]), errors.DatatypeMismatch),
    ("i", [1, True], errors.DatatypeMismatch),
    ("i", np.array([1.0, 2.5]), errors.DatatypeMismatch),
    ("i", [1.0, 2.5], errors.DatatypeMismatch),
    ("i", np.array([1.0, np.nan]), errors.DatatypeMismatch),
    ("i", ["1", "2"], errors.DatatypeMismatch),
    ("f", np.array([True]), errors.DatatypeMismatch),
    ("o", np.array([0, 1]), errors.DatatypeMismatch),
    ("o", [True, 1], errors.DatatypeMismatch),
    ("v", ["abc", "abcd"], errors.StringDataRightTruncation),
    ("v", np.array(["abc", "abcd"]), errors.StringDataRightTruncation),
    ("v", [1, "a"], errors.DatatypeMismatch),
    ("v", np.array([1, 2]), errors.DatatypeMismatch),
    ("c", ["a", "a\x00"], errors.DataError),
    ("ts", np.array([0, 1]), errors.DatatypeMismatch),
    ("ts", ["2020-01-01", None], errors.DatatypeMismatch),
    ("nn", [1, None], errors.NotNullViolation),
    ("nn", np.ma.masked_array([1, 2], mask=[False, True]), errors.NotNullViolation),
])
def test_encode_batch_errors_match_encode(column, value, error):
    lay = RowLayout([Column("i", "int"), Column("b", "bigint"), Column("f", "float8"),
                     Column("o", "bool"), Column("v", "varchar(3)"), Column("c", "char(2)"),
                     Column("ts", "timestamp"), Column("nn", "int", True)])
    n = len(value)
    batch = {"nn": np.zeros(n, np.int32), column: value}
    with pytest.raises(error):
        lay.encode_batch(batch, n)
    # the one-row path raises the same class for the offending value
    bad = [value[k] for k in range(n)]
    with pytest.raises(error):
        for v in bad:
            row = [None] * 7 + [0]
            row[[c.name for c in lay.columns].index(column)] = (
                v.item() if isinstance(v, np.generic) and column != "ts" else v)
            if column == "nn" and (v is None or v is np.ma.masked):
                row[7] = None
            lay.encode(row)


def test_encode_batch_trailing_blank_truncation_and_nat():
    lay = RowLayout([Column("v", "varchar(3)"), Column("ts", "timestamp")])
    stamps = np.array(["2001-02-03T04:05:06", "NaT"], dtype="datetime64[s]")
    data, lens = lay.encode_batch({"v": ["abc   ", "x"], "ts": stamps}, 2)
    assert split_batch(data, lens) == [lay.encode(["abc", dt.datetime(2001, 2, 3, 4, 5, 6)]),
                                       lay.encode(["x", None])]


def test_gather_strings_paths():
    lay = RowLayout([Column("s", "text"), Column("c", "char(4)")])
    cases = [
        [["abcd", "a"], ["wxyz", "b"], ["1234", "c"]],        # one length, ASCII: byte matrix
        [["äbc", "a"], ["wxyz", None], ["", "c"]],           # non-ASCII, NULL: per row
        [["", "a"], ["", "b"]],                             # all empty
    ]
    for rows in cases:
        flat, starts = place([lay.encode(r) for r in rows])
        got = lay.gather(flat, starts, [0, 1])
        for k in range(2):
            vals, mask = got[k]
            assert gathered_as_python(lay, k, vals, mask) == [
                coerce(lay.columns[k].type, r[k]) for r in rows]


def test_gather_empty_and_flatviews():
    lay = RowLayout(ALL_TYPES)
    flat, starts = place([lay.encode(ALL_VALUES)])
    views = FlatViews(flat)
    assert flat.size % 8 != 0 and views.i64.size == flat.size // 8
    got = lay.gather(views, np.array([], dtype=np.int64), list(range(8)))
    assert all(len(v) == 0 and m is None for v, m in got)
    assert lay.gather(views, starts, []) == []
    # the buffer pool as a 2-D array of pages works too
    pages = np.zeros((2, 8192), dtype=np.uint8)
    t = lay.encode(ALL_VALUES)
    pages[1, 8192 - 8 * ((len(t) + 7) // 8):][:len(t)] = np.frombuffer(t, dtype=np.uint8)
    start = 8192 + 8192 - 8 * ((len(t) + 7) // 8)
    (vals, _), = lay.gather(FlatViews(pages), np.array([start]), [6])
    assert vals[0] == ALL_VALUES[6]


def test_encode_batch_ignores_values_under_the_mask():
    lay = RowLayout([Column("i", "int"), Column("o", "bool")])
    i = np.ma.masked_array(np.array([1, 2 ** 40]), mask=[False, True])
    o = np.ma.masked_array(np.array([True, False]), mask=[True, False])
    data, lens = lay.encode_batch({"i": i, "o": o}, 2)
    assert split_batch(data, lens) == [lay.encode([1, None]), lay.encode([None, False])]


def test_encode_batch_constant_string_after_a_nullable_one():
    """A column with one value everywhere still moves when an earlier varlena is NULL."""
    lay = RowLayout([Column("a", "text"), Column("b", "char(2)")])
    rows = [["xyz", "q"], [None, "q"], ["", "q"]]
    data, lens = lay.encode_batch({"a": [r[0] for r in rows], "b": ["q"] * 3}, 3)
    assert split_batch(data, lens) == [lay.encode(r) for r in rows]


def test_encode_batch_uniform_rows_with_null_fixed_columns(monkeypatch):
    monkeypatch.setattr(layout_mod, "_CACHE_CHUNK_BYTES", 1000)     # several chunks
    lay = pgbench_accounts()
    n = 100
    bid = np.ma.masked_array(np.arange(n), mask=np.arange(n) % 3 == 0)
    data, lens = lay.encode_batch({"aid": np.arange(n), "bid": bid, "filler": ["f"] * n}, n)
    assert split_batch(data, lens) == [
        lay.encode([k, None if k % 3 == 0 else k, None, "f"]) for k in range(n)]


def test_gather_strings_from_a_sparse_buffer(monkeypatch):
    """Tuples far apart in a big buffer: strings are sliced from the buffer, not a copy."""
    monkeypatch.setattr(layout_mod, "_STRING_SPAN_COPY", 0)
    lay = RowLayout([Column("s", "text")])
    flat = np.zeros(1 << 16, dtype=np.uint8)
    t1, t2 = lay.encode(["héllo"]), lay.encode([None])
    flat[8:8 + len(t1)] = np.frombuffer(t1, np.uint8)
    flat[60000:60000 + len(t2)] = np.frombuffer(t2, np.uint8)
    (vals, mask), = lay.gather(flat, np.array([8, 60000]), [0])
    assert vals.tolist() == ["héllo", None] and mask.tolist() == [False, True]


def test_column_helpers_of_types():
    from minidb.types import coerce_array, encode_strings
    vals, mask = coerce_array(parse_type("bigint"), [1, None, 3], 3)
    assert vals.dtype == np.dtype("<i8") and vals.tolist() == [1, 0, 3]
    assert mask.tolist() == [False, True, False]
    vals, mask = coerce_array(parse_type("bool"), np.array([True, False]), 2)
    assert vals.dtype == np.uint8 and vals.tolist() == [1, 0] and mask is None
    vals, mask = coerce_array(parse_type("timestamp"), None, 2)
    assert mask.all()
    encoded, const, lens, mask = encode_strings(parse_type("char(4)"), ["ab"] * 5, 5)
    assert encoded is None and const == b"ab  " and lens.tolist() == [4] * 5 and mask is None
    encoded, const, lens, mask = encode_strings(parse_type("text"), ["é", None, "x"], 3)
    assert encoded == ["é".encode(), b"", b"x"] and const is None
    assert lens.tolist() == [2, 0, 1] and mask.tolist() == [False, True, False]
    lay = pgbench_accounts()
    assert lay.column_index("filler") == 3
    with pytest.raises(errors.UndefinedColumn):
        lay.column_index("nope")


def test_gather_header_fields():
    lay = RowLayout([Column("a", "int")])
    t = bytearray(lay.encode([1], xmin=2 ** 40 + 1, cmin=7, ctid=(2 ** 32 - 1, 291)))
    struct.pack_into("<Q", t, 8, 2 ** 63 + 5)           # xmax
    struct.pack_into("<I", t, 20, 9)                    # cmax
    flat, starts = place([bytes(t), lay.encode([None], xmin=3)])
    h = lay.gather_header(FlatViews(flat), starts)
    assert h["xmin"].tolist() == [2 ** 40 + 1, 3] and h["xmax"].tolist() == [2 ** 63 + 5, 0]
    assert h["cmin"].tolist() == [7, 0] and h["cmax"].tolist() == [9, 0]
    assert h["ctid_block"].tolist() == [2 ** 32 - 1, 0] and h["ctid_offset"].tolist() == [291, 0]
    assert h["infomask2"].tolist() == [1, 1]
    assert h["infomask"].tolist() == [HEAP_XMAX_INVALID, HEAP_XMAX_INVALID | HEAP_HASNULL]
    assert decode_header(t)["ctid"] == (2 ** 32 - 1, 291)


# -- encode_row (the generated encoder) against encode (the loop) ------------------------------

def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        return (type(e).__name__, str(e))


_ODD_VALUES = st.sampled_from([None, 2 ** 31, -(2 ** 63) - 1, "x" * 20, 1.5, True, "abc"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema_and_rows(), st.data())
def test_encode_row_equals_encode(sr, data):
    """Same bytes for every row, and for rows made wrong (a NULL in a NOT NULL column, a
    value out of range or of another type, too few or too many values) the same error."""
    columns, rows = sr
    lay = RowLayout(columns)
    xmin, cmin = data.draw(st.integers(0, 2 ** 63)), data.draw(st.integers(0, 2 ** 32 - 1))
    ctid = (data.draw(st.integers(0, 2 ** 32 - 1)), data.draw(st.integers(0, 2 ** 16 - 1)))
    im = data.draw(st.sampled_from([0, 0x2000]))
    for row in rows:
        if data.draw(st.integers(0, 3)) == 0:
            row = list(row)
            row[data.draw(st.integers(0, len(row) - 1))] = data.draw(_ODD_VALUES)
        if data.draw(st.integers(0, 9)) == 0:
            row = list(row) + [1] if data.draw(st.booleans()) else list(row)[:-1]
        want = _outcome(lambda: lay.encode(row, xmin=xmin, cmin=cmin, ctid=ctid, infomask=im))
        got = _outcome(lambda: lay.encode_row(row, xmin, cmin, ctid[0], ctid[1], im))
        assert got == want


@pytest.mark.parametrize("columns", [[], [Column("t", "text")],
                                     [Column("a", "int"), Column("t", "text", not_null=True)]])
def test_encode_row_edge_layouts(columns):
    lay = RowLayout(columns)
    room = MAX_TUPLE_SIZE - lay.fixed_size
    rows = [[], [None], ["x" * room], ["x" * (room + 1)], [1, None], [None, "é" * room],
            [2, "y" * (room - 2)]]
    for row in rows:
        assert (_outcome(lambda: lay.encode_row(row, 1, 2, 3, 4, 0))
                == _outcome(lambda: lay.encode(row, xmin=1, cmin=2, ctid=(3, 4))))


@settings(max_examples=60, deadline=None)
@given(schema_and_rows())
def test_compiled_decode_matches_general_loop(sr):
    """``decode`` as written per layout (``_compile_decoder``) gives what the general loop
    (the class's ``decode``) gives, for rows with and without NULLs, at an offset too."""
    columns, rows = sr
    lay = RowLayout(columns)
    assert lay.decode is not RowLayout.decode
    for row in rows:
        t = lay.encode(row)
        general = RowLayout.decode(lay, t)
        for got in (lay.decode(t), lay.decode(b"\x00" * 8 + t, 8),
                    lay.decode(memoryview(np.frombuffer(t, dtype=np.uint8)))):
            assert type(got) is tuple and len(got) == len(general)
            assert all(same(a, b) for a, b in zip(got, general))   # (NaN is NaN)


def test_a_layout_built_again_reuses_its_compiled_functions():
    """A parallel worker rebuilds the table's layout for every task: the generated encoder
    and decoder are compiled once per distinct layout, and the rebuilt ones work."""
    cols = [Column("aid", "integer", not_null=True), Column("filler", "character(84)")]
    a, b = RowLayout(cols), RowLayout(list(cols))
    assert a.encode_row.__code__ is b.encode_row.__code__
    assert a.decode.__code__ is b.decode.__code__
    other = RowLayout([Column("aid", "bigint", not_null=True), Column("filler", "text")])
    assert other.encode_row.__code__ is not a.encode_row.__code__
    data = b.encode_row((7, "x"), 1, 0, 0, 1, 0)
    assert data == a.encode((7, "x"), xmin=1, ctid=(0, 1))
    assert a.decode(data) == b.decode(data) == (7, "x" + " " * 83)
