"""The ``pinochle-referee`` command line: ``audit`` and ``query`` (GAME_RECORD.md §2-§3),
``serve`` and ``demo``, the store's commands (``export``, ``list-games``, ``verify-audit``,
``backup``, ``downgrade``) and ``verify-deal``.

Output for other tools is JSON Lines on standard output; progress and human messages go to
standard error. Bad input never produces a traceback: it becomes an ``error`` line or a one-line
message and exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import json
import os
import signal
import string
import sys
import threading
from collections.abc import Generator, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import BinaryIO

from referee.audit import audit_text, verdict_exit_status
from referee.compiled import stale_build_problem
from referee.jsonread import loads_once
from referee.rules.options import VARIANT_IDS
from referee.store.base import database_argument, is_postgres_url

# Below this many files a process pool costs more than it saves.
_MIN_FILES_PER_JOB = 8


def _audit_file(path: str, keep_going: bool) -> dict[str, object]:
    """A record must be UTF-8 (GAME_RECORD.md §1), from a file or from standard input alike:
    stdin is read as bytes, not in the locale's encoding, so the same bytes get the same
    verdict either way."""
    try:
        data = _read_stdin() if path == "-" else Path(path).read_bytes()
        text = data.decode("utf-8")
    except (_InputFailed, OSError, UnicodeDecodeError) as error:  # _InputFailed: its OSError
        what = "standard input" if path == "-" else "the file"
        return {"record": path, "error": f"cannot read {what}: {error}"}
    return audit_text(text, path, keep_going)


def _audit_job(args: tuple[str, bool]) -> dict[str, object]:
    return _audit_file(*args)


def _usable_cpus() -> int:
    """The CPUs this process may run on (a container's or a taskset's, not the machine's)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _leave_interrupts_to_main() -> None:
    """A worker ignores Ctrl-C, which the terminal sends the whole process group: the main
    process stops the pool, and a worker's own KeyboardInterrupt was a traceback of its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _verdicts(
    paths: Sequence[str], keep_going: bool, jobs: int
) -> Generator[dict[str, object], None, None]:
    """The verdicts in file order. Closed early (the reader went away, Ctrl-C), the pool
    drops the records not yet started instead of auditing every one of them first."""
    # No more processes than files or CPUs, which could not be kept busy: the pool starts
    # every process at once, so --jobs 100000 forked 100,000 of them.
    jobs = min(jobs, len(paths), _usable_cpus())
    if jobs > 1 and len(paths) >= _MIN_FILES_PER_JOB and "-" not in paths:
        chunk = max(1, len(paths) // (jobs * 8))
        pool = ProcessPoolExecutor(max_workers=jobs, initializer=_leave_interrupts_to_main)
        try:
            yield from pool.map(_audit_job, [(p, keep_going) for p in paths], chunksize=chunk)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    else:
        for path in paths:
            yield _audit_file(path, keep_going)


def _run_audit(paths: Sequence[str], keep_going: bool, jobs: int) -> int:
    with contextlib.closing(_verdicts(paths, keep_going, jobs)) as verdicts:
        return _print_verdicts(verdicts, len(paths))


def _print_verdicts(verdicts: Iterator[dict[str, object]], count: int) -> int:
    status = 0
    # A bar only while the verdicts go to a file or a pipe (on a terminal the lines show the
    # progress themselves), drawn on standard error: rich's default console, standard output,
    # drew no bar there and ended the JSON Lines with an empty line.
    show_progress = count > 1 and sys.stderr.isatty() and not sys.stdout.isatty()
    if show_progress:
        from rich.console import Console  # noqa: PLC0415 - only on a terminal
        from rich.progress import Progress  # noqa: PLC0415

        with Progress(
            console=Console(stderr=True),
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        ) as progress:
            task = progress.add_task("auditing", total=count)
            for verdict in verdicts:
                print(json.dumps(verdict), flush=False)
                status = max(status, verdict_exit_status(verdict))
                progress.advance(task)
    else:
        for verdict in verdicts:
            print(json.dumps(verdict))
            status = max(status, verdict_exit_status(verdict))
    sys.stdout.flush()
    return status


def _run_query() -> int:
    from referee.query import run_queries  # noqa: PLC0415 - audit runs need none of it

    try:
        for line in run_queries(_stdin_lines()):  # bytes: each line must be UTF-8 (§1)
            print(line)
    except _InputFailed as failed:
        sys.stdout.flush()  # the answers to the lines read come first
        return _unreadable_stdin(failed)
    return 0


class _InputFailed(Exception):
    """Standard input could not be read: the input's failure, which each command reports as
    its own (one line and exit 2; ``audit -``: the record's verdict). Raised as the OSError
    itself it reached ``main``, which takes an EBADF for the output's: ``query`` with standard
    input open for writing only (``0>FILE``) said "cannot write the output" (exit 1)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error


def _stdin() -> BinaryIO:
    """Standard input as bytes. Started closed (``<&-``), Python makes ``sys.stdin`` None,
    and ``audit -``, ``query`` and ``verify-deal ... -`` ended in an AttributeError
    traceback: that is the EBADF a read would meet."""
    if sys.stdin is None:
        raise _InputFailed(OSError(errno.EBADF, os.strerror(errno.EBADF)))
    return sys.stdin.buffer


def _read_stdin() -> bytes:
    """All of standard input; raises ``_InputFailed``."""
    try:
        return _stdin().read()
    except OSError as error:
        raise _InputFailed(error) from error


def _stdin_lines() -> Iterator[bytes]:
    """Standard input's lines, as they come; raises ``_InputFailed``."""
    stream = _stdin()
    while True:
        try:
            line = stream.readline()
        except OSError as error:
            raise _InputFailed(error) from error
        if not line:
            return
        yield line


def _unreadable_stdin(failed: _InputFailed) -> int:
    print(f"pinochle-referee: cannot read standard input: {failed.error.strerror}", file=sys.stderr)
    return 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pinochle-referee",
        description="Pinochle rules referee: serve the gRPC API, audit recorded games, answer"
        " rules queries, list, export, back up and verify stored games.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    audit = commands.add_parser("audit", help="audit recorded games (pinochle-record/1)")
    audit.add_argument("files", nargs="+", help="record files, or - for one record on stdin")
    audit.add_argument(
        "--keep-going", action="store_true", help="report every illegal action, skipping each"
    )
    audit.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="processes for large batches (at most one per CPU and per file)",
    )
    commands.add_parser(
        "query",
        help="answer rules queries: JSON lines on stdin, one answer line each on stdout",
        description="Each input line is one JSON query of GAME_RECORD.md section 3 (kind: meld,"
        " legal_plays, trick_winner, trick_points or hand_score); each answer is one JSON line,"
        ' in order; a query that cannot be answered gets {"error": ...} and the rest go on.',
    )
    serve = commands.add_parser("serve", help="serve the gRPC API")
    # grpc only when serving (or playing the demo): not imported by the parser's own module.
    from referee.service.settings import add_arguments, readable_file  # noqa: PLC0415

    add_arguments(serve)
    export = commands.add_parser("export", help="print a stored game as pinochle-record/1")
    export.add_argument("game_id", help="the id CreateGame returned")
    _store_arguments(export)
    backup = commands.add_parser(
        "backup", help="copy the SQLite database, even while it is served, and check the copy"
    )
    backup.add_argument("destination", help="the new file to write (must not exist)")
    _store_arguments(backup, postgres=False)
    downgrade = commands.add_parser(
        "downgrade",
        help="take the database back to an older schema, to start an older release again"
        " (stop the servers first)",
    )
    downgrade.add_argument(
        "--to",
        type=int,
        required=True,
        metavar="VERSION",
        help="the schema version the older release knows (it names it when it refuses to start)",
    )
    _store_arguments(downgrade)
    verify_audit = commands.add_parser(
        "verify-audit",
        help="check stored games' audit logs (each hash chain, and its match with the game's"
        " log), even while the database is served",
        description="Checks each game as VerifyAuditLog does. Exit 0 when every audit log"
        " checked is intact, 1 when one is not (one line each, naming the first bad entry),"
        " 2 when a game id is not in the database or the database cannot be read.",
    )
    verify_audit.add_argument(
        "game_ids",
        nargs="*",
        metavar="GAME_ID",
        help="the games to check (default: every game in the database)",
    )
    _store_arguments(verify_audit)
    list_games = commands.add_parser(
        "list-games",
        help="list the stored games, one JSON line each, even while the database is served",
        description="One JSON object per game, oldest first (by creation time, then id):"
        " game_id, variant, version, over, created_at and last_active_at (RFC 3339, UTC) and"
        " players. Exit 0; 2 when the database cannot be read or an option is not one of"
        " these.",
    )
    list_games.add_argument(
        "--state",
        choices=tuple(_LISTED_STATES),
        default=None,
        help="only the games in progress, or only those over (default: every game)",
    )
    list_games.add_argument(
        "--variant",
        choices=VARIANT_IDS,
        default=None,
        metavar="VARIANT",
        help=f"only the games of this variant: one of {', '.join(VARIANT_IDS)} (default: any)",
    )
    _store_arguments(list_games)
    verify = commands.add_parser(
        "verify-deal", help="check a deal against the commitment published when it was dealt"
    )
    verify.add_argument("commitment", help="hex SHA-256 from the deal_committed event")
    verify.add_argument("salt", help="hex salt from the deal_salt event")
    verify.add_argument(
        "deal", help="the deal JSON (from deal_revealed or an export), or - for stdin"
    )
    demo = commands.add_parser("demo", help="play one game with simple bots through the API")
    demo.add_argument(
        "--variant",
        default="partnership",
        help=f"one of {', '.join(VARIANT_IDS)} (default %(default)s)",
    )
    demo.add_argument("--options", default="{}", help="options as a JSON object")
    demo.add_argument(
        "--seed",
        default="demo",
        help="deals and the bots' choices follow from it: the same seed plays the same game"
        " (default %(default)s)",
    )
    demo.add_argument(
        "--address",
        default=None,
        help="host:port of a running server (default: start one for the game, on a"
        " throw-away database)",
    )
    demo.add_argument(
        "--creator-token",
        default=os.environ.get("PINOCHLE_REFEREE_CREATOR_TOKEN") or None,
        help="the running server's creator credential, if it requires one",
    )
    demo.add_argument(
        "--tls-ca",
        type=readable_file,
        default="",
        metavar="FILE",
        help="with --address: connect with TLS, trusting a server certificate signed by these"
        " PEM CA certificates (with only --tls-cert and --tls-key: the system's trusted roots)",
    )
    demo.add_argument(
        "--tls-cert",
        type=readable_file,
        default="",
        metavar="FILE",
        help="with --address: the PEM client certificate chain to present, for a server that"
        " requires client certificates (mutual TLS, serve --tls-client-ca; needs --tls-key)",
    )
    demo.add_argument(
        "--tls-key", type=readable_file, default="", metavar="FILE", help="its PEM private key"
    )
    return parser


def _store_arguments(command: argparse.ArgumentParser, postgres: bool = True) -> None:
    """``--db`` (and ``--db-schema``) as ``serve`` reads them, from the same variables."""
    command.add_argument(
        "--db",
        type=database_argument,
        default=os.environ.get("PINOCHLE_REFEREE_DB", "./data/referee.db"),
        help="SQLite path or postgresql:// URL" if postgres else "the SQLite database",
    )
    if postgres:
        command.add_argument(
            "--db-schema",
            default=os.environ.get("PINOCHLE_REFEREE_DB_SCHEMA", ""),
            help="PostgreSQL schema holding the tables (as for serve)",
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status.

    A reader that goes away before the output ends (``audit *.json | head -1``) ends the
    command quietly with 141, the status the shell gives ``cat`` killed by SIGPIPE, and Ctrl-C
    ends it with 130, the shell's status for an interrupted command: neither is a traceback.
    """
    try:
        status = _main(argv)
        if sys.stdout is not None:
            # Here, where a failure is reported: a short output (every command's but audit's,
            # which flushes its own) waited in the buffer for Python's flush at exit, and a
            # full disk failed there ("Exception ignored ...", exit 120).
            sys.stdout.flush()
        return status
    except BrokenPipeError:
        _discard_stdout()
        return 128 + signal.SIGPIPE
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except OSError as error:
        if error.errno not in _OUTPUT_FAILED:
            raise
        # A verdict or an export to a full disk (or /dev/full) was a traceback, and Python's
        # last flush at exit failed once more ("Exception ignored ...").
        print(f"pinochle-referee: cannot write the output: {error.strerror}", file=sys.stderr)
        _discard_stdout()
        return 1


# Write errors that say the output cannot take what is written: no room left, or no output to
# write to (EBADF: standard output closed, or opened for reading only). The commands read their
# inputs and report failures to read them as their own errors, so one of these reaching main is
# the output's.
_OUTPUT_FAILED = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EBADF})


def _check_stdout() -> None:
    """Raise the error a write would meet when the command was started with standard output
    closed (``>&-``). Python then makes ``sys.stdout`` None and print() writes nothing: audit
    ended in a traceback, and the other commands exited 0 having printed nothing (backup and
    downgrade having done their work). Checked before a command starts, so nothing is done
    whose report could not be given."""
    if sys.stdout is None:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))


def _discard_stdout() -> None:
    """Point standard output at /dev/null: Python flushes it once more as it exits, and what
    the closed pipe did not take would fail again there ("Exception ignored ... BrokenPipe")."""
    if sys.stdout is None:  # started closed: nothing is flushed at exit
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor (a test's captured output): no flush
        pass


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if problem := stale_build_problem():  # every command runs the rules core
        print(f"pinochle-referee: {problem}", file=sys.stderr)
        return 2
    if args.command != "serve":  # serve logs to standard error; every other command prints
        _check_stdout()
    if args.command == "audit":
        if args.jobs < 1:
            print("pinochle-referee: --jobs must be at least 1", file=sys.stderr)
            return 2
        if list(args.files).count("-") > 1:
            # Read twice, standard input is empty the second time: that record's verdict
            # ("not valid JSON") would blame a record nobody sent.
            print("pinochle-referee: - (standard input) can be given once", file=sys.stderr)
            return 2
        return _run_audit(args.files, args.keep_going, args.jobs)
    if args.command == "serve":
        from referee.service.server import serve  # noqa: PLC0415
        from referee.service.settings import SettingsError, settings_from  # noqa: PLC0415

        try:
            settings = settings_from(args)
        except SettingsError as error:
            parser.error(f"serve: {error}")  # exit 2, as for a malformed flag
        return asyncio.run(serve(settings))
    if args.command == "export":
        return asyncio.run(_export(args.game_id, args.db, args.db_schema))
    if args.command == "backup":
        return _backup(args.db, args.destination)
    if args.command == "downgrade":
        return asyncio.run(_downgrade(args.db, args.db_schema, args.to))
    if args.command == "verify-audit":
        return asyncio.run(_verify_audit(args.game_ids, args.db, args.db_schema))
    if args.command == "list-games":
        over = None if args.state is None else _LISTED_STATES[args.state]
        return asyncio.run(_list_games(args.db, args.db_schema, over, args.variant))
    if args.command == "verify-deal":
        return _verify_deal(args.commitment, args.salt, args.deal)
    if args.command == "demo":
        from referee.demo import channel_credentials, run_demo  # noqa: PLC0415

        if (args.tls_ca or args.tls_cert or args.tls_key) and args.address is None:
            parser.error(
                "demo: --tls-ca, --tls-cert and --tls-key need --address (the server"
                " the demo starts itself speaks plain text)"
            )
        if bool(args.tls_cert) != bool(args.tls_key):
            parser.error("demo: --tls-cert and --tls-key go together: give both or neither")
        try:
            options, repeated = loads_once(args.options)
        except (ValueError, RecursionError) as error:  # a JSONDecodeError is a ValueError
            print(f"pinochle-referee: --options is not JSON: {error}", file=sys.stderr)
            return 2
        if repeated is not None:  # refused as in records and queries: which one was meant?
            print(f"pinochle-referee: --options: {repeated}", file=sys.stderr)
            return 2
        if options is not None and not isinstance(options, dict):
            # null is the variant's defaults; a list or a number reached the client's Struct
            # and ended in an AttributeError traceback.
            print(
                f"pinochle-referee: --options must be a JSON object, got {args.options}",
                file=sys.stderr,
            )
            return 2
        try:
            credentials = channel_credentials(args.tls_ca, args.tls_cert, args.tls_key)
        except OSError as error:  # readable when the flags were read, gone since
            parser.error(f"demo: cannot read {error.filename}: {error.strerror}")
        from pinochle_client import RefereeError  # noqa: PLC0415

        try:
            return asyncio.run(
                run_demo(
                    args.variant,
                    options,
                    args.seed,
                    args.address,
                    args.creator_token,
                    credentials,
                )
            )
        except RefereeError as error:  # a refused game (variant, options) or no server there
            # The client's str() is "CODE REASON: message", where a reason may be empty (no
            # server there) or the code again (a malformed request): each said once here.
            reason = f" {error.reason}" if error.reason not in ("", error.code.name) else ""
            print(
                f"pinochle-referee: demo: {error.code.name}{reason}: {error.message}",
                file=sys.stderr,
            )
            return 1
        except ValueError as error:
            # The client refuses, before any call and naming the field, a value no request can
            # carry: a token that is not printable ASCII, text that is not Unicode (a non-UTF-8
            # argument), an integer beyond a Struct's. A bad flag, as for one argparse refuses.
            print(f"pinochle-referee: demo: {error}", file=sys.stderr)
            return 2
    return _run_query()


def _is_unicode(text: str) -> bool:
    """Whether ``text`` is Unicode text: a non-UTF-8 command-line argument comes with lone
    surrogates (Python's surrogateescape), which no UTF-8 encoder takes."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


async def _export(game_id: str, db: str, schema: str = "") -> int:
    """Print one stored game; the database is only read. A store that cannot open (not a
    database, PostgreSQL unreachable, another release's schema) is one line and exit 1."""
    from referee.service.errors import ServiceError  # noqa: PLC0415
    from referee.service.games import GameManager  # noqa: PLC0415
    from referee.service.server import open_store  # noqa: PLC0415
    from referee.store.base import StoreError  # noqa: PLC0415

    # Neither created nor migrated: a mistyped path or --db-schema would get an empty database,
    # and a database taken back with downgrade would be moved forward again. Not serving: an
    # export reads beside the server (a SQLite file's serving lock is the server's alone).
    store = open_store(db, schema, create=False, serving=False)
    try:
        await store.open()
        if not _is_unicode(game_id):
            # A non-UTF-8 argument: no stored id is one, and the store's query could not
            # encode it (a UnicodeEncodeError traceback).
            print(f"pinochle-referee: no game {game_id!r}", file=sys.stderr)
            return 1
        games = GameManager(store)
        live = await games.load(game_id)
        print(json.dumps(await games.export_record(live)))
        return 0
    except ServiceError as error:
        print(f"pinochle-referee: {error.message}", file=sys.stderr)
        return 1
    except StoreError as error:
        print(f"pinochle-referee: {error}", file=sys.stderr)
        return 1
    finally:
        await store.close()


async def _verify_audit(game_ids: Sequence[str], db: str, schema: str = "") -> int:
    """Check the audit log of each game named, or of every game in the database: the store's
    ``verify_audit_log``, the check VerifyAuditLog and ``backup`` make (its chain, and its
    accepted entries against the game's log). One line per broken log and a summary, on
    standard output. Exit 0 when all are intact, 1 when one is not, 2 when the command cannot
    do what was asked: a database that cannot be opened or read, a game id it does not hold
    (nothing is checked then). The database is opened as ``export`` opens it: neither created
    nor migrated, and beside any server of it (no serving lock)."""
    from referee.service.server import db_for_log, open_store  # noqa: PLC0415
    from referee.store.base import StoreError  # noqa: PLC0415

    store = open_store(db, schema, create=False, serving=False)
    where = db_for_log(db) + (f" schema {schema}" if schema and is_postgres_url(db) else "")
    try:
        await store.open()
        stored = await store.list_games()
        named = list(dict.fromkeys(game_ids))  # each once, in the order given
        unknown = sorted(set(named) - set(stored))
        if unknown:
            listed = ", ".join(repr(game_id) for game_id in unknown)
            print(f"pinochle-referee: {where} holds no game {listed}", file=sys.stderr)
            return 2
        checked = named or stored
        broken = entries = 0
        for game_id in checked:
            verdict = await store.verify_audit_log(game_id)
            entries += verdict.entries
            if not verdict.intact:
                broken += 1
                print(
                    f"game {game_id}: audit log not intact at entry {verdict.first_bad_seq}:"
                    f" {verdict.detail}"
                )
    except StoreError as error:
        print(f"pinochle-referee: {error}", file=sys.stderr)
        return 2
    finally:
        await store.close()
    print(
        f"checked {_count(len(checked), 'game')} in {where}"
        f" ({_count(entries, 'audit entry', 'audit entries')}): "
        + (
            "every audit log intact"
            if not broken
            else f"{_count(broken, 'audit log', 'audit logs')} not intact"
        )
    )
    return 1 if broken else 0


# list-games --state: whether the games listed are over.
_LISTED_STATES = {"in-progress": False, "over": True}
# list-games: the games read from the store at a time.
_LIST_PAGE = 500


async def _list_games(db: str, schema: str, over: bool | None, variant: str | None) -> int:
    """Print the stored games' public summaries, one JSON line each, in the store's listing
    order (``list_game_summaries``, read a page at a time, so a large database is never held
    in memory and a game created or ended meanwhile is neither skipped nor listed twice).
    Operators get the ids ``export`` and ``verify-audit`` take without a server or a
    credential. The database is opened as ``export`` opens it: neither created nor migrated,
    and beside any server of it. Exit 0, or 2 when it cannot be opened or read."""
    from referee.service.server import open_store  # noqa: PLC0415
    from referee.service.servicers import to_timestamp  # noqa: PLC0415
    from referee.store.base import StoreError  # noqa: PLC0415

    store = open_store(db, schema, create=False, serving=False)
    try:
        await store.open()
        after: tuple[float, str] | None = None
        while True:
            page = await store.list_game_summaries(
                after=after, limit=_LIST_PAGE, over=over, variant=variant
            )
            for game in page:
                # The times as ListGames gives them in JSON (grpcurl's), to the same digit;
                # a last_active_at the store never recorded (0) as ListGames leaves it unset.
                active = game.last_active_at
                summary = {
                    "game_id": game.game_id,
                    "variant": game.variant,
                    "version": game.version,
                    "over": game.over,
                    "created_at": to_timestamp(game.created_at).ToJsonString(),
                    "last_active_at": to_timestamp(active).ToJsonString() if active else None,
                    "players": list(game.players),
                }
                print(json.dumps(summary))
            if len(page) < _LIST_PAGE:
                return 0
            after = page[-1].position
    except StoreError as error:
        print(f"pinochle-referee: {error}", file=sys.stderr)
        return 2
    finally:
        await store.close()


async def _downgrade(db: str, schema: str, version: int) -> int:
    from referee.store import postgres, sqlite  # noqa: PLC0415
    from referee.store.base import StoreError  # noqa: PLC0415

    try:
        if is_postgres_url(db):
            was = await postgres.PostgresStore(db, schema=schema or None).downgrade(version)
        else:
            was = sqlite.downgrade(db, version)
    except StoreError as error:
        print(f"pinochle-referee: {error}", file=sys.stderr)
        return 1
    where = db
    if is_postgres_url(db):  # a URL may hold a password: named by host, port and database
        where = postgres.describe(db) + (f" schema {schema}" if schema else "")
    if was == version:
        print(f"{where} has schema version {version} already")
    else:
        print(
            f"downgraded {where} from schema version {was} to {version}: a release that knows"
            f" schema {version} may serve it now (this one would migrate it forward again)"
        )
    return 0


def _backup(db: str, destination: str) -> int:
    """Exit 0 for a copy that passed its checks, 1 for one that did not or a backup that
    failed, 2 for a PostgreSQL URL, and 128 + the signal's number for a backup stopped by
    Ctrl-C, SIGTERM or SIGHUP, with a line saying whether the destination holds the whole copy
    (not checked) or nothing: exit 130 alone, as for the other commands, left a user who found
    a file there unable to tell whether it was a backup."""
    from referee.store.base import StoreError  # noqa: PLC0415
    from referee.store.sqlite import BackupInterrupted, backup  # noqa: PLC0415

    if is_postgres_url(db):
        print(
            "pinochle-referee: backup copies the embedded SQLite database; for PostgreSQL use"
            " pg_dump (for example: pg_dump --schema=SCHEMA URL > referee.sql)",
            file=sys.stderr,
        )
        return 2
    try:
        with _signals_interrupt() as stopped_by:
            report = backup(db, destination)
    except StoreError as error:
        print(f"pinochle-referee: {error}", file=sys.stderr)
        return 1
    except BackupInterrupted as stop:
        print(
            "pinochle-referee: backup interrupted: "
            + (
                f"{destination} holds the whole copy, but it was not checked (back up again to"
                " have it checked)"
                if stop.published
                else f"nothing was written to {destination}"
            ),
            file=sys.stderr,
        )
        return 128 + stopped_by[0]
    broken = len(report.broken_audit_logs)
    print(
        f"backed up {db} to {destination}: {_count(report.games, 'game')} ({report.in_progress:,}"
        f" in progress), {_count(report.log_rows, 'log row')},"
        f" {_count(report.audit_entries, 'audit entry', 'audit entries')};"
        f" integrity {report.integrity}; "
        + (
            "every audit log intact"
            if not broken
            else f"{_count(broken, 'audit log', 'audit logs')} not intact"
        )
    )
    for game_id, detail in report.broken_audit_logs:
        print(f"pinochle-referee: game {game_id}: audit log not intact: {detail}", file=sys.stderr)
    if report.integrity != "ok":
        print(
            f"pinochle-referee: the copy failed integrity_check: {report.integrity}",
            file=sys.stderr,
        )
    return 0 if report.sound else 1


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[list[int]]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt inside the block, as Ctrl-C does, so that
    the work in it cleans up after itself; the list holds the number of the signal that
    stopped it (SIGINT unless another did). Their default was to end the process at once: a
    backup stopped by ``timeout``, a service manager or a closed terminal left its half-made
    copy behind. Only the main thread can set handlers; elsewhere (a test's worker thread)
    the block runs with the signals as they are."""
    stopped_by = [int(signal.SIGINT)]
    if threading.current_thread() is not threading.main_thread():
        yield stopped_by
        return

    def interrupt(number: int, frame: object) -> None:
        stopped_by[0] = number
        raise KeyboardInterrupt

    previous = {number: signal.signal(number, interrupt) for number in _STOPPING_SIGNALS}
    try:
        yield stopped_by
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


_STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _count(number: int, one: str, many: str = "") -> str:
    return f"{number:,} {one if number == 1 else many or one + 's'}"


def _verify_deal(commitment: str, salt: str, deal_text: str) -> int:
    """Exit 0 when the deal opens the commitment, 1 when it does not, 2 when an argument cannot
    be used. A commitment that is not a SHA-256 in hex (cut short in a copy, ``0x`` before it)
    is exit 2: it was never published, so "valid": false, which says the deal was changed after
    the commitment, would be a false accusation."""
    from referee.audit import RecordError, parse_deal, read_record  # noqa: PLC0415
    from referee.jsonread import RepeatedKeyError  # noqa: PLC0415
    from referee.rules.dealing import deal_commitment  # noqa: PLC0415

    expected = commitment.strip().lower()
    if len(expected) != 64 or not all(digit in "0123456789abcdef" for digit in expected):
        print(
            f"pinochle-referee: COMMITMENT must be 64 hex digits (a SHA-256), got {commitment!r}",
            file=sys.stderr,
        )
        return 2
    # The same for a salt that is no revealed salt: empty (the hand's deal_salt event not
    # sent yet, a shell variable never set) it was answered "valid": false, exit 1, as was one
    # with spaces inside (bytes.fromhex skips them).
    digits = salt.strip()
    if not digits or len(digits) % 2 or not all(digit in string.hexdigits for digit in digits):
        print(
            f"pinochle-referee: SALT must be hex digits, two for each byte, got {salt!r}",
            file=sys.stderr,
        )
        return 2
    try:
        read = _read_stdin() if deal_text == "-" else b""
    except _InputFailed as failed:
        return _unreadable_stdin(failed)
    try:
        text = read.decode("utf-8") if deal_text == "-" else deal_text
        data = read_record(text)  # as a record's: BOM, NaN, repeated keys
    except (RepeatedKeyError, UnicodeDecodeError) as error:  # each names what is wrong
        print(f"pinochle-referee: {error}", file=sys.stderr)
        return 2
    except (ValueError, RecursionError) as error:
        # The decoder's message alone ("Expecting value: line 1 column 1 (char 0)") named
        # neither the argument nor JSON.
        print(f"pinochle-referee: DEAL is not valid JSON: {error}", file=sys.stderr)
        return 2
    try:
        deal = parse_deal(data, "deal")
        salt_bytes = bytes.fromhex(digits)
    except (RecordError, ValueError) as error:
        print(f"pinochle-referee: {error}", file=sys.stderr)
        return 2
    computed = deal_commitment(deal, salt_bytes)
    ok = computed == expected
    print(json.dumps({"valid": ok, "commitment": commitment, "computed": computed}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
