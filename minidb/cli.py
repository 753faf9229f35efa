"""The ``minidb`` command (click): the REPL, ``minidb demo``, ``minidb bench``, ``minidb
experiment``.

::

    minidb [DATADIR]              interactive REPL on DATADIR (default ./minidb-data)
    minidb [DATADIR] -c "SQL"     run statements (or one meta command), print, exit
    minidb [DATADIR] < file.sql   run a script (stdin not a terminal), as psql -f
    minidb [DATADIR] -f file.sql  the same from a file
    minidb demo [-D DATADIR]      the headline demonstration: seed 003, short (below)
    minidb bench ...              pgbench rebuilt over minidb (minidb/pgbench)
    minidb experiment NAME ...    a seed experiment or wal-checkpoints (minidb/experiments)
    minidb check DATADIR          the heap, B-tree and catalog checkers (pg_amcheck): exit
                                  0 nothing found, 2 corruption found, 1 could not check
    minidb waldump DATADIR        the write-ahead log, as pg_waldump (minidb/wal/dump.py)
    minidb controldata DATADIR    the control file, as pg_controldata
    minidb serve [DATADIR]        a server on DATADIR/.s.PGSQL.5432 for psql, pgbench,
                                  psycopg (minidb/server); --stop to stop it
    minidb repl [DATADIR] ...     the REPL by its name (for a data directory named like a
                                  subcommand)

The group takes no positional argument of its own: a first argument that is not a
subcommand's name (a data directory, or an option such as ``-c``) is handed to the ``repl``
subcommand (``_Main.resolve_command``), and so is an empty command line.  Subcommands added
later need nothing more than ``@main.command()``.

Exit codes of the REPL (psql's): 0 the input ran to its end (a script goes on after an
error, as psql's and sqlite3's do) or the last ``-c`` succeeded; 1 the last ``-c`` failed;
2 the data directory (or the -f file) could not be opened; 3 a script stopped at an error
because ``ON_ERROR_STOP`` is on (``-v ON_ERROR_STOP=1`` or ``--on-error stop``).  A new data
directory is announced on standard error (``minidb: created new data directory "..."``).

``minidb demo`` is the README's first command: a short ``minidb experiment dead-tuples``
(seed 003, Tom Lane 2002), the result minidb was built to show.  Three pgbench runs of 5
clients without VACUUM for each configuration - 2002's engine, 2002 with index tuple
killing, the same with index scans forced, today's - at scale 1 and 100 transactions per
client, which keeps the seed's 500 new versions of each branch row per run (30-50 s on
this 2-core machine, most of it 2002's last runs).  Each configuration re-initialises
pgbench's four tables in DATADIR (``pgbench -i``'s drop step; other tables are left alone)
and opens a fresh instance, so the buffer pool and statistics start anew.  Today's engine
runs first and 2002's last, so DATADIR keeps 2002's bloated tables for ``minidb DATADIR``
(``\\dt``, ``\\page pgbench_branches 0``).  It prints one line per run, then a compact table
(``dead_tuples.summary_table``): tps per run, each run's ratio to the first beside the seed's,
buffer accesses per transaction and the small tables' heap pages - counters that show the
degradation whatever the machine's load - and writes the experiment's markdown report to
``--out`` (``./minidb-results``; the PNG only when matplotlib is installed).  It replaces an
earlier demo that loaded pgbench_accounts and scanned it (``bench/scan_bench.py`` measures
scans).
"""

from __future__ import annotations

import os
import shlex
import sys
import time

import click

DEFAULT_DATADIR = "minidb-data"

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
    "minidb repl --help" for its options (-c, -f, -a, -v, --on-error, --set).
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(repl)


@main.command()
@click.argument("datadir", required=False, default=DEFAULT_DATADIR)
@click.option("-c", "--command", "commands", multiple=True, metavar="SQL",
              help="run SQL (statements, or a meta command such as \\dt) and exit; "
                   "may be repeated")
@click.option("-f", "--file", "file", type=click.File("r"), metavar="FILE",
              help="run the statements in FILE and exit ('-' for stdin)")
