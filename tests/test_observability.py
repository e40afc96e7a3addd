"""The canonical log line and the Prometheus metrics (issue 4, "Operations").

Every RPC except the health service's writes one JSON line with the RPC, game, seat, action,
outcome, code, duration and request id; the metrics the issue names count what happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import time
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from pinochle_client import RefereeClient
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee.service import logline, metrics
from referee.service.observability import ObservabilityInterceptor, UtcTimestamp, configure_logging
from referee.store.base import StoreError
from referee.store.postgres import PostgresStore
from tests.service_helpers import (
    ADJUDICATOR_TOKEN,
    SHORT_GAME,
    bearer,
    free_port,
    health_stub,
    log_lines,
    new_table,
    play,
    refused,
    serving,
    stream_refused,
    whole_json_lines,
)
from tests.test_service_crash import running
from tests.test_store import POSTGRES_URL, new_game, postgres_marks, postgres_schema


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.mark.usefixtures("json_logs")
async def test_one_canonical_json_line_per_rpc(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    async with serving(tmp_path) as srv:
        configure_logging("json")  # serving() quiets the logs; this test wants them
        table = await new_table(srv.client, "partnership", seed="log-line")
        capfd.readouterr()
        await table.seats[1].submit({"type": "bid", "amount": 250}, request_id="req-1")
        error = await refused(
            table.seats[3].submit({"type": "bid", "amount": 260}, expected_version=1)
        )
        assert error.reason == "NOT_YOUR_TURN"
        await health_stub(srv.client.channel).Check(health_pb2.HealthCheckRequest())
        lines = await log_lines(capfd, rpcs=2)
    rpcs = [line for line in lines if line.get("event") == "rpc"]
    assert [line["rpc"] for line in rpcs] == ["SubmitAction", "SubmitAction"]  # no health line
    accepted, refusal = rpcs
    assert {
        k: accepted[k]
        for k in ("game", "seat", "role", "action", "outcome", "request_id", "grpc_code", "version")
    } == {
        "game": table.game_id,
        "seat": 1,
        "role": "seat",
        "action": "bid",
        "outcome": "accepted",
        "request_id": "req-1",
        "grpc_code": "OK",
        "version": 1,
    }
    assert "code" not in accepted
    assert (refusal["seat"], refusal["outcome"], refusal["code"], refusal["grpc_code"]) == (
        3,
        "refused",
        "NOT_YOUR_TURN",
        "FAILED_PRECONDITION",
    )
    for line in rpcs:
        assert line["level"] == "info" and line["timestamp"].endswith("Z")
        assert isinstance(line["duration_ms"], float) and line["duration_ms"] > 0


SERVICE = "pinochle.referee.v1.RefereeService"
HEALTH = "grpc.health.v1.Health"
REFLECTION_SERVICE = "grpc.reflection.v1alpha.ServerReflection"
REFLECTION = "ServerReflectionInfo"
CREATOR = "creator-credential-for-the-metrics-page"
STRANGER = "a-bearer-token-nobody-was-given"


def _counts() -> dict[str, float]:
    """The metrics one partnership game's bids move, by a short name."""
    submit = {"grpc_type": "unary", "grpc_service": SERVICE, "grpc_method": "SubmitAction"}
    bid = {"variant": "partnership", "action": "bid"}
    return {
        "ok": _sample("grpc_server_handled_total", **submit, grpc_code="OK"),
        "precondition": _sample(
            "grpc_server_handled_total", **submit, grpc_code="FAILED_PRECONDITION"
        ),
        "timed": _sample("grpc_server_handling_seconds_count", **submit),
        "accepted": _sample("referee_actions_total", **bid, result="accepted"),
        "refused": _sample("referee_actions_total", **bid, result="refused"),
        "violations": _sample("referee_violations_total", code="NOT_YOUR_TURN"),
        "commits": _sample("referee_store_commit_seconds_count"),
    }


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=postgres_marks())])
async def test_metrics_count_rpcs_actions_violations_and_games(
    tmp_path: Path, backend: str
) -> None:
    """On both stores: referee_store_commit_seconds observes each accepted action's commit."""
    with contextlib.ExitStack() as stack:
        where: dict[str, Any] = {}
        if backend == "postgres":
            schema = stack.enter_context(postgres_schema("test_metrics"))
            where = {"db": POSTGRES_URL, "db_schema": schema}
        await _count_a_games_metrics(tmp_path, where)


