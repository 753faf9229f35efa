"""Window frames against sqlite3: hypothesis generates small tables with NULLs and ties and
window calls with ROWS / RANGE / GROUPS frames (every kind of bound, EXCLUDE CURRENT ROW /
GROUP / TIES / NO OTHERS), and minidb's answers must equal sqlite3's (3.28+ has the same
frame semantics as PostgreSQL, NULL ordering aside).

What is generated and why it is deterministic:
  * every ORDER BY key says NULLS FIRST or NULLS LAST (sqlite's default differs);
  * ROWS frames order by (x, id), a total order, so every row's frame is one set of rows;
  * RANGE and GROUPS frames order by x alone, with ties: a frame is then a union of peer
    groups (minus what EXCLUDE takes), the same set whichever order peers come in, so the
    aggregates are determined; first_value / last_value / nth_value, which depend on the
    order inside the frame, take the ORDER BY key x itself as argument (equal on peers);
  * RANGE offsets go with one ORDER BY key, integer (x) or float (y) offsets on it.
Floats (sum, avg of y) compare with a tolerance: minidb sums a frame from prefix sums,
sqlite3 row by row.

A few fixed cases check PostgreSQL's errors and a parameter as the offset.
"""

from __future__ import annotations

import math
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minidb.errors as errors
from minidb.instance import Instance
from minidb.session import Session
from minidb.sql import Engine

small = st.one_of(st.none(), st.integers(-3, 3), st.integers(-3, 3), st.integers(-3, 3))
part = st.one_of(st.none(), st.integers(0, 2), st.integers(0, 2))
fl = st.one_of(st.none(), st.sampled_from([-1.5, 0.0, 0.5, 1.0, 2.5, 4.0]))
tx = st.one_of(st.none(), st.sampled_from(["a", "b", "ab", "c", ""]))
rows = st.lists(st.tuples(part, small, fl, tx), min_size=1, max_size=25)

EXCLUDE = ["", " EXCLUDE NO OTHERS", " EXCLUDE CURRENT ROW", " EXCLUDE GROUP",
           " EXCLUDE TIES"]


@st.composite
def frame_clause(draw, kind, key_float=False):
    """BETWEEN start AND end (or the short form) with bounds in a valid order."""
    off = (st.sampled_from(["0", "0.5", "1", "1.5", "3"]) if key_float
           else st.sampled_from(["0", "1", "2", "5"]))
    # bound ranks: 0 UNBOUNDED PRECEDING, 1 n PRECEDING, 2 CURRENT ROW, 3 n FOLLOWING,
    # 4 UNBOUNDED FOLLOWING
    s = draw(st.integers(0, 3))
    e = draw(st.integers(max(s, 1), 4))

    def bound(r):
        return ["UNBOUNDED PRECEDING", f"{draw(off)} PRECEDING", "CURRENT ROW",
                f"{draw(off)} FOLLOWING", "UNBOUNDED FOLLOWING"][r]
    if e == 2 and s < 3 and draw(st.booleans()):
        text = f"{kind} {bound(s)}"
    else:
        text = f"{kind} BETWEEN {bound(s)} AND {bound(e)}"
    return text + draw(st.sampled_from(EXCLUDE))


