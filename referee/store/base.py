"""The storage interface: an event-sourced game store with the version check inside the commit.

Every implementation (embedded SQLite, PostgreSQL) keeps, per game:

* ``games``: the game's creation data (variant, options, first dealer, deal source, token
  hashes) and its current ``version`` (accepted actions so far);
* ``log``: every deal and accepted action in order (``seq`` from 1, unique per game), each with
  the events it produced; folding the log through the engine rebuilds the game exactly;
* ``requests``: the stored response of each ``request_id`` (idempotent retries), until
  ``forget_responses`` deletes a finished game's;
* ``audit``: every request, accepted or refused, in a SHA-256 hash chain.

``commit`` writes an accepted action's log rows, its idempotency record and its audit entry in
one transaction that first checks the stored version equals ``expected_version`` (an
``UPDATE ... WHERE version = ?`` that must touch one row), so two replicas can never both apply
an action at the same version, and that the game is not over (``games.over``, set by the
commit that ended it), so nothing is ever appended to a finished game's log. Nothing is
acknowledged before that transaction commits.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import orjson


def check_downgrade(where: str, current: int, version: int, known: int) -> None:
    """Refuse a downgrade of ``where`` (at schema ``current``) to ``version`` that this code,
    which knows schemas up to ``known``, cannot make (both stores' ``downgrade``)."""
    if version < 1:
        raise StoreError(f"schema version {version}: a database goes back to version 1 at most")
    if current > known:
        raise StoreError(
            f"{where} has schema version {current}; this code knows {known}:"
            " downgrade it with the release that made it"
        )
    if version > current:
        raise StoreError(
            f"{where} has schema version {current}; a downgrade goes to an older one"
            " (serve migrates a database forward)"
        )


def schema_not_current(where: str, current: int, known: int) -> str:
    """Why a store opened without creating or migrating (``export``) refuses ``where``, at
    schema ``current``: it holds no referee tables, or another release's schema."""
    if current == 0:
        return f"{where} holds no referee database"
    return (
        f"{where} has schema version {current}; this code knows {known}: read it with the"
        " release that serves it (serve migrates a database forward)"
    )


def is_postgres_url(db: str) -> bool:
    """Whether ``--db`` names a PostgreSQL database (a URL) rather than a SQLite file."""
    return db.startswith(("postgresql://", "postgres://"))


# A libpq keyword followed by "=": the mark of a key=value connection string.
_CONNINFO_KEYWORD = re.compile(
    r"(?:^|\s)(?:host|hostaddr|port|dbname|user|password|passfile|service|sslmode)\s*="
)


def is_conninfo(db: str) -> bool:
    """Whether ``db`` is a libpq ``key=value`` connection string (``host=db password=...``),
    which ``--db`` does not take, rather than a file name or a URL."""
    return not is_postgres_url(db) and _CONNINFO_KEYWORD.search(db) is not None


def database_argument(db: str) -> str:
    """``--db`` as an argparse type: a SQLite path or a PostgreSQL URL. A libpq ``key=value``
    connection string is refused without being quoted (exit 2): it was taken for a SQLite
    file name, so ``serve`` created a database of that name, served games nobody else could
    see, and wrote the string, password and all, on its ``serving`` log line."""
    if is_conninfo(db):
        raise argparse.ArgumentTypeError(
            "is a libpq key=value connection string, which is not taken here: give it as a"
            " postgresql://user:password@host:port/dbname URL (a file name would be SQLite)"
        )
    return db


class StoreError(Exception):
    """A storage failure (not a client mistake)."""


class VersionConflict(StoreError):
    """The game's stored version is not the one the commit expected."""

    def __init__(self, current: int) -> None:
        super().__init__(f"the game is at version {current}")
        self.current = current


class GameOver(StoreError):
    """The game ended (at ``version``): a store appends nothing to a finished game's log.

    The engine refuses every action after the last one before it reaches the store, so this
    is the store's own guard, and only a caller whose view of the game disagrees with the
    store's meets it. Not a VersionConflict: the version is the one expected, and catching up
    with the log would not change the answer."""

    def __init__(self, version: int) -> None:
        super().__init__(f"the game ended at version {version}")
        self.version = version


class GameExists(StoreError):
    """A game with this id already exists."""


class SchemaChanged(StoreError):
    """The store stopped serving: its schema was changed under it (a downgrade while it held
    no serving lock; see :mod:`referee.store.postgres`). Raised for every read and write from
    then on, before it takes a connection, so nothing is written; the server answers
    UNAVAILABLE, reason ``STORE_SCHEMA_CHANGED``, and its readiness turns NOT_SERVING. The
    message says what was found, for the log; the store logged it once when it stopped."""


class TooManyGames(StoreError):
    """``create_game`` refused the game: ``limit`` games are active already (the server's
    ``--max-games``). Nothing was written."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"{limit} games are active already")
        self.limit = limit


class UnknownGame(StoreError):
    """No game with this id."""


class UnreadableAuditEntry(StoreError):
    """The audit row at ``seq`` cannot be read back as an entry: a column holds what no entry
    holds (text that is not JSON, a number no double holds, a value of another type), so it
    was changed in the database. Retrying will not help: it is data lost, not a failure to
    reach the store (``audit_log``; ``verify_audit_log`` reports such a row as its first bad
    entry instead)."""

    def __init__(self, seq: int, detail: str) -> None:
        super().__init__(f"audit entry {seq} cannot be read: {detail}")
        self.seq = seq
        self.detail = detail


@dataclass(frozen=True, slots=True)
class GameRecord:
    """What the store keeps about a game besides its log."""

    game_id: str
    variant: str
    options: Mapping[str, object]
    first_dealer: int
    deal_source: Mapping[
        str, object
    ]  # secret: {"mode": "secure"} | {"mode": "seed", ...} | {"mode": "given", ...}
    seat_token_hashes: Sequence[str]
    spectator_token_hash: str
    adjudicator_token_hash: str
    players: Sequence[str] = ()
    created_at: float = 0.0
    version: int = 0
    over: bool = False
    # The wall-clock time of its last accepted action (its creation before the first), as the
    # store keeps it (``games.last_active_at``); what makes a game idle (``--idle-after``).
    last_active_at: float = 0.0


# A place in the listing order (created_at, then game_id, compared as UTF-8 bytes).
GamePosition = tuple[float, str]


class GameSummary(NamedTuple):
    """What ``list_game_summaries`` reads of a game: its public fields only (never its tokens'
    hashes, options or deal source), so nothing secret is read to list games."""

    game_id: str
    variant: str
    version: int
    over: bool
    created_at: float
    last_active_at: float
    players: Sequence[str]

    @property
    def position(self) -> GamePosition:
        """Where it stands in the listing order: the ``after`` that lists the games after it."""
        return (self.created_at, self.game_id)


# LogRow, AuditRow and Commit are NamedTuples, like the engine's states: every action makes each
# of them, and a frozen dataclass's constructor (one object.__setattr__ per field) cost several
# times as much (bench/instructions.py).


class LogRow(NamedTuple):
    """One deal (``seat`` None, ``payload`` the deal and its salt) or one accepted action."""

    seq: int
    version: int  # the game version after this row (a deal does not change it)
    kind: str  # "deal" | "action"
    seat: int | None
    payload: Mapping[str, object]
    events: Sequence[Mapping[str, object]]  # Event.to_json() of what this row produced


class AuditRow(NamedTuple):
    """One request in the audit log. ``hash`` chains it to the row before (A.10, issue 4)."""

    seq: int
    time: float  # seconds since 1970; -0.0 is stored as 0.0 (hashed as stored, on every store)
    role: str  # "seat" | "spectator" | "adjudicator" | "anonymous"
    seat: int | None
    rpc: str
    action: Mapping[str, object] | None  # the full action JSON (the adjudicator's view)
    public_action: Mapping[str, object] | None  # what any seat may see of it
    outcome: str  # "accepted" | "refused"
    code: str  # A.5 code or gRPC status name for refusals, "" when accepted
    request_id: str
    version: int
    previous_hash: str
    hash: str = ""

    def content(self) -> dict[str, object]:
        """The fields the hash covers, in a canonical JSON form."""
        return {
            "seq": self.seq,
            "time": self.time,
            "role": self.role,
            "seat": self.seat,
            "rpc": self.rpc,
            "action": self.action,
            "public_action": self.public_action,
            "outcome": self.outcome,
            "code": self.code,
            "request_id": self.request_id,
            "version": self.version,
            "previous_hash": self.previous_hash,
        }

    def computed_hash(self) -> str:
        return hashlib.sha256(canonical_json(self.content())).hexdigest()


def compact_json(value: object) -> str:
    """Compact JSON text (orjson), int keys written as strings. orjson's non-str-key option
    costs half as much again on every call and the hot path's data (views, events, actions) has
    str keys only, so it is used only when the plain encoder refuses a key; the text is the
    same either way."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # a non-str key
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


# The clock's readings (seconds since 1970) print the same in both encoders; a float outside
# this range prints with an exponent, which json writes "1e-07" and orjson "1e-7".
_PLAIN_FLOATS = (1e-4, 1e16)


def canonical_json(content: Mapping[str, object]) -> bytes:
    """``json.dumps(content, sort_keys=True, separators=(",", ":"))`` in UTF-8: the text an
    audit row's hash covers, which clients in other languages reproduce to verify the chain.

    orjson writes the same bytes ten times faster whenever its output is printable ASCII
    (json escapes everything else as \\uXXXX, DEL included; orjson writes it raw) and the
    row's only float, ``time``, prints without an exponent; otherwise json writes it.
    (tests/test_store.py compares both on random rows.)
    """
    stamp = content.get("time")
    if (
        not isinstance(stamp, float)
        or stamp == 0
        or _PLAIN_FLOATS[0] <= abs(stamp) < _PLAIN_FLOATS[1]
    ):
        try:
            fast = orjson.dumps(content, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # an integer beyond 64 bits
            pass
        else:
            if fast.isascii() and b"\x7f" not in fast:
                return fast
    return json.dumps(content, sort_keys=True, separators=(",", ":")).encode("utf-8")


GENESIS_HASH = "0" * 64
# The migration that adds ``games.last_active_at`` fills it for existing games in progress with
# this SQL expression (the same in both stores): the time of the last accepted request in the
# audit log, or the creation time of a game with none, so games abandoned before the upgrade
# count as idle. Finished games never count, so they are left alone (a large store's migration
# would spend most of its time on them).
LAST_ACCEPTED_OR_CREATED = (
    "COALESCE((SELECT MAX(time) FROM audit WHERE audit.game_id = games.game_id"
    " AND audit.outcome = 'accepted'), created_at)"
)

# GameStore.forget_responses: games per call, so one call's transaction stays short (a
# finished game stores about 1.7 KB of responses per action).
FORGET_BATCH = 20

# Yielded by ``GameStore.changes`` when changes may have gone unannounced (never a game id).
ALL_GAMES = ""


class Commit(NamedTuple):
    """An accepted action and everything that must become durable with it."""

    game_id: str
    expected_version: int
    rows: Sequence[LogRow]  # the action row, then a deal row when the action started a new hand
    audit: AuditRow  # seq/previous_hash/hash are filled in by the store inside the transaction
    request_id: str
    response: bytes  # the serialized response returned to a retry of request_id
    over: bool = False

    def checked_version(self) -> int:
        """The version this commit makes, after checking its shape (every store does this).

        Raises ValueError for a commit no store may write: no request id, no action row, a
        row whose version is not ``expected_version + 1``, or an audit entry that is not the
        action row's, accepted: VerifyAuditLog compares each accepted entry with the game's
        log (``_against_log`` in referee/store/sqlite.py) on the strength of this check.
        """
        if not self.request_id:
            raise ValueError("a commit needs a request_id")
        if not self.rows or self.rows[0].kind != "action":
            raise ValueError("a commit needs its action's log row, first")
        new_version = self.expected_version + 1
        for row in self.rows:  # a loop, not any() over a generator: hot path, one or two rows
            if row.version != new_version:
                raise ValueError(
                    f"every row of a commit at {self.expected_version} has version {new_version}"
                )
        action, audit = self.rows[0], self.audit
        if (
            audit.outcome != "accepted"
            or audit.version != new_version
            or audit.seat != action.seat
            or audit.action != action.payload
        ):
            raise ValueError(
                "a commit's audit entry is its action row's: accepted, with its action, seat"
                " and version"
            )
        return new_version


def check_refusal(audit: AuditRow) -> None:
    """Raise ValueError unless ``audit`` is a refused request's entry (``record_refusal`` of
    both stores): an accepted entry is written only with its action row, by ``commit``."""
    if audit.outcome != "refused":
        raise ValueError(f"record_refusal writes refused entries, not {audit.outcome!r} ones")


@dataclass(frozen=True, slots=True)
class AuditVerification:
    intact: bool
    entries: int
    first_bad_seq: int = 0
    detail: str = ""


class GameStore(Protocol):
    """The small interface every store implements. All methods are coroutines."""

    async def open(self) -> None:
        """Create or migrate the schema (idempotent) and get ready."""

    async def close(self) -> None: ...

    async def create_game(
        self,
        game: GameRecord,
        first_rows: Sequence[LogRow],
        *,
        max_active: int | None = None,
        active_since: float | None = None,
    ) -> None:
        """Store a new game and its first deal row(s) in one transaction (GameExists if taken).

        With ``max_active``, the same transaction first counts the other active games as
        ``count_active_games(active_since)`` does and refuses the game (TooManyGames) when
        there are that many already. Creations are serialised around that count, whatever
        process makes them (PostgreSQL replicas included), so concurrent creations can never
        together pass the cap: each counts the games of every creation committed before it.
        """

    async def get_game(self, game_id: str) -> GameRecord:
        """The game's record with its current version (UnknownGame if none)."""

    async def load_log(self, game_id: str, after_seq: int = 0) -> list[LogRow]:
        """Log rows with seq > after_seq, in order (UnknownGame if no such game, whatever
        ``after_seq``: [] means the game has no rows after it, never that it does not exist)."""

    def commit(self, commit: Commit) -> Awaitable[AuditRow]:
        """Apply ``commit`` atomically; VersionConflict(current) when the version moved,
        GameOver(version) when the game has ended (checked after the version, so a late copy
        of the commit that ended it is a VersionConflict, which finds its stored response).

        Resolves to the audit row as stored (with seq and hashes). An awaitable rather than a
        coroutine so that a store may queue the write at once and hand back its own future:
        the game manager awaits it without a task of its own (the hot path of every action).
        """

    async def record_refusal(self, game_id: str, audit: AuditRow) -> AuditRow:
        """Append a refused request to the audit log (its own transaction)."""

    async def stored_response(self, game_id: str, request_id: str) -> bytes | None:
        """The response committed earlier for ``request_id``, if any (and not forgotten)."""

    async def forget_responses(self, ended_before: float, limit: int = FORGET_BATCH) -> int:
        """Delete the stored responses of at most ``limit`` games that ended before
        ``ended_before`` (the wall clock of their last accepted action), oldest first; how
        many games. A retry that late is answered as a new request would be; the responses
        were most of what a finished game stored (the log and the audit log stay)."""

    async def audit_log(
        self, game_id: str, after_seq: int = 0, limit: int = 1000
    ) -> list[AuditRow]:
        """Audit rows with seq > after_seq, in order, at most ``limit`` (UnknownGame if no
        such game, as ``load_log``; UnreadableAuditEntry for the first row that cannot be
        read back)."""

    async def verify_audit_log(self, game_id: str) -> AuditVerification:
        """Recompute the hash chain and report the first row that does not match."""

    async def list_games(self, active_only: bool = False) -> list[str]:
        """Ids of stored games (active: not over)."""

    async def list_game_summaries(
        self,
        *,
        after: GamePosition | None = None,
        limit: int = 100,
        over: bool | None = None,
        variant: str | None = None,
    ) -> list[GameSummary]:
        """At most ``limit`` games, ordered by creation time then game id (compared as UTF-8
        bytes on every store), strictly after ``after`` (None: from the first), only those whose
        ``over`` and ``variant`` are as given (None: any). Keyset paging: the next page starts
        after the last summary's ``position``, so a game is never listed twice nor skipped
        while other games are created or end, whatever changed between the pages (an offset
        would shift with every game inserted before it)."""

    async def ping(self) -> None:
        """Read the database once, cheaply; StoreError when it cannot be reached (readiness)."""

    async def count_active_games(
        self, active_since: float | None = None, excluding: Collection[str] = ()
    ) -> int:
        """Games not over; with ``active_since``, only those whose last accepted action (or
        creation, before the first) was at or after that time (the wall clock of
        ``GameRecord.created_at`` and ``AuditRow.time``). Idle games still exist and play on:
        they only stop counting against the server's cap of active games.

        The games named in ``excluding`` are left out: games whose write is under way (the
        caller's creations, and actions that may end or wake a game), which the caller counts
        itself, whether or not their commits have landed when the count is read."""

    def changes(self) -> AsyncIterator[str]:
        """Ids of games that another process changed, as they change (may never yield).

        PostgreSQL wakes replicas with LISTEN/NOTIFY; the log table stays the truth, so a
        replica that hears a game id folds the new rows in from ``load_log``. ``ALL_GAMES``
        means announcements may have been lost (the listener reconnected): every game the
        replica holds must be checked. An embedded store has no other writer and yields nothing.
        """
