-- Statements over several lines, several on a line, comments, a last one without ';'.
CREATE TABLE t (
    a integer,   -- the key
    b text
);
INSERT INTO t VALUES (1, 'x;y'); INSERT INTO t VALUES (2, 'it''s');
SELECT a,
       b
  FROM t
 WHERE a >= 1   /* a block comment; with a semicolon */
 ORDER BY a;
SELECT 'a
b' AS two_lines;
SELECT count(*) FROM t
