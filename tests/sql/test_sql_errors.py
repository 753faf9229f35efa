"""Every kind of bad input errors clearly (class, SQLSTATE, message) and leaves the database
exactly as it was: a full dump (all rows of all tables, the catalog's tables and indexes) is
compared before and after, in autocommit and inside a transaction block."""

from __future__ import annotations

import pytest

from minidb import errors


@pytest.fixture
def filled(db):
    db.x("CREATE TABLE acc (id int PRIMARY KEY, bal int NOT NULL, name varchar(8))")
    db.x("CREATE TABLE log (id int, msg text)")
    db.x("INSERT INTO acc VALUES (1, 100, 'ann'), (2, 0, 'bob'), (3, 50, NULL)")
    db.x("INSERT INTO log VALUES (1, 'hello')")
    return db


BAD = [
    # (sql, error class, sqlstate, words the message must contain)
    ("SELEC * FROM acc", errors.SyntaxError_, "42601", ['"selec"', "line 1, column 1"]),
    ("selec * frm acc", errors.SyntaxError_, "42601", ['"selec"']),
    ("SELECT * FROM acc WHERE", errors.SyntaxError_, "42601", ["line 1"]),
    ("SELECT * FROM acc\nWHERE id = = 3", errors.SyntaxError_, "42601", ["line 2"]),
    ("INSERT INTO acc VALUES (4, 1, 'x'", errors.SyntaxError_, "42601", ["column"]),
    ("SELECT 'unterminated FROM acc", errors.SyntaxError_, "42601", ["unterminated"]),
    ("SELECT * FROM nope", errors.UndefinedTable, "42P01", ['"nope"']),
    ("INSERT INTO nope VALUES (1)", errors.UndefinedTable, "42P01", ['"nope"']),
    ("SELECT nope FROM acc", errors.UndefinedColumn, "42703", ['"nope"']),
    ("UPDATE acc SET nope = 1", errors.UndefinedColumn, "42703", ['"nope"']),
    ("SELECT * FROM acc WHERE name = 5", errors.DatatypeMismatch, "42804", ["="]),
    ("SELECT * FROM acc WHERE id = true", errors.DatatypeMismatch, "42804", ["boolean"]),
    ("UPDATE acc SET bal = 'x' || name", errors.DatatypeMismatch, "42804", ['"bal"']),
    ("SELECT id + name FROM acc", errors.DatatypeMismatch, "42804", ["+"]),
    ("INSERT INTO acc VALUES (1, 5, 'dup')", errors.UniqueViolation, "23505", ["acc_pkey"]),
    ("INSERT INTO acc VALUES (7, 1, 'a'), (8, 1, 'b'), (1, 1, 'c')", errors.UniqueViolation,
     "23505", ["(id)=(1)"]),
    ("UPDATE acc SET id = 1 WHERE id = 3", errors.UniqueViolation, "23505", ["acc_pkey"]),
    ("INSERT INTO acc (id) VALUES (9)", errors.NotNullViolation, "23502", ['"bal"']),
    ("SELECT bal / 0 FROM acc", errors.DivisionByZero, "22012", ["division by zero"]),
    ("UPDATE acc SET bal = 100 / bal", errors.DivisionByZero, "22012", ["division by zero"]),
    ("DELETE FROM acc WHERE 1 / (bal - 50) > 0", errors.DivisionByZero, "22012", []),
    ("INSERT INTO log SELECT id, 'x' FROM acc WHERE 10 / bal > 0", errors.DivisionByZero,
     "22012", []),
    ("UPDATE acc SET bal = bal * 100000000", errors.NumericValueOutOfRange, "22003",
     ["integer out of range"]),
    ("INSERT INTO acc VALUES (10, 1, 'much too long')", errors.StringDataRightTruncation,
     "22001", ["character varying(8)"]),
    ("SELECT * FROM acc, LATERAL generate_series(1, acc.id) WITH ORDINALITY g",
     errors.NotSupportedError, "0A000", ["LATERAL"]),
    ("SELECT * FROM acc WHERE id > ALL (SELECT id FROM log)", errors.NotSupportedError, "0A000",
     ["ALL (subquery)"]),
    ("SELECT count(*) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND 1 PRECEDING) FROM acc",
     errors.ProgrammingError, "42P20", ["frame starting from current row cannot have preceding"]),
    ("ALTER TABLE acc ALTER COLUMN bal TYPE bigint", errors.NotSupportedError, "0A000",
     ["ALTER COLUMN ... TYPE"]),
    ("ALTER TABLE acc ADD COLUMN name text", errors.DuplicateColumn, "42701",
     ['column "name" of relation "acc" already exists']),
    ("CREATE TABLE m (x money)", errors.NotSupportedError, "0A000", ["money"]),
    ("SELECT * FROM acc WHERE (id, bal) IN (SELECT 1, 2)", errors.NotSupportedError, "0A000",
     ["row constructors"]),
    ("SELECT id, FROM acc", errors.SyntaxError_, "42601", ['"FROM"']),
    ("SELECT frobnicate(id) FROM acc", errors.UndefinedFunction, "42883",
     ["function frobnicate(integer) does not exist"]),
    ("SELECT (SELECT id FROM acc)", errors.DataError, "21000", ["more than one row"]),
    ("SELECT sum(name) FROM acc", errors.UndefinedFunction, "42883", ["sum"]),
    ("SELECT * FROM acc; DELETE FROM acc", errors.ProgrammingError, None, ["several"]),
]


