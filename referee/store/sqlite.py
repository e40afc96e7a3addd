"""The embedded store: one SQLite file in WAL mode with ``synchronous=FULL``.

Threads
    Writes (``create_game``, ``commit``, ``record_refusal``) run their statements on the event
    loop that opened the store, and only the ``COMMIT`` (the WAL fsync) runs on a thread. Every
    job that arrives while a ``COMMIT`` is in flight waits in a list; when the ``COMMIT``
    returns, all of them (at most ``max_batch``) go into the next ``BEGIN IMMEDIATE``
    transaction, and the next ``COMMIT`` makes them durable together (group commit: one fsync
    for the whole batch). A job that is refused (a version conflict, a finished game, a
    duplicate id, a creation past the cap of active games) is refused before its first write,
    so it fails alone; a job that fails after writing fails the batch.
    A job is never acknowledged before the ``COMMIT`` that made it durable has returned; if
    that ``COMMIT`` fails, every job of the batch fails with :class:`StoreError`. Cancelling a
    caller that waits does not withdraw its write: once queued it may still commit (a retry of
    its request_id then finds the stored response).

    Why not a writer thread that runs the whole transaction: the statements are short C calls,
    and each one releases and retakes the GIL. On a thread, every retake waited for the busy
    event loop, so a batch of 17 jobs took 9 ms of wall time for 2.4 ms of CPU and the service
    stalled on it (bench/service.py, 2026-12-01). On the loop they cost no hand-offs; the one
    blocking call, the fsync, still leaves the loop free.

    The writer connection never waits inside SQLite for a lock another process holds (its busy
    timeout is 0, so the loop never sleeps in SQLite): a ``BEGIN IMMEDIATE`` that finds the
    database locked is retried on a timer for up to ``BUSY_TIMEOUT_SECONDS``, then the batch
    fails with :class:`StoreError`.

    Reads run on a small pool of reader threads, each with its own connection in autocommit mode.
    WAL lets them read while the writer writes; each read statement (or the explicit read
    transaction of ``verify_audit_log``) starts from the latest committed state, so a read that
    starts after a write was acknowledged sees it.

Schema
    ``games`` (creation data, ``version``, ``over`` and the audit head: the seq and hash of the
    game's last audit row, so that removing rows from the end of the audit log is detected too),
    ``log`` and ``audit`` keyed by ``(game_id, seq)``, ``requests`` keyed by
    ``(game_id, request_id)``. JSON columns hold compact JSON text. The schema version is
    ``PRAGMA user_version``; :data:`MIGRATIONS` lists the steps from each version to the next and
    ``open()`` applies the missing ones in one transaction.

One server per file
    A serving store holds an exclusive ``flock`` on the file beside the database named by
    :func:`serving_lock_path` for as long as it is open, and refuses to open while another
    process holds it. SQLite announces no changes: two servers on one file would each keep
    their own games in memory, the version check refusing one's actions on the other and
    neither's watchers seeing the other's actions, a service split in two without a word.
    ``downgrade`` takes the same lock, so it refuses while a server serves the file; ``backup``
    and ``export`` (``serving=False``) take none and work beside a server. The kernel drops the
    lock when its holder's process ends, however it ends, so no stale lock is left.

    Why a file of its own and not a ``flock`` on the database: the lock's descriptor must be
    closed some day (when the store closes, or at once when it is refused), and closing *any*
    descriptor of a file drops every POSIX lock the process holds on it, SQLite's own among them
    (its WAL read lock on the database file: measured, ``/proc/locks``). A second store refused
    in a process that has the database open (a test, a tool, ``downgrade`` beside a store)
    would silently unlock the first.
    ``flock`` itself does not disturb SQLite's ``fcntl`` locks (on Linux the two are
    independent), but only a separate file keeps the close harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import json
import math
import os
import queue
import re
import secrets
import signal
import socket
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import orjson

from referee.store.base import (
    FORGET_BATCH,
    GENESIS_HASH,
    LAST_ACCEPTED_OR_CREATED,
    AuditRow,
    AuditVerification,
    Commit,
    GameExists,
    GameOver,
    GamePosition,
    GameRecord,
    GameSummary,
    LogRow,
    StoreError,
    TooManyGames,
    UnknownGame,
    UnreadableAuditEntry,
    VersionConflict,
    check_downgrade,
    check_refusal,
    compact_json,
    schema_not_current,
)

T = TypeVar("T")

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 0 -> 1: the first schema.
    (
        """
        CREATE TABLE IF NOT EXISTS games (
            game_id TEXT PRIMARY KEY NOT NULL,
            variant TEXT NOT NULL,
            options TEXT NOT NULL,
            first_dealer INTEGER NOT NULL,
            deal_source TEXT NOT NULL,
            seat_token_hashes TEXT NOT NULL,
            spectator_token_hash TEXT NOT NULL,
            adjudicator_token_hash TEXT NOT NULL,
            players TEXT NOT NULL,
            created_at REAL NOT NULL,
            version INTEGER NOT NULL,
            over INTEGER NOT NULL CHECK (over IN (0, 1)),
            audit_seq INTEGER NOT NULL DEFAULT 0,
            audit_head TEXT NOT NULL
        )
        """,
        "CREATE INDEX IF NOT EXISTS games_active ON games (game_id) WHERE over = 0",
        """
        CREATE TABLE IF NOT EXISTS log (
            game_id TEXT NOT NULL REFERENCES games (game_id),
            seq INTEGER NOT NULL CHECK (seq >= 1),
            version INTEGER NOT NULL,
            kind TEXT NOT NULL,
            seat INTEGER,
            payload TEXT NOT NULL,
            events TEXT NOT NULL,
            PRIMARY KEY (game_id, seq)
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS requests (
            game_id TEXT NOT NULL REFERENCES games (game_id),
            request_id TEXT NOT NULL CHECK (request_id <> ''),
            response BLOB NOT NULL,
            PRIMARY KEY (game_id, request_id)
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS audit (
            game_id TEXT NOT NULL REFERENCES games (game_id),
            seq INTEGER NOT NULL CHECK (seq >= 1),
            time REAL NOT NULL,
            role TEXT NOT NULL,
            seat INTEGER,
            rpc TEXT NOT NULL,
            action TEXT,
            public_action TEXT,
            outcome TEXT NOT NULL,
            code TEXT NOT NULL,
            request_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            previous_hash TEXT NOT NULL,
            hash TEXT NOT NULL,
            PRIMARY KEY (game_id, seq)
        )
        """,
    ),
    # 1 -> 2: the game row keeps its log's last seq, so a commit reads one row, not MAX(seq).
    (
        "ALTER TABLE games ADD COLUMN log_seq INTEGER NOT NULL DEFAULT 0",
        "UPDATE games SET log_seq ="
        " (SELECT COALESCE(MAX(seq), 0) FROM log WHERE log.game_id = games.game_id)",
    ),
    # 2 -> 3: the time of the game's last accepted action (its creation before the first), so
    # that games nobody plays stop counting as active (count_active_games's active_since).
    (
        "ALTER TABLE games ADD COLUMN last_active_at REAL NOT NULL DEFAULT 0",
        f"UPDATE games SET last_active_at = {LAST_ACCEPTED_OR_CREATED} WHERE over = 0",
        "CREATE INDEX IF NOT EXISTS games_active_since ON games (last_active_at) WHERE over = 0",
    ),
    # 3 -> 4: whether a finished game still keeps its stored responses (forget_responses), and
    # the time of the last accepted action of the games that ended before 2 -> 3 (it left
    # them at 0), by which their responses are forgotten.
    (
        "ALTER TABLE games ADD COLUMN responses_kept INTEGER NOT NULL DEFAULT 1",
        f"UPDATE games SET last_active_at = {LAST_ACCEPTED_OR_CREATED}"
        " WHERE over = 1 AND last_active_at = 0",
        "CREATE INDEX IF NOT EXISTS games_ended_with_responses ON games (last_active_at)"
        " WHERE over = 1 AND responses_kept = 1",
    ),
    # 4 -> 5: the listing order (list_game_summaries: ListGames), so that a page is read from
    # the index where it starts rather than by sorting every game.
    ("CREATE INDEX IF NOT EXISTS games_created ON games (created_at, game_id)",),
)
SCHEMA_VERSION = len(MIGRATIONS)
# What takes a database back to an older schema (``downgrade``), so that an older release can
# be started again after an upgrade: DOWNGRADES[v] undoes MIGRATIONS[v], from schema v + 1 to
# v. Values the newer schema filled in columns the older one has stay as they are (they are
# valid there). Schema 1 is as far back as it goes: undoing it would delete every game.
DOWNGRADES: tuple[tuple[str, ...], ...] = (
    (),
    ("ALTER TABLE games DROP COLUMN log_seq",),
    ("DROP INDEX games_active_since", "ALTER TABLE games DROP COLUMN last_active_at"),
    ("DROP INDEX games_ended_with_responses", "ALTER TABLE games DROP COLUMN responses_kept"),
    ("DROP INDEX games_created",),
)

DEFAULT_MAX_BATCH = 64
DEFAULT_READERS = 4
BUSY_TIMEOUT_SECONDS = 10.0
BUSY_RETRY_SECONDS = 0.002  # how soon a BEGIN that found another writer's lock is retried

_GAME_COLUMNS = (
    "game_id, variant, options, first_dealer, deal_source, seat_token_hashes,"
    " spectator_token_hash, adjudicator_token_hash, players, created_at, version, over"
)
_GAME_READ_COLUMNS = f"{_GAME_COLUMNS}, last_active_at"  # what get_game reads
# What list_game_summaries reads (GameSummary's fields, players as JSON text).
_SUMMARY_COLUMNS = "game_id, variant, version, over, created_at, last_active_at, players"
_AUDIT_COLUMNS = (
    "seq, time, role, seat, rpc, action, public_action, outcome, code, request_id, version,"
    " previous_hash, hash"
)
# What ``_verify_chain`` compares each accepted audit entry with: the game's log rows of kind
# "action", in seq order (a deal row has no entry: it is the game's creation or part of the
# commit of the action that ended the hand before).
_LOGGED_ACTION_COLUMNS = "seq, version, seat, payload"
# What ``_verify_chain`` reads of one game (SQLite: VerifyAuditLog and ``backup``'s check).
_CHAIN_SQL = f"SELECT {_AUDIT_COLUMNS} FROM audit WHERE game_id = ? ORDER BY seq"
_LOGGED_ACTIONS_SQL = (
    f"SELECT {_LOGGED_ACTION_COLUMNS} FROM log WHERE game_id = ? AND kind = 'action' ORDER BY seq"
)


SERVING_LOCK_SUFFIX = "-serving"


def serving_lock_path(path: str | Path) -> Path:
    """The file whose ``flock`` a server of the database at ``path`` holds: the database's
    real path (symbolic links followed, so two names of one file share one lock) with
    :data:`SERVING_LOCK_SUFFIX`, as SQLite names its ``-wal`` and ``-shm``. It is never deleted:
    a server that opened it just before it was deleted would hold a lock nobody else sees."""
    real = Path(os.path.realpath(path))
    return real.with_name(real.name + SERVING_LOCK_SUFFIX)


def _take_serving_lock(path: Path, purpose: str) -> int:
    """Take the serving lock of the database at ``path`` (exclusive, without waiting) for
    ``purpose`` ("serve" or "downgrade"); the descriptor that holds it (``os.close`` releases it).

    The holder writes its pid, host and purpose into the file, so that a process refused can
    name it: the lock is the kernel's, the text only a note (stale once its writer is gone,
    which is harmless: it is read only while the lock is held)."""
    lock_path = serving_lock_path(path)
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise StoreError(
            f"cannot open {path}: cannot open its lock file {lock_path}: {exc}"
        ) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _lock_holder(fd)
        os.close(fd)
        raise StoreError(_held_message(path, purpose, holder)) from None
    except OSError as exc:  # a file system without locks (ENOLCK)
        os.close(fd)
        raise StoreError(f"cannot open {path}: cannot lock {lock_path}: {exc}") from exc
    with contextlib.suppress(OSError):  # the note is for people; the lock stands without it
        note = f"{os.getpid()} {socket.gethostname()} {purpose}\n".encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, note, 0)
    return fd


def _lock_holder(fd: int) -> tuple[str, str]:
    """Who holds the lock, as the note its holder wrote says ("another process (pid N on
    HOST)"), and for what ("serve" or "downgrade")."""
    try:
        words = os.pread(fd, 512, 0).decode("utf-8", "replace").split()
    except OSError:
        words = []
    if len(words) != 3:  # not written yet, or not by this code
        return "another process", "serve"
    pid, host, purpose = words
    if (pid, host) == (str(os.getpid()), socket.gethostname()):
        return "another store of this process", purpose
    return f"another process (pid {pid} on {host})", purpose


def _held_message(path: Path, purpose: str, holder: tuple[str, str]) -> str:
    """One line: who holds the lock of the database at ``path``, and what to do."""
    who, holder_purpose = holder
    held = f"{who} {'is downgrading' if holder_purpose == 'downgrade' else 'serves'} {path}"
    if purpose == "downgrade":
        if holder_purpose == "downgrade":
            return f"{held}: one downgrade at a time"
        return f"{path} is still served: {held}; stop every server of it, then downgrade it"
    return (
        f"{held}: a SQLite database is served by one server at a time (stop that one first, or"
        " give this one another --db)"
    )


def _dumps(value: object) -> str:
    """Compact UTF-8 JSON (orjson: every accepted action writes several of these, so the
    encoder is on the hot path). orjson writes NaN and Infinity as null, which PostgreSQL's
    json accepts; the service never stores a float that is not finite (actions, events and
    options are integers and strings, times are clock readings)."""
    return compact_json(value)


def _stored_time(value: float) -> float:
    """A time (seconds since 1970) as both stores keep it: a float, with -0.0 made 0.0 (and
    every other value unchanged). SQLite stores a REAL with no fraction as an integer, which has
    no sign, and gives -0.0 back as 0.0, while PostgreSQL keeps it; and an audit row's hash
    covers its time, which canonical JSON writes "-0.0" or "0.0". Hashed as -0.0, the row
    failed verification on SQLite. Rows PostgreSQL already holds with -0.0 still verify (their
    hash covers what they hold).

    A time that is not a finite number raises ValueError. Both stores call this before a job
    is queued (``_AuditDraft``, ``_game_params``), so such a time is refused alone and writes
    nothing: SQLite stored a NaN as NULL, which broke a NOT NULL column after the commit's
    first write, and so failed every other game's job in its group-commit batch; an infinity
    was stored, and its audit row hashed as JSON no client writes. The server's times come
    from its clock only (no client sends one), so this guards the boundary, not a path in use.
    """
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"a stored time is a finite number of seconds, not {value!r}")
    return value + 0.0  # -0.0 + 0.0 is 0.0


