"""COPY table [(columns)] FROM / TO 'file', in PostgreSQL's text and csv formats.

==========  ===============================================  ===============================
format      a row                                            NULL
==========  ===============================================  ===============================
text        fields separated by a tab (DELIMITER), with      \\N
            backslash escapes (\\t \\n \\r \\\\ \\b \\f \\v)
csv         fields separated by "," (DELIMITER), quoted       an unquoted empty field (NULL
            with "..." when needed, "" inside quotes         '' by default); "" is the empty
                                                             string
==========  ===============================================  ===============================

FROM reads each field as an untyped literal of its column's type (PostgreSQL's input
functions), a batch of ``_BATCH`` records and a column at a time (``minidb.sql.bulkload``),
then inserts each batch through the same Insert node as INSERT (defaults for the columns
not listed, index entries, unique checks; a full batch takes the bulk path: new pages, one
WAL record per page, index entries in key order); an error names the line and the column, and - the statement's transaction being rolled back -
leaves the table as it was.  TO writes the rows a ``SELECT columns FROM table`` returns,
in the values' output form.

Server files are a privilege, as in PostgreSQL (pg_read_server_files /
pg_write_server_files): COPY to or from a file needs the instance setting
``allow_server_files`` (off by default; given when the database is opened, so no SQL can
grant it) and otherwise fails with 42501 "permission denied to COPY from a file"; a file
inside the data directory is refused even then (one COPY TO over the catalog would brick
the database).  FROM STDIN / TO STDOUT serve everyone instead: the data travels through
the client - the DB-API's ``cursor.copy()`` (psycopg's model) and the shell's ``\\copy`` -
which hands the engine a text stream as ``engine.copy_stream`` for that one statement
(``run_copy(engine, st)`` reads it; without it, STDIN / STDOUT is NotSupportedError).

Departure: PostgreSQL resolves a relative file name against the server's data directory;
minidb, an embedded engine, resolves it against the current directory.
"""

from __future__ import annotations

import contextlib
import itertools
import os

import minidb.errors as errors
from minidb.exec.chunk import Chunk, column_from_values, column_to_list
from minidb.exec.datatypes import UNKNOWN, cast_value, format_value
from minidb.exec.nodes import ExecContext
from minidb.sql.binder import Binder, RangeEntry
from minidb.sql.parser.lexer import unescape
from minidb.sql.parser.translate import parse_expression_text
from minidb.types import parse_type

__all__ = ["run_copy", "format_row", "parse_rows"]

_BATCH = 10_000
_READ_CHARS = 1 << 22     # COPY FROM's text format reads this many characters at a time
_TEXT_ESC = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\", "b": "\b", "f": "\f", "v": "\v"}


def run_copy(engine, st) -> int:
    from minidb.sql.locking import lock_table
    from minidb.sql.rewrite import check_not_view
    from minidb.txn.lmgr import AccessShareLock, RowExclusiveLock
    check_not_view(engine.session.backend.catalog, st.table,
                   "copy to" if st.direction == "from" else "copy from")
    t = lock_table(engine, st.table,
                   AccessShareLock if st.direction == "to" else RowExclusiveLock)
    if st.freeze:
        _check_freeze(engine, t, st.direction)
    cols = [(c.name, parse_type(c.type)) for c in t.columns]
    entry = RangeEntry(0, t.name, t, cols, [c.not_null for c in t.columns])
    if st.columns is None:
        attnos = list(range(len(cols)))
    else:
        attnos = []
        for c in st.columns:
            a = entry.attno(c)
            if a < 0:
                raise errors.UndefinedColumn(f'column "{c}" of relation "{t.name}" does not exist')
            if a in attnos:
                raise errors.DuplicateColumn(f'column "{c}" specified more than once')
            attnos.append(a)
    delim = st.delimiter or ("," if st.format == "csv" else "\t")
    null = st.null if st.null is not None else ("" if st.format == "csv" else "\\N")
    if st.path is None:  # FROM STDIN / TO STDOUT: the client's stream
        stream = getattr(engine, "copy_stream", None)
        if stream is None:
            where = "FROM STDIN" if st.direction == "from" else "TO STDOUT"
            raise errors.NotSupportedError(
                f"COPY {where} needs the client's data stream: use cursor.copy() in the "
                "DB-API, or \\copy in minidb's shell")
        f = contextlib.nullcontext(stream)
        name = "STDIN" if st.direction == "from" else "STDOUT"
    else:
        name = os.path.abspath(st.path)
        _check_server_file(engine, name, st.direction)
        f = _open(name, st.direction)
    if st.direction == "to":
        return _copy_to(engine, entry, attnos, f, st.format, delim, null, st.header)
    return _copy_from(engine, entry, attnos, f, st.format, delim, null, st.header)


