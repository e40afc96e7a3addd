"""The ``grpc.aio`` server: configuration, interceptors, health, reflection, graceful shutdown.

Settings come from flags or ``PINOCHLE_REFEREE_*`` environment variables (the flag wins). The
server logs one canonical structlog line per RPC and exports Prometheus metrics; the audit log of
game requests lives in the database, not in the logs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import gc
import inspect
import logging
import os
import signal
import ssl
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import orjson
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from prometheus_client import start_http_server

from protos.pinochle.referee.v1 import referee_pb2 as pb
from protos.pinochle.referee.v1 import referee_pb2_grpc as pb_grpc
from referee.service import logline, metrics
from referee.service.auth import token_hash
from referee.service.errors import ServiceError, invalid
from referee.service.games import (
    IDLE_AFTER,
    KEEP_RESPONSES,
    MAX_WATCHERS,
    RECENT_EVENTS,
    REFUSAL_BURST,
    REFUSAL_RATE,
    GameManager,
)
from referee.service.limits import MIN_RATE
from referee.service.servicers import RefereeServicer, RulesServicer
from referee.store.base import GameStore, StoreError, is_postgres_url

ENV_PREFIX = "PINOCHLE_REFEREE_"
# follow_store_health: a store read that takes longer counts as unreachable.
STORE_CHECK_TIMEOUT_SECONDS = 5.0
# Calls received and not yet started: enough for every watcher of a full server to reconnect
# at once (--max-watchers' default).
MAX_PENDING_CALLS = 10_000
# A connection silent this long is pinged; one whose ping is not answered within
# KEEPALIVE_TIMEOUT_SECONDS is closed (see keepalive_options).
KEEPALIVE_SECONDS = 60.0
KEEPALIVE_TIMEOUT_SECONDS = 20.0
# --max-connection-age-seconds: calls in flight on a connection past its age get this long.
CONNECTION_AGE_GRACE_SECONDS = 30.0
# Clients may ping this often (the Python client pings every 30 s while a call is open, to
# find a server that is gone); gRPC's default, five minutes, answers more with GOAWAY.
CLIENT_PING_SECONDS = 10.0
GC_THRESHOLD = 20_000  # allocations between first-generation collections (CPython's default: 700)
SERVICE_NAMES = (
    pb.DESCRIPTOR.services_by_name["RefereeService"].full_name,
    pb.DESCRIPTOR.services_by_name["RulesService"].full_name,
)


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
    max_pending_calls: int = MAX_PENDING_CALLS  # calls gRPC holds before the server starts them
    keepalive_seconds: float = KEEPALIVE_SECONDS  # ping a silent connection after this long
    max_connection_age_seconds: float = 0.0  # 0: connections live as long as their clients like
    watch_window: int = RECENT_EVENTS  # events per game kept in memory for WatchGame
    idle_after: float = IDLE_AFTER  # seconds without an accepted action; 0: never idle
    keep_responses_seconds: float = KEEP_RESPONSES  # after a game ends; 0: for ever
    refusal_rate: float = REFUSAL_RATE
    refusal_burst: int = REFUSAL_BURST
    max_message_bytes: int = 1 << 20
    grace_seconds: float = 5.0
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""
    log_format: str = "auto"  # auto | json | console
    # How often idle games leave memory and referee_games_active is recounted from the store
    # (GameManager.keep_house). Not a flag: tests shorten it.
    housekeeping_seconds: float = 15.0
    # How often readiness asks the store whether it can be read (follow_store_health). Not a
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

    flag("host")
    flag("port", _port, "the gRPC port (0: any free port, named on the serving log line)")
    flag("db", str, "SQLite path or postgresql://... URL")
    flag(
        "db-schema",
        str,
        "PostgreSQL schema for the tables (created if missing; default: the search_path's)",
    )
    flag("metrics-port", _port, "Prometheus metrics port (0: off)")
    for name, what in (
        ("adjudicator", "the server's adjudicator credential (reaches every game)"),
        (
            "creator",
            "a credential CreateGame then needs (the adjudicator credential also creates);"
            " default: anyone may create games",
        ),
    ):
        flag(f"{name}-token", str, what)
        flag(
            f"{name}-token-file",
            _credential_file,
            f"read the {name} credential from this file (it wins over --{name}-token)",
        )
    flag(
        "max-games",
        _at_least_one,
        "active games at most; CreateGame beyond is RESOURCE_EXHAUSTED (default %(default)s)",
    )
    flag(
        "max-watchers",
        _at_least_one,
        "WatchGame streams open at once at most (each holds about 24 KB); one beyond is"
        " RESOURCE_EXHAUSTED, reason TOO_MANY_WATCHERS (default %(default)s)",
    )
    flag(
        "max-pending-calls",
        _at_least_one,
        "calls received at once that the server has not started yet (a burst of reconnecting"
        " clients); gRPC cancels those beyond (CANCELLED) before any of the server's code runs"
        " (default %(default)s)",
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
        "events of each game kept in memory for WatchGame (about 150 bytes each); a watcher"
        " asking for older ones gets a snapshot of its view first (default %(default)s)",
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
    flag("grace-seconds", _seconds)
    flag("tls-cert", _readable_file, "PEM certificate chain: serve TLS (needs --tls-key)")
    flag("tls-key", _readable_file, "its PEM private key")
    flag(
        "tls-client-ca",
        _readable_file,
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


def _readable_file(path: str) -> str:
    """A file the server reads at start-up ("" for none), checked before anything starts."""
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
    return credential


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
        max_pending_calls=args.max_pending_calls,
        keepalive_seconds=args.keepalive_seconds,
        max_connection_age_seconds=args.max_connection_age_seconds,
        watch_window=args.watch_window,
        idle_after=args.idle_after,
        keep_responses_seconds=args.keep_responses_seconds,
        refusal_rate=args.refusal_rate,
        refusal_burst=args.refusal_burst,
        max_message_bytes=args.max_message_bytes,
        grace_seconds=args.grace_seconds,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_client_ca=args.tls_client_ca,
        log_format=args.log_format,
    )


# Python's own traceback text: no frame's locals, and cheap (see configure_logging).
CONSOLE_TRACEBACK = structlog.dev.plain_traceback


def configure_logging(log_format: str = "auto") -> None:
    """JSON lines in production, readable console output on a terminal.

    JSON lines are rendered by orjson straight to bytes (structlog's recipe for speed): the
    canonical line is written for every game RPC, and json.dumps cost about 25 us of it.

    Tracebacks never show the frames' local variables (structlog shows them by default): a
    failing request's frames hold its bearer token, a seat's token or the server's creator or
    adjudicator credential, and logs are read by more people than the credentials are.

    On the console a traceback is Python's own text (``CONSOLE_TRACEBACK``), not rich's: rich
    rendered each one in 0.3 to 0.9 s on the event loop, so while the store failed (a full
    disk: every write's traceback is logged) the server stalled on its own log lines.
    """
    console = _console(log_format)
    shared: list[Any] = [structlog.processors.add_log_level, UtcTimestamp()]
    if console:
        renderer = structlog.dev.ConsoleRenderer(exception_formatter=CONSOLE_TRACEBACK)
        structlog.configure(
            processors=[*shared, renderer],
            wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
            logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
            cache_logger_on_first_use=True,
        )
        return
    structlog.configure(
        processors=[
            *shared,
            structlog.processors.ExceptionRenderer(
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
            ),
            structlog.processors.JSONRenderer(serializer=_orjson_line),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.BytesLoggerFactory(file=sys.stderr.buffer),
        cache_logger_on_first_use=True,
    )


def _console(log_format: str) -> bool:
    return log_format == "console" or (log_format == "auto" and sys.stderr.isatty())


def route_library_logs(log_format: str) -> None:
    """The libraries' own log records (psycopg, gRPC, asyncio: the standard library's logging)
    at WARNING and above, written in the server's format.

    Without this they reached stderr as bare text among the JSON lines (psycopg's "error
    ignored terminating AsyncPipeline ..." on a raced request id, say), which a log pipeline
    reading JSON lines drops or fails on. ``serve`` calls it once for the process; the handler
    replaces the root logger's."""
    pre_chain: list[Any] = [
        structlog.stdlib.add_logger_name,
        structlog.processors.add_log_level,
        UtcTimestamp(),
    ]
    renderer: list[Any]
    if _console(log_format):
        renderer = [structlog.dev.ConsoleRenderer(exception_formatter=CONSOLE_TRACEBACK)]
    else:
        renderer = [
            structlog.processors.ExceptionRenderer(
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
            ),
            structlog.processors.JSONRenderer(serializer=_orjson_text),
        ]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=pre_chain,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)


class UtcTimestamp:
    """structlog's ``TimeStamper(fmt="iso", utc=True)`` (``2026-12-01T13:29:02.422359Z``) with
    the date and time of day formatted once per second: the canonical line of every game RPC
    spent a third of its 10 us in ``datetime.isoformat``."""

    def __init__(self) -> None:
        self._second = -1
        self._prefix = ""

    def __call__(self, logger: Any, name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second = second
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        event_dict["timestamp"] = f"{self._prefix}.{int((now - second) * 1_000_000):06d}Z"
        return event_dict


def _orjson_line(event: Any, **_: Any) -> bytes:
    """One JSON log line; values orjson cannot encode are written as their ``str``."""
    return orjson.dumps(event, default=str, option=orjson.OPT_NON_STR_KEYS)


def _orjson_text(event: Any, **_: Any) -> str:
    """The same line as text, for the standard library's handler."""
    return _orjson_line(event).decode()


_DEFAULT_OUTCOME = {"OK": "ok", "CANCELLED": "cancelled"}


# gRPC itself refuses a request larger than its receive limit before any handler or interceptor
# code runs: RESOURCE_EXHAUSTED, with no log line and no metric. Its limit is therefore this many
# times ``--max-message-bytes``, and the service refuses what lies between, logged and counted
# (``_Unread``); only a request larger still is gRPC's to refuse silently. Four times the default
# 1 MiB is gRPC's own default limit, so no more memory is held per call than gRPC would hold.
CORE_MESSAGE_FACTOR = 4


class _Unread:
    """A request refused before its handler reads it (see ``_tolerant``)."""

    __slots__ = ()

    def refusal(self) -> tuple[ServiceError, dict[str, object]]:
        """The refusal and the fields it adds to the call's log line."""
        raise NotImplementedError


class _Undecodable(_Unread):
    """A request whose bytes are not its message (truncated, invalid UTF-8, nested too deep)."""

    __slots__ = ("error",)

    def __init__(self, error: str) -> None:
        self.error = error

    def refusal(self) -> tuple[ServiceError, dict[str, object]]:
        refusal = invalid("the request is not a valid message of this method's type", "request")
        return refusal, {"decode_error": self.error}


class _Oversized(_Unread):
    """A request of more bytes than ``--max-message-bytes`` allows (within gRPC's own limit)."""

    __slots__ = ("limit", "size")

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit

    def refusal(self) -> tuple[ServiceError, dict[str, object]]:
        refusal = ServiceError(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"the request is {self.size} bytes; this server accepts at most {self.limit}"
            " (--max-message-bytes)",
            reason="REQUEST_TOO_LARGE",
            metadata={"limit": str(self.limit)},
        )
        return refusal, {"request_bytes": self.size}


def _tolerant(
    deserializer: Callable[[bytes], Any] | None, limit: int
) -> Callable[[bytes], Any] | None:
    """``deserializer`` that hands the handler an ``_Unread`` instead of a request it must refuse:
    one over ``limit`` bytes (``_Oversized``, not decoded), or one that does not decode
    (``_Undecodable``).

    grpc.aio decodes a request before any handler or interceptor code runs, and answers a
    decoding failure ``UNKNOWN`` naming the Python exception, and a request over its receive
    limit ``RESOURCE_EXHAUSTED`` unlogged. Marked instead, the request is refused like any other
    bad one, with a precise status, and logged and counted by the interceptor.
    """
    if deserializer is None:
        return None

    def decode(data: bytes) -> Any:
        if len(data) > limit:
            return _Oversized(len(data), limit)
        try:
            return deserializer(data)
        except Exception as error:  # protobuf's DecodeError, or a parser limit
            return _Undecodable(type(error).__name__)

    return decode


async def _refuse_unread(request: _Unread, context: grpc.aio.ServicerContext) -> None:  # type: ignore[type-arg]
    refusal, fields = request.refusal()
    logline.annotate(outcome="refused", code=refusal.reason, **fields)
    await context.abort_with_status(refusal.to_status())


class ObservabilityInterceptor(grpc.aio.ServerInterceptor):
    """One canonical log line and the gRPC metrics for every RPC."""

    def __init__(self, max_message_bytes: int) -> None:
        self.log = structlog.get_logger("referee.rpc")
        self.max_message_bytes = max_message_bytes
        # grpc.aio asks the interceptor for every call: the wrapped handler of each method is
        # built once, for the handler object the server returned (methods are a closed set).
        self._wrapped: dict[str, tuple[Any, Any]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler: Any = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method or ""
        known = self._wrapped.get(method)
        if known is not None and known[0] is handler:
            return known[1]
        wrapped = self._wrap(method, handler)
        self._wrapped[method] = (handler, wrapped)
        return wrapped

    def _wrap(self, method: str, handler: Any) -> Any:
        """``handler`` with the log line, the metrics and the refusal handling around it."""
        _, _, path = method.partition("/")
        service, _, name = path.partition("/")
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._called(service, name, handler.unary_unary),
                request_deserializer=_tolerant(
                    handler.request_deserializer, self.max_message_bytes
                ),
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            inner = handler.unary_stream
            # Issue 4 (gRPC health): a handler that sends with ``context.write`` (the health
            # service's Watch) is a coroutine, not an async generator; wrapping it in
            # ``async for`` failed every health Watch with UNKNOWN.
            return grpc.unary_stream_rpc_method_handler(
                self._streamed(service, name, inner)
                if inspect.isasyncgenfunction(inner)
                else self._called(service, name, inner),
                request_deserializer=_tolerant(
                    handler.request_deserializer, self.max_message_bytes
                ),
                response_serializer=handler.response_serializer,
            )
        return handler

    def _called(
        self, service: str, name: str, inner: Callable[..., Awaitable[Any]]
    ) -> Callable[..., Awaitable[Any]]:
        """A coroutine handler (a unary call, or a stream sent with ``context.write``) wrapped.

        The same body as ``_streamed``'s but for how ``inner`` is run: Python cannot share it
        between a coroutine and an async generator without a context manager, which every
        call would pay for.
        """

        async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:  # type: ignore[type-arg]
            line = logline.begin(rpc=name)
            started = time.perf_counter()
            ending = "OK"
            try:
                if isinstance(request, _Unread):
                    await _refuse_unread(request, context)
                return await inner(request, context)
            except asyncio.CancelledError:
                ending = "CANCELLED"
                raise
            except Exception as error:
                ending = "FAILED"
                await self._refuse_or_fail(error, context)
                raise
            finally:
                self._close(service, name, context, line, started, ending)

        return call

    def _streamed(
        self, service: str, name: str, inner: Callable[..., AsyncIterator[Any]]
    ) -> Callable[..., AsyncIterator[Any]]:
        """An async-generator stream handler wrapped (see ``_called``)."""

        async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:  # type: ignore[type-arg]
            line = logline.begin(rpc=name)
            started = time.perf_counter()
            ending = "OK"
            try:
                if isinstance(request, _Unread):
                    await _refuse_unread(request, context)
                async for item in inner(request, context):
                    yield item
            except asyncio.CancelledError:
                ending = "CANCELLED"
                raise
            except Exception as error:
                ending = "FAILED"
                await self._refuse_or_fail(error, context)
                raise
            finally:
                self._close(service, name, context, line, started, ending)

        return stream

    async def _refuse_or_fail(self, error: Exception, context: grpc.aio.ServicerContext) -> None:  # type: ignore[type-arg]
        """Turn what a handler raised into a status a client can act on, never ``UNKNOWN``.

        A ``ServiceError`` is a refusal: it becomes its rich status (ErrorInfo with the A.5
        code, BadRequest naming the field) and the log line says ``refused`` with its code.
        An ``AbortError``, or a status already set, passes through. Anything else is a fault of
        the server, not of the client: it is logged with its traceback and answered
        ``UNAVAILABLE`` when the store failed (a retry with the same ``request_id`` is safe: it
        returns the stored response if the write did land) or ``INTERNAL`` otherwise, with a
        fixed message, so no exception text, path or card reaches the caller. Left alone,
        grpc.aio would answer ``UNKNOWN`` with the exception's text. Every path but the
        pass-through raises ``AbortError``.
        """
        if isinstance(error, ServiceError):
            logline.annotate(outcome="refused", code=error.reason)
            await context.abort_with_status(error.to_status())
        status = context.code()
        if isinstance(error, grpc.aio.AbortError) or status not in (None, grpc.StatusCode.OK):
            return
        self.log.exception("rpc_failed", **logline.current())
        if isinstance(error, StoreError):
            logline.annotate(outcome="failed", code="STORE_UNAVAILABLE")
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                "the game store failed; retrying with the same request_id is safe",
            )
        logline.annotate(outcome="failed", code="INTERNAL")
        await context.abort(grpc.StatusCode.INTERNAL, "internal server error (logged)")

    def _close(
        self,
        service: str,
        name: str,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
        line: contextvars.Token[dict[str, object] | None],
        started: float,
        ending: str,
    ) -> None:
        """Count the call and write its canonical line. ``ending`` is OK, CANCELLED, or FAILED
        (it raised: the status it was refused or failed with names it)."""
        code = ending
        if ending != "CANCELLED":
            status = context.code()
            if status is not None and (ending == "OK" or status != grpc.StatusCode.OK):
                code = status.name if hasattr(status, "name") else str(status)
            elif ending == "FAILED":
                code = "INTERNAL"
        elapsed = time.perf_counter() - started
        metrics.grpc_handled(service, name, code).inc()
        metrics.grpc_seconds(service, name).observe(elapsed)
        fields = logline.end(line)
        if not service.startswith("grpc.health"):
            # Every line says how the call ended: handlers set accepted / created / refused /
            # failed where they know more; a call that set nothing served ("ok"), was
            # cancelled (the client left, a stream's watcher included) or was refused.
            fields.setdefault("outcome", _DEFAULT_OUTCOME.get(code, "refused"))
            self.log.info("rpc", grpc_code=code, duration_ms=round(elapsed * 1000, 3), **fields)


def open_store(db: str, schema: str = "") -> GameStore:
    """The store ``db`` names: a PostgreSQL URL, or else a SQLite file."""
    if is_postgres_url(db):
        from referee.store.postgres import PostgresStore  # noqa: PLC0415

        return PostgresStore(db, schema=schema or None)
    from referee.store.sqlite import SqliteStore  # noqa: PLC0415

    return SqliteStore(db)


class StartError(Exception):
    """The server could not listen: its gRPC or metrics port is taken, or its host is not one
    of this machine's (a store that cannot open raises ``StoreError``; ``serve`` reports both
    the same way)."""


@dataclass
class Running:
    server: grpc.aio.Server
    port: int
    health: health.aio.HealthServicer
    store: GameStore
    games: GameManager
    background: list[asyncio.Task[None]]  # following the store's changes, keeping house

    async def stop(self, grace: float) -> None:
        """NOT_SERVING first so balancers drain us, then end the WatchGame streams (resumable),
        finish the calls in flight, and close."""
        await self.health.enter_graceful_shutdown()
        self.games.stop_watching()  # streams would outlast any grace: they end, resumable
        await self.server.stop(grace)
        for task in self.background:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.store.close()


class TlsFiles:
    """The TLS files, read again when they change, so a renewed certificate is served without a
    restart (cert-manager, or any renewal, rewrites the files well before the old certificate
    expires; read once, the server would go on presenting the old one until clients refused it).

    gRPC asks ``reloaded`` before each new connection's handshake; it looks at the files'
    modification times and sizes (a ``stat`` each) and reads them only when one changed.
    Connections already open keep the certificate they were made with. Files that cannot be
    read, or a key that is not the certificate's (a renewal that writes the two one after the
    other has such a moment, and every handshake would fail while it was served), keep the
    current configuration, with one warning until the files change again.
    """

    def __init__(self, cert: str, key: str, client_ca: str) -> None:
        self.paths = [Path(cert), Path(key)] + ([Path(client_ca)] if client_ca else [])
        self._seen: list[tuple[int, int]] = []
        self._refused: list[tuple[int, int]] = []  # the files as they were when they failed

    def _stamps(self) -> list[tuple[int, int]]:
        """Each file's modification time and size ((-1, -1) for one that is not there)."""
        stamps = []
        for path in self.paths:
            try:
                stat = path.stat()
            except OSError:
                stamps.append((-1, -1))
            else:
                stamps.append((stat.st_mtime_ns, stat.st_size))
        return stamps

    def load(self) -> grpc.ServerCertificateConfiguration:
        """The configuration the files hold now (raises OSError when one cannot be read, and
        ssl.SSLError, an OSError, when the key is not the certificate's)."""
        stamps = self._stamps()
        cert_path, key_path = map(str, self.paths[:2])
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert_path, key_path)
        cert, key, *client_ca = (path.read_bytes() for path in self.paths)
        self._seen = stamps
        return grpc.ssl_server_certificate_configuration(
            [(key, cert)], root_certificates=client_ca[0] if client_ca else None
        )

    def reloaded(self) -> grpc.ServerCertificateConfiguration | None:
        """A new configuration when a file changed since it was last read, else None."""
        stamps = self._stamps()
        if stamps in (self._seen, self._refused):
            return None
        try:
            configuration = self.load()
        except OSError as error:
            self._refused = stamps
            structlog.get_logger("referee.tls").warning("tls_reload_failed", error=str(error))
            return None
        structlog.get_logger("referee.tls").info(
            "tls_reloaded", files=[str(path) for path in self.paths]
        )
        return configuration


def keepalive_options(seconds: float, client_ping_seconds: float) -> list[tuple[str, int]]:
    """gRPC's options for finding connections whose peer is gone without closing them.

    gRPC's server pings a silent connection only after two hours, so a watcher whose network
    went away kept its WatchGame stream (and its place under --max-watchers) that long.
    Measured on grpcio 1.85: the unanswered ping closes the connection after
    ``grpc.http2.ping_timeout_ms`` (``grpc.keepalive_timeout_ms`` alone did not), and
    without ``max_pings_without_data`` 0 the server stops pinging a quiet stream after two
    pings. Clients may ping every ``client_ping_seconds``: gRPC's default, five minutes,
    answers more frequent pings with GOAWAY ("too many pings"), which ended the watches of a
    client that finds dead servers its own way after about a minute and a half. (That limit's
    option is ``grpc.http2.min_ping_interval_without_data_ms``; core's C name for it says
    ``RECV``, and an option spelt that way is silently ignored.)
    """
    interval = round(seconds * 1000)
    timeout = round(min(seconds, KEEPALIVE_TIMEOUT_SECONDS) * 1000)
    return [
        ("grpc.keepalive_time_ms", interval),
        ("grpc.keepalive_timeout_ms", timeout),
        ("grpc.http2.ping_timeout_ms", timeout),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.http2.min_ping_interval_without_data_ms", round(client_ping_seconds * 1000)),
        ("grpc.keepalive_permit_without_calls", 1),
    ]


def connection_age_options(seconds: float) -> list[tuple[str, int]]:
    """A client keeps its connection, and so the replica it reached, for as long as it runs: an
    L4 balancer (a Kubernetes ClusterIP Service) or client-side balancing over the headless
    Service re-resolves and spreads connections only when one closes, so replicas added by
    the autoscaler would get no traffic from clients already connected. Past ``seconds`` gRPC
    sends GOAWAY: new calls go on a new connection, and the calls in flight get a grace period
    (a WatchGame stream, which would never end by itself, then ends UNAVAILABLE "max connection
    age", which ``watch(resume=True)`` resumes). None for 0."""
    if not seconds:
        return []
    return [
        ("grpc.max_connection_age_ms", round(seconds * 1000)),
        (
            "grpc.max_connection_age_grace_ms",
            round(min(seconds, CONNECTION_AGE_GRACE_SECONDS) * 1000),
        ),
    ]


async def start_server(settings: Settings, store: GameStore | None = None) -> Running:
    """Bind the port, open the store, register the services and start serving.

    The port is bound first, so a server that cannot listen creates no database. Raises
    ``StartError`` when the port cannot be bound (taken, or a bad host)."""
    server = grpc.aio.server(
        interceptors=[ObservabilityInterceptor(settings.max_message_bytes)],
        options=[
            (
                "grpc.max_receive_message_length",
                min(CORE_MESSAGE_FACTOR * settings.max_message_bytes, 2**31 - 1),
            ),
            ("grpc.max_send_message_length", 16 * settings.max_message_bytes),
            # gRPC sets SO_REUSEPORT by default: a second server on a taken port would start
            # and take half of the new connections, to its own database.
            ("grpc.so_reuseport", 0),
            # Calls gRPC has received but the server has not picked up yet. grpc.aio picks
            # them up one at a time on the event loop (about 0.4 ms each here), so a burst of
            # clients reconnecting at once (every watcher after a restart) queues here. gRPC's
            # defaults (1,000, then a random share up to 3,000) cancelled some 170 of 2,000
            # WatchGame calls opened at once; one limit makes the bound plain.
            ("grpc.server.max_pending_requests", settings.max_pending_calls),
            ("grpc.server.max_pending_requests_hard_limit", settings.max_pending_calls),
            *keepalive_options(settings.keepalive_seconds, settings.client_ping_seconds),
            *connection_age_options(settings.max_connection_age_seconds),
        ],
    )
    address = f"{settings.host}:{settings.port}"
    try:
        if settings.tls_cert:
            files = TlsFiles(settings.tls_cert, settings.tls_key, settings.tls_client_ca)
            try:
                initial = files.load()
            except OSError as error:
                raise StartError(f"cannot use the TLS files: {error}") from None
            credentials = grpc.dynamic_ssl_server_credentials(
                initial,
                # grpc's documentation: "or None for no change"; its type stubs omit the None.
                files.reloaded,  # type: ignore[arg-type]
                require_client_authentication=bool(settings.tls_client_ca),
            )
            port = server.add_secure_port(address, credentials)
        else:
            port = server.add_insecure_port(address)
    except (OSError, RuntimeError) as error:
        raise StartError(f"cannot listen on {address}: {error}") from None
    try:
        return await _serve_on(server, port, settings, store)
    except BaseException:
        await server.stop(None)  # let the port go: nothing was served on it
        raise


async def _serve_on(
    server: grpc.aio.Server, port: int, settings: Settings, store: GameStore | None
) -> Running:
    store = store if store is not None else open_store(settings.db, settings.db_schema)
    await store.open()
    games = GameManager(
        store,
        server_adjudicator_hash=token_hash(settings.adjudicator_token)
        if settings.adjudicator_token
        else "",
        server_creator_hash=token_hash(settings.creator_token) if settings.creator_token else "",
        max_active_games=settings.max_games,
        max_watchers=settings.max_watchers,
        watch_window=settings.watch_window,
        idle_after=settings.idle_after,
        keep_responses=settings.keep_responses_seconds,
        refusal_rate=settings.refusal_rate,
        refusal_burst=settings.refusal_burst,
        shared_store=is_postgres_url(settings.db),
    )
    await games.recount_active_games()
    pb_grpc.add_RefereeServiceServicer_to_server(RefereeServicer(games), server)
    pb_grpc.add_RulesServiceServicer_to_server(RulesServicer(), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    await server.start()
    for name in ("", *SERVICE_NAMES):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    background = [
        asyncio.create_task(games.follow_changes(), name="follow-store-changes"),
        asyncio.create_task(games.keep_house(settings.housekeeping_seconds), name="keep-house"),
        asyncio.create_task(
            follow_store_health(store, health_servicer, settings.store_check_seconds),
            name="follow-store-health",
        ),
    ]
    return Running(server, port, health_servicer, store, games, background)


async def follow_store_health(
    store: GameStore, health_servicer: health.aio.HealthServicer, every: float
) -> None:
    """Readiness follows the store: RefereeService is NOT_SERVING while the store cannot be
    read, SERVING again once it can (checked every ``every`` seconds, until cancelled).

    A replica cut off from the shared PostgreSQL database answered every game call
    UNAVAILABLE while its health said SERVING, so balancers and Kubernetes' readiness probe
    (both ask for RefereeService) kept sending it traffic the other replicas could serve.
    The server as a whole ("", the liveness probe's) and the stateless RulesService stay
    SERVING: restarting the process would not bring the database back. After a graceful
    shutdown has begun, the health servicer ignores these changes.
    """
    log = structlog.get_logger("referee.store")
    service = SERVICE_NAMES[0]  # RefereeService
    reachable = True
    while True:
        await asyncio.sleep(every)
        try:
            await asyncio.wait_for(store.ping(), timeout=max(every, STORE_CHECK_TIMEOUT_SECONDS))
        except (StoreError, TimeoutError) as error:
            metrics.STORE_REACHABLE.set(0)
            if reachable:
                reachable = False
                await health_servicer.set(service, health_pb2.HealthCheckResponse.NOT_SERVING)
                log.warning(
                    "store_unreachable",
                    service=service,
                    health="NOT_SERVING",
                    error=str(error) or "no answer in time",
                )
            continue
        metrics.STORE_REACHABLE.set(1)
        if not reachable:
            reachable = True
            await health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
            log.info("store_reachable", service=service, health="SERVING")


def tune_gc() -> None:
    """Collect cyclic garbage less often: the server allocates a few hundred containers per
    action (immutable game states, dicts for views and events), so with the default threshold
    of 700 the collector ran about once per action and took about a tenth of the event loop's
    time under load (py-spy, bench/service.py, 2026-12-01). Game states hold no reference
    cycles, so a higher first threshold only lets short-lived cyclic garbage (asyncio and gRPC
    call objects) wait a little longer. Everything loaded at start-up (modules, the option
    registry, protobuf descriptors) is frozen out of the collector's scans."""
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, 50, 100)


async def serve(settings: Settings) -> int:
    """Serve until SIGTERM or SIGINT; the exit status (1: could not start, logged as
    ``start_failed`` with the reason, no traceback)."""
    configure_logging(settings.log_format)
    route_library_logs(settings.log_format)
    log = structlog.get_logger("referee")
    try:
        if settings.metrics_port:  # first: a taken metrics port leaves no database behind
            try:
                start_http_server(settings.metrics_port, addr=settings.host)
            except OSError as error:
                raise StartError(
                    f"cannot serve metrics on {settings.host}:{settings.metrics_port}: {error}"
                ) from None
        running = await start_server(settings)
    except (StartError, StoreError) as error:
        log.error("start_failed", error=str(error))
        return 1
    tune_gc()
    log.info(
        "serving",
        address=f"{settings.host}:{running.port}",
        db=settings.db if "://" not in settings.db else settings.db.split("@")[-1],
        metrics_port=settings.metrics_port,
        tls=bool(settings.tls_cert),
        games_created_by="creator credential" if settings.creator_token else "anyone",
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting_down", grace_seconds=settings.grace_seconds)
    await running.stop(settings.grace_seconds)
    log.info("stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pinochle-referee serve")
    add_arguments(parser)
    try:
        settings = settings_from(parser.parse_args(argv))
    except SettingsError as error:
        parser.error(str(error))
    return asyncio.run(serve(settings))
