"""``serve``'s settings: its flags, the ``PINOCHLE_REFEREE_*`` variables that set them (the flag
wins), and the checks that refuse a bad value before anything starts (exit 2).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from referee.service.limits import MIN_RATE
from referee.store.base import database_argument

ENV_PREFIX = "PINOCHLE_REFEREE_"

# Events kept in memory per game for WatchGame (--watch-window): a watcher that asks for older
# ones gets a snapshot of its view first (referee.proto). The README's ruling; operators trade
# it against memory (bench/game_memory.py: a game holds about 150 bytes an event).
RECENT_EVENTS = 512
# Of those, the events each game keeps in memory (--events-in-memory); a watcher further behind,
# within the window, gets the others read from the store's log, exactly as kept ones. 64 events
# (about 40 actions, a third of a partnership hand) are more than a watcher misses while it
# reconnects or a server restarts, and keep a game in progress at about 19 KiB whatever its
# stage, where 512 in memory held about 95 KiB four hands in: issue 4's 10,000 active games in
# 300 MB then held only for games in their first hand (bench/game_memory.py).
EVENTS_IN_MEMORY = 64
# Refused SubmitActions of callers without a seat (no token, a wrong token, the spectator token)
# audited per game: REFUSAL_BURST at once, then REFUSAL_RATE per second (referee/service/limits.py).
# A legitimate caller never needs many (it learns from the first refusal); an unbounded number
# would let anyone who knows a game id grow its audit log for ever.
REFUSAL_BURST = 60
REFUSAL_RATE = 1.0
# Games that nobody plays must not fill max_active_games for ever (abandoned games would
# otherwise leave a long-running server unable to start any). A game in progress whose last
# accepted action (or creation) is older than this many seconds is idle: it no longer counts
# against the cap or in referee_games_active, and it leaves memory (unless a WatchGame stream
# follows it). It stays in the store, whole, and plays on as soon as anyone acts (rebuilt from
# its log, as after a restart). Reads do not make a game active: otherwise anyone who knows game
# ids could keep any number of idle games in memory while the cap lets new ones in. 0: games
# count until they end. Issue 4 names the cap, not idleness; a day is our choice (README,
# "Running it").
IDLE_AFTER = 86_400.0
# WatchGame streams open at once on one server. Each holds about 24 KB of the server's memory
# (gRPC's call, the handler's task and generator; measured with 5,000 spectators, 2026-12-02),
# and anyone with a game's spectator token may open them, so without a bound they would grow
# until the process runs out of memory. 10,000 is about 240 MB, beside the 10,000 games of the
# default --max-games. Beyond it a new stream is refused RESOURCE_EXHAUSTED (TOO_MANY_WATCHERS);
# the streams already open are not touched. Our choice: issue 4 names no such limit.
MAX_WATCHERS = 10_000
# Health Watch and reflection streams open at once on one server. They need no credential at
# all, so without a bound any client could hold server memory with as many as it liked (about
# 24 KB each, as a WatchGame stream). A cap of their own, not --max-watchers: shared, a flood of
# these streams from anyone would take the places of the spectators and seats following their
# games (who hold a game's token), and a server full of spectators would refuse the health
# watch of an orchestrator. 1,000 (about 24 MB) is far more than the probes, Envoy (both use the
# unary Check, which is never capped) and reflection tools open; gRPC's client-side health
# checking keeps one Watch per connection, so a deployment that turns it on for many clients
# raises it. Our choice: issue 4 names no such limit.
MAX_SERVICE_STREAMS = 1_000
# A finished game's stored responses (what a retried request_id is answered with) are deleted
# this many seconds after its last accepted action. They are about three quarters of what a game
# stores (about 1.7 KB per action, against 0.5 KB of log and audit rows), and a client retries
# within seconds or minutes, not days. A retry that comes later is answered as a new request
# would be (ABORTED: the game has moved on). Games in progress keep all of theirs. 0: keep them
# for ever. Our choice, like the idempotency windows of payment APIs (README, "Rulings where
# the specification is silent").
KEEP_RESPONSES = 86_400.0
# Calls the server holds at once (received, not yet answered; the capped streams and health
# checks apart), and a quarter of gRPC's queue of calls received and not yet started, which is
# enough for every watcher of a full server to reconnect at once (--max-watchers' default).
MAX_PENDING_CALLS = 10_000
# HTTP/2 streams (calls) one connection may have open at once (gRPC's max_concurrent_streams,
# announced to each client in its SETTINGS). The default is every call the server's own caps
# admit at their defaults, so one connection, a frontend carrying all its players' calls and
# watches over one channel, is never held back by it before those caps refuse with a status.
# A limit that binds is not a queue: the client holds calls beyond it until a stream frees,
# but of a burst past it gRPC refuses a share (RST_STREAM REFUSED_STREAM: UNAVAILABLE "Stream
# removed", before any of the server's code runs, unlogged and uncounted: 46 to 50 of 300 unary
# calls opened at once on one channel with a limit of 100, grpcio 1.85, 2026-12-03; a client
# with the shipped retry policy retries them). gRPC's own default announces no limit at all.
# Lower it where every connection is one player.
MAX_STREAMS_PER_CONNECTION = MAX_WATCHERS + MAX_PENDING_CALLS + MAX_SERVICE_STREAMS
# A connection silent this long is pinged; one whose ping is not answered within
# KEEPALIVE_TIMEOUT_SECONDS is closed (see keepalive_options).
KEEPALIVE_SECONDS = 60.0
KEEPALIVE_TIMEOUT_SECONDS = 20.0
# --max-connection-age-seconds: calls in flight on a connection past its age get this long.
CONNECTION_AGE_GRACE_SECONDS = 30.0
# Clients may ping this often (the Python client pings every 30 s while a call is open, to
# find a server that is gone); gRPC's default, five minutes, answers more with GOAWAY.
CLIENT_PING_SECONDS = 10.0


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 50051
    db: str = "./data/referee.db"
    db_schema: str = ""  # PostgreSQL: the schema the tables live in ("" = the search_path's)
    metrics_port: int = 9464
    adjudicator_token: str = ""
    creator_token: str = ""  # set: CreateGame needs it (or the adjudicator credential)
    max_games: int = 10_000
    max_watchers: int = MAX_WATCHERS  # WatchGame streams open at once on this server
    max_service_streams: int = MAX_SERVICE_STREAMS  # health Watch and reflection streams
    max_pending_calls: int = MAX_PENDING_CALLS  # calls gRPC holds before the server starts them
    max_streams_per_connection: int = MAX_STREAMS_PER_CONNECTION  # HTTP/2 streams at once
    keepalive_seconds: float = KEEPALIVE_SECONDS  # ping a silent connection after this long
    max_connection_age_seconds: float = 0.0  # 0: connections live as long as their clients like
    watch_window: int = RECENT_EVENTS  # events per game a WatchGame may resume from
    events_in_memory: int = EVENTS_IN_MEMORY  # of those, kept in memory (others: the log)
    idle_after: float = IDLE_AFTER  # seconds without an accepted action; 0: never idle
    keep_responses_seconds: float = KEEP_RESPONSES  # after a game ends; 0: for ever
    refusal_rate: float = REFUSAL_RATE
    refusal_burst: int = REFUSAL_BURST
    max_message_bytes: int = 1 << 20
    grace_seconds: float = 5.0
    drain_seconds: float = 0.0  # serving on, health NOT_SERVING, before the graceful stop
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""
    log_format: str = "auto"  # auto | json | console
    # How often idle games leave memory and referee_games_active is recounted from the store
    # (GameManager.keep_house). Not a flag: tests shorten it.
    housekeeping_seconds: float = 15.0
    # How often readiness asks the store whether it can be read (server.StoreHealth). Not a
    # flag: tests shorten it.
    store_check_seconds: float = 5.0
    # How often clients may ping (keepalive_options). Not a flag: tests shorten it.
    client_ping_seconds: float = CLIENT_PING_SECONDS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``serve``'s flags, each defaulting to its ``PINOCHLE_REFEREE_*`` variable.

    A variable's text is the flag's default as text: argparse converts a string default with
    the flag's ``type`` only when it parses ``serve`` without that flag. So a malformed
    variable is refused like a malformed flag (exit 2, naming the flag), a flag given on the
    command line wins over it, and other commands never read it.
    """

    def flag(name: str, kind: Callable[[str], object] = str, what: str | None = None) -> None:
        """``--name``, typed by ``kind``, defaulting to its variable, else to the ``Settings``
        field of the same name ("" for a credential file, which is not a setting)."""
        field = name.replace("-", "_")
        fallback = getattr(Settings, field, "")
        default = os.environ.get(ENV_PREFIX + field.upper(), fallback)
        parser.add_argument(f"--{name}", type=kind, default=default, help=what)

    flag(
        "host",
        str,
        "the address to listen on (0.0.0.0 for every IPv4 interface, :: for every interface;"
        " default %(default)s)",
    )
    flag(
        "port",
        _port,
        "the gRPC port (0: any free port, named on the serving log line; default %(default)s)",
    )
    # Not %(default)s: a PINOCHLE_REFEREE_DB URL may hold a password, and --help would print it.
    flag("db", database_argument, f"SQLite path or postgresql://... URL (default {Settings.db})")
    flag(
        "db-schema",
        str,
        "PostgreSQL schema for the tables (created if missing; default: the search_path's)",
    )
    flag("metrics-port", _port, "Prometheus metrics port (0: off; default %(default)s)")
    for name, what in (
        ("adjudicator", "the server's adjudicator credential (reaches every game)"),
        (
            "creator",
            "a credential CreateGame then needs (the adjudicator credential also creates);"
            " default: anyone may create games",
        ),
    ):
        flag(f"{name}-token", _credential, what)
        flag(
            f"{name}-token-file",
            _credential_file,
            f"read the {name} credential from this file (it wins over --{name}-token)",
        )
    flag(
        "max-games",
        _at_least_one,
        "active games at most; CreateGame beyond is RESOURCE_EXHAUSTED, reason TOO_MANY_GAMES"
        " (default %(default)s)",
    )
    flag(
        "max-watchers",
        _at_least_one,
        "WatchGame streams open at once at most (each holds about 24 KB); one beyond is"
        " RESOURCE_EXHAUSTED, reason TOO_MANY_WATCHERS (default %(default)s)",
    )
    flag(
        "max-service-streams",
        _at_least_one,
        "health Watch and reflection streams open at once at most (no credential opens them;"
        " health Check is not capped); one beyond is RESOURCE_EXHAUSTED, reason"
        " TOO_MANY_STREAMS (default %(default)s)",
    )
    flag(
        "max-pending-calls",
        _at_least_one,
        "calls the server holds at once, received and not yet answered (WatchGame, health and"
        " reflection streams have caps of their own, and health checks are never refused); one"
        " beyond is RESOURCE_EXHAUSTED, reason TOO_MANY_CALLS (default %(default)s)",
    )
    flag(
        "max-streams-per-connection",
        _at_least_one,
        "calls (HTTP/2 streams) one connection may have open at once, announced to the client"
        " (HTTP/2 MAX_CONCURRENT_STREAMS); beyond it the client holds new calls until one ends,"
        " but gRPC refuses some of a burst UNAVAILABLE; the default is the other caps' defaults"
        " together, so with those one connection reaches the caps first (default %(default)s)",
    )
    flag(
        "keepalive-seconds",
        _keepalive,
        "ping a connection silent this long, and close it when the ping is not answered"
        f" within {KEEPALIVE_TIMEOUT_SECONDS:g} s (or this, if shorter): a client gone without"
        " closing (a network cut, a dead phone) would hold its WatchGame streams for hours"
        " (default %(default)s)",
    )
    flag(
        "max-connection-age-seconds",
        _seconds,
        "ask clients to reconnect after this long (GOAWAY), so that behind an L4 balancer"
        " or with client-side balancing new replicas get their share; calls in flight get"
        f" {CONNECTION_AGE_GRACE_SECONDS:g} s more (or this, if shorter), then a WatchGame stream"
        " ends UNAVAILABLE and a resuming client opens it again; 0: never (default %(default)s)",
    )
    flag(
        "watch-window",
        _at_least_one,
        "the last events of each game a WatchGame may resume from; a watcher asking for"
        " older ones gets a snapshot of its view first (default %(default)s)",
    )
    flag(
        "events-in-memory",
        _at_least_one,
        "of those, the events each game keeps in memory (about 150 bytes each); older ones"
        " are read from the store when a watcher asks for them (default %(default)s)",
    )
    flag(
        "idle-after",
        _seconds,
        "seconds without an accepted action after which a game in progress is idle: it"
        " stops counting against --max-games and leaves memory, stays stored and plays on when"
        " anyone acts; 0: never (default %(default)s)",
    )
    flag(
        "keep-responses-seconds",
        _seconds,
        "how long after a game ends its stored responses (the answers to retried"
        " request ids) are kept; later retries are answered as new requests; 0: for ever"
        " (default %(default)s)",
    )
    flag(
        "refusal-burst",
        _at_least_one,
        "refused SubmitActions of callers without a seat audited per game at once;"
        " beyond them RESOURCE_EXHAUSTED, unaudited (default %(default)s)",
    )
    flag("refusal-rate", _refill_rate, "... and how many more per second (default %(default)s)")
    flag(
        "max-message-bytes",
        _at_least_one,
        "the largest request accepted, in bytes; a response may be up to 16 times that"
        " (default %(default)s)",
    )
    flag(
        "grace-seconds",
        _seconds,
        "on SIGTERM or SIGINT (after --drain-seconds), how long unary calls in flight may take"
        " to finish before they are cancelled (health answers NOT_SERVING and WatchGame streams"
        " end, resumable; a second signal cancels them at once; default %(default)s)",
    )
    flag(
        "drain-seconds",
        _seconds,
        "on SIGTERM or SIGINT, how long to go on serving every call while health answers"
        " NOT_SERVING (Check and Watch), so that balancers and readiness probes take the server"
        " out before its port closes; then the grace period; a second signal skips both; 0: the"
        " port closes at once (default %(default)s)",
    )
    flag("tls-cert", readable_file, "PEM certificate chain: serve TLS (needs --tls-key)")
    flag("tls-key", readable_file, "its PEM private key")
    flag(
        "tls-client-ca",
        readable_file,
        "PEM CA certificates: require client certificates signed by them (mutual TLS)",
    )
    flag(
        "log-format",
        _log_format,
        f"{' | '.join(LOG_FORMATS)} (default %(default)s: console on a terminal)",
    )


