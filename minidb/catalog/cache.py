"""Reading and changing the catalog tables: the per-process cache, the per-backend view, DDL.

``CatalogCache`` (one per process, ``instance.catalog_cache``) holds the *committed*
catalog state: every table and index built from the catalog rows a fresh snapshot sees,
tagged with the shared invalidation counter ``control[CTL_CATALOG_GEN]`` read before that
snapshot was taken.  ``Catalog`` (one per backend, ``backend.catalog``; the instance has
one too, ``instance.catalog``, which runs each call in a short transaction of its own)
answers lookups: its hot path is one read of the shared counter, a comparison and a dict
lookup.  When the backend's own transaction has changed the catalog, the backend reads its
own *overlay* state instead, built with its xid and current command id (so it sees its
uncommitted DDL and nobody else does).  See the package docstring for the whole design.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os

import minidb.catalog.fkeys as fkeys
from minidb.catalog.bootstrap import (BY_NAME, BY_OID, CATALOGS, PG_ATTRIBUTE, PG_CLASS,
                                      PG_CONSTRAINT, PG_INDEX, PG_REWRITE, PG_STATISTIC,
                                      RELKIND_INDEX, RELKIND_SEQUENCE, RELKIND_TABLE,
                                      RELKIND_VIEW, attribute_row, class_row, column_def)
from minidb.catalog.defs import (FIRST_OID, CheckDef, ColumnDef, IndexDef, SequenceDef,
                                 TableDef, ViewDef)
from minidb.catalog.storage import create_relation_storage
from minidb.errors import (DuplicateTable, InFailedSqlTransaction, InsufficientPrivilege,
                           ProgramLimitExceeded, SerializationFailure,
                           TooManyConnections, UndefinedColumn, UndefinedObject, UndefinedTable)
from minidb.heap.heapam import HeapRel, HeapScan, heap_insert
from minidb.heap.layout import Column, RowLayout, decode_header
from minidb.heap.modify import heap_delete, heap_update
from minidb.heap.mvcc import MVCCFilter
from minidb.heap.prune import PagePruner
from minidb.shmem import CTL_CATALOG_GEN, CTL_NEXT_OID
from minidb.storage import page as pg
from minidb.storage.bufmgr import EXCLUSIVE, SHARE
from minidb.storage.htup import HEAP_XMAX_INVALID, HEAP_XMAX_LOCK_ONLY
from minidb.storage.xloginsert import PageRecord, unlogged
from minidb.txn import visibility as vis
from minidb.txn.visibility import TM_DELETED, TM_OK, TM_SELF_MODIFIED, TM_UPDATED
from minidb.txn.xact import FAILED, IDLE
from minidb.wal.record import RM_HEAP, XLOG_HEAP_INPLACE

MAX_OID = (1 << 31) - 1
# a temporary table's name in pg_class: "pg_temp_<backend slot>.<name>" (PostgreSQL's
# pg_temp_N schema); the backend of that slot finds it by its short name first
# (``Catalog.temp_prefix``, ``minidb.sql.temp``)
TEMP_PREFIX = "pg_temp_"


class _TempAware(dict):
    """The tables by name, where this backend's temporary tables are found by their short
    names first (lookups only: iteration shows the stored names)."""

    __slots__ = ("prefix",)

    def __contains__(self, k):
        return dict.__contains__(self, self.prefix + k) or dict.__contains__(self, k)

    def __getitem__(self, k):
        got = dict.get(self, self.prefix + k)
        return got if got is not None else dict.__getitem__(self, k)

    def get(self, k, default=None):
        got = dict.get(self, self.prefix + k)
        return got if got is not None else dict.get(self, k, default)
_overlay_serial = itertools.count(1)


class CatalogState:
    """One consistent picture of the catalog (a relcache generation)."""

    __slots__ = ("version", "gen", "tables", "indexes", "system", "by_rfn", "rels",
                 "class_tid", "attr_tids", "index_tid", "stat_tids", "max_oid", "sequences",
                 "views", "rewrite_tid", "con_tids", "temp")

    def __init__(self, version, gen: int):
        self.version = version        # plan-cache key: gen (committed) or a unique tuple
        self.gen = gen                # CTL_CATALOG_GEN read before the snapshot
        self.tables: dict[str, TableDef] = {}
        self.indexes: dict[str, IndexDef] = {}
        self.system: dict[str, TableDef] = {d.name: d.table_def() for d in CATALOGS}
        self.by_rfn: dict[int, str] = {d.oid: d.name for d in CATALOGS}
        self.rels: dict[str, HeapRel] = {d.name: d.rel for d in CATALOGS}
        self.class_tid: dict[int, tuple] = {}      # oid -> TID of its pg_class row
        self.attr_tids: dict[int, list] = {}       # relid -> TIDs of its pg_attribute rows
        self.index_tid: dict[int, tuple] = {}      # index oid -> TID of its pg_index row
        self.stat_tids: dict[int, list] = {}       # relid -> TIDs of its pg_statistic rows
        self.max_oid = FIRST_OID - 1               # largest OID / relfilenode named
        self.sequences: dict[str, SequenceDef] = {}
        self.views: dict[str, ViewDef] = {}
        self.rewrite_tid: dict[int, tuple] = {}    # view oid -> TID of its pg_rewrite row
        self.con_tids: dict[int, tuple] = {}       # constraint oid -> TID of its row
        self.temp = False                          # some table is temporary (TEMP_PREFIX)

    def lookup_table(self, name: str) -> TableDef | None:
        t = self.tables.get(name)
        return t if t is not None else self.system.get(name)


# ---------------------------------------------------------------------------------------------
# reading the catalog heaps
def _rows(backend, desc, snap) -> list[tuple[tuple, tuple]]:
    """(tid, row) of every row of catalog ``desc`` that ``snap`` sees."""
    rel = desc.rel
    natts = rel.layout.natts
    flt = MVCCFilter(backend.bufmgr, snap, backend.instance.clog)
    scan = HeapScan(backend, rel, list(range(natts)), tuple_filter=flt,
                    prepare_pages=PagePruner(backend, rel), use_ring=False, syncscan=False)
    out = []
    for batch in scan:
        cols = []
        for vals, mask in batch.columns:
            lst = vals.tolist()
            if mask is not None:
                for k, m in enumerate(mask.tolist()):
                    if m:
                        lst[k] = None
            cols.append(lst)
        tids = zip(batch.blocks.tolist(), batch.offsets.tolist())
        out.extend(zip(tids, zip(*cols)))
    return out


def _catalog_snapshot(backend, own: bool):
    """A fresh snapshot for catalog reads (GetCatalogSnapshot): with this backend's xid and
    current command id when ``own``, else one that sees committed rows only.  Returns
    (snapshot, whether the caller must clear the xmin it published)."""
    xact = backend.xact
    procarray = xact.procarray
    had = int(procarray.seg.proc_xmin[backend.slot]) != 0
    snap = procarray.get_snapshot(backend.slot, xact.xid if own else 0, xact.cid)
    return snap, not had


def load_state(backend, version, gen: int, own: bool) -> CatalogState:
    """Build a ``CatalogState`` from the catalog rows a fresh snapshot sees."""
    snap, clear = _catalog_snapshot(backend, own)
    try:
        classes = _rows(backend, PG_CLASS, snap)
        attrs = _rows(backend, PG_ATTRIBUTE, snap)
        idx = _rows(backend, PG_INDEX, snap)
        stats = _rows(backend, PG_STATISTIC, snap)
        rewrites = _rows(backend, PG_REWRITE, snap)
        cons = _rows(backend, PG_CONSTRAINT, snap)
    finally:
        if clear:
            backend.xact.procarray.clear_xmin(backend.slot)
    st = CatalogState(version, gen)
    cols_of: dict[int, list] = {}
    for tid, r in attrs:
        cols_of.setdefault(r[0], []).append((r[4], column_def(r)))
        st.attr_tids.setdefault(r[0], []).append(tid)
    index_rows = {}
    for tid, r in idx:
        index_rows[r[0]] = r
        st.index_tid[r[0]] = tid
    stats_of: dict[int, dict] = {}
    for tid, r in stats:
        stats_of.setdefault(r[0], {})[r[1]] = r
        st.stat_tids.setdefault(r[0], []).append(tid)
    rewrite_of = {}
    for tid, r in rewrites:
        rewrite_of[r[0]] = r
        st.rewrite_tid[r[0]] = tid
    checks_of: dict[int, list] = {}
    for tid, r in cons:
        st.con_tids[r[0]] = tid
        st.max_oid = max(st.max_oid, r[0])
        if r[3] == "c":  # (foreign keys, 'f': fkeys.attach below)
            checks_of.setdefault(r[2], []).append(CheckDef(r[0], r[1], r[4]))
    by_oid: dict[int, TableDef] = {}
    idx_classes = []
    for tid, r in classes:
        oid, name, _ns, kind, rfn, relpages, reltuples = r[:7]
        st.class_tid[oid] = tid
        st.max_oid = max(st.max_oid, oid, rfn)
        if oid < FIRST_OID:
            sysdef = st.system.get(name)
            if sysdef is not None:
                sysdef.relpages, sysdef.reltuples = relpages, reltuples
            continue
        if kind == RELKIND_TABLE:
            cols = [c for _, c in sorted(cols_of.get(oid, []), key=lambda x: x[0])]
            t = TableDef(oid, name, rfn, cols, [], relpages, reltuples)
            t.column_stats = _column_stats(cols, stats_of.get(oid, {}))
            t.checks = sorted(checks_of.get(oid, []), key=lambda c: c.name)
            st.tables[name] = t
            if name.startswith(TEMP_PREFIX):
                st.temp = True
            by_oid[oid] = t
            st.by_rfn[rfn] = name
        elif kind == RELKIND_INDEX:
            idx_classes.append((oid, name, rfn))
        elif kind == RELKIND_SEQUENCE:
            st.sequences[name] = SequenceDef(oid, name, rfn)
            st.by_rfn[rfn] = name
        elif kind == RELKIND_VIEW and oid in rewrite_of:
            cols = [c for _, c in sorted(cols_of.get(oid, []), key=lambda x: x[0])]
            rw = rewrite_of[oid]
            st.views[name] = ViewDef(oid, name, cols, rw[2], [int(x) for x in rw[3].split()])
    for oid, name, rfn in sorted(idx_classes):
        r = index_rows.get(oid)
        t = by_oid.get(r[1]) if r is not None else None
        if t is None:
            continue  # an index row without its table: the checker reports it
        st.indexes[name] = _index_def(oid, name, t, rfn, r)
        t.indexes.append(name)
        st.by_rfn[rfn] = name
    st.max_oid = max(st.max_oid, fkeys.attach(by_oid, cons))
    return st


def _index_def(oid: int, name: str, t: TableDef, rfn: int, r: tuple) -> IndexDef:
    """The relcache entry of an index from its pg_index row ``r``."""
    attnums = [int(x) for x in r[5].split()]
    options = [int(x) for x in r[6].split()] if r[6] else [0] * len(attnums)
    texts = iter(json.loads(r[7]) if r[7] else [])
    exprs = [next(texts) if a == 0 else None for a in attnums]
    cols = [t.columns[a - 1].name if a else index_expr_name(e)
            for a, e in zip(attnums, exprs)]
    return IndexDef(oid, name, t.name, rfn, cols, bool(r[3]), bool(r[4]), options,
                    exprs if any(exprs) else [], r[8])


def index_expr_name(text: str) -> str:
    """The column name PostgreSQL gives an index's expression column: the function's name
    for a function call, else ``expr``."""
    head = text.strip().split("(", 1)[0].strip().lower()
    return head if head.isidentifier() and "(" in text else "expr"


def _column_stats(cols, rows: dict) -> dict:
    out = {}
    for attnum, r in rows.items():
        if not 1 <= attnum <= len(cols):
            continue
        d = {"null_frac": r[3], "avg_width": r[4], "n_distinct": r[5]}
        if r[6] is not None:
            d["correlation"] = r[6]
        if r[7] is not None:
            d.update(json.loads(r[7]))
        out[cols[attnum - 1].name] = d
    return out


# ---------------------------------------------------------------------------------------------
class CatalogCache:
    """The process's committed catalog state and what every backend of the process shares:
    the shared counter, the catalog LWLock, the relation files."""

    def __init__(self, instance):
        self.instance = instance
        self.control = instance.seg.control
        self.lock = instance.locks.catalog
        self.smgr = instance.smgr
        self.state: CatalogState | None = None

    def reload(self, backend) -> CatalogState:
        """The committed state, rebuilt now (the shared counter moved)."""
        gen = int(self.control[CTL_CATALOG_GEN])
        if backend is None:
            with temp_backend(self.instance) as b:
                st = load_state(b, gen, gen, own=False)
        else:
            st = load_state(backend, gen, gen, own=False)
        self.state = st
        return st

    def bump(self) -> None:
        """Invalidate every process's cache (a committed catalog change)."""
        with self.lock:
            self.control[CTL_CATALOG_GEN] += 1

    def new_oid(self) -> int:
        """A fresh OID, also the relation's relfilenode (call with ``lock`` held): never one
        a file already has (a crash may leave files no catalog row names)."""
        ctl = self.control
        while True:
            oid = int(ctl[CTL_NEXT_OID])
            if oid >= MAX_OID:
                raise ProgramLimitExceeded("out of OIDs")
            ctl[CTL_NEXT_OID] = oid + 1
            if not self.smgr.exists(oid):
                return oid

    def init_next_oid(self, backend) -> None:
        """At open: the OID counter starts past every OID and relation file there is, and
        never before the last checkpoint's NextOID (the control file's): an OID a dropped
        relation had is not handed out again while that checkpoint stands."""
        st = self.reload(backend)
        top = st.max_oid
        try:
            names = os.listdir(self.smgr.base)
        except FileNotFoundError:
            names = []
        for n in names:
            head = n.split("_")[0].split(".")[0]
            if head.isdigit():
                top = max(top, int(head))
        carried = getattr(getattr(self.instance, "control", None), "next_oid", 0) or 0
        self.control[CTL_NEXT_OID] = max(FIRST_OID, top + 1, int(carried))


