"""Scan of a virtual catalog relation (``minidb.catalog.pgcatalog``): pg_namespace, pg_type,
information_schema.tables ... computed from the backend's catalog when the scan starts.

The rows are few (one per relation, column or type), so they are built as Python tuples and
handed on as one chunk; the conditions on the relation are its Filter, as a Function Scan's.
"""

from __future__ import annotations

from minidb.exec.chunk import rows_to_chunk
from minidb.exec.subscan import _FilteredScan

__all__ = ["VirtualScanNode"]


class VirtualScanNode(_FilteredScan):

    def __init__(self, entry, vrel, quals=()):
        keys = [(entry.index, i) for i in range(len(entry.columns))]
        super().__init__([], keys, [t for _, t in entry.columns])
        self.entry = entry
        self.vrel = vrel
        self.quals = list(quals)

    def title(self):
        return f"Function Scan on {self.vrel.name}" + (
            "" if self.entry.alias == self.vrel.name else f" {self.entry.alias}")

    def execute(self, ectx):
        q = self._setup_filter(ectx)
        if q is False:
            return
        rows = self.vrel.rows(ectx.backend.catalog)
        if not rows:
            return
        out = self._filter(q, rows_to_chunk(rows, self.types))
        if out.n:
            yield out
