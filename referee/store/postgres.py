"""The shared store: PostgreSQL, for several stateless replicas on one database.

Connections
    An :class:`psycopg_pool.AsyncConnectionPool` of autocommit connections (transactions are
    explicit), so many games read and commit in parallel. With ``schema`` every connection sets
    ``search_path`` to that schema (created at ``open()`` if missing); without it the tables live
    in the connection's ``current_schema()`` (the URL may set ``options=-csearch_path=...``).

Schema
    The same tables as the SQLite store (``games`` with ``version``, ``over`` and the audit head;
    ``log`` and ``audit`` keyed by ``(game_id, seq)``; ``requests`` keyed by
    ``(game_id, request_id)``). JSON columns are ``json`` (validated, stored verbatim, so the
    audit hash recomputed later sees exactly the text that was hashed). ``schema_migrations``
    records the applied :data:`MIGRATIONS`; ``open()`` applies the missing ones, each in its own
    transaction that first takes a transaction-scoped advisory lock for the schema, so replicas
    starting together apply each step exactly once.

Writes
    ``commit`` is one transaction: ``SELECT ... FOR UPDATE`` of the game row (commits of one
    game queue there, whatever replica sends them), the version check and the game-over check
    on that locked row, ``UPDATE games ... WHERE version = %s`` that must touch one row, the log
    rows (their primary key ``(game_id, seq)`` refuses a second writer of a seq), the
    idempotency record (a duplicate ``request_id`` is a :class:`VersionConflict`), the chained
    audit row, and ``pg_notify`` on the schema's channel, which PostgreSQL delivers only when
    (and if) the transaction commits. Nothing is acknowledged before ``COMMIT`` returns
    (``synchronous_commit`` is left at its default, ``on``).

    ``create_game`` with a cap of active games first takes a transaction-level advisory lock
    (:data:`CREATION_LOCK`, the schema name's hash) and only then counts the active games, in
    a statement of its own: under READ COMMITTED that statement's snapshot is taken after the
    lock was granted, so it sees every creation that held the lock before (a lock is released
    only once its transaction's commit is visible). Creations are thus counted one after
    another across every replica, and the cap is never passed; the lock is held for the count,
    the inserts and the COMMIT, and a refused creation writes nothing. Within one store, such
    creations wait for one another before taking a pooled connection, so a burst of
    CreateGames waits in the process rather than holding the pool's connections at the lock,
    away from the actions (and at most one per replica waits at the lock, well within the
    session's ``lock_timeout``).

    Within one store, writes of the same game run in the order they were submitted, one at a
    time, each as its own task: cancelling a caller does not withdraw a write it submitted
    (a retry of its request_id then finds the stored response), and ``close()`` finishes them.

Change notifications
    ``changes()`` holds one dedicated connection that ``LISTEN``s on the channel and yields the
    game ids other stores commit. Notifications sent while nobody listened are lost, so after
    every (re)connection it first yields the id of every active game; the log stays the truth.

Serving lock
    A serving store (every replica) holds a session-level *shared* advisory lock keyed on its
    schema (:data:`SERVING_LOCK`, the schema name's hash) for as long as it is open, and
    ``downgrade`` refuses unless it gets the same lock exclusively, at once: a downgrade under
    running replicas left them serving a schema they do not know. Replicas share the lock, so
    they never wait for one another; a replica that crashes or is killed loses its session and
    with it the lock, so nothing stale is left to clean up.

    The lock lives on the listening connection, not a connection of its own: ``open()`` takes
    it on the connection that checked or migrated the schema, under the migration lock (so no
    downgrade slips in between the check and the lock), and hands that connection to the first
    ``changes()`` as its listener; whenever the listener connects again (after a failure, a
    restart of PostgreSQL) it takes the lock again before it listens. That connection already
    lives as long as the server, is watched by a keep-alive and is replaced when it fails, so
    the lock follows it at no cost of a connection per replica; a connection of its own would
    need all of that again. While the listener is reconnecting the replica holds no lock (its
    watchers are blind then too), and a downgrade that lands in that gap is not refused.

    It is caught once the listener has the lock again: the new connection takes it first
    (waiting, without the session's lock timeout, for a downgrade under way to end), then
    reads the schema's version. Older than this code's (taken back, or the tables dropped),
    the store stops serving it for good (``_stop_serving``): one error in the log, the lock
    let go, and every read and write refused with :class:`SchemaChanged` before it takes a
    connection, so the server's readiness turns NOT_SERVING and its calls are answered
    UNAVAILABLE; ``changes()`` raises it too, and the server ends its watch streams. A newer
    version is served on (a rolling upgrade, see :data:`MIGRATIONS`).

    What remains is the gap itself: writes made between the end of the listener's session
    and that check (the pause before reconnecting, 0.25 s at first and longer while it
    fails) still run. Every downgrade step alters ``games`` (dropping a column or an index
    takes the table's ACCESS EXCLUSIVE lock) and every write starts on a ``games`` row, so a
    write runs wholly before the downgrade, which keeps every row, or wholly after it, on the
    older schema: there it fails if it writes a column that is gone (UNAVAILABLE, nothing
    written) or stores rows the older schema holds as its own. The downgrade waits for a
    write under way (past its lock timeout, 2 s, it fails and changes nothing); a write begun
    while the downgrade runs waits for it (past its own lock timeout it fails, nothing
    written). Nothing acknowledged is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from functools import partial
from typing import Any, TypeVar
from urllib.parse import unquote

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import TupleRow
from psycopg.types.string import TextLoader
from psycopg_pool import AsyncConnectionPool

from referee.store.base import (
    ALL_GAMES,
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
    SchemaChanged,
    StoreError,
    TooManyGames,
    UnknownGame,
    VersionConflict,
    check_downgrade,
    check_refusal,
    schema_not_current,
)
from referee.store.sqlite import (
    _AUDIT_COLUMNS,
    _GAME_COLUMNS,
    _GAME_READ_COLUMNS,
    _LOGGED_ACTION_COLUMNS,
    _SUMMARY_COLUMNS,
    _audit_params,
    _audit_rows,
    _AuditDraft,
    _game_params,
    _game_record,
    _game_summary,
    _log_params,
    _log_row,
    _numbered_log,
    _stored_time,
    _verify_chain,
)

T = TypeVar("T")
Connection = psycopg.AsyncConnection[TupleRow]

log = logging.getLogger(__name__)

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 0 -> 1: the first schema.
    (
        """
        CREATE TABLE games (
            game_id text PRIMARY KEY,
            variant text NOT NULL,
            options json NOT NULL,
            first_dealer integer NOT NULL,
            deal_source json NOT NULL,
            seat_token_hashes json NOT NULL,
            spectator_token_hash text NOT NULL,
            adjudicator_token_hash text NOT NULL,
            players json NOT NULL,
            created_at double precision NOT NULL,
            version integer NOT NULL CHECK (version >= 0),
            over boolean NOT NULL,
            audit_seq integer NOT NULL DEFAULT 0,
            audit_head text NOT NULL
        )
        """,
        "CREATE INDEX games_active ON games (game_id) WHERE NOT over",
        """
        CREATE TABLE log (
            game_id text NOT NULL REFERENCES games (game_id),
            seq integer NOT NULL CHECK (seq >= 1),
            version integer NOT NULL,
            kind text NOT NULL,
            seat integer,
            payload json NOT NULL,
            events json NOT NULL,
            PRIMARY KEY (game_id, seq)
        )
        """,
        """
        CREATE TABLE requests (
            game_id text NOT NULL REFERENCES games (game_id),
            request_id text NOT NULL CHECK (request_id <> ''),
            response bytea NOT NULL,
            PRIMARY KEY (game_id, request_id)
        )
        """,
        """
        CREATE TABLE audit (
            game_id text NOT NULL REFERENCES games (game_id),
            seq integer NOT NULL CHECK (seq >= 1),
            time double precision NOT NULL,
            role text NOT NULL,
            seat integer,
            rpc text NOT NULL,
            action json,
            public_action json,
            outcome text NOT NULL,
            code text NOT NULL,
            request_id text NOT NULL,
            version integer NOT NULL,
            previous_hash text NOT NULL,
            hash text NOT NULL,
            PRIMARY KEY (game_id, seq)
        )
        """,
    ),
    # 1 -> 2: the time of the game's last accepted action (its creation before the first), so
    # that games nobody plays stop counting as active (count_active_games's active_since).
    # Alone in its transaction, which holds the table's exclusive lock: adding a column with a
    # default that is not volatile changes no row (PostgreSQL 11+), so it takes no time. The
    # default is the time of the insert: during a rolling upgrade, replicas of the previous
    # version create games without the column, and those are not idle.
    (
        "ALTER TABLE games ADD COLUMN last_active_at double precision NOT NULL"
        " DEFAULT extract(epoch FROM now())::double precision",
    ),
    # 2 -> 3: fill it for the games in progress from their audit logs, and index it. This
    # transaction locks only those rows (and blocks writes to the table while the index is
    # built), so replicas of the previous version keep serving the other games meanwhile.
    (
        f"UPDATE games SET last_active_at = {LAST_ACCEPTED_OR_CREATED} WHERE NOT over",
        "CREATE INDEX games_active_since ON games (last_active_at) WHERE NOT over",
    ),
    # 3 -> 4: whether a finished game still keeps its stored responses (forget_responses).
    # Alone, like 1 -> 2: a constant default changes no row, so the table's lock is brief.
    ("ALTER TABLE games ADD COLUMN responses_kept boolean NOT NULL DEFAULT true",),
    # 4 -> 5: the games that ended before 2 -> 3 kept the time of that migration as their last
    # activity; their responses are forgotten by the time of their last accepted action. Only
    # finished games' rows are locked, which nothing writes.
    (
        f"UPDATE games SET last_active_at = {LAST_ACCEPTED_OR_CREATED} WHERE over",
        "CREATE INDEX games_ended_with_responses ON games (last_active_at)"
        " WHERE over AND responses_kept",
    ),
    # 5 -> 6: the listing order (list_game_summaries: ListGames), ids compared as bytes as
    # SQLite compares them (COLLATE "C"), so that a page is read from the index where it
    # starts. Writes to games wait while it is built, as for 2 -> 3.
    ('CREATE INDEX games_created ON games (created_at, game_id COLLATE "C")',),
)
SCHEMA_VERSION = len(MIGRATIONS)
# What takes a schema back to an older version (``downgrade``), so that an older release can
# be started again after an upgrade: DOWNGRADES[v] undoes MIGRATIONS[v], from version v + 1 to
# v. Values a newer version filled in columns the older one has stay as they are (they are
# valid there). Version 1 is as far back as it goes: undoing it would delete every game.
DOWNGRADES: tuple[tuple[str, ...], ...] = (
    (),
    ("ALTER TABLE games DROP COLUMN last_active_at",),
    ("DROP INDEX games_active_since",),
    ("ALTER TABLE games DROP COLUMN responses_kept",),
    ("DROP INDEX games_ended_with_responses",),
    ("DROP INDEX games_created",),
)

# The first key of the migration lock (pg_advisory_xact_lock(int, int)); the second is the
# schema name's hash, so stores of different schemas do not wait for each other.
MIGRATION_LOCK = 0x50524546
# The first key of the serving lock (see the module docstring), the second as above.
SERVING_LOCK = 0x50524553
# The first key of the lock that serialises capped creations (see the module docstring), the
# second as above: the replicas of one schema share one cap.
CREATION_LOCK = 0x50524543
CHANNEL_PREFIX = "pinochle_referee"
DEFAULT_CONNECT_TIMEOUT = 10.0
LISTEN_POLL_SECONDS = 0.5  # how often the listener looks up from waiting (close(), keep-alive)
LISTEN_KEEPALIVE_SECONDS = 15.0  # a silent listener checks its connection this often
# ... and gives it this long to answer. A connection a firewall or NAT dropped without a reset
# does not fail: its check would wait for TCP's retransmission timeout (a quarter of an hour),
# hearing nothing meanwhile, so replicas' watchers would go blind without a word.
LISTEN_KEEPALIVE_TIMEOUT_SECONDS = 10.0
RECONNECT_MAX_SECONDS = 10.0
POOL_TIMEOUT_SECONDS = 10.0  # the longest a request waits for a pooled connection
# libpq settings for every connection, unless the URL sets its own. The TCP liveness ones: a
# connection whose peer vanished without a word (the database host gone, a partition)
# otherwise holds a request until its deadline and its cancel: TCP keepalives find an idle one
# dead within about a minute (30 s idle, then 3 probes 10 s apart) and tcp_user_timeout gives
# up on one whose sent data has gone unacknowledged for 30 s, so the pool replaces it sooner.
CONNECTION_DEFAULTS = {
    # How the store's sessions show in pg_stat_activity, for a DBA looking for them.
    "application_name": "pinochle-referee",
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",
}
# Per connection: how long a statement may wait for a lock or run, and an open transaction idle.
SESSION_LIMITS = (
    ("lock_timeout", "2s"),  # a game row is locked for one commit's few milliseconds
    ("statement_timeout", "15s"),
    ("idle_in_transaction_session_timeout", "30s"),
    # An action is acknowledged only once durable (issue 4): a database or role configured
    # with synchronous_commit = off would otherwise lose acknowledged actions in a crash.
    ("synchronous_commit", "on"),
    # The writes rely on READ COMMITTED: once the game row's lock is granted, the row read is
    # the last writer's and each later statement sees its commit. Under a database's default
    # of REPEATABLE READ, the loser of two replicas committing at one version (or the second
    # of two refusals) failed "could not serialize access" instead of a VersionConflict.
    ("default_transaction_isolation", "read committed"),
    # Doubles come back exactly as written: an audit row's hash covers its time. Below 1 (the
    # default of PostgreSQL 12 and later; 0 before, or as a database or role may set it) a
    # double is printed with 15 digits, and every audit entry read back failed its hash.
    ("extra_float_digits", "3"),
)

_INSERT_GAME = (
    f"INSERT INTO games ({_GAME_COLUMNS}, audit_seq, audit_head, last_active_at)"
    " VALUES (%s, %s, %s::json, %s, %s::json, %s::json, %s, %s, %s::json, %s, %s, %s, 0, %s, %s)"
    " ON CONFLICT (game_id) DO NOTHING"
)
_INSERT_LOG = (
    "INSERT INTO log (game_id, seq, version, kind, seat, payload, events)"
    " VALUES (%s, %s, %s, %s, %s, %s::json, %s::json)"
)
_INSERT_AUDIT = (
    f"INSERT INTO audit (game_id, {_AUDIT_COLUMNS})"
    " VALUES (%s, %s, %s, %s, %s, %s, %s::json, %s::json, %s, %s, %s, %s, %s, %s)"
)


def channel_name(schema: str) -> str:
    """The LISTEN/NOTIFY channel of the tables in ``schema`` (at most 63 bytes)."""
    name = f"{CHANNEL_PREFIX}:{schema}"
    if len(name.encode("utf-8")) <= 63:
        return name
    return f"{CHANNEL_PREFIX}:{hashlib.sha256(schema.encode('utf-8')).hexdigest()[:40]}"


def describe(url: str) -> str:
    """``host:port/dbname`` of a connection string, without credentials."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the configured database"
    host = params.get("host") or "localhost"
    port = params.get("port") or 5432
    return f"{host}:{port}/{params.get('dbname') or ''}"


