"""Review of the gRPC service's outer surface, probed as a user of a game server would: the
flags of ``serve`` as a real process, TLS, limits, error codes, reflection and health.

Each test here pins a defect this review found (its docstring says what was wrong) or a
behaviour the README promises that no other test reached end to end.
"""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pinochle_client import RefereeError

from protos.pinochle.referee.v1 import referee_pb2 as pb
from protos.pinochle.referee.v1 import referee_pb2_grpc as pb_grpc
from referee.service.convert import dict_to_struct
from referee.service.errors import error_details
from referee.service.server import (
    SERVICE_NAMES,
    HealthServicer,
    bare_host,
    connection_age_options,
    db_for_log,
    host_port,
    keepalive_options,
)
from referee.service.settings import Settings
from referee.store import sqlite as sqlite_store
from referee.store.base import AuditRow, Commit, StoreError
from referee.store.postgres import describe
from tests.service_helpers import (
    ADJUDICATOR_TOKEN,
    VARIANTS,
    bearer,
    free_port,
    health_stub,
    new_table,
    serving,
)
from tests.test_fuzz_review import Game, ServerThread, Stubs, create
from tests.test_service_crash import running
from tests.test_store import POSTGRES_URL, postgres_marks, postgres_schema


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


needs_ipv6 = pytest.mark.skipif(not _ipv6_loopback(), reason="this machine has no IPv6 loopback")


def test_an_ipv6_host_is_written_in_brackets_for_grpc_and_bare_for_metrics() -> None:
    assert host_port("::", 50051) == "[::]:50051"
    assert host_port("[::1]", 0) == "[::1]:0"
    assert host_port("127.0.0.1", 9464) == "127.0.0.1:9464"
    assert host_port("localhost", 1) == "localhost:1"
    assert [bare_host(h) for h in ("[::1]", "::", "0.0.0.0")] == ["::1", "::", "0.0.0.0"]


@needs_ipv6
@pytest.mark.parametrize("host", ["::1", "[::1]", "::"])
async def test_serve_listens_on_an_ipv6_host_with_its_metrics(tmp_path: Path, host: str) -> None:
    """Was: ``--host ::`` (every interface, as an IPv6 or dual-stack cluster needs) or ``::1``
    stopped ``serve`` with ``start_failed``: the gRPC address was built as ``host:port``, which
    gRPC read as ``:::50051`` (no address) or ``::1:0`` (an IPv6 address, port 443), and
    ``[::1]`` failed the metrics server instead, which takes the address bare. Now either
    spelling serves gRPC and metrics, and the ``serving`` line names ``[host]:port``."""
    port, metrics_port = free_port(), free_port()
    log = tmp_path / "server.log"
    extra = ("--host", host, "--metrics-port", str(metrics_port))
    with running(tmp_path / "referee.db", port, log, *extra) as server:
        server.address = f"[::1]:{port}"
        await server.wait_serving()
        async with grpc.aio.insecure_channel(server.address) as channel:
            status = await health_stub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert status.status == health_pb2.HealthCheckResponse.SERVING
            created = await channel.unary_unary(
                "/pinochle.referee.v1.RefereeService/CreateGame",
                request_serializer=pb.CreateGameRequest.SerializeToString,
                response_deserializer=pb.CreateGameResponse.FromString,
            )(pb.CreateGameRequest(variant="partnership", seed="ipv6"), timeout=5)
            assert created.game_id
        with urllib.request.urlopen(f"http://[::1]:{metrics_port}/metrics", timeout=5) as page:
            assert b"grpc_server_handled_total" in page.read()
        assert f'"address":"[{bare_host(host)}]:{port}"' in log.read_text()


