"""The fixed data and queries of ``test_sql_grouping_sets.py`` (GROUPING SETS, ROLLUP,
CUBE, grouping(): sqlite3 has none of them), and the program that asked PostgreSQL 15 for
their answers (``golden/pg15_grouping.json``).

    python tests/sql/pg_grouping_queries.py --start-local     # regenerates the golden file

Answers are PostgreSQL's text output (psql -A), NULL as ``<NULL>``, as in
``pg_golden_queries.py``, whose ``_psql`` this uses.  Every query orders its rows
completely (the order of grouping-set rows without ORDER BY depends on the plan).
"""

from __future__ import annotations

import json
import os
import sys

SETUP = [
    "CREATE TABLE g (id integer PRIMARY KEY, a integer, b integer, c text, x double precision)",
    "INSERT INTO g VALUES (1, 1, 1, 'p', 1.5), (2, NULL, 2, 'q', 2.0), (3, 2, NULL, NULL, NULL), "
    "(4, 1, 3, 'p', -1.0), (5, 3, 1, 'q', 4.0), (6, 2, 2, 'p', 0.5), (7, 1, 1, NULL, 3.0), "
    "(8, NULL, NULL, 'q', 1.0)",
    "CREATE TABLE e (a integer, b integer)",
]

_O3 = " ORDER BY 1 NULLS FIRST, 2 NULLS FIRST, 3"
QUERIES = [
    "SELECT a, b, count(*), sum(id) FROM g GROUP BY ROLLUP (a, b) ORDER BY 1, 2, 3, 4",
    "SELECT a, b, grouping(a, b), sum(x) FROM g GROUP BY CUBE (a, b) ORDER BY 3, 1, 2",
    "SELECT a, c, grouping(a), grouping(c), grouping(c, a), count(b) FROM g "
    "GROUP BY GROUPING SETS ((a, c), (a), (c), ()) ORDER BY 3, 4, 1, 2",
    "SELECT a, b, c, count(*) FROM g GROUP BY a, ROLLUP (b, c) ORDER BY 1, 2, 3, 4",
    "SELECT a, b, c, count(*) FROM g GROUP BY ROLLUP (a, (b, c)) ORDER BY 1, 2, 3, 4",
    "SELECT a, b, count(*) FROM g GROUP BY GROUPING SETS (a, ROLLUP (b), CUBE (a)) "
    "ORDER BY 1, 2, 3",
    "SELECT a, b, count(*) FROM g GROUP BY a, ROLLUP (a, b) ORDER BY 1, 2, 3",
    "SELECT a, b, count(*) FROM g GROUP BY ROLLUP (a), CUBE (b) ORDER BY 1, 2, 3",
    "SELECT a, sum(id), grouping(a) FROM g GROUP BY ROLLUP (a) "
    "HAVING grouping(a) = 1 OR sum(id) > 5 ORDER BY 1, 2",
    "SELECT a + 1 AS a1, count(*) FROM g GROUP BY ROLLUP (a + 1) ORDER BY 1, 2",
    "SELECT count(*), sum(a) FROM g GROUP BY ()",
    "SELECT count(*) FROM e GROUP BY GROUPING SETS ((), a) ORDER BY 1",
    "SELECT a, count(*) FROM e GROUP BY ROLLUP (a) ORDER BY 1",
    "SELECT count(*) FROM e GROUP BY a",
    "SELECT c, grouping(c), min(x), max(b), avg(x) FROM g GROUP BY CUBE (c) ORDER BY 2, 1",
    "SELECT a, grouping(a), rank() OVER (PARTITION BY grouping(a) ORDER BY sum(id) DESC) "
    "FROM g GROUP BY ROLLUP (a) ORDER BY 2, 1",
    "SELECT a, b, string_agg(c, ',' ORDER BY id) FROM g GROUP BY GROUPING SETS ((a), (b)) "
    "ORDER BY 1, 2",
    "SELECT CASE WHEN grouping(a) = 1 THEN 'all' ELSE a::text END, count(*) FROM g "
    "GROUP BY ROLLUP (a) ORDER BY 1",
    "SELECT a, b, count(*) FROM g GROUP BY 1, ROLLUP (2) ORDER BY 1, 2, 3",
    "SELECT a, b, count(DISTINCT c) FROM g GROUP BY CUBE (a, b)" + _O3,
]


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, root)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench.compare_postgres import libpq_env, local_server
    from pg_golden_queries import _psql
    if "--start-local" not in sys.argv:
        raise SystemExit("usage: python tests/sql/pg_grouping_queries.py --start-local")
    with local_server(port=54332) as dsn:
        env = libpq_env(dsn)
        for s in SETUP:
            _psql(env, s)
        version = _psql(env, "SHOW server_version")[0][0]
        answers = {q: _psql(env, q) for q in QUERIES}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden",
                        "pg15_grouping.json")
    with open(path, "w") as f:
        json.dump({"server_version": version, "answers": answers}, f, indent=1,
                  ensure_ascii=False)
        f.write("\n")
    print(f"wrote {path} ({len(answers)} answers from PostgreSQL {version})")


if __name__ == "__main__":
    main()
