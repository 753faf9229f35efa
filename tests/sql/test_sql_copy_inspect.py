"""COPY FROM / TO a file (csv and text formats, NULLs, quoting, errors naming the line and
leaving the table as it was) and the inspection API the REPL formats."""

from __future__ import annotations

import datetime as dt

import pytest

from minidb import errors
from minidb.sql import inspect as I


@pytest.fixture
def t(db):
    db.x("CREATE TABLE t (id int PRIMARY KEY, name text, score double precision, "
         "at timestamp, ok boolean)")
    return db


ROWS = [(1, "plain", 1.5, dt.datetime(2020, 1, 2, 3, 4, 5), True),
        (2, "with, comma", None, None, False),
        (3, 'quote "q"', -2.0, dt.datetime(1999, 12, 31), None),
        (4, "", 0.0, None, True),
        (5, None, 1e20, None, None),
        (6, "tab\there\nnewline", 3.25, None, False)]


@pytest.mark.parametrize("fmt", ["csv", "text"])
def test_copy_round_trip(t, tmp_path, fmt):
    db = t
    for r in ROWS:
        db.x("INSERT INTO t VALUES (?, ?, ?, ?, ?)", *r)
    path = tmp_path / f"out.{fmt}"
    opts = "(FORMAT csv, HEADER)" if fmt == "csv" else ""
    r = db.x(f"COPY t TO '{path}' {opts}")
    assert r.status == "COPY 6" and r.rowcount == 6
    db.x("CREATE TABLE t2 (id int PRIMARY KEY, name text, score double precision, "
         "at timestamp, ok boolean)")
    assert db.x(f"COPY t2 FROM '{path}' {opts}").status == "COPY 6"
    assert sorted(db.rows("SELECT * FROM t2"), key=lambda r: r[0]) == ROWS


def test_copy_from_csv_details(t, tmp_path):
    db = t
    p = tmp_path / "in.csv"
    p.write_text('id,name\n10,"multi\nline"\n11,\n12,""\n', encoding="utf-8")
    assert db.x(f"COPY t (id, name) FROM '{p}' WITH (FORMAT csv, HEADER true)").rowcount == 3
    assert db.rows("SELECT id, name FROM t ORDER BY id") == \
        [(10, "multi\nline"), (11, None), (12, "")]
    p2 = tmp_path / "semi.csv"
    p2.write_text("13;x\n", encoding="utf-8")
    db.x(f"COPY t (id, name) FROM '{p2}' WITH (FORMAT csv, DELIMITER ';')")
    assert db.one("SELECT name FROM t WHERE id = 13") == "x"


def test_copy_errors_leave_table_unchanged(t, tmp_path, dumper):
    db = t
    db.x("INSERT INTO t (id) VALUES (1)")
    before = dumper(db)
    bad = tmp_path / "bad.csv"
    bad.write_text("2,a\n3,b\nx,c\n", encoding="utf-8")
    with pytest.raises(errors.InvalidTextRepresentation) as ei:
        db.x(f"COPY t (id, name) FROM '{bad}' (FORMAT csv)")
    assert "line 3" in str(ei.value) and "column id" in str(ei.value)
    assert dumper(db) == before
    dup = tmp_path / "dup.csv"
    dup.write_text("2,a\n1,b\n", encoding="utf-8")
    with pytest.raises(errors.UniqueViolation):
        db.x(f"COPY t (id, name) FROM '{dup}' (FORMAT csv)")
    assert dumper(db) == before
    short = tmp_path / "short.csv"
    short.write_text("2\n", encoding="utf-8")
    with pytest.raises(errors.BadCopyFileFormat):
        db.x(f"COPY t (id, name) FROM '{short}' (FORMAT csv)")
    with pytest.raises(errors.IOError_):
        db.x(f"COPY t FROM '{tmp_path / 'missing.csv'}'")
    with pytest.raises(errors.NotSupportedError):
        db.x("COPY t FROM STDIN")
    assert dumper(db) == before


def test_inspection_api(t):
    db = t
    for i in range(100):
        db.x("INSERT INTO t (id, name) VALUES (?, ?)", i, f"n{i}")
    db.x("UPDATE t SET name = 'changed' WHERE id = 5")
    db.x("DELETE FROM t WHERE id = 6")
    tables = I.describe_tables(db.session)
    assert tables[0][0] == "t" and tables[0][2] >= 1
    d = I.describe_table(db.session, "t")
    assert d["columns"][0] == ("id", "integer", True, None)
    assert d["columns"][3][1] == "timestamp without time zone"
    assert d["indexes"] == [("t_pkey", ["id"], True, True)]
    assert I.list_indexes(db.session)[0][:5] == ("t_pkey", "t", ["id"], True, True)
    header, items = I.page_dump(db.session, "t", 0)
    assert header["block"] == 0 and header["lower"] < header["upper"]
    assert header["prune_xid"] > 0
    normal = [x for x in items if x["flags"] == "NORMAL"]
    assert normal and {"xmin", "xmax", "ctid", "infomask"} <= set(normal[0])
    deleted = [x for x in normal if x["xmax"] and "XMAX_INVALID" not in x["infomask"]]
    assert deleted                    # old versions (pruning may already have removed some)
    with pytest.raises(errors.InvalidParameterValue):
        I.page_dump(db.session, "t", 999)
    text = I.btree_dump(db.session, "t_pkey")
    assert "t_pkey" in text
    st = I.stats(db.session, engine=db.engine)
    row = st["tables"][0]
    assert row["relname"] == "t" and row["n_tup_ins"] >= 100 and row["n_tup_del"] >= 1
    assert "buffers_hit" in st["buffers"] and "plan_cache_hits" in st["plan_cache"]
    with pytest.raises(errors.UndefinedTable):
        I.describe_table(db.session, "nope")
    with pytest.raises(errors.UndefinedObject):
        I.btree_dump(db.session, "nope")