async def _count_a_games_metrics(tmp_path: Path, where: dict[str, Any]) -> None:
    before = _counts()
    committed = _sample("referee_store_commit_seconds_sum")
    async with serving(tmp_path, **where) as srv:
        table = await new_table(srv.client, "partnership", seed="metrics")
        # The gauge starts from the store's count of unfinished games (none: a fresh database).
        assert _sample("referee_games_active") == 1
        await table.seats[1].submit({"type": "bid", "amount": 250})
        await table.seats[2].submit({"type": "pass"}, expected_version=1)
        error = await refused(
            table.seats[0].submit({"type": "bid", "amount": 260}, expected_version=2)
        )
        assert error.code == grpc.StatusCode.FAILED_PRECONDITION
    moved = {key: value - before[key] for key, value in _counts().items()}
    # Two accepted SubmitActions (a bid, a pass) and one refused bid.
    assert moved == {
        "ok": 2,
        "precondition": 1,
        "timed": 3,
        "accepted": 1,
        "refused": 1,
        "violations": 1,
        "commits": 2,
    }
    assert _sample("referee_store_commit_seconds_sum") > committed


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=postgres_marks())])
async def test_games_active_follows_the_shared_database(tmp_path: Path, backend: str) -> None:
    """With replicas, other servers create and finish games: the gauge is recounted from the
    database, so it also counts a game this server never saw."""
    del backend
    with postgres_schema("test_gauge") as schema:
        async with serving(
            tmp_path, db=POSTGRES_URL, db_schema=schema, housekeeping_seconds=0.05
        ) as srv:
            await new_table(srv.client, "partnership", seed="here")
            other = PostgresStore(POSTGRES_URL, schema=schema)  # another replica's store
            await other.open()
            try:
                # Created now: the helper's default creation time is years ago, an idle game.
                await new_game(other, "elsewhere", created_at=time.time())
            finally:
                await other.close()
            for _ in range(100):
                if _sample("referee_games_active") == 2:
                    break
                await asyncio.sleep(0.02)
            assert _sample("referee_games_active") == 2


# ----------------------------------------------------------------------------------------------
# Server faults: never UNKNOWN, never the exception's text


async def _raw_error(call: Any) -> grpc.aio.AioRpcError:
    try:
        await call
    except grpc.aio.AioRpcError as error:
        return error
    raise AssertionError("the call succeeded")


