"""PostgreSQL 15's psql against ``minidb serve``: its catalog meta-commands (``\\dt``,
``\\di``, ``\\d[+] TABLE``, ``\\d INDEX``, ``\\d``, ``\\l``, ``\\dn``, ``\\du``, ``\\df``) list the
right tables, columns with their types, indexes, roles and functions; psycopg's type loading
works.  The statements psql sends for them are in ``psql_queries/`` (captured from a
PostgreSQL 15 with log_statement = all); minidb answers them from its virtual pg_catalog
(``minidb.catalog.pgcatalog``).  The psql test is skipped when psql is absent."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

needs_psql = pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")


def psql(server, *commands) -> str:
    args = ["psql", "-X", "-h", server.datadir, "-p", str(server.port), "-U", "me", "minidb",
            "-v", "ON_ERROR_STOP=1"]
    for c in commands:
        args += ["-c", c]
    env = dict(os.environ, PGCONNECT_TIMEOUT="60", PAGER="", PSQL_PAGER="")
    p = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr + server.output()[-2000:]
    assert "ERROR" not in p.stderr, p.stderr
    return p.stdout


def table_lines(out: str) -> list[list[str]]:
    """The data rows of psql's aligned output, as lists of stripped cells."""
    rows = []
    for line in out.splitlines():
        if " | " in line and not line.lstrip().startswith(("Schema", "Column", "Name")):
            rows.append([c.strip() for c in line.split("|")])
    return rows


@needs_psql
def test_psql_describe_commands(server):
    psql(server, "CREATE TABLE accounts (aid integer PRIMARY KEY, bid integer NOT NULL, "
                 "abalance bigint DEFAULT 0, filler char(84), note varchar(20))",
         "CREATE INDEX accounts_bid ON accounts (bid)",
         "CREATE TABLE branches (bid integer, bname text)")

    dt = psql(server, r"\dt")
    assert "List of relations" in dt
    assert table_lines(dt) == [["public", "accounts", "table", "minidb"],
                               ["public", "branches", "table", "minidb"]]
    assert "(2 rows)" in dt

    d = psql(server, r"\d")
    assert table_lines(d) == table_lines(dt)

    di = psql(server, r"\di")
    assert table_lines(di) == [["public", "accounts_bid", "index", "minidb", "accounts"],
                               ["public", "accounts_pkey", "index", "minidb", "accounts"]]

    desc = psql(server, r"\d accounts")
    assert 'Table "public.accounts"' in desc
    cols = {r[0]: r[1:] for r in table_lines(desc)}
    assert cols == {"aid": ["integer", "", "not null", ""],
                    "bid": ["integer", "", "not null", ""],
                    "abalance": ["bigint", "", "", "0"],
                    "filler": ["character(84)", "", "", ""],
                    "note": ["character varying(20)", "", "", ""]}
    assert "Indexes:" in desc
    assert '"accounts_pkey" PRIMARY KEY, btree (aid)' in desc
    assert '"accounts_bid" btree (bid)' in desc

    lst = psql(server, r"\l")
    assert "List of databases" in lst
    assert table_lines(lst)[0][:3] == ["minidb", "minidb", "UTF8"]

    dn = psql(server, r"\dn")
    assert table_lines(dn) == [["public", "minidb"]]

    dtp = psql(server, r"\dt+ accounts")
    (row,) = table_lines(dtp)
    assert row[:6] == ["public", "accounts", "table", "minidb", "permanent", "heap"]
    assert row[6].endswith(("bytes", "kB"))

    dplus = psql(server, r"\d+ accounts")
    assert "Storage" in dplus and "Access method: heap" in dplus
    assert {r[0]: r[5] for r in table_lines(dplus)}["filler"] == "extended"

    dix = psql(server, r"\d accounts_bid")
    assert 'Index "public.accounts_bid"' in dix
    assert table_lines(dix) == [["bid", "integer", "yes", "bid"]]
    assert 'btree, for table "public.accounts"' in dix
    assert 'primary key, btree, for table "public.accounts"' in psql(server,
                                                                     r"\d accounts_pkey")

    du = psql(server, r"\du")
    assert "List of roles" in du
    (row,) = [r for r in table_lines(du) if r[0] != "Role name"]
    assert row[0] == "minidb" and row[1].startswith("Superuser") and row[2] == "{}"

    df = psql(server, r"\df")
    assert "List of functions" in df and "(0 rows)" in df
    dfs = psql(server, r"\dfS lower")
    assert table_lines(dfs) == [["pg_catalog", "lower", "", "", "func"]]

    missing = subprocess.run(["psql", "-X", "-h", server.datadir, "-U", "me", "minidb", "-c",
                              r"\d nosuch"], capture_output=True, text=True, timeout=120)
    assert 'Did not find any relation named "nosuch"' in missing.stderr


def test_psycopg_type_info(server):
    """psycopg 3's type loading (TypeInfo.fetch: pg_type, to_regtype, ::regtype)."""
    pytest.importorskip("psycopg")
    from psycopg.types import TypeInfo
    with server.connect() as conn:
        info = TypeInfo.fetch(conn, "varchar")
        assert (info.name, info.oid, info.array_oid) == ("varchar", 1043, 1015)
        assert TypeInfo.fetch(conn, "nosuch") is None
        assert conn.execute("SELECT current_setting('server_encoding'), "
                            "current_setting('client_encoding')").fetchone() == ("UTF8", "UTF8")