def with_defaults(url: str) -> str:
    """``url`` as a connection string with the :data:`CONNECTION_DEFAULTS` it does not set
    itself (the URL's own win)."""
    given = conninfo_to_dict(url)
    return make_conninfo(url, **{k: v for k, v in CONNECTION_DEFAULTS.items() if k not in given})


def _one_line(error: BaseException, hidden: Sequence[str] = ()) -> str:
    """``error``'s text on one line, with each of ``hidden`` (``secrets_of`` the URL) starred."""
    text = " ".join(str(error).split())
    for secret in hidden:
        text = text.replace(secret, "***")
    return text


_USERINFO = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://(?P<userinfo>[^/?#]*)@")
_PASSWORD_PARAMETER = re.compile(
    r"""(?:^|[?&\s])password\s*=\s*(?P<value>'(?:[^'\\]|\\.)*'|[^&\s]+)""", re.IGNORECASE
)


def secrets_of(url: str) -> list[str]:
    """The passwords ``url`` holds, as any error text might quote them, longest first: a URL's
    user information and its password, a ``password`` parameter of its query or of a
    ``key=value`` connection string, each as written and percent-decoded.

    Read with patterns, not a parser: libpq refuses a malformed URL quoting the part it cannot
    read, and that part may be the password (``unexpected spaces found in "pass word"``, or
    the whole URL for a bracket left open), so the store's messages, logged as
    ``start_failed``, printed the password of the very URLs a parser cannot take apart."""
    found: set[str] = set()
    match = _USERINFO.match(url.strip())
    if match is not None:
        userinfo = match["userinfo"]
        _, colon, password = userinfo.partition(":")
        if colon:  # a user name alone stays readable ("role ... does not exist")
            found |= {userinfo, password}
    for match in _PASSWORD_PARAMETER.finditer(url):
        value = match["value"]
        found.add(value)
        if value.startswith("'") and value.endswith("'") and len(value) > 1:
            found.add(value[1:-1])
    found |= {unquote(secret) for secret in found}
    return sorted((secret for secret in found if secret), key=len, reverse=True)


