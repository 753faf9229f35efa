-- Each kind of bad input: one ERROR line, the session goes on, the table is unchanged.
CREATE TABLE t (id integer PRIMARY KEY, v integer NOT NULL);
INSERT INTO t VALUES (1, 10), (2, 20);
-- malformed SQL
SELEC * FROM t;
SELECT * FROM t WHERE;
-- unknown table, unknown column
SELECT * FROM nosuch;
SELECT nosuch FROM t;
-- type mismatch
INSERT INTO t VALUES (true, 1);
SELECT * FROM t WHERE id = 'abc';
-- unique violation (IntegrityError), not null
INSERT INTO t VALUES (3, 30), (1, 99);
INSERT INTO t VALUES (4, NULL);
-- division by zero (DataError)
SELECT v / 0 FROM t;
UPDATE t SET v = v / (id - 1);
-- unsupported construct (NotSupportedError)
SELECT id, FROM t;
SELECT nosuchfunc(id) FROM t;
SELECT * FROM t a, LATERAL generate_series(1, 2) WITH ORDINALITY b;
-- nothing above changed the table
SELECT * FROM t ORDER BY id;
-- meta commands used wrongly
\nonsense
\page t
\page nosuch 0
\x maybe
SELECT 'still here' AS status;
