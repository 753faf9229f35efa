"""PostgreSQL's catalog as clients read it (minidb.catalog.pgcatalog), through the DB-API:
the virtual pg_catalog relations, information_schema / pg_tables / pg_indexes, schema-
qualified names, ``::regclass`` / ``::oid``, the catalog functions, and the statements
PostgreSQL 15's psql sends for ``\\d``, ``\\dt``, ``\\di``, ``\\l``, ``\\dn`` (captured with
log_statement = all: tests/server/psql_queries), and for ``\\d INDEX``, ``\\du``, ``\\df``
(pg_proc, ARRAY(subquery))."""

from __future__ import annotations

import os
import re

import pytest

import minidb
from minidb import errors

QUERIES = os.path.join(os.path.dirname(__file__), "..", "server", "psql_queries")


def psql_statements(name: str) -> list[str]:
    with open(os.path.join(QUERIES, name + ".sql")) as f:
        text = f.read()
    out = []
    for part in re.split(r"^-- next$", text, flags=re.M):
        part = re.sub(r"^-- psql.*$", "", part, flags=re.M).strip().rstrip(";")
        out.append(part)
    return out


@pytest.fixture(scope="module")
def cur(tmp_path_factory):
    con = minidb.connect(str(tmp_path_factory.mktemp("pgcat") / "data"), max_worker_processes=0)
    c = con.cursor()
    c.execute("CREATE TABLE accounts (aid integer PRIMARY KEY, bid integer NOT NULL, "
              "abalance bigint DEFAULT 0, filler char(84), note varchar(20))")
    c.execute("CREATE INDEX accounts_bid ON accounts (bid)")
    c.execute("CREATE TABLE branches (bid integer, bname text)")
    con.commit()
    yield c
    con.rollback()
    con.close()


def rows(cur, sql, *params):
    try:
        cur.execute(sql, params or None)
        return cur.fetchall()
    except Exception:
        cur.connection.rollback()
        raise


def oid_of(cur, name):
    return rows(cur, "SELECT oid FROM pg_class WHERE relname = ?", name)[0][0]


def test_pg_class_namespace_and_kinds(cur):
    got = rows(cur, "SELECT n.nspname, c.relname, c.relkind, c.relam, c.relhasindex "
                    "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
                    "ON n.oid = c.relnamespace ORDER BY c.relname")
    assert ("public", "accounts", "r", 2, True) in got
    assert ("public", "accounts_bid", "i", 403, False) in got
    assert ("public", "accounts_pkey", "i", 403, False) in got
    assert ("public", "branches", "r", 2, False) in got
    assert ("pg_catalog", "pg_class", "r", 2, False) in got
    assert rows(cur, "SELECT nspname FROM pg_namespace ORDER BY oid") == [
        ("pg_catalog",), ("public",), ("information_schema",)]
    # the stored catalog's columns are there too, unchanged
    assert rows(cur, "SELECT relnatts, reltuples FROM pg_class WHERE relname = 'accounts'") \
        == [(5, -1.0)]


def test_pg_attribute_format_type_and_defaults(cur):
    got = rows(cur, "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), "
                    "a.attnotnull, a.atthasdef FROM pg_catalog.pg_attribute a "
                    "WHERE a.attrelid = 'accounts'::regclass AND a.attnum > 0 "
                    "AND NOT a.attisdropped ORDER BY a.attnum")
    assert got == [("aid", "integer", True, False), ("bid", "integer", True, False),
                   ("abalance", "bigint", False, True), ("filler", "character(84)", False, False),
                   ("note", "character varying(20)", False, False)]
    assert rows(cur, "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef "
                     "WHERE adrelid = 'public.accounts'::regclass") == [("0",)]


