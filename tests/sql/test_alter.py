"""ALTER TABLE, ALTER INDEX ... RENAME and REINDEX through SQL.

What is proven here:
  * every form does what PostgreSQL does to the rows and the catalog: ADD COLUMN (NULL, a
    constant DEFAULT, a volatile one evaluated per row, NOT NULL with a DEFAULT, inline
    PRIMARY KEY / UNIQUE), DROP COLUMN (the indexes that use the column go with it, the
    others keep working and their statistics follow the renumbered columns), RENAME COLUMN,
    RENAME TO, ADD / DROP CONSTRAINT for PRIMARY KEY and UNIQUE, SET / DROP NOT NULL;
  * every form rolls back: after ``BEGIN; ALTER ...; ROLLBACK`` the rows, the catalog and
    the set of relation files are what they were; after a commit the old files of a
    rewrite are gone; the catalog checker finds nothing after each;
  * errors, nothing half done: unknown column 42703, duplicate column 42701, SET NOT NULL
    over NULLs 23502, a rename onto an existing name 42P07, a second primary key 42P16, a
    duplicate key in ADD UNIQUE 23505 (an error in a later action undoes the earlier ones);
    DROP INDEX of a primary key 2BP01 with a HINT naming ALTER TABLE ... DROP CONSTRAINT;
  * REINDEX rebuilds an index the checker flags (damaged in the buffer pool, or its file
    overwritten on disk so its pages fail their checksum) into a new relfilenode;
  * the data survives a reopen after ALTER.

The waits (ALTER TABLE behind a reader's AccessShare lock, REINDEX behind a writer) are
tests/txn/isolation/specs/lock-alter-vs-reader.spec's.

Not proven here: ALTER under concurrent DML on other tables while the rewrite runs (one
thread), or a crash in the middle of a rewrite (there is no WAL yet: its files would be
orphans, which the checker reports).
"""

from __future__ import annotations

import os

import pytest

import minidb.errors as errors
import minidb.index as ix
from minidb.catalog import check_catalog, relation_files
from minidb.instance import Instance
from minidb.storage.bufmgr import EXCLUSIVE

from tests.sql.conftest import DB, dump


def problems(db) -> list[str]:
    with db.inst.connect() as b:
        return check_catalog(b)


def files(db) -> set[int]:
    with db.inst.connect() as b:
        return relation_files(b)


def btree_ok(db, name):
    b = db.session.backend
    db.x("BEGIN")
    try:
        return ix.check_btree(b, name)
    finally:
        db.x("COMMIT")


@pytest.fixture
def t(db):
    db.x("CREATE TABLE t (a int PRIMARY KEY, b text, c bigint)")
    db.x("INSERT INTO t SELECT g, 'v' || g, g * 10 FROM generate_series(1, 40) g")
    db.x("CREATE INDEX t_c_idx ON t (c)")
    return db


# -- each form ----------------------------------------------------------------------------------
def test_add_column_default_and_not_null(t):
    old = t.inst.catalog.table("t").relfilenode
    t.x("ALTER TABLE t ADD COLUMN d integer NOT NULL DEFAULT 7")
    t.x("ALTER TABLE t ADD e text")
    assert t.rows("SELECT a, b, c, d, e FROM t WHERE a = 3") == [(3, "v3", 30, 7, None)]
    assert t.rows("SELECT a FROM t WHERE c = 50") == [(5,)]          # t_c_idx rebuilt
    assert "Index" in t.plan("SELECT a FROM t WHERE c = 50")
    assert t.one("SELECT count(*) FROM t WHERE d = 7") == 40
    with pytest.raises(errors.NotNullViolation):
        t.x("INSERT INTO t (a, d) VALUES (100, NULL)")
    t.x("INSERT INTO t (a) VALUES (100)")
    assert t.rows("SELECT d, e FROM t WHERE a = 100") == [(7, None)]
    with pytest.raises(errors.UniqueViolation):
        t.x("INSERT INTO t (a) VALUES (1)")
    assert old not in files(t)
    assert problems(t) == []
    for i in ("t_pkey", "t_c_idx"):
        assert btree_ok(t, i)["leaf_items"] == 41


