"""The system catalog: tables, columns, indexes and statistics, kept in heap tables.

Design note
-----------
**Catalog tables.**  As in PostgreSQL, the catalog is a set of ordinary heap relations read
and written through the buffer manager with MVCC, so a catalog change is an ordinary heap
insert / update / delete of the transaction that makes it, and rolls back like any row:

=================  ====  ================================================================
catalog            OID   one row per
=================  ====  ================================================================
pg_class           1259  relation (table ``r``, index ``i``, sequence ``S``): oid, relname,
                         relkind, relfilenode, relpages, reltuples, relnatts, relhasindex
pg_attribute       1249  column: attrelid, attname, atttypid, atttypmod, attnum,
                         attnotnull, atthasdef, atttypname, attdefault
pg_index           2610  index: indexrelid, indrelid, indisunique, indisprimary, indkey
                         (0 for an expression column), indoption (per column: 1 DESC,
                         2 NULLS FIRST), indexprs (JSON list of the expression columns'
                         SQL), indpred (a partial index's WHERE as SQL)
pg_statistic       2619  (table, column) ANALYZE measured: stanullfrac, stawidth,
                         stadistinct, stacorrelation, stavalues
pg_rewrite         2618  view (relkind ``v`` in pg_class, no file): its query's SQL text and
                         the OIDs of the relations it names (``views``)
pg_constraint      2606  CHECK constraint (contype ``c``, consrc its SQL text:
                         ``constraints``) and foreign key (contype ``f``, consrc its
                         definition, read back by ``fkeys``): oid, conname, conrelid
=================  ====  ================================================================

User relations get OIDs from 16384 (FirstNormalObjectId) up, from a counter in the shared
segment (``CTL_NEXT_OID``) that starts, at open, past every OID and every file in
``base/``; a relation's first relfilenode is its OID, TRUNCATE gives it a new one.

**Bootstrap** (``bootstrap``).  The catalogs' own row layouts are hard-coded in a Python
table (PostgreSQL's ``formrdesc``); their relfilenode is their OID forever (a catalog is
never rewritten: no TRUNCATE, VACUUM FULL or REINDEX of one, so no relation mapper).  A new
data directory gets the four files and, in one transaction, their own pg_class and
pg_attribute rows.

**Cache and invalidation** (``cache``).  Each process keeps the committed catalog state
(every table and index as ``TableDef`` / ``IndexDef``, built from the rows a fresh catalog
snapshot sees) tagged with the shared invalidation counter ``control[CTL_CATALOG_GEN]``.  A
transaction that changed the catalog bumps the counter when it commits (after the commit
is visible in the proc array); every lookup compares the counter with its state's tag and
rebuilds on a difference.  So a cache hit is one shared counter read and a dict lookup.  A
backend whose own transaction changed the catalog reads an *overlay* state built with its
xid and command id (it sees its uncommitted DDL; nobody else does), rebuilt after each of
its catalog changes (CommandCounterIncrement) and dropped at commit or abort.  The plan
cache is keyed by ``Catalog.version()``: the counter, or a unique token for an overlay.

**Transactional DDL and pending deletes** (``storage``).  CREATE TABLE / INDEX and
TRUNCATE create their new files at once and list them as delete-at-abort; DROP and
TRUNCATE list the old files as delete-at-commit (``Transaction.pending_deletes``); the
list is executed when the transaction has ended.  A failed statement inside a block fails
the block (25P02 for DDL too) and the abort removes what it created: nothing half-done.

**ALTER TABLE and REINDEX** (``alter``).  Renames and NOT NULL update pg_class /
pg_attribute rows; REINDEX gives an index a new relfilenode built from the heap; ADD and
DROP COLUMN rewrite the table and its indexes into new relfilenodes (a departure: see
below), all through pending deletes, so each rolls back.

**Checker** (``check``): the catalog heaps' pages, the rows' agreement with each other,
and with the files on disk (no orphan file, no relation without its file).

Departures from PostgreSQL
--------------------------
* No stored pg_namespace, pg_type, pg_attrdef, pg_depend: one schema
  (relnamespace 2200, ``public``; the catalogs 11), the type's SQL spelling is in
  ``atttypname`` (with PostgreSQL's ``atttypid`` / ``atttypmod`` beside it), a column's
  default expression text in ``attdefault`` (an identity column's kind, ALWAYS or BY
  DEFAULT, is written after it: ``bootstrap.IDENTITY_MARK``), a sequence's parameters and
  owning column are in its own page (``sequence``), a primary key is ``indisprimary``, a
  view's dependencies are OIDs in its pg_rewrite row, expressions (views, CHECKs) are SQL
  text.  Temporary tables are named ``pg_temp_<slot>.<name>`` (no pg_temp_N namespace
  row).  What
  clients read of PostgreSQL's catalog (pg_namespace, pg_type, the extra columns of
  pg_class ..., information_schema) is virtual, computed from this state when scanned
  (``pgcatalog``).
* No indexes on the catalogs: every lookup is served by the cache, which is rebuilt from a
  sequential scan of the four small heaps.  Uniqueness of relation names is checked under
  the catalog LWLock, counting names that running transactions create or drop (it waits
  for them, as PostgreSQL's unique index would).
* Invalidation is one counter (any committed change rebuilds the whole cache) rather than
  a message queue of per-object invalidations; with few, small catalog tables a rebuild is
  cheap and the hot path cheaper than PostgreSQL's hash lookups.
* ADD / DROP COLUMN rewrite the table (no "missing value" for an added column, no
  ``attisdropped`` slot for a dropped one: the fixed row layout has no room for tuples of
  another shape); attnums are renumbered after a drop.  A primary key or unique
  constraint is its index; pg_constraint holds CHECK constraints and foreign keys (``fkeys``),
  as text.
* VACUUM and ANALYZE write relpages / reltuples in place (not transactionally), as
  PostgreSQL's ``heap_inplace_update`` does; ANALYZE's pg_statistic rows are transactional.
  ``stavalues`` holds the MCV list, its frequencies and the histogram as JSON text instead
  of PostgreSQL's kind / operator / values slots, shortened if the row would not fit on a
  page (no TOAST).
* No relation locks here: without a lock manager a session using a table while another
  drops or truncates it may fail or, for TRUNCATE, write to the old file (see
  ``storage``).  An older data directory with ``catalog.json`` (format "minidb 1") is
  refused at open, with a message naming the format.

Public interface: ``Catalog`` (``backend.catalog``, ``instance.catalog``), ``CatalogCache``,
``ColumnDef`` / ``TableDef`` / ``IndexDef``, ``check_catalog``, ``at_xact_end``, ``alter``,
``bootstrap``, ``CATALOGS``, ``pgcatalog`` (the virtual relations clients read).
"""

from __future__ import annotations

from minidb.catalog.bootstrap import CATALOGS, bootstrap
from minidb.catalog.cache import Catalog, CatalogCache
from minidb.catalog.check import check_catalog, relation_files
from minidb.catalog.defs import FIRST_OID, ColumnDef, IndexDef, TableDef
from minidb.catalog.storage import at_xact_end

__all__ = ["Catalog", "CatalogCache", "ColumnDef", "TableDef", "IndexDef", "FIRST_OID",
           "CATALOGS", "bootstrap", "check_catalog", "relation_files", "at_xact_end"]
