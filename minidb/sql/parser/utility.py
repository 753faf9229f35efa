"""The utility statements, parsed by hand: sqlglot turns most of them into an opaque
``exp.Command`` (VACUUM, ANALYZE, EXPLAIN, SHOW, SET, RESET, COPY ...), so minidb reads them
itself from ``lexer.tokenize``'s tokens.  Grammar (PostgreSQL's, the parts minidb has)::

    BEGIN [WORK | TRANSACTION] [ISOLATION LEVEL level] | START TRANSACTION [ISOLATION ...]
    COMMIT | END [WORK | TRANSACTION];  ROLLBACK | ABORT [WORK | TRANSACTION]
    SET TRANSACTION ISOLATION LEVEL level
    SET [SESSION] name {TO | =} {value [, ...] | DEFAULT};  RESET {name | ALL}
    SHOW {name | ALL}
    VACUUM [(option [, ...])] [VERBOSE] [ANALYZE] [table [, ...]]
    ANALYZE [VERBOSE] [table [, ...]]
    EXPLAIN [ANALYZE] [VERBOSE] statement | EXPLAIN (option [value] [, ...]) statement
    COPY table [(column [, ...])] {FROM {'file' | STDIN} | TO {'file' | STDOUT}}
        [[WITH] (option [value] [, ...])]
         (and the old forms: ... [WITH] [CSV] [HEADER] [DELIMITER 'x'] [NULL 'x'])
    TRUNCATE [TABLE] name [, ...] [CASCADE | RESTRICT]
    LOCK [TABLE] [ONLY] name [, ...] [IN lockmode MODE] [NOWAIT]
    CHECKPOINT
    ALTER TABLE [IF EXISTS] [ONLY] name action [, ...]
    ALTER TABLE [IF EXISTS] [ONLY] name RENAME [COLUMN] column TO new_column
    ALTER TABLE [IF EXISTS] name RENAME TO new_name;  ALTER INDEX [IF EXISTS] name RENAME TO new
    REINDEX {INDEX | TABLE} name
    action: ADD [COLUMN] [IF NOT EXISTS] column_definition
          | DROP [COLUMN] [IF EXISTS] column [RESTRICT | CASCADE]
          | ADD [CONSTRAINT name] {PRIMARY KEY | UNIQUE} (column [, ...])
          | DROP CONSTRAINT [IF EXISTS] name [RESTRICT | CASCADE]
          | ALTER [COLUMN] column {SET | DROP} NOT NULL
    level: READ COMMITTED | REPEATABLE READ | SERIALIZABLE | READ UNCOMMITTED
    lockmode: ACCESS SHARE | ROW SHARE | ROW EXCLUSIVE | SHARE UPDATE EXCLUSIVE | SHARE
              | SHARE ROW EXCLUSIVE | EXCLUSIVE | ACCESS EXCLUSIVE
"""

from __future__ import annotations

from minidb.errors import NotSupportedError
from minidb.sql import ast
from minidb.sql.parser.lexer import Token, syntax_error, tokenize

UTILITY_WORDS = {"begin", "start", "commit", "end", "rollback", "abort", "set", "show", "reset",
                 "vacuum", "analyze", "analyse", "explain", "copy", "truncate", "checkpoint", "lock",
                 "alter", "reindex", "savepoint", "release"}


