"""Sequences: a one-page relation of their own, changed in place (PostgreSQL's sequence.c).

A sequence is a relation of kind ``S`` in pg_class with a file of one page.  The page has
the standard layout and one item, the sequence's tuple: its parameters (START, INCREMENT,
MINVALUE, MAXVALUE, CACHE, CYCLE, the type's width, the column that owns it and whether it
is an identity column's) and its state (``last_value``, ``log_cnt``, ``is_called``).

``nextval`` is not transactional: under the page's exclusive buffer lock it computes the
next value, writes it to the page and returns it; a ROLLBACK does not give it back, and
two sessions never get the same value.  Logging follows PostgreSQL: a record is written
only every ``SEQ_LOG_VALS`` (32) calls, and it carries the state as it will be *after* the
next 32 values (``log_cnt`` counts those still covered), so a crash replays a value ahead
of anything handed out and never gives a value twice; a record is also written on the
first call after a checkpoint began (the page's LSN older than the redo point), since the
checkpoint may write a page whose ``log_cnt`` is no longer covered by a record after the
redo point.  The record (Sequence LOG) is a full image of the page - a few hundred bytes
with the hole cut out - replayed like every page record; the WAL is flushed up to it
before the value is returned (PostgreSQL instead gives the transaction an xid so that its
commit flushes it: a value handed out by a transaction that never commits could be handed
out again after a crash there).

CREATE SEQUENCE claims the name in pg_class like a table (so a sequence, a table and an
index cannot share a name) and creates and logs the page; DROP SEQUENCE deletes the row
and the file goes at commit, both transactional.  ALTER SEQUENCE changes the page in place
at once (not undone by a ROLLBACK: PostgreSQL 10+ makes it transactional with a new
relfilenode).  ``currval`` / ``lastval`` are the backend's own memory of the values its
``nextval`` returned (``backend.seq_values``).

**CACHE n** (PostgreSQL's SeqTable): a ``nextval`` that reads the page reserves ``n``
values at once - the page's ``last_value`` moves to the last of them - returns the first
and keeps the others in the backend's memory (``backend.seq_cache``); the next ``n - 1``
calls of this backend take them from there without touching the page.  So two sessions
interleave in blocks (1, 2 in one, 6, 7 in the other with CACHE 5), and values a session
reserved but did not use are lost when it ends, as in PostgreSQL.  ``setval`` and ``ALTER
SEQUENCE`` drop the calling backend's cached values; ``currval`` / ``lastval`` are the
last value returned, cached or not.

Departures: parameters live in the sequence's tuple (PostgreSQL before 10; 10+ has
pg_sequence); the owning column (serial, identity) is recorded in the tuple, not in
pg_depend; ALTER SEQUENCE does not drop *other* backends' cached values (PostgreSQL 10+
does, the sequence getting a new relfilenode), they are used up first.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import minidb.errors as errors
from minidb.catalog.bootstrap import PG_CLASS, RELKIND_SEQUENCE, class_row
from minidb.catalog.defs import SequenceDef
from minidb.storage import page as pg
from minidb.storage.bufmgr import EXCLUSIVE, SHARE
from minidb.storage.xloginsert import PageRecord
from minidb.wal.record import RM_SEQ, XLOG_SEQ_LOG

__all__ = ["SeqParams", "SEQ_LOG_VALS", "create_sequence", "drop_sequence", "alter_sequence",
           "sequence_params", "read_sequence", "nextval", "setval", "currval", "lastval",
           "lookup_sequence", "owned_sequences", "TYPE_LIMITS"]

SEQ_MAGIC = 0x1717            # PostgreSQL's
SEQ_LOG_VALS = 32             # values logged ahead (PostgreSQL's SEQ_LOG_VALS)
_TUPLE = struct.Struct("<IqqqqqqqBBBBih2x")
TYPE_LIMITS = {"smallint": (2, -(1 << 15), (1 << 15) - 1),
               "integer": (4, -(1 << 31), (1 << 31) - 1),
               "bigint": (8, -(1 << 63), (1 << 63) - 1)}
_TYPE_OF_LEN = {v[0]: k for k, v in TYPE_LIMITS.items()}


@dataclass
class SeqParams:
    """A sequence's parameters and state (its tuple)."""
    start: int
    increment: int
    minvalue: int
    maxvalue: int
    cache: int = 1
    cycle: bool = False
    typlen: int = 8
    last_value: int = 0
    log_cnt: int = 0
    is_called: bool = False
    identity: str = ""        # "a" (ALWAYS), "d" (BY DEFAULT), "" (none)
    owner_rel: int = 0        # the owning table's OID (serial / identity), else 0
    owner_att: int = 0        # its column's attnum

    @property
    def type_name(self) -> str:
        return _TYPE_OF_LEN.get(self.typlen, "bigint")

    def pack(self) -> bytes:
        return _TUPLE.pack(SEQ_MAGIC, self.last_value, self.log_cnt, self.start,
                           self.increment, self.minvalue, self.maxvalue, self.cache,
                           int(self.is_called), int(self.cycle),
                           ord(self.identity) if self.identity else 0, self.typlen,
                           self.owner_rel, self.owner_att)

    @classmethod
    def unpack(cls, data, name: str = "?") -> "SeqParams":
        (magic, last, logc, start, inc, mn, mx, cache, called, cycle, ident, typlen, orel,
         oatt) = _TUPLE.unpack_from(bytes(data[:_TUPLE.size]))
        if magic != SEQ_MAGIC:
            raise errors.DataCorrupted(f'bad magic number in sequence "{name}": {magic:x}')
        return cls(start, inc, mn, mx, cache, bool(cycle), typlen, last, logc, bool(called),
                   chr(ident) if ident else "", orel, oatt)


