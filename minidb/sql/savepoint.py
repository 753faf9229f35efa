"""SAVEPOINT / RELEASE [SAVEPOINT] / ROLLBACK TO [SAVEPOINT]: the SQL side of subtransactions.

==============================  ===========================================================
statement                       what happens (``minidb.txn.subxact`` has the rules)
==============================  ===========================================================
SAVEPOINT name                  ``xact.savepoint(name)``; outside a block 25P01 (as
                                PostgreSQL: "SAVEPOINT can only be used in transaction
                                blocks"); a name may repeat (the innermost one counts)
RELEASE [SAVEPOINT] name        ``xact.release(name)``: tag RELEASE; unknown name 3B001
ROLLBACK TO [SAVEPOINT] name    ``xact.rollback_to(name)``: tag ROLLBACK; the one statement
                                besides ROLLBACK / COMMIT a failed block accepts
==============================  ===========================================================

Every other statement's error inside a block with savepoints aborts the innermost level
only: ``ROLLBACK TO`` it (or an outer one) and the block goes on, as psql's
ON_ERROR_ROLLBACK and drivers' nested transaction blocks expect.
"""

from __future__ import annotations

from minidb.sql import ast
from minidb.sql.result import Result

__all__ = ["HANDLERS"]


def _savepoint(engine, st: ast.SavepointStmt) -> Result:
    engine.session.xact.savepoint(st.name)
    return Result(None, [], -1, "SAVEPOINT", [])


def _release(engine, st: ast.ReleaseStmt) -> Result:
    engine.session.xact.release(st.name)
    return Result(None, [], -1, "RELEASE", [])


def _rollback_to(engine, st: ast.RollbackToStmt) -> Result:
    engine.session.xact.rollback_to(st.name)
    return Result(None, [], -1, "ROLLBACK", [])


HANDLERS = {ast.SavepointStmt: _savepoint, ast.ReleaseStmt: _release,
            ast.RollbackToStmt: _rollback_to}