def _dumps_or_none(value: object | None) -> str | None:
    return None if value is None else _dumps(value)


def _loads_or_none(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


class _AuditDraft:
    """An audit row normalised to exactly what the database gives back (JSON round-tripped,
    ``time`` as ``_stored_time`` makes it), so the hash computed before the insert is the hash
    recomputed later. Both stores use it; the hot path builds one ``AuditRow`` per request, in
    ``chained``."""

    __slots__ = ("action_json", "public_action_json", "row", "time")

    def __init__(self, audit: AuditRow) -> None:
        # Refused here, before the job is queued (see _stored_time); ``chained`` takes it.
        self.time = _stored_time(audit.time)
        self.action_json = _dumps_or_none(audit.action)
        self.public_action_json = _dumps_or_none(audit.public_action)
        self.row = audit  # read only: the normalised values are taken from it in ``chained``

    @classmethod
    def of(cls, audit: AuditRow) -> _AuditDraft:
        return cls(audit)

    def chained(self, seq: int, previous_hash: str) -> AuditRow:
        """The row as stored at ``seq`` after ``previous_hash``, with its own hash."""
        draft = self.row
        row = AuditRow(
            seq,
            self.time,
            draft.role,
            None if draft.seat is None else int(draft.seat),
            draft.rpc,
            _loads_or_none(self.action_json),
            _loads_or_none(self.public_action_json),
            draft.outcome,
            draft.code,
            draft.request_id,
            int(draft.version),
            previous_hash,
        )
        # Hot path: a new row from the first's fields costs half what ``_replace`` does.
        return AuditRow(*row[:-1], row.computed_hash())


def _log_params(rows: Sequence[LogRow]) -> list[tuple[int, int, str, int | None, str, str]]:
    """(caller's seq, version, kind, seat, payload JSON, events JSON) for each row."""
    return [
        (row.seq, row.version, row.kind, row.seat, _dumps(row.payload), _dumps(list(row.events)))
        for row in rows
    ]


def _game_params(game: GameRecord) -> tuple[object, ...]:
    """A new game's column values in ``_GAME_COLUMNS`` order up to ``version`` (both stores;
    each adds ``over`` in its own type)."""
    return (
        game.game_id,
        game.variant,
        _dumps(dict(game.options)),
        game.first_dealer,
        _dumps(dict(game.deal_source)),
        _dumps(list(game.seat_token_hashes)),
        game.spectator_token_hash,
        game.adjudicator_token_hash,
        _dumps(list(game.players)),
        _stored_time(game.created_at),
        game.version,
    )


def _numbered_log(
    game_id: str,
    first_seq: int,
    rows: Sequence[tuple[int, int, str, int | None, str, str]],
) -> list[tuple[str, int, int, str, int | None, str, str]]:
    """``rows`` numbered ``first_seq``, ``first_seq + 1``, ... (both stores number the log; a
    caller's nonzero seq that disagrees means its view of the log diverged, and is refused)."""
    params = []
    for offset, (given, version, kind, seat, payload, events) in enumerate(rows):
        seq = first_seq + offset
        if given not in (0, seq):
            raise StoreError(f"log row seq {given} does not continue the log of {game_id} at {seq}")
        params.append((game_id, seq, version, kind, seat, payload, events))
    return params


def _insert_log(
    cursor: sqlite3.Cursor, params: Sequence[tuple[str, int, int, str, int | None, str, str]]
) -> None:
    cursor.executemany(
        "INSERT INTO log (game_id, seq, version, kind, seat, payload, events)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        params,
    )


def _audit_params(game_id: str, draft: _AuditDraft, row: AuditRow) -> tuple[object, ...]:
    """An audit row's column values in ``_AUDIT_COLUMNS`` order, game id first (both stores)."""
    return (
        game_id,
        row.seq,
        row.time,
        row.role,
        row.seat,
        row.rpc,
        draft.action_json,
        draft.public_action_json,
        row.outcome,
        row.code,
        row.request_id,
        row.version,
        row.previous_hash,
        row.hash,
    )


# A constant, not formatted per call: every request inserts one audit row, and the cursor's
# statement cache finds a string it has hashed before at once.
_INSERT_AUDIT_SQL = f"INSERT INTO audit (game_id, {_AUDIT_COLUMNS}) VALUES (?{', ?' * 13})"


def _insert_audit(cursor: sqlite3.Cursor, game_id: str, draft: _AuditDraft, row: AuditRow) -> None:
    cursor.execute(_INSERT_AUDIT_SQL, _audit_params(game_id, draft, row))


def _audit_row(values: Sequence[Any]) -> AuditRow:
    """An audit row from the audit table's values in ``_AUDIT_COLUMNS`` order. ValueError or
    TypeError when a column holds what no entry holds: text that is not JSON, a number no
    double holds or JSON that is no object in ``action`` (both stores), a value of another
    type (SQLite's columns take any), a time that is no finite number. Such a row passed as
    read, and its reader (a page of GetAuditLog, the hash) failed on it further on, as an
    internal error."""
    (seq, time, role, seat, rpc, action, public, outcome, code, request_id, version, prev, hsh) = (
        values
    )
    _check_column("seq", seq, int)
    _check_column("version", version, int)
    if seat is not None:
        _check_column("seat", seat, int)
    for name, text in (
        ("role", role),
        ("rpc", rpc),
        ("outcome", outcome),
        ("code", code),
        ("request_id", request_id),
        ("previous_hash", prev),
        ("hash", hsh),
    ):
        _check_column(name, text, str)
    if type(time) not in (int, float) or not math.isfinite(time):
        raise ValueError(f"time is not a finite number ({type(time).__name__})")
    return AuditRow(
        seq=seq,
        time=time,
        role=role,
        seat=seat,
        rpc=rpc,
        action=_json_object_or_none("action", action),
        public_action=_json_object_or_none("public_action", public),
        outcome=outcome,
        code=code,
        request_id=request_id,
        version=version,
        previous_hash=prev,
        hash=hsh,
    )


def _json_object_or_none(name: str, text: str | None) -> dict[str, object] | None:
    """An entry's ``action`` or ``public_action``: a JSON object, or null. TypeError for
    other JSON (a list, a string, a number: either store's column takes any), which no entry
    holds: read back as it was, it failed the reader further on (GetAuditLog's entry raised
    AttributeError, INTERNAL). Names the column and the kind, never the value."""
    value = _loads_or_none(text)
    if value is not None and type(value) is not dict:
        raise TypeError(f"{name} is a JSON {type(value).__name__}, not an object")
    return value


class NotUtf8Text:
    """What the audit log's reads take a TEXT value for whose bytes are not UTF-8 (written
    with SQL, as ``CAST(x'ff' AS TEXT)``): a type no column of an entry has, so that
    ``_audit_row`` refuses it as it refuses a blob, naming the column and never the bytes."""

    __slots__ = ()


_NOT_UTF8 = NotUtf8Text()


def _text_or_not_utf8(data: bytes) -> str | NotUtf8Text:
    """SQLite's text as ``str`` (strict UTF-8, as the default), else ``_NOT_UTF8``."""
    try:
        return data.decode()
    except UnicodeDecodeError:
        return _NOT_UTF8


_UNDECODABLE = re.compile(r"^Could not decode to UTF-8 column '([^']*)'")


def _undecodable_column(error: sqlite3.Error) -> str | None:
    """The column named by sqlite3's error for stored text that is not UTF-8, else None.

    That error quotes the text itself, and a game's log row holds a deal (every seat's hand)
    or an action: a read of a row changed outside the referee put them into the server's log
    with the UNAVAILABLE it answered. The audit log's reads take such text as a damaged entry
    (``_lenient_text``); every other read is refused naming the column alone, the error not
    chained (a traceback would print it)."""
    found = _UNDECODABLE.match(str(error))
    return found.group(1) if found else None


@contextlib.contextmanager
def _lenient_text(conn: sqlite3.Connection) -> Iterator[None]:
    """Read text that is not UTF-8 as ``_NOT_UTF8`` on ``conn`` meanwhile (the audit log's
    page, its check, ``backup``'s check). By default sqlite3 raises on it at the fetch, an
    OperationalError quoting the bytes: a damaged audit row was then a StoreError, answered
    UNAVAILABLE (retry) by GetAuditLog and VerifyAuditLog, "cannot be read" (exit 2) by
    verify-audit, instead of the entry it is, and the log showed the text (an action's
    cards). PostgreSQL checks its text on the way in: this happens on SQLite only."""
    conn.text_factory = _text_or_not_utf8
    try:
        yield
    finally:
        conn.text_factory = str


def _check_column(name: str, value: object, kind: type) -> None:
    """TypeError unless ``value`` is exactly of ``kind`` (a bool is no int). The message names
    the column and the type found, never the value: a tampered column may hold anything."""
    if type(value) is not kind:
        raise TypeError(f"{name} is {type(value).__name__}, not {kind.__name__}")


def _audit_rows(rows: Iterable[Sequence[Any]], after_seq: int) -> list[AuditRow]:
    """The rows of a page of the audit log (both stores' ``audit_log``), read after
    ``after_seq``. The first that cannot be read raises UnreadableAuditEntry naming its seq
    (when the seq column itself is not a number, the one after the row before), so the service
    can answer DATA_LOSS for that entry rather than fail without saying which one."""
    read: list[AuditRow] = []
    for values in rows:
        try:
            read.append(_audit_row(values))
        except (ValueError, TypeError) as error:  # orjson.JSONDecodeError is a ValueError
            seq = values[0] if type(values[0]) is int else (read[-1].seq if read else after_seq) + 1
            raise UnreadableAuditEntry(max(seq, 1), str(error)) from error
    return read


def _game_record(values: Sequence[Any]) -> GameRecord:
    (gid, variant, options, dealer, source, seats, spectator, adjudicator, players, created) = (
        values[:10]
    )
    version, over, last_active_at = values[10:13]
    return GameRecord(
        game_id=gid,
        variant=variant,
        options=json.loads(options),
        first_dealer=dealer,
        deal_source=json.loads(source),
        seat_token_hashes=tuple(json.loads(seats)),
        spectator_token_hash=spectator,
        adjudicator_token_hash=adjudicator,
        players=tuple(json.loads(players)),
        created_at=created,
        version=version,
        over=bool(over),
        last_active_at=last_active_at,
    )


def _game_summary(values: Sequence[Any]) -> GameSummary:
    """A row of ``_SUMMARY_COLUMNS`` (both stores)."""
    game_id, variant, version, over, created_at, last_active_at, players = values
    return GameSummary(
        game_id,
        variant,
        version,
        bool(over),
        created_at,
        last_active_at,
        tuple(json.loads(players)),
    )


def _log_row(values: Sequence[Any]) -> LogRow:
    seq, version, kind, seat, payload, events = values
    return LogRow(
        seq=seq,
        version=version,
        kind=kind,
        seat=seat,
        payload=json.loads(payload),
        events=json.loads(events),
    )


def _active_games_query(
    active_since: float | None, excluding: Collection[str]
) -> tuple[str, list[object]]:
    """``count_active_games``'s statement and parameters (``create_game``'s cap counts with it
    too). Either way an index answers it: ``games_active_since`` with a threshold, else
    ``games_active``, both holding only the games not over."""
    sql = "SELECT COUNT(*) FROM games WHERE over = 0"
    params: list[object] = []
    if active_since is not None:
        sql += " AND last_active_at >= ?"
        params.append(active_since)
    if excluding:
        sql += f" AND game_id NOT IN (?{', ?' * (len(excluding) - 1)})"
        params += excluding
    return sql, params


def _games_page_query(
    after: GamePosition | None, limit: int, over: bool | None, variant: str | None
) -> tuple[str, list[object]]:
    """``list_game_summaries``' statement and parameters: a page in ``games_created``'s order
    (created_at, game_id), read from that index whatever the filter (the tests EXPLAIN this
    very statement)."""
    conditions: list[str] = []
    params: list[object] = []
    if after is not None:
        conditions.append("(created_at, game_id) > (?, ?)")  # games_created's order
        params += after
    if over is not None:
        conditions.append("over = ?")
        params.append(int(over))
    if variant is not None:
        conditions.append("variant = ?")
        params.append(variant)
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    params.append(max(limit, 0))
    return (
        f"SELECT {_SUMMARY_COLUMNS} FROM games{where} ORDER BY created_at, game_id LIMIT ?",
        params,
    )


def _game_exists(conn: sqlite3.Connection | sqlite3.Cursor, game_id: str) -> bool:
    return conn.execute("SELECT 1 FROM games WHERE game_id = ?", (game_id,)).fetchall() != []


class _Job(NamedTuple):
    """A queued write: a NamedTuple, as ``LogRow`` and ``Commit`` (see referee/store/base.py),
    because every write makes one."""

    # Runs the job's statements on the writer's cursor (``SqliteStore._writer_cursor``).
    apply: Callable[[sqlite3.Cursor], Any]
    future: asyncio.Future[Any]


def _settle(outcomes: Iterable[tuple[_Job, object, BaseException | None]]) -> None:
    """Hand each job its result (unless its caller stopped waiting)."""
    for job, value, error in outcomes:
        future = job.future
        if future.done():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)


