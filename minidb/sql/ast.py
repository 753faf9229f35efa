"""minidb's logical tree: the statements and expressions the SQL layer understands.

The parser (``parser.translate`` for what sqlglot parses, ``parser.utility`` for the
utility commands sqlglot leaves as text) produces exactly these classes and nothing else,
so every construct minidb supports is listed here, and everything else was rejected by
the parser with an error naming it.  Names are not resolved yet: that is the binder's job
(``minidb.sql.binder``), which turns expressions into ``minidb.exec.expr`` nodes.

Expressions::

    Name(parts)                      a, t.a
    Lit(value, kind)                 kind: int float str bool null
    Placeholder(index)               ?  (0-based, in text order)
    BinOp(op, left, right)           + - * / % || = <> < <= > >= and or
    UnOp(op, arg)                    - not
    IsNullE(arg, negated)            x IS [NOT] NULL
    IsBoolE(arg, value, negated)     x IS [NOT] TRUE/FALSE
    BetweenE(arg, low, high, negated)
    InE(arg, items, negated)
    LikeE(arg, pattern, negated, case_insensitive, escape)
    RegexE(arg, pattern, negated, case_insensitive)     x ~ p, x !~ p, x ~* p
    DistinctFromE(left, right, negated)                 x IS [NOT] DISTINCT FROM y
    CastE(arg, type_name)            CAST(x AS t), x::t
    FuncE(name, args, distinct, star, filter, order)   count(*), sum(x) FILTER (WHERE ..),
                                     string_agg(x, ',' ORDER BY y), lower(x) ...
    WindowE(func, partition, order, frame)  f(...) OVER (PARTITION BY .. ORDER BY .. frame)
    FrameE(kind, start, start_off, end, end_off, exclude)   ROWS / RANGE / GROUPS BETWEEN ..
    GroupingSetE(kind, items)        GROUPING SETS (..) / ROLLUP (..) / CUBE (..) in GROUP BY
    SubqueryE(kind, query, arg, negated)   (SELECT ..), EXISTS (..), x [NOT] IN (SELECT ..)
    CaseE(operand, whens, default)
    StarE(table)                     * or t.*  (select list only)
    DefaultE()                       DEFAULT   (INSERT VALUES, UPDATE SET)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


# ---------------------------------------------------------------------------------------------
# expressions
class Node:
    __slots__ = ()


# serial pseudo-types: the integer type each stands for (the column gets an owned sequence
# and a DEFAULT nextval(...): minidb.sql.sequences)
SERIAL_TYPES = {"serial": "integer", "serial4": "integer", "bigserial": "bigint",
                "serial8": "bigint", "smallserial": "smallint", "serial2": "smallint"}


@dataclass(frozen=True)
class Name(Node):
    parts: tuple          # ("a",) or ("t", "a")

    def __str__(self):
        return ".".join(self.parts)


@dataclass(frozen=True)
class Lit(Node):
    value: Any
    kind: str             # int float str bool null


@dataclass(frozen=True)
class Placeholder(Node):
    index: int


@dataclass(frozen=True)
class BinOp(Node):
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class UnOp(Node):
    op: str               # "-" or "not"
    arg: Node


@dataclass(frozen=True)
class IsNullE(Node):
    arg: Node
    negated: bool = False


@dataclass(frozen=True)
class IsBoolE(Node):
    arg: Node
    value: bool
    negated: bool = False


@dataclass(frozen=True)
class BetweenE(Node):
    arg: Node
    low: Node
    high: Node
    negated: bool = False


@dataclass(frozen=True)
class InE(Node):
    arg: Node
    items: tuple
    negated: bool = False


@dataclass(frozen=True)
class LikeE(Node):
    arg: Node
    pattern: Node
    negated: bool = False
    case_insensitive: bool = False
    escape: Node | None = None


@dataclass(frozen=True)
class RegexE(Node):
    arg: Node
    pattern: Node
    negated: bool = False
    case_insensitive: bool = False


@dataclass(frozen=True)
class DistinctFromE(Node):
    left: Node
    right: Node
    negated: bool = False      # True: IS NOT DISTINCT FROM


@dataclass(frozen=True)
class CastE(Node):
    arg: Node
    type_name: str


@dataclass(frozen=True)
class FuncE(Node):
    name: str
    args: tuple
    distinct: bool = False
    star: bool = False
    filter: Node | None = None        # aggregate FILTER (WHERE ...)
    order: tuple = ()                 # aggregate ORDER BY (OrderItem, ...)


@dataclass(frozen=True)
class FrameE(Node):
    """A window frame clause.  ``start`` / ``end``: unbounded_preceding, preceding,
    current, following, unbounded_following (``*_off`` is the offset expression of
    preceding / following); ``exclude``: no_others, current, group, ties."""
    kind: str                         # rows | range | groups
    start: str
    start_off: Node | None = None
    end: str = "current"
    end_off: Node | None = None
    exclude: str = "no_others"


@dataclass(frozen=True)
class GroupingSetE(Node):
    """A GROUP BY item ``kind`` (sets | rollup | cube) ``(items)``: each item a tuple of
    expressions (one expression, or a parenthesized list; ``()`` the empty set) or, inside
    GROUPING SETS, a nested GroupingSetE."""
    kind: str
    items: tuple


@dataclass(frozen=True)
class WindowE(Node):
    func: FuncE
    partition: tuple = ()
    order: tuple = ()                 # (OrderItem, ...)
    frame: FrameE | None = None       # None: the default frame


@dataclass(frozen=True, eq=False)
class SubqueryE(Node):
    kind: str                         # scalar | exists | in | array (ARRAY(subquery))
    query: Any                        # SelectStmt or SetOpStmt
    arg: Node | None = None           # the left side of IN
    negated: bool = False


@dataclass(frozen=True)
class CaseE(Node):
    operand: Node | None
    whens: tuple          # ((when, then), ...)
    default: Node | None


@dataclass(frozen=True)
class StarE(Node):
    table: str | None = None


@dataclass(frozen=True)
class DefaultE(Node):
    pass


# ---------------------------------------------------------------------------------------------
# FROM items
@dataclass
class TableRef:
    name: str
    alias: str | None = None
    col_aliases: list | None = None


@dataclass
class SubqueryRef:
    query: Any            # SelectStmt or SetOpStmt
    alias: str | None
    col_aliases: list | None = None
    lateral: bool = False  # LATERAL: may read the FROM items before it


@dataclass
class FunctionRef:
    func: Any             # FuncE (generate_series)
    alias: str | None
    col_aliases: list | None = None


@dataclass
class JoinRef:
    left: Any             # TableRef, SubqueryRef, FunctionRef or JoinRef
    right: Any
    on: Node | None       # None: CROSS JOIN (or a comma), or USING / NATURAL
    kind: str = "inner"   # inner left right full
    using: list | None = None
    natural: bool = False


@dataclass
class CTE:
    name: str
    columns: list | None
    query: Any            # SelectStmt or SetOpStmt
    recursive: bool = False


# ---------------------------------------------------------------------------------------------
# statements
class Statement:
    nparams: int = 0
    tag: str = ""


@dataclass
class OrderItem:
    expr: Node
    desc: bool = False
    nulls_first: bool | None = None   # None: PostgreSQL's default (LAST for ASC)


@dataclass
class SelectStmt(Statement):
    targets: list                      # [(expr, alias | None)]
    from_: list = field(default_factory=list)   # TableRef / JoinRef, comma-separated
    where: Node | None = None
    group_by: list = field(default_factory=list)
    having: Node | None = None
    order_by: list = field(default_factory=list)
    limit: Node | None = None
    offset: Node | None = None
    distinct: bool = False
    distinct_on: list = field(default_factory=list)
    for_update: bool = False           # any row-locking clause
    lock_mode: str = "update"          # update / no key update / share / key share
    lock_wait: str = "block"           # block / nowait / skip (SKIP LOCKED)
    lock_of: list = field(default_factory=list)  # FOR ... OF names
    with_: list = field(default_factory=list)    # [CTE]
    nparams: int = 0
    tag: str = "SELECT"


@dataclass
class SetOpStmt(Statement):
    op: str                            # union intersect except
    all: bool
    left: Any                          # SelectStmt or SetOpStmt
    right: Any
    order_by: list = field(default_factory=list)
    limit: Node | None = None
    offset: Node | None = None
    with_: list = field(default_factory=list)
    nparams: int = 0
    tag: str = "SELECT"


@dataclass
class InsertStmt(Statement):
    table: str
    columns: list | None               # None: all columns in order
    values: list | None = None         # [[expr, ...], ...]
    select: Any = None                 # SelectStmt or SetOpStmt
    nparams: int = 0
    tag: str = "INSERT"
    overriding: str | None = None      # OVERRIDING "system" / "user" VALUE
    returning: list | None = None      # RETURNING [(expr, alias)]
    on_conflict: Any = None            # OnConflictClause


@dataclass
class OnConflictClause:
    """INSERT's ON CONFLICT [(cols) | ON CONSTRAINT name] DO NOTHING / DO UPDATE."""
    action: str                        # "nothing" / "update"
    columns: list | None = None        # the conflict target's columns (None: no target)
    exprs: list = field(default_factory=list)         # the target's expressions
    index_where: Node | None = None    # ON CONFLICT (...) WHERE: a partial index's predicate
    constraint: str | None = None      # ON CONSTRAINT name
    assignments: list = field(default_factory=list)   # DO UPDATE SET [(column, expr)]
    where: Node | None = None          # DO UPDATE ... WHERE