# -- options --------------------------------------------------------------------------------
def sequence_params(opts: dict, type_name: str = "bigint",
                    old: SeqParams | None = None) -> SeqParams:
    """The parameters of CREATE (``old`` None) or ALTER SEQUENCE from the options given
    (``increment``, ``minvalue``, ``maxvalue`` (None: NO MINVALUE / NO MAXVALUE),
    ``start``, ``cache``, ``cycle``, ``as``), checked as PostgreSQL's init_params does."""
    tname = opts.get("as") or (old.type_name if old is not None else type_name)
    if tname not in TYPE_LIMITS:
        raise errors.InvalidParameterValue(
            "sequence type must be smallint, integer, or bigint")
    typlen, tmin, tmax = TYPE_LIMITS[tname]
    inc = opts.get("increment", old.increment if old is not None else 1)
    if inc == 0:
        raise errors.InvalidParameterValue("INCREMENT must not be zero")
    keep = old is not None and "as" not in opts and "increment" not in opts
    if "maxvalue" in opts and opts["maxvalue"] is not None:
        mx = opts["maxvalue"]
    elif keep and "maxvalue" not in opts:
        mx = old.maxvalue
    else:
        mx = tmax if inc > 0 else -1
    if "minvalue" in opts and opts["minvalue"] is not None:
        mn = opts["minvalue"]
    elif keep and "minvalue" not in opts:
        mn = old.minvalue
    else:
        mn = 1 if inc > 0 else tmin
    for what, v in (("MAXVALUE", mx), ("MINVALUE", mn)):
        if not tmin <= v <= tmax:
            raise errors.InvalidParameterValue(
                f"{what} ({v}) is out of range for sequence data type {tname}")
    if mn >= mx:
        raise errors.InvalidParameterValue(
            f"MINVALUE ({mn}) must be less than MAXVALUE ({mx})")
    if "start" in opts:
        start = opts["start"]
    elif old is not None:
        start = old.start
    else:
        start = mn if inc > 0 else mx
    if start < mn:
        raise errors.InvalidParameterValue(
            f"START value ({start}) cannot be less than MINVALUE ({mn})")
    if start > mx:
        raise errors.InvalidParameterValue(
            f"START value ({start}) cannot be greater than MAXVALUE ({mx})")
    cache = opts.get("cache", old.cache if old is not None else 1)
    if cache < 1:
        raise errors.InvalidParameterValue(f"CACHE ({cache}) must be greater than zero")
    cycle = opts.get("cycle", old.cycle if old is not None else False)
    p = SeqParams(start, inc, mn, mx, cache, bool(cycle), typlen)
    if old is None:
        p.last_value, p.is_called = start, False
    else:
        p.last_value, p.log_cnt, p.is_called = old.last_value, 0, old.is_called
        p.identity, p.owner_rel, p.owner_att = old.identity, old.owner_rel, old.owner_att
        if "restart" in opts:
            r = opts["restart"]
            p.last_value, p.is_called = (start if r is None else r), False
        if p.last_value < mn:
            raise errors.InvalidParameterValue(
                f"RESTART value ({p.last_value}) cannot be less than MINVALUE ({mn})")
        if p.last_value > mx:
            raise errors.InvalidParameterValue(
                f"RESTART value ({p.last_value}) cannot be greater than MAXVALUE ({mx})")
    return p


# -- the catalog changes --------------------------------------------------------------------
def create_sequence(catalog, name: str, params: SeqParams) -> SequenceDef:
    """CREATE SEQUENCE as a catalog change of the backend's transaction."""
    return catalog.run_change(_create, name, params)


