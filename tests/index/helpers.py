"""Test helpers: a table with its B-tree indexes maintained the way the executor will
maintain them (heap write, then ``insert_entry`` for each index unless the update was HOT),
one statement per call, autocommitted outside ``begin()`` as ``Session`` does."""

from __future__ import annotations

from minidb.catalog import ColumnDef
from minidb.heap.heapam import heap_insert
from minidb.heap.modify import TM_OK, heap_delete, heap_update
from minidb.index import insert_entry
from minidb.session import Session


def make_table(inst, name: str, columns) -> None:
    inst.catalog.create_table(name, [ColumnDef(c[0], c[1]) for c in columns])


class Table:
    """Statements on one table through a ``Session``, keeping its indexes current."""

    def __init__(self, session: Session, name: str):
        self.s = session
        self.name = name

    @property
    def backend(self):
        return self.s.backend

    def rel(self):
        return self.s.rel(self.name)

    def indexes(self) -> list[str]:
        return list(self.backend.catalog.table(self.name).indexes)

    def _statement(self, body):
        xact = self.s.xact
        snap = xact.start_statement()
        implicit = not xact.explicit
        try:
            result, wrote = body(snap)
            xact.command_done(wrote)
        except BaseException:
            xact.fail()
            raise
        if implicit:
            xact.commit()
        return result

    def insert(self, row) -> tuple[int, int]:
        rel, backend = self.rel(), self.backend

        def body(snap):
            xid = backend.xact.xid_for_write()
            tid = heap_insert(backend, rel, row, xmin=xid, cmin=snap.curcid)
            for name in self.indexes():
                insert_entry(backend, name, row, tid)
            return tid, True
        return self._statement(body)

    def delete(self, tid) -> bool:
        rel, backend = self.rel(), self.backend

        def body(snap):
            res, _ = heap_delete(backend, rel, tid, snap)
            return res == TM_OK, res == TM_OK
        return self._statement(body)

    def update(self, tid, new_row):
        """-> (new tid or None, hot)"""
        rel, backend = self.rel(), self.backend

        def body(snap):
            res, new_tid, hot = heap_update(backend, rel, tid, new_row, snap)
            if res != TM_OK:
                return (None, False), False
            if not hot:
                for name in self.indexes():
                    insert_entry(backend, name, new_row, new_tid)
            return (new_tid, hot), True
        return self._statement(body)

    def rows(self, where=None) -> list[tuple]:
        return self.s.select(self.name, where)

    def tids(self, where=None):
        return self.s.select_tids(self.name, where)
