"""The ``Repl`` class: one connection's REPL state, the input loop and error handling.

Input, whatever its source, goes through one ``QueryScanner`` (``minidb.repl.scan``) line by
line, as psql's MainLoop does: complete statements are sent, backslash commands run where
they stand - also inside an unfinished statement, whose text stays in the buffer - and, at
the end of a script, an unfinished statement is sent as it is.

Error handling (psql's): an error is printed and the input goes on, in every mode; when the
variable ``ON_ERROR_STOP`` is on (``-v ON_ERROR_STOP=1``, ``--on-error stop``, ``\\set``), a
script (stdin that is not a terminal, ``-f FILE``, ``\\i FILE``) stops at the first failing
statement or meta command and ``stopped`` is set (the command exits with 3).  A ``-c``
string that holds several statements stops at the first that fails, as the server does with
a multi-statement query.  Interactive sessions never stop.  Errors from a named file are
prefixed ``minidb:FILE:LINE:`` (psql's ``psql:FILE:LINE:``).

Output goes through the pager (``\\pset pager``) when standard input and output are both
terminals and the text is taller or wider than the terminal, or always with ``\\pset pager
always``: ``PSQL_PAGER``, else ``PAGER``, else ``less``; an empty value means none.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import traceback

import minidb.errors as errors
from minidb.repl.meta import MetaCommands, MetaUsage
from minidb.repl.printing import PrintOptions, format_value, numeric_columns, render
from minidb.repl.scan import QueryScanner, parse_bool
from minidb.sql.parser.lexer import split_statements as _split_statements

HISTORY_FILE = "repl_history"


class Repl(MetaCommands):
    """One connection's REPL state: print options, variables, errors seen."""

    def __init__(self, conn, out=None, err=None, *, echo: bool = False):
        self.conn = conn
        self.cur = conn.cursor()
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.echo = echo
        self.popt = PrintOptions()
        self.timing = False
        self.variables = {"ON_ERROR_STOP": "off"}
        self.errors = 0           # statements and meta commands that failed
        self.done = False         # \q seen
        self.stopped = False      # a script stopped by ON_ERROR_STOP
        self.is_interactive = False
        self.location = (None, 0)  # (file name, line) of the line being run, for messages
        self.last_query = None    # what \g re-runs on an empty buffer
        self.tty = None           # None: ask the streams (tests set True to exercise the pager)
        self._scanner = None      # the query buffer of the input being run (for \g, \r, \p)
        engine = getattr(conn, "_engine", None)    # none through a server's socket
        self._split = engine.split_statements if engine is not None else _split_statements

    # -- settings as attributes -----------------------------------------------------------------
    @property
    def expanded(self) -> bool:
        return self.popt.expanded

    @expanded.setter
    def expanded(self, value: bool) -> None:
        self.popt.expanded = value

    @property
    def stop_on_error(self) -> bool:
        return parse_bool(self.variables.get("ON_ERROR_STOP", "off")) is True

    @stop_on_error.setter
    def stop_on_error(self, value: bool) -> None:
        self.variables["ON_ERROR_STOP"] = "on" if value else "off"

    # -- output -------------------------------------------------------------------------------
    def write(self, text: str) -> None:
        self.out.write(text)

    def error(self, message: str) -> None:
        """A failure's message on standard error (counted)."""
        self.errors += 1
        self.warn(message)

    def warn(self, message: str) -> None:
        """A message on standard error that is not a failure."""
        self.out.flush()
        source, line = self.location
        if source is not None:
            message = f"minidb:{source}:{line}: {message}"
        self.err.write(message if message.endswith("\n") else message + "\n")
        self.err.flush()

    def notice(self, message: str) -> None:
        self.out.flush()
        head = message.split(":", 1)[0]
        if not (head.isupper() and head.isalpha()):
            message = "NOTICE:  " + message
        self.err.write(message + "\n")
        self.err.flush()

    def emit(self, text: str) -> None:
        """Output that may go through the pager."""
        if self.popt.pager and self._is_tty() and self._too_long(text):
            if self._page(text):
                return
        self.write(text)

    def _is_tty(self) -> bool:
        if self.tty is not None:
            return self.tty
        try:
            return self.out.isatty() and sys.stdin.isatty()
        except (AttributeError, ValueError):
            return False

    def _too_long(self, text: str) -> bool:
        if self.popt.pager == 2:
            return True
        cols, rows = shutil.get_terminal_size()
        lines = text.split("\n")
        return len(lines) - 1 >= rows or max(len(x) for x in lines) > cols

    def _page(self, text: str) -> bool:
        """Show ``text`` through the pager; False if there is none to run."""
        for var in ("PSQL_PAGER", "PAGER"):
            if var in os.environ:
                cmd = os.environ[var]
                break
        else:
            cmd = "less"
        if not cmd.strip():
            return False
        self.out.flush()
        try:
            p = subprocess.Popen(cmd, shell=True, stdin=subprocess.PIPE, text=True)
        except OSError:
            return False
        try:
            p.stdin.write(text)
            p.stdin.close()
        except BrokenPipeError:   # the user quit the pager early
            pass
        while True:
            try:
                p.wait()
                return True
            except KeyboardInterrupt:
                continue

    def print_result(self, description, rows, status: str | None, *, expanded=None) -> None:
        if description is None:
            if status:
                self.write(status + "\n")
            return
        headers = [str(d[0]) for d in description]
        cells = [[format_value(v, self.popt.null) for v in row] for row in rows]
        self.emit(render(headers, cells, numeric_columns(description, rows), self.popt,
                         expanded=expanded))

    def print_table(self, headers, rows, *, title=None, footer=True, right=None) -> None:
        cells = [[format_value(v) for v in row] for row in rows]
        if right is None:
            right = numeric_columns([(h, None) for h in headers], rows)
        self.emit(render(list(headers), cells, right, self.popt, title=title, footer=footer))

    # -- prompts --------------------------------------------------------------------------------
    def prompt(self, continuation: bool = False) -> str:
        try:
            status = self.conn.transaction_status
        except errors.Error:
            status = "idle"
        x = {"idle": "", "in transaction": "*", "failed": "!"}[status]
        return f"minidb{'-' if continuation else '='}{x}> "

    # -- running ----------------------------------------------------------------------------------
    def run_sql(self, sql: str, *, expanded: bool | None = None) -> bool:
        """Run one statement and print its result; False if it failed."""
        self.last_query = sql
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
            self.print_result(self.cur.description, rows, self.cur.statusmessage,
                              expanded=expanded)
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
        self.error(f"ERROR:  {e}" + caret_lines(self.last_query, getattr(e, "position", None)))

    def run_meta(self, line: str, scanner: QueryScanner | None = None) -> bool:
        """Run one backslash command (``line`` starts with the backslash); False if it
        failed.  ``scanner`` is the query buffer it may use (``\\g``, ``\\r``, ``\\p``)."""
        word, _, arg = line.strip()[1:].partition(" ")
        word, _, glued = word.partition("\t")
        arg = (glued + " " + arg).strip()
        fn = self.meta_command(word)
        if fn is None:
            self.error(f"invalid command \\{word}\nTry \\? for help.")
            return False
        saved, self._scanner = self._scanner, scanner
        t0 = time.perf_counter()
        try:
            ok = fn(arg)
        except errors.Error as e:
            self._report(e)
            return False
        except MetaUsage as e:
            self.error(f"\\{word}: {e}")
            return False
        except Exception as e:  # a bug: report it, keep the session
            self._report(_internal(e))
            return False
        finally:
            self._scanner = saved
        if self.timing and word in ("page", "btree", "stats"):
            self.write(f"Time: {(time.perf_counter() - t0) * 1000:.3f} ms\n")
        return ok is not False

    def _run_actions(self, scanner, actions, *, stop_at_error: bool = False) -> bool:
        ok = True
        for kind, text in actions:
            if self.done or self.stopped:
                break
            if kind == "sql":
                if _blank(text):
                    continue
                good = self.run_sql(text.strip())
            else:
                good = self.run_meta(text, scanner)
            if not good:
                ok = False
                if self.stop_on_error and not self.is_interactive:
                    self.stopped = True
                if stop_at_error:
                    break
        return ok

    def handle_text(self, text: str, *, final: bool = False,
                    stop_at_error: bool = False) -> tuple[bool, str]:
        """Run what ``text`` completes: its statements and meta commands.  Returns (all
        succeeded, the unfinished rest); ``final`` sends the rest as well (``-c``)."""
        scanner = QueryScanner(self.variables)
        ok = True
        for line in text.split("\n"):
            if not self._run_actions(scanner, scanner.feed(line), stop_at_error=stop_at_error):
                ok = False
                if stop_at_error:
                    return False, ""
            if self.done or self.stopped:
                return ok, ""
        rest = scanner.buffer
        if _blank(rest):
            return ok, ""
        if final:
            scanner.reset()
            return self._run_actions(scanner, [("sql", rest)]) and ok, ""
        return ok, rest.rstrip("\n")

    # -- the modes --------------------------------------------------------------------------------
    def run_command(self, text: str) -> bool:
        """``-c TEXT``: statements (stopping at the first that fails) or meta commands."""
        ok, _ = self.handle_text(text, final=True, stop_at_error=True)
        return ok

    def run_script(self, lines, *, stop_on_error: bool | None = None,
                   source: str | None = None) -> bool:
        """Script mode (stdin, ``-f``, ``\\i``): ``lines`` is any iterable of lines;
        ``source`` names the file in messages.  True if everything succeeded."""
        if stop_on_error is not None:
            self.stop_on_error = stop_on_error
        before = self.errors
        scanner = QueryScanner(self.variables)
        saved = self.location
        try:
            lineno = 0
            for lineno, line in enumerate(lines, 1):
                self.location = (source, lineno)
                if self.echo:
                    self.write(line if line.endswith("\n") else line + "\n")
                self._run_actions(scanner, scanner.feed(line))
                if self.done or self.stopped:
                    break
            else:
                if not _blank(scanner.buffer):
                    self._run_actions(scanner, [("sql", scanner.take())])
        finally:
            self.location = saved
        self.out.flush()
        return self.errors == before

    def run_file(self, path: str) -> bool:
        """``\\i FILE`` (and ``-f FILE``): run a file's lines as a script."""
        try:
            f = open(path)
        except OSError as e:
            raise MetaUsage(f"{path}: {e.strerror}") from None
        with f:
            return self.run_script(f, source=path)

    def interactive(self, history_path: str | None = None, *, input=None, output=None) -> None:
        """The prompt loop (prompt_toolkit); ``input``/``output`` let tests drive it."""
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory
        from prompt_toolkit.key_binding import KeyBindings

        from minidb.repl.complete import SqlCompleter

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
                                completer=SqlCompleter(self), complete_while_typing=False,
                                input=input, output=output)
        self.prompt_session = session
        self.is_interactive = True
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
            if pending:
                pending += "\n"
            self.out.flush()

    def _complete(self, text: str) -> bool:
        """Does Enter run the buffer (rather than start a new line)?"""
        if not text.strip():
            return True
        scanner = QueryScanner()
        return any(scanner.feed(line) for line in text.split("\n"))


def _internal(e: Exception) -> errors.InternalError:
    err = errors.InternalError(f"internal error: {type(e).__name__}: {e}")
    err.__cause__ = e
    return err


def _blank(text: str) -> bool:
    """Nothing but blanks and comments (nothing to run)."""
    from minidb.sql.parser.lexer import strip_comments
    return not strip_comments(text).strip()


def caret_lines(query, position) -> str:
    """psql's pointer to an error's position: ``LINE n: <that line>`` and a caret under
    the character (``position`` is 1-based in ``query``, as the error carries it)."""
    if not query or not position or position < 1:
        return ""
    pos = min(position - 1, len(query))
    start = query.rfind("\n", 0, pos) + 1
    end = query.find("\n", pos)
    line = query[start:end if end >= 0 else len(query)]
    lineno = query.count("\n", 0, pos) + 1
    head = f"LINE {lineno}: "
    return f"\n{head}{line}\n{' ' * (len(head) + pos - start)}^"

