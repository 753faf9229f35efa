"""The open index: what the B-tree code needs to know of one index, and small shared helpers.

``IndexRel`` is to an index what ``HeapRel`` is to a table: its file (relfilenode), its
key columns and how their values are encoded (``keys.KeyCodec``), whether it is unique,
and a per-process cache of the root's location (PostgreSQL caches the metapage in the
relcache, ``rd_amcache``).  The root cache is only a hint: a descent that starts at a
page which is no longer the root still finds every key (Lehman & Yao: move right), and the
descent re-reads the metapage when the cached root lost BTP_ROOT.  ``search``'s descent
cache (decoded internal pages, each checked against its page's LSN, and the buffers pages
were last found in) lives here too.

``open_index(backend, index)`` accepts an index name, the catalog's entry of an index or an
``IndexRel`` and returns the ``IndexRel`` of the catalog's current generation (one object per
index per process, rebuilt when the catalog changes).  A catalog entry is read only through
the fields ``name``, ``oid``, ``table``, ``relfilenode``, ``columns``, ``unique`` and
``options`` (those of ``catalog.IndexDef``; ``options`` are the pg_index.indoption bits that
``keys.KeyCodec`` applies) and ``predicate`` (a partial index's WHERE: its rows filter,
``row_filter``, comes from the compiler the SQL layer registers, ``set_predicate_compiler``),
``exprs`` (expression columns: their key values come from ``key_fn``, which the SQL layer's
``set_expression_compiler`` makes), so this module needs nothing from the catalog's module.
"""

from __future__ import annotations

import sys
import weakref
from dataclasses import dataclass, field

from minidb.errors import InternalError
from minidb.index.keys import KeyCodec
from minidb.shmem import C

__all__ = ["IndexRel", "open_index", "make_index_rel", "forget_index", "count", "trace",
           "set_predicate_compiler", "set_expression_compiler"]


@dataclass(eq=False)
class IndexRel:
    name: str
    oid: int
    relfilenode: int
    table: str                 # the indexed table's name
    columns: list[str]         # key columns, in index order
    col_idx: list[int]         # their positions in the table's rows
    codec: KeyCodec
    unique: bool = False
    table_oid: int = 0         # for the table's statistics (idx_scan, idx_tup_fetch)
    root_cache: list = field(default_factory=list)  # [root block, root level] or []
    # the descent cache (``search``): block -> decoded internal page, and block -> the
    # buffer it was last found in (a ReadRecentBuffer hint)
    descent_cache: dict = field(default_factory=dict)
    buf_hints: dict = field(default_factory=dict)
    # a partial index: rows -> [bool], which rows have an entry (``set_predicate_compiler``)
    row_filter: object = None
    # an expression index: rows -> [key tuple] (``set_expression_compiler``); col_idx is -1
    # for its expression columns
    key_fn: object = None

    def key_of_row(self, row) -> tuple:
        if self.key_fn is not None:
            return self.key_fn([row])[0]
        return tuple(row[i] for i in self.col_idx)

    def keys_of_rows(self, rows) -> list:
        """The key tuples of several rows (tuples of all the table's columns)."""
        if self.key_fn is not None:
            return self.key_fn(rows)
        return [tuple(row[i] for i in self.col_idx) for row in rows]


# the process's catalog cache -> {(index name, relfilenode): IndexRel}
_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def open_index(backend, index) -> IndexRel:
    """The ``IndexRel`` of ``index`` (a name, a catalog entry or an ``IndexRel``)."""
    if isinstance(index, IndexRel):
        return index
    catalog = backend.catalog
    idef = catalog.index(index) if isinstance(index, str) else index
    owner = backend.instance.catalog_cache
    per_cat = _CACHE.get(owner)
    if per_cat is None:
        per_cat = _CACHE[owner] = {}
    # the table's name and the key columns' names are in the key too: ALTER TABLE ...
    # RENAME changes them without a new relfilenode
    key = (idef.name, idef.relfilenode, idef.table, tuple(idef.columns))
    irel = per_cat.get(key)
    if irel is None:
        irel = make_index_rel(catalog, idef)
        if len(per_cat) > 256:
            per_cat.clear()
        per_cat[key] = irel
    return irel


# A partial index's predicate is SQL, which only the layers above can bind and evaluate;
# the SQL layer registers its compiler here when it is imported:
# compiler(catalog, table_def, predicate_sql) -> callable(rows) -> [bool] (rows: tuples of
# all the table's columns, Python values; NULL / false -> no entry).
_PREDICATE_COMPILER = None


def set_predicate_compiler(fn) -> None:
    global _PREDICATE_COMPILER
    _PREDICATE_COMPILER = fn


# Expression columns likewise: compiler(catalog, table_def, columns, exprs) -> (type
# spellings of the key columns, callable(rows) -> [key tuple]); ``exprs`` has the SQL of
# each expression column and None for a plain one (named in ``columns``).
_EXPRESSION_COMPILER = None


def set_expression_compiler(fn) -> None:
    global _EXPRESSION_COMPILER
    _EXPRESSION_COMPILER = fn


def make_index_rel(catalog, idef) -> IndexRel:
    """A new ``IndexRel`` of catalog entry ``idef`` (not cached: ``open_index`` caches)."""
    t = catalog.table(idef.table)
    predicate = getattr(idef, "predicate", None)
    row_filter = None
    if predicate is not None:
        if _PREDICATE_COMPILER is None:
            raise InternalError(f'partial index "{idef.name}" needs minidb.sql loaded')
        row_filter = _PREDICATE_COMPILER(catalog, t, predicate)
    exprs = list(getattr(idef, "exprs", None) or [None] * len(idef.columns))
    col_idx = [t.column_index(c) if e is None else -1 for c, e in zip(idef.columns, exprs)]
    if any(i < 0 for i, e in zip(col_idx, exprs) if e is None):
        raise InternalError(f'index "{idef.name}" names a column its table lacks')
    key_fn = None
    if any(e is not None for e in exprs):
        if _EXPRESSION_COMPILER is None:
            raise InternalError(f'expression index "{idef.name}" needs minidb.sql loaded')
        types, key_fn = _EXPRESSION_COMPILER(catalog, t, list(idef.columns), exprs)
    else:
        types = [t.columns[i].type for i in col_idx]
    options = list(getattr(idef, "options", None) or [])
    return IndexRel(idef.name, idef.oid, idef.relfilenode, idef.table, list(idef.columns),
                    col_idx, KeyCodec(types, idef.columns, options or None),
                    bool(idef.unique), t.oid, row_filter=row_filter, key_fn=key_fn)


def forget_index(backend, name: str, relfilenode: int) -> None:
    """Drop this process's ``IndexRel`` of a dropped index."""
    per_cat = _CACHE.get(backend.instance.catalog_cache)
    if per_cat is not None:
        for key in [k for k in per_cat if k[0] == name and k[1] == relfilenode]:
            del per_cat[key]


def count(bm, name: str, n: int = 1) -> None:
    """Add to one of this backend's statistics counters (``minidb.shmem.COUNTERS``)."""
    bm.counts[C[name]] += n


def trace(backend, irel: IndexRel, msg: str) -> None:
    if backend.settings.trace_btree:
        print(f'[btree "{irel.name}" slot {backend.slot}] {msg}', file=sys.stderr)