@dataclass
class UpdateStmt(Statement):
    table: str
    alias: str | None
    assignments: list                  # [(column, expr)]
    where: Node | None = None
    nparams: int = 0
    tag: str = "UPDATE"
    returning: list | None = None      # RETURNING [(expr, alias)]
    from_: list = field(default_factory=list)    # UPDATE ... FROM items (as SELECT's)


@dataclass
class DeleteStmt(Statement):
    table: str
    alias: str | None
    where: Node | None = None
    nparams: int = 0
    tag: str = "DELETE"
    returning: list | None = None      # RETURNING [(expr, alias)]
    using: list = field(default_factory=list)    # DELETE ... USING items (as SELECT's FROM)


@dataclass
class ColumnSpec:
    name: str
    type_name: str
    not_null: bool = False
    default: str | None = None        # SQL text of the default expression
    primary: bool = False
    unique: bool = False
    identity: str = ""                # "serial", "a" (ALWAYS), "d" (BY DEFAULT): sequences.py
    seq_options: dict | None = None   # the identity's sequence options
    checks: list = field(default_factory=list)   # [(name | None, SQL text)] CHECK (...)
    references: object = None         # REFERENCES ...: a minidb.sql.fkeys.FKeySpec


@dataclass
class CreateTableStmt(Statement):
    name: str
    columns: list
    primary_key: list | None = None
    uniques: list = field(default_factory=list)
    if_not_exists: bool = False
    tag: str = "CREATE TABLE"
    checks: list = field(default_factory=list)   # table CHECKs: [(name | None, SQL text)]
    temp: bool = False                # CREATE TEMP[ORARY] TABLE (minidb.sql.temp)
    on_commit: str | None = None      # TEMP: "drop" / "delete" / "preserve"
    foreign_keys: list = field(default_factory=list)   # [minidb.sql.fkeys.FKeySpec]


