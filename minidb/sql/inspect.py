"""Inspection for the REPL's meta commands (``\\d``, ``\\dt``, ``\\di``, ``\\page``,
``\\btree``, ``\\stats``): plain data, formatted by the caller.

=======================  =====================================================================
function                 returns
=======================  =====================================================================
describe_tables(s)       [(name, rows estimate, pages)] - reltuples if measured, else the
                         planner's estimate from the current size
describe_table(s, name)  {"name", "columns": [(name, type, not null, default)],
                          "indexes": [(name, columns, unique, primary)]}
list_indexes(s)          [(name, table, columns, unique, primary, pages)]
page_dump(s, t, block)   (header dict, [line pointer dicts]) of one heap page: the page
                         header (lsn, checksum, flags, lower, upper, special, prune_xid,
                         free space) and per line pointer its offset, lp_off, flags name,
                         lp_len and, for LP_NORMAL tuples, xmin, xmax, cmin, cmax, ctid and
                         the names of the infomask / infomask2 bits set
btree_dump(s, index)     text (``minidb.index.dump_btree``)
locks(s)                 pg_locks: [(locktype, relation, mode, granted, pid)] of every
                         heavyweight lock held or awaited (``minidb.txn.lmgr``)
stats(s, table=None)     {"tables": [pg_stat_user_tables-like dict per table],
                          "buffers": the instance's buffer counters,
                          "session": this backend's counters, "plan_cache": the engine's
                          counters when an ``engine`` is given}
=======================  =====================================================================

``s`` is a ``minidb.session.Session``.  The page is read through the buffer manager under
a share lock, copied, and released before anything is decoded.
"""

from __future__ import annotations

import minidb.errors as errors
from minidb.heap import layout as L
from minidb.heap import pgstat
from minidb.storage import htup as H
from minidb.storage import page as pg
from minidb.storage.bufmgr import SHARE

__all__ = ["describe_tables", "describe_table", "list_indexes", "page_dump", "btree_dump",
           "stats", "locks"]

_LP_NAMES = {pg.LP_UNUSED: "UNUSED", pg.LP_NORMAL: "NORMAL", pg.LP_REDIRECT: "REDIRECT",
             pg.LP_DEAD: "DEAD"}
_INFOMASK = [(H.HEAP_HASNULL, "HASNULL"), (H.HEAP_HASVARWIDTH, "HASVARWIDTH"),
             (H.HEAP_XMAX_KEYSHR_LOCK, "XMAX_KEYSHR_LOCK"),
             (H.HEAP_XMAX_LOCK_ONLY, "XMAX_LOCK_ONLY"), (H.HEAP_XMIN_COMMITTED, "XMIN_COMMITTED"),
             (H.HEAP_XMIN_INVALID, "XMIN_INVALID"), (H.HEAP_XMAX_COMMITTED, "XMAX_COMMITTED"),
             (H.HEAP_XMAX_INVALID, "XMAX_INVALID"), (H.HEAP_UPDATED, "UPDATED")]
_INFOMASK2 = [(H.HEAP_KEYS_UPDATED, "KEYS_UPDATED"), (H.HEAP_HOT_UPDATED, "HOT_UPDATED"),
              (H.HEAP_ONLY_TUPLE, "HEAP_ONLY")]
_PD_FLAGS = [(pg.PD_HAS_FREE_LINES, "HAS_FREE_LINES"), (pg.PD_PAGE_FULL, "PAGE_FULL"),
             (pg.PD_ALL_VISIBLE, "ALL_VISIBLE")]


def _catalog(session):
    cat = session.backend.catalog
    cat.refresh()
    return cat


def describe_tables(session) -> list[tuple]:
    from minidb.sql.stats import estimated_rows
    cat = _catalog(session)
    smgr = session.instance.smgr
    out = []
    for name in sorted(cat.tables):
        t = cat.tables[name]
        pages = smgr.nblocks(t.relfilenode)
        out.append((name, estimated_rows(t, pages), pages))
    return out


def describe_table(session, name: str) -> dict:
    cat = _catalog(session)
    t = cat.table(name)
    from minidb.types import parse_type
    cols = [(c.name, str(parse_type(c.type)), c.not_null, c.default) for c in t.columns]
    idx = []
    for iname in t.indexes:
        i = cat.indexes.get(iname)
        if i is not None:
            idx.append((i.name, list(i.columns), i.unique, i.primary))
    return {"name": t.name, "columns": cols, "indexes": idx}