@click.option("-a", "--echo-all", is_flag=True, help="echo each input line (script mode)")
@click.option("-v", "--variable", "variables", multiple=True, metavar="NAME=VALUE",
              help="set a REPL variable, as \\set does (ON_ERROR_STOP=1: stop a script "
                   "at the first error, exit 3); may be repeated")
@click.option("--on-error", type=click.Choice(["stop", "continue"]), default=None,
              help="stop: the same as -v ON_ERROR_STOP=1; continue (the default, as psql): "
                   "run on after an error")
@click.option("--set", "settings", multiple=True, metavar="NAME=VALUE",
              help="a setting for the connection (instance settings apply when the "
                   "directory is opened); may be repeated")
@click.option("--host", default=None, metavar="HOST",
              help="connect to the minidb serve at HOST (an address for TCP, or the directory "
                   "that holds its socket) instead of opening DATADIR; a served DATADIR is "
                   "reached through its socket without this")
@click.option("-p", "--port", type=int, default=None, help="the server's port (5432)")
@click.option("-U", "--username", default=None, help="user name for --host")
def repl(datadir: str, commands: tuple[str, ...], file, echo_all: bool, variables,
         on_error: str | None, settings: tuple[str, ...], host: str | None = None,
         port: int | None = None, username: str | None = None) -> None:
    """The SQL REPL on DATADIR (default ./minidb-data, created if new).

    Interactive when standard input is a terminal; otherwise the input runs as a script,
    which goes on after an error unless ON_ERROR_STOP is set.  Exit status: 0 done, 1 the
    last -c failed, 2 DATADIR could not be opened, 3 ON_ERROR_STOP stopped a script.
    """
    from minidb.dbapi import connect
    from minidb.errors import Error
    from minidb.instance import VERSION_FILE
    from minidb.repl import HISTORY_FILE, Repl

    kw = _pairs(settings, "--set")
    assigned = _pairs(variables, "-v")
    if os.path.exists(datadir) and not os.path.isdir(datadir):
        click.echo(f'minidb: error: "{datadir}" is a file, not a data directory: give a '
                   f"directory (created if new)", err=True)
        sys.exit(2)
    fresh = host is None and not os.path.exists(os.path.join(datadir, VERSION_FILE))
    try:
        if host is not None:
            conn = connect(host=host, port=port, user=username,
                           password=os.environ.get("PGPASSWORD"), **kw)
        else:
            conn = connect(datadir, port=port, **kw)
    except Error as e:
        click.echo(f"minidb: error: {e}", err=True)
        sys.exit(2)
    if fresh:
        click.echo(f'minidb: created new data directory "{conn.datadir}"', err=True)
    status = 0
    try:
        conn.autocommit = True
        r = Repl(conn, echo=echo_all)
        if on_error is not None:
            r.stop_on_error = on_error == "stop"
        for name, value in assigned.items():   # as \\set NAME VALUE (checked the same way)
            r.run_meta("\\set " + name + " " + _quote_arg(value))
        if commands:
            for text in commands:
                ok = r.run_command(text)
                if r.done or (not ok and r.stop_on_error):
                    break
            status = 0 if ok else 1
        elif file is not None:
            r.run_script(file, source=None if file.name == "<stdin>" else file.name)
            status = 3 if r.stopped else 0
        elif not sys.stdin.isatty():
            r.run_script(sys.stdin)
            status = 3 if r.stopped else 0
        else:
            client = getattr(conn, "client", None)
            where = conn.datadir or host
            if client is not None:
                where += f" (through its server, backend pid {client.backend_pid})"
            click.echo(f"minidb {_version()} on {where}\n"
                       'Type "\\?" for help, "\\q" to quit.\n')
            r.interactive(os.path.join(conn.datadir or os.path.expanduser("~"),
                                       HISTORY_FILE))
        sys.stdout.flush()
    finally:
        conn.close()
    sys.exit(status)


def _pairs(items, option: str) -> dict:
    out = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint=option)
        out[name.strip()] = value.strip()
    return out