@dataclass
class CreateTableAsStmt(Statement):
    """CREATE TABLE t [(cols)] AS query [WITH [NO] DATA], SELECT ... INTO t
    (``minidb.sql.ctas``)."""
    name: str
    query: Any                        # SelectStmt or SetOpStmt
    columns: list | None = None       # column names given after the table name
    with_data: bool = True
    if_not_exists: bool = False
    temp: bool = False
    into: bool = False                # written as SELECT ... INTO
    tag: str = "SELECT"
    on_commit: str | None = None      # TEMP: "drop" / "delete" / "preserve"


@dataclass
class DropTableStmt(Statement):
    names: list
    if_exists: bool = False
    tag: str = "DROP TABLE"
    cascade: bool = False             # drop the views that read it too


@dataclass
class CreateViewStmt(Statement):
    """CREATE [OR REPLACE] VIEW v [(cols)] AS query (``minidb.sql.views``)."""
    name: str
    query: Any                        # SelectStmt or SetOpStmt
    text: str                         # the query's SQL text, as stored and shown
    columns: list | None = None
    replace: bool = False
    tag: str = "CREATE VIEW"


@dataclass
class DropViewStmt(Statement):
    names: list
    if_exists: bool = False
    cascade: bool = False
    tag: str = "DROP VIEW"


@dataclass
class CreateIndexStmt(Statement):
    name: str | None
    table: str
    columns: list
    unique: bool = False
    if_not_exists: bool = False
    tag: str = "CREATE INDEX"
    options: list = field(default_factory=list)   # pg_index.indoption bits per column
    where: str | None = None           # a partial index's predicate, as SQL text
    exprs: list = field(default_factory=list)     # per column: expression SQL or None


