"""The psql-like REPL: statements, meta commands and result tables, over the DB-API.

One ``Repl`` wraps one ``minidb.dbapi.Connection`` in autocommit mode (as psql: every
statement outside ``BEGIN`` ... ``COMMIT`` is its own transaction) and reads input in one of
three ways, all of which end up in ``handle_text``:

=============  ==========================================================================
mode           input
=============  ==========================================================================
interactive    prompt_toolkit, one *buffer* per prompt: Enter runs the buffer once it holds
               a complete statement (``;`` outside quotes and comments) or a meta command,
               and otherwise starts a new line under the continuation prompt.  History (the
               whole buffer, one entry per statement) is kept in DATADIR/repl_history.
script         stdin that is not a terminal, or ``-f FILE``: read line by line as psql -f
               does; a line starting with ``\\`` is a meta command, other lines accumulate
               until they hold complete statements; at the end of input an unfinished
               statement is run as it is.  ``-a`` echoes every line as it is read (the
               layout of PostgreSQL's regression outputs, used by the golden tests).
command        ``-c TEXT``: statements (one or more) or one meta command.
=============  ==========================================================================

Prompts (psql's defaults, ``%/%R%x%# `` without the superuser ``#``)::

    minidb=>    ready                      minidb->    inside an unfinished statement
    minidb=*>   inside a transaction       minidb=!>   inside a failed transaction

Output follows psql's "aligned" format: headers centred, numbers right-aligned, text left-
aligned, ``|`` between columns, a ``(N rows)`` footer and a blank line; a statement without a
result set prints its command tag (``INSERT 0 1``).  ``\\x`` prints one ``-[ RECORD n ]``
block per row.  Values print as PostgreSQL's text output does (booleans ``t``/``f``, NULL as
nothing, floats in the shortest exact form).  Results go to standard output; errors, as
``ERROR:  message`` without a traceback, and notices go to standard error (standard output is
flushed first, so a merged transcript keeps the order).  Set ``MINIDB_TRACEBACK=1`` to also
get the traceback of an internal error (a bug, reported as InternalError).

Errors and exit codes: in interactive mode an error is printed and the session goes on.  In
script and ``-c`` modes the run stops at the first failing statement or meta command and
the exit code is 1 (psql's ``ON_ERROR_STOP=1``); ``--on-error continue`` runs the rest and
still exits with 1 if anything failed (psql would exit 0).  Exit code 2: the data directory
could not be opened.

Left out: a pager, ``\\set`` variables, tab completion, ``\\copy``, query cancel over the
wire (Ctrl-C during a statement interrupts it in-process and reports 57014).
"""

from __future__ import annotations

import datetime
import decimal
import os
import sys
import time
import traceback

import minidb.errors as errors
from minidb.dbapi import NUMBER

HISTORY_FILE = "repl_history"

HELP = r"""General
  \q                     quit minidb
  \?                     this help
  \echo TEXT             print TEXT

Informational
  \d                     list tables
  \d NAME                describe table or index NAME (columns, indexes)
  \dt                    list tables
  \di                    list indexes

Formatting
  \x [on|off]            toggle expanded output (one block per row)
  \timing [on|off]       toggle timing of statements ("Time: 1.234 ms")

Inspection (minidb's own)
  \page TABLE BLOCK      line pointers, xmin/xmax and hint bits of one heap page
  \btree INDEX           the B-tree's pages, level by level
  \stats [TABLE]         pg_stat_user_tables-like counters, and the buffer counters
"""


# ---------------------------------------------------------------------------------------------
# values, as PostgreSQL's text output prints them


def format_value(v) -> str:
    if v is None:
        return ""
    if v is True:
        return "t"
    if v is False:
        return "f"
    if isinstance(v, float):
        return _pg_float(v)
    if isinstance(v, datetime.datetime):
        s = v.strftime("%Y-%m-%d %H:%M:%S")
        return s + (f".{v.microsecond:06d}".rstrip("0") if v.microsecond else "")
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(v).hex()
    return str(v)


