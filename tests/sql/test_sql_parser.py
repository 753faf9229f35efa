"""The parser: statement splitting (quotes, comments, dollar quotes), the whitelist of
statement shapes (sqlglot's lenient parses refused), syntax error positions, placeholders,
utility statements, and NotSupportedError naming each construct."""

from __future__ import annotations

import pytest

from minidb import errors
from minidb.sql import Engine, ast
from minidb.sql.parser import parse, parse_script


def test_split_statements():
    split = Engine.split_statements
    assert split("select 1; select 2;") == (["select 1", "select 2"], "")
    assert split("select 1; select 'a;b'") == (["select 1"], " select 'a;b'")
    assert split("select 'it''s;'; x") == (["select 'it''s;'"], " x")
    assert split('select "a;b" from t;') == (['select "a;b" from t'], "")
    assert split("select 1 -- c;\n; select 2 /* ; /* nested ; */ */;") == \
        (["select 1 -- c;", "select 2 /* ; /* nested ; */ */"], "")
    assert split("select $$a;b$$; select $tag$ ; $$ ; $tag$;") == \
        (["select $$a;b$$", "select $tag$ ; $$ ; $tag$"], "")
    assert split("select $1; ") == (["select $1"], "")
    assert split("select 'open;") == ([], "select 'open;")
    assert split(";;  -- only a comment\n") == ([], "")
    assert split("select E'a\\';b';") == (["select E'a\\';b'"], "")


def test_statement_shapes():
    assert isinstance(parse("SELECT 1;"), ast.SelectStmt)
    assert isinstance(parse("  select * from t  "), ast.SelectStmt)
    assert isinstance(parse("INSERT INTO t VALUES (1)"), ast.InsertStmt)
    assert isinstance(parse("update t set a = 1"), ast.UpdateStmt)
    assert isinstance(parse("delete from t"), ast.DeleteStmt)
    assert isinstance(parse("create table t (a int)"), ast.CreateTableStmt)
    assert isinstance(parse("create index on t (a)"), ast.CreateIndexStmt)
    assert isinstance(parse("drop table t"), ast.DropTableStmt)
    assert isinstance(parse("drop index i"), ast.DropIndexStmt)
    assert isinstance(parse("truncate t"), ast.TruncateStmt)
    assert parse("begin isolation level repeatable read").isolation == "repeatable read"
    assert parse("start transaction").isolation is None
    assert isinstance(parse("end"), ast.CommitStmt)
    assert isinstance(parse("abort"), ast.RollbackStmt)
    assert parse("set enable_seqscan to off").value == "off"
    assert parse("set random_page_cost = 1.1").value == "1.1"
    assert parse("set search_path = a, b").value == "a, b"
    assert parse("set x to default").value is None
    assert parse("show all").name == "all" and parse("reset all").name == "all"
    v = parse("vacuum (verbose, analyze) a, b")
    assert v.verbose and v.analyze and v.tables == ["a", "b"]
    assert parse("analyze").tables == []
    e = parse("explain (analyze, buffers true, costs off) select 1")
    assert e.analyze and e.buffers and not e.costs and isinstance(e.stmt, ast.SelectStmt)
    c = parse("copy t (a, b) to '/tmp/x' with csv header")
    assert (c.direction, c.format, c.header, c.columns) == ("to", "csv", True, ["a", "b"])
    assert isinstance(parse("checkpoint"), ast.CheckpointStmt)


def test_placeholders_numbered_in_text_order():
    s = parse("SELECT ? FROM t WHERE a = ? AND b = '?' LIMIT ? OFFSET ?")
    assert s.nparams == 4
    assert s.offset == ast.Placeholder(3) and s.limit == ast.Placeholder(2)
    assert parse("SELECT $2, $1").nparams == 2
    assert parse("SELECT '?' -- ?\n").nparams == 0
    with pytest.raises(errors.ProgrammingError):
        parse("SELECT ?, $2")


@pytest.mark.parametrize("sql,where", [
    ("selec * frm t", (1, 1)),
    ("SELECT * FROM t WHERE", (1, 17)),
    ("SELECT (1", (1, 9)),
    ("SELECT 1 FROM t\nWHERE a = = 1", (2, 11)),
    ("\n\n   bogus statement", (3, 4)),
    ("SELECT * FROM t; garbage", (1, 18)),
])
def test_syntax_error_positions(sql, where):
    text = sql
    if ";" in sql:
        with pytest.raises(errors.SyntaxError_) as ei:
            for _, st in parse_script(text):
                if isinstance(st, Exception):
                    raise st
    else:
        with pytest.raises(errors.SyntaxError_) as ei:
            parse(text)
    e = ei.value
    assert e.sqlstate == "42601"
    assert (e.line, e.column) == where, str(e)
    assert f"(line {where[0]}, column {where[1]})" in str(e)