def _quote_arg(value: str) -> str:
    """``value`` as one \\set argument."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("minidb")
    except PackageNotFoundError:
        return "(source tree)"


# The demo runs today's engine first and 2002's last, so that the directory keeps 2002's
# bloated tables; the table printed at the end lists them in the usual order.
DEMO_ORDER = ["today", "2002 + killing, enable_seqscan=off", "2002 + killing", "2002"]


@main.command()
@click.option("-D", "--datadir", default=DEFAULT_DATADIR, show_default=True,
              help="data directory (created if new): pgbench's four tables are dropped and "
                   "re-created in it for each configuration; other tables are left alone")
@click.option("-s", "--scale", type=click.IntRange(1), default=1, show_default=True,
              help="pgbench scale (branches; the seed's: 10)")
@click.option("--runs", type=click.IntRange(1), default=3, show_default=True,
              help="pgbench runs per configuration, no VACUUM between them")
@click.option("--transactions", type=click.IntRange(1), default=None,
              help="per client (5 clients) and run  [default: 100 x scale, the seed's 500 "
                   "new versions of each branch row per run]")
@click.option("--config", "configs", multiple=True, metavar="LABEL",
              type=click.Choice(DEMO_ORDER),
              help="only this configuration (repeatable)  [default: all four]")
@click.option("--out", default=None, metavar="DIR",
              help="where the markdown report (and its plot) go  [default: ./minidb-results]")
@click.option("--accounts-per-scale", type=click.IntRange(1), default=100_000, hidden=True)
def demo(datadir: str, scale: int, runs: int, transactions: int | None, configs, out,
         accounts_per_scale: int) -> None:
    """The headline demonstration: seed 003 (Tom Lane, 2002), short.

    Repeated pgbench runs without VACUUM: 2002's engine (no HOT, no pruning, no index tuple
    killing, a planner that trusts the last VACUUM) degrades run after run, today's stays
    flat.  Each configuration starts from freshly initialised tables in DATADIR, which keeps
    the last one's (2002's) for "minidb DATADIR".  The full experiment is "minidb experiment
    dead-tuples".
    """
    from minidb.pgbench.conn import BenchError
    from minidb.errors import Error
    from minidb.experiments import dead_tuples
    from minidb.experiments.common import OUT_DIR

    t0 = time.perf_counter()
    out = out or OUT_DIR
    chosen = [c for c in DEMO_ORDER if not configs or c in configs]
    transactions, _ = dead_tuples.derived(scale, dead_tuples.SEED_CLIENTS, transactions, None)
    clients = dead_tuples.SEED_CLIENTS
    shown = datadir if os.path.isabs(datadir) else os.path.join(".", datadir)
    click.echo(f"minidb demo: seed 003 (Tom Lane, 2002), {runs} pgbench runs without VACUUM "
               f"per configuration\n  scale {scale}, {clients} clients x {transactions} "
               f"transactions a run: {clients * transactions / scale:,.0f} new versions of "
               f"each branch row (seed: 500)\n  tables in {shown}: "
               + ("today's engine first, 2002's last, whose bloated tables stay there"
                  if chosen[-1] == "2002" and len(chosen) > 1 else
                  "the last configuration's stay there"))
    command = " ".join(["minidb demo -D", shlex.quote(datadir), f"-s {scale} --runs {runs} "
                        f"--transactions {transactions}"]
                       + [f"--config {shlex.quote(c)}" for c in configs]
                       + ([f"--accounts-per-scale {accounts_per_scale}"]
                          if accounts_per_scale != 100_000 else []))
    try:
        rep = dead_tuples.run(scale=scale, transactions=transactions, runs=runs,
                              configs=chosen, accounts_per_scale=accounts_per_scale,
                              datadir=datadir, progress=click.echo, command=command,
                              repeats=1)
    except (Error, BenchError) as e:
        raise click.ClickException(str(e)) from None
    md = rep.write(out)
    click.echo("\n" + dead_tuples.summary_table(rep.data["results"]) + "\n")
    click.echo(f"report: {md}" + (f" and {rep.png}" if rep.png else
                                  f"; no plot: {rep.png_note}" if rep.png_note else ""))
    click.echo(f"{chosen[-1]}'s tables are in {shown}: open them with 'minidb {shown}', "
               f"then\n\\dt and \\di (pages of each table and index), "
               f"\\page pgbench_branches 0 (one page's row versions),\n"
               f"\\stats pgbench_branches (its counters)")
    click.echo(f"demo: {time.perf_counter() - t0:.0f} s; the full experiment: "
               f"minidb experiment dead-tuples")


@main.command()
@click.argument("datadir")
@click.option("-t", "--table", "tables", multiple=True, metavar="TABLE",
              help="check only this table and its indexes (repeatable)")
@click.option("-v", "--verbose", is_flag=True, help="print the summary line when clean too")
def check(datadir: str, tables: tuple[str, ...], verbose: bool) -> None:
    """Check DATADIR's catalog, heaps and B-tree indexes (pg_amcheck, bt_index_check with
    heapallindexed).  Prints each problem with its relation; exit status 0 when nothing
    was found, 2 when corruption was found, 1 when the directory could not be checked."""
    from minidb.amcheck import check_instance, format_report
    from minidb.errors import Error
    from minidb.instance import VERSION_FILE, Instance

    if not os.path.isfile(os.path.join(datadir, VERSION_FILE)):
        click.echo(f'minidb check: error: "{datadir}" is not a minidb data directory '
                   f"(no {VERSION_FILE})", err=True)
        sys.exit(1)
    try:
        inst = Instance(datadir, max_worker_processes=0)
    except Error as e:
        click.echo(f"minidb check: error: {e}", err=True)
        sys.exit(1)
    try:
        report = check_instance(inst, list(tables) or None)
    except Error as e:
        click.echo(f"minidb check: error: {e}", err=True)
        sys.exit(1)
    finally:
        inst.close()
    text = format_report(report)
    if not report.ok or verbose:
        click.echo(text, nl=False)
    sys.exit(0 if report.ok else 2)


@main.command()
@click.argument("datadir", default=DEFAULT_DATADIR)
@click.option("-p", "--port", type=click.IntRange(1, 65535), default=5432, show_default=True,
              help="the port: the socket's name (.s.PGSQL.PORT) and TCP's port")
@click.option("--listen", metavar="ADDRESS", default=None,
              help="also listen on TCP at this address (127.0.0.1 for loopback); none by default")
@click.option("--socket-dir", metavar="DIR", default=None,
              help="the unix socket's directory (default: the data directory)")
@click.option("--password-file", metavar="FILE", default=None,
              help="user:password lines (or user:SCRAM-SHA-256$...): TCP clients must "
                   "authenticate")
@click.option("--auth", type=click.Choice(["scram-sha-256", "password"]),
              default="scram-sha-256", show_default=True,
              help="how TCP clients prove their password (with --password-file)")
@click.option("-c", "settings", multiple=True, metavar="NAME=VALUE",
              help="an instance setting (shared_buffers=..., max_connections=...)")
@click.option("--stop", is_flag=True, help="stop the server running on DATADIR")
@click.option("-m", "--mode", type=click.Choice(["smart", "fast", "immediate"]), default="fast",
              show_default=True, help="with --stop: how (as pg_ctl stop -m)")
def serve(datadir, port, listen, socket_dir, password_file, auth, settings, stop,
          mode) -> None:
    """Serve DATADIR to PostgreSQL clients (psql -h DATADIR, pgbench -h DATADIR, psycopg)
    over PostgreSQL's protocol, on the unix socket DATADIR/.s.PGSQL.PORT."""
    from minidb.errors import Error
    from minidb.server import serve as run_server, stop_server
    try:
        if stop:
            pid = stop_server(datadir, mode)
            click.echo(f"minidb serve: server (pid {pid}) stopped")
            return
        run_server(datadir, port=port, listen=listen, socket_dir=socket_dir,
                   password_file=password_file, auth=auth, **_pairs(settings, "-c"))
    except Error as e:
        click.echo(f"minidb serve: error: {e}", err=True)
        sys.exit(1)
    except OSError as e:
        click.echo(f"minidb serve: error: {e}", err=True)
        sys.exit(1)


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


