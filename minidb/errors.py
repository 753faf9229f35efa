"""The exception hierarchy: PEP 249's classes, each concrete error with a SQLSTATE.

PEP 249 (DB-API 2.0) fixes the class tree::

    Exception
     +-- Warning
     +-- Error
          +-- InterfaceError
          +-- DatabaseError
               +-- DataError          22xxx  bad values: division by zero, out of range
               +-- OperationalError   53xxx 55xxx 57xxx 58xxx  the database cannot do it now
               +-- IntegrityError     23xxx  constraint violations
               +-- InternalError      XXxxx  corruption, invariant violated
               +-- ProgrammingError   42xxx  bad SQL, unknown objects
               +-- NotSupportedError  0Axxx  valid but unsupported

Every concrete error below carries ``sqlstate`` (PostgreSQL's codes, so that
scripts written against PostgreSQL recognise them) and a message that names the
object involved.  Lower layers raise these directly; the DB-API module re-exports
them.
"""

from __future__ import annotations


class Warning(Exception):  # noqa: A001 - the name is fixed by PEP 249
    sqlstate = "01000"


class Error(Exception):
    sqlstate = "XX000"

    def __init__(self, message: str = "", *, sqlstate: str | None = None):
        super().__init__(message)
        if sqlstate is not None:
            self.sqlstate = sqlstate

    def __reduce__(self):  # errors cross process boundaries (parallel workers)
        return (_rebuild, (type(self), str(self), self.sqlstate))


def _rebuild(cls, message, sqlstate):
    return cls(message, sqlstate=sqlstate)


class InterfaceError(Error):
    sqlstate = "08000"


class DatabaseError(Error):
    pass


class DataError(DatabaseError):
    sqlstate = "22000"


class OperationalError(DatabaseError):
    sqlstate = "58000"


class IntegrityError(DatabaseError):
    sqlstate = "23000"


class InternalError(DatabaseError):
    sqlstate = "XX000"


class ProgrammingError(DatabaseError):
    sqlstate = "42000"


class NotSupportedError(DatabaseError):
    sqlstate = "0A000"


# -- concrete errors, grouped by class -------------------------------------------------------

class InvalidParameterValue(DataError):
    sqlstate = "22023"


class NumericValueOutOfRange(DataError):
    sqlstate = "22003"


class StringDataRightTruncation(DataError):
    sqlstate = "22001"


class NotNullViolation(IntegrityError):
    sqlstate = "23502"


class UniqueViolation(IntegrityError):
    """A unique index already holds the key for a live or committed row."""
    sqlstate = "23505"


class UndefinedParameter(ProgrammingError):
    sqlstate = "42704"


class CantChangeParameter(OperationalError):
    sqlstate = "55P02"


class UndefinedTable(ProgrammingError):
    sqlstate = "42P01"


class DuplicateTable(ProgrammingError):
    sqlstate = "42P07"


class UndefinedColumn(ProgrammingError):
    sqlstate = "42703"


class UndefinedObject(ProgrammingError):
    """An object other than a table or column (an index) does not exist."""
    sqlstate = "42704"


class InsufficientPrivilege(ProgrammingError):
    """Not allowed: a system catalog cannot be dropped or truncated; a server file for COPY
    without ``allow_server_files``; a data directory the process may not write."""
    sqlstate = "42501"


class DatatypeMismatch(ProgrammingError):
    sqlstate = "42804"


class ProgramLimitExceeded(OperationalError):
    """A row too big for a page, too many columns, a file too large."""
    sqlstate = "54000"


class DatabaseInUse(OperationalError):
    """Another process holds the data directory (PostgreSQL: 'lock file already exists')."""
    sqlstate = "55006"


class ObjectInUse(OperationalError):
    sqlstate = "55006"


class InsufficientResources(OperationalError):
    """Out of a fixed-size shared resource: unpinned buffers, backend slots."""
    sqlstate = "53000"


class OutOfSharedMemory(InsufficientResources):
    """The shared heavyweight lock table is full (max_locks_per_transaction)."""
    sqlstate = "53200"


class TooManyConnections(OperationalError):
    sqlstate = "53300"


class LockNotAvailable(OperationalError):
    """A wait ran past its timeout (lock_timeout: 'canceling statement due to lock
    timeout', or the internal safety bound), or a NOWAIT request met a conflict ('could
    not obtain lock on relation "t"')."""
    sqlstate = "55P03"


class LWLockTimeout(LockNotAvailable):
    """A shared-memory lock was not released within ``shmem.LWLOCK_TIMEOUT_S``: its holder
    died inside the critical section (PostgreSQL would crash-restart)."""


class AdminShutdown(OperationalError):
    """The instance's owner process died: its forked children stop using the data directory
    (PostgreSQL: 'terminating connection due to unexpected postmaster exit')."""
    sqlstate = "57P01"


class CrashShutdown(OperationalError):
    """A process of the instance died holding a shared-memory lock (or mid-change of shared
    state): the shared memory can no longer be trusted; the instance restarts (or, with
    restart_after_crash off, must be reopened)
    (PostgreSQL: 'terminating connection because of crash of another server process')."""
    sqlstate = "57P02"


class LWLockHolderDied(CrashShutdown, LWLockTimeout):
    """A shared-memory lock's recorded holder died inside its critical section."""
    sqlstate = "57P02"


class DataCorrupted(InternalError):
    """A page failed its checksum or its header is impossible; never returns garbage."""
    sqlstate = "XX001"


class IOError_(OperationalError):
    sqlstate = "58030"


class DiskFull(InsufficientResources, IOError_):
    """A write or an extension of a file failed with ENOSPC ("could not write to file ...:
    No space left on device"); the statement fails, the database stays usable.  An
    ``IOError_`` too (a failed write), with ENOSPC's own code."""
    sqlstate = "53100"