@pytest.mark.parametrize(
    "flags",
    [
        {"max_pending_calls": 3_000_000_000},
        {"keepalive_seconds": 30 * 86_400.0},
        {"max_connection_age_seconds": 30 * 86_400.0},
        {"max_streams_per_connection": 3_000_000_000},
    ],
    ids=[
        "max-pending-calls",
        "keepalive-seconds",
        "max-connection-age-seconds",
        "max-streams-per-connection",
    ],
)
async def test_a_flag_beyond_grpcs_c_int_serves(tmp_path: Path, flags: dict[str, float]) -> None:
    """Was: ``--max-pending-calls`` past 2**31 - 1, or ``--keepalive-seconds`` or
    ``--max-connection-age-seconds`` of 30 days (gRPC takes them in milliseconds, a C int:
    about 24.8 days at most) stopped ``serve`` with an OverflowError traceback, as
    ``--max-message-bytes`` of 128 MiB once did. gRPC's options now stop at the largest it
    takes."""
    async with serving(tmp_path, **flags) as srv:
        table = await new_table(srv.client, "partnership", seed="long")
        assert (await table.seats[1].submit({"type": "pass"}))["version"] == 1


def test_time_options_stop_at_the_largest_c_int() -> None:
    options = dict(keepalive_options(1e12, 10.0)) | dict(connection_age_options(1e12))
    assert options["grpc.keepalive_time_ms"] == 2**31 - 1
    assert options["grpc.max_connection_age_ms"] == 2**31 - 1
    assert options["grpc.keepalive_timeout_ms"] == 20_000
    assert options["grpc.max_connection_age_grace_ms"] == 30_000


SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def test_calls_beyond_the_streams_per_connection_wait_for_one_to_end(tmp_path: Path) -> None:
    """``--max-streams-per-connection`` is announced to the client (HTTP/2
    MAX_CONCURRENT_STREAMS): with two WatchGame streams open on a channel and a limit of two, a
    third call on that channel is held by the client, not refused, and answered once a stream
    ends. (gRPC announced no limit: the call was answered at once.)"""
    async with serving(tmp_path, max_streams_per_connection=2) as srv:
        table = await new_table(srv.client, "partnership", seed="streams")
        metadata = bearer(table.spectator_token)
        async with grpc.aio.insecure_channel(srv.address) as channel:
            stub = pb_grpc.RefereeServiceStub(channel)
            request = pb.WatchGameRequest(game_id=table.game_id)
            watches = [stub.WatchGame(request, metadata=metadata) for _ in range(2)]
            for watch in watches:
                assert await asyncio.wait_for(watch.read(), 30) is not grpc.aio.EOF
            get = pb.GetGameRequest(game_id=table.game_id)
            held = asyncio.ensure_future(stub.GetGame(get, metadata=metadata, timeout=60))
            await asyncio.sleep(0.5)  # time enough to be answered, were it sent
            assert not held.done(), "a call beyond the limit was not held"
            watches[0].cancel()
            assert (await asyncio.wait_for(held, 60)).game_id == table.game_id
            watches[1].cancel()


async def test_the_default_streams_per_connection_holds_back_no_burst(tmp_path: Path) -> None:
    """The default ``--max-streams-per-connection`` does not limit one channel carrying many
    calls at once (the benchmark's 64, a frontend's players): 300 calls opened at once on a
    bare channel, without the clients' retry policy, are all answered. At a limit they reach,
    gRPC refuses a share of such a burst UNAVAILABLE (REFUSED_STREAM): about 50 of 300 with a
    limit of 100."""
    assert Settings().max_streams_per_connection >= 300
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="burst")
        metadata = bearer(table.spectator_token)
        async with grpc.aio.insecure_channel(srv.address) as channel:
            stub = pb_grpc.RefereeServiceStub(channel)
            get = pb.GetGameRequest(game_id=table.game_id)
            answers = await asyncio.gather(
                *(stub.GetGame(get, metadata=metadata, timeout=60) for _ in range(300)),
                return_exceptions=True,
            )
    failed = [answer for answer in answers if isinstance(answer, BaseException)]
    assert failed == []


