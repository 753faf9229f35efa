"""The psql-like REPL: statements, backslash commands and result tables, over the DB-API.

One ``Repl`` wraps one ``minidb.dbapi.Connection`` in autocommit mode (as psql: every
statement outside ``BEGIN`` ... ``COMMIT`` is its own transaction) and reads input in one of
three ways, each line of which goes through psql's lexer rules (``scan``):

=============  ==========================================================================
mode           input
=============  ==========================================================================
interactive    prompt_toolkit, one *buffer* per prompt: Enter runs the buffer once it holds
               a complete statement (``;`` outside quotes, comments and parentheses) or a
               backslash command - also one typed inside an unfinished statement, whose
               text comes back at the next prompt (psql's query buffer) - and otherwise
               starts a new line under the continuation prompt.  Tab completes table,
               index and column names and keywords (``complete``).  History (the whole
               buffer, one entry per statement) is kept in DATADIR/repl_history.
script         stdin that is not a terminal, ``-f FILE``, ``\\i FILE``: read line by line
               as psql -f does; at the end of input an unfinished statement is run as it
               is.  ``-a`` echoes every line as it is read (the layout of PostgreSQL's
               regression outputs, used by the golden tests).
command        ``-c TEXT``: statements (one or more) or a backslash command.
=============  ==========================================================================

Prompts (psql's defaults, ``%/%R%x%# `` without the superuser ``#``)::

    minidb=>    ready                      minidb->    inside an unfinished statement
    minidb=*>   inside a transaction       minidb=!>   inside a failed transaction

Output follows psql (``printing``): the aligned format with borders 0-2, expanded records
(``\\x``), unaligned (``\\a``), tuples only (``\\t``), a NULL display string, all set by
``\\pset``; a statement without a result set prints its command tag (``INSERT 0 1``).
Values print as PostgreSQL's text output does (booleans ``t``/``f``, floats in the shortest
exact form).  Results go to standard output - through a pager when long and on a terminal -;
errors, as ``ERROR:  message`` without a traceback, and notices go to standard error
(standard output is flushed first, so a merged transcript keeps the order).  Set
``MINIDB_TRACEBACK=1`` to also get the traceback of an internal error (a bug, reported as
InternalError).

Errors and exit codes (psql's; ``core``): an error is printed and the input goes on; with
``ON_ERROR_STOP`` set a script stops at the first error.  The ``minidb`` command exits with 0
when a script ran to its end (errors or not), 3 when ON_ERROR_STOP stopped it, 1 when the
last ``-c`` failed, 2 when the data directory could not be opened.

Variables (``\\set``, ``-v NAME=VALUE``): ``:name`` in SQL is the value, ``:'name'`` the
value as a literal, ``:"name"`` as an identifier.

``\\copy`` reads or writes the file in the shell and sends the data through COPY FROM STDIN /
TO STDOUT (the DB-API's ``cursor.copy()``), so it needs no server-file privilege; ``\\check``
runs ``minidb.amcheck``.

Left out: ``\\e``, the ``wrapped``/``csv``/``html`` formats, backquote commands
in arguments, query cancel over the wire (Ctrl-C during a statement interrupts it
in-process and reports 57014).
"""

from minidb.repl.core import HISTORY_FILE, Repl
from minidb.repl.meta import HELP, MetaUsage, row_estimate, size_pretty
from minidb.repl.printing import (PrintOptions, _pg_float, format_aligned, format_expanded,
                                  format_unaligned, format_value, render)
from minidb.repl.scan import QueryScanner, meta_args, parse_bool, pattern_regex

__all__ = ["HELP", "HISTORY_FILE", "MetaUsage", "PrintOptions", "QueryScanner", "Repl",
           "format_aligned", "format_expanded", "format_unaligned", "format_value",
           "meta_args", "parse_bool", "pattern_regex", "render", "row_estimate",
           "size_pretty", "_pg_float"]
