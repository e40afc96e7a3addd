"""The ``grpc.aio`` server: the store, health, reflection, TLS, keepalive, readiness that
follows the store, and graceful shutdown. Its settings are ``referee.service.settings``; its
logs and per-call interceptor ``referee.service.observability``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import signal
import ssl
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc
from prometheus_client import start_http_server

from protos.pinochle.referee.v1 import referee_pb2 as pb
from protos.pinochle.referee.v1 import referee_pb2_grpc as pb_grpc
from referee.service import metrics
from referee.service.auth import token_hash
from referee.service.errors import ServiceError, over_limit
from referee.service.games import GameManager
from referee.service.observability import (
    CORE_MESSAGE_FACTOR,
    ObservabilityInterceptor,
    configure_logging,
    route_library_logs,
)
from referee.service.servicers import RefereeServicer, RulesServicer
from referee.service.settings import (
    CONNECTION_AGE_GRACE_SECONDS,
    KEEPALIVE_TIMEOUT_SECONDS,
    MAX_SERVICE_STREAMS,
    Settings,
    SettingsError,
    add_arguments,
    settings_from,
)
from referee.store.base import GameStore, StoreError, is_postgres_url

# StoreHealth: a store read that takes longer counts as unreachable.
STORE_CHECK_TIMEOUT_SECONDS = 5.0
# keep_running: the first wait before a failed background loop starts again, doubled after each
# failure up to the second; a loop that ran this long before failing starts from the first again.
BACKGROUND_RETRY_SECONDS = 0.5
BACKGROUND_MAX_RETRY_SECONDS = 30.0
GC_THRESHOLD = 20_000  # allocations between first-generation collections (CPython's default: 700)
SERVICE_NAMES = (
    pb.DESCRIPTOR.services_by_name["RefereeService"].full_name,
    pb.DESCRIPTOR.services_by_name["RulesService"].full_name,
)
# Every service the server registers: reflection lists them, and their metrics start at 0.
SERVED_SERVICES = (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME)


# A response (an export, a page of verdicts) may be this many times ``--max-message-bytes``: the
# clients accept 16 MiB by default, 16 times the default 1 MiB.
RESPONSE_MESSAGE_FACTOR = 16
# gRPC's queue of calls received and not yet picked up holds this many times
# ``--max-pending-calls`` (see start_server), and never fewer than gRPC's own default limit:
# room for a burst to reach the server's own bound, which refuses it with a status.
PENDING_QUEUE_FACTOR = 4
GRPC_DEFAULT_PENDING_LIMIT = 3_000


def bare_host(host: str) -> str:
    """``--host`` without the brackets an IPv6 address may be written in (``[::1]``: ``::1``),
    as the metrics server binds it."""
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def host_port(host: str, port: int) -> str:
    """``host:port`` as gRPC binds it and the log names it, an IPv6 address in brackets
    (``[::1]:50051``). ``--host ::`` or ``::1`` failed the start: gRPC read ``::1:0`` as an
    IPv6 address without a port, and ``:::50051`` as no address at all; the bracketed form
    failed the metrics server, which takes the address bare."""
    bare = bare_host(host)
    return f"[{bare}]:{port}" if ":" in bare else f"{bare}:{port}"


def _grpc_int(value: int) -> int:
    """``value`` as a gRPC integer option, which is a C int: larger values failed the server's
    start with an OverflowError and a traceback (``--max-message-bytes`` of 128 MiB and more,
    ``--max-pending-calls`` or ``--max-streams-per-connection`` past 2**31 - 1, and
    ``--keepalive-seconds`` or ``--max-connection-age-seconds`` past about 24.8 days, which gRPC
    takes in milliseconds)."""
    return min(value, 2**31 - 1)


def open_store(db: str, schema: str = "", create: bool = True, serving: bool = True) -> GameStore:
    """The store ``db`` names: a PostgreSQL URL, or else a SQLite file. ``create=False``: one
    that exists already at this code's schema, left as it is (``export``). ``serving=False``:
    one that only reads beside the servers, holding no serving lock (``export``): a SQLite file
    is served by one server at a time, and ``downgrade`` refuses while a server serves."""
    if is_postgres_url(db):
        from referee.store.postgres import PostgresStore  # noqa: PLC0415

        return PostgresStore(db, schema=schema or None, create=create, serving=serving)
    from referee.store.sqlite import SqliteStore  # noqa: PLC0415

    return SqliteStore(db, create=create, serving=serving)


def db_for_log(db: str) -> str:
    """The database as the ``serving`` line names it: a SQLite path, or a PostgreSQL URL's
    ``host:port/dbname`` without credentials. The line once cut the URL at its ``@`` only, so a
    password given as a query parameter (``postgresql://db/referee?password=...``, libpq's
    other form) was written to the log."""
    if not is_postgres_url(db):
        return db
    from referee.store.postgres import describe  # noqa: PLC0415 - psycopg only when used

    return describe(db)


class StartError(Exception):
    """The server could not listen: its gRPC or metrics port is taken, or its host is not one
    of this machine's (a store that cannot open raises ``StoreError``; ``serve`` reports both
    the same way)."""


@dataclass
class Running:
    server: grpc.aio.Server
    port: int
    health: HealthServicer
    reflection: ReflectionServicer
    store: GameStore
    games: GameManager
    background: list[asyncio.Task[None]]  # following the store's changes, keeping house

    # Set by force_stop: the calls still in flight are cancelled at once, whatever is left of
    # the grace period.
    forced: asyncio.Event = field(default_factory=asyncio.Event)
    server_stopping: bool = False  # gRPC's stop has begun (see force_stop)

    async def stop(self, grace: float, drain: float = 0.0) -> None:
        """NOT_SERVING first so balancers drain us; then, for ``drain`` seconds, go on serving
        every call (``--drain-seconds``); then end the WatchGame streams (resumable) and the
        reflection streams, finish the calls in flight within ``grace``, and close.
        ``force_stop`` cuts the drain short too.

        Without a drain the port closed at once, so a health Check failed UNAVAILABLE rather
        than read NOT_SERVING, and a balancer or Kubernetes endpoint that had not yet seen the
        pod leave sent calls that could not connect."""
        await self.health.enter_graceful_shutdown()
        if drain > 0 and not self.forced.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(drain):
                    await self.forced.wait()
        self.games.stop_watching()  # streams would outlast any grace: they end, resumable
        self.reflection.stop()  # the client's to end, so they would too
        self.server_stopping = True
        await self.server.stop(None if self.forced.is_set() else grace)
        for task in self.background:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.store.close()

    async def force_stop(self) -> None:
        """Cancel the calls still in flight now rather than at the end of the grace period, and
        skip what is left of the drain (``stop`` must be running, or about to: it goes on to
        close the store and returns).

        Nothing acknowledged is lost, and nothing unfinished is acknowledged: a cancelled call
        sends no answer, and a commit already handed to the store is not cancelled with it
        (``games._durably`` waits for it under ``asyncio.shield``, and ``store.close`` for every
        write submitted), so it is durable and a retry with its ``request_id`` is answered as
        it was committed. gRPC's stop with no grace, while the graceful one is under way,
        cancels every call at once and lets the graceful one return."""
        self.forced.set()
        if self.server_stopping:
            await self.server.stop(None)


class StreamSlots:
    """The places for the streams anyone may open without a credential: health ``Watch`` and
    reflection's ``ServerReflectionInfo`` (``--max-service-streams``, both counted together).

    Each open stream holds server memory (gRPC's call, the handler's task) for as long as its
    client keeps it, and these need no token, so without a bound one client could open them
    until the process ran out of memory. WatchGame streams have their own cap
    (``--max-watchers``), not this one: shared, streams anyone may open would take the places
    of the seats and spectators following their games, and a server full of spectators would
    refuse an orchestrator's health watch. A stream beyond the cap is refused before it holds
    anything (RESOURCE_EXHAUSTED, reason TOO_MANY_STREAMS, ``metadata["limit"]`` the cap, as
    CreateGame's TOO_MANY_GAMES); the streams already open are not touched. Every ``take``
    that succeeded is matched by one ``give_back`` when its stream ends, however it ends (the
    client cancelled it, the server stopped). Health ``Check`` takes no place: a unary call
    holds nothing once answered, and probes must stay cheap.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0

    def take(self) -> None:
        """Take a place for a new stream, or refuse it (ServiceError) when none is left."""
        if self.open >= self.limit:
            raise over_limit(
                f"this server keeps at most {self.limit} health Watch and reflection streams"
                " open at once (--max-service-streams); try again later",
                reason="TOO_MANY_STREAMS",
                limit=self.limit,
            )
        self.open += 1
        metrics.SERVICE_STREAMS_ACTIVE.set(self.open)

    def give_back(self) -> None:
        self.open -= 1
        metrics.SERVICE_STREAMS_ACTIVE.set(self.open)


class ReflectionServicer:
    """grpc_reflection's asyncio servicer, each stream holding one of ``slots``' places, and
    every stream ended when the server's stop begins (``stop``).

    It wraps that servicer rather than extending it: grpc_reflection's annotations declare the
    method a coroutine returning an iterable, where it is an async generator (as here)."""

    def __init__(self, service_names: Sequence[str], slots: StreamSlots) -> None:
        self._answers: Any = reflection.aio.ReflectionServicer(service_names)
        self.slots = slots
        self.stopping = False
        self._stopped: asyncio.Future[None] | None = None  # resolved by stop

    async def ServerReflectionInfo(  # noqa: N802 - gRPC method names
        self,
        request_iterator: Any,
        context: grpc.aio.ServicerContext[
            reflection_pb2.ServerReflectionRequest, reflection_pb2.ServerReflectionResponse
        ],
    ) -> AsyncIterator[reflection_pb2.ServerReflectionResponse]:
        if self.stopping:
            raise _reflection_shutting_down()
        self.slots.take()
        try:
            requests = self._until_stopped(request_iterator)
            async for response in self._answers.ServerReflectionInfo(requests, context):
                yield response
        finally:
            self.slots.give_back()

    def stop(self) -> None:
        """The server is shutting down: end every reflection stream now, and refuse new ones.

        A stream lasts as long as its client keeps its side open (grpcurl's interactive mode,
        an IDE's gRPC client), so one open stream held every graceful shutdown for the whole
        grace period, then was cut with a bare "Cancelling all calls", while health ``Watch``
        and ``WatchGame`` streams end as the shutdown begins. Each stream now answers the
        request it has read and ends ``UNAVAILABLE``, reason ``SHUTTING_DOWN``: not OK, which
        would leave a request sent meanwhile unanswered without a word; ``UNAVAILABLE`` is
        what a client retries on another server, or on this one once it is back. Called
        after the drain (``Running.stop``), so streams are answered while it lasts."""
        self.stopping = True
        if self._stopped is not None and not self._stopped.done():
            self._stopped.set_result(None)

    async def _until_stopped(
        self, requests: AsyncIterator[reflection_pb2.ServerReflectionRequest]
    ) -> AsyncIterator[reflection_pb2.ServerReflectionRequest]:
        """The stream's requests as they come, until ``stop``: then ``UNAVAILABLE``. Each read
        waits on the stop as well, which only a reflection stream pays for (a task per request
        read): nothing is added to any other call."""
        loop = asyncio.get_running_loop()
        if self._stopped is None:
            self._stopped = loop.create_future()
        stopped = self._stopped
        incoming = aiter(requests)
        while True:
            reading = asyncio.ensure_future(anext(incoming, None))
            try:
                # asyncio.wait, unlike await, does not cancel the shared future when this
                # stream is cancelled: the other streams keep waiting on it.
                await asyncio.wait((reading, stopped), return_when=asyncio.FIRST_COMPLETED)
            except BaseException:  # the stream was cancelled (its client left, a forced stop)
                reading.cancel()
                raise
            if not reading.done():
                reading.cancel()
                raise _reflection_shutting_down()
            request = reading.result()
            if request is None:  # the client is done sending
                return
            yield request


def _reflection_shutting_down() -> ServiceError:
    """How a reflection stream ends, or is refused, once the server's stop has begun."""
    return ServiceError(
        grpc.StatusCode.UNAVAILABLE,
        "the server is shutting down; open the reflection stream again (to another server, or"
        " to this one once it is back)",
        reason="SHUTTING_DOWN",
    )


class HealthServicer(health_pb2_grpc.HealthServicer):
    """The gRPC health service (``grpc.health.v1.Health``): grpc_health's asyncio servicer,
    with two faults of its ``Watch`` mended.

    * When one watcher of a service left, it deleted the condition every other watcher of that
      service waited on, so they never heard of a change again: not readiness going NOT_SERVING
      while the store cannot be read, nor the shutdown's NOT_SERVING. Here each watcher has
      its own wake-up, and a service's entry goes only with its last watcher (so names that
      clients make up do not pile up).
    * A ``Watch`` stream followed the server until gRPC cut it: one health watcher (gRPC's
      client-side health checking keeps one per connection) held every graceful shutdown for
      the whole grace period, then got a bare "Cancelling all calls". Once the shutdown has
      begun, a stream sends NOT_SERVING (or whatever it has not sent yet) and ends, OK.

    ``Check``, ``set`` and ``enter_graceful_shutdown`` behave as grpc_health's. A ``Watch``
    stream holds one of ``slots``' places while it is open (``StreamSlots``); ``Check`` none.
    """

    def __init__(self, slots: StreamSlots | None = None) -> None:
        self.slots = slots if slots is not None else StreamSlots(MAX_SERVICE_STREAMS)
        self._status: dict[str, int] = {"": health_pb2.HealthCheckResponse.SERVING}
        self._watchers: dict[str, set[asyncio.Event]] = {}
        self._shutting_down = False

    async def Check(  # noqa: N802 - gRPC method names
        self,
        request: health_pb2.HealthCheckRequest,
        context: grpc.aio.ServicerContext[
            health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse
        ],
    ) -> health_pb2.HealthCheckResponse:
        status = self._status.get(request.service)
        if status is None:
            await context.abort(grpc.StatusCode.NOT_FOUND)
        return health_pb2.HealthCheckResponse(status=status)

    async def Watch(  # noqa: N802
        self,
        request: health_pb2.HealthCheckRequest,
        context: grpc.aio.ServicerContext[
            health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse
        ],
    ) -> None:
        self.slots.take()
        service = request.service
        wake = asyncio.Event()
        watchers = self._watchers.setdefault(service, set())
        watchers.add(wake)
        try:
            sent: int | None = None
            while True:
                wake.clear()  # before reading: a change while this writes wakes it again
                status = self._status.get(service, health_pb2.HealthCheckResponse.SERVICE_UNKNOWN)
                if status != sent:
                    await context.write(health_pb2.HealthCheckResponse(status=status))
                    sent = status
                    continue  # the status may have changed, or the shutdown begun, meanwhile
                if self._shutting_down:
                    return
                await wake.wait()
        finally:
            watchers.discard(wake)
            if not watchers:
                self._watchers.pop(service, None)
            self.slots.give_back()

    async def set(self, service: str, status: int) -> None:
        """Set ``service``'s status (ignored once the shutdown has begun)."""
        if self._shutting_down:
            return
        self._status[service] = status
        for wake in self._watchers.get(service, ()):
            wake.set()

    async def enter_graceful_shutdown(self) -> None:
        """Every service NOT_SERVING for good; every ``Watch`` stream sends it and ends."""
        if self._shutting_down:
            return
        self._shutting_down = True
        for service in self._status:
            self._status[service] = health_pb2.HealthCheckResponse.NOT_SERVING
        for watchers in self._watchers.values():
            for wake in watchers:
                wake.set()


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
    interval = _grpc_int(round(seconds * 1000))
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
        ("grpc.max_connection_age_ms", _grpc_int(round(seconds * 1000))),
        (
            "grpc.max_connection_age_grace_ms",
            round(min(seconds, CONNECTION_AGE_GRACE_SECONDS) * 1000),
        ),
    ]


