"""Logs, and the interceptor every call goes through: one canonical structlog line per RPC,
the Prometheus call metrics, rich error statuses, and requests over the size limit refused
where the server can still log them. The audit log of game requests lives in the database.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import orjson
import structlog

from referee.service import logline, metrics
from referee.service.errors import ServiceError, invalid, over_limit, schema_changed
from referee.store.base import SchemaChanged, StoreError

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
    """One JSON log line; values orjson cannot encode are written as their ``str``. A str
    holding a lone surrogate (a non-UTF-8 ``--db`` path, say) or an int beyond 64 bits, which
    orjson refuses outright, goes through the standard library's encoder (the surrogate as its
    escape): the refusal ended the server at its ``serving`` line, in a traceback."""
    try:
        return orjson.dumps(event, default=str, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:
        return json.dumps(event, default=str, separators=(",", ":")).encode()


def _orjson_text(event: Any, **_: Any) -> str:
    """The same line as text, for the standard library's handler."""
    return _orjson_line(event).decode()


_DEFAULT_OUTCOME = {"OK": "ok", "CANCELLED": "cancelled", "DEADLINE_EXCEEDED": "cancelled"}


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
        refusal = over_limit(
            f"the request is {self.size} bytes; this server accepts at most {self.limit}"
            " (--max-message-bytes)",
            reason="REQUEST_TOO_LARGE",
            limit=self.limit,
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


# Streams with a cap of their own, not counted among the calls ``--max-pending-calls`` bounds:
# WatchGame (``--max-watchers``), health Watch and reflection (``--max-service-streams``). They
# stay open for as long as their clients like, so counted here they would fill the limit and
# refuse every other call. Health Check is not counted either: an overloaded server must still
# answer its probes, or the orchestrator would restart it as dead.
_UNCOUNTED_SERVICES = ("grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection")
_UNCOUNTED_METHODS = frozenset({"WatchGame"})


class ObservabilityInterceptor(grpc.aio.ServerInterceptor):
    """One canonical log line and the gRPC metrics for every RPC, and the bound on the calls
    the server holds at once (``max_calls``, ``--max-pending-calls``).

    That bound was gRPC's alone: the server set gRPC's queue of calls received but not yet
    started to ``--max-pending-calls``, and gRPC cancelled the calls of a burst beyond it before
    any of the server's code ran: CANCELLED, a status a client reads as its own cancellation,
    never logged or counted (of 20 slow calls opened at once with a limit of 5, most). Now the
    interceptor counts the calls it has started and not finished, the streams with caps of their
    own and the health service apart, and refuses one beyond ``max_calls`` before its handler
    runs: RESOURCE_EXHAUSTED, reason TOO_MANY_CALLS, ``metadata["limit"]``, logged and counted
    like any refusal. gRPC's queue is set larger (``server.PENDING_QUEUE_FACTOR`` times, and at
    least gRPC's default), so that a burst reaches this count rather than gRPC's silent
    refusal; only a flood larger still is gRPC's to cancel. The count is one increment and one
    decrement per call, on the event loop, so it needs no lock.
    """

    def __init__(self, max_message_bytes: int, max_calls: int = 2**31 - 1) -> None:
        self.log = structlog.get_logger("referee.rpc")
        # The canonical line's logger itself, once structlog caches it (see ``_line_logger``).
        self._line_log: Any = None
        self.max_message_bytes = max_message_bytes
        self.max_calls = max_calls
        self.open_calls = 0  # counted calls started and not finished
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
        """``handler`` with the log line, the metrics and the refusal handling around it.

        Every kind of method: the reflection service's is a bidirectional stream, which was
        returned unwrapped, so its calls (grpcurl's, say) had no log line and were in no metric.
        A request stream's messages are decoded by gRPC as they come (``_tolerant`` is for
        one request, which the handler receives whole).
        """
        _, _, path = method.partition("/")
        service, _, name = path.partition("/")
        kind = metrics.grpc_type(handler.request_streaming, handler.response_streaming)
        if handler.unary_unary is not None:
            inner, make = handler.unary_unary, grpc.unary_unary_rpc_method_handler
        elif handler.unary_stream is not None:
            # Issue 4 (gRPC health): a handler that sends with ``context.write`` (the health
            # service's Watch) is a coroutine, not an async generator; wrapping it in
            # ``async for`` failed every health Watch with UNKNOWN (``_either`` tells them apart).
            inner, make = handler.unary_stream, grpc.unary_stream_rpc_method_handler
        elif handler.stream_unary is not None:
            inner, make = handler.stream_unary, grpc.stream_unary_rpc_method_handler
        else:
            # Reflection's one method is a bidirectional stream: its log line,
            # grpc_server_handled_total, and a refusal (its stream cap) given its rich status, as
            # every other call's; passed through bare, a ServiceError it raised reached the
            # client as UNKNOWN. Its requests are read by grpc_reflection's own loop.
            inner, make = handler.stream_stream, grpc.stream_stream_rpc_method_handler
        if handler.request_streaming:
            decode = handler.request_deserializer  # gRPC decodes a stream's messages as they come
        else:
            decode = _tolerant(handler.request_deserializer, self.max_message_bytes)
        return make(
            self._either(kind, service, name, inner, self._counted(service, name)),
            request_deserializer=decode,
            response_serializer=handler.response_serializer,
        )

    def _either(self, kind: str, service: str, name: str, inner: Any, counted: bool) -> Any:
        """A handler wrapped as what it is: an async generator (a stream that yields), or a
        coroutine (a unary call, or a stream sent with ``context.write``)."""
        if inspect.isasyncgenfunction(inner):
            return self._streamed(kind, service, name, inner, counted)
        return self._called(kind, service, name, inner, counted)

    @staticmethod
    def _counted(service: str, name: str) -> bool:
        """Whether the method's calls count toward ``max_calls`` (see ``_UNCOUNTED_SERVICES``)."""
        return service not in _UNCOUNTED_SERVICES and name not in _UNCOUNTED_METHODS

    def _too_many_calls(self) -> ServiceError:
        return over_limit(
            f"this server holds at most {self.max_calls} calls at once (--max-pending-calls);"
            " try again later",
            reason="TOO_MANY_CALLS",
            limit=self.max_calls,
        )

    def _called(
        self,
        kind: str,
        service: str,
        name: str,
        inner: Callable[..., Awaitable[Any]],
        counted: bool,
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
            if counted:
                self.open_calls += 1  # given back in the finally below, however the call ends
            try:
                if counted and self.open_calls > self.max_calls:
                    raise self._too_many_calls()
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
                if counted:
                    self.open_calls -= 1
                self._close(kind, service, name, context, line, started, ending)

        return call

    def _streamed(
        self,
        kind: str,
        service: str,
        name: str,
        inner: Callable[..., AsyncIterator[Any]],
        counted: bool,
    ) -> Callable[..., AsyncIterator[Any]]:
        """An async-generator stream handler wrapped (see ``_called``)."""

        async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:  # type: ignore[type-arg]
            line = logline.begin(rpc=name)
            fields = logline.opened()  # this call's own, whatever context ends it (see below)
            started = time.perf_counter()
            ending = "OK"
            if counted:
                self.open_calls += 1  # given back in the finally below, however the call ends
            try:
                if counted and self.open_calls > self.max_calls:
                    raise self._too_many_calls()
                if isinstance(request, _Unread):
                    await _refuse_unread(request, context)
                async for item in inner(request, context):
                    yield item
            except (asyncio.CancelledError, GeneratorExit):
                # GeneratorExit: the client went away while this waited at its yield; gRPC
                # dropped the stream and asyncio closes it in another task and context.
                ending = "CANCELLED"
                raise
            except Exception as error:
                ending = "FAILED"
                await self._refuse_or_fail(error, context)
                raise
            finally:
                if counted:
                    self.open_calls -= 1
                self._close(kind, service, name, context, line, started, ending, fields)

        return stream

    async def _refuse_or_fail(self, error: Exception, context: grpc.aio.ServicerContext) -> None:  # type: ignore[type-arg]
        """Turn what a handler raised into a status a client can act on, never ``UNKNOWN``.

        A ``ServiceError`` is a refusal: it becomes its rich status (ErrorInfo with the A.5
        code, BadRequest naming the field) and the log line says ``refused`` with its code
        (``failed`` for DATA_LOSS, a damaged stored row: the data's fault, not the caller's).
        An ``AbortError``, or a status already set, passes through. Anything else is a fault of
        the server, not of the client: it is logged with its traceback and answered
        ``UNAVAILABLE`` when the store failed (a retry with the same ``request_id`` is safe: it
        returns the stored response if the write did land) or ``INTERNAL`` otherwise, with a
        fixed message, so no exception text, path or card reaches the caller. Left alone,
        grpc.aio would answer ``UNKNOWN`` with the exception's text. Every path but the
        pass-through raises ``AbortError``.

        A store that stopped serving (``SchemaChanged``) refuses every call alike, and said
        why once in the log when it stopped: each such call is answered ``UNAVAILABLE``,
        reason ``STORE_SCHEMA_CHANGED`` (``schema_changed``), without a traceback of its own.
        """
        if isinstance(error, SchemaChanged):
            error = schema_changed()
            logline.annotate(outcome="failed", code=error.reason)
            await context.abort_with_status(error.to_status())
        if isinstance(error, ServiceError):
            failed = error.code == grpc.StatusCode.DATA_LOSS
            logline.annotate(outcome="failed" if failed else "refused", code=error.reason)
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
        kind: str,
        service: str,
        name: str,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
        line: contextvars.Token[dict[str, object] | None],
        started: float,
        ending: str,
        fields_of_stream: dict[str, object] | None = None,
    ) -> None:
        """Count the call and write its canonical line. ``ending`` is OK, CANCELLED, or FAILED
        (it raised: the status it was refused or failed with names it)."""
        code = ending
        if ending == "CANCELLED":
            remaining = context.time_remaining()
            if remaining is not None and remaining <= 0:
                # gRPC cancels the handler when the client's deadline passes; the client sees
                # DEADLINE_EXCEEDED, and so do the metrics (go-grpc-prometheus counts it so),
                # not CANCELLED, which says the client went away.
                code = "DEADLINE_EXCEEDED"
        else:
            status = context.code()
            if status is not None and (ending == "OK" or status != grpc.StatusCode.OK):
                code = status.name if hasattr(status, "name") else str(status)
            elif ending == "FAILED":
                code = "INTERNAL"
        elapsed = time.perf_counter() - started
        metrics.grpc_handled(kind, service, name, code).inc()
        metrics.grpc_seconds(kind, service, name).observe(elapsed)
        fields = logline.end(line, fields_of_stream)
        # A health call is logged only when it was refused or failed (an outcome set): probes
        # call Check every few seconds, and a line each would bury the game calls' lines.
        if "outcome" in fields or not service.startswith("grpc.health"):
            # Every line says how the call ended: handlers set accepted / created / refused /
            # failed where they know more; a call that set nothing served ("ok"), was
            # cancelled (the client left, a stream's watcher included) or was refused.
            fields.setdefault("outcome", _DEFAULT_OUTCOME.get(code, "refused"))
            log = self._line_log if self._line_log is not None else self._line_logger()
            log.info("rpc", grpc_code=code, duration_ms=round(elapsed * 1000, 3), **fields)

    def _line_logger(self) -> Any:
        """``self.log`` resolved to the configured logger, for the canonical line.

        Hot path: the lazy proxy ``get_logger`` returns assembles or looks up its logger on
        every call (``__getattr__``, then ``bind``), about 6,700 instructions of each
        SubmitAction's line; structlog's performance advice is to call a logger used this
        often through ``bind()``'s result. It is kept only when structlog is configured to
        cache loggers on first use (``configure_logging`` does), when the proxy would keep
        the very same logger; otherwise every line resolves it again, as the proxy does, so
        a reconfiguration (tests) still applies.
        """
        log = self.log.bind()
        if structlog.get_config()["cache_logger_on_first_use"]:
            self._line_log = log
        return log
