"""The canonical log line and the Prometheus metrics (issue 4, "Operations").

Every RPC except the health service's writes one JSON line with the RPC, game, seat, action,
outcome, code, duration and request id; the metrics the issue names count what happened.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2
from pinochle_client import RefereeClient
from prometheus_client import REGISTRY

from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee.service import logline
from referee.service.observability import ObservabilityInterceptor, UtcTimestamp, configure_logging
from referee.store.base import StoreError
from referee.store.postgres import PostgresStore
from tests.service_helpers import bearer, health_stub, log_lines, new_table, refused, serving
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


def _counts() -> dict[str, float]:
    """The metrics one partnership game's bids move, by a short name."""
    submit = {"grpc_service": SERVICE, "grpc_method": "SubmitAction"}
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


async def test_metrics_count_rpcs_actions_violations_and_games(tmp_path: Path) -> None:
    before = _counts()
    async with serving(tmp_path) as srv:
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
    outcomes = [
        (line["rpc"], line.get("outcome"), line.get("code"), line["grpc_code"])
        for line in lines
        if line.get("event") == "rpc"
    ]
    assert outcomes == [
        ("GetGame", "failed", "INTERNAL", "INTERNAL"),
        ("WatchGame", "failed", "INTERNAL", "INTERNAL"),
        ("SubmitAction", "failed", "STORE_UNAVAILABLE", "UNAVAILABLE"),
        ("GetGame", "ok", None, "OK"),
        ("SubmitAction", "accepted", None, "OK"),
    ]


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
    assert [line["game"] for line in rpc_lines] == [table.game_id] * 7 + ["no-such-game"] * 7
    assert {line["grpc_code"] for line in rpc_lines[:7]} == {"UNAUTHENTICATED"}
    assert {line["grpc_code"] for line in rpc_lines[7:]} == {"NOT_FOUND"}


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
