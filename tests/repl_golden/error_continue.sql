-- A script goes on after an error, as psql and sqlite3 do; the exit code is 0.
CREATE TABLE t (id integer PRIMARY KEY, v text);
INSERT INTO t VALUES (1, 'one');
INSERT INTO t VALUES (1, 'again');
INSERT INTO t VALUES (2, 'two');
SELECT nosuch FROM t;
\nonsense
SELECT * FROM t ORDER BY id;
-- a failing statement inside a block fails the block, the script still goes on
BEGIN;
INSERT INTO t VALUES (3, 'three');
SELECT 1 / 0;
COMMIT;
SELECT count(*) FROM t;
-- the last statement, without ';', runs at the end of input
SELECT max(id) FROM t
