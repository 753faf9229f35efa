-- ON_ERROR_STOP: the script stops at the first error and the exit code is 3 (psql's).
\set ON_ERROR_STOP on
\echo ON_ERROR_STOP is :ON_ERROR_STOP
CREATE TABLE t (id integer PRIMARY KEY);
INSERT INTO t VALUES (1);
INSERT INTO t VALUES (1);
SELECT 'not reached' AS never;
