"""Bulk loading (minidb/sql/bulkload.py): many-row literal VALUES, executemany of one
INSERT and COPY FROM store exactly what the row-at-a-time path stores, check the same
constraints, and leave nothing behind when they fail.

The thresholds (``BULK_INSERT_MIN_ROWS``, ``VALUES_MIN_ROWS``) are lowered here so that
small loads take the bulk paths: the heap's ``heap_bulk_insert`` and the B-tree's
``insert_entries``."""

from __future__ import annotations

import datetime
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minidb
import minidb.dbapi as dbapi
import minidb.errors as errors
import minidb.exec.modify as modify
import minidb.index.insert as ixinsert
import minidb.sql.bulkload as bulkload
import minidb.sql.engine as engine_mod
from minidb.heap.check import check_heap
from minidb.index import check_btree
from minidb.storage import page as pg
from minidb.storage.bufmgr import SHARE
from minidb.storage.htup import HEAP_HASNULL, HEAP_HASVARWIDTH

COLUMNS = [("i", "integer"), ("b", "bigint"), ("d", "double precision"), ("f", "boolean"),
           ("ts", "timestamp"), ("t", "text"), ("v", "varchar(8)"), ("c", "char(5)")]
_ALPHABET = "ab 'é\\\t\nZ0"


@pytest.fixture
def lowered(monkeypatch):
    monkeypatch.setattr(modify, "BULK_INSERT_MIN_ROWS", 1)
    monkeypatch.setattr(bulkload, "VALUES_MIN_ROWS", 2)
    monkeypatch.setattr(engine_mod, "_BULK_VALUES_MIN_CHARS", 0)


@pytest.fixture
def conn(tmp_path, lowered):
    c = minidb.connect(str(tmp_path / "db"), max_worker_processes=0)
    try:
        yield c
    finally:
        c.close()


def _nullable(s):
    return st.none() | s


_VALUE = {
    "integer": st.integers(-2**31, 2**31 - 1),
    "bigint": st.integers(-2**63, 2**63 - 1),
    # not -0.0: the literal -0.0 is a numeric, which has no negative zero (stored as 0, as
    # PostgreSQL stores it), while a float parameter -0.0 stays -0.0 - the reference path
    # (literals) and executemany / COPY rightly differ there
    "double precision": st.floats(allow_nan=False, allow_infinity=False).map(
        lambda x: x + 0.0),
    "boolean": st.booleans(),
    "timestamp": st.datetimes(datetime.datetime(1900, 1, 1), datetime.datetime(2200, 1, 1)),
    "text": st.text(_ALPHABET, max_size=12),
    "varchar(8)": st.text(_ALPHABET, max_size=8),
    "char(5)": st.text(_ALPHABET.replace(" ", ""), max_size=5),
}
ROW = st.tuples(*[_nullable(_VALUE[t]) for _, t in COLUMNS])


def _literal(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, datetime.datetime):
        v = v.isoformat(sep=" ")
    return "'" + v.replace("'", "''") + "'"


def _create(cur, name, pk=True):
    cols = ", ".join(f"{n} {t}" for n, t in COLUMNS)
    cur.execute(f"create table {name} (id integer{' primary key' if pk else ''}, {cols})")


def stored(conn, name) -> list:
    """Every tuple's stored form (flags, null bitmap, data), sorted: what a load wrote."""
    inst = conn._instance
    out = []
    with inst.connect() as b:
        rel = inst.catalog.heap_rel(name)
        bm = b.bufmgr
        for blk in range(bm.smgr.nblocks(rel.relfilenode)):
            buf = bm.pin(rel.relfilenode, blk)
            try:
                bm.lock(buf, SHARE)
                page = bm.page(buf).copy()
                bm.unlock(buf)
            finally:
                bm.unpin(buf)
            for off in range(1, pg.max_offset(page) + 1):
                if pg.get_item_id(page, off)[1] != pg.LP_NORMAL:
                    continue
                t = bytes(pg.get_item(page, off))
                mask = struct.unpack_from("<H", t, 32)[0] & (HEAP_HASNULL | HEAP_HASVARWIDTH)
                out.append((mask, t[34:]))
    return sorted(out)


