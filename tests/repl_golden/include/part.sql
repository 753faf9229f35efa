INSERT INTO t VALUES (1, 'from part.sql');
SELECT nosuch FROM t;
\ir nested.sql
INSERT INTO t VALUES (2, 'after the error');