def test_add_column_volatile_default_per_row(t):
    t.x("ALTER TABLE t ADD COLUMN r double precision DEFAULT random()")
    assert t.one("SELECT count(DISTINCT r) FROM t") == 40


def test_add_not_null_column_without_default(t, db2):
    with pytest.raises(errors.NotNullViolation, match='column "d" of relation "t" contains '
                                                       'null values') as ei:
        t.x("ALTER TABLE t ADD COLUMN d integer NOT NULL")
    assert ei.value.sqlstate == "23502"
    assert t.inst.catalog.table("t").column_index("d") < 0
    t.x("CREATE TABLE e (a int)")
    t.x("ALTER TABLE e ADD COLUMN d integer NOT NULL")   # no rows: fine
    assert [c.name for c in t.inst.catalog.table("e").columns] == ["a", "d"]
    assert problems(t) == []


def test_add_column_with_constraints(t):
    t.x("ALTER TABLE t ADD COLUMN u integer UNIQUE, ADD COLUMN IF NOT EXISTS b text")
    assert "t_u_key" in t.inst.catalog.indexes
    t.x("INSERT INTO t (a, u) VALUES (101, 5)")
    with pytest.raises(errors.UniqueViolation):
        t.x("INSERT INTO t (a, u) VALUES (102, 5)")
    t.x("CREATE TABLE p (x int)")
    t.x("INSERT INTO p VALUES (1), (2)")
    with pytest.raises(errors.UniqueViolation):      # both rows get id 1
        t.x("ALTER TABLE p ADD COLUMN id int PRIMARY KEY DEFAULT 1")
    assert [c.name for c in t.inst.catalog.table("p").columns] == ["x"]
    assert problems(t) == []


def test_drop_column(t):
    t.x("CREATE INDEX t_bc ON t (b, c)")
    t.x("ANALYZE t")
    assert set(t.inst.catalog.table("t").column_stats) == {"a", "b", "c"}
    old = t.inst.catalog.table("t").relfilenode
    t.x("ALTER TABLE t DROP COLUMN b")
    cat = t.inst.catalog
    assert [c.name for c in cat.table("t").columns] == ["a", "c"]
    assert sorted(cat.table("t").indexes) == ["t_c_idx", "t_pkey"]   # t_bc went with b
    assert cat.index("t_c_idx").columns == ["c"]
    assert set(cat.table("t").column_stats) == {"a", "c"}
    assert t.rows("SELECT * FROM t WHERE c = 70") == [(7, 70)]
    assert t.rows("SELECT * FROM t WHERE a = 8") == [(8, 80)]
    with pytest.raises(errors.UndefinedColumn) as ei:
        t.x("SELECT b FROM t")
    assert ei.value.sqlstate == "42703"
    with pytest.raises(errors.UndefinedColumn):
        t.x("ALTER TABLE t DROP COLUMN b")
    r = t.x("ALTER TABLE t DROP COLUMN IF EXISTS b")
    assert any("does not exist, skipping" in m for m in r.messages)
    t.x("ALTER TABLE t DROP COLUMN a")                 # the primary key goes with it
    assert cat.table("t").indexes == ["t_c_idx"]
    assert old not in files(t)
    assert problems(t) == []
    assert btree_ok(t, "t_c_idx")["leaf_items"] == 40


def test_rename_column_and_table(t):
    t.x("ALTER TABLE t RENAME COLUMN c TO cc")
    assert t.rows("SELECT a FROM t WHERE cc = 30") == [(3,)]
    assert t.inst.catalog.index("t_c_idx").columns == ["cc"]
    with pytest.raises(errors.UndefinedColumn) as ei:
        t.x("ALTER TABLE t RENAME COLUMN c TO d")
    assert ei.value.sqlstate == "42703"
    with pytest.raises(errors.DuplicateColumn) as ei:
        t.x("ALTER TABLE t RENAME COLUMN cc TO b")
    assert ei.value.sqlstate == "42701"
    t.x("CREATE TABLE other (x int)")
    with pytest.raises(errors.DuplicateTable) as ei:
        t.x("ALTER TABLE t RENAME TO other")
    assert ei.value.sqlstate == "42P07"
    with pytest.raises(errors.DuplicateTable):
        t.x("ALTER TABLE t RENAME TO t_pkey")
    t.x("ALTER TABLE t RENAME TO u")
    with pytest.raises(errors.UndefinedTable):
        t.x("SELECT * FROM t")
    assert t.rows("SELECT b FROM u WHERE a = 4") == [("v4",)]
    with pytest.raises(errors.UniqueViolation):
        t.x("INSERT INTO u VALUES (4, 'x', 1)")
    t.x("INSERT INTO u VALUES (41, 'x', 410)")
    assert t.rows("SELECT a FROM u WHERE cc = 410") == [(41,)]
    t.x("ALTER INDEX t_c_idx RENAME TO u_cc_idx")
    assert t.inst.catalog.index("u_cc_idx").table == "u"
    assert t.rows("SELECT a FROM u WHERE cc = 410") == [(41,)]
    assert problems(t) == []


