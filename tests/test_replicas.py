"""Several ``pinochle-referee serve`` processes sharing one PostgreSQL schema (issue 5).

Two replicas, A and B, are real processes on their own ports with one database schema (made for
this module, dropped after it). Skipped, with one reason line, where no PostgreSQL is reachable.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from pinochle_client import RefereeClient, RefereeError, SeatSession, Session

from referee.demo import choose
from tests.service_helpers import whole_json_lines
from tests.test_store import POSTGRES_URL, postgres_marks, postgres_schema

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT = 30.0


@dataclass
class Replica:
    name: str
    process: subprocess.Popen[bytes]
    address: str
    log: Path


@contextmanager
def replica(name: str, schema: str, logs: Path) -> Iterator[Replica]:
    """A ``serve`` process on a free port; stopped (SIGTERM, then SIGKILL) afterwards."""
    log = logs / f"{name}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "referee.cli",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--metrics-port",
                "0",
                "--log-format",
                "json",
                "--db",
                POSTGRES_URL,
                "--db-schema",
                schema,
            ],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    try:
        address = _wait_until_serving(process, log)
        yield Replica(name, process, address, log)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_until_serving(process: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        for entry in whole_json_lines(log.read_text(encoding="utf-8", errors="replace")):
            if entry.get("event") == "serving":
                return str(entry["address"])
        if process.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"the replica did not start:\n{log.read_text(errors='replace')}")


@dataclass
class Cluster:
    schema: str
    a: Replica
    b: Replica
    logs: Path


@pytest.fixture(scope="module", params=[pytest.param("postgres", marks=postgres_marks())])
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    logs = tmp_path_factory.mktemp("replicas")
    with (
        postgres_schema("test_replicas") as schema,
        replica("a", schema, logs) as a,
        replica("b", schema, logs) as b,
    ):
        yield Cluster(schema, a, b, logs)


@dataclass
class Table:
    """One game as seen through one replica: a client, the four seats and a spectator."""

    client: RefereeClient
    seats: list[SeatSession]
    spectator: Session


async def _table(address: str, game: Any) -> Table:
    client = RefereeClient(address)
    return Table(
        client,
        [client.seat(game.game_id, token) for token in game.seat_tokens],
        client.session(game.game_id, game.spectator_token),
    )


@asynccontextmanager
async def _closing(tables: list[Table]) -> AsyncIterator[list[Table]]:
    try:
        yield tables
    finally:
        for table in tables:
            await table.client.close()


async def _next_move(table: Table, rng: random.Random) -> tuple[int, dict[str, Any], int]:
    """Whose turn it is, a legal action for that seat, and the version it was legal at."""
    for index, seat in enumerate(table.seats):
        entries = await seat.legal_actions()
        if entries:
            kinds = {entry["type"] for entry in entries}
            if "pass" in kinds:  # keep the bidding short
                entries = [entry for entry in entries if entry["type"] == "pass"]
            entries = [entry for entry in entries if entry["type"] != "concede"] or entries
            return index, choose(rng.choice(entries), rng), seat.version
    raise AssertionError("no seat may act")


async def _new_game(cluster: Cluster, seed: str) -> tuple[Table, Table]:
    client = RefereeClient(cluster.a.address)
    game = await client.create_game("partnership", seed=seed)
    await client.close()
    return await _table(cluster.a.address, game), await _table(cluster.b.address, game)


async def test_an_action_on_one_replica_is_visible_on_the_other_at_once(
    cluster: Cluster,
) -> None:
    rng = random.Random(1)
    a, b = await _new_game(cluster, "visible")
    async with _closing([a, b]):
        for step in range(8):
            here, there = (a, b) if step % 2 == 0 else (b, a)
            seat, action, _ = await _next_move(here, rng)
            result = await here.seats[seat].submit(action)
            seen_there = await there.spectator.view()
            assert there.spectator.version == result["version"]
            assert seen_there == await here.spectator.view()
        assert await a.spectator.verify_audit_log()
        assert await b.spectator.verify_audit_log()


async def test_one_version_two_replicas_exactly_one_wins(cluster: Cluster) -> None:
    rng = random.Random(2)
    a, b = await _new_game(cluster, "race")
    async with _closing([a, b]):
        for _ in range(6):
            seat, action, version = await _next_move(a, rng)
            await b.spectator.view()  # B has the game loaded and current: a fair race
            results = await asyncio.gather(
                a.seats[seat].submit(action, expected_version=version),
                b.seats[seat].submit(action, expected_version=version),
                return_exceptions=True,
            )
            wins = [r for r in results if isinstance(r, dict)]
            losses = [r for r in results if isinstance(r, RefereeError)]
            assert len(wins) == 1 and len(losses) == 1, results
            assert losses[0].code == grpc.StatusCode.ABORTED
            assert losses[0].reason == "STALE_VERSION"
            for table in (a, b):
                await table.spectator.view()
                assert table.spectator.version == version + 1
        assert await b.spectator.verify_audit_log()
        accepted = [
            e for e in await a.spectator.audit_log() if e.get("outcome") == "AUDIT_OUTCOME_ACCEPTED"
        ]
        assert len(accepted) == 6


async def _watch(session: Session, from_version: int, into: asyncio.Queue[int]) -> None:
    async for item in session.watch(from_version):
        if "event" in item:
            await into.put(int(item["event"]["version"]))


async def test_a_watch_on_one_replica_sees_actions_submitted_on_the_other(
    cluster: Cluster,
) -> None:
    rng = random.Random(3)
    a, b = await _new_game(cluster, "watch")
    async with _closing([a, b]):
        await a.spectator.view()
        versions: asyncio.Queue[int] = asyncio.Queue()
        watching = asyncio.ensure_future(_watch(a.spectator, a.spectator.version, versions))
        try:
            await asyncio.sleep(0.2)  # the stream is open on A
            for _ in range(5):
                seat, action, _ = await _next_move(b, rng)
                result = await b.seats[seat].submit(action)
                # A hears of B's commit (LISTEN/NOTIFY) and streams its events.
                while (heard := await asyncio.wait_for(versions.get(), 5)) < result["version"]:
                    pass
                assert heard == result["version"]
        finally:
            watching.cancel()


async def _play(
    table: Table, rng: random.Random, acked: list[tuple[int, str]], pending: dict[str, Any]
) -> None:
    """Play on until the replica goes away; remember what was acknowledged and what was not."""
    while True:
        seat, action, version = await _next_move(table, rng)
        request_id = uuid.uuid4().hex
        pending.update(seat=seat, action=action, version=version, request_id=request_id)
        result = await table.seats[seat].submit(
            action, expected_version=version, request_id=request_id
        )
        acked.append((result["version"], request_id))
        pending.clear()


async def test_a_killed_replica_loses_nothing_acknowledged(cluster: Cluster) -> None:
    """Replica C plays four games at once and is SIGKILLed mid-stream; B has every
    acknowledged action, and the clients carry on there (retrying what was in flight)."""
    games = 4
    with replica("c", cluster.schema, cluster.logs) as c:
        creator = RefereeClient(c.address)
        created = [await creator.create_game("partnership", seed=f"kill{i}") for i in range(games)]
        on_c = [await _table(c.address, game) for game in created]
        on_b = [await _table(cluster.b.address, game) for game in created]
        async with _closing([*on_c, *on_b]):
            acked: list[list[tuple[int, str]]] = [[] for _ in range(games)]
            pending: list[dict[str, Any]] = [{} for _ in range(games)]
            players = [
                asyncio.ensure_future(_play(on_c[i], random.Random(i), acked[i], pending[i]))
                for i in range(games)
            ]
            while sum(map(len, acked)) < 24:
                await asyncio.sleep(0.005)
            c.process.kill()  # SIGKILL: no shutdown, no flush, mid-request
            c.process.wait()
            outcomes = await asyncio.gather(*players, return_exceptions=True)
            assert all(isinstance(o, RefereeError) for o in outcomes), outcomes
            await creator.close()

            for i in range(games):
                table = on_b[i]
                audit_ids = {e.get("request_id") for e in await table.spectator.audit_log()}
                await table.spectator.view()
                assert acked[i], "every game made progress before the kill"
                assert table.spectator.version >= acked[i][-1][0]
                assert {rid for _, rid in acked[i]} <= audit_ids
                assert await table.spectator.verify_audit_log()
                # A request in flight at the kill: the retry on B is applied once either way.
                if pending[i]:
                    retry = await table.seats[pending[i]["seat"]].submit(
                        pending[i]["action"],
                        expected_version=pending[i]["version"],
                        request_id=pending[i]["request_id"],
                    )
                    assert retry["version"] == pending[i]["version"] + 1
                    await table.spectator.view()
                    assert table.spectator.version == retry["version"]
                # And play simply goes on through B.
                rng = random.Random(100 + i)
                for _ in range(3):
                    seat, action, _ = await _next_move(table, rng)
                    await table.seats[seat].submit(action)
                assert await table.spectator.verify_audit_log()


async def test_the_command_line_exports_a_game_from_postgresql(cluster: Cluster) -> None:
    """Issue 4: ``pinochle-referee export GAME_ID`` reads the store, PostgreSQL included
    (``--db`` URL and ``--db-schema``), and gives the record ``ExportGame`` gives."""
    rng = random.Random(6)
    client = RefereeClient(cluster.a.address)
    game = await client.create_game("partnership", seed="export")
    adjudicator = client.session(game.game_id, game.adjudicator_token)
    a = await _table(cluster.a.address, game)
    async with _closing([a, Table(client, [], adjudicator)]):
        for _ in range(6):
            seat, action, _ = await _next_move(a, rng)
            await a.seats[seat].submit(action)
        record = await adjudicator.export()
    done = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "referee.cli",
            "export",
            game.game_id,
            "--db",
            POSTGRES_URL,
            "--db-schema",
            cluster.schema,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == record
    assert len(record["hands"][0]["actions"]) == 6