class TransactionRollbackError(OperationalError):
    """Class 40: the transaction was rolled back (psycopg's name for the class)."""
    sqlstate = "40000"


class SerializationFailure(TransactionRollbackError):
    sqlstate = "40001"


class DeadlockDetected(TransactionRollbackError):
    """'deadlock detected', with a DETAIL line per edge of the cycle naming both processes
    (``minidb.txn.deadlock``); the victim's transaction is aborted at the error."""
    sqlstate = "40P01"


class ActiveSqlTransaction(InternalError):
    sqlstate = "25001"


class NoActiveSqlTransaction(InternalError):
    sqlstate = "25P01"


class InFailedSqlTransaction(InternalError):
    """A statement in a transaction block that already failed (until ROLLBACK)."""
    sqlstate = "25P02"


# -- savepoints (minidb.txn.subxact) -----------------------------------------------------------
class InvalidSavepointSpecification(InternalError):
    """RELEASE / ROLLBACK TO a savepoint that does not exist."""
    sqlstate = "3B001"


class CharacterNotInRepertoire(DataError):
    sqlstate = "22021"


class DatetimeFieldOverflow(DataError):
    sqlstate = "22008"


class DuplicateColumn(ProgrammingError):
    sqlstate = "42701"


# -- the SQL layer (minidb.sql, minidb.exec) ---------------------------------------------------

class SyntaxError_(ProgrammingError):
    """Malformed SQL; the message ends with the position: (line L, column C)."""
    sqlstate = "42601"


class DivisionByZero(DataError):
    sqlstate = "22012"


class InvalidTextRepresentation(DataError):
    """A string that is not a value of the type it must be read as ('abc' as integer)."""
    sqlstate = "22P02"


class GroupingError(ProgrammingError):
    """A column used outside an aggregate that is not in GROUP BY."""
    sqlstate = "42803"


class UndefinedFunction(ProgrammingError):
    sqlstate = "42883"


class AmbiguousColumn(ProgrammingError):
    sqlstate = "42702"


class InvalidColumnReference(ProgrammingError):
    """ORDER BY / GROUP BY position out of range, DISTINCT with ORDER BY not selected."""
    sqlstate = "42P10"


class InvalidParameterCount(ProgrammingError):
    """Parameters given do not match the placeholders of the statement."""
    sqlstate = "08P01"


class BadCopyFileFormat(DataError):
    """COPY FROM: a line with too many or too few fields, an unterminated quote."""
    sqlstate = "22P04"


# -- the server's protocol (minidb.server) ---------------------------------------------------------
class ProtocolViolationError(OperationalError):
    """A client message that breaks protocol 3.0's rules (a Bind with the wrong number of
    parameters, an unknown Describe subtype)."""
    sqlstate = "08P01"


class InvalidBinaryRepresentation(DataError):
    """A binary-format parameter whose bytes are not a value of its type."""
    sqlstate = "22P03"


class QueryCanceled(OperationalError):
    """The statement was cancelled (a CancelRequest, or COPY FROM STDIN failed by the
    client)."""
    sqlstate = "57014"


class DuplicatePreparedStatement(ProgrammingError):
    sqlstate = "42P05"


class InvalidSqlStatementName(ProgrammingError):
    """A prepared statement that does not exist."""
    sqlstate = "26000"


class DuplicateCursor(ProgrammingError):
    sqlstate = "42P03"


class InvalidCursorName(ProgrammingError):
    """A portal (cursor) that does not exist."""
    sqlstate = "34000"


class ObjectNotInPrerequisiteState(OperationalError):
    """The object is not in the state the command needs (COPY FREEZE on a table not new in
    this transaction)."""
    sqlstate = "55000"


# -- sequences, identity columns, RETURNING / ON CONFLICT (issue 18) ---------------------------
class SequenceGeneratorLimitExceeded(DataError):
    """nextval past a sequence's MAXVALUE / MINVALUE without CYCLE."""
    sqlstate = "2200H"


class WrongObjectType(ProgrammingError):
    """A relation of the wrong kind (nextval of a table, DROP VIEW of a table, INSERT into a
    view)."""
    sqlstate = "42809"


class GeneratedAlways(ProgrammingError):
    """A value for a GENERATED ALWAYS identity column without OVERRIDING SYSTEM VALUE."""
    sqlstate = "428C9"


class CardinalityViolation(ProgrammingError):
    """ON CONFLICT DO UPDATE would change one row twice in one statement."""
    sqlstate = "21000"


# -- index definitions (partial and expression indexes) ---------------------------------------
class InvalidObjectDefinition(ProgrammingError):
    """An object definition PostgreSQL refuses (a volatile function in an index predicate)."""
    sqlstate = "42P17"


# -- views, CHECK constraints, dependencies (minidb.sql.views, minidb.sql.checks) --------------
class CheckViolation(IntegrityError):
    """A row fails a CHECK constraint."""
    sqlstate = "23514"


class DependentObjectsStillExist(ProgrammingError):
    """DROP of a relation other objects depend on, without CASCADE."""
    sqlstate = "2BP01"


class InvalidTableDefinition(ProgrammingError):
    """CREATE OR REPLACE VIEW that drops or renames a column, and the like."""
    sqlstate = "42P16"


# -- foreign keys (minidb.sql.fkeys, minidb.exec.ri) -----------------------------------------
class ForeignKeyViolation(IntegrityError):
    """A referencing row's key is not present in the referenced table, or a referenced
    row that is still referenced was deleted or had its key changed."""
    sqlstate = "23503"


class InvalidForeignKey(ProgrammingError):
    """The referenced columns of a FOREIGN KEY have no unique constraint (or the column
    lists do not match)."""
    sqlstate = "42830"
