"""Sequences, serial and identity columns (minidb.catalog.sequence, minidb.sql.sequences)."""

from __future__ import annotations

import random

import pytest

import minidb.dbapi as dbapi
import minidb.errors as errors
from minidb.catalog import check_catalog
from minidb.catalog.sequence import SEQ_LOG_VALS
from tests.wal.crashkit import abandon


def test_nextval_currval_setval_lastval(db):
    db.x("CREATE SEQUENCE s")
    assert db.rows("SELECT nextval('s'), nextval('s')") == [(1, 2)]
    assert db.rows("SELECT currval('s'), lastval()") == [(2, 2)]
    assert db.one("SELECT setval('s', 100)") == 100
    assert db.one("SELECT nextval('s')") == 101
    assert db.one("SELECT setval('s', 5, false)") == 5
    assert db.one("SELECT nextval('s')") == 5
    assert db.one("SELECT nextval('public.s'::regclass)") == 6
    with pytest.raises(errors.NumericValueOutOfRange):
        db.x("SELECT setval('s', 0)")


def test_errors_name_the_sequence(db, db2):
    db.x("CREATE SEQUENCE s")
    db.x("CREATE TABLE t (a int)")
    with pytest.raises(errors.ObjectNotInPrerequisiteState, match="not yet defined"):
        db.x("SELECT currval('s')")
    with pytest.raises(errors.ObjectNotInPrerequisiteState, match="lastval"):
        db2.x("SELECT lastval()")
    with pytest.raises(errors.WrongObjectType) as e:
        db.x("SELECT nextval('t')")
    assert e.value.sqlstate == "42809"
    with pytest.raises(errors.UndefinedTable):
        db.x("SELECT nextval('nope')")
    with pytest.raises(errors.DuplicateTable):
        db.x("CREATE SEQUENCE t")
    assert "skipping" in db.x("CREATE SEQUENCE IF NOT EXISTS s").messages[0]
    with pytest.raises(errors.WrongObjectType):
        db.x("DROP SEQUENCE t")


def test_options_limits_and_cycle(db):
    db.x("CREATE SEQUENCE d INCREMENT BY -1 MINVALUE -3 MAXVALUE 0 START 0")
    assert [r[0] for r in db.rows("SELECT nextval('d') FROM generate_series(1, 4)")] == \
        [0, -1, -2, -3]
    with pytest.raises(errors.SequenceGeneratorLimitExceeded) as e:
        db.x("SELECT nextval('d')")
    assert e.value.sqlstate == "2200H" and "(-3)" in str(e.value)
    db.x("CREATE SEQUENCE c MAXVALUE 3 START WITH 2 CYCLE")
    assert [r[0] for r in db.rows("SELECT nextval('c') FROM generate_series(1, 5)")] == \
        [2, 3, 1, 2, 3]
    db.x("CREATE SEQUENCE i AS smallint INCREMENT 10")
    db.x("SELECT setval('i', 32760)")
    with pytest.raises(errors.SequenceGeneratorLimitExceeded):
        db.x("SELECT nextval('i')")
    db.x("ALTER SEQUENCE i RESTART WITH 7")
    assert db.one("SELECT nextval('i')") == 7
    db.x("ALTER SEQUENCE i RESTART")
    assert db.one("SELECT nextval('i')") == 1
    with pytest.raises(errors.InvalidParameterValue):
        db.x("CREATE SEQUENCE bad INCREMENT 0")
    with pytest.raises(errors.InvalidParameterValue):
        db.x("CREATE SEQUENCE bad MINVALUE 5 MAXVALUE 2")
    with pytest.raises(errors.InvalidParameterValue):
        db.x("CREATE SEQUENCE bad START 0")


