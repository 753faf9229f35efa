-- Transaction blocks: commit, rollback, and a block that fails.
CREATE TABLE t (id integer, note text);
BEGIN;
INSERT INTO t VALUES (1, 'kept');
COMMIT;
BEGIN;
INSERT INTO t VALUES (2, 'rolled back');
SELECT * FROM t ORDER BY id;
ROLLBACK;
SELECT * FROM t ORDER BY id;
-- an error inside a block fails it until ROLLBACK
BEGIN;
INSERT INTO t VALUES (3, 'lost');
SELECT 1 / 0;
SELECT * FROM t;
COMMIT;
SELECT * FROM t ORDER BY id;
START TRANSACTION ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM t;
END;
-- outside a block: a warning, no error
COMMIT;
BEGIN;
BEGIN;
ROLLBACK;