def _lsn(ctx, param, value):
    if value is None:
        return None
    from minidb.wal.record import parse_lsn
    try:
        return parse_lsn(value)
    except ValueError:
        raise click.BadParameter(f'invalid WAL location: "{value}"') from None


@main.command()
@click.argument("datadir", type=click.Path(file_okay=False), required=False)
@click.option("-s", "--start", callback=_lsn, metavar="RECPTR",
              help="start reading at this WAL location (as 0/1000048)  [default: the oldest "
                   "record in pg_wal]")
@click.option("-e", "--end", callback=_lsn, metavar="RECPTR",
              help="stop reading at this WAL location  [default: the end of the log]")
@click.option("-n", "--limit", type=click.IntRange(0), default=None, metavar="N",
              help="number of records to display")
@click.option("-r", "--rmgr", "rmgrs", multiple=True, metavar="RMGR",
              help="only records of this resource manager (repeatable); --rmgr=list lists them")
@click.option("-x", "--xid", type=click.IntRange(0), default=None, metavar="XID",
              help="only records of this transaction")
@click.option("-b", "--bkp-details", "detailed", is_flag=True,
              help="one line per block reference, with the fork and the image's hole")
@click.option("-z", "--stats", "stats", is_flag=False, flag_value="rmgr", default=None,
              metavar="[=record]",
              help="statistics instead of records: per resource manager, or per record "
                   "type with --stats=record")
