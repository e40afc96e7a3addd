"""The clients' retries: gRPC's own, configured by referee_grpc_service_config.json.

The server answers ``UNAVAILABLE`` when its store failed and says a retry with the same
request_id is safe; the Python client (and the Node.js one, clients/node/test) retries the safe
calls by itself. Failures are injected into the real server's store, and the server counts the
attempts it saw, so nothing here depends on timing.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from pinochle_client import RefereeClient
from pinochle_client.client import SERVICE_CONFIG

from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee.store.base import StoreError
from tests.service_helpers import Served, bearer, new_table, refused, serving

REPO = Path(__file__).resolve().parent.parent


class Flaky:
    """Wraps one store method: the first ``failures`` calls fail with StoreError, before the
    write or (``after_write``) once it is durable, as when a connection is lost after its
    COMMIT was sent."""

    def __init__(
        self, inner: Callable[..., Awaitable[Any]], failures: int, after_write: bool = False
    ) -> None:
        self.inner = inner
        self.failures = failures
        self.after_write = after_write
        self.calls = 0

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls > self.failures:
            return await self.inner(*args, **kwargs)
        if self.after_write:
            await self.inner(*args, **kwargs)
        raise StoreError("injected: the store failed")


def _flaky(srv: Served, method: str, failures: int, after_write: bool = False) -> Flaky:
    store = srv.running.games.store
    flaky = Flaky(getattr(store, method), failures, after_write)
    setattr(store, method, flaky)
    return flaky


async def _pass(client: RefereeClient, game_id: str, token: str, request_id: str) -> int:
    response = await client.referee.SubmitAction(
        pb.SubmitActionRequest(
            game_id=game_id,
            action=pb.Action(pass_turn=pb.Pass()),
            expected_version=0,
            request_id=request_id,
        ),
        metadata=bearer(token),
        timeout=20,
    )
    return response.version


async def test_a_submission_the_store_failed_is_retried_and_applied_once(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="retried")
        flaky = _flaky(srv, "commit", failures=2)
        assert await _pass(srv.client, table.game_id, table.seat_tokens[1], "r-1") == 1
        assert flaky.calls == 3  # two failed attempts, then the one that landed
        assert (await table.adj.view())["version"] == 1
        log = await table.adj.audit_log()
        assert [(row["outcome"], row["request_id"]) for row in log] == [
            ("AUDIT_OUTCOME_ACCEPTED", "r-1")
        ]


async def test_a_retry_of_a_submission_that_landed_gets_its_stored_answer(
    tmp_path: Path,
) -> None:
    """The first attempt became durable but its caller was told UNAVAILABLE: the retry is
    answered from the stored response, and the action is not applied twice."""
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="landed")
        flaky = _flaky(srv, "commit", failures=1, after_write=True)
        assert await _pass(srv.client, table.game_id, table.seat_tokens[1], "r-2") == 1
        assert (await table.adj.view())["version"] == 1
        accepted = [
            row for row in await table.adj.audit_log() if row["outcome"] == "AUDIT_OUTCOME_ACCEPTED"
        ]
        assert [row["request_id"] for row in accepted] == ["r-2"]
        # The server catches the game up as soon as the failed call lets go of it
        # (follow_doubtful_commits): a retry that comes after that finds the request id stored
        # and is answered without a commit; one that comes before has its commit refused by
        # the stored request id. Either way once applied, and the same answer.
        assert flaky.calls in (1, 2)


async def test_without_retries_the_first_failure_is_the_answer(tmp_path: Path) -> None:
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="no retries")
        flaky = _flaky(srv, "commit", failures=1)
        async with RefereeClient(srv.address, retries=False) as plain:
            error = await refused(_pass(plain, table.game_id, table.seat_tokens[1], "r-3"))
        assert error.code == grpc.StatusCode.UNAVAILABLE
        assert flaky.calls == 1


async def test_game_creation_and_refusals_are_not_retried(tmp_path: Path) -> None:
    """CreateGame has no request id (a second attempt could make a second game), and a
    refusal is an answer, not a failure."""
    async with serving(tmp_path) as srv:
        creations = _flaky(srv, "create_game", failures=1)
        error = await refused(srv.client.create_game("partnership", seed="once"))
        assert error.code == grpc.StatusCode.UNAVAILABLE
        assert creations.calls == 1
        table = await new_table(srv.client, "partnership", seed="refused")
        commits = _flaky(srv, "commit", failures=0)
        error = await refused(table.seats[2].submit({"type": "pass"}))
        assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "NOT_YOUR_TURN")
        assert commits.calls == 0


def test_the_service_config_retries_only_safe_calls() -> None:
    """The methods named are those a second attempt cannot change twice; the file is the one
    the Node.js client loads too."""
    config = json.loads(SERVICE_CONFIG)
    assert config == json.loads(
        (REPO / "protos/pinochle/referee/v1/referee_grpc_service_config.json").read_text()
    )
    (method_config,) = config["methodConfig"]
    named = {(n["service"].rsplit(".", 1)[1], n.get("method", "*")) for n in method_config["name"]}
    referee = {name for service, name in named if service == "RefereeService"}
    assert referee == {
        "SubmitAction",
        "GetGame",
        "ListLegalActions",
        "GetAuditLog",
        "VerifyAuditLog",
        "ExportGame",
        "ListVariants",
        "ListGames",
    }
    assert ("RulesService", "*") in named
    assert method_config["retryPolicy"]["retryableStatusCodes"] == ["UNAVAILABLE"]
    service = pb.DESCRIPTOR.services_by_name["RefereeService"]
    streams = {m.name for m in service.methods if m.server_streaming}
    assert streams == {"WatchGame", "AuditRecords"} and not streams & referee
    assert "CreateGame" not in referee


@pytest.mark.parametrize("retries", [True, False])
async def test_the_client_spreads_calls_over_every_address_of_its_target(
    tmp_path: Path, retries: bool
) -> None:
    """The service config asks for round_robin: a target that resolves to several replicas (the
    Kubernetes headless Service, ``dns:///...``) gets a connection to each and its calls
    spread over them. gRPC's default, pick_first, sent every call to the first address. Here
    the two addresses are two servers with databases of their own, so where each game was
    created shows where its call went."""
    async with serving(tmp_path / "a") as first, serving(tmp_path / "b") as second:
        target = f"ipv4:127.0.0.1:{first.running.port},127.0.0.1:{second.running.port}"
        async with RefereeClient(target, retries=retries) as client:
            for index in range(12):
                await client.create_game("partnership", seed=f"spread-{index}")
        counts = [len(await srv.running.store.list_games()) for srv in (first, second)]
        assert sum(counts) == 12 and min(counts) >= 3, counts