async def start_server(settings: Settings, store: GameStore | None = None) -> Running:
    """Bind the port, open the store, register the services and start serving.

    The port is bound first, so a server that cannot listen creates no database. Raises
    ``StartError`` when the port cannot be bound (taken, or a bad host)."""
    pending_queue = max(
        PENDING_QUEUE_FACTOR * settings.max_pending_calls, GRPC_DEFAULT_PENDING_LIMIT
    )
    server = grpc.aio.server(
        interceptors=[
            ObservabilityInterceptor(settings.max_message_bytes, settings.max_pending_calls)
        ],
        options=[
            (
                "grpc.max_receive_message_length",
                _grpc_int(CORE_MESSAGE_FACTOR * settings.max_message_bytes),
            ),
            (
                "grpc.max_send_message_length",
                _grpc_int(RESPONSE_MESSAGE_FACTOR * settings.max_message_bytes),
            ),
            # gRPC sets SO_REUSEPORT by default: a second server on a taken port would start
            # and take half of the new connections, to its own database.
            ("grpc.so_reuseport", 0),
            # Calls gRPC has received but the server has not picked up yet. grpc.aio picks
            # them up one at a time on the event loop (about 0.4 ms each here), so a burst of
            # clients reconnecting at once (every watcher after a restart) queues here. gRPC's
            # defaults (1,000, then a random share up to 3,000) cancelled some 170 of 2,000
            # WatchGame calls opened at once. gRPC cancels a call beyond this queue silently
            # (CANCELLED, before any of the server's code runs), so it is larger than the
            # server's own bound, --max-pending-calls, which the interceptor enforces with a
            # status a client can act on (ObservabilityInterceptor): a burst is picked up and
            # refused, logged and counted, rather than cancelled unseen.
            ("grpc.server.max_pending_requests", _grpc_int(pending_queue)),
            ("grpc.server.max_pending_requests_hard_limit", _grpc_int(pending_queue)),
            # Announced to every client (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); gRPC's default
            # announces none (see settings.MAX_STREAMS_PER_CONNECTION).
            ("grpc.max_concurrent_streams", _grpc_int(settings.max_streams_per_connection)),
            *keepalive_options(settings.keepalive_seconds, settings.client_ping_seconds),
            *connection_age_options(settings.max_connection_age_seconds),
        ],
    )
    address = host_port(settings.host, settings.port)
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
        events_in_memory=settings.events_in_memory,
        idle_after=settings.idle_after,
        keep_responses=settings.keep_responses_seconds,
        refusal_rate=settings.refusal_rate,
        refusal_burst=settings.refusal_burst,
        shared_store=is_postgres_url(settings.db),
    )
    await games.recount_active_games()
    servicer = RefereeServicer(
        games, max_response_bytes=_grpc_int(RESPONSE_MESSAGE_FACTOR * settings.max_message_bytes)
    )
    pb_grpc.add_RefereeServiceServicer_to_server(servicer, server)
    pb_grpc.add_RulesServiceServicer_to_server(RulesServicer(), server)
    slots = StreamSlots(settings.max_service_streams)
    health_servicer = HealthServicer(slots)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection_servicer = ReflectionServicer(SERVED_SERVICES, slots)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(  # type: ignore[no-untyped-call]
        reflection_servicer,
        server,
    )
    metrics.initialize_grpc_metrics(SERVED_SERVICES)
    await server.start()
    for name in ("", *SERVICE_NAMES):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    store_health = StoreHealth(store, health_servicer, settings.store_check_seconds)
    background = [
        asyncio.create_task(keep_running(name, run), name=name)
        for name, run in (
            ("follow-store-changes", games.follow_changes),
            ("keep-house", lambda: games.keep_house(settings.housekeeping_seconds)),
            ("catch-up-doubtful-commits", games.follow_doubtful_commits),
            ("follow-store-health", store_health.follow),
        )
    ]
    return Running(server, port, health_servicer, reflection_servicer, store, games, background)