def _check_freeze(engine, t, direction: str) -> None:
    """COPY ... FREEZE's prerequisite, PostgreSQL's: the table's file was made in this
    transaction (CREATE TABLE or TRUNCATE), so no other transaction can see the rows before
    it commits.  PostgreSQL then writes the rows already frozen; minidb loads them as any
    COPY does (their xmin is this transaction's), which every reader sees the same way once
    the transaction commits - the freezing pass FREEZE saves is not done here either."""
    if direction != "from":
        raise errors.NotSupportedError("COPY FREEZE cannot be used with COPY TO")
    xact = engine.session.xact
    new_files = {rfn for rfn, at_commit in xact.pending_deletes if not at_commit}
    if t.relfilenode not in new_files:
        raise errors.ObjectNotInPrerequisiteState(
            "cannot perform COPY FREEZE because the table was not created or truncated in the "
            "current subtransaction")


def _check_server_file(engine, path: str, direction: str) -> None:
    """The privilege check for a server file (see the module docstring)."""
    verb = "from" if direction == "from" else "to"
    if not engine.session.settings.allow_server_files:
        role = "pg_read_server_files" if verb == "from" else "pg_write_server_files"
        raise errors.InsufficientPrivilege(
            f"permission denied to COPY {verb} a file: server files need the "
            f"allow_server_files setting (off by default, like PostgreSQL's {role} role; "
            "give it when opening the database).  Anyone can COPY TO STDOUT or FROM STDIN: "
            "cursor.copy() in the DB-API, or \\copy in minidb's shell")
    datadir = os.path.realpath(engine.instance.datadir)
    real = os.path.realpath(path)
    if os.path.commonpath([datadir, real]) == datadir:
        raise errors.InsufficientPrivilege(
            f'cannot COPY {verb} a file inside the data directory: "{path}" is in '
            f'"{datadir}", whose files only the database itself may read and write')


def _open(path: str, direction: str):
    try:
        if direction == "from":
            return open(path, newline="", encoding="utf-8")
        return open(path, "w", newline="", encoding="utf-8")
    except OSError as e:
        what = "reading" if direction == "from" else "writing"
        raise errors.IOError_(f'could not open file "{path}" for {what}: {e.strerror}') from None


# -- FROM -------------------------------------------------------------------------------------------
def _copy_from(engine, entry, attnos, src, fmt, delim, null, header) -> int:
    """Read the rows in batches of ``_BATCH`` records, convert each batch column by column
    (``bulkload.convert_strings``: the columns' input functions, vectorized where the
    type allows) and insert each as one chunk through the Insert node, whose bulk path
    (``minidb.exec.modify.bulk_insert``) takes a full batch."""
    from minidb.sql.bulkload import convert_strings, run_insert
    types = [entry.columns[a][1] for a in attnos]
    names = [entry.columns[a][0] for a in attnos]
    binder = Binder(engine.session.backend.catalog, default_parser=parse_expression_text)
    defaults = binder.defaults(entry)
    width = len(attnos)
    table = entry.table.name

    def convert(linenos, fields, quoted):
        """One batch: fields[i] and quoted[i] are column i's strings and flags."""
        cols = []
        for i, (vals, qs) in enumerate(zip(fields, quoted)):
            if qs is None:
                nulls = [k for k, v in enumerate(vals) if v == null] if null in vals else []
            else:
                nulls = [k for k, (v, q) in enumerate(zip(vals, qs)) if v == null and not q]
            present = vals
            ns = set(nulls)
            if nulls:
                present = [v for k, v in enumerate(vals) if k not in ns]
            try:
                out = convert_strings(list(present), types[i], names[i])
            except errors.Error:
                out = None
            if out is None:   # find the first failing field to name its line
                keep = [k for k in range(len(vals)) if k not in ns]
                for k, v in zip(keep, present):
                    try:
                        cast_value(v, UNKNOWN, types[i], explicit=False, column=names[i])
                    except errors.Error as e:
                        raise type(e)(f"{e} (COPY {table}, line {linenos[k]}, column "
                                      f"{names[i]}: {v[:40]!r})") from None
                raise errors.InternalError("a COPY column failed to convert as a whole "
                                           "but every field converted alone")
            if nulls:
                full: list = [None] * len(vals)
                it = iter(out)
                for k in range(len(vals)):
                    if k not in ns:
                        full[k] = next(it)
                out = full
            cols.append(column_from_values(out, types[i]))
        return Chunk(cols, len(linenos))

    def batches():
        with src as f:
            if fmt == "csv":
                yield from _record_batches(_csv_records(f, delim), header, width, table,
                                           convert)
            else:
                yield from _text_batches(f, delim, header, width, table, convert)

    return run_insert(engine, entry, attnos, defaults, batches())


