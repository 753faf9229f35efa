"""PostgreSQL 15's psql against ``minidb serve`` for views and CHECK constraints: ``\\dv``
lists a view, ``\\d VIEW`` describes its columns, ``\\d TABLE`` has the "Check
constraints:" footer with each constraint's definition.  Skipped when psql is absent."""

from __future__ import annotations

from tests.server.test_psql_meta import needs_psql, psql, table_lines


@needs_psql
def test_psql_views_and_checks(server):
    psql(server, "CREATE TABLE c (a integer CHECK (a > 0), b integer, "
                 "CONSTRAINT ab CHECK (a < b))",
         "CREATE VIEW v AS SELECT a, b FROM c WHERE a > 1")
    dv = psql(server, r"\dv")
    assert table_lines(dv) == [["public", "v", "view", "minidb"]]
    dc = psql(server, r"\d c")
    assert "Check constraints:" in dc
    assert '"ab" CHECK (a < b)' in dc and '"c_a_check" CHECK (a > 0)' in dc
    d = psql(server, r"\d v")
    assert 'View "public.v"' in d
    assert [r[:2] for r in table_lines(d)] == [["a", "integer"], ["b", "integer"]]