class _P:
    def __init__(self, text: str, base: int, full: str):
        self.text = text
        self.full = full
        self.base = base
        self.toks = [Token(t.kind, t.value, t.pos + base) for t in tokenize(text)
                     if not (t.kind == "op" and t.value == ";")]
        self.i = 0

    def peek(self, k: int = 0):
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def at_end(self) -> bool:
        return self.i >= len(self.toks)

    def next(self) -> Token:
        t = self.peek()
        if t is None:
            raise syntax_error(self.full, self.base + len(self.text), None)
        self.i += 1
        return t

    def error(self, tok: Token | None = None, detail: str = ""):
        tok = tok or self.peek()
        if tok is None:
            return syntax_error(self.full, self.base + len(self.text.rstrip()), None, detail)
        return syntax_error(self.full, tok.pos, tok.value, detail)

    def word(self, *words) -> bool:
        t = self.peek()
        if t is not None and t.kind == "ident" and t.value in words:
            self.i += 1
            return True
        return False

    def expect_word(self, *words) -> str:
        t = self.peek()
        if t is None or t.kind != "ident" or t.value not in words:
            raise self.error(t, f"expected {' or '.join(w.upper() for w in words)}")
        self.i += 1
        return t.value

    def op(self, o: str) -> bool:
        t = self.peek()
        if t is not None and t.kind == "op" and t.value == o:
            self.i += 1
            return True
        return False

    def expect_op(self, o: str) -> None:
        if not self.op(o):
            raise self.error(None, f'expected "{o}"')

    def name(self) -> str:
        t = self.next()
        if t.kind not in ("ident", "qident"):
            raise self.error(t, "expected a name")
        name = t.value
        while self.op("."):          # schema.table: only public is known
            t2 = self.next()
            if name != "public":
                raise NotSupportedError("schema-qualified names are not supported")
            name = t2.value
        return name

    def end(self) -> None:
        if not self.at_end():
            raise self.error()

    def rest_text(self) -> tuple[str, int]:
        """The source text from the current token on, and its offset."""
        t = self.peek()
        if t is None:
            raise self.error()
        return self.full[t.pos:self.base + len(self.text)], t.pos


def parse_utility(word: str, text: str, base: int, full: str, parse_any) -> ast.Statement:
    p = _P(text, base, full)
    p.next()
    if word in ("begin", "start"):
        if word == "start":
            p.expect_word("transaction")
        else:
            p.word("work", "transaction")
        iso = _isolation_opt(p)
        p.end()
        return ast.BeginStmt(iso)
    if word in ("commit", "end"):
        p.word("work", "transaction")
        if p.word("and"):
            raise NotSupportedError("COMMIT AND CHAIN is not supported")
        p.end()
        return ast.CommitStmt()
    if word in ("rollback", "abort"):
        p.word("work", "transaction")
        if word == "rollback" and p.word("to"):   # ROLLBACK [WORK] TO [SAVEPOINT] name
            p.word("savepoint")
            name = p.name()
            p.end()
            return ast.RollbackToStmt(name)
        p.end()
        return ast.RollbackStmt()
    if word in ("savepoint", "release"):   # SAVEPOINT name, RELEASE [SAVEPOINT] name
        if word == "release":
            p.word("savepoint")
        name = p.name()
        p.end()
        return ast.SavepointStmt(name) if word == "savepoint" else ast.ReleaseStmt(name)
    if word == "checkpoint":
        p.end()
        return ast.CheckpointStmt()
    if word == "set":
        return _set(p)
    if word == "show":
        if p.word("all"):
            p.end()
            return ast.ShowStmt("all")
        if p.word("transaction"):
            p.expect_word("isolation")
            p.expect_word("level")
            p.end()
            return ast.ShowStmt("transaction_isolation")
        name = p.name()
        p.end()
        return ast.ShowStmt(name)
    if word == "reset":
        if p.word("all"):
            p.end()
            return ast.ResetStmt("all")
        name = p.name()
        p.end()
        return ast.ResetStmt(name)
    if word == "vacuum":
        return _vacuum(p)
    if word in ("analyze", "analyse"):
        verbose = p.word("verbose")
        tables = _table_list(p)
        return ast.AnalyzeStmt(tables, verbose)
    if word == "explain":
        return _explain(p, parse_any)
    if word == "copy":
        return _copy(p)
    if word == "truncate":
        p.word("table")
        names = [p.name()]
        while p.op(","):
            names.append(p.name())
        if p.word("restart", "continue"):
            p.expect_word("identity")
        cascade = p.word("cascade")
        if not cascade:
            p.word("restrict")
        p.end()
        return ast.TruncateStmt(names, cascade=cascade)
    if word == "lock":
        return _lock(p)
    if word == "alter":
        return _alter(p)
    if word == "reindex":
        if p.op("("):
            raise NotSupportedError("REINDEX options are not supported")
        what = p.expect_word("index", "table", "schema", "database", "system")
        if what not in ("index", "table"):
            raise NotSupportedError(f"REINDEX {what.upper()} is not supported")
        if p.word("concurrently"):
            raise NotSupportedError("REINDEX CONCURRENTLY is not supported")
        name = p.name()
        p.end()
        return ast.ReindexStmt(what, name)
    raise p.error()


