"""The REPL's backslash commands (a mixin of ``Repl``): psql's, and minidb's inspection.

Each command is a method ``_meta_NAME(arg)`` taking the text after the command's name
(variables interpolated, quotes kept for names); it prints, or raises ``MetaUsage`` (printed
as ``\\cmd: message``) or a minidb error (printed as ``ERROR:  message``).  A ``+`` after a
listing command asks for more (``\\d+``, ``\\dt+``, ``\\di+``).

Row estimates (``\\dt``'s "Rows (estimated)"): ``reltuples`` scaled to the table's current
page count once VACUUM or ANALYZE has measured it, as the planner does; before that, the
planner's density guess (a page's free space over the tuple width its column types
suggest) times the *actual* page count - the planner itself pretends a never-measured table
under 10 pages has 10, which would print hundreds of rows for a three-row table.  The rule
is ``minidb.sql.stats.estimated_rows``, which ``minidb.sql.inspect.describe_tables`` shows too.
"""

from __future__ import annotations

import os
import re

import minidb.errors as errors
from minidb.repl.scan import meta_args, parse_bool, pattern_regex

BLCKSZ = 8192

HELP = r"""General
  \q                     quit minidb
  \?                     this help
  \echo TEXT             print TEXT
  \i FILE                run the statements in FILE (\ir: relative to this script)

Query buffer
  \g [FILE]              run the query buffer (or the last query), output to FILE
  \gx [FILE]             as \g, in expanded format
  \p                     show the query buffer
  \r                     reset (clear) the query buffer

Informational (+ for more; PATTERN: names with * and ?)
  \d[+] [PATTERN]        list tables, or describe the tables and indexes named
  \dt[+] [PATTERN]       list tables
  \di[+] [PATTERN]       list indexes

Formatting
  \x [on|off]            toggle expanded output (one block per row)
  \a                     toggle between aligned and unaligned output
  \t [on|off]            show only rows (no headers, no footer)
  \pset [NAME [VALUE]]   format (aligned, unaligned), border (0-2), null, fieldsep,
                         footer, tuples_only, expanded, pager (on, off, always)
  \timing [on|off]       toggle timing of statements ("Time: 1.234 ms")

Variables
  \set [NAME [VALUE]]    set a variable (no argument: list them); :NAME, :'NAME' and
                         :"NAME" in SQL are its value, as literal, as identifier
  \unset NAME            unset a variable (ON_ERROR_STOP: stop scripts at an error)

Input/Output
  \copy TABLE [(COLS)] {FROM | TO} {FILE | STDOUT} [OPTIONS]
                         COPY through this shell: FILE is read or written here (no
                         server-file privilege needed); OPTIONS as COPY's

Inspection (minidb's own)
  \page TABLE BLOCK      line pointers, xmin/xmax and hint bits of one heap page
  \btree INDEX           the B-tree's pages, level by level
  \stats [TABLE]         pg_stat_user_tables-like counters, and the buffer counters
  \locks                 the heavyweight locks held and awaited (pg_locks)
  \check [TABLE]         run the heap, B-tree and catalog checkers (amcheck-like)
  \wal                   the write-ahead log: pg_stat_wal's counters, insert / write /
                         flush positions, this session's records, images and bytes
"""

PSET_NAMES = ("border", "expanded", "fieldsep", "footer", "format", "null", "pager",
              "tuples_only")


# \copy's argument: what goes before FROM / TO, the direction, the file (quoted or not), the
# options after it
_COPY_ARGS = re.compile(r"\s*(.+?)\s+(from|to)\s+('(?:[^']|'')*'|\S+)(.*)$", re.I | re.S)


class MetaUsage(Exception):
    """A meta command used wrongly (printed as ``\\cmd: message``)."""