async def test_a_health_watcher_hears_readiness_after_another_watcher_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: grpc_health's asyncio Watch deleted, as one watcher of a service left, the
    condition every other watcher of that service waited on; they never heard of a change
    again, so a watcher of RefereeService (a balancer, a dashboard) went on seeing SERVING
    while the store could not be read. Now each watcher hears every change."""
    async with serving(tmp_path, store_check_seconds=0.05) as srv:
        stub = health_stub(srv.client.channel)
        request = health_pb2.HealthCheckRequest(service=SERVICE_NAMES[0])
        leaving, staying = stub.Watch(request), stub.Watch(request)
        assert (await leaving.read()).status == (await staying.read()).status == SERVING
        leaving.cancel()
        # Another watch opened and closed once the first has left (its stream gone).
        again = stub.Watch(request)
        assert (await again.read()).status == SERVING
        again.cancel()

        async def unreachable() -> None:
            raise StoreError("read failed: connection refused")

        monkeypatch.setattr(srv.running.store, "ping", unreachable)
        assert (await asyncio.wait_for(staying.read(), 30)).status == NOT_SERVING
        monkeypatch.undo()
        assert (await asyncio.wait_for(staying.read(), 30)).status == SERVING
        staying.cancel()


async def test_health_watches_end_as_the_shutdown_begins(tmp_path: Path) -> None:
    """Was: a health Watch stream (gRPC's client-side health checking keeps one on every
    connection) followed the server until gRPC cut it, so a graceful shutdown waited out its
    whole grace period for it and then ended it with a bare "Cancelling all calls", as
    WatchGame streams once did. Now each stream sends NOT_SERVING and ends, and the shutdown
    waits only for the calls in flight (none here, with an hour's grace)."""
    async with serving(tmp_path) as srv:
        stub = health_stub(srv.client.channel)
        watches = [
            stub.Watch(health_pb2.HealthCheckRequest(service=name))
            for name in ("", *SERVICE_NAMES, "no.such.Service")
        ]
        first = [(await watch.read()).status for watch in watches]
        assert first == [SERVING, SERVING, SERVING, health_pb2.HealthCheckResponse.SERVICE_UNKNOWN]
        stopping = asyncio.ensure_future(srv.running.stop(3600))
        for watch in watches[:3]:
            assert (await asyncio.wait_for(watch.read(), 30)).status == NOT_SERVING
        for watch in watches:
            assert await asyncio.wait_for(watch.read(), 30) is grpc.aio.EOF
            assert await watch.code() == grpc.StatusCode.OK
        await asyncio.wait_for(stopping, 30)


async def test_a_health_watch_sends_not_serving_when_the_shutdown_begins_during_a_write() -> None:
    """Was: a Watch that was still writing SERVING when the shutdown began found, once the
    write returned, the shutdown under way and ended (OK) without sending NOT_SERVING, so a
    balancer watching read a clean end after SERVING. Seen about once in twenty stops of a
    loaded server (``test_a_stop_signal_reports_not_serving_then_exits_cleanly``). Now it
    reads the status again after each write."""
    health = HealthServicer()
    writing = asyncio.Event()
    release = asyncio.Event()
    sent: list[int] = []

    class SlowContext:
        async def write(self, message: health_pb2.HealthCheckResponse) -> None:
            sent.append(message.status)
            if len(sent) == 1:
                writing.set()
                await release.wait()

    watch = asyncio.ensure_future(
        health.Watch(health_pb2.HealthCheckRequest(), SlowContext())  # type: ignore[arg-type]
    )
    await asyncio.wait_for(writing.wait(), 10)
    await health.enter_graceful_shutdown()
    release.set()
    await asyncio.wait_for(watch, 10)
    assert sent == [SERVING, NOT_SERVING]
    assert health.slots.open == 0


async def test_the_audit_log_pages_within_a_small_response_limit(tmp_path: Path) -> None:
    """Was: a page of GetAuditLog stopped before 2 MiB whatever the server's response limit
    (16 times ``--max-message-bytes``), so with a limit under 128 KiB each page of a long log
    failed RESOURCE_EXHAUSTED ("Sent message larger than max") and the log could not be read.
    A page now stops before that limit too, and paging on reads the whole log."""
    limit = 1024  # requests; responses up to 16 KiB
    async with serving(tmp_path, max_message_bytes=limit) as srv:
        table = await new_table(srv.client, "partnership", seed="small-pages")
        for _ in range(80):  # each refusal's entry quotes its fifty cards
            with pytest.raises(RefereeError):
                await table.seats[1].submit({"type": "discard", "cards": ["KH"] * 50})
        pages: list[list[int]] = []
        after = 0
        while True:
            request = pb.GetAuditLogRequest(game_id=table.game_id, after_seq=after)
            page = await srv.referee.GetAuditLog(request, metadata=bearer(table.adjudicator_token))
            if not page.entries:
                break
            assert page.ByteSize() <= 16 * limit
            pages.append([entry.seq for entry in page.entries])
            after = page.entries[-1].seq
        assert len(pages) > 1
        assert [seq for page_seqs in pages for seq in page_seqs] == list(range(1, 81))


def _reflected_calls(address: str) -> dict[str, object]:
    """What a generic client that knows nothing of the contract gets through reflection: the
    services listed, and CreateGame and ScoreMeld built and read from the descriptors the
    server sends (grpcio-reflection's descriptor database; grpcurl does the same)."""
    with grpc.insecure_channel(address) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        pool = descriptor_pool.DescriptorPool(database)
        services = sorted(database.get_services())

        def call(method: str, fields: dict[str, object]) -> dict[str, object]:
            service, _, name = method.rpartition(".")
            described = pool.FindServiceByName(service).FindMethodByName(name)
            request_class = message_factory.GetMessageClass(described.input_type)
            response_class = message_factory.GetMessageClass(described.output_type)
            request = json_format.ParseDict(fields, request_class())
            unary: Callable[..., Any] = channel.unary_unary(
                f"/{service}/{name}",
                request_serializer=lambda message: message.SerializeToString(),
                response_deserializer=response_class.FromString,
            )
            answer = json_format.MessageToDict(unary(request, timeout=10))
            assert isinstance(answer, dict)
            return answer

        created = call(
            "pinochle.referee.v1.RefereeService.CreateGame",
            {"variant": "partnership", "seed": "reflected", "options": {"target": 1000}},
        )
        meld = call(
            "pinochle.referee.v1.RulesService.ScoreMeld",
            {"trump": "H", "hand": ["AH", "10H", "KH", "QH", "JH", "9H"]},
        )
    return {"services": services, "created": created, "meld": meld}


async def test_a_generic_client_calls_through_reflection_alone(tmp_path: Path) -> None:
    """The README's reflection example, with a client built only from the descriptors the
    server reflects (no generated stubs): the four services listed, a game created, the
    README's meld scored."""
    async with serving(tmp_path) as srv:
        got = await asyncio.to_thread(_reflected_calls, srv.address)
        assert got["services"] == [
            "grpc.health.v1.Health",
            "grpc.reflection.v1alpha.ServerReflection",
            "pinochle.referee.v1.RefereeService",
            "pinochle.referee.v1.RulesService",
        ]
        created = got["created"]
        assert isinstance(created, dict) and len(created["seatTokens"]) == 4
        seat = srv.client.seat(str(created["gameId"]), created["seatTokens"][1])
        assert (await seat.view())["options"]["target"] == 1000
        assert got["meld"] == {
            "total": 160,
            "melds": [
                {
                    "name": "run",
                    "level": 1,
                    "points": 150,
                    "cards": ["AH", "10H", "KH", "QH", "JH"],
                },
                {"name": "dix", "level": 1, "points": 10, "cards": ["9H"]},
            ],
        }


# ----------------------------------------------------------------------------------------------
# Every RPC of both services with well-typed random requests, built from the contract itself

DOCUMENTED = frozenset(
    {
        grpc.StatusCode.OK,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)
CARDS = [f"{rank}{suit}" for rank in ("A", "10", "K", "Q", "J", "9") for suit in "SHDC"]
WORDS = ["", "H", "S", "x", "pass", "bid", "run", "stock", "playoff", "\x00", "é", "x" * 300]
METHODS = [
    (service.full_name, method)
    for service in pb.DESCRIPTOR.services_by_name.values()
    for method in service.methods
]
int32s = st.one_of(st.integers(-(2**31), 2**31 - 1), st.integers(-3, 300))
int64s = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-3, 60))


