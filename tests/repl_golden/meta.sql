-- Meta commands: listing, describing, inspecting.
CREATE TABLE items (id integer PRIMARY KEY, name varchar(20) NOT NULL, price double precision DEFAULT 0);
CREATE INDEX items_name ON items (name);
CREATE TABLE empty_one (a integer);
INSERT INTO items VALUES (1, 'apple', 1.5), (2, 'pear', 2), (3, 'fig', 0.25);
UPDATE items SET price = 3 WHERE id = 2;
DELETE FROM items WHERE id = 3;
\d
\dt
\di
\d items
\d items_name
\d nosuch
\echo -- one heap page: line pointers, xmin/xmax, hint bits
\page items 0
\btree items_pkey
\stats items
\timing off
\?
\q
SELECT 'not reached';