LOG_FORMATS = ("auto", "json", "console")


def _log_format(text: str) -> str:
    """An argparse type, not ``choices``: argparse checks ``choices`` only against values
    given on the command line, so a variable's value would pass unchecked."""
    if text not in LOG_FORMATS:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(LOG_FORMATS)}, not {text!r}")
    return text


def _port(text: str) -> int:
    """A TCP port, 0 to 65535 (gRPC would wrap a larger one round; 0 means any free port for
    --port and no listener for --metrics-port)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number, not {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 0 to 65535, not {value}")
    return value


def readable_file(path: str) -> str:
    """A file read at start-up ("" for none): checked before anything starts, for serve's and
    the demo's TLS flags (an argparse type)."""
    if path:
        try:
            with open(path, "rb"):
                pass
        except OSError as error:
            raise argparse.ArgumentTypeError(f"cannot read {path}: {error.strerror}") from None
    return path


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _finite_from(low: float, what: str) -> Callable[[str], float]:
    """An argparse type: a finite number of at least ``low``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not low <= value < float("inf"):
            raise argparse.ArgumentTypeError(f"must be {what} from {low:g} up, not {text!r}")
        return value

    return parse


_refill_rate = _finite_from(MIN_RATE, "a number")
_seconds = _finite_from(0.0, "a number of seconds")
_keepalive = _finite_from(1.0, "a number of seconds")


def _credential(text: str) -> str:
    """A credential given on the command line or in the environment ("" for none), refused
    unless a client can send it: it travels as ``authorization: Bearer <credential>`` metadata,
    whose values gRPC carries as printable ASCII only, and the server strips the spaces around
    a bearer token. A server started with ``--creator-token é`` served, and no client could
    ever create a game. The message says where the character is, never what it is (the
    credential is a secret)."""
    for position, character in enumerate(text, 1):
        if not " " <= character <= "~":
            raise argparse.ArgumentTypeError(
                f"character {position} of the credential is not printable ASCII, which no"
                " client can send in its 'authorization: Bearer' metadata"
            )
    if text != text.strip():
        raise argparse.ArgumentTypeError(
            "the credential starts or ends with a space, which the server strips from the"
            " 'authorization: Bearer' metadata a client sends, so no client could match it"
        )
    return text


def _credential_file(path: str) -> str:
    """The credential a ``--*-token-file`` names ("" for no file). An empty or unreadable file
    stops the server from starting: an empty creator credential would silently let anyone
    create games (a Secret mounted without its key, say)."""
    if not path:
        return ""
    try:
        credential = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {error}") from None
    if not credential:
        raise argparse.ArgumentTypeError(f"{path} is empty")
    try:
        return _credential(credential)
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(f"{path}: {error}") from None


class SettingsError(ValueError):
    """Flags that are each well formed but do not fit together (the caller exits 2)."""


def settings_from(args: argparse.Namespace) -> Settings:
    if bool(args.tls_cert) != bool(args.tls_key):
        raise SettingsError("--tls-cert and --tls-key go together: give both or neither")
    if args.tls_client_ca and not args.tls_cert:
        raise SettingsError("--tls-client-ca needs --tls-cert and --tls-key (mutual TLS)")
    token = args.adjudicator_token_file or args.adjudicator_token  # the file's content wins
    creator = args.creator_token_file or args.creator_token
    return Settings(
        host=args.host,
        port=args.port,
        db=args.db,
        db_schema=args.db_schema,
        metrics_port=args.metrics_port,
        adjudicator_token=token,
        creator_token=creator,
        max_games=args.max_games,
        max_watchers=args.max_watchers,
        max_service_streams=args.max_service_streams,
        max_pending_calls=args.max_pending_calls,
        max_streams_per_connection=args.max_streams_per_connection,
        keepalive_seconds=args.keepalive_seconds,
        max_connection_age_seconds=args.max_connection_age_seconds,
        watch_window=args.watch_window,
        events_in_memory=args.events_in_memory,
        idle_after=args.idle_after,
        keep_responses_seconds=args.keep_responses_seconds,
        refusal_rate=args.refusal_rate,
        refusal_burst=args.refusal_burst,
        max_message_bytes=args.max_message_bytes,
        grace_seconds=args.grace_seconds,
        drain_seconds=args.drain_seconds,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_client_ca=args.tls_client_ca,
        log_format=args.log_format,
    )


# Python's own traceback text: no frame's locals, and cheap (see configure_logging).