def _check_width(fields, width, table, lineno) -> None:
    if len(fields) != width:
        raise errors.BadCopyFileFormat(
            f"{'extra' if len(fields) > width else 'missing'} data for "
            f"column(s) (COPY {table}, line {lineno}: expected "
            f"{width} fields, found {len(fields)})")


def _record_batches(records, header, width, table, convert):
    """Batches of (line number, fields, quoted flags) records, converted."""
    linenos, rows, quoted = [], [], []
    for lineno, fields, q in records:
        if header and lineno == 1:
            continue
        _check_width(fields, width, table, lineno)
        linenos.append(lineno)
        rows.append(fields)
        quoted.append(q)
        if len(rows) >= _BATCH:
            yield convert(linenos, list(zip(*rows)), list(zip(*quoted)))
            linenos, rows, quoted = [], [], []
    if rows:
        yield convert(linenos, list(zip(*rows)), list(zip(*quoted)))


def _text_batches(f, delim, header, width, table, convert):
    """The text format, read in blocks of ``_READ_CHARS`` and cut into batches of
    ``_BATCH`` lines.  A batch whose lines all have ``width`` fields and whose only
    backslashes are whole ``\\N`` fields is split in one go (the lines joined by the
    delimiter and split once: column i is every width-th field) with no per-line Python
    work; any other batch goes through ``_text_records`` line by line."""
    lineno = 0
    rest = ""
    done = False
    while not done:
        block = f.read(_READ_CHARS)
        if block:
            text = rest + block
            cut = text.rfind("\n")
            if cut < 0:
                rest = text
                continue
            text, rest = text[:cut], text[cut + 1:]
        else:
            done = True
            text, rest = rest, ""
            if not text:
                break
        lines = text.split("\n")
        if "\r" in text:
            lines = [x[:-1] if x.endswith("\r") else x for x in lines]
        if "\\." in lines:
            lines = lines[:lines.index("\\.")]
            done = True
        first = lineno + 1
        lineno += len(lines)
        if header and first == 1 and lines:
            lines.pop(0)
            first = 2
        for a in range(0, len(lines), _BATCH):
            yield _text_batch(lines[a:a + _BATCH], first + a, delim, width, table, convert)


def _text_batch(lines, first, delim, width, table, convert):
    n = len(lines)
    linenos = range(first, first + n)
    if set(map(str.count, lines, itertools.repeat(delim, n))) == {width - 1}:
        flat = delim.join(lines).split(delim)
        nback = sum(map(str.count, lines, itertools.repeat("\\", n)))
        if not nback or nback == flat.count("\\N"):
            return convert(linenos, [flat[i::width] for i in range(width)], [None] * width)
    recs = list(_text_records(lines, delim))   # escapes or a bad line: field by field
    for lineno, r in zip(linenos, recs):
        _check_width(r[1], width, table, lineno)
    return convert(linenos, list(zip(*(r[1] for r in recs))),
                   list(zip(*(r[2] for r in recs))))


def _text_records(f, delim):
    for lineno, line in enumerate(f, 1):
        if line.endswith("\n"):
            line = line[:-1]
        if line.endswith("\r"):
            line = line[:-1]
        if line == "\\.":
            break
        raw = line.split(delim)
        fields, quoted = [], []
        for x in raw:
            if x == "\\N":
                fields.append(x)
                quoted.append(False)
                continue
            if "\\" in x:
                x = _unescape_text(x)
                quoted.append(True)          # an escaped value is never the NULL marker
            else:
                quoted.append(False)
            fields.append(x)
        yield lineno, fields, quoted


