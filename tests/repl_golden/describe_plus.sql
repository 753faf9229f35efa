-- \d+, \dt+, \di+, name patterns (* and ?), and row estimates before and after ANALYZE
CREATE TABLE items (id integer PRIMARY KEY, name varchar(20) NOT NULL, price double precision);
CREATE TABLE item_tags (item integer, tag text);
CREATE TABLE other (a integer);
CREATE INDEX item_tags_item ON item_tags (item);
INSERT INTO items VALUES (1, 'apple', 1.5), (2, 'pear', 2), (3, 'fig', 0.25);
-- three rows on one page: never measured, the estimate is the planner's guess for one page
\dt items
ANALYZE items;
\dt items
\d+ items
\dt+
\di+
\dt item*
\dt ite?s
\dt "Items"
\dt public.oth*
\dt nosuch.*
\di *pkey
\d item_t*
\d nosuch*