def _alter(p: _P) -> ast.Statement:
    kind = p.expect_word("table", "index")
    st = ast.AlterTableStmt("", [], kind=kind, tag=f"ALTER {kind.upper()}")
    if p.word("if"):
        p.expect_word("exists")
        st.if_exists = True
    p.word("only")
    st.table = p.name()
    if p.word("rename"):
        if p.word("to"):
            st.actions.append(ast.AlterAction("rename", new_name=p.name()))
        elif kind == "table":
            p.word("column")
            old = p.name()
            p.expect_word("to")
            st.actions.append(ast.AlterAction("rename_column", old, p.name()))
        else:
            raise p.error(None, "expected TO")
        p.end()
        return st
    if kind == "index":
        raise NotSupportedError("ALTER INDEX supports RENAME TO only")
    while True:
        st.actions.append(_alter_action(p))
        if not p.op(","):
            break
    p.end()
    return st


def _name_list(p: _P) -> list:
    p.expect_op("(")
    names = [p.name()]
    while p.op(","):
        names.append(p.name())
    p.expect_op(")")
    return names


def _action_text(p: _P) -> str:
    """The text of the tokens up to the next comma outside parentheses (a column
    definition, read again by ``translate.parse_column_text``)."""
    start = p.peek()
    if start is None:
        raise p.error()
    depth = 0
    while not p.at_end():
        t = p.peek()
        if t.kind == "op" and t.value == "," and depth == 0:
            break
        if t.kind == "op" and t.value == "(":
            depth += 1
        elif t.kind == "op" and t.value == ")":
            depth -= 1
        p.next()
    end = p.toks[p.i].pos if not p.at_end() else p.base + len(p.text)
    return p.full[start.pos:end].strip()


def _alter_action(p: _P) -> ast.AlterAction:
    if p.word("add"):
        if p.word("constraint"):
            cname = p.name()
            return _constraint(p, cname)
        t = p.peek()
        if t is not None and t.kind == "ident" and t.value in ("primary", "unique", "check"):
            return _constraint(p, None)
        p.word("column")
        missing_ok = False
        if p.word("if"):
            p.expect_word("not")
            p.expect_word("exists")
            missing_ok = True
        from minidb.sql.parser.translate import parse_column_text
        text = _action_text(p)
        try:
            spec = parse_column_text(text)
        except NotSupportedError:
            raise
        except Exception:  # noqa: BLE001 - sqlglot's errors: a syntax error at the column
            raise p.error(None, f"could not read the column definition {text!r}") from None
        return ast.AlterAction("add_column", spec.name, column=spec, missing_ok=missing_ok)
    if p.word("drop"):
        if p.word("constraint"):
            missing_ok = False
            if p.word("if"):
                p.expect_word("exists")
                missing_ok = True
            act = ast.AlterAction("drop_constraint", p.name(), missing_ok=missing_ok)
            act.cascade = p.word("cascade")
        else:
            p.word("column")
            missing_ok = False
            if p.word("if"):
                p.expect_word("exists")
                missing_ok = True
            act = ast.AlterAction("drop_column", p.name(), missing_ok=missing_ok)
        p.word("restrict", "cascade")
        return act
    if p.word("alter"):
        p.word("column")
        col = p.name()
        w = p.expect_word("set", "drop", "type")
        if w == "type":
            raise NotSupportedError("ALTER COLUMN ... TYPE is not supported")
        t = p.peek()
        if t is not None and t.kind == "ident" and t.value == "default":
            raise NotSupportedError(f"ALTER COLUMN ... {w.upper()} DEFAULT is not supported")
        p.expect_word("not")
        p.expect_word("null")
        return ast.AlterAction("set_not_null" if w == "set" else "drop_not_null", col)
    t = p.peek()
    if t is not None and t.kind == "ident" and t.value in (
            "owner", "set", "enable", "disable", "cluster", "inherit", "no", "replica",
            "attach", "detach", "validate", "force", "reset", "of", "not"):
        raise NotSupportedError(f"ALTER TABLE ... {t.value.upper()} is not supported")
    raise p.error()