@st.composite
def window_call(draw):
    kind = draw(st.sampled_from(["ROWS", "RANGE", "GROUPS", "DEFAULT"]))
    nulls = draw(st.sampled_from([" NULLS FIRST", " NULLS LAST"]))
    desc = draw(st.sampled_from(["", " DESC"]))
    pby = draw(st.sampled_from(["", "PARTITION BY p "]))
    key = "x"
    if kind == "RANGE" and draw(st.booleans()):
        key = "y"
    order = f"ORDER BY {key}{desc}{nulls}" + (", id" if kind == "ROWS" else "")
    if kind == "DEFAULT":
        frame = ""
    else:
        frame = " " + draw(frame_clause(kind, key_float=(key == "y")))
    arg = key if kind != "ROWS" else draw(st.sampled_from(["x", "y", "id"]))
    func = draw(st.sampled_from(["sum(A)", "count(*)", "count(A)", "avg(A)", "min(A)",
                                 "max(A)", "min(s)", "max(s)", "first_value(A)",
                                 "last_value(A)", "nth_value(A, 2)", "nth_value(A, 1)",
                                 "sum(x)", "count(y)"]))
    if func in ("min(s)", "max(s)") and kind != "ROWS":
        func = func.replace("s", "x")            # text ties would make the set order matter
    if kind != "ROWS" and func in ("sum(x)",) and key == "y":
        func = "sum(y)"
    return f"{func.replace('A', arg)} OVER ({pby}{order}{frame})"


def _norm(v):
    return round(v, 6) + 0.0 if isinstance(v, float) else v


def _same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9,
                                                                  abs_tol=1e-6)
    return a == b


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    inst = Instance(tmp_path_factory.mktemp("frames") / "data", shared_buffers=256)
    s = Session(inst)
    e = Engine(s)
    e.execute("CREATE TABLE f (id int PRIMARY KEY, p int, x int, y double precision, s text)")
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE f (id INTEGER PRIMARY KEY, p INTEGER, x INTEGER, y REAL, s TEXT)")
    yield e, con
    con.close()
    s.close()
    inst.close()


def _load(e, con, data):
    e.execute("DELETE FROM f")
    con.execute("DELETE FROM f")
    ins = e.prepare("INSERT INTO f VALUES (?, ?, ?, ?, ?)")
    for i, r in enumerate(data):
        ins.execute((i,) + r)
        con.execute("INSERT INTO f VALUES (?, ?, ?, ?, ?)", (i,) + r)


_HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
           HealthCheck.data_too_large]


@settings(max_examples=60, deadline=None, suppress_health_check=_HEALTH)
@given(data=rows, calls=st.lists(window_call(), min_size=1, max_size=4))
def test_frames_agree_with_sqlite(both, data, calls):
    _agree(both, data, calls)


@pytest.mark.long
@settings(max_examples=800, deadline=None, suppress_health_check=_HEALTH)
@given(data=rows, calls=st.lists(window_call(), min_size=1, max_size=4))
def test_frames_agree_with_sqlite_many(both, data, calls):
    _agree(both, data, calls)


def _agree(both, data, calls):
    e, con = both
    _load(e, con, data)
    sql = "SELECT id, " + ", ".join(calls) + " FROM f ORDER BY id"
    theirs = con.execute(sql).fetchall()
    ours = e.execute(sql).rows
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert all(_same(_norm(u), _norm(v)) for u, v in zip(a, b)), (sql, ours, theirs)


@pytest.fixture
def db(tmp_path):
    inst = Instance(tmp_path / "data", shared_buffers=128)
    s = Session(inst)
    e = Engine(s)
    e.execute("CREATE TABLE w (id int, x int, y double precision, n numeric, ts timestamp)")
    e.execute("INSERT INTO w VALUES (1, 1, 1.0, 1.5, '2020-01-01'), (2, 1, NULL, 2, NULL), "
              "(3, NULL, 2.0, NULL, '2020-01-03'), (4, 3, 3.0, 2.5, '2020-01-02')")
    yield e
    s.close()
    inst.close()