@pytest.mark.parametrize("sql,cls,state,words", BAD, ids=[b[0][:40] for b in BAD])
def test_bad_input_leaves_database_unchanged(filled, dumper, sql, cls, state, words):
    db = filled
    before = dumper(db)
    with pytest.raises(cls) as ei:
        db.x(sql)
    if state is not None:
        assert ei.value.sqlstate == state
    for w in words:
        assert w in str(ei.value), str(ei.value)
    assert dumper(db) == before
    # the same inside a transaction block: the block fails, ROLLBACK restores everything
    db.x("BEGIN")
    db.x("INSERT INTO log VALUES (99, 'inside')")
    with pytest.raises(cls):
        db.x(sql)
    with pytest.raises(errors.InFailedSqlTransaction) as ei2:
        db.x("SELECT 1")
    assert ei2.value.sqlstate == "25P02"
    assert db.x("COMMIT").status == "ROLLBACK"     # a failed block cannot commit
    assert dumper(db) == before


def test_error_classes_follow_pep249(filled):
    with pytest.raises(errors.IntegrityError):
        filled.x("INSERT INTO acc VALUES (1, 1, 'x')")
    with pytest.raises(errors.DataError):
        filled.x("SELECT 1 / 0")
    with pytest.raises(errors.ProgrammingError):
        filled.x("SELECT * FROM nowhere")
    with pytest.raises(errors.NotSupportedError):
        filled.x("SELECT * FROM acc, LATERAL generate_series(1, acc.id) WITH ORDINALITY g")


def test_syntax_error_position(db):
    with pytest.raises(errors.SyntaxError_) as ei:
        db.x("SELECT a,\n       b\n  FROM t WHERE x ==== 1")
    assert "line 3" in str(ei.value)
    assert ei.value.line == 3
    with pytest.raises(errors.SyntaxError_) as ei:
        db.x("  frobnicate the table")
    assert ei.value.column == 3 and '"frobnicate"' in str(ei.value)


def test_division_guarded_by_and_is_not_an_error(filled):
    # PostgreSQL evaluates AND left to right: b <> 0 protects the division
    assert sorted(filled.rows("SELECT id FROM acc WHERE bal <> 0 AND 100 / bal >= 1")) == \
        [(1,), (3,)]
    assert sorted(filled.rows("SELECT id FROM acc WHERE bal = 0 OR 100 / bal > 1")) == \
        [(2,), (3,)]
    assert sorted(filled.rows("SELECT CASE WHEN bal = 0 THEN -1 ELSE 100 / bal END FROM acc")) \
        == [(-1,), (1,), (2,)]


def test_statement_error_in_autocommit_keeps_earlier_statements(filled, dumper):
    filled.x("INSERT INTO log VALUES (2, 'kept')")
    before = dumper(filled)
    with pytest.raises(errors.UniqueViolation):
        filled.x("INSERT INTO acc VALUES (5, 1, 'ok'), (1, 1, 'dup')")
    assert dumper(filled) == before
    assert filled.one("SELECT count(*) FROM log") == 2


def test_unknown_setting_and_instance_setting(db):
    with pytest.raises(errors.UndefinedParameter):
        db.x("SET no_such_thing = 1")
    with pytest.raises(errors.CantChangeParameter):
        db.x("SET shared_buffers = 100")
    with pytest.raises(errors.InvalidParameterValue):
        db.x("SET random_page_cost = 'fast'")


def test_error_positions_and_wording(db):
    with pytest.raises(errors.SyntaxError_) as ei:
        db.x("SELECT id, FROM people")
    assert ei.value.position == 12 and '"FROM"' in str(ei.value)
    with pytest.raises(errors.SyntaxError_) as ei:
        db.x("SELECT a, b, FROM t")
    assert ei.value.sqlstate == "42601"
    db.x("CREATE TABLE ep (id integer, s text)")
    with pytest.raises(errors.UndefinedFunction) as ei:
        db.x("SELECT foo(id, s) FROM ep")
    assert str(ei.value) == "function foo(integer, text) does not exist"
    assert ei.value.sqlstate == "42883"
    for sql, word in [("SELECT random(), setseed(0.1)", None),
                      ("SELECT * FROM ep LIMIT ALL", None),
                      ("SELECT generate_series(1, 2)", None)]:
        db.x(sql)                     # once refused with sqlglot's class names
    with pytest.raises(errors.NotSupportedError) as ei:
        db.x("SELECT regexp_replace(s, 'a', 'b') FROM ep")
    msg = str(ei.value)
    assert "function regexp_replace(...) is not supported" == msg
    with pytest.raises(errors.ProgrammingError) as ei:
        db.x("SELECT id FROM ep WHERE row_number() OVER () > 1")
    assert ei.value.sqlstate == "42P20"


def test_repl_caret_under_the_position():
    from minidb.repl.core import caret_lines
    assert caret_lines("SELECT id, FROM people", 12) == \
        "\nLINE 1: SELECT id, FROM people\n                   ^"
    assert caret_lines("SELECT 1\nFROM x WHERE", 21).startswith("\nLINE 2: FROM x WHERE")