def test_nextval_is_not_rolled_back_and_ddl_is(db, db2):
    db.x("CREATE SEQUENCE s")
    db.x("BEGIN")
    assert db.one("SELECT nextval('s')") == 1
    db.x("ROLLBACK")
    assert db.one("SELECT nextval('s')") == 2
    # two sessions never get the same value
    got = [db.one("SELECT nextval('s')") if k % 2 else db2.one("SELECT nextval('s')")
           for k in range(10)]
    assert sorted(got) == list(range(3, 13))
    db.x("BEGIN")
    db.x("CREATE SEQUENCE r")
    db.x("SELECT nextval('r')")
    db.x("ROLLBACK")
    assert db.rows("SELECT relname FROM pg_class WHERE relkind = 'S'") == [("s",)]
    db.x("BEGIN")
    db.x("DROP SEQUENCE s")
    db.x("ROLLBACK")
    assert db.one("SELECT nextval('s')") == 13
    db.x("DROP SEQUENCE s")
    assert db.rows("SELECT relname FROM pg_class WHERE relkind = 'S'") == []
    assert "skipping" in db.x("DROP SEQUENCE IF EXISTS s").messages[0]
    with db.inst.connect() as b:
        assert check_catalog(b) == []


def test_serial_columns(db):
    db.x("CREATE TABLE t (id serial PRIMARY KEY, big bigserial, small smallserial, v text)")
    db.x("INSERT INTO t (v) VALUES ('a'), ('b')")
    db.x("INSERT INTO t (v) SELECT 'x' || g FROM generate_series(1, 3) g")
    db.x("INSERT INTO t (id, v) VALUES (100, 'given')")
    db.x("INSERT INTO t VALUES (DEFAULT, DEFAULT, DEFAULT, 'defaults')")
    rows = db.rows("SELECT id, big, small FROM t ORDER BY big")
    assert [r[0] for r in rows] == [1, 2, 3, 4, 5, 100, 6]
    assert [r[1] for r in rows] == [1, 2, 3, 4, 5, 6, 7]
    assert db.rows("SELECT attname, atttypname, attnotnull, attdefault FROM pg_attribute "
                   "WHERE attrelid = 't'::regclass AND attnum <= 3 ORDER BY attnum") == [
        ("id", "integer", True, "nextval('t_id_seq')"),
        ("big", "bigint", True, "nextval('t_big_seq')"),
        ("small", "smallint", True, "nextval('t_small_seq')")]
    assert db.one("SELECT currval('t_id_seq')") == 6
    db.x("DROP TABLE t")
    assert db.rows("SELECT relname FROM pg_class WHERE relkind = 'S'") == []


def test_serial_bulk_paths_draw_one_value_per_row(db):
    db.x("CREATE TABLE t (id serial, v int)")
    db.x("INSERT INTO t (v) SELECT g FROM generate_series(1, 2500) g")
    db.x("INSERT INTO t (v) VALUES " + ",".join(f"({i})" for i in range(2100)))
    db.engine.executemany("INSERT INTO t (v) VALUES (?)", [(i,) for i in range(2050)])
    assert db.rows("SELECT count(*), count(DISTINCT id), min(id), max(id) FROM t") == \
        [(6650, 6650, 1, 6650)]


