"""CREATE [OR REPLACE] VIEW / DROP VIEW (``minidb.sql.views``, ``minidb.catalog.views``).

Proven here: a view's rows are its query's (joined, filtered, aggregated over, read by
another view), its columns renamed by a column list; it is in pg_class (relkind 'v',
no file), pg_attribute, pg_views, information_schema.views / tables / columns, and
pg_get_viewdef shows its text; a plan over it is replaced when the view is replaced;
OR REPLACE keeps the old columns (42P16 otherwise); writing a view is 42809, DROP VIEW of
a table and DROP TABLE of a view 42809; DROP of a relation a view reads is 2BP01 (DETAIL
naming each view) unless CASCADE; everything rolls back; the catalog checker is clean and
the view survives a reopen.
"""

from __future__ import annotations

import pytest

import minidb.errors as errors
from minidb.catalog import check_catalog
from minidb.instance import Instance

from tests.sql.conftest import DB


@pytest.fixture
def t(db):
    db.x("CREATE TABLE t (a int PRIMARY KEY, b text)")
    db.x("INSERT INTO t VALUES (1, 'x'), (2, 'y'), (3, NULL)")
    db.x("CREATE VIEW v AS SELECT a, b FROM t WHERE a > 1")
    return db


def test_rows_and_composition(t):
    assert sorted(t.rows("SELECT * FROM v")) == [(2, "y"), (3, None)]
    assert sorted(t.rows("SELECT v.a, t.b FROM v JOIN t USING (a)")) == [(2, "y"), (3, None)]
    assert t.one("SELECT count(*) FROM v WHERE b IS NULL") == 1
    t.x("CREATE VIEW w (z) AS SELECT a * 10 FROM v")
    assert t.rows("SELECT z FROM w ORDER BY z") == [(20,), (30,)]
    assert t.rows("SELECT x.z FROM w AS x WHERE x.z > 20") == [(30,)]
    # a CTE of the same name hides the view, as PostgreSQL's scoping does
    assert t.rows("WITH v AS (SELECT 7 AS a) SELECT a FROM v") == [(7,)]
    t.x("INSERT INTO t VALUES (4, 'q')")
    assert t.one("SELECT count(*) FROM w") == 3      # expanded at each use


def test_catalog_rows(t):
    oid = t.one("SELECT oid FROM pg_class WHERE relname = 'v'")
    assert t.one("SELECT relkind FROM pg_class WHERE relname = 'v'") == "v"
    assert t.rows("SELECT attname FROM pg_attribute WHERE attrelid = ? ORDER BY attnum",
                  oid) == [("a",), ("b",)]
    assert t.rows("SELECT viewname, definition FROM pg_views") == [
        ("v", " SELECT a, b FROM t WHERE a > 1;")]
    assert t.one("SELECT pg_get_viewdef('v'::regclass)") == " SELECT a, b FROM t WHERE a > 1;"
    assert t.rows("SELECT table_name FROM information_schema.views") == [("v",)]
    assert ("v", "VIEW") in t.rows("SELECT table_name, table_type FROM "
                                   "information_schema.tables")
    assert t.rows("SELECT column_name, data_type FROM information_schema.columns WHERE "
                  "table_name = 'v' ORDER BY ordinal_position") == [("a", "integer"),
                                                                     ("b", "text")]
    assert check_catalog(t.session.backend) == []


