"""The ``minidb`` command (click): the REPL, ``minidb demo``, and room for ``minidb bench``.

::

    minidb [DATADIR]              interactive REPL on DATADIR (default ./minidb-data)
    minidb [DATADIR] -c "SQL"     run statements (or one meta command), print, exit
    minidb [DATADIR] < file.sql   run a script (stdin not a terminal), as psql -f
    minidb [DATADIR] -f file.sql  the same from a file
    minidb demo                   load pgbench_accounts and scan it through the buffer pool
    minidb experiment NAME ...    one of the four seed experiments (minidb/experiments)
    minidb repl [DATADIR] ...     the REPL by its name (for a data directory named like a
                                  subcommand)

The group takes no positional argument of its own: a first argument that is not a
subcommand's name (a data directory, or an option such as ``-c``) is handed to the ``repl``
subcommand (``_Main.resolve_command``), and so is an empty command line.  Subcommands added
later (``bench``) need nothing more than ``@main.command()``.

Exit codes of the REPL: 0 success; 1 a statement or meta command failed (in ``-c`` and script
modes the run stops there unless ``--on-error continue``); 2 the data directory could not be
opened.  ``minidb demo`` loads a pgbench_accounts-shaped table the first time, then scans it
through the shared buffer pool and prints what the buffer manager did, so that a fresh install
shows the engine working end to end.
"""

from __future__ import annotations

import os
import sys
import time

import click
import numpy as np

DEFAULT_DATADIR = "minidb-data"

ACCOUNTS = [("aid", "integer"), ("bid", "integer"), ("abalance", "integer"),
            ("filler", "character(84)")]


class _Main(click.Group):
    """A group whose unknown first argument (a data directory, or a REPL option) goes to
    the ``repl`` subcommand."""

    def resolve_command(self, ctx, args):
        if args and args[0] not in self.commands:
            return "repl", self.commands["repl"], args
        return super().resolve_command(ctx, args)

    def format_usage(self, ctx, formatter):
        formatter.write("Usage: minidb [DATADIR] [-c SQL | -f FILE] [OPTIONS]\n"
                        "       minidb COMMAND [ARGS]...\n")


@click.group(cls=_Main, invoke_without_command=True,
             context_settings={"ignore_unknown_options": True,
                               "help_option_names": ["-h", "--help"]})
