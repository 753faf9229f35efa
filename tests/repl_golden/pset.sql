-- \pset: borders, expanded records, unaligned output, the NULL string, tuples only
CREATE TABLE t (id integer, name text, v double precision);
INSERT INTO t VALUES (1, 'alice', 1.5), (22, 'two
lines', NULL);
\pset border 0
SELECT * FROM t ORDER BY id;
\x
SELECT * FROM t ORDER BY id;
\x
\pset border 2
SELECT * FROM t ORDER BY id;
\x
SELECT * FROM t ORDER BY id;
SELECT * FROM t WHERE id < 0;
\x
\pset border 1
\pset null '(null)'
SELECT * FROM t ORDER BY id;
\pset format unaligned
SELECT * FROM t ORDER BY id;
\pset fieldsep ','
\x
SELECT * FROM t ORDER BY id;
\x
\a
\t
SELECT * FROM t ORDER BY id;
\t off
\pset footer off
SELECT count(*) FROM t;
\pset footer
\pset pager off
\pset pager always
\pset pager
\pset pager 5
\pset format wrapped
\pset bogus
\pset border
\pset