@dataclass
class DropIndexStmt(Statement):
    names: list
    if_exists: bool = False
    tag: str = "DROP INDEX"


@dataclass
class AlterAction:
    """One action of ALTER TABLE (``kind``: add_column, drop_column, rename_column, rename,
    add_constraint, add_check, drop_constraint, set_not_null, drop_not_null)."""
    kind: str
    name: str | None = None           # the column or constraint acted on
    new_name: str | None = None       # RENAME targets
    column: ColumnSpec | None = None  # ADD COLUMN
    columns: list | None = None       # ADD CONSTRAINT's key columns
    primary: bool = False             # ADD CONSTRAINT: PRIMARY KEY (else UNIQUE)
    missing_ok: bool = False          # IF EXISTS / IF NOT EXISTS
    expr: str | None = None           # ADD CONSTRAINT ... CHECK (expr): its SQL text
    fkey: object = None               # ADD CONSTRAINT ... FOREIGN KEY: an FKeySpec
    cascade: bool = False             # DROP CONSTRAINT ... CASCADE


@dataclass
class AlterTableStmt(Statement):
    table: str
    actions: list                     # [AlterAction]
    if_exists: bool = False
    kind: str = "table"               # ALTER TABLE / ALTER INDEX
    tag: str = "ALTER TABLE"


@dataclass
class ReindexStmt(Statement):
    kind: str                         # "index" or "table"
    name: str
    tag: str = "REINDEX"


@dataclass
class TruncateStmt(Statement):
    names: list
    tag: str = "TRUNCATE TABLE"
    cascade: bool = False


@dataclass
class LockStmt(Statement):
    names: list
    mode: str = "ACCESS EXCLUSIVE"    # SQL name, as in ``minidb.txn.lmgr.SQL_MODES``
    nowait: bool = False
    tag: str = "LOCK TABLE"


@dataclass
class BeginStmt(Statement):
    isolation: str | None = None
    tag: str = "BEGIN"


@dataclass
class CommitStmt(Statement):
    tag: str = "COMMIT"


@dataclass
class RollbackStmt(Statement):
    tag: str = "ROLLBACK"


# savepoints (minidb.sql.savepoint, minidb.txn.subxact)
@dataclass
class SavepointStmt(Statement):
    name: str = ""
    tag: str = "SAVEPOINT"


@dataclass
class ReleaseStmt(Statement):
    name: str = ""
    tag: str = "RELEASE"


@dataclass
class RollbackToStmt(Statement):
    name: str = ""
    tag: str = "ROLLBACK"


@dataclass
class SetTransactionStmt(Statement):
    isolation: str
    tag: str = "SET"


@dataclass
class VacuumStmt(Statement):
    tables: list                       # [] = every table
    analyze: bool = False
    verbose: bool = False
    tag: str = "VACUUM"


@dataclass
class AnalyzeStmt(Statement):
    tables: list
    verbose: bool = False
    tag: str = "ANALYZE"


@dataclass
class ExplainStmt(Statement):
    stmt: Statement
    analyze: bool = False
    buffers: bool = False
    wal: bool = False
    costs: bool = True
    verbose: bool = False
    timing: bool = True
    summary: bool | None = None
    nparams: int = 0
    tag: str = "EXPLAIN"
    format: str = "text"               # "text" or "json"


@dataclass
class SetStmt(Statement):
    name: str
    value: Any                         # None: DEFAULT (= RESET)
    tag: str = "SET"


@dataclass
class ShowStmt(Statement):
    name: str                          # "all" for SHOW ALL
    tag: str = "SHOW"


@dataclass
class ResetStmt(Statement):
    name: str                          # "all" for RESET ALL
    tag: str = "RESET"


@dataclass
class CopyStmt(Statement):
    table: str
    columns: list | None
    direction: str                     # "from" | "to"
    path: str | None                   # None: STDIN / STDOUT (the client's stream)
    format: str = "text"               # text | csv
    header: bool = False
    delimiter: str | None = None
    null: str | None = None
    freeze: bool = False               # FREEZE: only for a table new or truncated in this xact
    tag: str = "COPY"


@dataclass
class CheckpointStmt(Statement):
    tag: str = "CHECKPOINT"