@pytest.mark.parametrize("frame,cls,state,words", [
    ("ROWS BETWEEN -1 PRECEDING AND CURRENT ROW", errors.DataError, "22013",
     "frame starting offset must not be negative"),
    ("ROWS BETWEEN CURRENT ROW AND -1 FOLLOWING", errors.DataError, "22013",
     "frame ending offset must not be negative"),
    ("RANGE BETWEEN -1 PRECEDING AND CURRENT ROW", errors.DataError, "22013",
     "invalid preceding or following size in window function"),
    ("ROWS BETWEEN NULL PRECEDING AND CURRENT ROW", errors.DataError, "22004",
     "frame starting offset must not be null"),
    ("ROWS BETWEEN UNBOUNDED FOLLOWING AND CURRENT ROW", errors.ProgrammingError, "42P20",
     "frame start cannot be UNBOUNDED FOLLOWING"),
    ("ROWS BETWEEN CURRENT ROW AND UNBOUNDED PRECEDING", errors.ProgrammingError, "42P20",
     "frame end cannot be UNBOUNDED PRECEDING"),
    ("ROWS BETWEEN 1 FOLLOWING AND CURRENT ROW", errors.ProgrammingError, "42P20",
     "frame starting from following row cannot have preceding rows"),
    ("ROWS BETWEEN id PRECEDING AND CURRENT ROW", errors.InvalidColumnReference, "42P10",
     "argument of ROWS must not contain variables"),
])
def test_frame_errors_as_postgresql(db, frame, cls, state, words):
    with pytest.raises(cls) as ei:
        db.execute(f"SELECT sum(x) OVER (ORDER BY x {frame}) FROM w")
    assert ei.value.sqlstate == state and words in str(ei.value)


def test_range_and_groups_need_order_by(db):
    with pytest.raises(errors.ProgrammingError) as ei:
        db.execute("SELECT sum(x) OVER (ORDER BY x, id RANGE 1 PRECEDING) FROM w")
    assert ei.value.sqlstate == "42P20" and "exactly one ORDER BY column" in str(ei.value)
    with pytest.raises(errors.ProgrammingError) as ei:
        db.execute("SELECT sum(x) OVER (PARTITION BY x GROUPS 1 PRECEDING) FROM w")
    assert "GROUPS mode requires an ORDER BY clause" in str(ei.value)
    with pytest.raises(errors.NotSupportedError) as ei:
        db.execute("SELECT sum(x) OVER (ORDER BY x RANGE 1.5 PRECEDING) FROM w")
    assert "column type integer and offset type numeric" in str(ei.value)
    with pytest.raises(errors.DataError) as ei:
        db.execute("SELECT nth_value(x, 0) OVER (ORDER BY x) FROM w")
    assert ei.value.sqlstate == "22016"


def test_offset_parameter_numeric_key_and_named_window(db):
    got = db.execute("SELECT id, sum(x) OVER (ORDER BY id ROWS BETWEEN ? PRECEDING AND "
                     "CURRENT ROW) FROM w ORDER BY id", [1]).rows
    assert [tuple(r) for r in got] == [(1, 1), (2, 2), (3, 1), (4, 3)]
    # numeric ORDER BY key with a numeric offset (PostgreSQL: NULL keys frame their peers)
    got = db.execute("SELECT id, count(*) OVER (ORDER BY n RANGE BETWEEN 0.5 PRECEDING AND "
                     "0.5 FOLLOWING) FROM w ORDER BY id").rows
    assert [tuple(r) for r in got] == [(1, 2), (2, 3), (3, 1), (4, 2)]
    got = db.execute("SELECT id, last_value(id) OVER w FROM w "
                     "WINDOW w AS (ORDER BY id ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING) "
                     "ORDER BY id").rows
    assert [tuple(r) for r in got] == [(1, 2), (2, 3), (3, 4), (4, 4)]
    got = db.execute("SELECT id, max(id) OVER (w ROWS 1 PRECEDING EXCLUDE CURRENT ROW) FROM w "
                     "WINDOW w AS (ORDER BY id) ORDER BY id").rows
    assert [tuple(r) for r in got] == [(1, None), (2, 1), (3, 2), (4, 3)]