@click.version_option(package_name="minidb")
@click.pass_context
def main(ctx: click.Context) -> None:
    """minidb: a relational storage engine built the way PostgreSQL is built.

    Without a command, opens the SQL REPL on DATADIR (default ./minidb-data); see
    "minidb repl --help" for its options (-c, -f, -a, --on-error, --set).
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(repl)


@main.command()
@click.argument("datadir", required=False, default=DEFAULT_DATADIR)
@click.option("-c", "--command", "commands", multiple=True, metavar="SQL",
              help="run SQL (statements, or one meta command such as \\dt) and exit; "
                   "may be repeated")
@click.option("-f", "--file", "file", type=click.File("r"), metavar="FILE",
              help="run the statements in FILE and exit ('-' for stdin)")
@click.option("-a", "--echo-all", is_flag=True, help="echo each input line (script mode)")
@click.option("--on-error", type=click.Choice(["stop", "continue"]), default="stop",
              show_default=True, help="in -c and script modes: stop at the first error "
                                       "(exit 1), or run on and exit 1 at the end")
@click.option("--set", "settings", multiple=True, metavar="NAME=VALUE",
              help="a setting for the connection (instance settings apply when the "
                   "directory is opened); may be repeated")
def repl(datadir: str, commands: tuple[str, ...], file, echo_all: bool, on_error: str,
         settings: tuple[str, ...]) -> None:
    """The SQL REPL on DATADIR (default ./minidb-data, created if new).

    Interactive when standard input is a terminal; otherwise the input runs as a script.
    """
    import minidb
    from minidb.errors import Error
    from minidb.repl import HISTORY_FILE, Repl

    kw = {}
    for item in settings:
        name, eq, value = item.partition("=")
        if not eq:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--set")
        kw[name.strip()] = value.strip()
    try:
        conn = minidb.connect(datadir, **kw)
    except Error as e:
        click.echo(f"minidb: error: {e}", err=True)
        sys.exit(2)
    try:
        conn.autocommit = True
        r = Repl(conn, echo=echo_all)
        stop = on_error == "stop"
        if commands:
            r.stop_on_error = stop
            for text in commands:
                if not r.run_command(text) and stop:
                    break
            ok = r.errors == 0
        elif file is not None:
            ok = r.run_script(file, stop_on_error=stop)
        elif not sys.stdin.isatty():
            ok = r.run_script(sys.stdin, stop_on_error=stop)
        else:
            click.echo(f"minidb {_version()} on {conn.datadir}\n"
                       'Type "\\?" for help, "\\q" to quit.\n')
            r.interactive(os.path.join(conn.datadir, HISTORY_FILE))
            ok = True
        sys.stdout.flush()
    finally:
        conn.close()
    sys.exit(0 if ok else 1)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("minidb")
    except PackageNotFoundError:
        return "(source tree)"


@main.command()
@click.option("-D", "--datadir", default=DEFAULT_DATADIR, show_default=True,
              help="data directory (created if new)")
@click.option("-s", "--scale", default=5, show_default=True,
              help="pgbench scale: 100,000 accounts rows per unit")
@click.option("--shared-buffers", default=16384, show_default=True,
              help="buffers of 8 kB in the shared pool")
def demo(datadir: str, scale: int, shared_buffers: int) -> None:
    """Load pgbench_accounts (first run) and scan it through the buffer pool."""
    from minidb.catalog import ColumnDef
    from minidb.errors import Error
    from minidb.heap.heapam import HeapRel, HeapScan, heap_bulk_insert
    from minidb.heap.layout import Column, RowLayout
    from minidb.instance import Instance

    try:
        inst = Instance(datadir, shared_buffers=shared_buffers)
    except Error as e:
        raise click.ClickException(str(e)) from None
    with inst:
        layout = RowLayout([Column(n, t) for n, t in ACCOUNTS])
        nrows = scale * 100_000
        if "pgbench_accounts" not in inst.catalog.tables:
            t = inst.catalog.create_table("pgbench_accounts",
                                          [ColumnDef(n, ty) for n, ty in ACCOUNTS])
            rel = HeapRel(t.name, t.relfilenode, layout)
            t0 = time.perf_counter()
            with inst.connect() as be:
                for lo in range(0, nrows, 100_000):
                    aid = np.arange(lo + 1, min(lo + 100_000, nrows) + 1, dtype=np.int32)
                    heap_bulk_insert(be.bufmgr, rel, {
                        "aid": aid, "bid": (aid - 1) // 100_000 + 1,
                        "abalance": np.zeros(len(aid), dtype=np.int32),
                        "filler": [""] * len(aid)}, len(aid), xmin=2)
            click.echo(f"loaded {nrows:,} rows into {os.path.abspath(datadir)} in "
                       f"{time.perf_counter() - t0:.1f} s")
        t = inst.catalog.table("pgbench_accounts")
        rel = HeapRel(t.name, t.relfilenode, layout)
        with inst.connect() as be:
            for attempt in ("first", "second"):
                before = be.counters()
                t0 = time.perf_counter()
                rows = matches = 0
                for batch in HeapScan(be.bufmgr, rel, [2]):
                    vals, _ = batch.columns[0]
                    rows += len(vals)
                    matches += int(np.count_nonzero(vals < 0))
                secs = time.perf_counter() - t0
                after = be.counters()
                d = {k: after[k] - before[k] for k in after}
                click.echo(f"{attempt} scan: {rows:,} rows, {matches} with abalance < 0, "
                           f"{secs:.2f} s ({rows / max(secs, 1e-9) / 1e6:.1f} M rows/s); "
                           f"buffers hit {d['buffers_hit']:,}, read {d['buffers_read']:,}, "
                           f"ring reuses {d['ring_reused']:,}")


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                "help_option_names": []})
@click.pass_context
def experiment(ctx: click.Context) -> None:
    """Run a seed experiment: minidb experiment list | NAME [OPTIONS] | all.

    The options are the experiment's own ("minidb experiment NAME --help");
    see minidb/experiments/README.md.
    """
    from minidb.experiments.__main__ import main as run_experiments
    sys.exit(run_experiments(list(ctx.args)))


# ``minidb bench``: pgbench's driver (minidb/bench/command.py)
from minidb.bench.command import bench as _bench  # noqa: E402

main.add_command(_bench)

if __name__ == "__main__":
    main(prog_name="minidb")