def _texts(extra: Sequence[str]) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from([*WORDS, *CARDS, *VARIANTS, *extra]), st.text(max_size=20))


def _json(texts: st.SearchStrategy[str]) -> st.SearchStrategy[object]:
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**53), 2**53),
        st.floats(allow_nan=False, allow_infinity=False),
        texts,
    )
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
        max_leaves=10,
    )


def _scalars(field: FieldDescriptor, texts: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    kinds: dict[int, st.SearchStrategy[Any]] = {
        FieldDescriptor.TYPE_INT32: int32s,
        FieldDescriptor.TYPE_INT64: int64s,
        FieldDescriptor.TYPE_BOOL: st.booleans(),
        FieldDescriptor.TYPE_STRING: texts,
        # Every value the enum names and a few it does not (proto3 keeps unknown numbers).
        FieldDescriptor.TYPE_ENUM: st.integers(-1, 4),
    }
    return kinds[field.type]


@st.composite
def requests(
    draw: st.DrawFn, described: Descriptor, texts: st.SearchStrategy[str], depth: int = 0
) -> Any:
    """A message of type ``described`` with random fields: any oneof member or none, any
    optional field set or not, Structs of random JSON."""
    if described.full_name == "google.protobuf.Struct":
        return dict_to_struct(draw(st.dictionaries(texts, _json(texts), max_size=4)))
    message = getattr(pb, described.name)()
    chosen = {
        oneof.name: draw(st.sampled_from([None, *(field.name for field in oneof.fields)]))
        for oneof in described.oneofs
        if len(oneof.fields) > 1  # not the one of a proto3 optional field
    }
    for field in described.fields:
        oneof = field.containing_oneof
        if oneof is not None and oneof.name in chosen:
            if chosen[oneof.name] != field.name:
                continue
        elif not draw(st.booleans()):
            continue
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if depth > 3:
                continue
            assert field.message_type is not None
            inner = requests(field.message_type, texts, depth + 1)
            if field.is_repeated:
                for value in draw(st.lists(inner, max_size=3)):
                    getattr(message, field.name).add().CopyFrom(value)
            else:
                getattr(message, field.name).CopyFrom(draw(inner))
        elif field.is_repeated:
            getattr(message, field.name).extend(draw(st.lists(_scalars(field, texts), max_size=6)))
        else:
            setattr(message, field.name, draw(_scalars(field, texts)))
    return message


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[grpc.Channel, list[Game]]]:
    server = ServerThread(tmp_path_factory.mktemp("surface"))
    server.start()
    channel = grpc.insecure_channel(server.address)
    try:
        stubs = Stubs(
            channel, pb_grpc.RefereeServiceStub(channel), pb_grpc.RulesServiceStub(channel)
        )
        yield channel, [create(stubs, variant, f"surface-{variant}") for variant in VARIANTS]
    finally:
        channel.close()
        server.stop()