def _pg_float(f: float) -> str:
    """float8 output of PostgreSQL 12+: the shortest digits that read back exactly, in
    positional form for decimal exponents -4 .. 14 and as ``1e+15`` otherwise."""
    if f != f:
        return "NaN"
    if f in (float("inf"), float("-inf")):
        return "Infinity" if f > 0 else "-Infinity"
    if f == 0:
        return "-0" if str(f).startswith("-") else "0"
    sign, digits, exp = decimal.Decimal(repr(f)).normalize().as_tuple()
    ds = "".join(map(str, digits))
    e10 = exp + len(ds) - 1  # exponent of the first digit
    neg = "-" if sign else ""
    if -4 <= e10 < 15:
        if exp >= 0:
            return neg + ds + "0" * exp
        point = len(ds) + exp
        if point > 0:
            return neg + ds[:point] + "." + ds[point:]
        return neg + "0." + "0" * -point + ds
    mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
    return f"{neg}{mant}e{'-' if e10 < 0 else '+'}{abs(e10):02d}"


def _numeric_columns(description, rows) -> list[bool]:
    """Which columns print right-aligned: numbers by their SQL type, or, for a type code the
    DB-API does not know, by their values."""
    out = []
    for i, d in enumerate(description):
        code = d[1]
        if isinstance(code, str) and code:
            out.append(code == NUMBER)
        else:
            vals = [r[i] for r in rows if r[i] is not None]
            out.append(bool(vals) and all(isinstance(v, (int, float)) and
                                          not isinstance(v, bool) for v in vals))
    return out


# ---------------------------------------------------------------------------------------------
# tables