@pytest.mark.usefixtures("json_logs")
async def test_a_server_fault_is_internal_or_unavailable_and_logged(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "/srv/secret/path AS KS"
    async with serving(tmp_path) as srv:
        configure_logging("json")
        table = await new_table(srv.client, "partnership", seed="faults")
        games = srv.running.games

        async def broken(*args: object, **kwargs: object) -> Any:
            raise RuntimeError(secret)

        async def store_down(*args: object, **kwargs: object) -> Any:
            raise StoreError(secret)

        async def broken_stream(*args: object, **kwargs: object) -> AsyncIterator[Any]:
            raise RuntimeError(secret)
            yield  # an async generator, like GameManager.watch

        capfd.readouterr()
        monkeypatch.setattr(games, "get", broken)
        monkeypatch.setattr(games, "watch", broken_stream)
        monkeypatch.setattr(games.store, "commit", store_down)
        md = bearer(table.seat_tokens[1])
        read = await _raw_error(
            srv.referee.GetGame(pb.GetGameRequest(game_id=table.game_id), metadata=md)
        )
        watch = await _raw_error(
            _drain(srv.referee.WatchGame(pb.WatchGameRequest(game_id=table.game_id), metadata=md))
        )
        # One attempt, so that one failure is logged (the client would retry UNAVAILABLE).
        async with RefereeClient(srv.address, retries=False) as once:
            write = await _raw_error(
                once.referee.SubmitAction(
                    pb.SubmitActionRequest(
                        game_id=table.game_id,
                        action=pb.Action(bid=pb.Bid(amount=250)),
                        request_id="fault-1",
                    ),
                    metadata=md,
                )
            )
        monkeypatch.undo()
        # Nothing was applied: the game is where it was, and the same request now succeeds.
        assert (await table.seats[1].view())["version"] == 0
        await table.seats[1].submit({"type": "bid", "amount": 250}, request_id="fault-1")
        lines = await log_lines(capfd, rpcs=5)
    assert (read.code(), read.details()) == (
        grpc.StatusCode.INTERNAL,
        "internal server error (logged)",
    )
    assert (watch.code(), watch.details()) == (read.code(), read.details())
    assert write.code() == grpc.StatusCode.UNAVAILABLE
    assert "request_id" in (write.details() or "")
    for error in (read, watch, write):
        assert secret not in f"{error.details()} {error.debug_error_string()}"
    failed = [line for line in lines if line.get("event") == "rpc_failed"]
    assert len(failed) == 3 and all(secret in json.dumps(line) for line in failed)
    # One line per call, in no set order: a failed call's line is written as its handler
    # ends, after its status has reached the client (context.abort), so the next call's line
    # may come first (seen once in seven runs on a loaded machine).
    outcomes = Counter(
        (line["rpc"], line.get("outcome"), line.get("code"), line["grpc_code"])
        for line in lines
        if line.get("event") == "rpc"
    )
    assert outcomes == Counter(
        [
            ("GetGame", "failed", "INTERNAL", "INTERNAL"),
            ("WatchGame", "failed", "INTERNAL", "INTERNAL"),
            ("SubmitAction", "failed", "STORE_UNAVAILABLE", "UNAVAILABLE"),
            ("GetGame", "ok", None, "OK"),
            ("SubmitAction", "accepted", None, "OK"),
        ]
    )


async def _drain(stream: Any) -> None:
    async for _ in stream:
        pass


@pytest.mark.usefixtures("json_logs")
async def test_a_huge_id_in_a_request_is_cut_on_the_log_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A request may be up to a mebibyte; what it says is quoted on the log line only in part."""
    async with serving(tmp_path) as srv:
        configure_logging("json")
        capfd.readouterr()
        await refused(
            srv.referee.SubmitAction(
                pb.SubmitActionRequest(game_id="g" * 100_000, request_id="r" * 100),
                metadata=bearer("x"),
            )
        )
        lines = await log_lines(capfd, rpcs=1)
    (line,) = [line for line in lines if line.get("event") == "rpc"]
    assert line["game"].startswith("g" * 200) and line["game"].endswith("(100000 characters)")
    assert len(line["game"]) < 300 and line["request_id"] == "r" * 100
    assert line["outcome"] == "refused"


def test_log_line_fields_keep_zeros_and_cut_long_strings_at_max_field() -> None:
    """Pinned (issue 4: one canonical line per RPC with game, seat, ...): seat 0 and version 0
    are real values and stay on the line; only None and "" are left out; a string is kept whole
    up to MAX_FIELD characters and cut beyond."""
    token = logline.begin(rpc="SubmitAction")
    try:
        logline.annotate(seat=0, version=0, code="", action=None)
        logline.annotate(request_id="r" * logline.MAX_FIELD, game="g" * (logline.MAX_FIELD + 1))
    finally:
        fields = logline.end(token)
    assert {k: v for k, v in fields.items() if k not in ("request_id", "game")} == {
        "rpc": "SubmitAction",
        "seat": 0,
        "version": 0,
    }
    assert fields["request_id"] == "r" * logline.MAX_FIELD
    assert fields["game"] == f"{'g' * logline.MAX_FIELD}... ({logline.MAX_FIELD + 1} characters)"


@pytest.mark.usefixtures("json_logs")
def test_a_log_value_orjson_refuses_is_written_not_raised(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """orjson refuses a str holding a lone surrogate (what a non-UTF-8 argument gives, ``serve
    --db $'\\xff'``) and an int beyond 64 bits: the line raised its TypeError instead, so the
    server's first line (``serving``, which names the database) ended it in a traceback. Such a
    line is written by the standard library's encoder, the surrogate as its escape."""
    configure_logging("json")  # writing to the standard error capfd captures
    structlog.get_logger().info("serving", db="/data/\udcff.db", limit=2**70)
    entry = json.loads(capfd.readouterr().err.strip().splitlines()[-1])
    assert (entry["event"], entry["db"], entry["limit"]) == ("serving", "/data/\udcff.db", 2**70)


async def test_every_call_about_a_game_names_it_on_its_log_line_even_when_refused(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Token guessing and lookups of unknown games must say which game they were about."""
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client)
        configure_logging("json")
        capfd.readouterr()
        for game_id in (table.game_id, "no-such-game"):
            stranger = srv.client.seat(game_id, "guess")
            calls = [
                stranger.view(),
                stranger.legal_actions(),
                stranger.submit({"type": "pass"}),
                stranger.audit_log(),
                stranger.verify_audit_log(),
                stranger.export(),
                anext(stranger.watch(0)),
            ]
            for call in calls:
                await refused(call)
        lines = await log_lines(capfd, rpcs=14)
    rpc_lines = [line for line in lines if line.get("event") == "rpc"]
    assert len(rpc_lines) == 14
    assert {line["rpc"] for line in rpc_lines} == {
        "GetGame",
        "ListLegalActions",
        "SubmitAction",
        "GetAuditLog",
        "VerifyAuditLog",
        "ExportGame",
        "WatchGame",
    }
    # Each refusal's line is written after the refusal reached the client (context.abort),
    # so the next call's line may come first: the lines are matched by game, not by order.
    assert Counter((line["game"], line["grpc_code"]) for line in rpc_lines) == {
        (table.game_id, "UNAUTHENTICATED"): 7,
        ("no-such-game", "NOT_FOUND"): 7,
    }


def test_the_log_timestamp_is_iso_utc_to_the_microsecond(monkeypatch: pytest.MonkeyPatch) -> None:
    """The canonical line's timestamp, with the date and time of day cached per second: the
    same instant as the clock, in the format structlog's ISO stamper writes, across seconds."""
    stamper = UtcTimestamp()
    for now in (
        1_764_595_752.25,
        1_764_595_752.999999,
        1_764_595_753.0,
        1_764_595_753.000123,
        1_767_225_599.5,
        1_767_225_600.5,
    ):  # the last two: New Year's Eve, then 2026
        monkeypatch.setattr(time, "time", lambda now=now: now)
        stamp = stamper(None, "info", {})["timestamp"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", stamp), stamp
        parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        assert abs(parsed.timestamp() - now) < 2e-6, (stamp, now)
        assert parsed.tzinfo is not None and parsed.utcoffset() == timedelta(0)


async def test_the_interceptor_wraps_each_method_handler_once() -> None:
    """grpc.aio asks the interceptor on every call; the wrapper is built once per handler."""
    interceptor = ObservabilityInterceptor(max_message_bytes=1 << 20)

    async def answer(request: object, context: object) -> str:
        return "answer"

    def handler() -> Any:
        return grpc.unary_unary_rpc_method_handler(answer)

    class Details(grpc.HandlerCallDetails):
        def __init__(self, method: str) -> None:
            self.method = method
            self.invocation_metadata = ()

    async def wrapped(method: str, found: Any) -> Any:
        async def continuation(details: grpc.HandlerCallDetails) -> Any:
            return found

        return await interceptor.intercept_service(continuation, Details(method))

    get = "/pinochle.referee.v1.RefereeService/GetGame"
    get_handler, list_handler = handler(), handler()
    first = await wrapped(get, get_handler)
    assert first.unary_unary is not get_handler.unary_unary  # wrapped
    assert await wrapped(get, get_handler) is first
    assert await wrapped("/pinochle.referee.v1.RefereeService/ListVariants", list_handler) not in (
        first,
        None,
    )
    assert await wrapped(get, handler()) is not first  # a server that registered it anew
    assert await wrapped(get, None) is None


@pytest.mark.usefixtures("json_logs")
async def test_a_stream_its_client_leaves_mid_answer_is_logged_and_counted_cancelled(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Was: when the client went away while a server stream waited at its ``yield`` (the
    handler had more to send: a batch of records, a backlog of events), gRPC let the stream
    go and asyncio closed it later in a task and context of its own. Its ``finally`` then
    failed ("Token ... was created in a different Context"): no log line, and no count as
    ``CANCELLED`` (asyncio logged "Task exception was never retrieved"). Found by a review of
    the Python client."""
    record = json.dumps(
        {
            "format": "pinochle-record/1",
            "variant": "partnership",
            "options": {},
            "dealer": 0,
            "hands": [],
        }
    )
    handled = {
        "grpc_type": "server_stream",
        "grpc_service": "pinochle.referee.v1.RefereeService",
        "grpc_method": "AuditRecords",
        "grpc_code": "CANCELLED",
    }
    async with serving(tmp_path) as srv:
        configure_logging("json")  # serving() quiets the logs; this test wants them
        before = REGISTRY.get_sample_value("grpc_server_handled_total", handled) or 0.0
        capfd.readouterr()
        stream = srv.client.referee.AuditRecords(pb.AuditRecordsRequest(records=[record] * 2000))
        await stream.read()
        stream.cancel()
        lines = await log_lines(capfd, rpcs=1)
        (line,) = [line for line in lines if line.get("event") == "rpc"]
        assert (line["rpc"], line["outcome"], line["grpc_code"]) == (
            "AuditRecords",
            "cancelled",
            "CANCELLED",
        )
        assert REGISTRY.get_sample_value("grpc_server_handled_total", handled) == before + 1
        assert "never retrieved" not in capfd.readouterr().err


# ----------------------------------------------------------------------------------------------
# A real server's metrics page, scraped while a game is played and every kind of call refused

GRPC_LABELS = {"grpc_type", "grpc_service", "grpc_method"}
STREAM_TYPES = {
    "WatchGame": "server_stream",
    "AuditRecords": "server_stream",
    "Watch": "server_stream",
}


def _scraped(port: int) -> list[Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as page:
        return list(text_string_to_metric_families(page.read().decode()))


def _handled(families: list[Any]) -> Counter[tuple[str, str, str, str]]:
    """grpc_server_handled_total by (type, service, method, code)."""
    found: Counter[tuple[str, str, str, str]] = Counter()
    for family in families:
        for sample in family.samples:
            if sample.name == "grpc_server_handled_total":
                labels = sample.labels
                key = (
                    labels["grpc_type"],
                    labels["grpc_service"],
                    labels["grpc_method"],
                    labels["grpc_code"],
                )
                found[key] += int(sample.value)
    return found


async def _until_counted(port: int, calls: int, within: float = 15.0) -> list[Any]:
    """The page once it counts ``calls`` handled RPCs (a stream its client cancelled is
    counted when the server notices), or whatever it says after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        try:
            families = await asyncio.to_thread(_scraped, port)
        except OSError:  # the metrics server starts just after the gRPC one
            families = []
        if sum(_handled(families).values()) >= calls or time.monotonic() > deadline:
            return families
        await asyncio.sleep(0.05)


async def test_a_real_servers_metrics_count_every_rpc_once_by_conventional_labels(
    tmp_path: Path,
) -> None:
    """``pinochle-referee serve`` scraped after a game, refusals of every kind, streams left
    by their clients, health checks, a reflection call and calls to made-up methods.

    Was: the gRPC metrics had no ``grpc_type`` label (go-grpc-prometheus and
    py-grpc-prometheus label by grpc_type, grpc_service, grpc_method and grpc_code, and their
    dashboards select on it), and a bidirectional stream (the reflection service's, which
    grpcurl calls) went through the interceptor unwrapped: no log line and no count."""
    metrics_port = free_port()
    log = tmp_path / "server.log"
    flags = (
        *("--metrics-port", str(metrics_port), "--max-watchers", "1", "--max-games", "1"),
        *("--creator-token", CREATOR),
    )
    made: Counter[tuple[str, str, str, str]] = Counter()

    def made_call(method: str, code: str, service: str = SERVICE) -> None:
        kind = STREAM_TYPES.get(method, "bidi_stream" if method == REFLECTION else "unary")
        made[kind, service, method, code] += 1

    with running(tmp_path / "referee.db", free_port(), log, *flags) as server:
        await server.wait_serving()
        async with RefereeClient(server.address) as client:
            channel: Any = client.channel  # raw calls: bytes, made-up paths, reflection
            health = health_stub(channel)
            # wait_serving's health checks are counted too: count them by the page itself.
            before = _handled(await _until_counted(metrics_port, 1))
            made.update(before)
            table = await new_table(
                client, "two-handed", SHORT_GAME["two-handed"], seed="page", creator_token=CREATOR
            )
            made_call("CreateGame", "OK")
            steps = await play(table, random.Random(3))
            # Each step: the adjudicator's GetGame, ListLegalActions per seat asked, a submit;
            # the bots' calls are counted from the log below, the page must match them.
            del steps
            await refused(table.seats[0].submit({"type": "pass"}))
            made_call("SubmitAction", "FAILED_PRECONDITION")  # the game is over
            other = await new_table(client, "partnership", seed="page-2", creator_token=CREATOR)
            made_call("CreateGame", "OK")
            await refused(other.seats[3].submit({"type": "bid", "amount": 260}))
            made_call("SubmitAction", "FAILED_PRECONDITION")  # NOT_YOUR_TURN
            await refused(other.seats[1].submit({"type": "pass"}, expected_version=9))
            made_call("SubmitAction", "ABORTED")
            stub = client.referee
            unknown = pb.GetGameRequest(game_id="no-such-game")
            await refused(stub.GetGame(unknown, metadata=bearer(STRANGER)))
            made_call("GetGame", "NOT_FOUND")
            get = pb.GetGameRequest(game_id=other.game_id)
            await refused(stub.GetGame(get))
            made_call("GetGame", "UNAUTHENTICATED")
            garbled = channel.unary_unary(f"/{SERVICE}/GetGame")
            await refused(garbled(b"\xff\xff\xff"))
            made_call("GetGame", "INVALID_ARGUMENT")
            await refused(new_table(client, "partnership", creator_token=CREATOR))
            made_call("CreateGame", "RESOURCE_EXHAUSTED")  # TOO_MANY_GAMES
            await refused(new_table(client, "partnership", creator_token=STRANGER))
            made_call("CreateGame", "PERMISSION_DENIED")
            watch = stub.WatchGame(
                pb.WatchGameRequest(game_id=other.game_id), metadata=bearer(other.spectator_token)
            )
            await watch.read()
            second = stub.WatchGame(
                pb.WatchGameRequest(game_id=other.game_id), metadata=bearer(other.spectator_token)
            )
            await stream_refused(second)
            made_call("WatchGame", "RESOURCE_EXHAUSTED")  # TOO_MANY_WATCHERS
            watch.cancel()
            made_call("WatchGame", "CANCELLED")
            await health.Check(health_pb2.HealthCheckRequest(service=""))
            made_call("Check", "OK", HEALTH)
            await refused(health.Check(health_pb2.HealthCheckRequest(service="made.up")))
            made_call("Check", "NOT_FOUND", HEALTH)
            health_watch = health.Watch(health_pb2.HealthCheckRequest(service=""))
            await health_watch.read()
            health_watch.cancel()
            made_call("Watch", "CANCELLED", HEALTH)
            # A stream that never ends by itself, cut by its deadline: DEADLINE_EXCEEDED (was
            # counted CANCELLED, as if the client had gone away), or CANCELLED after all when
            # the client's cancellation ended the handler first (see below).
            expiring = health.Watch(health_pb2.HealthCheckRequest(service=""), timeout=0.5)
            with pytest.raises(grpc.aio.AioRpcError) as expired:
                async for _ in expiring:
                    pass
            assert expired.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            made_call("Watch", "DEADLINE_EXCEEDED", HEALTH)
            reflection: Any = reflection_pb2_grpc.ServerReflectionStub(channel)
            listing = reflection_pb2.ServerReflectionRequest(list_services="")
            async for answer in reflection.ServerReflectionInfo(iter([listing])):
                assert SERVICE in {s.name for s in answer.list_services_response.service}
            made_call(REFLECTION, "OK", REFLECTION_SERVICE)
            for path in (f"/{SERVICE}/NoSuchMethod", "/no.such.Service/GetGame", "/x"):
                await refused(channel.unary_unary(path)(b""))
        rpc_lines = [line for line in whole_json_lines(log.read_text()) if line["event"] == "rpc"]
        for line in rpc_lines:  # the bots' calls, as the log has them (each line checked below)
            if (
                line["rpc"] in ("GetGame", "ListLegalActions", "SubmitAction")
                and line.get("game") == table.game_id
                and line["grpc_code"] == "OK"
            ):
                made_call(line["rpc"], "OK")
        families = await _until_counted(metrics_port, sum(made.values()))
    handled = _handled(families)
    # The server counts DEADLINE_EXCEEDED when its own deadline has passed as the handler ends
    # (test_a_call_cancelled_past_its_deadline_is_counted_deadline_exceeded). That deadline is
    # the client's plus the trip of the call's headers, and the client's gRPC cancels the call
    # at its own deadline: on a loaded machine that cancellation ended the expiring Watch
    # first, just before the server's deadline, once in twelve runs. Either way it is counted
    # once.
    expired_key = ("server_stream", HEALTH, "Watch", "DEADLINE_EXCEEDED")
    if handled[expired_key] == made[expired_key] - 1:
        made[expired_key] -= 1
        made["server_stream", HEALTH, "Watch", "CANCELLED"] += 1
    assert handled == made
    # No *_created series (one per label set, a third of the page before).
    assert not [family.name for family in families if family.name.endswith("_created")]
    assert not [s.name for f in families for s in f.samples if s.name.endswith("_created")]
    for family in families:
        for sample in family.samples:
            if family.name.startswith("grpc_server_"):
                assert set(sample.labels) >= GRPC_LABELS, sample
            for value in sample.labels.values():
                assert table.game_id not in value and other.game_id not in value, sample
                assert "token" not in value.lower(), sample
    seconds: Counter[tuple[str, str, str]] = Counter()
    for family in families:
        for sample in family.samples:
            if sample.name == "grpc_server_handling_seconds_count":
                labels = sample.labels
                seconds[labels["grpc_type"], labels["grpc_service"], labels["grpc_method"]] += int(
                    sample.value
                )
    by_method: Counter[tuple[str, str, str]] = Counter()
    for (kind, service, method, _), count in made.items():
        by_method[kind, service, method] += count
    assert seconds == by_method
    # One canonical line per RPC but the health service's, reflection's included.
    logged = Counter(line["rpc"] for line in rpc_lines)
    unhealthy: Counter[str] = Counter()
    for (_, service, method, _), count in made.items():
        if service != HEALTH:
            unhealthy[method] += count
    assert logged == unhealthy
    # No credential, bearer header or concealed card on any line, at any level.
    text = log.read_text()
    for secret in (ADJUDICATOR_TOKEN, CREATOR, STRANGER, "Bearer"):
        assert secret not in text
    for played in (table, other):
        for token in (*played.seat_tokens, played.spectator_token, played.adjudicator_token):
            assert token not in text
    assert not re.search(r'"(?:A|10|K|Q|J|9)[SHDC]"|"cards?"', text)


@pytest.mark.parametrize(
    ("remaining", "counted"),
    [
        (0.0, "DEADLINE_EXCEEDED"),
        (-0.25, "DEADLINE_EXCEEDED"),
        (2.0, "CANCELLED"),
        (None, "CANCELLED"),
    ],
)
async def test_a_call_cancelled_past_its_deadline_is_counted_deadline_exceeded(
    remaining: float | None, counted: str
) -> None:
    """The judgement the real server's page cannot pin (the client's own cancellation may end a
    call a moment before the server's deadline): a handler cancelled once the call's deadline
    has passed is counted DEADLINE_EXCEEDED, as the client sees it; before it, or without a
    deadline, CANCELLED (the client went away)."""
    labels = {
        "grpc_type": "server_stream",
        "grpc_service": HEALTH,
        "grpc_method": "Watch",
        "grpc_code": counted,
    }

    def handled() -> float:
        return REGISTRY.get_sample_value("grpc_server_handled_total", labels) or 0.0

    class CancelledContext:
        def time_remaining(self) -> float | None:
            return remaining

    async def watch(request: object, context: object) -> None:
        raise asyncio.CancelledError  # as gRPC cancels the handler

    interceptor = ObservabilityInterceptor(1 << 20)
    wrapped = interceptor._called("server_stream", HEALTH, "Watch", watch, counted=False)
    before = handled()
    with pytest.raises(asyncio.CancelledError):
        await wrapped(health_pb2.HealthCheckRequest(), CancelledContext())
    assert handled() == before + 1


def test_the_call_histogram_tells_sub_millisecond_calls_apart() -> None:
    """Reads and health checks take 0.05 to 0.1 ms, an accepted action about 1 ms
    (bench/README.md). Was: the first bound was 0.5 ms, so every read and every health check
    fell in it and no quantile below it meant anything."""
    (family,) = metrics.grpc_seconds("unary", SERVICE, "GetGame").collect()
    bounds = [sample.labels["le"] for sample in family.samples if "le" in sample.labels]
    below_a_millisecond = [float(bound) for bound in bounds if float(bound) < 0.001]
    assert below_a_millisecond[0] <= 0.00005 and len(below_a_millisecond) >= 4, bounds
