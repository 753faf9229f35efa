-- \i FILE runs a file's statements; errors in it name the file and the line.
CREATE TABLE t (id integer, note text);
\i include/part.sql
SELECT * FROM t ORDER BY id;
\i include/nosuch.sql
-- a statement left unfinished by the file runs at its end, the buffer here is its own
SELECT 1 AS a,
\i include/unfinished.sql
2 AS b;
-- ON_ERROR_STOP inside an included file stops everything
\set ON_ERROR_STOP on
\i include/part.sql
SELECT 'not reached' AS never;
