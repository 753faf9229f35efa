"""The fixed data and queries of ``test_sql_pg_golden.py``, and the program that asked
PostgreSQL 15 for their answers (``golden/pg15.json``).

    python tests/sql/pg_golden_queries.py --start-local     # regenerates the golden file

Each answer is stored as PostgreSQL's text output (psql -A): values as text, NULL as
``<NULL>``, one list per row.  The test converts minidb's values to the same text and
compares numbers with a tolerance (PostgreSQL's numeric results, e.g. avg, are doubles in
minidb).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

SETUP = [
    "CREATE TABLE t1 (id integer PRIMARY KEY, a integer, b integer, s text)",
    "CREATE TABLE t2 (id integer PRIMARY KEY, a integer, d integer, s text)",
    "CREATE TABLE tz (id integer, ts timestamp)",
    "INSERT INTO t1 VALUES (1, 1, 1, 'a'), (2, NULL, 2, 'b'), (3, 2, NULL, NULL), "
    "(4, 1, 3, 'ab'), (5, 3, 0, ''), (6, 2, 2, 'abc')",
    "INSERT INTO t2 VALUES (1, 1, 2, 'a'), (2, NULL, 1, NULL), (3, 2, 3, 'b'), "
    "(4, 4, NULL, 'ab'), (5, 1, 5, 'zz')",
    "INSERT INTO tz VALUES (1, '2021-03-04 05:06:07.25'), (2, '1999-12-31 23:59:59'), "
    "(3, '2024-02-29 12:00:00')",
]

QUERIES = [
    "SELECT a FROM t1 INTERSECT ALL SELECT a FROM t2",
    "SELECT a FROM t1 EXCEPT ALL SELECT a FROM t2",
    "SELECT b FROM t1 UNION SELECT d FROM t2 EXCEPT SELECT a FROM t2",
    "SELECT a FROM t1 UNION ALL SELECT a FROM t2 ORDER BY 1 NULLS FIRST LIMIT 4 OFFSET 1",
    "SELECT DISTINCT ON (a) a, id FROM t1 ORDER BY a, id DESC",
    "SELECT DISTINCT ON (b % 2) b % 2, id, s FROM t1 ORDER BY b % 2, s DESC NULLS LAST",
    "SELECT count(*) FILTER (WHERE a > 1), sum(b) FILTER (WHERE s IS NOT NULL) FROM t1",
    "SELECT a, count(*) FILTER (WHERE b > 0), count(*) FROM t1 GROUP BY a ORDER BY a NULLS FIRST",
    "SELECT * FROM generate_series(1, 10, 3)",
    "SELECT generate_series(1, 3), generate_series(1, 2)",
    "SELECT g, g * 2 FROM generate_series(5, 1, -2) AS g",
    "SELECT * FROM generate_series('2020-01-31'::timestamp, '2020-05-01', '1 month')",
    "SELECT x FROM generate_series('2020-01-01 00:00'::timestamp, '2020-01-01 03:00', "
    "'90 minutes') AS t(x)",
    "SELECT id, generate_series(1, b) FROM t1 WHERE b IS NOT NULL ORDER BY 1, 2",
    "SELECT string_agg(s, ',' ORDER BY s) FROM t1",
    "SELECT a, string_agg(s, '-' ORDER BY id DESC) FROM t1 GROUP BY a ORDER BY a NULLS LAST",
    "SELECT a, array_agg(id ORDER BY id) FROM t1 GROUP BY a ORDER BY a NULLS FIRST",
    "SELECT bool_and(a > 0), bool_or(b > 2), bool_and(b > 5) FROM t1",
    "SELECT stddev(b), variance(b), stddev_pop(b), var_pop(b), stddev(a) FILTER (WHERE a > 5) "
    "FROM t1",
    "SELECT id, a IS DISTINCT FROM b, a IS NOT DISTINCT FROM b FROM t1 ORDER BY id",
    "SELECT id, s ~ 'a', s ~* 'A', s !~ '^a', s !~* 'B$' FROM t1 ORDER BY id",
    "SELECT 'a_c' LIKE 'a!_c' ESCAPE '!', 'abc' LIKE 'a!_c' ESCAPE '!', 'a%' LIKE 'a#%' ESCAPE '#'",
    "SELECT id FROM t1 ORDER BY id LIMIT ALL",
    "SELECT round(2.5), round(-2.5), round(2.567, 2), trunc(2.567, 1), floor(-1.5), ceil(-1.5), "
    "mod(-7, 3), power(2, 0.5), sqrt(2), abs(-4), round(1.45, 1)",
    "SELECT greatest(3, NULL, 5), least(3, NULL, 5), greatest('b', 'a'), least(NULL, NULL::int)",
    "SELECT split_part('a,b,,c', ',', 3), split_part('a,b', ',', 5), lpad('abc', 5, 'xy'), "
    "lpad('abcdef', 3), rpad('ab', 4, '-'), left('hello', 2), right('hello', -2)",
    "SELECT strpos('hello', 'll'), position('z' in 'hello'), substr('hello', 0, 3), "
    "substring('hello' from 2 for 2), concat('a', NULL, 2, true), replace('banana', 'an', 'AN'), "
    "initcap('hello wORLD'), repeat('ab', 3), reverse('abc'), length('héllo'), "
    "btrim('xxaxx', 'x'), ltrim('  a '), rtrim('a  '), upper('ß'), md5('abc')",
    "SELECT id, extract(year from ts), extract(month from ts), date_part('dow', ts), "
    "date_part('doy', ts), extract(epoch from ts), extract(second from ts), extract(quarter "
    "from ts), extract(week from ts) FROM tz ORDER BY id",
    "SELECT id, date_trunc('hour', ts), date_trunc('week', ts), date_trunc('quarter', ts), "
    "date_trunc('year', ts), date_trunc('minute', ts) FROM tz ORDER BY id",
    "SELECT id, percent_rank() OVER (ORDER BY b NULLS FIRST), cume_dist() OVER (ORDER BY b "
    "NULLS FIRST), ntile(4) OVER (ORDER BY id) FROM t1 ORDER BY id",
    "SELECT id, last_value(id) OVER (ORDER BY a NULLS FIRST), first_value(s) OVER (PARTITION BY "
    "a ORDER BY id) FROM t1 ORDER BY id",
    "SELECT a, rank() OVER w, dense_rank() OVER w, row_number() OVER w FROM t1 "
    "WINDOW w AS (ORDER BY a NULLS LAST) ORDER BY a NULLS LAST, 4",
    "SELECT id, avg(b) OVER (PARTITION BY a), sum(b) OVER (ORDER BY a, id), "
    "lag(s, 2, 'none') OVER (ORDER BY id), lead(b) OVER (PARTITION BY a ORDER BY id) "
    "FROM t1 ORDER BY id",
    "SELECT t1.id, t2.id, a FROM t1 FULL JOIN t2 USING (a) ORDER BY 1 NULLS FIRST, 2 NULLS FIRST",
    "SELECT * FROM t1 NATURAL LEFT JOIN t2 ORDER BY id",
    "SELECT * FROM t1 NATURAL FULL JOIN t2 ORDER BY id, a NULLS FIRST, s NULLS FIRST",
    "SELECT * FROM t1 JOIN t2 USING (id) ORDER BY id",
    "SELECT t1.id, t2.id FROM t1 RIGHT JOIN t2 ON t1.a = t2.a AND t1.b < t2.d "
    "ORDER BY 2, 1 NULLS FIRST",
    "SELECT id FROM t1 WHERE a NOT IN (SELECT a FROM t2)",
    "SELECT id FROM t1 WHERE a NOT IN (SELECT a FROM t2 WHERE a IS NOT NULL) ORDER BY id",
    "SELECT 1 IN (SELECT a FROM t2 WHERE false), NULL::int IN (SELECT a FROM t2 WHERE false), "
    "NULL::int NOT IN (SELECT 1), 2 NOT IN (SELECT 1 UNION SELECT NULL)",
    "SELECT id, a IN (SELECT a FROM t2), a NOT IN (SELECT d FROM t2) FROM t1 ORDER BY id",
    "SELECT id, EXISTS (SELECT 1 FROM t2 WHERE t2.a = t1.a), (SELECT max(d) FROM t2 "
    "WHERE t2.a = t1.a) FROM t1 ORDER BY id",
    "SELECT id FROM t1 WHERE b <> ALL (SELECT d FROM t2 WHERE d IS NOT NULL) ORDER BY id",
    "WITH RECURSIVE fib(n, a, b) AS (SELECT 1, 0, 1 UNION ALL SELECT n + 1, b, a + b FROM fib "
    "WHERE n < 10) SELECT n, a FROM fib",
    "WITH RECURSIVE r(x) AS (SELECT 1 UNION SELECT x * 2 % 7 FROM r) SELECT x FROM r ORDER BY x",
    "WITH q AS (SELECT a, count(*) AS n FROM t1 GROUP BY a) SELECT * FROM q q1 JOIN q q2 "
    "USING (n) ORDER BY 1, 2 NULLS FIRST, 3 NULLS FIRST",
    "SELECT * FROM (SELECT a, sum(b) AS total FROM t1 GROUP BY a) s(k, v) WHERE v > 1 "
    "ORDER BY k",
    "SELECT 7 / 2, -7 / 2, 7 % -3, -7 % 3, 7.0 / 2",
    "SELECT x, sum(x) OVER (ORDER BY x) FROM generate_series(1, 5) AS t(x)",
]


def _psql(env, sql):
    out = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-F", "\x1f", "-P", "null=<NULL>",
                          "-v", "ON_ERROR_STOP=1", "-c", sql], env=env, capture_output=True,
                         text=True)
    if out.returncode:
        raise RuntimeError(f"{sql}: {out.stderr}")
    lines = out.stdout.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.split("\x1f") for line in lines]


def main():
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    from bench.compare_postgres import libpq_env, local_server
    if "--start-local" not in sys.argv:
        raise SystemExit("usage: python tests/sql/pg_golden_queries.py --start-local")
    with local_server(port=54331) as dsn:
        env = libpq_env(dsn)
        for s in SETUP:
            _psql(env, s)
        version = _psql(env, "SHOW server_version")[0][0]
        answers = {q: _psql(env, q) for q in QUERIES}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "pg15.json")
    with open(path, "w") as f:
        json.dump({"server_version": version, "answers": answers}, f, indent=1,
                  ensure_ascii=False)
        f.write("\n")
    print(f"wrote {path} ({len(answers)} answers from PostgreSQL {version})")


if __name__ == "__main__":
    main()
