-- The query buffer: \g and \gx run it (or the last query), backslash commands typed inside
-- an unfinished statement run at once and leave it in the buffer, \p shows it, \r clears it.
CREATE TABLE t (id integer, name text);
INSERT INTO t VALUES (1, 'one'), (2, 'two');
SELECT name FROM t WHERE id = 1 \g
\gx
SELECT id,
\echo typed inside a statement
\p
name FROM t ORDER BY id;
SELECT 'half' AS typed,
\r
\p
SELECT count(*) FROM t \gx
SELECT ';' AS semi, '\' AS backslash, '(' AS paren, "id" FROM t WHERE id = 1;
