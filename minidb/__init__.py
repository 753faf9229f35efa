"""minidb: a relational storage engine built the way PostgreSQL is built.

The package is a DB-API 2.0 (PEP 249) module::

    import minidb
    with minidb.connect("mydata") as conn:        # data directory, created if new
        cur = conn.cursor()
        cur.execute("SELECT a, b FROM t WHERE a > ?", (10,))
        print(cur.fetchall())

``apilevel`` "2.0"; ``threadsafety`` 1 (threads share the module, each opens its own
connections); ``paramstyle`` "qmark" (``?`` marks bound by position).  Transactions,
threads and errors are described in ``minidb.dbapi``; the engine's layers in README.md.
"""

from minidb.errors import (DatabaseError, DataError, Error, IntegrityError, InterfaceError,
                           InternalError, NotSupportedError, OperationalError,
                           ProgrammingError, Warning)
from minidb.dbapi import (BINARY, DATETIME, NUMBER, ROWID, STRING, Binary, Connection, Cursor,
                          Date, DateFromTicks, Time, TimeFromTicks, Timestamp,
                          TimestampFromTicks, apilevel, connect, paramstyle, threadsafety)

__all__ = ["connect", "Connection", "Cursor", "apilevel", "threadsafety", "paramstyle",
           "Warning", "Error", "InterfaceError", "DatabaseError", "DataError",
           "OperationalError", "IntegrityError", "InternalError", "ProgrammingError",
           "NotSupportedError", "STRING", "BINARY", "NUMBER", "DATETIME", "ROWID", "Date",
           "Time", "Timestamp", "DateFromTicks", "TimeFromTicks", "TimestampFromTicks",
           "Binary"]