def _active_games_query(
    active_since: float | None, excluding: Collection[str]
) -> tuple[str, list[object]]:
    """``count_active_games``'s statement and parameters (``create_game``'s cap counts with it
    too); the partial indexes ``games_active_since`` and ``games_active`` hold only the games
    not over, which is all it reads."""
    query = "SELECT COUNT(*) FROM games WHERE NOT over"
    params: list[object] = []
    if active_since is not None:
        query += " AND last_active_at >= %s"
        params.append(active_since)
    # An id PostgreSQL text cannot hold matches no stored game: leaving it out changes
    # nothing, and sending it would fail the query.
    excluded = [game_id for game_id in excluding if "\x00" not in game_id]
    if excluded:
        query += " AND NOT (game_id = ANY(%s))"
        params.append(excluded)
    return query, params


async def _game_exists(conn: Connection, game_id: str) -> bool:
    cursor = await conn.execute("SELECT 1 FROM games WHERE game_id = %s", (game_id,))
    return await cursor.fetchone() is not None


def _games_page_query(
    after: GamePosition | None, limit: int, over: bool | None, variant: str | None
) -> tuple[str, list[object]]:
    """``list_game_summaries``' statement and parameters: a page in ``games_created``'s order
    (created_at, game_id as bytes), read from that index whatever the filter (the tests
    EXPLAIN this very statement)."""
    conditions: list[str] = []
    params: list[object] = []
    if after is not None:
        # games_created's order: ids compared as bytes, as SQLite compares them.
        conditions.append('(created_at, game_id COLLATE "C") > (%s, %s)')
        params += after
    if over is not None:
        conditions.append("over = %s")
        params.append(over)
    if variant is not None:
        conditions.append("variant = %s")
        params.append(variant)
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    params.append(max(limit, 0))
    return (
        f"SELECT {_SUMMARY_COLUMNS} FROM games{where}"
        ' ORDER BY created_at, game_id COLLATE "C" LIMIT %s',
        params,
    )


