-- Tables as psql prints them: numbers right, text left, NULL as nothing, t/f, the footer.
CREATE TABLE accounts (id integer PRIMARY KEY, owner text NOT NULL, balance double precision, active boolean, opened timestamp);
INSERT INTO accounts VALUES (1, 'alice', 100.5, true, '2024-01-02 03:04:05');
INSERT INTO accounts VALUES (2, 'bob', -20, false, NULL), (3, 'carol', NULL, NULL, '2024-02-29 12:00:00.25');
SELECT * FROM accounts ORDER BY id;
SELECT owner, balance * 2 AS doubled FROM accounts WHERE balance IS NOT NULL ORDER BY owner;
SELECT count(*), sum(balance), min(owner), max(id) FROM accounts;
SELECT id FROM accounts WHERE id > 100;
SELECT 1 AS one, 'two' AS two, 3.5 AS three;
UPDATE accounts SET balance = 0 WHERE balance < 0;
DELETE FROM accounts WHERE id = 3;
DELETE FROM accounts WHERE id = 3;
SELECT id, owner, balance FROM accounts ORDER BY id;
-- expanded display
\x
SELECT * FROM accounts ORDER BY id;
SELECT * FROM accounts WHERE id < 0;
\x off
DROP TABLE accounts;
