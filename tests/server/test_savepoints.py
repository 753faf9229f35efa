"""Savepoints over the wire (``minidb.txn.subxact``): psycopg's nested ``conn.transaction()``
blocks and psql's ON_ERROR_ROLLBACK both run on SAVEPOINT / RELEASE / ROLLBACK TO against
``minidb serve``.  The psql test skips when psql is not installed."""

from __future__ import annotations

import shutil
import subprocess

import pytest

psycopg = pytest.importorskip("psycopg")


def test_psycopg_nested_transactions(module_server):
    with module_server.connect() as conn:
        conn.execute("create table nest (k int primary key, v text)")
        conn.commit()
        with conn.transaction():
            conn.execute("insert into nest values (1, 'outer')")
            with pytest.raises(psycopg.errors.UniqueViolation):
                with conn.transaction():           # SAVEPOINT "_pg3_1"
                    conn.execute("insert into nest values (2, 'inner')")
                    conn.execute("insert into nest values (1, 'again')")
            # psycopg rolled back to its savepoint: the block goes on
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
            with conn.transaction():
                conn.execute("insert into nest values (3, 'kept')")
                with conn.transaction(force_rollback=True):
                    conn.execute("update nest set v = 'gone' where k = 3")
            assert conn.execute("select v from nest where k = 3").fetchone() == ("kept",)
        conn.commit()
        rows = conn.execute("select k, v from nest order by k").fetchall()
        assert rows == [(1, "outer"), (3, "kept")]
        conn.commit()
        conn.execute("begin")
        with pytest.raises(psycopg.errors.InvalidSavepointSpecification):
            conn.execute("rollback to savepoint nope")
        conn.rollback()


def test_psql_on_error_rollback(module_server, tmp_path):
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("psql is not installed")
    script = tmp_path / "s.sql"
    script.write_text("CREATE TABLE oer (k integer PRIMARY KEY);\n"
                      "BEGIN;\nINSERT INTO oer VALUES (1);\nINSERT INTO oer VALUES (1);\n"
                      "INSERT INTO oer VALUES (2);\nCOMMIT;\n"
                      "SELECT k FROM oer ORDER BY k;\n")
    p = subprocess.run([psql, "-X", "-h", module_server.datadir, "-U", "tester", "-d", "minidb",
                        "-v", "ON_ERROR_ROLLBACK=on", "-A", "-t", "-f", str(script)],
                       capture_output=True, text=True, timeout=300)
    assert "duplicate key value violates unique constraint" in p.stderr
    # the failed INSERT was rolled back to psql's savepoint; the block committed the rest
    assert p.stdout.split() == ["CREATE", "TABLE", "BEGIN", "INSERT", "0", "1", "INSERT",
                                "0", "1", "COMMIT", "1", "2"]