def _run_job(
    conn: sqlite3.Connection, cursor: sqlite3.Cursor, job: _Job
) -> tuple[_Job, object, BaseException | None]:
    """Run one job's statements inside the batch's transaction.

    A job that is refused (an unknown game, a stale version, a duplicate request id or game
    id, a creation past the cap) raises before its first write: SQLite undoes a failed
    statement by itself, so the job fails alone and the batch goes on, with no SAVEPOINT per
    job (two statements fewer on every action). An error after a write, or one that ended
    the transaction, is raised to fail the whole batch.
    """
    changes = conn.total_changes
    try:
        return job, job.apply(cursor), None
    except Exception as exc:
        if conn.total_changes != changes or not conn.in_transaction:
            raise StoreError(f"a write failed half-way: {exc}") from exc
        if isinstance(exc, sqlite3.Error):
            failure = StoreError(f"write failed: {exc}")
            failure.__cause__ = exc
            return job, None, failure
        return job, None, exc


_Outcomes = list[tuple[_Job, object, BaseException | None]]
# What the commit thread is handed for a batch: the writer connection, the loop and the callback
# to call on it with the COMMIT's error (None when it succeeded) and the batch's jobs and outcomes.
_Batch = tuple[
    sqlite3.Connection,
    asyncio.AbstractEventLoop,
    Callable[[BaseException | None, list[_Job], _Outcomes, _Outcomes], None],
    list[_Job],
    _Outcomes,
    _Outcomes,
]


