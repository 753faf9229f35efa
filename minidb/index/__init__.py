"""minidb's B-tree index (PostgreSQL's nbtree, Lehman & Yao): see README.md in this package.

Public interface (for the executor and the SQL layer):

  create_index(backend, table, name, columns, unique=False, primary=False, options=None,
               predicate=None, exprs=None)
                                               catalog entry + build by sorting
  drop_index(backend, name)                 catalog rows; the file goes at commit
  rebuild_index(backend, index_def)         fill a new (empty) index file from its table
  insert_entry(backend, index, row, tid)       after a heap insert / a non-HOT update
  insert_entries(backend, index, key_columns, blocks, offsets)
                                               a bulk load's entries, a leaf page at a time
  index_scan(backend, index, low, high, *, low_inclusive, high_inclusive, direction,
             skip_nulls)
  lookup_visible(backend, index, key, snapshot) -> [(tid, row)]
  bulk_delete(backend, index, dead_tids)       VACUUM's index pass
  index_vacuum_callbacks(backend, table)       the callbacks for heap.vacuum.vacuum_table
  check_btree(backend, index, heapallindexed=True), dump_btree(backend, index)

``index`` is an index name, a ``catalog.IndexDef`` or an ``IndexRel`` (``open_index``).
"""

from __future__ import annotations

from minidb.index.build import build_index
from minidb.index.check import check_btree, dump_btree
from minidb.index.insert import insert_entries, insert_entry
from minidb.index.rel import IndexRel, forget_index, make_index_rel, open_index
from minidb.index.scan import BACKWARD, FORWARD, IndexScan, index_scan, lookup_visible
from minidb.index.vacuum import bulk_delete, index_vacuum_callbacks

__all__ = ["create_index", "drop_index", "rebuild_index", "insert_entry", "insert_entries",
           "index_scan", "lookup_visible",
           "bulk_delete", "index_vacuum_callbacks", "check_btree", "dump_btree",
           "open_index", "IndexRel", "IndexScan", "FORWARD", "BACKWARD"]


def create_index(backend, table_name: str, index_name: str, columns, unique: bool = False,
                 primary: bool = False, options=None, predicate: str | None = None,
                 exprs=None):
    """CREATE [UNIQUE] INDEX index_name ON table_name (columns): build the index from the
    table's current rows, then publish it in the catalog.  Returns its ``IndexRel``.
    ``primary`` (a PRIMARY KEY's index) implies ``unique``; NOT NULL is the caller's.
    ``options``: per column the pg_index.indoption bits (``keys.INDOPTION_DESC``,
    ``keys.INDOPTION_NULLS_FIRST``); ``predicate``: a partial index's WHERE as SQL text (its
    rows are filtered by the compiler the SQL layer registers: ``rel.set_predicate_compiler``);
    ``exprs``: per column the SQL of an expression column or None (``rel.set_expression_compiler``)."""
    unique = unique or primary
    catalog = backend.catalog
    idef = catalog.create_index(index_name, table_name, list(columns), unique=unique,
                                primary=primary, options=options, predicate=predicate,
                                exprs=exprs,
                                build=lambda idef: rebuild_index(backend, idef))
    return open_index(backend, idef)


def rebuild_index(backend, idef) -> None:
    """Build index ``idef`` (a catalog entry whose file is new and empty) from the rows of
    its table."""
    catalog = backend.catalog
    build_index(backend, make_index_rel(catalog, idef), catalog.heap_rel(idef.table))


def drop_index(backend, index_name: str) -> None:
    """DROP INDEX: remove its catalog rows; its file is removed when the transaction
    commits (``minidb.catalog.storage``)."""
    idef = backend.catalog.drop_index(index_name)
    forget_index(backend, idef.name, idef.relfilenode)