@pytest.mark.parametrize("sql,word", [
    ("SELECT * FROM a, LATERAL generate_series(1, a.x) WITH ORDINALITY g", "WITH ORDINALITY"),
    ("VALUES (1)", "VALUES"),
    ("SELECT * FROM t FOR UPDATE FOR SHARE", "more than one row-locking clause"),
    ("ALTER SEQUENCE s RENAME TO u", "ALTER SEQUENCE ... RENAME"),
    ("INSERT INTO t VALUES (1) ON CONFLICT (a DESC) DO NOTHING", "DESC / NULLS in ON CONFLICT"),
    ("CREATE TABLE t (a int REFERENCES u (a) MATCH FULL)", "MATCH FULL"),
    ("CREATE MATERIALIZED VIEW v AS SELECT 1", "VIEW"),
    ("CREATE INDEX CONCURRENTLY i ON t (a)", "CONCURRENTLY"),
    ("CREATE INDEX i ON t USING hash (a)", "USING"),
    ("CREATE INDEX i ON t (a) INCLUDE (b)", "INCLUDE"),
    ("GRANT SELECT ON t TO bob", "GRANT"),
    ("VACUUM FULL t", "FULL"),
    ("EXPLAIN (FORMAT YAML) SELECT 1", "FORMAT YAML"),
    ("SET LOCAL a = 1", "SET LOCAL"),
    ("COMMIT AND CHAIN", "AND CHAIN"),   # (savepoints, once here, are supported now)
    ("COPY (SELECT 1) TO '/tmp/x'", "COPY (query)"),
    ("SELECT ARRAY[1, 2]", "array"),
    ("SELECT a FROM t WHERE a > ALL (SELECT 1)", "ALL"),
    ("SELECT to_date('2020', 'YYYY'), random()", "function to_date(...)"),
])
def test_unsupported_constructs_are_named(sql, word):
    with pytest.raises(errors.NotSupportedError) as ei:
        parse(sql)
    assert word.lower() in str(ei.value).lower(), str(ei.value)
    assert ei.value.sqlstate == "0A000"


@pytest.mark.parametrize("sql,cls,name", [
    ("SAVEPOINT s1", "SavepointStmt", "s1"),
    ('savepoint "_pg3_1"', "SavepointStmt", "_pg3_1"),
    ("RELEASE s1", "ReleaseStmt", "s1"),
    ("RELEASE SAVEPOINT s1", "ReleaseStmt", "s1"),
    ("ROLLBACK TO s1", "RollbackToStmt", "s1"),
    ("ROLLBACK WORK TO SAVEPOINT S1", "RollbackToStmt", "s1"),
])
def test_savepoint_statements(sql, cls, name):
    st = parse(sql)
    assert type(st).__name__ == cls and st.name == name


def test_abort_to_is_a_syntax_error():   # as PostgreSQL: only ROLLBACK has TO
    with pytest.raises(errors.SyntaxError_):
        parse("ABORT TO s1")


def test_quoted_identifiers_keep_case(db):
    db.x('CREATE TABLE "Mixed" ("Col" int, low int)')
    db.x('INSERT INTO "Mixed" VALUES (1, 2)')
    assert db.rows('SELECT "Col", LOW FROM "Mixed"') == [(1, 2)]
    with pytest.raises(errors.UndefinedTable):
        db.x("SELECT * FROM mixed")


def test_execute_script(db):
    res = db.engine.execute_script("CREATE TABLE s (a int); INSERT INTO s VALUES (1), (2);\n"
                                   "SELECT count(*) FROM s; -- done\n")
    assert [r.status for r in res] == ["CREATE TABLE", "INSERT 0 2", "SELECT 1"]
    assert res[2].rows == [(2,)]
    with pytest.raises(errors.SyntaxError_):
        db.engine.execute_script("INSERT INTO s VALUES (3); oops; INSERT INTO s VALUES (4)")
    assert db.one("SELECT count(*) FROM s") == 3        # stops at the error


@pytest.mark.parametrize("sql,params,want", [
    ("select ?,?", (1, 2), [(1, 2)]),
    ("select $1,$2", (1, 2), [(1, 2)]),
    ("select $2,$1", (1, 2), [(2, 1)]),
    ("select ?,?+?", (1, 2, 3), [(1, 5)]),
    ("insert into pc values (?,?)", (7, 8), [(7, 8)]),
])
def test_placeholders_next_to_commas(db, sql, params, want):
    # sqlglot reads "$1,$" as the start of a dollar-quoted string: the rewrite of ? to $n
    # must keep them apart, for "?,?" as for "$1,$2", and bind each in its place
    assert parse(sql).nparams == len(params)
    db.x("CREATE TABLE pc (a int, b int)")
    res = db.x(sql, *params)
    assert (db.rows("SELECT a, b FROM pc") if sql.startswith("insert") else res.rows) == want


def test_syntax_error_hides_parser_internals():
    with pytest.raises(errors.SyntaxError_) as ei:
        parse("select * from t where")
    assert "<class" not in str(ei.value) and "column 23" not in str(ei.value)
    assert 'at or near "where"' in str(ei.value)