def _credentials(token: str | None, form: int) -> tuple[tuple[str, str], ...]:
    if token is None:
        return ()
    return (
        (("authorization", f"Bearer {token}"),),
        (("authorization", f"bearer {token}  "),),
        (("authorization", "Bearer"), ("authorization", f"Bearer {token}")),
        (("authorization", f"Bearer {token}"), ("authorization", "Bearer junk")),
    )[form]


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_rpc_with_well_typed_random_requests_answers_a_documented_status(
    fuzzed: tuple[grpc.Channel, list[Game]], data: st.DataObject
) -> None:
    """Both services, every RPC, requests drawn from the contract's own descriptors (every
    oneof member or none, int32 and int64 extremes, Structs of any JSON), with no token, a
    wrong one, or a real one in the header's odd but valid forms: the status is one the README
    documents, never UNKNOWN or INTERNAL; a refusal carries ErrorInfo with its reason; an
    INVALID_ARGUMENT names the field in a BadRequest; an illegal action gives the game's
    version; a stale one says STALE_VERSION."""
    channel, games = fuzzed
    game = data.draw(st.sampled_from(games))
    service, method = data.draw(st.sampled_from(METHODS))
    texts = _texts([game.game_id])
    request = data.draw(requests(method.input_type, texts))
    if "game_id" in method.input_type.fields_by_name and data.draw(st.booleans()):
        request.game_id = game.game_id
    token = data.draw(st.sampled_from([None, "junk", ADJUDICATOR_TOKEN, *game.tokens()]))
    metadata = _credentials(token, data.draw(st.integers(0, 3)))
    response_class = getattr(pb, method.output_type.name)
    path = f"/{service}/{method.name}"
    try:
        if method.server_streaming:
            stream = channel.unary_stream(
                path,
                request_serializer=type(request).SerializeToString,
                response_deserializer=response_class.FromString,
            )
            for _ in stream(request, metadata=metadata, timeout=0.3):
                pass
        else:
            unary = channel.unary_unary(
                path,
                request_serializer=type(request).SerializeToString,
                response_deserializer=response_class.FromString,
            )
            unary(request, metadata=metadata, timeout=10)
    except grpc.RpcError as error:
        code = error.code()
        details = error_details(error)
        event(f"{method.name} {code.name}")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED and method.server_streaming:
            return  # a watch waits for events that do not come
        assert code in DOCUMENTED, f"{method.name}: {code.name} {error.details()}"
        assert details.get("reason"), f"{method.name}: {code.name} without ErrorInfo"
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            assert details.get("fields"), f"{method.name}: no BadRequest: {error.details()}"
        if code == grpc.StatusCode.FAILED_PRECONDITION:
            metadata_sent = details.get("metadata")
            assert isinstance(metadata_sent, dict) and "version" in metadata_sent
        if code == grpc.StatusCode.ABORTED:
            assert details["reason"] == "STALE_VERSION"
    else:
        event(f"{method.name} OK")