def _rows(cur, name):
    cur.execute(f"select * from {name} order by 1")
    return cur.fetchall()


_SEQ = [0]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rows=st.lists(ROW, min_size=2, max_size=12))
def test_bulk_paths_store_what_the_row_path_stores(conn, rows):
    _SEQ[0] += 1
    s = _SEQ[0]
    conn.rollback()         # a failed example must not fail the next one
    cur = conn.cursor()
    names = {k: f"{k}{s}" for k in ("one", "vals", "many", "loop", "copy")}
    for n in names.values():
        _create(cur, n)
    conn.commit()
    full = [(k,) + r for k, r in enumerate(rows)]
    # the reference: one single-row INSERT with literals per row (the general path)
    for r in full:
        cur.execute(f"insert into {names['one']} values ({', '.join(map(_literal, r))})")
    # many-row literal VALUES, without the general parser
    eng = conn._engine
    parses = eng.counters["parses"]
    cur.execute(f"insert into {names['vals']} values "
                + ", ".join("(" + ", ".join(map(_literal, r)) + ")" for r in full))
    assert cur.rowcount == len(full)
    # the VALUES statement did not reach the parser unless it had to (backslashes)
    if not any("\\" in x for r in rows for x in r if isinstance(x, str)):
        assert eng.counters["parses"] == parses
    # executemany (bulk) and the one-execution-per-row loop it replaces
    cur.executemany(f"insert into {names['many']} values ({', '.join('?' * 9)})", full)
    assert cur.rowcount == len(full)
    old = dbapi.BULK_EXECUTEMANY_MIN_ROWS
    dbapi.BULK_EXECUTEMANY_MIN_ROWS = 10**9
    try:
        cur.executemany(f"insert into {names['loop']} values ({', '.join('?' * 9)})", full)
    finally:
        dbapi.BULK_EXECUTEMANY_MIN_ROWS = old
    # COPY FROM STDIN
    with cur.copy(f"copy {names['copy']} from stdin") as cp:
        for r in full:
            cp.write_row(r)
    conn.commit()
    ref_rows = _rows(cur, names["one"])
    ref = stored(conn, names["one"])
    for k in ("vals", "many", "loop", "copy"):
        assert _rows(cur, names[k]) == ref_rows, k
        assert stored(conn, names[k]) == ref, k


