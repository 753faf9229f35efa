"""The system catalog: tables, columns, indexes and per-table statistics.

PostgreSQL keeps its catalog in tables (``pg_class``, ``pg_attribute``, ...) read through
the buffer manager.  minidb keeps it in one JSON file, ``catalog.json``, because the
catalog is small and changes rarely; what matters is that it changes *atomically* and
that *every process sees a change*:

* a change takes the cross-process catalog lock, re-reads the file, applies the change,
  writes ``catalog.json.tmp``, fsyncs it, renames it over ``catalog.json``, fsyncs the
  directory, and bumps ``control[CTL_CATALOG_GEN]`` in shared memory;
* every reader compares its loaded generation with the shared counter before it uses the
  catalog (``refresh()``) and re-reads the file when they differ.  A crash at any point
  leaves either the old or the new file, never a mix.

Relations are named on disk by a *relfilenode*, an integer allocated from ``next_oid`` and
never reused; TRUNCATE gives a table a new relfilenode, as in PostgreSQL, so the old file
can be removed without anyone reading a half-truncated one.

Statistics (``relpages``, ``reltuples``) are what VACUUM and ANALYZE last measured, as in
``pg_class``; later layers add more per-table counters next to them.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import dataclass, field, asdict

from minidb.errors import (DuplicateTable, ProgramLimitExceeded, UndefinedColumn,
                           UndefinedObject, UndefinedTable)
from minidb.shmem import CTL_CATALOG_GEN
from minidb.storage.smgr import Smgr

CATALOG_FILE = "catalog.json"
FIRST_OID = 16384  # FirstNormalObjectId


@dataclass
class ColumnDef:
    name: str
    type: str  # SQL spelling, parsed by minidb.types.parse_type
    not_null: bool = False
    default: str | None = None  # SQL expression text


@dataclass
class IndexDef:
    oid: int
    name: str
    table: str
    relfilenode: int
    columns: list[str]
    unique: bool = False
    primary: bool = False


@dataclass
class TableDef:
    oid: int
    name: str
    relfilenode: int
    columns: list[ColumnDef]
    indexes: list[str] = field(default_factory=list)
    relpages: int = 0
    reltuples: float = -1.0  # -1: never vacuumed or analyzed (PostgreSQL 14+)
    # ANALYZE's per-column statistics (pg_statistic), by column name: null_frac,
    # avg_width, n_distinct, mcv / mcv_freq, histogram, correlation (minidb.sql.stats)
    column_stats: dict = field(default_factory=dict)

    def column_index(self, name: str) -> int:
        for i, c in enumerate(self.columns):
            if c.name == name:
                return i
        return -1


class Catalog:
    """Catalog access for one process (see the module docstring)."""

    def __init__(self, datadir: str, lock, control, smgr: Smgr):
        self.path = os.path.join(datadir, CATALOG_FILE)
        self.datadir = datadir
        self.lock = lock
        self.control = control
        self.smgr = smgr
        self._local = threading.RLock()
        self.tables: dict[str, TableDef] = {}
        self.indexes: dict[str, IndexDef] = {}
        self.next_oid = FIRST_OID
        self._gen = -1
        self._by_rfn: dict[int, str] = {}
        self._rels: dict = {}
        with self.lock:
            self._load()

    # -- reading -------------------------------------------------------------------------------
    def _load(self) -> None:
        self._gen = int(self.control[CTL_CATALOG_GEN])
        try:
            with open(self.path) as f:
                data = json.load(f)
        except FileNotFoundError:
            data = {"next_oid": FIRST_OID, "tables": {}, "indexes": {}}
        self.next_oid = data["next_oid"]
        self.tables = {}
        for name, t in data["tables"].items():
            cols = [ColumnDef(**c) for c in t.pop("columns")]
            self.tables[name] = TableDef(columns=cols, **t)
        self.indexes = {name: IndexDef(**i) for name, i in data["indexes"].items()}
        self._by_rfn = {t.relfilenode: t.name for t in self.tables.values()}
        self._by_rfn.update({i.relfilenode: i.name for i in self.indexes.values()})

    def refresh(self) -> None:
        """Re-read the catalog if another backend or process changed it."""
        if self.control[CTL_CATALOG_GEN] != self._gen:
            with self._local, self.lock:
                self._load()

    def table(self, name: str) -> TableDef:
        self.refresh()
        t = self.tables.get(name)
        if t is None:
            raise UndefinedTable(f'relation "{name}" does not exist')
        return t

    def heap_rel(self, name: str):
        """The ``HeapRel`` of a table (row layout built once per catalog generation)."""
        from minidb.heap.heapam import HeapRel
        from minidb.heap.layout import Column, RowLayout

        t = self.table(name)
        key = (name, self._gen)
        rel = self._rels.get(key)
        if rel is None:
            cols = [Column(c.name, c.type, c.not_null) for c in t.columns]
            indexed = frozenset(t.column_index(c) for i in t.indexes
                                if i in self.indexes for c in self.indexes[i].columns)
            rel = HeapRel(t.name, t.relfilenode, RowLayout(cols), t.oid, indexed)
            if len(self._rels) > 256:
                self._rels.clear()
            self._rels[key] = rel
        return rel

    def name_of_relfilenode(self, rfn: int) -> str | None:
        name = self._by_rfn.get(rfn)
        if name is None:  # perhaps created by another process since we last looked
            self.refresh()
            name = self._by_rfn.get(rfn)
        return name

    # -- changing ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def change(self):
        """Hold the catalog lock around a change; saves atomically when the block ends."""
        with self._local, self.lock:
            self._load()
            try:
                yield self
                self._save()
            except BaseException:
                self._load()  # forget the half-made (or half-saved) change
                raise

    def _save(self) -> None:
        data = {
            "next_oid": self.next_oid,
            "tables": {n: asdict(t) for n, t in self.tables.items()},
            "indexes": {n: asdict(i) for n, i in self.indexes.items()},
        }
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, self.path)
        dfd = os.open(self.datadir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        self.control[CTL_CATALOG_GEN] += 1
        self._gen = int(self.control[CTL_CATALOG_GEN])
        self._by_rfn = {t.relfilenode: t.name for t in self.tables.values()}
        self._by_rfn.update({i.relfilenode: i.name for i in self.indexes.values()})

    def allocate_oid(self) -> int:
        """A fresh oid / relfilenode (call inside ``change()``)."""
        oid = self.next_oid
        if oid >= 1 << 29:
            raise ProgramLimitExceeded("out of relfilenodes")
        self.next_oid += 1
        return oid

    def create_table(self, name: str, columns: list[ColumnDef]) -> TableDef:
        with self.change():
            if name in self.tables or name in self.indexes:
                raise DuplicateTable(f'relation "{name}" already exists')
            oid = self.allocate_oid()
            # A crash (or failed save) after smgr.create leaves a file the catalog never
            # named; skip such oids, as PostgreSQL's GetNewRelFileNumber does.
            while self.smgr.exists(oid):
                oid = self.allocate_oid()
            t = TableDef(oid=oid, name=name, relfilenode=oid, columns=list(columns))
            self.smgr.create(t.relfilenode)
            self.tables[name] = t
        return self.tables[name]

    def drop_table(self, name: str) -> TableDef:
        """Remove a table and its indexes from the catalog; the caller drops the buffers
        and then unlinks the files."""
        with self.change():
            t = self.tables.pop(name, None)
            if t is None:
                raise UndefinedTable(f'table "{name}" does not exist')
            for iname in t.indexes:
                self.indexes.pop(iname, None)
        return t

    def index(self, name: str) -> IndexDef:
        self.refresh()
        i = self.indexes.get(name)
        if i is None:
            raise UndefinedObject(f'index "{name}" does not exist')
        return i

    def create_index(self, name: str, table: str, columns: list[str], *, unique: bool = False,
                     primary: bool = False, build=None) -> IndexDef:
        """Add an index on ``table``: allocate its relfilenode, create its file, run
        ``build(index_def)`` (which fills the file), then publish the entry.  The catalog
        lock is held throughout, so nobody sees a half-built index; if ``build`` raises,
        the file is removed and the catalog is unchanged."""
        with self.change():
            if name in self.tables or name in self.indexes:
                raise DuplicateTable(f'relation "{name}" already exists')
            t = self.tables.get(table)
            if t is None:
                raise UndefinedTable(f'relation "{table}" does not exist')
            if not columns:
                raise UndefinedColumn("an index needs at least one column")
            for c in columns:
                if t.column_index(c) < 0:
                    raise UndefinedColumn(f'column "{c}" does not exist')
            oid = self.allocate_oid()
            while self.smgr.exists(oid):
                oid = self.allocate_oid()
            idx = IndexDef(oid=oid, name=name, table=table, relfilenode=oid,
                           columns=list(columns), unique=unique, primary=primary)
            self.smgr.create(oid)
            try:
                if build is not None:
                    build(idx)
            except BaseException:
                self.smgr.unlink(oid)
                raise
            self.indexes[name] = idx
            t.indexes.append(name)
        return self.indexes[name]

    def drop_index(self, name: str) -> IndexDef:
        """Remove an index from the catalog; the caller drops its buffers and then
        unlinks its file."""
        with self.change():
            i = self.indexes.pop(name, None)
            if i is None:
                raise UndefinedObject(f'index "{name}" does not exist')
            t = self.tables.get(i.table)
            if t is not None and name in t.indexes:
                t.indexes.remove(name)
        return i

    def set_stats(self, name: str, relpages: int, reltuples: float) -> None:
        with self.change():
            t = self.tables.get(name)
            if t is not None:
                t.relpages, t.reltuples = int(relpages), float(reltuples)

    def set_column_stats(self, name: str, relpages: int, reltuples: float,
                         column_stats: dict) -> None:
        """ANALYZE: the table's size and its per-column statistics, in one change."""
        with self.change():
            t = self.tables.get(name)
            if t is not None:
                t.relpages, t.reltuples = int(relpages), float(reltuples)
                t.column_stats = dict(column_stats)