def test_add_and_drop_constraints(t):
    with pytest.raises(errors.ProgrammingError) as ei:
        t.x("DROP INDEX t_pkey")
    assert ei.value.sqlstate == "2BP01"
    assert "constraint t_pkey on table t requires it" in str(ei.value)
    assert "HINT:" in str(ei.value) and "ALTER TABLE t DROP CONSTRAINT t_pkey" in str(ei.value)
    with pytest.raises(errors.ProgrammingError) as ei:
        t.x("ALTER TABLE t ADD PRIMARY KEY (c)")
    assert ei.value.sqlstate == "42P16"
    t.x("ALTER TABLE t DROP CONSTRAINT t_pkey")
    assert "t_pkey" not in t.inst.catalog.indexes
    t.x("INSERT INTO t VALUES (1, 'dup', 10)")           # no key any more
    with pytest.raises(errors.UniqueViolation) as ei:
        t.x("ALTER TABLE t ADD CONSTRAINT t_a_pk PRIMARY KEY (a)")
    assert ei.value.sqlstate == "23505"
    assert "t_a_pk" not in t.inst.catalog.indexes
    t.x("DELETE FROM t WHERE b = 'dup'")
    t.x("ALTER TABLE t ADD CONSTRAINT t_a_pk PRIMARY KEY (a), ADD UNIQUE (b, c)")
    cat = t.inst.catalog
    assert cat.index("t_a_pk").primary and cat.index("t_b_c_key").unique
    with pytest.raises(errors.UndefinedObject) as ei:
        t.x("ALTER TABLE t DROP CONSTRAINT nope")
    assert ei.value.sqlstate == "42704"
    with pytest.raises(errors.UndefinedObject):
        t.x("ALTER TABLE t DROP CONSTRAINT t_c_idx")     # not unique: not a constraint
    t.x("ALTER TABLE t DROP CONSTRAINT t_b_c_key, DROP CONSTRAINT IF EXISTS nope")
    assert "t_b_c_key" not in cat.indexes
    with pytest.raises(errors.UndefinedColumn):
        t.x("ALTER TABLE t ADD UNIQUE (zz)")
    assert problems(t) == []


def test_primary_key_sets_not_null_after_checking(t):
    t.x("ALTER TABLE t DROP CONSTRAINT t_pkey")
    assert t.inst.catalog.table("t").columns[0].not_null       # NOT NULL stays (PG < 18)
    t.x("ALTER TABLE t ALTER COLUMN a DROP NOT NULL")
    t.x("INSERT INTO t VALUES (NULL, 'n', 0)")
    with pytest.raises(errors.NotNullViolation):
        t.x("ALTER TABLE t ADD PRIMARY KEY (a)")
    assert not t.inst.catalog.table("t").columns[0].not_null  # unchanged by the failure
    t.x("DELETE FROM t WHERE a IS NULL")
    t.x("ALTER TABLE t ADD PRIMARY KEY (a)")
    assert t.inst.catalog.table("t").columns[0].not_null
    assert t.inst.catalog.index("t_pkey").primary