def _constraint(p: _P, name: str | None) -> ast.AlterAction:
    w = p.expect_word("primary", "unique", "check", "foreign", "exclude")
    if w == "check":
        from minidb.sql.parser.translate import parse_check_text
        text = _action_text(p).strip()
        if not (text.startswith("(") and text.endswith(")")):
            raise p.error(None, "CHECK needs a parenthesized condition")
        try:
            expr = parse_check_text(text[1:-1])
        except NotSupportedError:
            raise
        except Exception:  # noqa: BLE001 - sqlglot's errors: a syntax error in the condition
            raise p.error(None, f"could not read the condition {text!r}") from None
        return ast.AlterAction("add_check", name, expr=expr)
    if w == "foreign":
        return _foreign_key(p, name)
    if w == "exclude":
        raise NotSupportedError(f"{w.upper()} constraints are not supported")
    if w == "primary":
        p.expect_word("key")
    cols = _name_list(p)
    return ast.AlterAction("add_constraint", name, columns=cols, primary=w == "primary")


def _foreign_key(p: _P, name: str | None) -> ast.AlterAction:
    """FOREIGN KEY (cols) REFERENCES t [(cols)] [ON DELETE a] [ON UPDATE a] (after ADD
    [CONSTRAINT n])."""
    from minidb.sql.parser.fkeyspec import FKeySpec, parse_actions
    p.expect_word("key")
    cols = _name_list(p)
    p.expect_word("references")
    ref = p.name()
    t = p.peek()
    ref_cols = _name_list(p) if t is not None and t.kind == "op" and t.value == "(" else None
    options = []
    while p.word("on"):
        what = p.expect_word("delete", "update")
        w = p.expect_word("no", "restrict", "cascade", "set")
        if w == "no":
            p.expect_word("action")
            act = "NO ACTION"
        elif w == "set":
            act = "SET " + p.expect_word("null", "default").upper()
        else:
            act = w.upper()
        options.append(f"ON {what} {act}")
    spec = parse_actions(FKeySpec(name, cols, ref, ref_cols), options)
    return ast.AlterAction("add_constraint", name, columns=cols, fkey=spec)


def _lock(p: _P) -> ast.Statement:
    p.word("table")
    p.word("only")
    names = [p.name()]
    while p.op(","):
        names.append(p.name())
    mode = "ACCESS EXCLUSIVE"
    if p.word("in"):
        if p.word("access"):
            mode = "ACCESS " + p.expect_word("share", "exclusive").upper()
        elif p.word("row"):
            mode = "ROW " + p.expect_word("share", "exclusive").upper()
        elif p.word("share"):
            mode = "SHARE"
            if p.word("update"):
                p.expect_word("exclusive")
                mode = "SHARE UPDATE EXCLUSIVE"
            elif p.word("row"):
                p.expect_word("exclusive")
                mode = "SHARE ROW EXCLUSIVE"
        else:
            p.expect_word("exclusive")
            mode = "EXCLUSIVE"
        p.expect_word("mode")
    nowait = p.word("nowait")
    p.end()
    return ast.LockStmt(names, mode, nowait)


