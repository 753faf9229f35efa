"""The executor's door to the B-tree (``minidb.index``): one place that knows its API.

Everything the SQL layer does with an index goes through these functions: create (for
CREATE INDEX and for PRIMARY KEY / UNIQUE constraints), drop, insert the entries of a new
heap tuple (or of a bulk load's batch: ``insert_entries_bulk``), scan between bounds returning visible rows, VACUUM's callbacks, and ON CONFLICT's pre-check
(``find_conflict``).

Bounds are SQL values; one that the index column's type cannot hold (an integer bound
beyond int4 on an integer column, a string longer than a varchar(n)) cannot be encoded as a
key, so ``scan_rows`` decides such cases itself: an equality with an impossible value
matches nothing, an impossible range bound is dropped, and the scan then tells the executor
to re-check the index conditions on the rows it gets (a wider scan is never wrong).
"""

from __future__ import annotations

import numpy as np

import minidb.errors as errors
import minidb.index as ix

__all__ = ["create_index", "drop_index", "rebuild_index", "insert_entries",
           "insert_entries_bulk", "scan_rows", "vacuum_callbacks", "find_conflict",
           "index_key"]


def create_index(backend, table: str, name: str, columns, unique: bool = False,
                 primary: bool = False, options=None, predicate: str | None = None,
                 exprs=None):
    return ix.create_index(backend, table, name, list(columns), unique=unique, primary=primary,
                           options=options, predicate=predicate, exprs=exprs)


def drop_index(backend, name: str) -> None:
    ix.drop_index(backend, name)


def rebuild_index(backend, idef) -> None:
    ix.rebuild_index(backend, idef)


def insert_entries(backend, index_names, row, tid) -> None:
    for name in index_names:
        ix.insert_entry(backend, name, row, tid)


def find_conflict(backend, index_name, row):
    """ON CONFLICT's pre-check (``minidb.index.conflict``): the heap TID of a live row
    with ``row``'s key in the unique index, else None."""
    from minidb.index.conflict import find_conflict as find
    return find(backend, index_name, row)


def index_key(backend, index_name, row) -> tuple:
    """The key values of ``row`` (all the table's columns) in the index."""
    return ix.open_index(backend, index_name).key_of_row(row)


def insert_entries_bulk(backend, index_names, layout, data: dict, nrows: int, blocks,
                        offsets) -> None:
    """The index entries of a bulk load: ``data`` maps column names to the rows' values
    (a missing column is NULL), ``blocks`` / ``offsets`` are the rows' heap TIDs."""
    def column(i):
        vals = data.get(layout.names[i])
        if vals is None:
            return [None] * nrows
        return vals.tolist() if isinstance(vals, np.ndarray) else list(vals)

    for name in index_names:
        irel = ix.open_index(backend, name)
        blk, off = blocks, offsets
        if irel.row_filter is None and irel.key_fn is None:
            cols = [column(i) for i in irel.col_idx]
        else:                  # partial / expression index: the whole rows are needed
            rows = list(zip(*[column(i) for i in range(len(layout.names))]))
            if irel.row_filter is not None:     # the rows its WHERE accepts
                keep = np.flatnonzero(np.asarray(irel.row_filter(rows), dtype=bool))
                rows = [rows[k] for k in keep.tolist()]
                blk, off = np.asarray(blocks)[keep], np.asarray(offsets)[keep]
                if not len(keep):
                    continue
            keys = irel.keys_of_rows(rows)
            cols = [list(c) for c in zip(*keys)] if keys else [[] for _ in irel.col_idx]
        ix.insert_entries(backend, irel, cols, blk, off)


def vacuum_callbacks(backend, table: str) -> list:
    return ix.index_vacuum_callbacks(backend, table)


def _fits(codec, values) -> bool:
    try:
        codec.encode_prefix(tuple(values))
        return True
    except (errors.DataError, errors.DatatypeMismatch, OverflowError, TypeError):
        return False  # e.g. int_col = 2.5: no key can match (eq) / the bound is re-checked


def scan_rows(backend, index_name: str, eq: list, lower, upper, snapshot, prepare_pages,
              backward: bool = False):
    """(rows, exact): an iterator of (tid, row) whose index key starts with ``eq`` and
    whose next column lies between ``lower`` = (value, inclusive) and ``upper``, visible
    to ``snapshot``; ``exact`` False when a bound had to be dropped (the caller must then
    re-check the conditions on the rows)."""
    if any(v is None for v in eq):
        return iter(()), True
    irel = ix.open_index(backend, index_name)
    codec = irel.codec
    if eq and not _fits(codec, eq):
        return iter(()), True
    if lower is not None and (lower[0] is None):
        return iter(()), True
    if upper is not None and (upper[0] is None):
        return iter(()), True
    exact = True
    if lower is not None and not _fits(codec, list(eq) + [lower[0]]):
        lower, exact = None, False
    if upper is not None and not _fits(codec, list(eq) + [upper[0]]):
        upper, exact = None, False
    low = tuple(eq) + ((lower[0],) if lower is not None else ())
    high = tuple(eq) + ((upper[0],) if upper is not None else ())
    scan = ix.IndexScan(backend, irel, low or None, high or None,
                        low_inclusive=True if lower is None else lower[1],
                        high_inclusive=True if upper is None else upper[1],
                        direction=ix.BACKWARD if backward else ix.FORWARD,
                        skip_nulls=True)   # comparisons never match NULL
    return scan.visible_rows(snapshot, prepare_pages=prepare_pages), exact