def test_set_and_drop_not_null(t):
    t.x("INSERT INTO t (a, b) VALUES (50, NULL)")
    with pytest.raises(errors.NotNullViolation) as ei:
        t.x("ALTER TABLE t ALTER COLUMN b SET NOT NULL")
    assert ei.value.sqlstate == "23502"
    assert 'column "b" of relation "t" contains null values' in str(ei.value)
    t.x("UPDATE t SET b = 'x' WHERE b IS NULL")
    t.x("ALTER TABLE t ALTER COLUMN b SET NOT NULL")
    with pytest.raises(errors.NotNullViolation):
        t.x("INSERT INTO t (a, b) VALUES (51, NULL)")
    assert t.one("SELECT count(*) FROM t WHERE b IS NOT NULL") == 41
    t.x("ALTER TABLE t ALTER COLUMN b DROP NOT NULL")
    t.x("INSERT INTO t (a, b) VALUES (51, NULL)")
    with pytest.raises(errors.ProgrammingError) as ei:
        t.x("ALTER TABLE t ALTER COLUMN a DROP NOT NULL")
    assert ei.value.sqlstate == "42P16"
    with pytest.raises(errors.UndefinedColumn):
        t.x("ALTER TABLE t ALTER COLUMN zz SET NOT NULL")
    assert problems(t) == []


def test_alter_errors(t):
    with pytest.raises(errors.UndefinedTable) as ei:
        t.x("ALTER TABLE nope ADD COLUMN x int")
    assert ei.value.sqlstate == "42P01"
    r = t.x("ALTER TABLE IF EXISTS nope ADD COLUMN x int")
    assert "skipping" in r.messages[0]
    with pytest.raises(errors.DuplicateColumn) as ei:
        t.x("ALTER TABLE t ADD COLUMN b int")
    assert ei.value.sqlstate == "42701"
    with pytest.raises(errors.InsufficientPrivilege):
        t.x("ALTER TABLE pg_class ADD COLUMN x int")
    with pytest.raises(errors.InsufficientPrivilege):
        t.x("REINDEX TABLE pg_class")
    with pytest.raises(errors.NotSupportedError):
        t.x("ALTER TABLE t ALTER COLUMN b TYPE int")
    before = dump(t)
    # an error in the second action undoes the first
    with pytest.raises(errors.UndefinedColumn):
        t.x("ALTER TABLE t ADD COLUMN x int, DROP COLUMN zz")
    assert dump(t) == before
    assert t.inst.catalog.table("t").column_index("x") < 0
    assert problems(t) == []


# -- rollback of every form -----------------------------------------------------------------------
FORMS = [
    "ALTER TABLE t ADD COLUMN d int DEFAULT 5",
    "ALTER TABLE t ADD COLUMN d int NOT NULL DEFAULT 5, ADD UNIQUE (a, d)",
    "ALTER TABLE t DROP COLUMN b",
    "ALTER TABLE t DROP COLUMN a",
    "ALTER TABLE t RENAME COLUMN b TO bb",
    "ALTER TABLE t RENAME TO u",
    "ALTER INDEX t_c_idx RENAME TO t_c2",
    "ALTER TABLE t ADD CONSTRAINT t_b_key UNIQUE (b)",
    "ALTER TABLE t DROP CONSTRAINT t_pkey",
    "ALTER TABLE t ALTER COLUMN c SET NOT NULL",
    "ALTER TABLE t ALTER COLUMN b SET NOT NULL, ALTER COLUMN b DROP NOT NULL",
    "REINDEX TABLE t",
    "REINDEX INDEX t_pkey",
]


def _state(db):
    cat = db.inst.catalog
    cat.refresh()
    tables = {n: ([(c.name, c.type, c.not_null, c.default) for c in t.columns],
                  t.relfilenode, sorted(t.indexes)) for n, t in cat.tables.items()}
    indexes = {n: (i.table, i.columns, i.relfilenode, i.unique, i.primary)
               for n, i in cat.indexes.items()}
    return dump(db), tables, indexes, files(db)


@pytest.mark.parametrize("sql", FORMS)
def test_every_form_rolls_back_and_commits(t, sql):
    before = _state(t)
    t.x("BEGIN")
    t.x(sql)
    t.x("ROLLBACK")
    assert _state(t) == before
    assert problems(t) == []
    t.x(sql)
    assert problems(t) == []
    named = {x.relfilenode for x in list(t.inst.catalog.tables.values())
             + list(t.inst.catalog.indexes.values())}
    assert {f for f in files(t) if f >= 16384} == named
    for iname in t.inst.catalog.indexes:
        btree_ok(t, iname)