def _isolation_opt(p: _P) -> str | None:
    iso = None
    while not p.at_end():
        if p.word("isolation"):
            p.expect_word("level")
            iso = _level(p)
        elif p.word("read"):
            mode = p.expect_word("write", "only")
            if mode == "only":
                raise NotSupportedError("READ ONLY transactions are not supported")
        elif p.word("not", "deferrable"):
            raise NotSupportedError("DEFERRABLE transactions are not supported")
        else:
            raise p.error()
        p.op(",")
    return iso


def _level(p: _P) -> str:
    w = p.expect_word("read", "repeatable", "serializable")
    if w == "read":
        w2 = p.expect_word("committed", "uncommitted")
        return "read " + w2
    if w == "repeatable":
        p.expect_word("read")
        return "repeatable read"
    return "serializable"


def _set(p: _P) -> ast.Statement:
    if p.word("transaction"):
        p.expect_word("isolation")
        p.expect_word("level")
        iso = _level(p)
        p.end()
        return ast.SetTransactionStmt(iso)
    if p.word("local"):
        raise NotSupportedError("SET LOCAL is not supported")
    p.word("session")
    if p.peek() is not None and p.peek().value == "characteristics":
        raise NotSupportedError("SET SESSION CHARACTERISTICS is not supported")
    name = p.name()
    if not (p.word("to") or p.op("=")):
        raise p.error(None, 'expected TO or "="')
    if p.word("default"):
        p.end()
        return ast.SetStmt(name, None)
    parts = []
    while True:
        neg = p.op("-")
        t = p.next()
        if t.kind not in ("ident", "qident", "string", "number"):
            raise p.error(t, "expected a value")
        parts.append(("-" if neg else "") + t.value)
        if not p.op(","):
            break
    p.end()
    return ast.SetStmt(name, ", ".join(parts))


def _table_list(p: _P) -> list:
    tables = []
    if p.at_end():
        return tables
    tables.append(p.name())
    while p.op(","):
        tables.append(p.name())
    p.end()
    return tables


def _vacuum(p: _P) -> ast.Statement:
    st = ast.VacuumStmt([])
    if p.op("("):
        while True:
            opt = p.next()
            val = _opt_bool(p)
            o = opt.value
            if o == "verbose":
                st.verbose = val
            elif o == "analyze":
                st.analyze = val
            elif o in ("full", "freeze"):
                if val:
                    raise NotSupportedError(f"VACUUM {o.upper()} is not supported")
            elif o in ("index_cleanup", "truncate", "skip_locked", "process_toast",
                       "disable_page_skipping", "parallel"):
                raise NotSupportedError(f"VACUUM option {o.upper()} is not supported")
            else:
                raise p.error(opt, "unrecognized VACUUM option")
            if not p.op(","):
                break
        p.expect_op(")")
    while True:
        if p.word("full", "freeze"):
            raise NotSupportedError(f"VACUUM {p.toks[p.i - 1].value.upper()} is not supported")
        if p.word("verbose"):
            st.verbose = True
        elif p.word("analyze", "analyse"):
            st.analyze = True
        else:
            break
    st.tables = _table_list(p)
    return st


def _opt_bool(p: _P) -> bool:
    t = p.peek()
    if t is None or (t.kind == "op" and t.value in (",", ")")):
        return True
    p.i += 1
    v = t.value.lower()
    if v in ("true", "on", "1", "yes"):
        return True
    if v in ("false", "off", "0", "no"):
        return False
    raise p.error(t, "expected a boolean")