def _create(cat, b, name: str, params: SeqParams) -> SequenceDef:
    oid = cat._claim_name(b, name, lambda oid: class_row(oid, name, RELKIND_SEQUENCE, oid, 0))
    bm = b.bufmgr
    _, bufs = bm.extend(oid, 1)
    buf = bufs[0]
    try:
        page = bm.page(buf)
        rec = PageRecord(bm).add(buf, new=True)
        pg.init_page(page)
        pg.add_item(page, params.pack())
        rec.log(RM_SEQ, XLOG_SEQ_LOG, b.xact.xid)
    finally:
        bm.unlock(buf)
        bm.unpin(buf)
    return cat._changed(b).sequences[name]


def drop_sequence(catalog, sdef: SequenceDef) -> None:
    """DROP SEQUENCE: the pg_class row goes now, the file at commit."""
    catalog.run_change(_drop, sdef)


def _drop(cat, b, sdef: SequenceDef) -> None:
    st = cat._state()
    b.xact.xid_for_write()
    cat._write(b, PG_CLASS, st.class_tid[sdef.oid])
    b.xact.pending_deletes.append((sdef.relfilenode, True))
    cat._changed(b)


def alter_sequence(backend, sdef: SequenceDef, opts: dict) -> SeqParams:
    """ALTER SEQUENCE: the new parameters written (and logged) in place at once."""
    def change(p: SeqParams) -> SeqParams:
        return sequence_params(opts, old=p)
    _cache(backend).pop(sdef.oid, None)
    return _update(backend, sdef, change)


# -- reading and changing the tuple -----------------------------------------------------------
def read_sequence(backend, sdef: SequenceDef) -> SeqParams:
    bm = backend.bufmgr
    buf = bm.pin_lock(sdef.relfilenode, 0, SHARE)
    try:
        return SeqParams.unpack(pg.get_item(bm.page(buf), 1), sdef.name)
    finally:
        bm.unlock_unpin(buf)


def _write_tuple(page, p: SeqParams) -> None:
    pg.overwrite_item(page, 1, p.pack())


def _log_state(backend, buf, page, p: SeqParams) -> int:
    """Write ``p`` to the page and log it (an image of the page)."""
    rec = PageRecord(backend.bufmgr).add(buf, new=True)
    _write_tuple(page, p)
    return rec.log(RM_SEQ, XLOG_SEQ_LOG)


def _update(backend, sdef: SequenceDef, change) -> SeqParams:
    """Replace the tuple by ``change(old)``, logged, with log_cnt 0."""
    bm = backend.bufmgr
    buf = bm.pin_lock(sdef.relfilenode, 0, EXCLUSIVE)
    try:
        page = bm.page(buf)
        p = change(SeqParams.unpack(pg.get_item(page, 1), sdef.name))
        p.log_cnt = 0
        lsn = _log_state(backend, buf, page, p)
    finally:
        bm.unlock_unpin(buf)
    _flush(backend, lsn)
    return p


def _flush(backend, lsn: int) -> None:
    if lsn and backend.wal is not None:
        backend.wal.flush(lsn)


def _step(p: SeqParams, v: int, name: str, error: bool = True):
    """The value after ``v``; at the limit: wrap (CYCLE), else 2200H (or None)."""
    nv = v + p.increment
    if p.increment > 0 and nv > p.maxvalue:
        if not p.cycle:
            if not error:
                return None
            raise errors.SequenceGeneratorLimitExceeded(
                f'nextval: reached maximum value of sequence "{name}" ({p.maxvalue})')
        return p.minvalue
    if p.increment < 0 and nv < p.minvalue:
        if not p.cycle:
            if not error:
                return None
            raise errors.SequenceGeneratorLimitExceeded(
                f'nextval: reached minimum value of sequence "{name}" ({p.minvalue})')
        return p.maxvalue
    return nv


def _values(backend) -> dict:
    d = backend.__dict__.get("seq_values")
    if d is None:
        d = backend.__dict__["seq_values"] = {}
    return d


def _cache(backend) -> dict:
    d = backend.__dict__.get("seq_cache")
    if d is None:
        d = backend.__dict__["seq_cache"] = {}
    return d