def waldump(datadir, start, end, limit, rmgrs, xid, detailed, stats) -> None:
    """Display the write-ahead log of DATADIR, as pg_waldump does (minidb/wal/README.md).

    One line per record (resource manager, length without / with full-page images,
    transaction, LSN, previous record, description, block references with FPW marking a
    full-page image).  It ends at the first invalid record with pg_waldump's message
    ("error in WAL record at ...: invalid record length at ...: wanted 32, got 0" is the
    ordinary end of the log) and exit status 1, or at --end / --limit with status 0.
    """
    from minidb.wal import dump
    from minidb.wal.record import RM_NAMES

    if stats not in (None, "rmgr", "record"):
        # "--stats DATADIR": click gave the optional value the data directory
        if datadir is not None:
            raise click.BadParameter(f'"{stats}": --stats takes "record" or nothing',
                                     param_hint="--stats")
        datadir, stats = stats, "rmgr"
    if datadir is None:
        raise click.UsageError("missing argument DATADIR")
    if "list" in rmgrs:
        for rmid in sorted(RM_NAMES):
            click.echo(RM_NAMES[rmid])
        return
    known = {n.lower() for n in RM_NAMES.values()}
    for r in rmgrs:
        if r.lower() not in known:
            raise click.UsageError(f'resource manager "{r}" does not exist')
    opts = dump.DumpOptions(start=start, end=end, limit=limit, rmgrs=rmgrs, xid=xid,
                            detailed=detailed)
    st = dump.Stats(per_record=stats == "record") if stats else None
    failed = None
    try:
        for r in dump.records(datadir, opts,
                              on_skip=lambda m: click.echo(f"minidb waldump: {m}", err=True)):
            if st is not None:
                st.add(r)
            else:
                click.echo(dump.format_record(r, detailed))
    except dump.DumpError as e:
        failed = str(e)
    if st is not None:
        click.echo("\n".join(st.lines()))
    if failed:
        click.echo(f"minidb waldump: error: {failed}", err=True)
        sys.exit(1)


@main.command()
@click.argument("datadir", type=click.Path(file_okay=False))
def controldata(datadir) -> None:
    """Display DATADIR's control file (global/pg_control), as pg_controldata does."""
    from minidb.wal import controldata as cdata

    try:
        lines, crc_ok = cdata.report(datadir)
    except cdata.ControlDataError as e:
        click.echo(f"minidb controldata: error: {e}", err=True)
        sys.exit(1)
    if not crc_ok:
        click.echo(cdata.CRC_WARNING + "\n")
    click.echo("\n".join(lines))


# ``minidb bench``: pgbench's driver (minidb/pgbench/command.py)
from minidb.pgbench.command import bench as _bench  # noqa: E402

main.add_command(_bench)

if __name__ == "__main__":
    main(prog_name="minidb")