# PostgreSQL 15's answers (psql, TimeZone Europe/Paris: 2020-03-29 is a DST change)
DT_SETUP = [
    "CREATE TABLE d (id int, t timestamp, dd date, tz timestamptz)",
    "INSERT INTO d VALUES (1, '2020-01-31 10:00', '2020-01-31', '2020-03-28 12:00+00'), "
    "(2, '2020-02-29 09:00', '2020-02-29', '2020-03-29 12:00+00'), (3, NULL, NULL, NULL), "
    "(4, '2020-03-01 00:00', '2020-03-01', '2020-03-30 11:00+00'), "
    "(5, '2020-01-01', '2020-01-01', '2020-01-01 00:00+00'), "
    "(6, '2020-02-29 09:00', '2020-02-29', '2020-03-29 12:00+00')",
    "SET timezone = 'Europe/Paris'",
]
DT_CASES = [
    ("SELECT id, count(*) OVER (ORDER BY t RANGE BETWEEN '1 month' PRECEDING AND CURRENT ROW), "
     "sum(id) OVER (ORDER BY t DESC RANGE BETWEEN '1 day 1 hour' PRECEDING AND '30 days' "
     "FOLLOWING EXCLUDE TIES) FROM d ORDER BY id",
     [(1, 2, 1), (2, 3, 7), (3, 1, 3), (4, 3, 13), (5, 1, 5), (6, 3, 11)]),
    ("SELECT id, count(*) OVER (ORDER BY dd RANGE BETWEEN interval '1 month' PRECEDING AND "
     "'1 day' FOLLOWING), min(id) OVER (ORDER BY dd NULLS FIRST RANGE BETWEEN '2 days' "
     "FOLLOWING AND UNBOUNDED FOLLOWING) FROM d ORDER BY id",
     [(1, 2, 2), (2, 4, None), (3, 1, 1), (4, 3, None), (5, 1, 1), (6, 4, None)]),
    ("SELECT id, count(*) OVER (ORDER BY tz RANGE BETWEEN '1 day' PRECEDING AND CURRENT ROW), "
     "sum(id) OVER (ORDER BY tz RANGE BETWEEN '23 hours' PRECEDING AND '1 mon' FOLLOWING) "
     "FROM d ORDER BY id",
     [(1, 1, 13), (2, 2, 12), (3, 1, 3), (4, 3, 12), (5, 1, 5), (6, 2, 12)]),
]


def test_range_offsets_on_timestamps_and_dates(db):
    for s in DT_SETUP:
        db.execute(s)
    for sql, want in DT_CASES:
        assert [tuple(r) for r in db.execute(sql).rows] == want, sql
    with pytest.raises(errors.DataError) as ei:
        db.execute("SELECT count(*) OVER (ORDER BY t RANGE '-1 day' PRECEDING) FROM d")
    assert ei.value.sqlstate == "22013"


def test_frame_sums_are_each_frames_own(db):
    """A huge value in one partition does not disturb another's sums (doubles); bigint sums
    are exact and out of range only when a frame's own sum is."""
    db.execute("CREATE TABLE big (id int, p int, y double precision, v bigint)")
    db.execute("INSERT INTO big VALUES (1, 1, 1e20, 5000000000000000000), "
               "(2, 1, 1, 5000000000000000000), (3, 2, 0.25, 5000000000000000000), "
               "(4, 2, 0.5, -1), (5, 2, 0.125, 3)")
    got = db.execute("SELECT id, sum(y) OVER (PARTITION BY p ORDER BY id), sum(v) OVER "
                     "(PARTITION BY p ORDER BY id ROWS CURRENT ROW) FROM big ORDER BY id").rows
    assert [tuple(r) for r in got] == [(1, 1e20, 5 * 10 ** 18), (2, 1e20 + 1, 5 * 10 ** 18),
                                       (3, 0.25, 5 * 10 ** 18), (4, 0.75, -1), (5, 0.875, 3)]
    got = db.execute("SELECT id, sum(v) OVER (PARTITION BY p ORDER BY id ROWS 1 PRECEDING) "
                     "FROM big WHERE p = 2 ORDER BY id").rows
    assert [tuple(r) for r in got] == [(3, 5 * 10 ** 18), (4, 5 * 10 ** 18 - 1), (5, 2)]
    with pytest.raises(errors.NumericValueOutOfRange):
        db.execute("SELECT sum(v) OVER (PARTITION BY p ORDER BY id) FROM big")


