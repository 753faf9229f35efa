"""CHECK constraints (``minidb.sql.checks``, ``minidb.exec.checks``, pg_constraint).

Proven here: column and table constraints, named and unnamed (PostgreSQL's names, a
number added on a clash), are in pg_constraint (pg_get_constraintdef, relchecks); every
write path - INSERT VALUES (one row and the bulk path), INSERT ... SELECT, executemany,
COPY FROM, UPDATE, the prepared point path - refuses a row a condition rejects with 23514
naming the constraint (NULL passes) and leaves the table as it was; ALTER TABLE ADD
CONSTRAINT ... CHECK validates the existing rows (23514) and DROP CONSTRAINT drops one;
invalid conditions are refused (42804, 42803, 42703); all of it rolls back, and
the catalog checker is clean.
"""

from __future__ import annotations

import pytest

import minidb.errors as errors
from minidb.catalog import check_catalog


@pytest.fixture
def c(db):
    db.x("CREATE TABLE c (id int PRIMARY KEY, a int CHECK (a > 0), "
         "b int CONSTRAINT bpos CHECK (b > 0), CONSTRAINT ab CHECK (a < b), "
         "CHECK (a <> 5), CHECK (a + b < 1000))")
    return db


def test_catalog_rows(c):
    assert c.rows("SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint "
                  "ORDER BY conname") == [
        ("ab", "c", "CHECK (a < b)"), ("bpos", "c", "CHECK (b > 0)"),
        ("c_a_check", "c", "CHECK (a > 0)"), ("c_a_check1", "c", "CHECK (a <> 5)"),
        ("c_check", "c", "CHECK (a + b < 1000)")]
    assert c.one("SELECT relchecks FROM pg_class WHERE relname = 'c'") == 5
    assert check_catalog(c.session.backend) == []


def test_insert_paths(c, dumper, tmp_path):
    c.x("INSERT INTO c VALUES (1, 1, 2), (2, 1, NULL)")     # NULL passes
    before = dumper(c)
    for sql, name in [("INSERT INTO c VALUES (3, 0, 2)", "c_a_check"),
                      ("INSERT INTO c VALUES (3, 3, 2)", "ab"),
                      ("INSERT INTO c VALUES (3, 5, 7)", "c_a_check1"),
                      ("INSERT INTO c SELECT g, g, g + 1 FROM generate_series(10, 600) g",
                       "c_check"),
                      ("INSERT INTO c VALUES " + ", ".join(
                          f"({i}, {i}, {i + 1 if i != 150 else 0})"
                          for i in range(100, 200)), "ab")]:
        with pytest.raises(errors.CheckViolation) as ei:
            c.x(sql)
        assert ei.value.sqlstate == "23514"
        assert f'violates check constraint "{name}"' in str(ei.value)
        assert "DETAIL:  Failing row contains (" in str(ei.value)
        assert dumper(c) == before
    with pytest.raises(errors.CheckViolation):
        c.engine.executemany("INSERT INTO c VALUES (?, ?, ?)",
                             [(i, 1, 2 if i != 60 else -2) for i in range(50, 80)])
    p = tmp_path / "in.csv"
    p.write_text("".join(f"{i},{i},{i + 1}\n" for i in range(20, 40)) + "41,9,3\n")
    with pytest.raises(errors.CheckViolation, match='"ab"'):
        c.x(f"COPY c FROM '{p}' WITH (FORMAT csv)")
    assert dumper(c) == before
    p.write_text("".join(f"{i},{i},{i + 1}\n" for i in range(20, 40)))
    assert c.x(f"COPY c FROM '{p}' WITH (FORMAT csv)").rowcount == 20


def test_update_paths(c, dumper):
    c.x("INSERT INTO c SELECT g, g, g + 10 FROM generate_series(1, 4) g")
    before = dumper(c)
    with pytest.raises(errors.CheckViolation, match='"ab"'):
        c.x("UPDATE c SET b = 0 WHERE id > 2")
    upd = c.engine.prepare("UPDATE c SET a = ? WHERE id = ?")
    with pytest.raises(errors.CheckViolation, match='"c_a_check1"'):
        upd.execute([5, 1])
    assert dumper(c) == before
    upd.execute([6, 1])
    assert c.one("SELECT a FROM c WHERE id = 1") == 6


def test_alter_add_and_drop(c):
    c.x("INSERT INTO c VALUES (1, 1, 2), (2, 3, 4)")
    with pytest.raises(errors.CheckViolation, match='check constraint "small" of relation '
                       '"c" is violated by some row'):
        c.x("ALTER TABLE c ADD CONSTRAINT small CHECK (b < 3)")
    c.x("ALTER TABLE c ADD CHECK (b < 10)")
    assert "c_b_check" in [r[0] for r in c.rows("SELECT conname FROM pg_constraint")]
    with pytest.raises(errors.CheckViolation, match='"c_b_check"'):
        c.x("INSERT INTO c VALUES (3, 1, 11)")
    with pytest.raises(errors.ProgrammingError) as ei:
        c.x("ALTER TABLE c ADD CONSTRAINT ab CHECK (a < 100)")
    assert ei.value.sqlstate == "42710"
    c.x("BEGIN")
    c.x("ALTER TABLE c DROP CONSTRAINT c_b_check")
    c.x("INSERT INTO c VALUES (3, 1, 11)")
    c.x("ROLLBACK")
    with pytest.raises(errors.CheckViolation, match='"c_b_check"'):
        c.x("INSERT INTO c VALUES (3, 1, 11)")
    c.x("ALTER TABLE c DROP CONSTRAINT c_b_check")
    c.x("INSERT INTO c VALUES (3, 1, 11)")
    with pytest.raises(errors.UndefinedObject):
        c.x("ALTER TABLE c DROP CONSTRAINT c_b_check")
    c.x("DROP TABLE c")
    assert c.rows("SELECT * FROM pg_constraint") == []
    assert check_catalog(c.session.backend) == []


def test_invalid_conditions(db):
    with pytest.raises(errors.DatatypeMismatch):
        db.x("CREATE TABLE d (a int CHECK (a))")
    with pytest.raises(errors.GroupingError):
        db.x("CREATE TABLE d (a int CHECK (count(*) > 0))")
    with pytest.raises(errors.UndefinedColumn):
        db.x("CREATE TABLE d (a int CHECK (zz > 0))")
    with pytest.raises(errors.UndefinedTable):
        db.x("SELECT * FROM d")            # nothing half made