def test_pg_index_and_indexdef(cur):
    got = rows(cur, "SELECT c2.relname, i.indisprimary, i.indisunique, i.indkey, "
                    "pg_catalog.pg_get_indexdef(i.indexrelid, 0, true) "
                    "FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c2 "
                    "ON c2.oid = i.indexrelid WHERE i.indrelid = 'accounts'::regclass "
                    "ORDER BY i.indisprimary DESC, c2.relname")
    assert got == [("accounts_pkey", True, True, "1",
                    "CREATE UNIQUE INDEX accounts_pkey ON public.accounts USING btree (aid)"),
                   ("accounts_bid", False, False, "2",
                    "CREATE INDEX accounts_bid ON public.accounts USING btree (bid)")]


def test_types_roles_database(cur):
    types = dict(rows(cur, "SELECT typname, oid FROM pg_catalog.pg_type"))
    assert types["int4"] == 23 and types["int8"] == 20 and types["text"] == 25
    assert types["varchar"] == 1043 and types["bool"] == 16
    assert rows(cur, "SELECT rolname FROM pg_roles") == [("minidb",)]
    assert rows(cur, "SELECT usename FROM pg_user") == [("minidb",)]
    assert rows(cur, "SELECT datname, pg_encoding_to_char(encoding), "
                     "pg_get_userbyid(datdba) FROM pg_database") == [("minidb", "UTF8", "minidb")]
    assert rows(cur, "SELECT amname FROM pg_am ORDER BY oid") == [("heap",), ("btree",)]


def test_regclass_oid_casts(cur):
    oid = oid_of(cur, "accounts")
    assert rows(cur, "SELECT 'accounts'::regclass, 'accounts'::regclass::oid") == [(oid, oid)]
    assert rows(cur, "SELECT c.oid::pg_catalog.regclass FROM pg_class c WHERE c.oid = ?",
                oid) == [("accounts",)]
    with pytest.raises(errors.ProgrammingError, match='relation "nope" does not exist'):
        rows(cur, "SELECT 'nope'::regclass")


def test_schema_qualified_names(cur):
    assert rows(cur, "SELECT count(*) FROM public.accounts") == [(0,)]
    assert rows(cur, "SELECT relname FROM pg_catalog.pg_class WHERE relname "
                     "OPERATOR(pg_catalog.~) '^(branches)$' COLLATE pg_catalog.default") == [
        ("branches",)]
    with pytest.raises(errors.ProgrammingError, match='schema "other" does not exist') as e:
        rows(cur, "SELECT * FROM other.accounts")
    assert e.value.sqlstate == "3F000"


def test_functions(cur):
    assert rows(cur, "SELECT pg_catalog.pg_table_is_visible('accounts'::regclass), "
                     "obj_description('accounts'::regclass, 'pg_class'), "
                     "pg_catalog.array_to_string(NULL, ','), "
                     "current_setting('enable_seqscan'), current_setting('server_encoding')") \
        == [(True, None, None, "on", "UTF8")]
    assert rows(cur, "SELECT E'a\\nb'") == [("a\nb",)]
    with pytest.raises(errors.ProgrammingError, match="unrecognized configuration parameter"):
        rows(cur, "SELECT current_setting('no_such_setting')")


def test_information_schema_and_views(cur):
    assert rows(cur, "SELECT table_name, table_type FROM information_schema.tables "
                     "WHERE table_schema = 'public' ORDER BY 1") == [
        ("accounts", "BASE TABLE"), ("branches", "BASE TABLE")]
    assert rows(cur, "SELECT column_name, data_type, is_nullable, column_default, "
                     "character_maximum_length FROM information_schema.columns "
                     "WHERE table_name = 'accounts' ORDER BY ordinal_position") == [
        ("aid", "integer", "NO", None, None), ("bid", "integer", "NO", None, None),
        ("abalance", "bigint", "YES", "0", None), ("filler", "character", "YES", None, 84),
        ("note", "character varying", "YES", None, 20)]
    assert rows(cur, "SELECT tablename, hasindexes FROM pg_tables WHERE schemaname = 'public' "
                     "ORDER BY 1") == [("accounts", True), ("branches", False)]
    assert rows(cur, "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'accounts' "
                     "ORDER BY 1")[0] == (
        "accounts_bid", "CREATE INDEX accounts_bid ON public.accounts USING btree (bid)")