@pytest.mark.parametrize("over,words", [
    ("(w)", 'cannot copy window "w" because it has a frame clause'),
    ("(w ROWS 2 PRECEDING)", 'cannot copy window "w" because it has a frame clause'),
    ("(w2 ORDER BY id)", 'cannot override ORDER BY clause of window "w2"'),
    ("(w2 PARTITION BY id)", 'cannot override PARTITION BY clause of window "w2"'),
])
def test_named_window_copy_rules(db, over, words):
    with pytest.raises(errors.ProgrammingError) as ei:
        db.execute(f"SELECT sum(x) OVER {over} FROM w WINDOW w AS (ORDER BY x ROWS 1 PRECEDING), "
                   "w2 AS (ORDER BY x)")
    assert ei.value.sqlstate == "42P20" and words in str(ei.value)
    got = db.execute("SELECT id, sum(x) OVER w, sum(x) OVER (w3 ORDER BY id ROWS 1 PRECEDING) "
                     "FROM w WINDOW w AS (ORDER BY id ROWS 1 PRECEDING), w3 AS (PARTITION BY "
                     "x IS NULL) ORDER BY id").rows
    assert [tuple(r) for r in got] == [(1, 1, 1), (2, 2, 2), (3, 1, None), (4, 3, 4)]


def test_range_offsets_on_time(db):
    """time keys: the interval's time part only, no wrap at midnight (PostgreSQL 15's
    answer)."""
    db.execute("CREATE TABLE tt (id int, t time)")
    db.execute("INSERT INTO tt VALUES (1, '10:00'), (2, '10:30'), (3, NULL), (4, '23:50'), "
               "(5, '00:05'), (6, '11:00')")
    got = db.execute("SELECT id, count(*) OVER (ORDER BY t RANGE BETWEEN '30 minutes' PRECEDING "
                     "AND '1 day 10 minutes' FOLLOWING), sum(id) OVER (ORDER BY t DESC RANGE "
                     "BETWEEN '1 hour' PRECEDING AND CURRENT ROW) FROM tt ORDER BY id").rows
    assert [tuple(r) for r in got] == [(1, 1, 9), (2, 2, 8), (3, 1, 3), (4, 1, 4), (5, 1, 5),
                                       (6, 2, 6)]


def test_range_offset_frames_reach_nulls_through_an_unbounded_end(db):
    """A non-NULL row's RANGE offset frame takes in the NULL rows when its other end is
    unbounded on their side, and not when both ends are offsets (PostgreSQL 15's answer;
    the case hypothesis found)."""
    db.execute("CREATE TABLE fz (id int, x int)")
    db.execute("INSERT INTO fz VALUES (0, NULL), (1, 0)")
    got = db.execute(
        "SELECT id, count(*) OVER (ORDER BY x NULLS LAST RANGE BETWEEN 1 FOLLOWING AND "
        "UNBOUNDED FOLLOWING), count(*) OVER (ORDER BY x NULLS FIRST RANGE BETWEEN UNBOUNDED "
        "PRECEDING AND 1 PRECEDING), count(*) OVER (ORDER BY x DESC NULLS LAST RANGE BETWEEN "
        "5 FOLLOWING AND UNBOUNDED FOLLOWING), count(*) OVER (ORDER BY x NULLS LAST RANGE "
        "BETWEEN 1 FOLLOWING AND 2 FOLLOWING), count(*) OVER (ORDER BY x DESC NULLS FIRST "
        "RANGE BETWEEN UNBOUNDED PRECEDING AND 1 FOLLOWING) FROM fz ORDER BY id").rows
    assert [tuple(r) for r in got] == [(0, 1, 1, 1, 1, 1), (1, 1, 1, 1, 0, 2)]