def test_identity_columns(db):
    db.x("CREATE TABLE g (id int GENERATED ALWAYS AS IDENTITY, v int)")
    db.x("CREATE TABLE h (id bigint GENERATED BY DEFAULT AS IDENTITY "
         "(START WITH 10 INCREMENT BY 5), v int)")
    db.x("INSERT INTO g (v) VALUES (1)")
    with pytest.raises(errors.GeneratedAlways) as e:
        db.x("INSERT INTO g (id, v) VALUES (10, 2)")
    assert e.value.sqlstate == "428C9"
    with pytest.raises(errors.GeneratedAlways):
        db.x("INSERT INTO g SELECT 5, 5")
    db.x("INSERT INTO g (id, v) OVERRIDING SYSTEM VALUE VALUES (10, 2)")
    db.x("INSERT INTO g (id, v) OVERRIDING USER VALUE VALUES (10, 3)")
    db.x("INSERT INTO g (id, v) VALUES (DEFAULT, 4)")
    with pytest.raises(errors.GeneratedAlways, match="only be updated to DEFAULT"):
        db.x("UPDATE g SET id = 5")
    db.x("UPDATE g SET id = DEFAULT WHERE v = 4")
    assert db.rows("SELECT id, v FROM g ORDER BY v") == [(1, 1), (10, 2), (2, 3), (4, 4)]
    db.x("INSERT INTO h (v) VALUES (1), (2)")
    db.x("INSERT INTO h (id, v) VALUES (1, 3)")   # BY DEFAULT takes a value
    assert db.rows("SELECT id, v FROM h ORDER BY v") == [(10, 1), (15, 2), (1, 3)]
    assert db.rows("SELECT attname, attidentity FROM pg_attribute WHERE attrelid = "
                   "'g'::regclass OR attrelid = 'h'::regclass ORDER BY attrelid, attnum") == [
        ("id", "a"), ("v", ""), ("id", "d"), ("v", "")]
    # the identity kind survives the catalog cache being rebuilt from the rows
    db.inst.catalog_cache.bump()
    with pytest.raises(errors.GeneratedAlways):
        db.x("INSERT INTO g (id, v) VALUES (10, 2)")


def test_logging_prefetches_values(db):
    """One Sequence LOG record per SEQ_LOG_VALS calls (plus the first)."""
    db.x("CREATE SEQUENCE s")
    wal = db.session.backend.wal
    before = wal.records
    n = 3 * SEQ_LOG_VALS
    db.x(f"SELECT nextval('s') FROM generate_series(1, {n})")
    logged = wal.records - before
    assert 3 <= logged <= 5, logged


@pytest.mark.parametrize("seed", [1, 2])
def test_crash_never_hands_out_a_value_twice(tmp_path, seed):
    rng = random.Random(seed)
    d = str(tmp_path / "data")
    conn = dbapi.connect(d, max_worker_processes=0)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("CREATE SEQUENCE s")
    cur.execute("CREATE TABLE t (id serial, v int)")
    seen = []
    for _ in range(rng.randint(1, 3)):
        k = rng.randint(1, 80)
        cur.execute(f"SELECT nextval('s') FROM generate_series(1, {k})")
        seen += [r[0] for r in cur.fetchall()]
        if rng.random() < 0.5:
            cur.execute("CHECKPOINT")
    cur.execute("BEGIN")
    cur.execute("INSERT INTO t (v) SELECT g FROM generate_series(1, 40) g")
    cur.execute("ROLLBACK")   # the values are used up all the same
    abandon(conn)             # no buffer written: only the WAL survives
    conn = dbapi.connect(d, max_worker_processes=0)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("SELECT nextval('s')")
    after = cur.fetchone()[0]
    assert after > max(seen)
    cur.execute("INSERT INTO t (v) VALUES (1)")
    cur.execute("SELECT id FROM t")
    assert cur.fetchone()[0] > 40
    conn.close()


def test_add_column_serial_is_refused(db):
    db.x("CREATE TABLE t (a int)")
    with pytest.raises(errors.NotSupportedError, match="serial or identity"):
        db.x("ALTER TABLE t ADD COLUMN id serial")
    assert db.rows("SELECT attname FROM pg_attribute WHERE attrelid = 't'::regclass") == \
        [("a",)]


def test_sequences_over_the_server(server):
    pytest.importorskip("psycopg")
    with server.connect(autocommit=True) as conn:
        conn.execute("CREATE SEQUENCE s START 10")
        assert conn.execute("SELECT nextval('s')").fetchone() == (10,)
        assert conn.execute("SELECT nextval(%s)", ("s",)).fetchone() == (11,)   # extended
        assert conn.execute("SELECT currval('s'), lastval()").fetchone() == (11, 11)
        conn.execute("CREATE TABLE t (id bigserial PRIMARY KEY, v text)")
        cur = conn.execute("INSERT INTO t (v) VALUES (%s) RETURNING id", ("x",))
        assert cur.fetchone() == (1,)