def _unescape_text(s: str) -> str:
    return unescape(s, _TEXT_ESC)


def _csv_records(f, delim):
    """(line number, fields, quoted flags) per record; quoted fields may span lines."""
    lineno = 0
    pending = None
    for line in f:
        lineno += 1
        if pending is None and '"' not in line:
            body = line.rstrip("\r\n")
            fields = body.split(delim)
            yield lineno, fields, [False] * len(fields)
            continue
        pending = line if pending is None else pending + line
        parsed = _parse_csv(pending, delim)
        if parsed is None:
            continue                     # an open quote: the record goes on
        pending = None
        yield lineno, parsed[0], parsed[1]
    if pending is not None:
        raise errors.BadCopyFileFormat(f"unterminated CSV quoted field (line {lineno})")


def _parse_csv(text: str, delim):
    text = text.rstrip("\r\n") if not text.endswith('"\n') else text[:-1]
    fields, quoted = [], []
    i, n = 0, len(text)
    cur, q, in_q = [], False, False
    while i < n:
        ch = text[i]
        if in_q:
            if ch == '"':
                if i + 1 < n and text[i + 1] == '"':
                    cur.append('"')
                    i += 2
                    continue
                in_q = False
            else:
                cur.append(ch)
        elif ch == '"':
            in_q, q = True, True
        elif ch == delim:
            fields.append("".join(cur))
            quoted.append(q)
            cur, q = [], False
        elif ch in "\r\n" and i == n - 1:
            pass
        else:
            cur.append(ch)
        i += 1
    if in_q:
        return None
    fields.append("".join(cur))
    quoted.append(q)
    return fields, quoted


# -- TO ---------------------------------------------------------------------------------------------
def _copy_to(engine, entry, attnos, dst, fmt, delim, null, header) -> int:
    from minidb.exec.scan import SeqScanNode
    node = SeqScanNode(entry, attnos, [])
    types = [entry.columns[a][1] for a in attnos]
    names = [entry.columns[a][0] for a in attnos]

    def body(snap):
        n = 0
        with dst as f:
            if header:
                f.write(delim.join(_out_field(x, fmt, delim, null) for x in names) + "\n")
            ectx = ExecContext(engine.session, snap, [])
            for chunk in node.run(ectx):
                cols = []
                for (v, m), t in zip(chunk.cols, types):
                    lst = column_to_list(v, m, t)
                    cols.append([None if x is None else format_value(x, t) for x in lst])
                for r in range(chunk.n):
                    f.write(delim.join(_out_field(c[r], fmt, delim, null) for c in cols) + "\n")
                n += chunk.n
        return n, False

    return engine._statement(body)


def _out_field(v, fmt, delim, null) -> str:
    if v is None:
        return null
    if fmt == "csv":
        if v == "" or v == null or any(ch in v for ch in (delim, '"', "\n", "\r")):
            return '"' + v.replace('"', '""') + '"'
        return v
    return (v.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
            .replace("\r", "\\r"))


# -- for clients (cursor.copy, \\copy): the same formats, row by row ----------------------------------
def format_row(values, fmt: str = "text", delim: str | None = None,
               null: str | None = None) -> str:
    """One line of COPY data (with its newline) for Python values: None is NULL, bool is
    t / f, anything else its ``str()`` (datetime's is PostgreSQL's input form)."""
    delim = delim or ("," if fmt == "csv" else "\t")
    null = null if null is not None else ("" if fmt == "csv" else "\\N")
    out = []
    for v in values:
        if v is None:
            out.append(null)
            continue
        text = ("t" if v else "f") if isinstance(v, bool) else str(v)
        if fmt == "csv" and text == "":
            out.append('""')
        else:
            out.append(_out_field(text, fmt, delim, null))
    return delim.join(out) + "\n"


def parse_rows(text: str, fmt: str = "text", delim: str | None = None,
               null: str | None = None) -> list[tuple]:
    """COPY data back into tuples of str (None for NULL), as psycopg's ``Copy.rows()``."""
    import io
    delim = delim or ("," if fmt == "csv" else "\t")
    null = null if null is not None else ("" if fmt == "csv" else "\\N")
    f = io.StringIO(text, newline="")
    records = _csv_records(f, delim) if fmt == "csv" else _text_records(f, delim)
    return [tuple(None if (v == null and not q) else v for v, q in zip(fields, quoted))
            for _lineno, fields, quoted in records]