class MetaCommands:
    """Backslash commands; mixed into ``Repl`` (which provides write, print_table, ...)."""

    _ALIASES = {"quit": "q", "include": "i", "include_relative": "ir"}

    def meta_command(self, word: str):
        word = self._ALIASES.get(word, word)
        plus = word.endswith("+") and word[:-1] in ("d", "dt", "di")
        name = word[:-1] if plus else word
        if name in ("d", "dt", "di"):
            fn = getattr(self, f"_meta_{name}")
            return lambda arg: fn(arg, plus=plus)
        if not name.replace("?", "help").isidentifier():
            return None
        return getattr(self, "_meta_" + name.replace("?", "help"), None)

    def _args(self, arg: str) -> list[str]:
        return meta_args(arg, self.variables)

    def _one(self, arg: str) -> str:
        """The argument as one string, variables interpolated (``\\page t 0``)."""
        return " ".join(self._args(arg))

    # -- general ----------------------------------------------------------------------------------
    def _meta_q(self, arg: str) -> None:
        self.done = True

    def _meta_help(self, arg: str) -> None:
        self.emit(HELP + "\n")

    def _meta_echo(self, arg: str) -> None:
        self.write(" ".join(self._args(arg)) + "\n")

    def _meta_i(self, arg: str, *, relative: bool = False) -> bool:
        args = self._args(arg)
        if len(args) != 1:
            raise MetaUsage("missing required argument" if not args else "one file name")
        path = os.path.expanduser(args[0])
        source = self.location[0]
        if relative and source and not os.path.isabs(path):
            path = os.path.join(os.path.dirname(source), path)
        return self.run_file(path)

    def _meta_ir(self, arg: str) -> bool:
        return self._meta_i(arg, relative=True)

    # -- the query buffer --------------------------------------------------------------------------
    def _meta_g(self, arg: str, *, expanded: bool | None = None) -> bool:
        scanner = self._scanner
        if scanner is not None and scanner.in_progress:
            sql = scanner.take().strip()
        elif self.last_query is not None:
            sql = self.last_query
        else:
            raise MetaUsage("no query buffer")
        args = self._args(arg)
        if not args:
            return self.run_sql(sql, expanded=expanded)
        try:
            f = open(os.path.expanduser(args[0]), "w")
        except OSError as e:
            raise MetaUsage(f"{args[0]}: {e.strerror}") from None
        saved, saved_tty = self.out, self.tty
        self.out, self.tty = f, False
        try:
            return self.run_sql(sql, expanded=expanded)
        finally:
            self.out, self.tty = saved, saved_tty
            f.close()

    def _meta_gx(self, arg: str) -> bool:
        return self._meta_g(arg, expanded=True)

    def _meta_p(self, arg: str) -> None:
        scanner = self._scanner
        if scanner is not None and scanner.in_progress:
            self.write(scanner.buffer.rstrip("\n") + "\n")
        elif self.last_query is not None:
            self.write(self.last_query + "\n")
        else:
            self.write("Query buffer is empty.\n")

    def _meta_r(self, arg: str) -> None:
        if self._scanner is not None:
            self._scanner.reset()
        self.write("Query buffer reset (cleared).\n")

    # -- variables ----------------------------------------------------------------------------------
    def _meta_set(self, arg: str) -> None:
        args = self._args(arg)
        if not args:
            for name in sorted(self.variables):
                self.write(f"{name} = '{self.variables[name]}'\n")
            return
        name, value = args[0], "".join(args[1:])
        if not name.replace("_", "a").isalnum():
            raise MetaUsage(f'invalid variable name: "{name}"')
        if name == "ON_ERROR_STOP":
            if value == "":
                value = "on"
            elif parse_bool(value) is None:
                raise MetaUsage(f'unrecognized value "{value}" for "ON_ERROR_STOP": '
                                "Boolean expected")
        self.variables[name] = value

    def _meta_unset(self, arg: str) -> None:
        args = self._args(arg)
        if len(args) != 1:
            raise MetaUsage("missing required argument" if not args else "one variable name")
        if args[0] == "ON_ERROR_STOP":
            self.variables[args[0]] = "off"
        else:
            self.variables.pop(args[0], None)

    # -- formatting ---------------------------------------------------------------------------------
    def _toggle(self, arg: str, current: bool, name: str = "") -> bool:
        if not arg:
            return not current
        got = parse_bool(arg)
        if got is None:
            raise MetaUsage(f'unrecognized value "{arg}": Boolean expected (on or off)'
                            if not name else
                            f'unrecognized value "{arg}" for "{name}": Boolean expected')
        return got

    def _meta_x(self, arg: str) -> None:
        self.popt.expanded = self._toggle(self._one(arg), self.popt.expanded)
        self._pset_info("expanded")

    def _meta_a(self, arg: str) -> None:
        self.popt.format = "unaligned" if self.popt.format == "aligned" else "aligned"
        self._pset_info("format")

    def _meta_t(self, arg: str) -> None:
        self.popt.tuples_only = self._toggle(self._one(arg), self.popt.tuples_only)
        self._pset_info("tuples_only")

    def _meta_timing(self, arg: str) -> None:
        self.timing = self._toggle(self._one(arg), self.timing)
        self.write(f"Timing is {'on' if self.timing else 'off'}.\n")

    def _meta_pset(self, arg: str) -> None:
        args = self._args(arg)
        p = self.popt
        if not args:
            for name in PSET_NAMES:
                self.write(f"{name:<24} {self._pset_value(name)}\n")
            return
        name = args[0]
        if name not in PSET_NAMES:
            raise MetaUsage(f"unknown option: {name}")
        if len(args) > 1:
            value = args[1]
            if name == "format":
                choices = [f for f in ("aligned", "unaligned") if f.startswith(value.lower())]
                if len(choices) != 1:
                    raise MetaUsage("allowed formats are aligned, unaligned")
                p.format = choices[0]
            elif name == "border":
                try:
                    p.border = min(max(int(value), 0), 2)
                except ValueError:
                    raise MetaUsage(f'invalid value "{value}" for "border"') from None
            elif name == "null":
                p.null = value
            elif name == "fieldsep":
                p.fieldsep = value
            elif name == "pager":
                on = parse_bool(value) if value.lower() != "always" else "always"
                if on is None:
                    raise MetaUsage(f'unrecognized value "{value}" for "pager"\n'
                                    "Available values are: on, off, always.")
                p.pager = 2 if on == "always" else int(on)
            else:   # the booleans
                setattr(p, name, self._toggle(value, getattr(p, name), name))
        elif name in ("expanded", "footer", "tuples_only"):
            setattr(p, name, not getattr(p, name))   # toggles, as psql's
        elif name == "format":
            pass
        elif name == "pager":
            p.pager = 0 if p.pager == 1 else 1
        self._pset_info(name)

    def _pset_value(self, name: str) -> str:
        p = self.popt
        v = getattr(p, name)
        if name in ("null", "fieldsep"):
            return f"'{v}'"
        if isinstance(v, bool):
            return "on" if v else "off"
        return str(v)

    def _pset_info(self, name: str) -> None:
        p = self.popt
        onoff = {True: "on", False: "off"}
        self.write({
            "format": f"Output format is {p.format}.",
            "border": f"Border style is {p.border}.",
            "null": f'Null display is "{p.null}".',
            "fieldsep": f'Field separator is "{p.fieldsep}".',
            "expanded": f"Expanded display is {onoff[p.expanded]}.",
            "footer": f"Default footer is {onoff[p.footer]}.",
            "tuples_only": f"Tuples only is {onoff[p.tuples_only]}.",
            "pager": ("Pager usage is off.", "Pager is used for long output.",
                      "Pager is always used.")[p.pager],
        }[name] + "\n")

    # -- informational -------------------------------------------------------------------------------
    def _inspect(self):
        from minidb.sql import inspect
        return inspect

    def _catalog(self):
        cat = self.conn.session.backend.catalog
        cat.refresh()
        return cat

    def _matcher(self, arg: str):
        """A predicate on relation names for a psql pattern (None: everything)."""
        if not arg:
            return None
        name_re, schema_re = pattern_regex(arg)
        if schema_re is not None and not schema_re.match("public"):
            return lambda name: False
        return lambda name: bool(name_re.match(name))

    def _served(self) -> bool:
        """True when the connection goes through a server's socket: the catalog is not in
        this process, and \\dt and \\d TABLE read it by SQL (``pg_class``,
        ``pg_attribute``, ``pg_index``); other informational commands need an embedded
        open and say so."""
        return getattr(self.conn, "_engine", None) is None

    def _served_rows(self, sql: str, params=()) -> list:
        cur = self.conn.cursor()
        cur.execute(sql, params)
        return cur.fetchall()

    def _served_names(self, kinds: str) -> list[str]:
        rows = self._served_rows("SELECT relname, relkind FROM pg_class WHERE relnamespace "
                                 "<> 11 ORDER BY relname")
        return [name for name, kind in rows if kind in kinds]

    def _served_dt(self, pattern: str, match) -> None:
        rows = [[name, "table"] for name in self._served_names("r")
                if match is None or match(name)]
        if pattern and not rows:
            self.warn(f'Did not find any relation named "{pattern}".')
            return
        self.print_table(["Name", "Type"], rows, title="List of tables",
                         right=[False, False])

    def _served_describe(self, name: str) -> None:
        rel = self._served_rows("SELECT oid, relkind FROM pg_class WHERE relname = ? AND "
                                "relnamespace <> 11", (name,))
        if not rel or rel[0][1] != "r":
            raise errors.UndefinedTable(f'did not find any relation named "{name}"'
                                        + ("" if not rel else " (\\d of an index needs an "
                                                              "embedded open)"))
        oid = rel[0][0]
        cols = self._served_rows("SELECT attnum, attname, atttypname, attnotnull, attdefault "
                                 "FROM pg_attribute WHERE attrelid = ? ORDER BY attnum",
                                 (oid,))
        names = {num: col for num, col, _t, _n, _d in cols}
        rows = [[c, typ, "not null" if not_null else "", "" if default is None else default]
                for _num, c, typ, not_null, default in cols]
        footer = []
        idx = self._served_rows("SELECT c.relname, x.indisunique, x.indisprimary, x.indkey "
                                "FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid "
                                "WHERE x.indrelid = ? ORDER BY c.oid", (oid,))
        if idx:
            footer.append("Indexes:")
            for iname, unique, primary, indkey in idx:
                kind = _constraint(unique, primary).upper()
                icols = [names.get(int(k), k) for k in str(indkey).split()]
                footer.append(f'    "{iname}" {kind + ", " if kind else ""}btree '
                              f'({", ".join(icols)})')
        fks = self._served_rows("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                                "WHERE conrelid = ? AND contype = 'f' ORDER BY conname", (oid,))
        refs = self._served_rows("SELECT conname, conrelid::regclass, pg_get_constraintdef(oid) "
                                 "FROM pg_constraint WHERE confrelid = ? AND contype = 'f' "
                                 "ORDER BY conname", (oid,))
        footer += _fkey_lines(fks, refs)
        self.print_table(["Column", "Type", "Nullable", "Default"], rows,
                         title=f'Table "{name}"', footer=footer, right=[False] * 4)

    def _meta_dt(self, arg: str, *, plus: bool = False) -> None:
        pattern = self._one(arg)
        match = self._matcher(pattern)
        if self._served():
            return self._served_dt(pattern, match)
        cat = self._catalog()
        smgr = self.conn.session.instance.smgr
        rows = []
        for name in sorted(cat.tables):
            if match is not None and not match(name):
                continue
            t = cat.tables[name]
            pages = smgr.nblocks(t.relfilenode)
            row = [name, "table", row_estimate(t, pages), pages]
            rows.append(row + [size_pretty(pages * BLCKSZ)] if plus else row)
        if pattern and not rows:
            self.warn(f'Did not find any relation named "{pattern}".')
            return
        headers = ["Name", "Type", "Rows (estimated)", "Pages"] + (["Size"] if plus else [])
        self.print_table(headers, rows, title="List of tables",
                         right=[False, False, True, True, False][:len(headers)])

    def _meta_di(self, arg: str, *, plus: bool = False) -> None:
        pattern = self._one(arg)
        match = self._matcher(pattern)
        rows = []
        for name, table, cols, unique, primary, pages in \
                self._inspect().list_indexes(self.conn.session):
            if match is not None and not match(name):
                continue
            row = [name, "index", table, ", ".join(cols), _constraint(unique, primary), pages]
            rows.append(row + [size_pretty(pages * BLCKSZ)] if plus else row)
        if pattern and not rows:
            self.warn(f'Did not find any relation named "{pattern}".')
            return
        headers = ["Name", "Type", "Table", "Columns", "Constraint", "Pages"] + \
            (["Size"] if plus else [])
        self.print_table(headers, rows, title="List of indexes",
                         right=[False] * 5 + [True, False][:len(headers) - 5])

    def _meta_d(self, arg: str, *, plus: bool = False) -> None:
        pattern = self._one(arg)
        if not pattern:
            return self._meta_dt("", plus=plus)
        if not _has_wildcard(pattern):
            return self._describe(_unquote(pattern), plus)
        match = self._matcher(pattern)
        if self._served():
            names = [n for n in self._served_names("ri") if match(n)]
        else:
            cat = self._catalog()
            names = sorted(n for n in list(cat.tables) + list(cat.indexes) if match(n))
        if not names:
            raise errors.UndefinedTable(f'did not find any relation named "{pattern}"')
        for name in names:
            self._describe(name, plus)

    def _describe(self, name: str, plus: bool) -> None:
        if self._served() and not plus:
            return self._served_describe(name)
        insp = self._inspect()
        session = self.conn.session
        try:
            t = insp.describe_table(session, name)
        except errors.UndefinedTable:
            for ix in insp.list_indexes(session):
                if ix[0] == name:
                    return self._describe_index(*ix)
            raise errors.UndefinedTable(f'did not find any relation named "{name}"') from None
        rows = [[c, typ, "not null" if not_null else "", "" if default is None else default]
                for c, typ, not_null, default in t["columns"]]
        headers = ["Column", "Type", "Nullable", "Default"]
        footer = []
        if t["indexes"]:
            footer.append("Indexes:")
            for iname, cols, unique, primary in t["indexes"]:
                kind = _constraint(unique, primary).upper()
                footer.append(f'    "{iname}" {kind + ", " if kind else ""}btree '
                              f'({", ".join(cols)})')
        footer += _fkey_footer(self._catalog().tables[t["name"]])
        if plus:
            tdef = self._catalog().tables[t["name"]]
            stats = tdef.column_stats or {}
            headers += ["Storage", "Avg width", "Distinct"]
            for row in rows:
                st = stats.get(row[0], {})
                row += ["plain", _num(st.get("avg_width")), _num(st.get("n_distinct"))]
            pages = self.conn.session.instance.smgr.nblocks(tdef.relfilenode)
            footer.append("Access method: heap")
            footer.append(f"Pages: {pages} ({size_pretty(pages * BLCKSZ)}), rows (estimated): "
                          f"{row_estimate(tdef, pages)}"
                          + ("" if tdef.reltuples >= 0 else ", never analyzed"))
        self.print_table(headers, rows, title=f'Table "{t["name"]}"', footer=footer,
                         right=[False] * 5 + [True, True] if plus else [False] * 4)

    def _describe_index(self, name, table, cols, unique, primary, pages) -> None:
        kind = _constraint(unique, primary)
        self.print_table(["Column"], [(c,) for c in cols], title=f'Index "{name}"',
                         footer=[f'{kind + ", " if kind else ""}btree, for table "{table}", '
                                 f'{pages} page{"" if pages == 1 else "s"}'])

    # -- inspection (minidb's own) ------------------------------------------------------------------
    def _meta_page(self, arg: str) -> None:
        parts = self._args(arg)
        if len(parts) != 2 or not parts[1].isdigit():
            raise MetaUsage("usage: \\page TABLE BLOCK")
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
        args = self._args(arg)
        if len(args) != 1:
            raise MetaUsage("usage: \\btree INDEX")
        text = self._inspect().btree_dump(self.conn.session, _unquote(args[0]))
        self.emit(text if text.endswith("\n") else text + "\n")

    def _meta_stats(self, arg: str) -> None:
        args = self._args(arg)
        if len(args) > 1:
            raise MetaUsage("usage: \\stats [TABLE]")
        got = self._inspect().stats(self.conn.session, _unquote(args[0]) if args else None,
                                    engine=self.conn._engine)
        titles = {"tables": "Tables", "buffers": "Buffers (all sessions)",
                  "session": "This session", "plan_cache": "Plan cache (this session)"}
        for key, value in got.items():
            if key == "tables" and args:  # one table: its counters one per line
                value = value[0]
                titles["tables"] = f'Table "{value["relname"]}"'
            self._print_any(value, title=titles.get(key, key))

    def _meta_locks(self, arg: str) -> None:
        if self._args(arg):
            raise MetaUsage("usage: \\locks")
        rows = self._inspect().locks(self.conn.session)
        self.print_table(["locktype", "relation", "mode", "granted", "pid"], rows,
                         title="Locks")

    # -- \copy --------------------------------------------------------------------------------------
    def _meta_copy(self, arg: str) -> None:
        m = _COPY_ARGS.match(arg)
        if m is None:
            raise MetaUsage("usage: \\copy TABLE [(COLS)] {FROM | TO} {FILE | STDOUT} "
                            "[OPTIONS]")
        head, direction, target, rest = m.group(1), m.group(2).lower(), m.group(3), m.group(4)
        if target.startswith("'"):
            target = target[1:-1].replace("''", "'")
        stdio = target.lower() in ("stdin", "stdout", "pstdin", "pstdout")
        if direction == "from" and stdio:
            raise MetaUsage("\\copy FROM STDIN is not supported here: name a file")
        sql = f"COPY {head} {'FROM STDIN' if direction == 'from' else 'TO STDOUT'}{rest}"
        cur = self.conn.cursor()
        if direction == "from":
            try:
                with open(os.path.expanduser(target), newline="", encoding="utf-8") as f:
                    data = f.read()
            except OSError as e:
                raise MetaUsage(f"{target}: {e.strerror}") from None
            with cur.copy(sql) as copy:
                copy.write(data)
        else:
            try:
                f = (None if stdio else
                     open(os.path.expanduser(target), "w", newline="", encoding="utf-8"))
            except OSError as e:
                raise MetaUsage(f"{target}: {e.strerror}") from None
            try:
                with cur.copy(sql) as copy:
                    for data in copy:
                        (self.out if f is None else f).write(data.decode("utf-8"))
            finally:
                if f is not None:
                    f.close()
        self.write(f"{cur.statusmessage}\n")

    # -- \check ------------------------------------------------------------------------------------
    def _meta_check(self, arg: str) -> None:
        from minidb.amcheck import check_instance, format_report
        args = self._args(arg)
        if len(args) > 1:
            raise MetaUsage("usage: \\check [TABLE]")
        report = check_instance(self.conn.session.instance,
                                tables=[_unquote(args[0])] if args else None)
        self.write(format_report(report))

    def _meta_wal(self, arg: str) -> None:
        if self._args(arg):
            raise MetaUsage("usage: \\wal")
        from minidb.wal.dump import wal_status
        backend = self.conn.session.backend
        self._print_any(wal_status(backend.instance.wal_shared, backend.wal),
                        title="Write-ahead log")

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


# ---------------------------------------------------------------------------------------------
# row estimates


def row_estimate(tdef, pages: int) -> int:
    """A table's estimated rows now (see the module docstring)."""
    from minidb.sql.stats import estimated_rows
    return int(estimated_rows(tdef, pages))


def size_pretty(nbytes: int) -> str:
    """pg_size_pretty: bytes under 10 kB, then kB, MB, GB rounded half up."""
    if nbytes < 10 * 1024:
        return f"{nbytes} bytes"
    for unit in ("kB", "MB", "GB", "TB"):
        nbytes = nbytes / 1024
        if nbytes < 10 * 1024 or unit == "TB":
            return f"{int(nbytes + 0.5)} {unit}"


# ---------------------------------------------------------------------------------------------
# small helpers


def _has_wildcard(pattern: str) -> bool:
    quoted = False
    for ch in pattern:
        if ch == '"':
            quoted = not quoted
        elif ch in "*?" and not quoted:
            return True
    return False


def _num(v):
    if v is None:
        return ""
    return _plain(round(v, 2) if isinstance(v, float) else v)


def _fkey_footer(tdef) -> list[str]:
    """psql's "Foreign-key constraints:" and "Referenced by:" footers of a table."""
    from minidb.catalog.fkeys import definition
    return _fkey_lines([(f.name, definition(f)) for f in tdef.foreign_keys],
                       [(f.name, f.table, definition(f))
                        for f in sorted(tdef.referenced_by, key=lambda f: f.name)])


def _fkey_lines(fks, refs) -> list[str]:
    out = []
    if fks:
        out.append("Foreign-key constraints:")
        out += [f'    "{name}" {condef}' for name, condef in fks]
    if refs:
        out.append("Referenced by:")
        out += [f'    TABLE "{table}" CONSTRAINT "{name}" {condef}' for name, table, condef in refs]
    return out


def _constraint(unique: bool, primary: bool) -> str:
    return "primary key" if primary else "unique" if unique else ""


def _unquote(name: str) -> str:
    name = name.strip()
    if len(name) >= 2 and name[0] == name[-1] == '"':
        return name[1:-1].replace('""', '"')
    return name.lower()


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