def _check_stored_id(game_id: str) -> None:
    """PostgreSQL text cannot hold U+0000, so no stored game has such an id: it is an unknown
    game, as in the SQLite store, not a failed statement."""
    if "\x00" in game_id:
        raise UnknownGame(game_id)


class PostgresStore:
    """:class:`referee.store.base.GameStore` on PostgreSQL (see the module docstring).

    Behaves like :class:`referee.store.sqlite.SqliteStore`: the same values come back, the
    same errors for unknown games, conflicts and malformed commits.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        create: bool = True,
        serving: bool = True,
    ) -> None:
        """``create=False`` opens only a schema already at this code's version, neither
        creating it (a mistyped ``--db-schema`` would otherwise get a new, empty one) nor
        migrating it (``export``: reading a game must not change the database).

        ``serving=False`` holds no serving lock (see the module docstring): ``export``, which
        only reads, does not stop a downgrade."""
        if min_size < 0 or max_size < max(min_size, 1):
            raise ValueError("need 0 <= min_size <= max_size and max_size >= 1")
        if schema is not None and not schema:
            raise ValueError("schema must be a name or None")
        self.url = url
        self._hidden = secrets_of(url)  # starred in every error text (_one_line)
        self.schema = schema
        self.min_size = min_size
        self.max_size = max_size
        self.connect_timeout = connect_timeout
        self.create = create
        self.serving = serving
        self.channel = ""  # known after open()
        self.schema_name = ""  # the schema the tables are in (self.schema or the default one)
        # The connection open() left holding the serving lock, until changes() takes it over.
        self._lock_holder: Connection | None = None
        self._origin = secrets.token_hex(8)  # marks this store's own notifications
        self._pool: AsyncConnectionPool[Connection] | None = None
        self._conninfo = url  # with_defaults(url), made at open()
        self._accepting = False
        self._closed = False
        self._tails: dict[str, asyncio.Task[Any]] = {}  # the last write submitted per game
        self._capped_creations = asyncio.Lock()  # one capped creation at a time (see above)
        self._pending: set[asyncio.Task[Any]] = set()
        self.listener_pid = 0  # the backend pid of the current changes() connection (tests)
        # Why the store stopped serving its schema (see the module docstring), or None.
        self._schema_lost: str | None = None

    def _said(self, error: BaseException) -> str:
        """``error``'s text on one line, with the passwords of this store's URL starred."""
        return _one_line(error, self._hidden)

    # -- life cycle ------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect, create or migrate the schema, and get ready (a second call does nothing)."""
        if self._closed:
            raise StoreError("the store is closed")
        if self._pool is not None:
            return
        try:
            self._conninfo = with_defaults(self.url)
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot open PostgreSQL at {describe(self.url)}: {self._said(exc)}"
            ) from exc
        pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
            self._conninfo,
            min_size=self.min_size,
            max_size=self.max_size,
            kwargs={"autocommit": True},
            configure=self._configure,
            # A connection PostgreSQL dropped (a restart, a killed backend) is found and
            # replaced when it is taken, instead of failing the request that drew it.
            check=AsyncConnectionPool.check_connection,
            timeout=POOL_TIMEOUT_SECONDS,
            open=False,
            name="pinochle-referee",
        )
        conn: Connection | None = None
        try:
            # One plain connection first: a failure says why (the pool would only time out).
            # A serving store keeps it: it holds the serving lock from here on.
            conn = await self._connect()
            await self._configure(conn)
            schema = await self._migrate(conn)
            await pool.open(wait=True, timeout=self.connect_timeout)
        except BaseException as exc:
            if conn is not None:
                await conn.close()
            await pool.close()
            if isinstance(exc, psycopg.Error):
                raise StoreError(
                    f"cannot open PostgreSQL at {describe(self.url)}: {self._said(exc)}"
                ) from exc
            raise
        if self.serving:
            self._lock_holder = conn
        else:
            await conn.close()
        self.schema_name = schema
        self.channel = channel_name(schema)
        self._pool = pool
        self._accepting = True

    async def close(self) -> None:
        """Finish every submitted write, then close the connections; changes() ends soon."""
        if self._closed:
            return
        self._closed = True
        self._accepting = False
        while self._pending:
            await asyncio.wait(list(self._pending))
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
        holder, self._lock_holder = self._lock_holder, None
        if holder is not None:
            await holder.close()

    async def _connect(self) -> Connection:
        return await psycopg.AsyncConnection.connect(
            self._conninfo, autocommit=True, connect_timeout=max(1, round(self.connect_timeout))
        )

    async def _configure(self, conn: Connection) -> None:
        # JSON comes back as its stored text; the shared row decoders parse it (exactly as
        # SQLite's, so both stores return equal values).
        conn.adapters.register_loader("json", TextLoader)
        if self.schema is not None:
            await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        # Bounded waits: a row lock held by a stuck session elsewhere, or a runaway statement,
        # fails this request (a StoreError: UNAVAILABLE, retryable) instead of holding one of
        # the pool's few connections for ever; an abandoned transaction cannot pin rows either.
        for setting, value in SESSION_LIMITS:
            await conn.execute(
                sql.SQL("SET {} = {}").format(sql.Identifier(setting), sql.Literal(value))
            )

    async def _lock_migrations(self, conn: Connection, purpose: str) -> str:
        """The schema's name (``self.schema``, else the connection's current one), with the
        migration lock taken for the rest of the transaction (migrations and downgrades of
        one schema run one at a time, whatever the process)."""
        schema = self.schema
        if schema is None:
            cursor = await conn.execute("SELECT current_schema()")
            row = await cursor.fetchone()
            schema = row[0] if row else None
            if schema is None:
                raise StoreError(
                    f"{describe(self.url)}: no schema {purpose}"
                    " (search_path names no existing schema)"
                )
        await conn.execute(
            "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (MIGRATION_LOCK, schema)
        )
        return schema

    async def _hold_serving_lock(self, conn: Connection, schema: str) -> None:
        """Take the serving lock of ``schema``, shared, for the rest of ``conn``'s session (a
        serving store; see the module docstring). It waits only for a downgrade under way."""
        if self.serving:
            await conn.execute(
                "SELECT pg_advisory_lock_shared(%s, hashtext(%s))", (SERVING_LOCK, schema)
            )

    @staticmethod
    async def _schema_version(conn: Connection) -> int:
        """The version of the schema in ``conn``'s search path: the last migration recorded,
        0 where there is no ``schema_migrations`` (no referee tables, or no such schema)."""
        cursor = await conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL")
        row = await cursor.fetchone()
        if not (row and row[0]):
            return 0
        cursor = await conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
        row = await cursor.fetchone()
        return int(row[0]) if row else 0

    async def _migrate(self, conn: Connection) -> str:
        """Apply the missing migrations, one transaction each; return the schema's name.

        Without the session's limits (``SESSION_LIMITS``): a migration may rewrite every game
        of a large store, and a replica starting meanwhile waits for it at the advisory lock.

        A serving store takes the serving lock here, under the migration lock that a downgrade
        takes too: no downgrade can come between the schema found current and the lock held.
        """
        serving_lock_held = False
        while True:
            async with conn.transaction():
                await conn.execute("SET LOCAL statement_timeout = 0")
                await conn.execute("SET LOCAL lock_timeout = 0")
                if not self.create:
                    schema = await self._check_current(conn)
                    await self._hold_serving_lock(conn, schema)
                    return schema
                schema = await self._lock_migrations(conn, "to create the tables in")
                if not serving_lock_held:  # a session lock: it outlives this transaction
                    await self._hold_serving_lock(conn, schema)
                    serving_lock_held = True
                if self.schema is not None:
                    cursor = await conn.execute(
                        "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)
                    )
                    if await cursor.fetchone() is None:
                        await conn.execute(
                            sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema))
                        )
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations ("
                    " version integer PRIMARY KEY,"
                    " applied_at timestamptz NOT NULL DEFAULT now())"
                )
                current = await self._schema_version(conn)
                if current > SCHEMA_VERSION:
                    raise StoreError(
                        f"{describe(self.url)} schema {schema!r} has schema version"
                        f" {current}; this code knows {SCHEMA_VERSION}"
                    )
                if current == SCHEMA_VERSION:
                    return schema
                for statement in MIGRATIONS[current]:
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO schema_migrations (version) VALUES (%s)", (current + 1,)
                )
                log.info("applied migration %d to schema %s", current + 1, schema)

    async def _check_current(self, conn: Connection) -> str:
        """The schema's name, once it is known to exist at this code's version (``create`` is
        off: nothing is created or migrated)."""
        where = describe(self.url)
        schema = await self._lock_migrations(conn, "to read")
        cursor = await conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
        if await cursor.fetchone() is None:
            raise StoreError(f"{where}: no schema {schema!r}")
        current = await self._schema_version(conn)
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"{where} schema {schema!r} has schema version {current}; this code knows"
                f" {SCHEMA_VERSION}"
            )
        if current != SCHEMA_VERSION:
            raise StoreError(
                schema_not_current(f"{where} schema {schema!r}", current, SCHEMA_VERSION)
            )
        return schema

    async def downgrade(self, version: int) -> int:
        """Take the schema back to ``version`` (1 or more) in one transaction, under the
        migration lock; return the version it had. Call it instead of ``open()``, with every
        replica stopped: an older release refuses a newer schema, so rolling a release back
        needs this, run with the newer release, which knows how to undo its own migrations.
        Starting the newer release again migrates the schema forward.

        Refused while any replica serves the schema: a replica left running would go on
        serving a schema it does not know. Every replica holds the serving lock shared; this
        takes it exclusively without waiting (``pg_try_advisory_xact_lock``) and refuses if it
        cannot. Transaction-scoped, so it is let go with the transaction however that ends,
        and a replica starting meanwhile waits at the migration lock, then finds the result.
        The rest runs within the session's lock timeout (``SESSION_LIMITS``).
        """
        where = describe(self.url)
        try:
            self._conninfo = with_defaults(self.url)
            async with await self._connect() as conn:
                await self._configure(conn)
                async with conn.transaction():
                    schema = await self._lock_migrations(conn, "to downgrade")
                    cursor = await conn.execute(
                        "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)
                    )
                    if await cursor.fetchone() is None:
                        raise StoreError(f"{where}: no schema {schema!r} to downgrade")
                    await self._refuse_while_served(conn, f"{where} schema {schema!r}", schema)
                    current = await self._schema_version(conn)
                    check_downgrade(f"{where} schema {schema!r}", current, version, SCHEMA_VERSION)
                    for undone in range(current - 1, version - 1, -1):
                        for statement in DOWNGRADES[undone]:
                            await conn.execute(statement)
                    await conn.execute(
                        "DELETE FROM schema_migrations WHERE version > %s", (version,)
                    )
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot downgrade PostgreSQL at {describe(self.url)}: {self._said(exc)}"
            ) from exc
        return current

    @staticmethod
    async def _refuse_while_served(conn: Connection, where: str, schema: str) -> None:
        """Take the serving lock of ``schema`` exclusively for the transaction, or refuse,
        naming the sessions that hold it (pg_stat_activity tells a DBA whose they are)."""
        cursor = await conn.execute(
            "SELECT pg_try_advisory_xact_lock(%s, hashtext(%s))", (SERVING_LOCK, schema)
        )
        row = await cursor.fetchone()
        if row and row[0]:
            return
        cursor = await conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND classid = %s::bigint::oid AND objsubid = 2"
            " AND objid = (hashtext(%s)::bigint & 4294967295)::oid ORDER BY pid",
            (SERVING_LOCK, schema),
        )
        pids = [str(pid) for (pid,) in await cursor.fetchall()]
        if len(pids) == 1:
            holders = f"1 session holds its serving lock (backend pid {pids[0]})"
        elif pids:
            holders = f"{len(pids)} sessions hold its serving lock (backend pids {', '.join(pids)})"
        else:  # it let go of it just now
            holders = "a session held its serving lock"
        raise StoreError(
            f"{where} is still served: {holders}; stop every server of it, then downgrade it"
        )

    # -- running work ---------------------------------------------------------------------

    def _open_pool(self) -> AsyncConnectionPool[Connection]:
        """The pool, while the store is open (writes submitted before close() still get it)."""
        pool = self._pool
        if pool is None:
            raise StoreError("the store is not open")
        return pool

    def _serving_pool(self) -> AsyncConnectionPool[Connection]:
        """The pool, for a read or a transaction, unless the store stopped serving its schema
        (``_stop_serving``): then each is refused before it takes a connection."""
        if self._schema_lost is not None:
            raise SchemaChanged(self._schema_lost)
        return self._open_pool()

    async def _transaction(self, work: Callable[[Connection], Awaitable[T]]) -> T:
        pool = self._serving_pool()
        try:
            async with pool.connection() as conn, conn.transaction():
                return await work(conn)
        except psycopg.Error as exc:
            raise StoreError(f"the transaction failed: {self._said(exc)}") from exc

    async def _read(self, query: Callable[[Connection], Awaitable[T]]) -> T:
        if self._closed:
            raise StoreError("the store is closed")
        pool = self._serving_pool()
        try:
            async with pool.connection() as conn:
                return await query(conn)
        except psycopg.Error as exc:
            raise StoreError(f"read failed: {self._said(exc)}") from exc

    async def _write(
        self,
        game_id: str,
        work: Callable[[Connection], Awaitable[T]],
        after: asyncio.Lock | None = None,
    ) -> T:
        """Run ``work`` in a transaction after every write of ``game_id`` submitted before it
        (and, with ``after``, holding that lock while it takes a connection and runs).

        The write is a task of its own, registered before this coroutine first waits: the
        caller's cancellation does not withdraw it and ``close()`` waits for it.
        """
        if not self._accepting:
            raise StoreError("the store is not open")
        previous = self._tails.get(game_id)

        async def run() -> T:
            if previous is not None:
                await asyncio.wait([previous])
            if after is None:
                return await self._transaction(work)
            async with after:
                return await self._transaction(work)

        task = asyncio.get_running_loop().create_task(run())
        self._tails[game_id] = task
        self._pending.add(task)
        task.add_done_callback(partial(self._write_done, game_id))
        return await asyncio.shield(task)

    def _write_done(self, game_id: str, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        if self._tails.get(game_id) is task:
            del self._tails[game_id]
        if not task.cancelled():
            task.exception()  # retrieved here: its caller may have stopped waiting

    # -- writes -----------------------------------------------------------------------------

    async def create_game(
        self,
        game: GameRecord,
        first_rows: Sequence[LogRow],
        *,
        max_active: int | None = None,
        active_since: float | None = None,
    ) -> None:
        """Store a new game (see :meth:`GameStore.create_game` and the module docstring)."""
        params = (*_game_params(game), bool(game.over), GENESIS_HASH, _stored_time(game.created_at))
        rows = _numbered_log(game.game_id, 1, _log_params(first_rows))
        count_sql, count_params = _active_games_query(active_since, ())

        async def work(conn: Connection) -> None:
            if max_active is not None:
                # Two statements: one taking the lock and counting would count from a snapshot
                # taken before it waited for the lock, missing the creation it waited for.
                async with conn.pipeline():
                    await conn.execute(
                        "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                        (CREATION_LOCK, self.schema_name),
                    )
                    counted = await conn.execute(count_sql, count_params)
                active = await counted.fetchone()
                if active is not None and active[0] >= max_active:
                    raise TooManyGames(max_active)  # before any write: nothing to undo
            cursor = await conn.execute(_INSERT_GAME, params)
            if cursor.rowcount != 1:
                raise GameExists(game.game_id)
            if rows:
                await cursor.executemany(_INSERT_LOG, rows)

        capped = self._capped_creations if max_active is not None else None
        await self._write(game.game_id, work, after=capped)

    async def commit(self, commit: Commit) -> AuditRow:
        """Apply ``commit`` (see :meth:`GameStore.commit` and the module docstring).

        The game's version becomes ``expected_version + 1``; every row must carry that version
        (an action and the deal it caused). A ``request_id`` already stored for the game is
        refused like a stale version (VersionConflict with the current version), nothing written;
        so is a commit to a game that has ended (GameOver).
        """
        new_version = commit.checked_version()
        game_id = commit.game_id
        _check_stored_id(game_id)
        rows = _log_params(commit.rows)
        draft = _AuditDraft.of(commit.audit)
        response = bytes(commit.response)
        notice = f"{self._origin}:{game_id}"

        async def work(conn: Connection) -> AuditRow:
            cursor = await conn.execute(
                "SELECT version, over, audit_seq, audit_head FROM games WHERE game_id = %s"
                " FOR UPDATE",
                (game_id,),
            )
            head = await cursor.fetchone()
            if head is None:
                raise UnknownGame(game_id)
            current, over, audit_seq, audit_head = head
            if current != commit.expected_version:
                raise VersionConflict(current)
            if over:  # read under the row lock, like the version: no commit can end it meanwhile
                raise GameOver(current)
            audit = draft.chained(audit_seq + 1, audit_head)
            # The log's end is read by this statement, which starts after the row lock was
            # granted, so it sees every commit of the game before ours (the locking SELECT's
            # snapshot may be older than the commit it waited for).
            cursor = await conn.execute(
                "UPDATE games SET version = %s, over = %s, audit_seq = %s, audit_head = %s,"
                " last_active_at = %s WHERE game_id = %s AND version = %s"
                " RETURNING (SELECT COALESCE(MAX(seq), 0) FROM log WHERE game_id = %s)",
                (
                    new_version,
                    commit.over,
                    audit.seq,
                    audit.hash,
                    audit.time,
                    game_id,
                    current,
                    game_id,
                ),
            )
            ended = await cursor.fetchone()
            if cursor.rowcount != 1 or ended is None:
                raise VersionConflict(current)
            log_params = _numbered_log(game_id, ended[0] + 1, rows)
            try:
                async with conn.pipeline():  # the rest in one round trip
                    await cursor.executemany(_INSERT_LOG, log_params)
                    await conn.execute(
                        "INSERT INTO requests (game_id, request_id, response) VALUES (%s, %s, %s)",
                        (game_id, commit.request_id, response),
                    )
                    await conn.execute(_INSERT_AUDIT, _audit_params(game_id, draft, audit))
                    await conn.execute("SELECT pg_notify(%s, %s)", (self.channel, notice))
            except psycopg.errors.UniqueViolation as exc:
                raise VersionConflict(current) from exc
            return audit

        return await self._write(game_id, work)

    async def forget_responses(self, ended_before: float, limit: int = FORGET_BATCH) -> int:
        async def work(conn: Connection) -> int:
            # SKIP LOCKED: replicas doing this at once take different games.
            cursor = await conn.execute(
                "SELECT game_id FROM games WHERE over AND responses_kept AND last_active_at < %s"
                ' ORDER BY last_active_at, game_id COLLATE "C" LIMIT %s FOR UPDATE SKIP LOCKED',
                (ended_before, limit),
            )
            ended = [game_id for (game_id,) in await cursor.fetchall()]
            if ended:
                await conn.execute("DELETE FROM requests WHERE game_id = ANY(%s)", (ended,))
                await conn.execute(
                    "UPDATE games SET responses_kept = false WHERE game_id = ANY(%s)", (ended,)
                )
            return len(ended)

        if self._closed:
            raise StoreError("the store is closed")
        return await self._transaction(work)

    async def record_refusal(self, game_id: str, audit: AuditRow) -> AuditRow:
        _check_stored_id(game_id)
        check_refusal(audit)
        draft = _AuditDraft.of(audit)

        async def work(conn: Connection) -> AuditRow:
            cursor = await conn.execute(
                "SELECT audit_seq, audit_head FROM games WHERE game_id = %s FOR UPDATE",
                (game_id,),
            )
            head = await cursor.fetchone()
            if head is None:
                raise UnknownGame(game_id)
            audit_seq, audit_head = head
            row = draft.chained(audit_seq + 1, audit_head)
            cursor = await conn.execute(
                "UPDATE games SET audit_seq = %s, audit_head = %s"
                " WHERE game_id = %s AND audit_seq = %s",
                (row.seq, row.hash, game_id, audit_seq),
            )
            if cursor.rowcount != 1:
                raise StoreError(f"the audit log of {game_id} moved inside a transaction")
            await conn.execute(_INSERT_AUDIT, _audit_params(game_id, draft, row))
            return row

        return await self._write(game_id, work)

    # -- reads ------------------------------------------------------------------------------

    async def get_game(self, game_id: str) -> GameRecord:
        _check_stored_id(game_id)

        async def query(conn: Connection) -> GameRecord:
            cursor = await conn.execute(
                f"SELECT {_GAME_READ_COLUMNS} FROM games WHERE game_id = %s",
                (game_id,),
            )
            row = await cursor.fetchone()
            if row is None:
                raise UnknownGame(game_id)
            return _game_record(row)

        return await self._read(query)

    async def load_log(self, game_id: str, after_seq: int = 0) -> list[LogRow]:
        _check_stored_id(game_id)

        async def query(conn: Connection) -> list[LogRow]:
            # One statement, the game's existence included: a replica's catch-up before every
            # action reads here and mostly finds nothing new, so an existence query after an
            # empty answer would be a second round trip on that path. No row: no such game;
            # one row of NULLs: a game with no rows after ``after_seq``.
            cursor = await conn.execute(
                "SELECT log.seq, log.version, log.kind, log.seat, log.payload, log.events"
                " FROM games LEFT JOIN log ON log.game_id = games.game_id AND log.seq > %s"
                " WHERE games.game_id = %s ORDER BY log.seq",
                (after_seq, game_id),
            )
            rows = await cursor.fetchall()
            if not rows:
                raise UnknownGame(game_id)
            return [_log_row(row) for row in rows if row[0] is not None]

        return await self._read(query)

    async def stored_response(self, game_id: str, request_id: str) -> bytes | None:
        if "\x00" in game_id + request_id:  # as in get_game: never stored
            return None

        async def query(conn: Connection) -> bytes | None:
            cursor = await conn.execute(
                "SELECT response FROM requests WHERE game_id = %s AND request_id = %s",
                (game_id, request_id),
            )
            row = await cursor.fetchone()
            return bytes(row[0]) if row is not None else None

        return await self._read(query)

    async def audit_log(
        self, game_id: str, after_seq: int = 0, limit: int = 1000
    ) -> list[AuditRow]:
        _check_stored_id(game_id)

        async def query(conn: Connection) -> list[AuditRow]:
            cursor = await conn.execute(
                f"SELECT {_AUDIT_COLUMNS} FROM audit"
                " WHERE game_id = %s AND seq > %s ORDER BY seq LIMIT %s",
                (game_id, after_seq, max(limit, 0)),
            )
            rows = await cursor.fetchall()
            if not rows and not await _game_exists(conn, game_id):
                raise UnknownGame(game_id)
            return _audit_rows(rows, after_seq)

        return await self._read(query)

    async def verify_audit_log(self, game_id: str) -> AuditVerification:
        _check_stored_id(game_id)

        async def query(conn: Connection) -> AuditVerification:
            async with conn.transaction():  # one snapshot for the head and the rows
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                cursor = await conn.execute(
                    "SELECT audit_seq, audit_head FROM games WHERE game_id = %s", (game_id,)
                )
                head = await cursor.fetchone()
                if head is None:
                    raise UnknownGame(game_id)
                cursor = await conn.execute(
                    f"SELECT {_AUDIT_COLUMNS} FROM audit WHERE game_id = %s ORDER BY seq",
                    (game_id,),
                )
                rows = await cursor.fetchall()
                cursor = await conn.execute(
                    f"SELECT {_LOGGED_ACTION_COLUMNS} FROM log"
                    " WHERE game_id = %s AND kind = 'action' ORDER BY seq",
                    (game_id,),
                )
                logged_actions = await cursor.fetchall()
            return _verify_chain(rows, head[0], head[1], logged_actions)

        return await self._read(query)

    async def list_games(self, active_only: bool = False) -> list[str]:
        where = " WHERE NOT over" if active_only else ""

        async def query(conn: Connection) -> list[str]:
            cursor = await conn.execute(f"SELECT game_id FROM games{where} ORDER BY game_id")
            return [gid for (gid,) in await cursor.fetchall()]

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

        async def query(conn: Connection) -> list[GameSummary]:
            cursor = await conn.execute(sql, params)
            return [_game_summary(row) for row in await cursor.fetchall()]

        return await self._read(query)

    async def ping(self) -> None:
        async def query(conn: Connection) -> None:
            await conn.execute("SELECT 1")

        await self._read(query)

    async def count_active_games(
        self, active_since: float | None = None, excluding: Collection[str] = ()
    ) -> int:
        count_sql, params = _active_games_query(active_since, excluding)

        async def query(conn: Connection) -> int:
            cursor = await conn.execute(count_sql, params)
            row = await cursor.fetchone()
            return int(row[0]) if row is not None else 0

        return await self._read(query)

    # -- change notifications --------------------------------------------------------------

    async def changes(self) -> AsyncIterator[str]:
        """Ids of games other stores commit, as PostgreSQL announces them (see the module
        docstring). Reconnects after a failure; ends within a poll interval of ``close()``.

        On each new connection it takes the serving lock, then reads the schema's version:
        one older than this code's was downgraded (or worse) while no lock was held, and the
        store stops serving it (``_stop_serving``) instead of listening: this then raises
        ``SchemaChanged``, as it does when called after that."""
        self._open_pool()
        delay = 0.25
        while not self._closed and self._schema_lost is None:
            # The connection open() left holding the serving lock, the first time; then a new
            # one, which takes the lock again before it listens (see the module docstring).
            conn, self._lock_holder = self._lock_holder, None
            try:
                if conn is None:
                    conn = await self._connect()
                    # Before _configure: its lock_timeout would cut short the wait for a
                    # downgrade under way, which the version read after it must see.
                    await self._hold_serving_lock(conn, self.schema_name)
                    await self._configure(conn)
                    found = await self._schema_version(conn)
                    if found < SCHEMA_VERSION:
                        await conn.close()  # the lock with it: this store serves no more
                        self._stop_serving(found)
                        break
            except psycopg.Error as exc:
                if conn is not None:
                    await conn.close()
                log.warning("cannot connect to listen for changes: %s", self._said(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX_SECONDS)
                continue
            try:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                self.listener_pid = conn.info.backend_pid
                delay = 0.25
                # What was announced while nobody listened is lost; the log is not. A game
                # that ended meanwhile is no longer active, so the listener says "check every
                # game you hold" rather than listing the active ones.
                yield ALL_GAMES
                idle = 0.0
                while not self._closed:
                    heard = False
                    async with contextlib.aclosing(
                        conn.notifies(timeout=LISTEN_POLL_SECONDS)
                    ) as notifies:
                        async for notify in notifies:
                            heard = True
                            origin, _, game_id = notify.payload.partition(":")
                            if origin != self._origin and game_id:
                                yield game_id
                    idle = 0.0 if heard else idle + LISTEN_POLL_SECONDS
                    if idle >= LISTEN_KEEPALIVE_SECONDS:
                        # A dead connection raises here, a silent one times out. Bounded
                        # with asyncio.timeout: Python 3.11's wait_for lost a cancellation
                        # that came in the loop turn the keep-alive was answered in, and the
                        # listener went on listening while the server's stop waited for it.
                        try:
                            async with asyncio.timeout(LISTEN_KEEPALIVE_TIMEOUT_SECONDS):
                                await conn.execute("SELECT 1")
                        except TimeoutError:
                            raise StoreError(
                                "the listening connection did not answer its keep-alive in"
                                f" {LISTEN_KEEPALIVE_TIMEOUT_SECONDS:g} s"
                            ) from None
                        idle = 0.0
            except (psycopg.Error, StoreError) as exc:
                if self._closed:
                    break
                log.warning("listening for changes failed, reconnecting: %s", self._said(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX_SECONDS)
            finally:
                self.listener_pid = 0
                await conn.close()
        # Stopped serving: nothing more will be announced, ever. Said as the reads and writes
        # say it, so the server ends its watch streams (GameManager.follow_changes) rather
        # than leave them open and silent for good.
        if self._schema_lost is not None and not self._closed:
            raise SchemaChanged(self._schema_lost)

    def _stop_serving(self, found: int) -> None:
        """Stop serving the schema, found at version ``found`` (older than this code's) by a
        listener that had just taken the serving lock again: it was taken back (a downgrade,
        or the tables dropped) while this store held no lock, and serving on would serve a
        schema this code does not know (writes naming a column that is gone failing one by
        one, reads without the indexes they were written for), beside the older release
        the rollback is for. Logged once, as an error saying what to do; from here every
        read and write is refused (``SchemaChanged``) before it takes a connection, ``ping``
        with them, so the server's readiness turns NOT_SERVING (``StoreHealth``). For good,
        until the process is restarted: the operator rolling back means to replace it, and a
        replica serving again by itself whenever the schema is found current would come and
        go with each step of a rollback.

        The process does not exit: an orchestrator would start this release again, which
        migrates the schema forward, undoing the rollback an operator is making, under the
        older release's replicas. The server stays up, unready, as it does while its database
        cannot be reached, and a restart with the right release is the operator's call.

        A newer version is not a reason to stop: a newer release migrates the schema forward
        under the replicas still running during a rolling upgrade, and its migrations are
        made so that they serve on (see MIGRATIONS)."""
        state = f"schema version {found}" if found else "no referee tables"
        self._schema_lost = (
            f"{describe(self.url)} schema {self.schema_name!r} has {state}, but this release"
            f" serves schema version {SCHEMA_VERSION}: it was changed (a downgrade?) while"
            " this replica held no serving lock, so the replica has stopped serving it and"
            " refuses every request to the store; restart it with the release that knows the"
            " schema's version, or migrate the schema forward (start this release again)"
        )
        log.error("stopped serving the schema: %s", self._schema_lost)
