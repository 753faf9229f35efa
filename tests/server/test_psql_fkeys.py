"""PostgreSQL 15's psql ``\\d`` against ``minidb serve`` shows foreign keys as PostgreSQL
does: "Foreign-key constraints:" on the referencing table and "Referenced by:" on the
referenced one (psql asks pg_constraint, pg_get_constraintdef, pg_partition_ancestors and a
VALUES list when pg_class.relhastriggers is true).  Skipped when psql is absent."""

from __future__ import annotations

from tests.server.test_psql_meta import needs_psql, psql


@needs_psql
def test_psql_describe_foreign_keys(server):
    psql(server, "CREATE TABLE p (id integer PRIMARY KEY)",
         "CREATE TABLE c (id int, pid int REFERENCES p ON DELETE CASCADE)")
    child = psql(server, r"\d c")
    assert ('Foreign-key constraints:\n'
            '    "c_pid_fkey" FOREIGN KEY (pid) REFERENCES p(id) ON DELETE CASCADE') in child
    parent = psql(server, r"\d p")
    assert ('Referenced by:\n    TABLE "c" CONSTRAINT "c_pid_fkey" FOREIGN KEY (pid) '
            'REFERENCES p(id) ON DELETE CASCADE') in parent
    assert '"p_pkey" PRIMARY KEY, btree (id)' in parent


def test_repl_describe_foreign_keys(tmp_path):
    """minidb's own REPL shows the same footers (embedded)."""
    from tests.test_repl import run_minidb
    d = str(tmp_path / "data")
    assert run_minidb(d, "-c", "CREATE TABLE p (id integer PRIMARY KEY)", "-c",
                      "CREATE TABLE c (id int, pid int REFERENCES p)").returncode == 0
    out = run_minidb(d, "-c", r"\d c", "-c", r"\d p").stdout
    assert 'Foreign-key constraints:\n    "c_pid_fkey" FOREIGN KEY (pid) REFERENCES p(id)\n' in out
    assert ('Referenced by:\n    TABLE "c" CONSTRAINT "c_pid_fkey" FOREIGN KEY (pid) '
            'REFERENCES p(id)\n') in out