def test_large_values_list_takes_the_fast_path(conn):
    cur = conn.cursor()
    cur.execute("create table t (a int primary key, b text, c double precision DEFAULT 2.5)")
    eng = conn._engine
    parses = eng.counters["parses"]
    cur.execute("insert into t (a, b) values " + ", ".join(f"({i}, 'r{i}')" for i in range(3000)))
    assert eng.counters["parses"] == parses
    assert cur.rowcount == 3000
    cur.execute("select count(*), sum(a), min(b), max(c) from t")
    assert cur.fetchall() == [(3000, 3000 * 2999 // 2, "r0", 2.5)]
    conn.commit()
    with conn._instance.connect() as b:
        check_heap(b, conn._instance.catalog.heap_rel("t"))
        check_btree(b, "t_pkey")


def test_preparing_a_large_values_list_runs_nothing(conn):
    """Engine.prepare only prepares: a many-row VALUES runs at execute (the protocol's
    Parse must not load the rows)."""
    cur = conn.cursor()
    cur.execute("create table t (a int primary key, b text)")
    sql = "insert into t values " + ", ".join(f"({i}, 'r{i}')" for i in range(100))
    prep = conn._engine.prepare(sql)
    cur.execute("select count(*) from t")
    assert cur.fetchall() == [(0,)]
    assert prep.execute().rowcount == 100
    cur.execute("select count(*) from t")
    assert cur.fetchall() == [(100,)]


def test_values_that_need_the_general_path_still_work(conn):
    cur = conn.cursor()
    cur.execute("create table t (a int, b text)")
    eng = conn._engine
    parses = eng.counters["parses"]
    cur.execute("insert into t values (1 + 1, 'x'), (3, upper('y')), (DEFAULT, 'z')")
    assert eng.counters["parses"] == parses + 1
    cur.execute("insert into t values (1.5, 'x'), (-2, 'q')")   # a rounding cast: general
    cur.execute("select a, b from t order by b, a")
    assert cur.fetchall() == [(3, "Y"), (-2, "q"), (2, "x"), (2, "x"), (None, "z")]


@pytest.mark.parametrize("how", ["values", "executemany", "copy"])
def test_unique_violation_names_the_key_and_leaves_nothing(conn, how):
    cur = conn.cursor()
    cur.execute("create table t (a int primary key, b text)")
    cur.execute("insert into t values (5, 'old')")
    conn.commit()
    rows = [(i, f"n{i}") for i in range(100, 140)] + [(5, "dup")]
    with pytest.raises(errors.UniqueViolation) as ei:
        if how == "values":
            cur.execute("insert into t values " + ", ".join(f"({a}, '{b}')" for a, b in rows))
        elif how == "executemany":
            cur.executemany("insert into t values (?, ?)", rows)
        else:
            with cur.copy("copy t from stdin") as cp:
                for r in rows:
                    cp.write_row(r)
    assert ei.value.sqlstate == "23505"
    assert "(a)=(5)" in str(ei.value)
    conn.rollback()
    assert _rows(cur, "t") == [(5, "old")]
    # a duplicate inside the load itself
    with pytest.raises(errors.UniqueViolation) as ei:
        cur.executemany("insert into t values (?, ?)", [(7, "x"), (8, "y"), (7, "z")])
    assert "(a)=(7)" in str(ei.value)
    conn.rollback()
    assert _rows(cur, "t") == [(5, "old")]
    with conn._instance.connect() as b:
        check_heap(b, conn._instance.catalog.heap_rel("t"))
        check_btree(b, "t_pkey")


@pytest.mark.parametrize("how", ["values", "executemany", "copy"])
def test_constraints_are_checked(conn, how):
    cur = conn.cursor()
    cur.execute("create table t (a int not null, b varchar(3))")
    conn.commit()

    def load(rows):
        if how == "values":
            cur.execute("insert into t values "
                        + ", ".join("(" + ", ".join(map(_literal, r)) + ")" for r in rows))
        elif how == "executemany":
            cur.executemany("insert into t values (?, ?)", rows)
        else:
            with cur.copy("copy t from stdin") as cp:
                for r in rows:
                    cp.write_row(r)

    for rows, exc in ([[(1, "a"), (None, "b")], errors.NotNullViolation],
                      [[(1, "a"), (2, "long")], errors.StringDataRightTruncation],
                      [[(1, "a"), (2**40, "b")], errors.NumericValueOutOfRange]):
        with pytest.raises(exc):
            load(rows)
        conn.rollback()
        assert _rows(cur, "t") == []


def test_rollback_of_a_bulk_load_leaves_nothing_visible(conn):
    cur = conn.cursor()
    cur.execute("create table t (a int primary key, b text)")
    conn.commit()
    cur.executemany("insert into t values (?, ?)", [(i, "x") for i in range(500)])
    cur.execute("insert into t values " + ", ".join(f"({i}, 'v')" for i in range(500, 900)))
    with cur.copy("copy t from stdin") as cp:
        cp.write("".join(f"{i}\tc\n" for i in range(900, 1200)))
    cur.execute("select count(*) from t")
    assert cur.fetchall() == [(1200,)]
    conn.rollback()
    cur.execute("select count(*) from t")
    assert cur.fetchall() == [(0,)]
    cur.execute("select a from t where a = 42")
    assert cur.fetchall() == []
    conn.commit()
    with conn._instance.connect() as b:
        check_heap(b, conn._instance.catalog.heap_rel("t"))
        check_btree(b, "t_pkey")


def test_autocommit_executemany_is_one_statement(conn):
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("create table t (a int primary key)")
    with pytest.raises(errors.UniqueViolation):
        cur.executemany("insert into t values (?)", [(1,), (2,), (2,)])
    assert _rows(cur, "t") == []
    cur.executemany("insert into t values (?)", [(1,), (2,)])
    assert _rows(cur, "t") == [(1,), (2,)]


def test_index_entries_go_in_a_page_at_a_time(conn, monkeypatch):
    calls = []
    real = ixinsert.insert_entries

    def spy(*a, **k):
        n = real(*a, **k)
        calls.append((len(a[3]), n))
        return n
    monkeypatch.setattr("minidb.index.insert_entries", spy)
    cur = conn.cursor()
    cur.execute("create table t (a int primary key, b int)")
    cur.executemany("insert into t values (?, ?)", [(i, i) for i in range(5000)])
    # out of order, and between existing keys
    cur.executemany("insert into t values (?, ?)",
                    [(i, i) for i in range(-1, -3000, -2)] + [(10**6 + i, 0) for i in range(50)])
    conn.commit()
    entries, batches = calls[0]
    assert entries == 5000 and batches < 5000 / 50
    assert calls[1][1] < calls[1][0] / 10
    cur.execute("select count(*) from t where a < 0")
    assert cur.fetchall() == [(1500,)]
    with conn._instance.connect() as b:
        assert check_btree(b, "t_pkey")


def test_copy_text_escapes_nulls_and_errors_name_the_line(conn):
    cur = conn.cursor()
    cur.execute("create table t (a int, b text)")
    with cur.copy("copy t from stdin") as cp:
        cp.write("1\ta\\tb\n2\t\\N\n\\N\tc\\\\d\n")
    cur.execute("select a, b from t order by b nulls first")
    assert cur.fetchall() == [(2, None), (1, "a\tb"), (None, "c\\d")]
    with pytest.raises(errors.InvalidTextRepresentation) as ei:
        with cur.copy("copy t from stdin") as cp:
            cp.write("".join(f"{i}\tx\n" for i in range(10)) + "oops\ty\n")
    assert "line 11" in str(ei.value)
    conn.rollback()


def test_negative_zero_literal_is_a_numeric_zero(conn):
    """-0.0 written as a literal is numeric, which has no -0: both the general path and the
    many-row VALUES path store +0.0 in a double column (PostgreSQL does the same); a float
    parameter -0.0 keeps its sign."""
    import math
    cur = conn.cursor()
    cur.execute("create table z (k int, f double precision)")
    cur.execute("insert into z values (0, -0.0)")
    cur.execute("insert into z values " + ", ".join(f"({i}, -0.0)" for i in range(1, 41)))
    cur.execute("insert into z values (?, ?)", (99, -0.0))
    cur.execute("select k, f from z order by k")
    got = {k: math.copysign(1.0, f) for k, f in cur.fetchall()}
    assert all(got[k] == 1.0 for k in range(41)) and got[99] == -1.0


# -- the byte scan of a VALUES list against the token split -----------------------------------
_FIELD = st.sampled_from([
    "0", "7", "-12", "007", "123456789012345678", "1234567890123456789", "-98765432109876543210",
    "-0", "1.5", "-2.", "3e5",
    "1.e5", "2E-3", "-.5", ".5", "1e", "1+2", "- 5", "+5", "0x10", "1_0", "NULL", "null",
    "TRUE", "false", "abc_d", "''", "'x'", "'it''s'", "'a, (b); c'", "'--not a comment'",
    "'/*'", "E'x'", "'a'::text", "'a' 'b'", "'a'b'", "'unterminated", "(1)", "f(1)", "DEFAULT",
    "'é'", "'\\'", "1 -- c\n", "/* c */ 1", "", " ", "'\t'", "'\x1c'", "\x1c1",
])
_GAP = st.sampled_from(["", " ", "  ", "\n", "\t", "\r\n", "\x0b", "\x1c", "\x01", "x", ";"])


_PLAIN_FIELD = st.sampled_from(["0", "-12", "99", "'x'", "'it''s'", "NULL", "'a, (b)'", "1.5"])
_PLAIN_GAP = st.sampled_from(["", " ", "\n"])


@st.composite
def _values_text(draw):
    """(plain, text): a list of literal rows; unless plain, each field, gap and the tail is
    now and then replaced by something odd (most texts then differ from a plain one in one
    or two places, where a wrong answer of the byte scan would show)."""
    plain = draw(st.booleans())

    def pick(usual, odd):
        if plain or draw(st.integers(0, 3)):
            return draw(usual)
        return draw(odd)

    width = draw(st.integers(1, 4))
    rows = []
    for _ in range(draw(st.integers(1, 5))):
        cells = [pick(_PLAIN_GAP, _GAP) + pick(_PLAIN_FIELD, _FIELD) + pick(_PLAIN_GAP, _GAP)
                 for _ in range(width)]
        if not plain and draw(st.integers(0, 9)) == 0:
            cells = cells[:-1] or cells     # a short row
        rows.append(pick(st.just("("), st.sampled_from(["", "((", "x("])) + ",".join(cells)
                    + pick(st.just(")"), st.sampled_from(["", "))", ")x"])))
    text = "".join(r + (pick(_PLAIN_GAP, _GAP) + pick(st.just(","), st.sampled_from(["", ",,"]))
                        if i < len(rows) - 1 else "") for i, r in enumerate(rows))
    return plain, text + pick(st.sampled_from(["", ";", " ; "]), st.sampled_from([" junk", ";;"]))


def _same(col, tokens) -> bool:
    """A column of the byte scan is the token split's column."""
    if isinstance(col, bulkload._Strings):
        return [f"'{x}'" for x in col] == tokens
    if isinstance(col, list):
        return col == tokens
    return col.tolist() == [int(x) for x in tokens]


def _token_split(text):
    toks = bulkload._TOKEN.findall(text)
    if toks and toks[-1] == ";":
        toks.pop()
    try:
        return bulkload._value_columns(toks)
    except bulkload._Fallback:
        return None


@settings(max_examples=300, deadline=None)
@given(case=_values_text())
def test_byte_scan_agrees_with_the_token_split(case):
    """Wherever the byte scan answers, its rows, width and each column's literals are the
    token split's (an integer column as the token split's integers); on plain lists of
    literals it always answers, so the fast path does not quietly fall back."""
    plain, text = case
    got = bulkload._split_values(text, 0)
    if plain:
        assert got is not None
    if got is None:
        return
    want = _token_split(text)
    assert want is not None
    assert got[:2] == want[:2]
    for mine, theirs in zip(got[2], want[2]):
        assert _same(mine, theirs)


@pytest.mark.parametrize("odd", [x for x in _FIELD.elements] + [
    "1)", "(1", "1,", "'a'||'b'", "1e5e5", "1.5.", "-", "--", "1-", "'\\''", "\"q\"", "$$x$$"])
def test_byte_scan_declines_what_the_token_split_declines(odd):
    """Each odd field at each place of a list: the byte scan gives the token split's answer
    or none."""
    for text in (f"({odd})", f"(1, {odd})", f"({odd}, 'x'), (2, 'y')", f"(1, 'x'), (2, {odd})",
                 f"(1){odd}", f"(1),{odd}(2)", f"(1), (2){odd}"):
        got = bulkload._split_values(text, 0)
        if got is None:
            continue
        want = _token_split(text)
        assert want is not None, text
        assert got[:2] == want[:2], text
        for mine, theirs in zip(got[2], want[2]):
            assert _same(mine, theirs), text