def test_catalog_relations_are_read_only(cur):
    with pytest.raises(errors.Error):
        rows(cur, "INSERT INTO pg_namespace VALUES (1, 'x', 10, NULL)")


def test_sees_own_uncommitted_ddl(cur):
    cur.execute("CREATE TABLE scratch (x integer)")
    assert rows(cur, "SELECT count(*) FROM pg_tables WHERE tablename = 'scratch'") == [(1,)]
    cur.connection.rollback()
    assert rows(cur, "SELECT count(*) FROM pg_tables WHERE tablename = 'scratch'") == [(0,)]


def test_psql_describe_queries(cur):
    """psql 15's own statements, as captured, run and answer what psql needs."""
    oid = oid_of(cur, "accounts")
    for name in ("d", "dt"):
        (q,) = psql_statements(name)
        assert rows(cur, q) == [("public", "accounts", "table", "minidb"),
                                ("public", "branches", "table", "minidb")]
    (q,) = psql_statements("di")
    assert rows(cur, q) == [("public", "accounts_bid", "index", "minidb", "accounts"),
                            ("public", "accounts_pkey", "index", "minidb", "accounts")]
    (q,) = psql_statements("dn")
    assert rows(cur, q) == [("public", "minidb")]
    (q,) = psql_statements("l")
    assert [r[:3] for r in rows(cur, q)] == [("minidb", "minidb", "UTF8")]
    qs = [q.replace("'16384'", f"'{oid}'") for q in psql_statements("d_table")]
    assert len(qs) == 9
    assert rows(cur, qs[0]) == [(oid, "public", "accounts")]
    assert rows(cur, qs[1])[0][:3] == (0, "r", True)
    cols = rows(cur, qs[2])
    assert [(c[0], c[1], c[2], c[3]) for c in cols] == [
        ("aid", "integer", None, True), ("bid", "integer", None, True),
        ("abalance", "bigint", "0", False), ("filler", "character(84)", None, False),
        ("note", "character varying(20)", None, False)]
    assert [r[0] for r in rows(cur, qs[3])] == ["accounts_pkey", "accounts_bid"]
    for q in qs[4:]:        # policies, extended statistics, publications, inheritance
        assert rows(cur, q) == []


def test_types_by_name_and_sizes(cur):
    assert rows(cur, "SELECT typname, typarray, typdelim FROM pg_type "
                     "WHERE oid = to_regtype('integer')") == [("int4", 1007, ",")]
    assert rows(cur, "SELECT to_regtype('nosuch'), 'text'::regtype, "
                     "23::regtype") == [(None, 25, "integer")]
    cur.execute("INSERT INTO branches SELECT g, 'b' FROM generate_series(1, 500) g")
    got = rows(cur, "SELECT pg_relation_size('branches'::regclass), "
                    "pg_total_relation_size('accounts'::regclass), "
                    "pg_indexes_size('accounts'::regclass), pg_size_pretty(20480::bigint), "
                    "pg_size_pretty(pg_relation_size('branches'::regclass))")
    cur.connection.rollback()
    pages, total, idx, pretty, own = got[0]
    assert pages > 0 and pages % 8192 == 0
    assert total >= idx >= 2 * 8192          # two indexes: their metapages at least
    assert pretty == "20 kB" and own == f"{pages // 1024} kB"


def test_psql_index_roles_and_functions(cur):
    """The statements of psql 15's ``\\d INDEX``, ``\\du`` and ``\\df``."""
    oid = oid_of(cur, "accounts_bid")
    qs = [q.replace("'16389'", f"'{oid}'") for q in psql_statements("d_index")]
    assert len(qs) == 4
    assert rows(cur, qs[0]) == [(oid, "public", "accounts_bid")]
    assert rows(cur, qs[1])[0][:3] == (0, "i", False)
    assert rows(cur, qs[2]) == [("bid", "integer", "yes", "bid")]
    assert rows(cur, qs[3]) == [(False, False, False, True, False, False, False, False,
                                 "btree", "accounts", None)]
    (q,) = psql_statements("du")
    assert rows(cur, q) == [("minidb", True, True, True, True, True, -1, None, [], True, True)]
    (q,) = psql_statements("df")
    assert rows(cur, q) == []           # no user functions: every function is pg_catalog's
    got = dict(rows(cur, "SELECT proname, prokind FROM pg_proc WHERE proname IN "
                         "('lower', 'sum', 'rank', 'pg_get_indexdef')"))
    assert got == {"lower": "f", "sum": "a", "rank": "w", "pg_get_indexdef": "f"}