def test_the_serving_line_names_a_database_without_its_credentials() -> None:
    assert db_for_log("./data/referee.db") == "./data/referee.db"
    for url in (
        "postgresql://referee:hunter2@db.example:6432/games",
        "postgresql://db.example:6432/games?password=hunter2&sslmode=require",
        "postgres://db.example:6432/games?user=referee&password=hunter2",
    ):
        assert db_for_log(url) == "db.example:6432/games"


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=postgres_marks())])
async def test_serve_logs_no_password_given_in_the_urls_query(tmp_path: Path, backend: str) -> None:
    """Was: the ``serving`` line cut a PostgreSQL URL at its ``@`` only, so a password given
    as a query parameter (``?password=...``, libpq's other form, which a Secret's URL may
    use) was written to every log that reads the server's start. It names host, port and
    database now, as ``start_failed`` already did."""
    secret = "hunter2-not-for-logs"
    url = f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}password={secret}"
    log = tmp_path / "server.log"
    with postgres_schema("test_surface") as schema:
        extra = ("--db", url, "--db-schema", schema)  # the last --db wins
        with running(tmp_path / "unused.db", free_port(), log, *extra) as server:
            await server.wait_serving()
        text = log.read_text()
    assert '"event":"serving"' in text and f'"db":"{describe(url)}"' in text
    assert secret not in text