@contextlib.contextmanager
def temp_backend(instance):
    """A short-lived backend for the instance-level catalog (a connection slot, else the
    auxiliary one)."""
    try:
        b = instance.connect()
    except TooManyConnections:
        b = instance.connect(aux=True)
    try:
        yield b
    finally:
        instance.seg.stats[b.slot] = 0  # the instance's catalog reads are no session's
        b.close()


# ---------------------------------------------------------------------------------------------
class Catalog:
    """The catalog as one backend sees it (see the module docstring).

    Lookups: ``table(name)``, ``index(name)``, ``heap_rel(name)``, ``tables`` / ``indexes``
    (dicts by name, user relations only; do not change them), ``name_of_relfilenode``,
    ``version()`` (the plan cache's key).  Changes: ``create_table``, ``drop_table``,
    ``truncate_table``, ``create_index``, ``drop_index``, ``set_stats``,
    ``set_column_stats``, ``run_change`` (ALTER TABLE / REINDEX: ``minidb.catalog.alter``);
    each is part of the backend's transaction (or its own, committed
    at once, when none is open).
    """

    def __init__(self, cache: CatalogCache, backend=None):
        self._cache = cache
        self._ctl = cache.control
        self._backend = backend
        self._local: CatalogState | None = None   # overlay of this backend's transaction
        self.dropped_oids: list[int] = []         # statistics to forget at commit

    # -- the state ----------------------------------------------------------------------------
    def _state(self) -> CatalogState:
        loc = self._local
        gen = self._ctl[CTL_CATALOG_GEN]
        if loc is not None:
            if loc.gen == gen:
                return loc
            return self._rebuild_local()
        st = self._cache.state
        if st is None or st.gen != gen:
            st = self._cache.reload(self._backend)
        return st

    def _rebuild_local(self) -> CatalogState:
        gen = int(self._ctl[CTL_CATALOG_GEN])
        self._local = load_state(self._backend, ("x", next(_overlay_serial)), gen, own=True)
        return self._local

    def after_subxact_abort(self) -> None:
        """A savepoint level that changed the catalog rolled back: its rows are aborted now,
        so the overlay is read again (``minidb.txn.subxact``)."""
        if self._local is not None:
            st = self._rebuild_local()
            # a drop the level made is undone: that table's statistics stay at commit
            self.dropped_oids = [o for o in self.dropped_oids if o not in st.class_tid]

    def end_of_xact(self) -> None:
        """The transaction ended: back to the committed state."""
        self._local = None
        self.dropped_oids = []

    def refresh(self) -> None:
        """Make sure the next lookup sees every committed change (kept for callers)."""
        self._state()

    def version(self):
        """What a cached plan was made for: equal versions, equal catalog."""
        return self._state().version

    @property
    def temp_prefix(self) -> str:
        """The prefix of this backend's temporary tables' stored names."""
        b = self._backend
        return f"{TEMP_PREFIX}{b.slot}." if b is not None else "\x00"

    def _temp_name(self, st: CatalogState, name: str) -> str:
        if st.temp:
            long = self.temp_prefix + name
            if long in st.tables:
                return long
        return name

    @property
    def tables(self) -> dict[str, TableDef]:
        st = self._state()
        if not st.temp:
            return st.tables
        got = self.__dict__.get("_aware")
        if got is None or got[0] is not st:
            d = _TempAware(st.tables)
            d.prefix = self.temp_prefix
            got = self._aware = (st, d)
        return got[1]

    @property
    def indexes(self) -> dict[str, IndexDef]:
        return self._state().indexes

    @property
    def sequences(self) -> dict[str, SequenceDef]:
        return self._state().sequences

    @property
    def system_tables(self) -> dict[str, TableDef]:
        return self._state().system

    def table(self, name: str) -> TableDef:
        st = self._state()
        t = st.lookup_table(self._temp_name(st, name))
        if t is None:
            raise UndefinedTable(f'relation "{name}" does not exist')
        return t

    def index(self, name: str) -> IndexDef:
        i = self._state().indexes.get(name)
        if i is None:
            raise UndefinedObject(f'index "{name}" does not exist')
        return i

    @property
    def views(self) -> dict[str, ViewDef]:
        """Views by name (``minidb.sql.views``; do not change)."""
        return self._state().views

    def view(self, name: str) -> ViewDef | None:
        return self._state().views.get(name)

    def heap_rel(self, name: str) -> HeapRel:
        """The ``HeapRel`` of a table (built once per catalog state)."""
        st = self._state()
        name = self._temp_name(st, name)
        rel = st.rels.get(name)
        if rel is not None:
            return rel
        t = st.lookup_table(name)
        if t is None:
            raise UndefinedTable(f'relation "{name}" does not exist')
        cols = [Column(c.name, c.type, c.not_null) for c in t.columns]
        indexed = frozenset(a for i in t.indexes if i in st.indexes
                            for a in st.indexes[i].referenced_columns(t))
        rel = HeapRel(t.name, t.relfilenode, RowLayout(cols), t.oid, indexed)
        if name.startswith(self.temp_prefix) and self._backend is not None:
            unlogged(self._backend.bufmgr).add(t.relfilenode)   # its pages: no WAL
        st.rels[name] = rel
        return rel

    def name_of_relfilenode(self, rfn: int) -> str | None:
        """For error messages: never reads the catalog (it may be called with buffers
        locked), only what is cached."""
        desc = BY_OID.get(rfn)
        if desc is not None:
            return desc.name
        for st in (self._local, self._cache.state):
            if st is not None and rfn in st.by_rfn:
                return st.by_rfn[rfn]
        return None

    # -- running a change ------------------------------------------------------------------------
    def _run(self, method: str, *args, **kw):
        """Run a change in the backend's transaction, or (none open) in its own."""
        b = self._backend
        if b is None:
            with temp_backend(self._cache.instance) as tb:
                return getattr(tb.catalog, method)(*args, **kw)
        xact = b.xact
        if xact.state == FAILED:
            raise InFailedSqlTransaction(
                "current transaction is aborted, commands ignored until end of transaction block")
        implicit = xact.state == IDLE
        if implicit:
            xact.start_statement()
        try:
            res = getattr(self, "_" + method)(b, *args, **kw)
            if implicit:
                xact.command_done(True)
        except BaseException:
            if implicit:
                xact.rollback()
            raise
        if implicit:
            xact.commit()
        return res

    def _changed(self, b) -> CatalogState:
        """After catalog writes: the next command sees them (CommandCounterIncrement) and
        this backend reads its own overlay from now on."""
        b.xact.catalog_changed = True
        b.xact.cid += 1
        return self._rebuild_local()

    def _snap(self, b):
        return b.xact.procarray.get_snapshot(b.slot, b.xact.xid, b.xact.cid)

    def _insert(self, b, desc, row) -> None:
        heap_insert(b, desc.rel, row, xmin=b.xact.xid_for_write(), cmin=b.xact.cid)

    def _write(self, b, desc, tid, new_row=None) -> None:
        """Delete (``new_row`` None) or update one catalog row this backend saw."""
        snap = self._snap(b)
        if new_row is None:
            res, _ = heap_delete(b, desc.rel, tid, snap)
        else:
            res, _, _ = heap_update(b, desc.rel, tid, new_row, snap)
        if res in (TM_OK, TM_SELF_MODIFIED):
            return
        if res == TM_DELETED and new_row is None and desc is PG_STATISTIC:
            return  # a concurrent ANALYZE removed them first
        raise SerializationFailure(
            f'could not serialize access due to concurrent {"update" if res == TM_UPDATED else "delete"}'
            f' of catalog "{desc.name}"')

    def _fetch(self, b, desc, tid) -> tuple:
        bm = b.bufmgr
        buf = bm.pin(desc.oid, tid[0])
        try:
            bm.lock(buf, SHARE)
            try:
                row = desc.rel.layout.decode(bytes(pg.get_item(bm.page(buf), tid[1])))
            finally:
                bm.unlock(buf)
        finally:
            bm.unpin(buf)
        return row

    def _update_class(self, b, st: CatalogState, oid: int, **changes) -> None:
        tid = st.class_tid[oid]
        row = list(self._fetch(b, PG_CLASS, tid))
        names = [c[0] for c in PG_CLASS.columns]
        for k, v in changes.items():
            row[names.index(k)] = v
        self._write(b, PG_CLASS, tid, tuple(row))

    def _claim_name(self, b, name: str, row_of_oid, storage: bool = True) -> int:
        """Under the catalog lock: check no relation is called ``name`` (waiting for a
        transaction that is creating or dropping one), allocate an OID, create its file
        (deleted again if the transaction aborts; none for a view: ``storage`` False) and
        insert its pg_class row."""
        xact = b.xact
        xid = xact.xid_for_write()
        while True:
            with self._cache.lock:
                wait = self._name_taken(b, name)
                if wait == 0:
                    oid = self._cache.new_oid()
                    if storage:
                        create_relation_storage(b, oid)
                    heap_insert(b, PG_CLASS.rel, row_of_oid(oid), xmin=xid, cmin=xact.cid)
                    return oid
            if wait < 0:
                raise DuplicateTable(f'relation "{name}" already exists')
            s = b.settings
            xact.procarray.wait_for(b.slot, wait, lock_timeout_ms=s.lock_timeout,
                                    deadlock_timeout_ms=s.deadlock_timeout,
                                    max_wait_ms=s.lock_wait_timeout_ms,
                                    what=f' (for relation name "{name}")')

    def _name_taken(self, b, name: str) -> int:
        """0: ``name`` is free; -1: a visible relation has it; else the xid of a running
        transaction that is creating or dropping a relation of that name."""
        if name in BY_NAME:
            return -1
        bm = b.bufmgr
        procarray = b.xact.procarray
        clog = procarray.clog
        snap = self._snap(b)
        layout = PG_CLASS.rel.layout
        for block in range(bm.smgr.nblocks(PG_CLASS.oid)):
            buf = bm.pin(PG_CLASS.oid, block)
            try:
                bm.lock(buf, SHARE)
                try:
                    page = bm.page(buf)
                    items = []
                    for off in range(1, pg.max_offset(page) + 1):
                        if pg.get_item_id(page, off)[1] == pg.LP_NORMAL:
                            item = bytes(pg.get_item(page, off))
                            items.append((decode_header(item), layout.decode(item)))
                finally:
                    bm.unlock(buf)
            finally:
                bm.unpin(buf)
            for h, row in items:
                if row[1] != name:
                    continue
                visible, _ = vis.satisfies_mvcc(h["xmin"], h["xmax"], h["cmin"], h["cmax"],
                                                h["infomask"], snap, clog)
                xmax = h["xmax"]
                if visible:
                    if (xmax and not snap.is_mine(xmax) and not h["infomask"] & HEAP_XMAX_INVALID
                            and not h["infomask"] & HEAP_XMAX_LOCK_ONLY
                            and procarray.is_in_progress(xmax)):
                        return xmax  # being dropped: wait for the dropper
                    return -1
                xmin = h["xmin"]
                if not snap.is_mine(xmin) and procarray.is_in_progress(xmin):
                    return xmin  # being created: wait for the creator
        return 0

    # -- public changes -------------------------------------------------------------------------
    def create_table(self, name: str, columns: list[ColumnDef]) -> TableDef:
        if name.startswith(TEMP_PREFIX):
            self.made_temp = True     # the backend's end drops its temporary tables
        return self._run("create_table", name, columns)

    def _long(self, name: str) -> str:
        """A table name as stored: this backend's temporary table of that name first."""
        return self._temp_name(self._state(), name)

    def drop_table(self, name: str) -> TableDef:
        """Drop a table and its indexes (their files go at commit)."""
        return self._run("drop_table", self._long(name))

    def truncate_table(self, name: str, build_index=None) -> TableDef:
        """Give a table and its indexes new, empty files (the old ones go at commit);
        ``build_index(index_def)`` initialises each new index file."""
        return self._run("truncate_table", self._long(name), build_index)

    def create_index(self, name: str, table: str, columns: list[str], *, unique: bool = False,
                     primary: bool = False, build=None, options=None, exprs=None,
                     predicate: str | None = None) -> IndexDef:
        """Add an index on ``table``: its catalog rows and file, then ``build(index_def)``
        fills the file.  Nobody else sees it before commit; an error aborts all of it.
        ``options``: pg_index.indoption bits per column; ``exprs``: per column the SQL
        text of an expression column (its ``columns`` entry is then ignored) or None;
        ``predicate``: a partial index's WHERE as SQL text."""
        return self._run("create_index", name, self._long(table), columns, unique=unique,
                         primary=primary, build=build, options=options, exprs=exprs,
                         predicate=predicate)

    def drop_index(self, name: str) -> IndexDef:
        return self._run("drop_index", name)

    def drop_temp_tables(self, own: bool) -> None:
        """Drop this backend's temporary tables (``own``), or every one there is (at open:
        left by a crash), each in a transaction of its own (``minidb.sql.temp``)."""
        if own and not self.__dict__.get("made_temp"):
            return                    # none made: no catalog read at a backend's end
        prefix = self.temp_prefix if own else TEMP_PREFIX
        st = self._state()
        if not st.temp:
            return
        for name in [n for n in st.tables if n.startswith(prefix)]:
            self.drop_table(name)

    def run_change(self, fn, *args):
        """Run ``fn(self, backend, *args)`` as a catalog change of the backend's transaction
        (ALTER TABLE and REINDEX: ``minidb.catalog.alter``)."""
        if args and isinstance(args[0], str):
            args = (self._long(args[0]),) + args[1:]
        return self._run("run_change", fn, *args)

    def _run_change(self, b, fn, *args):
        return fn(self, b, *args)

    def set_stats(self, name: str, relpages: int, reltuples: float) -> None:
        """VACUUM's relpages / reltuples: written in place, not transactional (PostgreSQL's
        heap_inplace_update), visible to every process at once."""
        b = self._backend
        if b is None:
            with temp_backend(self._cache.instance) as tb:
                return tb.catalog.set_stats(name, relpages, reltuples)
        st = self._state()
        t = st.tables.get(self._temp_name(st, name))
        if t is None:
            return
        self._inplace_stats(b, st.class_tid[t.oid], int(relpages), float(reltuples))
        self._cache.bump()

    def set_column_stats(self, name: str, relpages: int, reltuples: float,
                         column_stats: dict) -> None:
        """ANALYZE: the table's size (in place) and its per-column statistics (new
        pg_statistic rows in the backend's transaction)."""
        return self._run("set_column_stats", self._long(name), relpages, reltuples,
                         column_stats)

    # -- the changes, inside a transaction -------------------------------------------------------
    def _create_table(self, b, name: str, columns: list[ColumnDef]) -> TableDef:
        if not columns:
            raise ProgramLimitExceeded("a table needs at least one column")
        RowLayout([Column(c.name, c.type, c.not_null) for c in columns])  # validates
        oid = self._claim_name(b, name, lambda oid: class_row(
            oid, name, RELKIND_TABLE, oid, len(columns)))
        for i, c in enumerate(columns, start=1):
            self._insert(b, PG_ATTRIBUTE, attribute_row(oid, i, c))
        return self._changed(b).tables[name]

    def _user_table(self, st: CatalogState, name: str, what: str,
                    noun: str = "table") -> TableDef:
        """A user table by name; a system catalog is 42501 (cannot ``what`` it), a missing
        one 42P01 ('``noun`` "x" does not exist': PostgreSQL says table for DROP, relation
        for ALTER)."""
        t = st.tables.get(name)
        if t is None:
            if name in st.system:
                raise InsufficientPrivilege(
                    f'permission denied: "{name}" is a system catalog (cannot {what} it)')
            raise UndefinedTable(f'{noun} "{name}" does not exist')
        return t

    def _drop_index_rows(self, b, st: CatalogState, idef: IndexDef) -> None:
        self._write(b, PG_INDEX, st.index_tid[idef.oid])
        self._write(b, PG_CLASS, st.class_tid[idef.oid])
        b.xact.pending_deletes.append((idef.relfilenode, True))

    def _drop_table(self, b, name: str) -> TableDef:
        st = self._state()
        t = self._user_table(st, name, "drop")
        for iname in t.indexes:
            self._drop_index_rows(b, st, st.indexes[iname])
        for tid in st.stat_tids.get(t.oid, []):
            self._write(b, PG_STATISTIC, tid)
        for c in t.checks:
            self._write(b, PG_CONSTRAINT, st.con_tids[c.oid])
        for tid in st.attr_tids.get(t.oid, []):
            self._write(b, PG_ATTRIBUTE, tid)
        self._write(b, PG_CLASS, st.class_tid[t.oid])
        b.xact.pending_deletes.append((t.relfilenode, True))
        self.dropped_oids.append(t.oid)
        self._changed(b)
        return t

    def _new_file(self, b) -> int:
        with self._cache.lock:
            rfn = self._cache.new_oid()
            create_relation_storage(b, rfn)
        return rfn

    def _truncate_table(self, b, name: str, build_index) -> TableDef:
        st = self._state()
        t = self._user_table(st, name, "truncate")
        b.xact.xid_for_write()
        rfn = self._new_file(b)
        self._update_class(b, st, t.oid, relfilenode=rfn, relpages=0, reltuples=-1.0)
        b.xact.pending_deletes.append((t.relfilenode, True))
        for iname in t.indexes:
            idef = st.indexes[iname]
            irfn = self._new_file(b)
            self._update_class(b, st, idef.oid, relfilenode=irfn)
            b.xact.pending_deletes.append((idef.relfilenode, True))
        st = self._changed(b)
        if build_index is not None:
            for iname in st.tables[name].indexes:
                build_index(st.indexes[iname])
        return st.tables[name]

    def _create_index(self, b, name: str, table: str, columns: list[str], *, unique=False,
                      primary=False, build=None, options=None, exprs=None,
                      predicate=None) -> IndexDef:
        st = self._state()
        t = st.tables.get(table)
        if t is None:
            if table in st.system:
                raise InsufficientPrivilege(
                    f'permission denied: "{table}" is a system catalog (cannot index it)')
            raise UndefinedTable(f'relation "{table}" does not exist')
        if not columns:
            raise UndefinedColumn("an index needs at least one column")
        exprs = list(exprs) if exprs else [None] * len(columns)
        attnums = []
        for c, e in zip(columns, exprs):
            if e is not None:
                attnums.append(0)
                continue
            i = t.column_index(c)
            if i < 0:
                raise UndefinedColumn(f'column "{c}" does not exist')
            attnums.append(i + 1)
        oid = self._claim_name(b, name, lambda oid: class_row(
            oid, name, RELKIND_INDEX, oid, len(columns)))
        opts = [int(o) for o in options] if options else []
        self._insert(b, PG_INDEX, (oid, t.oid, len(columns), bool(unique or primary),
                                   bool(primary), " ".join(map(str, attnums)),
                                   " ".join(map(str, opts)) if any(opts) else None,
                                   json.dumps([e for e in exprs if e is not None])
                                   if any(e is not None for e in exprs) else None,
                                   predicate))
        if not t.indexes:
            self._update_class(b, st, t.oid, relhasindex=True)
        st = self._changed(b)
        idef = st.indexes[name]
        if build is not None:
            build(idef)
        return idef

    def _drop_index(self, b, name: str) -> IndexDef:
        st = self._state()
        idef = st.indexes.get(name)
        if idef is None:
            raise UndefinedObject(f'index "{name}" does not exist')
        b.xact.xid_for_write()
        self._drop_index_rows(b, st, idef)
        self._changed(b)
        return idef

    def _set_column_stats(self, b, name: str, relpages: int, reltuples: float,
                          column_stats: dict) -> None:
        st = self._state()
        t = st.tables.get(name)
        if t is None:
            return
        self._inplace_stats(b, st.class_tid[t.oid], int(relpages), float(reltuples))
        self._cache.bump()
        st = self._state()  # after the bump: rebuilt
        for tid in st.stat_tids.get(t.oid, []):
            self._write(b, PG_STATISTIC, tid)
        for attnum, c in enumerate(t.columns, start=1):
            s = column_stats.get(c.name)
            if s is not None:
                self._insert(b, PG_STATISTIC, _statistic_row(t.oid, attnum, s))
        self._changed(b)

    def _inplace_stats(self, b, tid, relpages: int, reltuples: float) -> None:
        """Overwrite relpages / reltuples of the pg_class row at ``tid`` in place (fixed
        columns: same offsets in every version), WAL-logged as Heap INPLACE (the page's
        delta: heap_inplace_update)."""
        import struct
        layout = PG_CLASS.rel.layout
        bm = b.bufmgr
        buf = bm.pin(PG_CLASS.oid, tid[0])
        try:
            bm.lock(buf, EXCLUSIVE)
            try:
                page = bm.page(buf)
                wr = PageRecord(bm).add(buf)
                item = pg.get_item(page, tid[1])
                struct.pack_into("<i", item, layout.offsets[5], relpages)
                struct.pack_into("<d", item, layout.offsets[6], reltuples)
                wr.log(RM_HEAP, XLOG_HEAP_INPLACE, 0, struct.pack("<H", tid[1]))
            finally:
                bm.unlock(buf)
        finally:
            bm.unpin(buf)


def _statistic_row(relid: int, attnum: int, s: dict) -> tuple:
    """One pg_statistic row; the value lists (MCVs, histogram) as JSON text, shortened
    until the row fits on a page (no TOAST)."""
    rest = {k: v for k, v in s.items()
            if k not in ("null_frac", "avg_width", "n_distinct", "correlation")}
    while True:
        text = json.dumps(rest) if rest else None
        if text is None or len(text.encode()) < 6000:
            break
        if not rest.get("histogram") and not rest.get("mcv"):
            text = None
            break
        for k in ("histogram", "mcv"):
            if rest.get(k):
                keep = len(rest[k]) // 2
                rest[k] = rest[k][:keep]
                if k == "mcv":
                    rest["mcv_freq"] = rest.get("mcv_freq", [])[:keep]
    corr = s.get("correlation")
    return (relid, attnum, False, float(s.get("null_frac", 0.0)),
            float(s.get("avg_width", 0.0)), float(s.get("n_distinct", 0.0)),
            None if corr is None else float(corr), text)


__all__ = ["Catalog", "CatalogCache", "CatalogState", "load_state", "temp_backend", "MAX_OID"]