def test_replace(t):
    assert t.rows("SELECT a FROM v ORDER BY a") == [(2,), (3,)]   # a cached plan
    t.x("CREATE OR REPLACE VIEW v AS SELECT a, b, a + 1 AS c FROM t")
    assert t.rows("SELECT a FROM v ORDER BY a") == [(1,), (2,), (3,)]
    assert t.rows("SELECT c FROM v ORDER BY c") == [(2,), (3,), (4,)]
    with pytest.raises(errors.InvalidTableDefinition, match="cannot drop columns"):
        t.x("CREATE OR REPLACE VIEW v AS SELECT a FROM t")
    with pytest.raises(errors.InvalidTableDefinition, match="name of view column"):
        t.x("CREATE OR REPLACE VIEW v AS SELECT a AS q, b, a + 1 AS c FROM t")
    with pytest.raises(errors.InvalidTableDefinition, match="data type"):
        t.x("CREATE OR REPLACE VIEW v AS SELECT a, a AS b, a + 1 AS c FROM t")
    with pytest.raises(errors.DuplicateTable):
        t.x("CREATE VIEW v AS SELECT 1 AS one")
    with pytest.raises(errors.DuplicateTable):
        t.x("CREATE VIEW t AS SELECT 1 AS one")


def test_wrong_kinds(t):
    for sql in ("INSERT INTO v VALUES (5, 'z')", "UPDATE v SET b = 'q'", "DELETE FROM v"):
        with pytest.raises(errors.WrongObjectType):
            t.x(sql)
    with pytest.raises(errors.WrongObjectType, match="cannot copy to view"):
        t.x("COPY v FROM '/nonexistent'")
    t.x("CREATE TEMP TABLE tt (a int)")
    with pytest.raises(errors.NotSupportedError, match="temporary"):
        t.x("CREATE VIEW w AS SELECT a FROM tt")
    with pytest.raises(errors.WrongObjectType, match="Use DROP TABLE"):
        t.x("DROP VIEW t")
    with pytest.raises(errors.WrongObjectType, match="Use DROP VIEW"):
        t.x("DROP TABLE v")
    assert t.x("DROP VIEW IF EXISTS nope").messages == [
        'NOTICE:  view "nope" does not exist, skipping']
    with pytest.raises(errors.UndefinedTable):
        t.x("DROP VIEW nope")


def test_dependencies_and_cascade(t):
    t.x("CREATE VIEW w AS SELECT a FROM v")
    with pytest.raises(errors.DependentObjectsStillExist) as ei:
        t.x("DROP TABLE t")
    assert ei.value.sqlstate == "2BP01"
    assert "view v depends on table t\nview w depends on view v" in str(ei.value)
    with pytest.raises(errors.DependentObjectsStillExist):
        t.x("DROP VIEW v")
    t.x("BEGIN")
    r = t.x("DROP TABLE t CASCADE")
    assert r.messages == ["NOTICE:  drop cascades to 2 other objects\nDETAIL:  drop cascades "
                          "to view v\ndrop cascades to view w"]
    with pytest.raises(errors.UndefinedTable):
        t.x("SELECT * FROM w")
    t.x("ROLLBACK")
    assert t.rows("SELECT a FROM w ORDER BY a") == [(2,), (3,)]
    assert t.x("DROP VIEW v CASCADE").messages == ["NOTICE:  drop cascades to view w"]
    assert t.rows("SELECT relname FROM pg_class WHERE relkind = 'v'") == []
    t.x("DROP TABLE t")
    assert check_catalog(t.session.backend) == []


def test_create_rolls_back_and_survives_reopen(tmp_path):
    inst = Instance(tmp_path / "d", shared_buffers=64)
    db = DB(inst)
    db.x("CREATE TABLE t (a int)")
    db.x("INSERT INTO t VALUES (1), (2)")
    db.x("BEGIN")
    db.x("CREATE VIEW gone AS SELECT a FROM t")
    db.x("ROLLBACK")
    db.x("CREATE VIEW v AS SELECT sum(a) AS s FROM t")
    db.close()
    inst.close()
    inst = Instance(tmp_path / "d", shared_buffers=64)
    db = DB(inst)
    try:
        assert db.one("SELECT s FROM v") == 3
        with pytest.raises(errors.UndefinedTable):
            db.x("SELECT * FROM gone")
        assert check_catalog(db.session.backend) == []
    finally:
        db.close()
        inst.close()
