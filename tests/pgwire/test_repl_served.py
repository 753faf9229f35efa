"""The REPL on a data directory a server holds: SQL through the socket, ``\\dt`` and ``\\d
TABLE`` answered by SQL, the other informational commands saying they need an embedded open;
``minidb DATADIR -c`` picks the server by itself."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import minidb
from minidb.dbapi import RemoteConnection
from minidb.repl import Repl


def _repl(conn):
    out, err = io.StringIO(), io.StringIO()
    return Repl(conn, out=out, err=err), out, err


def test_repl_through_the_server(module_server):
    conn = minidb.connect(module_server.datadir)
    assert isinstance(conn, RemoteConnection)
    conn.autocommit = True
    try:
        r, out, err = _repl(conn)
        assert r.run_command("CREATE TABLE fruit (id integer PRIMARY KEY, name varchar(10) "
                             "NOT NULL); INSERT INTO fruit VALUES (1, 'apple'), (2, 'pear')")
        assert r.run_command("SELECT name FROM fruit ORDER BY id")
        assert " apple\n pear\n(2 rows)" in out.getvalue()
        assert r.run_command("\\dt fr*")
        assert " fruit | table" in out.getvalue()
        assert r.run_command("\\d fruit")
        text = out.getvalue()
        assert 'Table "fruit"' in text and "character varying(10) | not null" in text
        assert '"fruit_pkey" PRIMARY KEY, btree (id)' in text
        assert not r.run_command("\\page fruit 0")
        assert "held by a server" in err.getvalue()
        # the prompt's transaction status comes from the server's ReadyForQuery
        assert r.run_command("BEGIN") and conn.transaction_status == "in transaction"
        assert not r.run_command("SELECT 1 / 0")
        assert conn.transaction_status == "failed"
        assert r.run_command("ROLLBACK") and conn.transaction_status == "idle"
    finally:
        conn.close()


def test_minidb_command_on_a_served_directory(module_server):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.run([sys.executable, "-m", "minidb.cli", module_server.datadir, "-c",
                        "SELECT 40 + 2 AS answer"], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    assert " answer \n--------\n     42\n(1 row)" in p.stdout