def _explain(p: _P, parse_any) -> ast.Statement:
    opts = {}
    if p.op("("):
        while True:
            opt = p.next()
            o = opt.value
            if o == "format":
                f = p.next().value.lower()
                if f not in ("text", "json"):
                    raise NotSupportedError(f"EXPLAIN (FORMAT {f.upper()}) is not supported")
                opts["format"] = f
            elif o in ("analyze", "buffers", "wal", "costs", "verbose", "timing", "summary"):
                opts[o] = _opt_bool(p)
            elif o in ("settings", "generic_plan", "memory", "serialize"):
                raise NotSupportedError(f"EXPLAIN option {o.upper()} is not supported")
            else:
                raise p.error(opt, "unrecognized EXPLAIN option")
            if not p.op(","):
                break
        p.expect_op(")")
    else:
        if p.word("analyze", "analyse"):
            opts["analyze"] = True
        if p.word("verbose"):
            opts["verbose"] = True
    text, pos = p.rest_text()
    inner = parse_any(text, pos)
    if not isinstance(inner, (ast.SelectStmt, ast.SetOpStmt, ast.InsertStmt, ast.UpdateStmt,
                              ast.DeleteStmt)):
        raise NotSupportedError(f"EXPLAIN of {inner.tag} is not supported")
    if opts.get("buffers") and not opts.get("analyze"):
        pass  # PostgreSQL 16+ allows it (planning buffers); minidb prints nothing extra
    if opts.get("wal") and not opts.get("analyze"):
        raise NotSupportedError("EXPLAIN option WAL requires ANALYZE")
    return ast.ExplainStmt(inner, analyze=opts.get("analyze", False),
                           buffers=opts.get("buffers", False), wal=opts.get("wal", False),
                           costs=opts.get("costs", True),
                           verbose=opts.get("verbose", False), timing=opts.get("timing", True),
                           summary=opts.get("summary"), nparams=inner.nparams,
                           format=opts.get("format", "text"))


def _copy(p: _P) -> ast.Statement:
    if p.op("("):
        raise NotSupportedError("COPY (query) is not supported")
    table = p.name()
    cols = None
    if p.op("("):
        cols = [p.name()]
        while p.op(","):
            cols.append(p.name())
        p.expect_op(")")
    direction = p.expect_word("from", "to")
    t = p.next()
    if t.kind == "ident" and t.value in ("stdin", "stdout"):
        if t.value != ("stdin" if direction == "from" else "stdout"):
            raise p.error(t, f"expected {'STDIN' if direction == 'from' else 'STDOUT'}")
        path = None  # the client's stream (minidb.sql.copy)
    elif t.kind == "ident" and t.value == "program":
        raise NotSupportedError("COPY ... PROGRAM is not supported")
    elif t.kind != "string":
        raise p.error(t, "expected a file name in quotes")
    else:
        path = t.value
    st = ast.CopyStmt(table, cols, direction, path)
    p.word("with")
    if p.op("("):
        while True:
            opt = p.next().value.lower()
            if opt == "format":
                st.format = p.next().value.lower()
            elif opt == "header":
                st.header = _opt_bool(p)
            elif opt == "delimiter":
                st.delimiter = _string(p)
            elif opt == "null":
                st.null = _string(p)
            elif opt == "freeze":
                st.freeze = _opt_bool(p)
            else:
                raise NotSupportedError(f"COPY option {opt.upper()} is not supported")
            if not p.op(","):
                break
        p.expect_op(")")
    else:
        while not p.at_end():
            if p.word("csv"):
                st.format = "csv"
            elif p.word("binary"):
                st.format = "binary"
            elif p.word("header"):
                st.header = True
            elif p.word("delimiter"):
                p.word("as")
                st.delimiter = _string(p)
            elif p.word("null"):
                p.word("as")
                st.null = _string(p)
            else:
                raise p.error()
    p.end()
    if st.format not in ("text", "csv"):
        raise NotSupportedError(f"COPY format {st.format} is not supported")
    if st.delimiter is not None and len(st.delimiter) != 1:
        raise NotSupportedError("COPY delimiter must be a single one-byte character")
    return st


def _string(p: _P) -> str:
    t = p.next()
    if t.kind != "string":
        raise p.error(t, "expected a string")
    return t.value