def nextval(backend, sdef: SequenceDef) -> int:
    """The sequence's next value (see the module docstring for the logging and CACHE):
    PostgreSQL's nextval_internal - reserve up to CACHE values, and SEQ_LOG_VALS more in
    the record when one is due."""
    cached = _cache(backend).get(sdef.oid)
    if cached:
        value = cached.pop()
        _values(backend)[sdef.oid] = value
        backend.__dict__["seq_last_used"] = sdef.oid
        return value
    bm = backend.bufmgr
    lsn = 0
    buf = bm.pin_lock(sdef.relfilenode, 0, EXCLUSIVE)
    try:
        page = bm.page(buf)
        p = SeqParams.unpack(pg.get_item(page, 1), sdef.name)
        cache = max(1, p.cache)
        nxt = last = p.last_value
        got = []                        # the values this call reserves, in order
        fetch, log = cache, p.log_cnt
        if not p.is_called:             # the first value is last_value itself
            got.append(nxt)
            fetch -= 1
        wal = bm.wal
        logit = wal is not None and (log < fetch or not p.is_called
                                     or pg.get_lsn(page) <= wal.shared.redo_lsn())
        if logit:
            fetch = log = fetch + SEQ_LOG_VALS
        while fetch:
            step = _step(p, nxt, sdef.name, error=not got)
            if step is None:            # at the limit, with a value in hand: stop
                break
            nxt = step
            fetch -= 1
            if len(got) < cache:
                log -= 1
                got.append(nxt)
                last = nxt
        log -= fetch
        if logit:                       # the record covers the values logged ahead
            p.last_value, p.is_called, p.log_cnt = nxt, True, 0
            lsn = _log_state(backend, buf, page, p)
        else:
            bm.mark_dirty(buf)
        p.last_value, p.is_called, p.log_cnt = last, True, max(log, 0) if wal else 0
        _write_tuple(page, p)
    finally:
        bm.unlock_unpin(buf)
    _flush(backend, lsn)
    value = got[0]
    if len(got) > 1:
        _cache(backend)[sdef.oid] = got[:0:-1]      # the rest, next one last
    _values(backend)[sdef.oid] = value
    backend.__dict__["seq_last_used"] = sdef.oid
    return value


def setval(backend, sdef: SequenceDef, value: int, is_called: bool = True) -> int:
    """setval(seq, value [, is_called]): logged at once; the next nextval returns
    ``value`` + increment (or ``value`` when not called)."""
    def change(p: SeqParams) -> SeqParams:
        if not p.minvalue <= value <= p.maxvalue:
            raise errors.NumericValueOutOfRange(
                f'setval: value {value} is out of bounds for sequence "{sdef.name}" '
                f"({p.minvalue}..{p.maxvalue})")
        p.last_value, p.is_called = value, bool(is_called)
        return p
    _cache(backend).pop(sdef.oid, None)
    _update(backend, sdef, change)
    if is_called:
        _values(backend)[sdef.oid] = value
    return value


def currval(backend, sdef: SequenceDef) -> int:
    v = _values(backend).get(sdef.oid)
    if v is None:
        raise errors.ObjectNotInPrerequisiteState(
            f'currval of sequence "{sdef.name}" is not yet defined in this session')
    return v


def lastval(backend, catalog) -> int:
    oid = backend.__dict__.get("seq_last_used")
    if oid is None:
        raise errors.ObjectNotInPrerequisiteState("lastval is not yet defined in this session")
    if not any(s.oid == oid for s in catalog.sequences.values()):
        raise errors.ObjectNotInPrerequisiteState("lastval is not yet defined in this session")
    return _values(backend)[oid]


def lookup_sequence(catalog, name) -> SequenceDef:
    """The sequence a function's argument names: a name (``'s'``, ``'public.s'``,
    ``'"S"'``) or an OID (from ``::regclass``)."""
    if isinstance(name, int):
        for s in catalog.sequences.values():
            if s.oid == name:
                return s
        for t in list(catalog.tables.values()) + list(catalog.indexes.values()):
            if t.oid == name:
                raise errors.WrongObjectType(f'"{t.name}" is not a sequence')
        raise errors.UndefinedTable(f"could not open relation with OID {name}")
    n = str(name)
    n = n[len("public."):] if n.startswith("public.") else n
    n = n[1:-1] if n.startswith('"') and n.endswith('"') else n.lower()
    s = catalog.sequences.get(n)
    if s is not None:
        return s
    if n in catalog.tables or n in catalog.indexes or n in catalog.system_tables:
        raise errors.WrongObjectType(f'"{n}" is not a sequence')
    raise errors.UndefinedTable(f'relation "{n}" does not exist')


def owned_sequences(backend, table_oid: int) -> list[SequenceDef]:
    """The sequences a table's columns own (serial, identity), read from their tuples."""
    out = []
    for s in backend.catalog.sequences.values():
        if read_sequence(backend, s).owner_rel == table_oid:
            out.append(s)
    return out