def format_aligned(headers: list[str], rows: list[list[str]], right: list[bool] | None = None,
                   *, title: str | None = None, footer: bool | list[str] = True) -> str:
    """psql's aligned format (border 1) of already formatted cells; a cell with newlines
    spans several lines, each but its last marked with ``+``.  ``footer``: True for
    ``(N rows)``, or the lines to print under the table instead (``\\d NAME``'s indexes)."""
    n = len(headers)
    right = right or [False] * n
    cells = [[c.split("\n") for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, lines in enumerate(row):
            widths[i] = max(widths[i], max(len(x) for x in lines))
    out = []
    head = "|".join(" " + _center(h, widths[i]) + " " for i, h in enumerate(headers))
    if title is not None:
        out.append(" " * max(0, (len(head) - len(title)) // 2) + title)
    out.append(head)
    out.append("+".join("-" * (w + 2) for w in widths))
    for row in cells:
        height = max((len(lines) for lines in row), default=1)
        for k in range(height):
            parts = []
            for i, lines in enumerate(row):
                text = lines[k] if k < len(lines) else ""
                more = k + 1 < len(lines)
                padded = text.rjust(widths[i]) if right[i] else text.ljust(widths[i])
                if i == n - 1:
                    parts.append(" " + padded + "+" if more else
                                 " " + (padded if right[i] else text))
                else:
                    parts.append(" " + padded + ("+" if more else " "))
            out.append("|".join(parts))
    if footer is True:
        out.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    elif footer:
        out.extend(footer)
    return "\n".join(out) + "\n\n"


def _center(text: str, width: int) -> str:
    left = (width - len(text)) // 2
    return " " * left + text + " " * (width - len(text) - left)


def format_expanded(headers: list[str], rows: list[list[str]]) -> str:
    """psql's expanded format (``\\x``): one ``-[ RECORD n ]`` block per row."""
    if not rows:
        return "(0 rows)\n\n"
    w1 = max(len(h) for h in headers)
    w2 = max((len(x) for row in rows for c in row for x in c.split("\n")), default=0)
    out = []
    for r, row in enumerate(rows, 1):
        out.append(_record_line(r, w1, w2))
        for h, c in zip(headers, row):
            lines = c.split("\n")
            for k, line in enumerate(lines):
                name = h if k == 0 else ""
                more = k + 1 < len(lines)
                out.append(name.ljust(w1) + " | " + (line.ljust(w2) + "+" if more else line))
    return "\n".join(out) + "\n\n"


def _record_line(r: int, w1: int, w2: int) -> str:
    """``-[ RECORD 1 ]-+------``: the label overwrites the rule from its second character,
    eating into the ``+`` and the value's rule when it is longer than the names."""
    line = "-" * (w1 + 1) + "+" + "-" * (w2 + 1)
    label = f"-[ RECORD {r} ]"
    return label + line[len(label):]


# ---------------------------------------------------------------------------------------------
# the REPL


class Repl:
    """One connection's REPL state: display toggles, the statement buffer, errors seen."""

    def __init__(self, conn, out=None, err=None, *, echo: bool = False):
        self.conn = conn
        self.cur = conn.cursor()
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.echo = echo
        self.expanded = False
        self.timing = False
        self.errors = 0  # statements and meta commands that failed
        self.done = False  # \q seen
        self.stop_on_error = False  # script and -c modes: psql's ON_ERROR_STOP
        self._split = conn._engine.split_statements
        self._meta = {
            "q": self._meta_quit, "quit": self._meta_quit, "?": self._meta_help,
            "echo": self._meta_echo, "x": self._meta_expanded, "timing": self._meta_timing,
            "d": self._meta_describe, "dt": self._meta_tables, "di": self._meta_indexes,
            "page": self._meta_page, "btree": self._meta_btree, "stats": self._meta_stats,
        }

    # -- output -------------------------------------------------------------------------------
    def write(self, text: str) -> None:
        self.out.write(text)

    def error(self, message: str) -> None:
        self.errors += 1
        self.out.flush()
        self.err.write(message if message.endswith("\n") else message + "\n")
        self.err.flush()

    def notice(self, message: str) -> None:
        self.out.flush()
        head = message.split(":", 1)[0]
        if not (head.isupper() and head.isalpha()):
            message = "NOTICE:  " + message
        self.err.write(message + "\n")
        self.err.flush()

    def print_result(self, description, rows, status: str | None) -> None:
        if description is None:
            if status:
                self.write(status + "\n")
            return
        headers = [str(d[0]) for d in description]
        cells = [[format_value(v) for v in row] for row in rows]
        if self.expanded:
            self.write(format_expanded(headers, cells))
        else:
            self.write(format_aligned(headers, cells, _numeric_columns(description, rows)))

    def print_table(self, headers, rows, *, title=None, footer=True, right=None) -> None:
        cells = [[format_value(v) for v in row] for row in rows]
        if right is None:
            right = _numeric_columns([(h, None) for h in headers], rows)
        if self.expanded:
            if title:
                self.write(title + "\n")
            self.write(format_expanded(list(headers), cells))
            if isinstance(footer, list) and footer:
                self.write("\n".join(footer) + "\n\n")
        else:
            self.write(format_aligned(list(headers), cells, right, title=title, footer=footer))

    # -- prompts --------------------------------------------------------------------------------
    def prompt(self, continuation: bool = False) -> str:
        try:
            status = self.conn.transaction_status
        except errors.Error:
            status = "idle"
        x = {"idle": "", "in transaction": "*", "failed": "!"}[status]
        return f"minidb{'-' if continuation else '='}{x}> "

    # -- running ----------------------------------------------------------------------------------
    def run_sql(self, sql: str) -> bool:
        """Run one statement and print its result; False if it failed."""
        t0 = time.perf_counter()
        try:
            self.cur.execute(sql)
            rows = self.cur.fetchall() if self.cur.description is not None else []
        except errors.Error as e:
            self._print_notices()
            self._report(e)
            return False
        except KeyboardInterrupt:
            self.error("ERROR:  canceling statement due to user request")
            return False
        elapsed = time.perf_counter() - t0
        self._print_notices()
        try:
            self.print_result(self.cur.description, rows, self.cur.statusmessage)
        except Exception as e:  # a bug in printing: report it, keep the session
            self._report(_internal(e))
            return False
        if self.timing:
            self.write(f"Time: {elapsed * 1000:.3f} ms\n")
        return True

    def _print_notices(self) -> None:
        for m in self.cur.notices:
            self.notice(m)
        self.cur.notices = []

    def _report(self, e: BaseException) -> None:
        if isinstance(e, errors.InternalError) and os.environ.get("MINIDB_TRACEBACK"):
            cause = e.__cause__ or e
            self.out.flush()
            traceback.print_exception(type(cause), cause, cause.__traceback__, file=self.err)
        self.error(f"ERROR:  {e}")

    def run_meta(self, line: str) -> bool:
        """Run one backslash command; False if it failed."""
        word, _, arg = line.strip()[1:].partition(" ")
        fn = self._meta.get(word)
        if fn is None:
            self.error(f"invalid command \\{word}\nTry \\? for help.")
            return False
        t0 = time.perf_counter()
        try:
            fn(arg.strip())
        except errors.Error as e:
            self._report(e)
            return False
        except _MetaUsage as e:
            self.error(f"\\{word}: {e}")
            return False
        except Exception as e:  # a bug: report it, keep the session
            self._report(_internal(e))
            return False
        if self.timing and word in ("page", "btree", "stats"):
            self.write(f"Time: {(time.perf_counter() - t0) * 1000:.3f} ms\n")
        return True

    def handle_text(self, text: str, *, final: bool = False) -> tuple[bool, str]:
        """Run what ``text`` completes: a meta command, or every complete statement in it.
        Returns (all succeeded, the unfinished rest); ``final`` runs the rest as well (end
        of a script, ``-c``).  Stops at the first failure if ``stop_on_error``."""
        stripped = text.strip()
        if stripped.startswith("\\"):
            return self.run_meta(stripped), ""
        stmts, rest = self._split(text)
        if final and not _blank(rest):
            stmts, rest = stmts + [rest], ""
        ok = True
        for s in stmts:
            if self.done:
                break
            if not self.run_sql(s):
                ok = False
                if self.stop_on_error:
                    return False, ""
        return ok, ("" if _blank(rest) else rest)

    # -- the three modes --------------------------------------------------------------------------
    def run_command(self, text: str) -> bool:
        """``-c TEXT``."""
        ok, _ = self.handle_text(text, final=True)
        return ok

    def run_script(self, lines, *, stop_on_error: bool = True) -> bool:
        """Script mode (stdin or ``-f``): ``lines`` is any iterable of lines; True if
        everything succeeded."""
        self.stop_on_error = stop_on_error
        buffer = ""
        for line in lines:
            if self.echo:
                self.write(line if line.endswith("\n") else line + "\n")
            if line.strip().startswith("\\"):  # at once, even inside a statement (psql)
                ok = self.run_meta(line)
            else:
                buffer += line if line.endswith("\n") else line + "\n"
                ok, buffer = self.handle_text(buffer)
            if (not ok and stop_on_error) or self.done:
                break
        else:
            if not _blank(buffer):
                self.handle_text(buffer, final=True)
        self.out.flush()
        return self.errors == 0

    def interactive(self, history_path: str | None = None, *, input=None, output=None) -> None:
        """The prompt loop (prompt_toolkit); ``input``/``output`` let tests drive it."""
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory
        from prompt_toolkit.key_binding import KeyBindings

        kb = KeyBindings()

        @kb.add("enter")
        def _enter(event):
            buf = event.current_buffer
            if self._complete(buf.text):
                buf.validate_and_handle()
            else:
                buf.insert_text("\n")

        history = FileHistory(history_path) if history_path else InMemoryHistory()
        session = PromptSession(history=history, key_bindings=kb, multiline=True,
                                prompt_continuation=lambda width, line, wrap:
                                    self.prompt(continuation=True).rjust(width),
                                input=input, output=output)
        self.prompt_session = session
        pending = ""
        while not self.done:
            try:
                text = session.prompt(self.prompt, default=pending)
            except KeyboardInterrupt:
                pending = ""
                continue
            except EOFError:
                self.write("\\q\n")
                break
            _, pending = self.handle_text(text)
            self.out.flush()

    def _complete(self, text: str) -> bool:
        """Does Enter run the buffer (rather than start a new line)?"""
        stripped = text.strip()
        if not stripped or stripped.startswith("\\"):
            return True
        stmts, _ = self._split(text)
        return bool(stmts)

    # -- meta commands ----------------------------------------------------------------------------
    def _meta_quit(self, arg: str) -> None:
        self.done = True

    def _meta_help(self, arg: str) -> None:
        self.write(HELP + "\n")

    def _meta_echo(self, arg: str) -> None:
        self.write(arg + "\n")

    def _toggle(self, arg: str, current: bool) -> bool:
        if not arg:
            return not current
        a = arg.lower()
        if a in ("on", "true", "yes", "1"):
            return True
        if a in ("off", "false", "no", "0"):
            return False
        raise _MetaUsage(f'unrecognized value "{arg}": Boolean expected (on or off)')

    def _meta_expanded(self, arg: str) -> None:
        self.expanded = self._toggle(arg, self.expanded)
        self.write(f"Expanded display is {'on' if self.expanded else 'off'}.\n")

    def _meta_timing(self, arg: str) -> None:
        self.timing = self._toggle(arg, self.timing)
        self.write(f"Timing is {'on' if self.timing else 'off'}.\n")

    def _inspect(self):
        from minidb.sql import inspect
        return inspect

    def _meta_tables(self, arg: str) -> None:
        if arg:
            raise _MetaUsage("takes no argument (use \\d NAME to describe one table)")
        rows = self._inspect().describe_tables(self.conn.session)
        self.print_table(["Name", "Type", "Rows (estimated)", "Pages"],
                         [(name, "table", _count(est), pages) for name, est, pages in rows],
                         title="List of tables", right=[False, False, True, True])

    def _meta_indexes(self, arg: str) -> None:
        if arg:
            raise _MetaUsage("takes no argument (use \\d NAME to describe one index)")
        rows = [(name, "index", table, ", ".join(cols), _constraint(unique, primary), pages)
                for name, table, cols, unique, primary, pages
                in self._inspect().list_indexes(self.conn.session)]
        self.print_table(["Name", "Type", "Table", "Columns", "Constraint", "Pages"], rows,
                         title="List of indexes", right=[False] * 5 + [True])

    def _meta_describe(self, arg: str) -> None:
        if not arg:
            return self._meta_tables("")
        name = _unquote(arg)
        insp = self._inspect()
        session = self.conn.session
        try:
            t = insp.describe_table(session, name)
        except errors.UndefinedTable:
            for ix in insp.list_indexes(session):
                if ix[0] == name:
                    return self._describe_index(*ix)
            raise errors.UndefinedTable(f'did not find any relation named "{name}"') from None
        rows = [(c, typ, "not null" if not_null else "", "" if default is None else default)
                for c, typ, not_null, default in t["columns"]]
        footer = []
        if t["indexes"]:
            footer.append("Indexes:")
            for iname, cols, unique, primary in t["indexes"]:
                kind = _constraint(unique, primary).upper()
                footer.append(f'    "{iname}" {kind + ", " if kind else ""}btree '
                              f'({", ".join(cols)})')
        self.print_table(["Column", "Type", "Nullable", "Default"], rows,
                         title=f'Table "{t["name"]}"', footer=footer, right=[False] * 4)

    def _describe_index(self, name, table, cols, unique, primary, pages) -> None:
        kind = _constraint(unique, primary)
        self.print_table(["Column"], [(c,) for c in cols], title=f'Index "{name}"',
                         footer=[f'{kind + ", " if kind else ""}btree, for table "{table}", '
                                 f'{pages} page{"" if pages == 1 else "s"}'])

    def _meta_page(self, arg: str) -> None:
        parts = arg.split()
        if len(parts) != 2 or not parts[1].isdigit():
            raise _MetaUsage("usage: \\page TABLE BLOCK")
        table, block = _unquote(parts[0]), int(parts[1])
        header, items = self._inspect().page_dump(self.conn.session, table, block)
        self.write(f'Page {block} of table "{table}": '
                   + ", ".join(f"{k} {_plain(v) if v != [] else '-'}"
                               for k, v in header.items() if k != "block") + "\n")
        keys = []  # the union of the line pointers' keys, in order of first appearance
        for it in items:
            keys.extend(k for k in it if k not in keys)
        rows = [tuple(_plain(it.get(k)) for k in keys) for it in items]
        self.print_table(keys or ["offset"], rows)

    def _meta_btree(self, arg: str) -> None:
        if not arg or len(arg.split()) != 1:
            raise _MetaUsage("usage: \\btree INDEX")
        text = self._inspect().btree_dump(self.conn.session, _unquote(arg))
        self.write(text if text.endswith("\n") else text + "\n")

    def _meta_stats(self, arg: str) -> None:
        if len(arg.split()) > 1:
            raise _MetaUsage("usage: \\stats [TABLE]")
        got = self._inspect().stats(self.conn.session, _unquote(arg) if arg else None,
                                    engine=self.conn._engine)
        titles = {"tables": "Tables", "buffers": "Buffers (all sessions)",
                  "session": "This session", "plan_cache": "Plan cache (this session)"}
        for key, value in got.items():
            if key == "tables" and arg:  # one table: its counters one per line
                value = value[0]
                titles["tables"] = f'Table "{value["relname"]}"'
            self._print_any(value, title=titles.get(key, key))

    def _print_any(self, obj, title=None) -> None:
        """Print what an inspection function returned: text, a dict (name | value, without
        footer), a list of dicts (a table)."""
        if isinstance(obj, str):
            self.write(obj if obj.endswith("\n") else obj + "\n")
        elif isinstance(obj, dict):
            self.print_table(["name", "value"], [(k, _plain(v)) for k, v in obj.items()],
                             title=title, footer=False, right=[False, True])
        elif isinstance(obj, (list, tuple)) and all(isinstance(x, dict) for x in obj):
            keys = []
            for d in obj:
                keys.extend(k for k in d if k not in keys)
            self.print_table(keys or ["(none)"],
                             [tuple(_plain(d.get(k)) for k in keys) for d in obj], title=title)
        else:
            self.write(f"{obj}\n")


def _internal(e: Exception) -> errors.InternalError:
    err = errors.InternalError(f"internal error: {type(e).__name__}: {e}")
    err.__cause__ = e
    return err


class _MetaUsage(Exception):
    """A meta command used wrongly (printed as ``\\cmd: message``)."""


def _constraint(unique: bool, primary: bool) -> str:
    return "primary key" if primary else "unique" if unique else ""


def _blank(text: str) -> bool:
    """Nothing but blanks and ``--`` comments (nothing to run)."""
    return all(not ln.strip() or ln.strip().startswith("--") for ln in text.split("\n"))


def _unquote(name: str) -> str:
    name = name.strip()
    if len(name) >= 2 and name[0] == name[-1] == '"':
        return name[1:-1].replace('""', '"')
    return name.lower()


def _count(x):
    if isinstance(x, float) and x.is_integer():
        return int(x)
    return x


def _plain(v):
    """Numpy scalars and lists as plain Python for printing."""
    if hasattr(v, "item") and not isinstance(v, (list, tuple, dict, str)):
        try:
            return v.item()
        except (TypeError, ValueError):
            return v
    if isinstance(v, tuple):
        return "(" + ",".join(str(_plain(x)) for x in v) + ")"
    if isinstance(v, list):
        return " ".join(str(_plain(x)) for x in v)
    return v


