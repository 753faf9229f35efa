-- \set, \unset and :name interpolation (a value, a literal, an identifier)
\set
\set tbl things
\set who 'O''Brien'
\set n 3
\set joined 'a b' c
\set
CREATE TABLE :tbl (id integer, name text);
INSERT INTO :"tbl" VALUES (:n, :'who');
SELECT id, name, :'joined' AS joined, ':n' AS not_a_variable, id::text AS cast FROM :tbl;
\echo :tbl :'tbl' :"tbl" :nosuch :'nosuch'
\unset tbl
\echo :tbl
\set bad-name x
\set ON_ERROR_STOP maybe
\unset ON_ERROR_STOP
\echo :ON_ERROR_STOP