def list_indexes(session) -> list[tuple]:
    cat = _catalog(session)
    smgr = session.instance.smgr
    return [(i.name, i.table, list(i.columns), i.unique, i.primary, smgr.nblocks(i.relfilenode))
            for i in sorted(cat.indexes.values(), key=lambda i: i.name)]


def _bits(v: int, table) -> list[str]:
    return [name for bit, name in table if v & bit]


def page_dump(session, table: str, block: int) -> tuple[dict, list[dict]]:
    cat = _catalog(session)
    t = cat.table(table)
    bm = session.backend.bufmgr
    nblocks = bm.smgr.nblocks(t.relfilenode)
    if not 0 <= block < nblocks:
        raise errors.InvalidParameterValue(
            f'block {block} is out of range for relation "{table}" ({nblocks} blocks)')
    b = bm.pin(t.relfilenode, block)
    try:
        bm.lock(b, SHARE)
        try:
            data = bytes(bm.page(b))
        finally:
            bm.unlock(b)
    finally:
        bm.unpin(b)
    import numpy as np
    page = np.frombuffer(data, dtype=np.uint8)
    header = {"block": block, "lsn": pg.get_lsn(page), "checksum": pg.get_checksum(page),
              "flags": _bits(pg.get_flags(page), _PD_FLAGS), "lower": pg.get_lower(page),
              "upper": pg.get_upper(page), "special": pg.get_special(page),
              "prune_xid": pg.get_prune_xid(page), "free_space": pg.free_space(page),
              "line_pointers": pg.max_offset(page)}
    items = []
    for off, lp_off, flags, lp_len in pg.items(page):
        d = {"offset": off, "lp_off": lp_off, "flags": _LP_NAMES[flags], "lp_len": lp_len}
        if flags == pg.LP_NORMAL and lp_len >= L.HEAP_TUPLE_HEADER_SIZE:
            h = L.decode_header(data, lp_off)
            d.update(xmin=h["xmin"], xmax=h["xmax"], cmin=h["cmin"], cmax=h["cmax"],
                     ctid=h["ctid"], infomask=_bits(h["infomask"], _INFOMASK),
                     infomask2=_bits(h["infomask2"], _INFOMASK2), natts=h["natts"])
        elif flags == pg.LP_REDIRECT:
            d["redirect_to"] = lp_off
        items.append(d)
    return header, items


def btree_dump(session, index: str, max_items: int | None = 20) -> str:
    from minidb.index import dump_btree
    _catalog(session).index(index)
    return dump_btree(session.backend, index, max_items=max_items)


def stats(session, table: str | None = None, engine=None) -> dict:
    cat = _catalog(session)
    inst = session.instance
    names = [table] if table is not None else sorted(cat.tables)
    rows = []
    for n in names:
        t = cat.table(n)
        d = {"relname": n}
        d.update(pgstat.read(inst.seg, inst.locks.stats, t.oid))
        d["relpages"] = t.relpages
        d["reltuples"] = t.reltuples
        rows.append(d)
    out = {"tables": rows, "buffers": inst.counters(), "session": session.backend.counters()}
    if engine is not None:
        out["plan_cache"] = engine.plan_cache_stats()
    return out


def locks(session) -> list[tuple]:
    """pg_locks, minidb's columns: (locktype, relation name (or oid / description),
    mode, granted, pid) per held or awaited mode, granted first, by relation and mode."""
    from minidb.txn.lmgr import LOCKTAG_RELATION, LOCKTYPE_NAMES, MODE_NAMES, \
        SharedLockTable, describe_tag
    inst = session.instance
    rows = []
    for tag, mode, granted, slot, _fp in SharedLockTable(inst.seg, inst.locks).snapshot():
        if tag[0] == LOCKTAG_RELATION:
            rel = inst.describe_lock_tag(tag) or str(tag[1])
        else:
            rel = describe_tag(tag)
        rows.append((LOCKTYPE_NAMES.get(tag[0], "object"), rel, MODE_NAMES[mode], granted,
                     abs(int(inst.seg.proc_pid[slot]))))
    rows.sort(key=lambda r: (not r[3], r[1], r[2]))
    return rows