async def keep_running(name: str, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run the background loop ``run`` for the server's life (until cancelled), starting it
    again whenever it fails.

    These loops (another replica's commits folded in, housekeeping, readiness) catch the
    failures they expect, the store's among them; anything else used to end the task, seen by
    nobody: a replica then stopped folding in other replicas' commits (its watchers saw
    nothing more), or stopped evicting idle games and forgetting old responses, while it went
    on serving. Now the failure is logged with its traceback, counted in
    ``referee_background_restarts_total{task}``, and the loop starts again after a pause that
    doubles while it keeps failing (from ``BACKGROUND_RETRY_SECONDS`` to
    ``BACKGROUND_MAX_RETRY_SECONDS``). Each loop starts from what is durable or kept outside
    it: following the store's changes starts with ``ALL_GAMES``, so nothing announced while
    it was down is missed.
    """
    log = structlog.get_logger("referee")
    loop = asyncio.get_running_loop()
    pause = BACKGROUND_RETRY_SECONDS
    while True:
        started = loop.time()
        try:
            await run()
        except Exception:
            if loop.time() - started >= BACKGROUND_MAX_RETRY_SECONDS:
                pause = BACKGROUND_RETRY_SECONDS  # it had been working: a new failure
            log.exception("background_task_failed", task=name, restart_in_seconds=pause)
        else:  # pragma: no cover - none of the loops returns; one that did would stop working
            log.error("background_task_ended", task=name, restart_in_seconds=pause)
        metrics.background_restarts(name).inc()
        await asyncio.sleep(pause)
        pause = min(2 * pause, BACKGROUND_MAX_RETRY_SECONDS)


class StoreHealth:
    """Readiness follows the store: RefereeService is NOT_SERVING while the store cannot be
    read, SERVING again once it can (checked every ``every`` seconds).

    A replica cut off from the shared PostgreSQL database answered every game call
    UNAVAILABLE while its health said SERVING, so balancers and Kubernetes' readiness probe
    (both ask for RefereeService) kept sending it traffic the other replicas could serve.
    The server as a whole ("", the liveness probe's) and the stateless RulesService stay
    SERVING: restarting the process would not bring the database back. After a graceful
    shutdown has begun, the health servicer ignores these changes. What was last found is
    kept here, outside ``follow``, so a restarted ``follow`` (``keep_running``) goes on from it.
    """

    def __init__(self, store: GameStore, health_servicer: HealthServicer, every: float) -> None:
        self.store = store
        self.health_servicer = health_servicer
        self.every = every
        self.reachable = True

    async def follow(self) -> None:
        """Check the store every ``every`` seconds, until cancelled."""
        while True:
            await asyncio.sleep(self.every)
            await self.check()

    async def check(self) -> None:
        """Ping the store once and follow what it found.

        The ping is bounded with ``asyncio.timeout``, not ``asyncio.wait_for``: Python 3.11's
        ``wait_for`` returns the ping's result when the check is cancelled in the loop turn
        the ping ends in, so the cancellation was lost. ``Running.stop`` cancels this loop and
        waits for it to end, and the server's stop then waited for ever. On a loaded machine
        a stop hung so once in 40 runs of ``test_a_postgres_replica_downgraded_while_its_
        listener_reconnects_stops_serving`` (a store that stopped serving: each ping refused
        at once, every 0.05 s) and once in the first run of ``test_background`` (a ping
        stand-in that answers at once, every 0.02 s)."""
        log = structlog.get_logger("referee.store")
        service = SERVICE_NAMES[0]  # RefereeService
        timeout = max(self.every, STORE_CHECK_TIMEOUT_SECONDS)
        try:
            async with asyncio.timeout(timeout):
                await self.store.ping()
        except (StoreError, TimeoutError) as error:
            metrics.STORE_REACHABLE.set(0)
            if self.reachable:
                self.reachable = False
                await self.health_servicer.set(service, health_pb2.HealthCheckResponse.NOT_SERVING)
                log.warning(
                    "store_unreachable",
                    service=service,
                    health="NOT_SERVING",
                    error=str(error) or "no answer in time",
                )
            return
        metrics.STORE_REACHABLE.set(1)
        if not self.reachable:
            self.reachable = True
            await self.health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
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
    """Serve until SIGTERM or SIGINT; the exit status: 0 once stopped (or when a signal came
    while it was starting, logged as ``start_abandoned``), 1 when it could not
    start (logged as ``start_failed`` with the reason, no traceback), 128 plus the signal's
    number when a second signal forced the stop (``StopSignals``)."""
    configure_logging(settings.log_format)
    route_library_logs(settings.log_format)
    log = structlog.get_logger("referee")
    loop = asyncio.get_running_loop()
    # The stop signals are the loop's from the start, so one that comes while the server is
    # still starting (PostgreSQL unreachable, or another replica's migration holding the lock)
    # abandons the start. Before, SIGTERM's default applied until the server served, and as a
    # container's process 1, which the kernel spares the default of SIGTERM, the server went
    # on starting and then served until its orchestrator's grace period ended in SIGKILL.
    signals = StopSignals(loop)
    first = signals.next()
    try:
        if settings.metrics_port:  # first: a taken metrics port leaves no database behind
            try:
                start_http_server(settings.metrics_port, addr=bare_host(settings.host))
            except OSError as error:
                raise StartError(
                    f"cannot serve metrics on {host_port(settings.host, settings.metrics_port)}:"
                    f" {error}"
                ) from None
        starting = asyncio.ensure_future(start_server(settings))
        await asyncio.wait((starting, first), return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            starting.cancel()  # start_server lets the port go; the store opened nothing durable
            with contextlib.suppress(asyncio.CancelledError):
                await starting
        if starting.cancelled():
            log.info("start_abandoned", signal=first.result().name)
            ignore_stop_signals(loop)
            return 0
        running = starting.result()
    except (StartError, StoreError) as error:
        log.error("start_failed", error=str(error))
        return 1
    tune_gc()
    log.info(
        "serving",
        address=host_port(settings.host, running.port),
        db=db_for_log(settings.db),
        metrics_port=settings.metrics_port,
        tls=bool(settings.tls_cert),
        games_created_by="creator credential" if settings.creator_token else "anyone",
    )
    stop = await first
    log.info(
        "shutting_down",
        signal=stop.name,
        drain_seconds=settings.drain_seconds,
        grace_seconds=settings.grace_seconds,
    )
    stopping = asyncio.ensure_future(running.stop(settings.grace_seconds, settings.drain_seconds))
    second = signals.next()
    await asyncio.wait((stopping, second), return_when=asyncio.FIRST_COMPLETED)
    status = 0
    if second.done():
        status = FORCED_STOP_STATUS + second.result()
        log.warning("forced_stop", signal=second.result().name, exit_status=status)
        await running.force_stop()
    else:
        second.cancel()
    await stopping
    ignore_stop_signals(loop)
    log.info("stopped", exit_status=status)
    return status


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# A forced stop exits 128 plus the second signal's number (130 for SIGINT, 143 for SIGTERM), as a
# shell reports a process a signal ended and as the other commands' Ctrl-C does: calls were cut
# short, so a supervisor should not read it as a clean stop (0).
FORCED_STOP_STATUS = 128


class StopSignals:
    """SIGTERM and SIGINT, handled on the event loop: the first starts the graceful stop, one
    more while it runs forces it (``Running.force_stop``). Before, a second signal during the
    grace period changed nothing, so an operator who pressed Ctrl-C again, or a supervisor
    that escalates, waited out the whole grace period, or sent SIGKILL, which leaves no time
    to finish the commits in progress as a forced stop does.

    A signal counts only while ``serve`` waits for one (``next``), so the same signal sent
    twice at once (a supervisor such as ``timeout`` signals the process and then its group)
    counts once: the kernel merges a signal sent while the same one is pending, and signals
    that arrived together are read in one turn of the loop, before the shutdown has begun."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiting: asyncio.Future[signal.Signals] | None = None
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self._received, sig)

    def next(self) -> asyncio.Future[signal.Signals]:
        """The next stop signal, from now on."""
        self._waiting = self._loop.create_future()
        return self._waiting

    def _received(self, sig: signal.Signals) -> None:
        if self._waiting is not None and not self._waiting.done():
            self._waiting.set_result(sig)


def ignore_stop_signals(loop: asyncio.AbstractEventLoop) -> None:
    """Ignore SIGTERM and SIGINT from here to the process's end: the server has stopped, and
    its exit status is to say so (0).

    A second signal after the graceful stop (Ctrl-C pressed twice, or a supervisor that
    signals the process and its group) found the loop's handlers gone as ``asyncio.run``
    closed the loop: SIGTERM's default killed the process, SIGINT's raised
    ``KeyboardInterrupt``, and a server that had stopped cleanly exited -15 or -2, which
    Kubernetes, Compose and systemd report as a failure."""
    for sig in STOP_SIGNALS:
        loop.remove_signal_handler(sig)
        signal.signal(sig, signal.SIG_IGN)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pinochle-referee serve")
    add_arguments(parser)
    try:
        settings = settings_from(parser.parse_args(argv))
    except SettingsError as error:
        parser.error(str(error))
    return asyncio.run(serve(settings))