def test_failed_alter_fails_the_block(t):
    before = _state(t)
    t.x("BEGIN")
    t.x("ALTER TABLE t ADD COLUMN d int DEFAULT 1")
    with pytest.raises(errors.DuplicateTable):
        t.x("ALTER TABLE t RENAME TO t_c_idx")
    with pytest.raises(errors.InFailedSqlTransaction):
        t.x("ALTER TABLE t DROP COLUMN d")
    t.x("ROLLBACK")
    assert _state(t) == before
    assert problems(t) == []


# -- REINDEX repairs a damaged index --------------------------------------------------------------
def _swap_two_leaf_items(db, name):
    import struct
    from minidb.index import btpage as bt
    b = db.session.backend
    irel = ix.open_index(b, name)
    bm = b.bufmgr
    buf = bm.pin(irel.relfilenode, 1)            # the only leaf of a small index
    try:
        bm.lock(buf, EXCLUSIVE)
        page = bm.page(buf)
        w1, w2 = bt.lp_word(page, 1), bt.lp_word(page, 2)
        struct.pack_into("<II", page, 24, w2, w1)
        bm.mark_dirty(buf)
        bm.unlock(buf)
    finally:
        bm.unpin(buf)


def test_reindex_repairs_an_index_the_checker_flags(t):
    old = t.inst.catalog.index("t_c_idx").relfilenode
    _swap_two_leaf_items(t, "t_c_idx")
    with pytest.raises(errors.DataCorrupted):
        btree_ok(t, "t_c_idx")
    t.x("REINDEX INDEX t_c_idx")
    new = t.inst.catalog.index("t_c_idx").relfilenode
    assert new != old and old not in files(t)
    assert btree_ok(t, "t_c_idx")["leaf_items"] == 40
    assert t.rows("SELECT a FROM t WHERE c = 120") == [(12,)]
    _swap_two_leaf_items(t, "t_pkey")
    t.x("REINDEX TABLE t")
    assert btree_ok(t, "t_pkey")["leaf_items"] == 40
    assert problems(t) == []


def test_reindex_a_file_damaged_on_disk(tmp_path):
    path = tmp_path / "data"
    inst = Instance(path, shared_buffers=64)
    db = DB(inst)
    db.x("CREATE TABLE t (a int PRIMARY KEY, b text)")
    db.x("INSERT INTO t SELECT g, 'x' || g FROM generate_series(1, 300) g")
    rfn = inst.catalog.index("t_pkey").relfilenode
    db.close()
    inst.close()
    with open(os.path.join(path, "base", str(rfn)), "r+b") as f:   # a leaf page
        f.seek(8192 + 3000)
        f.write(b"\xde\xad\xbe\xef" * 64)
    inst = Instance(path, shared_buffers=64)
    db = DB(inst)
    try:
        with pytest.raises(errors.DataCorrupted):
            btree_ok(db, "t_pkey")
        with pytest.raises(errors.DataCorrupted):
            db.x("SELECT b FROM t WHERE a = 2")
        db.x("REINDEX INDEX t_pkey")
        assert btree_ok(db, "t_pkey")["leaf_items"] == 300
        assert db.rows("SELECT b FROM t WHERE a = 2") == [("x2",)]
        assert rfn not in files(db)
        assert problems(db) == []
    finally:
        db.close()
        inst.close()


def test_alter_survives_reopen(tmp_path):
    path = tmp_path / "data"
    inst = Instance(path, shared_buffers=64)
    db = DB(inst)
    db.x("CREATE TABLE t (a int PRIMARY KEY, b text, c int)")
    db.x("INSERT INTO t VALUES (1, 'x', 10), (2, 'y', 20)")
    db.x("ALTER TABLE t ADD COLUMN d text DEFAULT 'dd', DROP COLUMN b")
    db.x("ALTER TABLE t RENAME TO u")
    db.x("ALTER TABLE u RENAME c TO cc")
    db.close()
    inst.close()
    inst = Instance(path, shared_buffers=64)
    db = DB(inst)
    try:
        assert db.rows("SELECT * FROM u ORDER BY a") == [(1, 10, "dd"), (2, 20, "dd")]
        assert db.rows("SELECT cc FROM u WHERE a = 2") == [(20,)]
        assert problems(db) == []
    finally:
        db.close()
        inst.close()