def _commit_forever(commits: queue.SimpleQueue[_Batch | None]) -> None:
    """The commit thread: for each batch handed over, ``COMMIT``, then the batch's callback on
    the loop, until ``None`` (``close``).

    Why not ``run_in_executor`` on a one-thread pool, as before: the pool's ``submit``, the
    asyncio future wrapped around its concurrent one, the callback that copied one to the
    other and the done callback on the turn after all ran on the loop's thread, for every
    batch, and under load a batch holds one to three actions (bench/instructions.py; about
    115,000 instructions a batch, measured in process with batches of one). Now the loop puts
    one tuple on a queue and the thread calls it back once. A daemon thread: a process that
    exits without closing the store is not held up by it, and a COMMIT cut short then was
    never acknowledged (SQLite rolls it back)."""
    while (batch := commits.get()) is not None:
        conn, loop, committed, jobs, outcomes, standalone = batch
        error: BaseException | None = None
        try:
            conn.execute("COMMIT")
        except BaseException as exc:  # handed to the loop, which fails the batch
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(committed, error, jobs, outcomes, standalone)


def _is_busy(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(error)


class SqliteStore:
    """:class:`referee.store.base.GameStore` on one SQLite file (see the module docstring).

    Values come back as decoded JSON (dicts and lists); a record's token hashes and players as
    tuples. ``load_log``, ``audit_log``, ``record_refusal``, ``commit`` and ``verify_audit_log``
    raise :class:`UnknownGame` for a game that does not exist; ``stored_response`` returns None.
    Writes must come from the event loop that called ``open``.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        readers: int = DEFAULT_READERS,
        create: bool = True,
        serving: bool = True,
    ) -> None:
        """``create=False`` opens only a database already at this code's schema, neither
        creating one nor migrating it (``export``: reading a game must not change the database;
        migrating a database taken back with ``downgrade`` would stop the older release from
        starting on it again).

        ``serving=False`` takes no serving lock (see the module docstring), so the store opens
        beside a server of the same file: ``export``, and tests and benchmarks that stand for
        another process on the file. Such a store's writes go unseen by the server's games, so
        the default is the lock: a store that serves must not be opened twice by mistake."""
        if max_batch < 1 or readers < 1:
            raise ValueError("max_batch and readers must be at least 1")
        self.path = Path(path)
        self.create = create
        self.serving = serving
        self._serving_lock: int | None = None  # the descriptor holding the serving lock
        self.max_batch = max_batch
        self._reader_count = readers
        self._lock = threading.Lock()  # guards _reader_conns (reader threads append to it)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._accepting = False
        self._writer_conn: sqlite3.Connection | None = None
        # Every write job's statements (and each batch's BEGIN) run on this one cursor of the
        # writer connection, made at open: hot path, ``Connection.execute`` makes and frees a
        # cursor per statement, six of them per accepted action (about 5,000 instructions in
        # all, measured in process).
        self._writer_cursor: sqlite3.Cursor | None = None
        # One thread runs each batch's COMMIT (the fsync), handed over through this queue
        # (None stops it; see _commit_forever).
        self._commits: queue.SimpleQueue[_Batch | None] | None = None
        self._committer: threading.Thread | None = None
        self._pending: list[_Job] = []  # jobs waiting for the next transaction
        self._committing = False  # a COMMIT is in flight; the writer connection is the thread's
        self._retry: asyncio.TimerHandle | None = None  # a BEGIN waiting for another writer
        self._start_scheduled = False  # a _next_batch is due on the loop's next turn
        self._busy_since: float | None = None
        self._drained: asyncio.Event | None = None  # set when nothing is pending or committing
        self._readers: ThreadPoolExecutor | None = None
        self._reader_local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._closed = False
        # Batches committed and jobs in them, for tests and metrics.
        self.batches = 0
        self.batched_jobs = 0

    # -- life cycle ------------------------------------------------------------------------

    async def open(self) -> None:
        """Create the directory and the schema (or migrate it), start the threads; without
        ``create``, check that the database exists at this code's schema instead."""
        if self._closed:
            raise StoreError("the store is closed")
        if self._writer_conn is not None:
            return
        conn = await asyncio.to_thread(self._open_writer)
        self._writer_conn = conn
        self._writer_cursor = conn.cursor()
        self._loop = asyncio.get_running_loop()
        self._drained = asyncio.Event()
        self._drained.set()
        self._commits = queue.SimpleQueue()
        self._committer = threading.Thread(
            target=_commit_forever, args=(self._commits,), name="sqlite-commit", daemon=True
        )
        self._committer.start()
        self._readers = ThreadPoolExecutor(
            max_workers=self._reader_count, thread_name_prefix="sqlite-reader"
        )
        self._accepting = True

    async def close(self) -> None:
        """Finish every queued write, stop the threads and close the connections."""
        if self._closed:
            return
        self._closed = True
        self._accepting = False
        if self._drained is not None:
            await self._drained.wait()
        if self._commits is not None and self._committer is not None:
            self._commits.put(None)
            await asyncio.to_thread(self._committer.join)
        if self._readers is not None:
            await asyncio.to_thread(self._readers.shutdown, True)
        for conn in [*self._reader_conns, *filter(None, [self._writer_conn])]:
            conn.close()
        self._reader_conns.clear()
        self._writer_conn = None
        self._writer_cursor = None
        self._release_serving_lock()  # last: another server may start once it is gone

    def _release_serving_lock(self) -> None:
        fd, self._serving_lock = self._serving_lock, None
        if fd is not None:
            os.close(fd)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=BUSY_TIMEOUT_SECONDS,
            isolation_level=None,  # autocommit; transactions are explicit
            check_same_thread=False,  # the loop runs statements, a thread runs COMMIT
        )
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def _open_writer(self) -> sqlite3.Connection:
        if not self.create and not self.path.is_file():
            raise StoreError(f"no database at {self.path}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        if self.serving:  # before the first connection: nothing is migrated under another server
            self._serving_lock = _take_serving_lock(self.path, "serve")
        try:
            conn = self._connect()
        except (OSError, sqlite3.Error) as exc:
            self._release_serving_lock()
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        try:
            if not self.create:
                # Read as it is: a database refused is untouched, and one read (``export``) is
                # not switched to WAL, which wrote to a backup (journal mode DELETE, whole in
                # itself) and left -wal and -shm files beside it. A served one is WAL already.
                self._check_current(conn)
                conn.execute("PRAGMA busy_timeout = 0")
                return conn
            (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            if str(mode).lower() != "wal":
                raise StoreError(f"{self.path}: journal_mode is {mode}, not wal")
            conn.execute("PRAGMA synchronous = FULL")
            (sync,) = conn.execute("PRAGMA synchronous").fetchone()
            if sync != 2:
                raise StoreError(f"{self.path}: synchronous is {sync}, not FULL")
            self._migrate(conn)
            conn.execute("PRAGMA busy_timeout = 0")  # the loop never sleeps in SQLite
        except BaseException as exc:
            conn.close()
            self._release_serving_lock()
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"cannot open {self.path}: {exc}") from exc
            raise
        return conn

    def _check_current(self, conn: sqlite3.Connection) -> None:
        """Refuse a database that is not at this code's schema (``create`` is off)."""
        (current,) = conn.execute("PRAGMA user_version").fetchone()
        if current != SCHEMA_VERSION:
            raise StoreError(schema_not_current(str(self.path), current, SCHEMA_VERSION))

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            (current,) = conn.execute("PRAGMA user_version").fetchone()
            if current > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has schema version {current}; this code knows {SCHEMA_VERSION}"
                )
            if not self.create:
                self._check_current(conn)  # again, in the transaction: nothing is migrated
            for version in range(current, SCHEMA_VERSION):
                for statement in MIGRATIONS[version]:
                    conn.execute(statement)
            if current != SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    # -- the write path ---------------------------------------------------------------------

    def _write(self, apply: Callable[[sqlite3.Cursor], T]) -> asyncio.Future[T]:
        """Queue ``apply`` for the next transaction; the future resolves once it is durable."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if not self._accepting:
            future.set_exception(StoreError("the store is not open"))
        elif loop is not self._loop:
            future.set_exception(
                StoreError("writes must come from the event loop that opened the store")
            )
        else:
            self._pending.append(_Job(apply, future))
            assert self._drained is not None
            self._drained.clear()
            if not self._start_scheduled:
                # The transaction starts on the loop's next turn, not now: every request that
                # is ready to run by then has queued its write, so they share one COMMIT.
                self._start_scheduled = True
                loop.call_soon(self._scheduled_start)
        return future

    def _scheduled_start(self) -> None:
        self._start_scheduled = False
        self._next_batch()

    def _begin_batch(self) -> None:
        """Run the waiting jobs' statements in one transaction and start its COMMIT."""
        self._retry = None
        conn, cursor, loop = self._writer_conn, self._writer_cursor, self._loop
        assert conn is not None and cursor is not None and loop is not None
        assert self._commits is not None
        batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
        try:
            cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            if not (_is_busy(exc) and self._wait_for_lock(batch)):
                self._fail(batch, exc)
                loop.call_soon(self._next_batch)
            return
        self._busy_since = None
        outcomes: list[tuple[_Job, object, BaseException | None]] = []
        # Refusals that saw no write of this batch: they stand even if the batch rolls back.
        # A refusal made after another job wrote (a stale version because that job moved the
        # game on) holds only if that write commits, so a failed batch fails it too.
        standalone: list[tuple[_Job, object, BaseException | None]] = []
        first_changes = conn.total_changes
        try:
            for job in batch:
                clean = conn.total_changes == first_changes
                outcome = _run_job(conn, cursor, job)
                outcomes.append(outcome)
                if clean and outcome[2] is not None:
                    standalone.append(outcome)
        except BaseException as exc:
            # A job failed after writing, or the transaction itself failed: nothing of the
            # batch is durable, so no job of it may succeed.
            self._fail(batch, exc, settled=standalone)
            loop.call_soon(self._next_batch)
            if not isinstance(exc, Exception):
                raise
            return
        self._committing = True
        self._commits.put((conn, loop, self._committed, batch, outcomes, standalone))

    def _committed(
        self,
        error: BaseException | None,
        batch: list[_Job],
        outcomes: list[tuple[_Job, object, BaseException | None]],
        standalone: list[tuple[_Job, object, BaseException | None]],
    ) -> None:
        """On the loop, once COMMIT returned: acknowledge the batch, start the next one."""
        self._committing = False
        if error is not None:
            self._fail(batch, error, settled=standalone)
        else:
            self.batches += 1
            self.batched_jobs += len(batch)
            _settle(outcomes)
        self._next_batch()

    def _next_batch(self) -> None:
        """Start a transaction for the waiting jobs, unless one is in flight or waiting."""
        if self._committing or self._retry is not None:
            return
        if self._pending:
            self._begin_batch()
        else:
            assert self._drained is not None
            self._drained.set()

    def _wait_for_lock(self, batch: list[_Job]) -> bool:
        """Another process holds the write lock: retry soon, unless it has held it too long."""
        loop = self._loop
        assert loop is not None
        now = loop.time()
        if self._busy_since is None:
            self._busy_since = now
        elif now - self._busy_since > BUSY_TIMEOUT_SECONDS:
            self._busy_since = None
            return False
        self._pending[:0] = batch
        self._retry = loop.call_later(BUSY_RETRY_SECONDS, self._begin_batch)
        return True

    def _fail(
        self,
        batch: list[_Job],
        exc: BaseException,
        settled: Sequence[tuple[_Job, object, BaseException | None]] = (),
    ) -> None:
        """Roll back and fail every job of ``batch`` but the refusals in ``settled``, which
        stand on their own (they saw no write of the batch)."""
        conn = self._writer_conn
        if conn is not None and conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        failed_alone = {id(job) for job, _, error in settled if error is not None}
        failure = StoreError(f"the transaction failed: {exc}")
        failure.__cause__ = exc
        _settle(
            [o for o in settled if id(o[0]) in failed_alone]
            + [(job, None, failure) for job in batch if id(job) not in failed_alone]
        )

    # -- writes -----------------------------------------------------------------------------

    async def create_game(
        self,
        game: GameRecord,
        first_rows: Sequence[LogRow],
        *,
        max_active: int | None = None,
        active_since: float | None = None,
    ) -> None:
        """Store a new game (see :meth:`GameStore.create_game`).

        The cap is counted by the job itself, inside the write transaction (``BEGIN
        IMMEDIATE``: no other writer meanwhile), after the jobs before it in the batch, whose
        creations it sees, and it refuses before its first write (see ``_run_job``), so a
        refused creation fails alone and the batch goes on. A refusal that counted such an
        earlier job's game stands only if the batch commits (``_begin_batch``, as for any
        refusal made after another job's write). The count runs on the event loop with the
        other statements: a read of the index of active games, about 0.6 ms at 10,000.
        """
        params = (*_game_params(game), int(game.over))
        log = _numbered_log(game.game_id, 1, _log_params(first_rows))
        count_sql, count_params = _active_games_query(active_since, ())

        def apply(cursor: sqlite3.Cursor) -> None:
            if max_active is not None:
                ((active,),) = cursor.execute(count_sql, count_params).fetchall()
                if active >= max_active:
                    raise TooManyGames(max_active)
            try:
                cursor.execute(
                    f"INSERT INTO games ({_GAME_COLUMNS}, audit_seq, audit_head, log_seq,"
                    f" last_active_at) VALUES (?{', ?' * 11}, 0, ?, ?, ?)",
                    (*params, GENESIS_HASH, len(log), _stored_time(game.created_at)),
                )
            except sqlite3.IntegrityError as exc:
                if _game_exists(cursor, game.game_id):
                    raise GameExists(game.game_id) from exc
                raise
            _insert_log(cursor, log)

        await self._write(apply)

    def commit(self, commit: Commit) -> asyncio.Future[AuditRow]:
        """Apply ``commit`` (see :meth:`GameStore.commit`).

        The game's version becomes ``expected_version + 1``; every row must carry that version
        (an action and the deal it caused). A ``request_id`` already stored for the game is
        refused like a stale version (VersionConflict with the current version), nothing written;
        so is a commit to a game that has ended (GameOver). A malformed commit (its audit time not
        a finite number among the ways) is refused through the future too, as by an
        ``async def`` store, before it is queued, so it never fails a batch.
        """
        try:
            new_version = commit.checked_version()
            draft = _AuditDraft.of(commit.audit)  # a time that is no number: refused here
        except ValueError as malformed:
            refused: asyncio.Future[AuditRow] = asyncio.get_running_loop().create_future()
            refused.set_exception(malformed)
            return refused
        game_id = commit.game_id
        rows = _log_params(commit.rows)
        response = bytes(commit.response)

        def apply(cursor: sqlite3.Cursor) -> AuditRow:
            # Every way this job can be refused comes before its first write (see _run_job),
            # the game's end too: a condition on the UPDATE below would refuse it only after
            # the requests INSERT had written, and so fail the whole batch.
            head = cursor.execute(
                "SELECT version, over, audit_seq, audit_head, log_seq FROM games WHERE game_id = ?",
                (game_id,),
            ).fetchall()
            if not head:
                raise UnknownGame(game_id)
            ((current, over, audit_seq, audit_head, log_seq),) = head
            if current != commit.expected_version:
                raise VersionConflict(current)
            if over:
                raise GameOver(current)
            log = _numbered_log(game_id, log_seq + 1, rows)
            try:
                cursor.execute(
                    "INSERT INTO requests (game_id, request_id, response) VALUES (?, ?, ?)",
                    (game_id, commit.request_id, response),
                )
            except sqlite3.IntegrityError as exc:
                raise VersionConflict(current) from exc
            audit = draft.chained(audit_seq + 1, audit_head)
            cursor.execute(
                "UPDATE games SET version = ?, over = ?, audit_seq = ?, audit_head = ?,"
                " log_seq = ?, last_active_at = ? WHERE game_id = ?",
                (
                    new_version,
                    int(commit.over),
                    audit.seq,
                    audit.hash,
                    log[-1][1],
                    audit.time,
                    game_id,
                ),
            )
            _insert_log(cursor, log)
            _insert_audit(cursor, game_id, draft, audit)
            return audit

        return self._write(apply)

    async def forget_responses(self, ended_before: float, limit: int = FORGET_BATCH) -> int:
        def apply(cursor: sqlite3.Cursor) -> int:
            ended = cursor.execute(
                "SELECT game_id FROM games WHERE over = 1 AND responses_kept = 1"
                " AND last_active_at < ? ORDER BY last_active_at, game_id LIMIT ?",
                (ended_before, limit),
            ).fetchall()
            cursor.executemany("DELETE FROM requests WHERE game_id = ?", ended)
            cursor.executemany("UPDATE games SET responses_kept = 0 WHERE game_id = ?", ended)
            return len(ended)

        return await self._write(apply)

    async def record_refusal(self, game_id: str, audit: AuditRow) -> AuditRow:
        check_refusal(audit)
        draft = _AuditDraft.of(audit)

        def apply(cursor: sqlite3.Cursor) -> AuditRow:
            head = cursor.execute(
                "SELECT audit_seq, audit_head FROM games WHERE game_id = ?", (game_id,)
            ).fetchall()
            if not head:
                raise UnknownGame(game_id)
            ((audit_seq, audit_head),) = head
            row = draft.chained(audit_seq + 1, audit_head)
            updated = cursor.execute(
                "UPDATE games SET audit_seq = ?, audit_head = ?"
                " WHERE game_id = ? AND audit_seq = ?",
                (row.seq, row.hash, game_id, audit_seq),
            ).rowcount
            if updated != 1:
                raise StoreError(f"the audit log of {game_id} moved inside a transaction")
            _insert_audit(cursor, game_id, draft, row)
            return row

        return await self._write(apply)

    # -- reads ------------------------------------------------------------------------------

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._reader_local, "conn", None)
        if conn is None:
            conn = self._connect()
            conn.execute("PRAGMA query_only = ON")
            self._reader_local.conn = conn
            with self._lock:
                self._reader_conns.append(conn)
        return conn

    async def _read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        readers = self._readers
        if readers is None or self._closed:
            raise StoreError("the store is not open")

        def run() -> T:
            try:
                return query(self._reader())
            except sqlite3.Error as exc:
                undecodable = _undecodable_column(exc)
                if undecodable is not None:
                    raise StoreError(
                        f"read failed: a stored {undecodable} value is not UTF-8 text (changed"
                        " outside the referee)"
                    ) from None
                raise StoreError(f"read failed: {exc}") from exc

        return await asyncio.get_running_loop().run_in_executor(readers, run)

    async def get_game(self, game_id: str) -> GameRecord:
        def query(conn: sqlite3.Connection) -> GameRecord:
            rows = conn.execute(
                f"SELECT {_GAME_READ_COLUMNS} FROM games WHERE game_id = ?", (game_id,)
            ).fetchall()
            if not rows:
                raise UnknownGame(game_id)
            return _game_record(rows[0])

        return await self._read(query)

    async def load_log(self, game_id: str, after_seq: int = 0) -> list[LogRow]:
        def query(conn: sqlite3.Connection) -> list[LogRow]:
            rows = conn.execute(
                "SELECT seq, version, kind, seat, payload, events FROM log"
                " WHERE game_id = ? AND seq > ? ORDER BY seq",
                (game_id, after_seq),
            ).fetchall()
            if not rows and not _game_exists(conn, game_id):
                raise UnknownGame(game_id)
            return [_log_row(row) for row in rows]

        return await self._read(query)

    async def stored_response(self, game_id: str, request_id: str) -> bytes | None:
        def query(conn: sqlite3.Connection) -> bytes | None:
            rows = conn.execute(
                "SELECT response FROM requests WHERE game_id = ? AND request_id = ?",
                (game_id, request_id),
            ).fetchall()
            return bytes(rows[0][0]) if rows else None

        return await self._read(query)

    async def audit_log(
        self, game_id: str, after_seq: int = 0, limit: int = 1000
    ) -> list[AuditRow]:
        def query(conn: sqlite3.Connection) -> list[AuditRow]:
            with _lenient_text(conn):  # a row whose text is not UTF-8: UnreadableAuditEntry
                rows = conn.execute(
                    f"SELECT {_AUDIT_COLUMNS} FROM audit WHERE game_id = ? AND seq > ?"
                    " ORDER BY seq LIMIT ?",
                    (game_id, after_seq, max(limit, 0)),
                ).fetchall()
            if not rows and not _game_exists(conn, game_id):
                raise UnknownGame(game_id)
            return _audit_rows(rows, after_seq)

        return await self._read(query)

    async def verify_audit_log(self, game_id: str) -> AuditVerification:
        def query(conn: sqlite3.Connection) -> AuditVerification:
            conn.execute("BEGIN")  # one snapshot for the head and the rows
            try:
                head = conn.execute(
                    "SELECT audit_seq, audit_head FROM games WHERE game_id = ?", (game_id,)
                ).fetchall()
                if not head:
                    raise UnknownGame(game_id)
                return _verified(conn, game_id, head[0][0], head[0][1])
            finally:
                conn.execute("COMMIT")

        return await self._read(query)

    async def changes(self) -> AsyncIterator[str]:
        """No other process writes an embedded database: nothing to announce, ever."""
        await asyncio.Event().wait()
        yield ""  # pragma: no cover - unreachable; makes this an async generator

    async def list_games(self, active_only: bool = False) -> list[str]:
        where = " WHERE over = 0" if active_only else ""

        def query(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(f"SELECT game_id FROM games{where} ORDER BY game_id").fetchall()
            return [gid for (gid,) in rows]

        return await self._read(query)

    async def list_game_summaries(
        self,
        *,
        after: GamePosition | None = None,
        limit: int = 100,
        over: bool | None = None,
        variant: str | None = None,
    ) -> list[GameSummary]:
        sql, params = _games_page_query(after, limit, over, variant)

        def query(conn: sqlite3.Connection) -> list[GameSummary]:
            return [_game_summary(row) for row in conn.execute(sql, params).fetchall()]

        return await self._read(query)

    async def ping(self) -> None:
        def query(conn: sqlite3.Connection) -> None:
            conn.execute("SELECT 1 FROM games LIMIT 1").fetchall()  # reads the file

        await self._read(query)

    async def count_active_games(
        self, active_since: float | None = None, excluding: Collection[str] = ()
    ) -> int:
        sql, params = _active_games_query(active_since, excluding)

        def query(conn: sqlite3.Connection) -> int:
            ((count,),) = conn.execute(sql, params).fetchall()
            return int(count)

        return await self._read(query)


def _verified(
    conn: sqlite3.Connection, game_id: str, head_seq: int, head_hash: str
) -> AuditVerification:
    """``_verify_chain`` of one game of a SQLite database (VerifyAuditLog, ``backup``'s check),
    its rows read as they come, text that is not UTF-8 included (``_lenient_text``)."""
    with _lenient_text(conn):
        return _verify_chain(
            conn.execute(_CHAIN_SQL, (game_id,)),
            head_seq,
            head_hash,
            conn.execute(_LOGGED_ACTIONS_SQL, (game_id,)),
        )


def _verify_chain(
    rows: Iterable[Sequence[Any]],
    head_seq: int,
    head_hash: str,
    logged_actions: Iterable[Sequence[Any]],
) -> AuditVerification:
    """The one check of a game's audit log (VerifyAuditLog, ``backup``'s check of its copy and
    ``verify-audit``, on both stores): the chain, then the log against the game's own log.

    The chain: seqs 1, 2, ..., each row's hash against its content, each link, and the head
    the game records (which catches rows removed from the end). ``rows`` are the audit table's
    values in ``_AUDIT_COLUMNS`` order, read here so that a row whose columns cannot be read
    (text that is not JSON, or a number JSON cannot hold, in ``action``; a blob where SQLite
    takes any type) is reported as that broken entry: ``_audit_row`` raised on it, and
    VerifyAuditLog (and ``backup``'s check) failed with an internal error instead of saying
    which entry was tampered with. ``entries`` counts every row the log holds, also past the
    first bad one (it counted the rows up to it, so a log with its second entry changed
    reported two entries whatever its length, and ``backup`` summed those).

    Then, with the chain intact, ``_against_log`` with ``logged_actions`` (the game's log rows
    of kind "action", ``_LOGGED_ACTION_COLUMNS``, in seq order, read in the same snapshot): a
    change to the game's log (the accepted actions a restart replays) left the chain intact."""
    entries = 0
    previous = GENESIS_HASH
    bad: tuple[int, str] | None = None
    accepted: list[AuditRow] = []
    for values in rows:
        entries += 1
        if bad is not None:
            continue
        expected_seq = entries
        try:
            row = _audit_row(values)
            computed = row.computed_hash()
        except (ValueError, TypeError) as error:  # orjson.JSONDecodeError is a ValueError
            bad = (expected_seq, f"entry {expected_seq} cannot be read: {error}")
            continue
        if row.seq != expected_seq:
            bad = (expected_seq, f"entry {expected_seq} is missing (found {row.seq})")
        elif row.previous_hash != previous:
            bad = (row.seq, f"entry {row.seq} does not link to the entry before it")
        elif computed != row.hash:
            bad = (row.seq, f"entry {row.seq} does not match its hash")
        else:
            previous = row.hash
            if row.outcome == "accepted":
                accepted.append(row)
    if bad is not None:
        return AuditVerification(False, entries, *bad)
    if entries != head_seq:
        first = min(entries, head_seq) + 1
        return AuditVerification(
            False, entries, first, f"the log has {entries} entries, the game records {head_seq}"
        )
    if previous != head_hash:
        return AuditVerification(
            False, entries, entries, f"entry {entries} is not the head the game records"
        )
    mismatch = _against_log(accepted, logged_actions, entries)
    if mismatch is not None:
        return AuditVerification(False, entries, *mismatch)
    return AuditVerification(True, entries)


def _against_log(
    accepted: Sequence[AuditRow], logged_actions: Iterable[Sequence[Any]], entries: int
) -> tuple[int, str] | None:
    """Where the accepted entries and the game's log of actions first differ (the audit seq
    and what differs), or None when they correspond one to one.

    What the stores guarantee: an action row is written only by ``commit``, which writes with
    it, in one transaction, exactly one audit entry, accepted, holding the row's action, seat
    and version (``Commit.checked_version`` refuses any other), the version the game moves to,
    one more than the last; ``record_refusal`` writes refused entries only; a retry answered
    from its stored response writes nothing, and a deal row (the game's creation, a new hand)
    no entry. So the n-th accepted entry, in seq order, matches the n-th action row of the log
    (both at the game's first version plus n: 0 for every game the service creates, though the
    store takes any), and there are as many of each.

    Anyone of the game may call VerifyAuditLog, so ``detail`` names seqs, versions and seats,
    which every role sees, and never an action, which may hold a seat's concealed cards."""
    logged = iter(logged_actions)
    for number, entry in enumerate(accepted, start=1):
        where = f"entry {entry.seq} (accepted, version {entry.version})"
        values = next(logged, None)
        if values is None:
            return entry.seq, (
                f"{where} has no action in the game's log, which holds {number - 1} actions"
            )
        seq, version, seat, payload = values
        if version != entry.version:
            return entry.seq, (
                f"{where} does not match the game's log: its action {number} (log row {seq})"
                f" has version {version}"
            )
        if seat != entry.seat:
            return entry.seq, (
                f"{where} does not match the game's log: log row {seq} has that action by"
                f" seat {seat}, the entry by seat {entry.seat}"
            )
        try:
            action = orjson.loads(payload)
        except (ValueError, TypeError):  # orjson.JSONDecodeError is a ValueError
            return entry.seq, f"{where}: the game's log row {seq} cannot be read"
        if action != entry.action:
            return entry.seq, (
                f"{where} does not match the game's log: log row {seq} holds another action"
            )
    extra = next(logged, None)
    if extra is not None:
        return entries + 1, (
            f"the game's log has an action at version {extra[1]} (log row {extra[0]}) that no"
            " accepted entry records"
        )
    return None


@dataclass(frozen=True)
class BackupReport:
    """What ``backup`` copied and what the copy's own checks found."""

    games: int
    in_progress: int
    log_rows: int
    audit_entries: int
    integrity: str  # PRAGMA integrity_check's first line: "ok" when the file is sound
    broken_audit_logs: tuple[tuple[str, str], ...]  # (game id, what VerifyAuditLog would say)

    @property
    def sound(self) -> bool:
        return self.integrity == "ok" and not self.broken_audit_logs


def downgrade(path: str | Path, version: int) -> int:
    """Take the database at ``path`` back to schema ``version`` (1 or more) in one
    transaction; return the schema it had. Refused while a server serves it.

    An older release refuses a newer schema ("has schema version 4; this code knows 3"), so
    rolling a release back needs this, run with the newer release, which knows how to undo its
    own migrations. Starting the newer release again migrates the database forward, as on its
    first start.

    It holds the serving lock (without waiting for it) while it works: a server still running
    would go on serving a schema it does not know (its statements naming columns that are gone)
    and would not notice, so the downgrade refuses instead; and a server starting meanwhile is
    refused rather than migrating the database forward under it.
    """
    path = Path(path)
    if not path.is_file():
        raise StoreError(f"no database at {path}")
    lock = _take_serving_lock(path, "downgrade")
    try:
        return _downgrade_unserved(path, version)
    finally:
        os.close(lock)


def _downgrade_unserved(path: Path, version: int) -> int:
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            (current,) = conn.execute("PRAGMA user_version").fetchone()
            check_downgrade(str(path), current, version, SCHEMA_VERSION)
            for undone in range(current - 1, version - 1, -1):
                for statement in DOWNGRADES[undone]:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {int(version)}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise StoreError(f"cannot downgrade {path}: {exc}") from exc
    finally:
        conn.close()
    return int(current)


def backup(source: str | Path, destination: str | Path) -> BackupReport:
    """Copy the database at ``source`` to the new file ``destination`` while a server may be
    writing to it, then check the copy.

    Copying the file itself is not safe while a server runs: the WAL holds committed
    transactions the main file does not have yet, and the two cannot be copied at one instant.
    SQLite's online backup copies the database as of one read transaction, in one step: in WAL
    mode that does not stop the server's writers, and a step-by-step copy would start again
    after every commit the server made meanwhile (under steady play it might never finish). So
    the copy holds exactly the transactions committed before it began: every action
    acknowledged by then, none half-written.

    The copy is written beside ``destination``, in a new file of its own (``_new_partial``), and
    renamed onto it only once complete and flushed, so ``destination`` is never a partial file.
    It is then checked, as a restore would need it: ``PRAGMA integrity_check`` and every game's
    audit chain. A copy that fails a check is kept (it is what the source held) and the report
    says what failed.

    Ctrl-C (KeyboardInterrupt) raises ``BackupInterrupted``, which says whether
    ``destination`` holds the whole copy (stopped once the copy had its name) or nothing.
    """
    source, destination = Path(source), Path(destination)
    if not source.is_file():
        raise StoreError(f"no database at {source}")
    if destination.exists():
        raise StoreError(f"{destination} already exists; give a new file")
    if not destination.parent.is_dir():
        raise StoreError(f"no directory {destination.parent} for {destination}")
    copy_file: list[tuple[int, int]] = []  # the copy's (device, inode), once it is made
    try:
        return _backup(source, destination, copy_file)
    except KeyboardInterrupt as stop:
        raise BackupInterrupted(destination, _is_copy(destination, copy_file)) from stop


class BackupInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped ``backup`` (``pinochle-referee backup`` turns SIGTERM and SIGHUP into it
    too). ``published``: ``destination`` holds the whole, flushed copy, not checked (it was
    stopped while the copy was checked, or as the copy took its name); otherwise nothing was
    written there, and the copy's temporary file is gone. A KeyboardInterrupt, so that what
    does not know it still ends as Ctrl-C does."""

    def __init__(self, destination: Path, published: bool) -> None:
        super().__init__(str(destination))
        self.destination = destination
        self.published = published


def _is_copy(destination: Path, copy_file: Sequence[tuple[int, int]]) -> bool:
    """Whether ``destination`` is the file the copy was written in (by a hard link to it, or
    renamed), rather than nothing or another program's file."""
    try:
        found = destination.stat()
    except OSError:
        return False
    return (found.st_dev, found.st_ino) in copy_file


def _backup(source: Path, destination: Path, copy_file: list[tuple[int, int]]) -> BackupReport:
    """``backup``'s work, once its arguments are checked; the copy's file is added to
    ``copy_file`` as soon as it exists."""
    partial: Path | None = None
    try:
        reader = sqlite3.connect(source, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
        try:
            (version,) = reader.execute("PRAGMA user_version").fetchone()
            if version == 0:
                # Another program's database (or an empty file) is no backup of a referee's:
                # copied, it was kept with "integrity cannot be checked ...; every audit log
                # intact", a report that contradicts itself.
                raise StoreError(f"{source} holds no referee database: nothing copied")
            with _stop_signals_held():  # Ctrl-C after the file is made would leave it behind
                partial = _new_partial(destination)
                made = partial.stat()
                copy_file.append((made.st_dev, made.st_ino))
            copy = sqlite3.connect(partial, isolation_level=None)
            try:
                reader.backup(copy)  # pages=-1: one step, one snapshot
                # One self-contained file, with no -wal beside it; the store turns WAL on
                # again when it opens the file.
                copy.execute("PRAGMA journal_mode = DELETE")
            finally:
                copy.close()
        finally:
            reader.close()
        with partial.open("rb+") as written:
            os.fsync(written.fileno())
        _publish(partial, destination)
    except BaseException as exc:
        # Whatever stopped it (a full disk at the flush, Ctrl-C), a backup that did not finish
        # leaves no file behind, and says why in one line.
        if partial is not None:
            partial.unlink(missing_ok=True)
        if isinstance(exc, sqlite3.Error | OSError):
            raise StoreError(f"cannot back up {source}: {exc}") from exc
        raise
    try:
        directory = os.open(destination.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except OSError as exc:
        raise StoreError(f"{destination} is written but may not survive a crash: {exc}") from exc
    return _check_copy(destination)


_STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


@contextlib.contextmanager
def _stop_signals_held() -> Iterator[None]:
    """Hold back Ctrl-C (and SIGTERM, SIGHUP) for the block; one that came meanwhile is
    delivered as it ends. Between the moment ``_new_partial`` makes the copy's file and the
    moment ``backup`` knows its name, a KeyboardInterrupt left that empty ``.partial`` file
    behind, which nothing would remove."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


# What link() answers where the file system has no hard links (or no more for this file).
_NO_HARD_LINK = frozenset(
    {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS}
)


def _publish(partial: Path, destination: Path) -> None:
    """Give the finished copy its name, unless a file took that name meanwhile (a second
    backup to the same destination, started at the same moment: both found it free, and the
    later rename replaced the earlier copy without a word, where an existing destination is
    refused). A hard link fails when the name exists, in one step; the partial's name then goes.
    A file system without hard links gets the rename, checked just before."""
    try:
        os.link(partial, destination)
    except FileExistsError:
        raise StoreError(f"{destination} already exists; give a new file") from None
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINK:
            raise
        if destination.exists():
            raise StoreError(f"{destination} already exists; give a new file") from None
        os.replace(partial, destination)
        return
    partial.unlink()


def _new_partial(destination: Path) -> Path:
    """A new empty file beside ``destination`` for the copy to be written in, named
    ``DESTINATION.<random>.partial`` (``DESTINATION`` cut short when the whole would be longer
    than a name may be): created here (``O_EXCL``), so it is no other file. Was
    ``DESTINATION.partial``, deleted first when it existed and then written, so a file of that
    name (another user's, or a concurrent backup's copy half-written) was lost.

    Not ``tempfile.mkstemp``: its file is readable by its owner alone (0600), so the backup
    would be too, where it has always had the permissions SQLite gives a new database (0644
    less the umask), as the server's own database has; serving a restore from another account
    would be refused."""
    try:
        longest = os.pathconf(destination.parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        longest = 255
    while True:
        suffix = f".{secrets.token_hex(6)}.partial"
        # Shortened to fit the file system's longest name, with room for the journal SQLite
        # writes beside it (PARTIAL-journal): a destination whose name was within that of it
        # was refused ("File name too long", or SQLite's "unable to open database file").
        name = destination.name
        while name and len(os.fsencode(name + suffix + "-journal")) > longest:
            name = name[:-1]
        partial = destination.with_name(name + suffix)
        try:
            os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            continue  # taken (48 random bits): draw another name
        return partial


def _check_copy(path: Path) -> BackupReport:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    try:
        return _checked(conn)
    except sqlite3.Error as exc:  # not a referee database, or one too damaged to read
        return BackupReport(0, 0, 0, 0, f"cannot be checked: {exc}", ())
    finally:
        conn.close()


def _checked(conn: sqlite3.Connection) -> BackupReport:
    """The copy's integrity and every game's audit chain (``_verify_chain``, as VerifyAuditLog)."""
    (integrity,) = conn.execute("PRAGMA integrity_check").fetchone()
    games = conn.execute("SELECT game_id, over, audit_seq, audit_head FROM games").fetchall()
    ((log_rows,),) = conn.execute("SELECT COUNT(*) FROM log").fetchall()
    broken = []
    audit_entries = 0
    for game_id, _over, head_seq, head_hash in games:
        verdict = _verified(conn, game_id, head_seq, head_hash)
        audit_entries += verdict.entries
        if not verdict.intact:
            broken.append((str(game_id), verdict.detail))
    return BackupReport(
        games=len(games),
        in_progress=sum(1 for _, over, _, _ in games if not over),
        log_rows=int(log_rows),
        audit_entries=audit_entries,
        integrity=str(integrity),
        broken_audit_logs=tuple(broken),
    )