def test_array_subquery(cur):
    """ARRAY(subquery): the column's values in the subquery's order, NULLs kept, ``{}``
    when it has no row; correlated or not."""
    cur.execute("CREATE TABLE arr (id integer, g integer, name text)")
    cur.execute("INSERT INTO arr VALUES (1, 1, 'x'), (2, 1, 'y'), (3, 2, NULL)")
    try:
        assert rows(cur, "SELECT ARRAY(SELECT name FROM arr ORDER BY id)") == \
            [(["x", "y", None],)]
        assert rows(cur, "SELECT ARRAY(SELECT id FROM arr WHERE id > 9)") == [([],)]
        assert rows(cur, "SELECT a.id, ARRAY(SELECT b.id FROM arr b WHERE b.g = a.g "
                         "ORDER BY b.id DESC) FROM arr a ORDER BY a.id") == \
            [(1, [2, 1]), (2, [2, 1]), (3, [3])]
        assert rows(cur, "SELECT pg_catalog.array_to_string(ARRAY(SELECT name FROM arr "
                         "WHERE name IS NOT NULL ORDER BY id), ', ')") == [("x, y",)]
    finally:
        cur.connection.rollback()


def test_every_type_has_its_pg_type_row(cur):
    """format_type / pg_type for every type minidb has (psql's \\d shows their names)."""
    cur.execute("CREATE TABLE ty (a smallint, b real, c numeric(12,4), d date, e time, "
                "f timestamptz, g interval, h bytea, i uuid, j numeric)")
    try:
        got = rows(cur, "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), "
                        "t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
                        "WHERE a.attrelid = 'ty'::regclass ORDER BY a.attnum")
        assert got == [("a", "smallint", "int2"), ("b", "real", "float4"),
                       ("c", "numeric(12,4)", "numeric"), ("d", "date", "date"),
                       ("e", "time without time zone", "time"),
                       ("f", "timestamp with time zone", "timestamptz"),
                       ("g", "interval", "interval"), ("h", "bytea", "bytea"),
                       ("i", "uuid", "uuid"), ("j", "numeric", "numeric")]
        assert rows(cur, "SELECT to_regtype('float4'), to_regtype('timestamp with time zone')"
                    ) == [(700, 1184)]
    finally:
        cur.connection.rollback()


def test_psql_describe_plus_and_unnest(cur):
    """psql 15's ``\\d+ TABLE``: reloptions (an array), ``unnest`` in FROM reading the
    enclosing query's row, ``array || array``, the columns' storage."""
    oid = oid_of(cur, "accounts")
    qs = [q.replace("'16384'", f"'{oid}'") for q in psql_statements("dplus_table")]
    assert len(qs) == 9
    assert rows(cur, qs[1]) == [(0, "r", True, False, False, False, False, False, False, "",
                                 0, "", "p", "d", "heap")]
    assert [(r[0], r[1], r[7]) for r in rows(cur, qs[2])] == [
        ("aid", "integer", "p"), ("bid", "integer", "p"), ("abalance", "bigint", "p"),
        ("filler", "character(84)", "x"), ("note", "character varying(20)", "x")]
    assert rows(cur, "SELECT x FROM unnest(ARRAY(SELECT relname FROM pg_class WHERE "
                     "relname LIKE 'accounts%' ORDER BY 1)) x") == \
        [("accounts",), ("accounts_bid",), ("accounts_pkey",)]
    assert rows(cur, "SELECT ARRAY(SELECT 1) || ARRAY(SELECT 2), "
                     "ARRAY(SELECT 1 WHERE false) || ARRAY(SELECT 3)") == [([1, 2], [3])]