async def test_a_call_in_flight_when_the_shutdown_begins_is_answered_and_new_ones_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM's graceful stop, end to end on the wire: a SubmitAction whose commit is under
    way when the shutdown begins is answered (and durable: the server started again on the
    same database has it); calls made after are refused UNAVAILABLE by the stopped listener;
    the stop ends once the call in flight has (the grace here is an hour)."""
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="in-flight")
        store = srv.running.games.store
        original: Callable[[Commit], Awaitable[AuditRow]] = store.commit
        entered, gate = asyncio.Event(), asyncio.Event()

        async def held_commit(commit: Commit) -> AuditRow:
            entered.set()
            await asyncio.wait_for(gate.wait(), 30)
            return await original(commit)

        monkeypatch.setattr(store, "commit", held_commit)
        in_flight = asyncio.ensure_future(table.seats[1].submit({"type": "pass"}))
        await asyncio.wait_for(entered.wait(), 30)
        stopping = asyncio.ensure_future(srv.running.stop(3600))
        get = pb.GetGameRequest(game_id=table.game_id)
        for _ in range(300):  # until the listener has stopped (bounded)
            async with grpc.aio.insecure_channel(srv.address) as channel:
                stub = pb_grpc.RefereeServiceStub(channel)
                try:
                    await stub.GetGame(get, metadata=bearer(table.spectator_token), timeout=5)
                except grpc.aio.AioRpcError as error:
                    assert error.code() == grpc.StatusCode.UNAVAILABLE, error
                    break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("new calls were still served after the shutdown began")
        assert not in_flight.done() and not stopping.done()
        gate.set()
        assert (await asyncio.wait_for(in_flight, 30))["version"] == 1
        await asyncio.wait_for(stopping, 30)
    async with serving(tmp_path) as again:
        assert (await table.through(again.client).adj.view())["version"] == 1


async def test_a_forced_stop_finishes_a_commit_in_progress_and_does_not_acknowledge_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forced stop (a second stop signal: ``Running.force_stop``) cancels the calls in flight
    at once, but not a commit the store has begun: the SubmitAction whose commit waits for the
    database's write lock (held here by another connection) gets no answer, the stop waits for
    the commit and closes the store after it, and the server started again has the action; a
    retry with its request_id is answered with it, as after any lost answer."""
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_SECONDS", 600.0)  # the lock outlasts the test
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="forced")
        store = srv.running.games.store
        original: Callable[[Commit], Awaitable[AuditRow]] = store.commit
        entered = asyncio.Event()

        def commit_seen(commit: Commit) -> Awaitable[AuditRow]:
            entered.set()
            return original(commit)

        monkeypatch.setattr(store, "commit", commit_seen)
        holder = sqlite3.connect(srv.db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # the store's commit waits for this lock
        submit = table.seats[1].submit({"type": "pass"}, request_id="held-by-the-lock")
        in_flight = asyncio.ensure_future(submit)
        await asyncio.wait_for(entered.wait(), 30)
        stopping = asyncio.ensure_future(srv.running.stop(3600))
        await asyncio.wait_for(srv.running.force_stop(), 30)
        with pytest.raises(RefereeError) as cut:
            await asyncio.wait_for(in_flight, 30)
        assert cut.value.code in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
        assert not stopping.done(), "the store closed with a commit in progress"
        holder.rollback()
        holder.close()
        await asyncio.wait_for(stopping, 30)
    async with serving(tmp_path) as again:
        assert (await table.through(again.client).adj.view())["version"] == 1
        retried = table.through(again.client).seats[1]
        answer = await retried.submit({"type": "pass"}, request_id="held-by-the-lock")
        assert answer["version"] == 1


async def test_an_export_larger_than_the_server_sends_is_refused_as_such(tmp_path: Path) -> None:
    """Was: a record over the server's response limit (16 times ``--max-message-bytes``) left
    the handler, and gRPC failed the call ("Sent message larger than max") after the log line
    and grpc_server_handled_total had called it OK. Now ExportGame refuses it itself:
    RESOURCE_EXHAUSTED, reason RESPONSE_TOO_LARGE, the limit named, logged as refused."""
    limit = 32  # requests; responses up to 512 bytes, less than a dealt game's record (657)
    async with serving(tmp_path, max_message_bytes=limit) as srv:
        created = await srv.referee.CreateGame(pb.CreateGameRequest(variant="partnership"))
        request = pb.ExportGameRequest(game_id=created.game_id)
        metadata = bearer(created.adjudicator_token)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await srv.referee.ExportGame(request, metadata=metadata)
        error = RefereeError(caught.value)
        assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert (error.reason, error.metadata) == ("RESPONSE_TOO_LARGE", {"limit": str(16 * limit)})
    async with serving(tmp_path / "wide") as srv:  # the default limit sends the same record
        created = await srv.referee.CreateGame(pb.CreateGameRequest(variant="partnership"))
        request = pb.ExportGameRequest(game_id=created.game_id)
        response = await srv.referee.ExportGame(request, metadata=bearer(created.adjudicator_token))
        assert 16 * limit < response.ByteSize() < 16 * (1 << 20)
