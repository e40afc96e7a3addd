"""The server as a real process: SIGKILL under load loses nothing acknowledged; SIGTERM drains
(issue 4, "Durability" and "Operations").

``pinochle-referee serve`` runs as a subprocess on a free port and a database in a temporary
directory. Several client tasks play games at once; every acknowledged ``SubmitAction`` is
recorded; the server is killed with SIGKILL mid-game and restarted on the same database; every
acknowledged action must be there, every game must play on to its end, and each export must
audit as legal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import grpc
import psycopg
import pytest
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from pinochle_client import RefereeClient, RefereeError

from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee.audit import audit_record
from referee.store.postgres import MIGRATION_LOCK
from tests.service_helpers import (
    ADJUDICATOR_TOKEN,
    SHORT_GAME,
    Table,
    bearer,
    free_port,
    health_stub,
    pick,
    play,
    raw_action,
)
from tests.test_store import POSTGRES_URL, postgres_marks, postgres_schema

REPO = Path(__file__).resolve().parent.parent
GAMES = (
    "partnership",
    "two-handed",
    "cutthroat",
    "double-deck",
    "partnership-no-bid",
    "partnership",
)


class Server:
    """``pinochle-referee serve`` in a subprocess, with its log in a file; with ``script``,
    that Python code run instead, with serve's arguments (it calls ``server.main``)."""

    def __init__(self, db: Path, port: int, log: Path, *extra: str, script: str = "") -> None:
        self.port = port
        self.address = f"127.0.0.1:{port}"
        self.log = log
        command = [
            sys.executable,
            *(("-c", script) if script else ("-m", "referee.cli", "serve")),
            "--port",
            str(port),
            "--db",
            str(db),
            "--metrics-port",
            "0",
            "--adjudicator-token",
            ADJUDICATOR_TOKEN,
            "--log-format",
            "json",
            *extra,
        ]
        with log.open("ab") as sink:
            self.process = subprocess.Popen(
                command, cwd=REPO, stdout=sink, stderr=sink, stdin=subprocess.DEVNULL
            )

    async def wait_serving(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        async with grpc.aio.insecure_channel(self.address) as channel:
            stub = health_stub(channel)
            while True:
                assert self.process.poll() is None, self.log.read_text()[-2000:]
                try:
                    response = await stub.Check(health_pb2.HealthCheckRequest(), timeout=1)
                    if response.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.aio.AioRpcError:
                    pass
                assert time.monotonic() < deadline, "the server did not start"
                await asyncio.sleep(0.1)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)


@contextmanager
def running(db: Path, port: int, log: Path, *extra: str, script: str = "") -> Iterator[Server]:
    server = Server(db, port, log, *extra, script=script)
    try:
        yield server
    finally:
        server.kill()


@dataclass
class Acknowledged:
    seat: int
    action: dict[str, Any]
    request_id: str
    version: int


@dataclass
class Player:
    """One client task's game and what the server acknowledged in it."""

    table: Table
    acks: list[Acknowledged] = field(default_factory=list)


async def _load(
    client: RefereeClient, players: list[Player], index: int, stop: asyncio.Event
) -> None:
    """Play one game until the server goes away (or it ends), recording acknowledgements."""
    player = players[index]
    table = player.table
    rng = random.Random(index)
    try:
        while not stop.is_set():
            view = await table.adj.view()
            if view["over"]:
                return
            turn = view["hand"]["turn"]
            entries = await table.seats[turn].legal_actions()
            if not entries:
                await asyncio.sleep(0)
                continue
            action = pick(entries, rng)
            request_id = f"g{index}-{len(player.acks)}-{rng.random()}"
            result = await table.seats[turn].submit(action, request_id=request_id)
            player.acks.append(Acknowledged(turn, action, request_id, result["version"]))
    except RefereeError as error:
        assert error.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED), error


def _same(logged: dict[str, Any], sent: dict[str, Any]) -> bool:
    """A record's action is the one sent (the record holds the canonical JSON form)."""
    if logged["type"] != sent["type"]:
        return False
    keys = {"card", "amount", "suit", "turn_up", "name"}
    if any(logged.get(k) != sent.get(k) for k in keys):
        return False
    if "cards" in sent and logged["type"] in ("pass_cards", "discard"):
        return sorted(logged["cards"]) == sorted(sent["cards"])
    return True


async def test_sigkill_under_load_loses_no_acknowledged_action(tmp_path: Path) -> None:
    db = tmp_path / "data" / "referee.db"
    port = free_port()
    log = tmp_path / "server.log"
    players: list[Player] = []
    with running(db, port, log) as server:
        await server.wait_serving()
        client = RefereeClient(server.address)
        for variant in GAMES:
            created = await client.create_game(variant, SHORT_GAME[variant])
            players.append(
                Player(
                    Table(
                        client,
                        created.game_id,
                        created.seat_tokens,
                        created.spectator_token,
                        created.adjudicator_token,
                    )
                )
            )
        stop = asyncio.Event()
        tasks = [asyncio.create_task(_load(client, players, i, stop)) for i in range(len(players))]
        deadline = time.monotonic() + 20
        while sum(len(p.acks) for p in players) < 180 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        # Mid-game, with every task in the middle of a call or about to make one.
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait(10)
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 20)
        await client.close()
    total = sum(len(p.acks) for p in players)
    assert total >= 100, "too little load before the kill"
    assert all(p.acks for p in players)

    unfinished = 0
    with running(db, port, log) as server:
        await server.wait_serving()
        async with RefereeClient(server.address) as client:
            for index, player in enumerate(players):
                table = player.table.through(client)
                # Every acknowledged action is there, at its version, for its seat.
                response = await client.referee.GetGame(
                    pb.GetGameRequest(game_id=table.game_id), metadata=bearer(ADJUDICATOR_TOKEN)
                )
                assert response.version >= player.acks[-1].version
                record = await table.adj.export()
                logged = [a for hand in record["hands"] for a in hand["actions"]]
                assert len(logged) == response.version
                for ack in player.acks:
                    entry = logged[ack.version - 1]
                    assert entry["seat"] == ack.seat, (index, ack)
                    assert _same(entry, ack.action), (index, ack, entry)
                # A retry of the last acknowledged request answers the stored response.
                last = player.acks[-1]
                retry = await client.referee.SubmitAction(
                    pb.SubmitActionRequest(
                        game_id=table.game_id,
                        action=raw_action(last.action),
                        expected_version=last.version - 1,
                        request_id=last.request_id,
                    ),
                    metadata=bearer(table.seat_tokens[last.seat]),
                )
                assert retry.version == last.version
                # The game plays on to its end; its export audits as legal.
                unfinished += not (await table.adj.view())["over"]
                await play(table, random.Random(100 + index))
                final = await table.adj.view()
                assert final["over"]
                record = await table.seats[0].export()
                verdict = audit_record(record)
                assert verdict["legal"] and verdict["finished"], verdict
                assert verdict["winner"] == final["winner"]
                assert await table.adj.verify_audit_log()
        server.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(server.process.wait, 15) == 0
    assert unfinished >= len(players) // 2, "the kill was not mid-game"


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_stop_signal_reports_not_serving_then_exits_cleanly(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """SIGTERM (an orchestrator) and SIGINT (Ctrl-C in a terminal) stop the server the same
    graceful way."""
    db = tmp_path / "referee.db"
    port = free_port()
    log = tmp_path / "server.log"
    with running(db, port, log, "--grace-seconds", "1") as server:
        await server.wait_serving()
        async with RefereeClient(server.address) as client:
            game = await client.create_game("partnership", seed="term")
            seat = client.seat(game.game_id, game.seat_tokens[1])
            await seat.submit({"type": "pass"}, expected_version=0)
            health = health_stub(client.channel)
            watch = health.Watch(health_pb2.HealthCheckRequest(service=""))
            statuses = [(await anext(aiter(watch))).status]
            assert statuses == [health_pb2.HealthCheckResponse.SERVING]
            server.process.send_signal(stop)
            try:
                async for update in watch:
                    statuses.append(update.status)
            except grpc.aio.AioRpcError as error:
                assert error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
            assert health_pb2.HealthCheckResponse.NOT_SERVING in statuses
        assert await asyncio.to_thread(server.process.wait, 15) == 0
        text = log.read_text()
        assert '"shutting_down"' in text and '"stopped"' in text
        assert "Traceback" not in text and "KeyboardInterrupt" not in text
    # What was acknowledged before the shutdown is there after a restart.
    with running(db, port, log) as server:
        await server.wait_serving()
        async with RefereeClient(server.address) as client:
            view = await client.session(game.game_id, game.adjudicator_token).view()
            assert view["version"] == 1 and view["hand"]["auction"] == [{"seat": 1, "type": "pass"}]


# ``serve`` as ``pinochle-referee serve`` runs it, then, once it has returned, the stop signals a
# second Ctrl-C or a supervisor that signals the process and its group sends as it exits.
AFTER_THE_STOP = """
import os, signal, sys
from referee.service import server
status = server.main(sys.argv[1:])
os.kill(os.getpid(), signal.SIGTERM)
os.kill(os.getpid(), signal.SIGINT)
print("exiting", status, flush=True)
sys.exit(status)
"""


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_stop_signal_after_the_graceful_stop_leaves_the_exit_status_zero(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """Was: once the server had stopped, asyncio.run closed the loop and its signal handlers
    with it, so a second SIGTERM killed the process (exit -15) and a second SIGINT raised
    KeyboardInterrupt (-2): a clean stop reported as a failure. Now both are ignored."""
    port = free_port()
    log = tmp_path / "server.log"
    command = [
        *(sys.executable, "-c", AFTER_THE_STOP),
        *("--port", str(port), "--db", str(tmp_path / "referee.db"), "--metrics-port", "0"),
        *("--log-format", "json"),
    ]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, cwd=REPO, stdout=sink, stderr=sink)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            check = health_stub(channel).Check
            for _ in range(300):  # until it serves (bounded)
                assert process.poll() is None, log.read_text()
                with contextlib.suppress(grpc.aio.AioRpcError):
                    reply = await check(health_pb2.HealthCheckRequest(), timeout=1)
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        break
                await asyncio.sleep(0.1)
        process.send_signal(stop)
        assert await asyncio.to_thread(process.wait, 30) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    text = log.read_text()
    assert '"stopped"' in text and "exiting 0" in text and "Traceback" not in text


async def _open_reflection_stream(channel: grpc.aio.Channel) -> grpc.aio.StreamStreamCall[Any, Any]:
    """A reflection stream that has had its first answer and keeps its request side open, as
    grpcurl's interactive mode does: the client's to end."""
    stub: Any = cast(Any, reflection_pb2_grpc.ServerReflectionStub)(channel)
    stream: grpc.aio.StreamStreamCall[Any, Any] = stub.ServerReflectionInfo()
    await stream.write(reflection_pb2.ServerReflectionRequest(list_services=""))
    answer: Any = await asyncio.wait_for(stream.read(), 30)
    assert answer.list_services_response.service
    return stream


async def _logged(server: Server, text: str) -> None:
    """Wait until the server's log holds ``text`` (bounded), the server running meanwhile."""
    for _ in range(600):
        if text in server.log.read_text():
            return
        assert server.process.poll() is None, server.log.read_text()[-2000:]
        await asyncio.sleep(0.1)
    raise AssertionError(f"the server never logged {text!r}")


async def test_a_reflection_stream_ends_as_the_stop_begins(tmp_path: Path) -> None:
    """Was: an open reflection stream (grpcurl in interactive mode) held a graceful stop for
    the whole grace period, an hour here, then was cut with "Cancelling all calls", while
    health Watch and WatchGame streams ended as the stop began. Now it ends too, UNAVAILABLE
    with reason SHUTTING_DOWN, and one SIGTERM lets the process exit at once."""
    log = tmp_path / "server.log"
    with running(tmp_path / "referee.db", free_port(), log, "--grace-seconds", "3600") as server:
        await server.wait_serving()
        async with grpc.aio.insecure_channel(server.address) as channel:
            stream = await _open_reflection_stream(channel)
            server.process.send_signal(signal.SIGTERM)
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                await asyncio.wait_for(stream.read(), 60)
            error = RefereeError(ended.value)
            assert (error.code, error.reason) == (grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN")
            assert error.message.startswith("the server is shutting down; open the reflection")
            assert await asyncio.to_thread(server.process.wait, 60) == 0
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    (ended_line,) = [line for line in lines if line.get("rpc") == "ServerReflectionInfo"]
    assert (ended_line["grpc_code"], ended_line["code"]) == ("UNAVAILABLE", "SHUTTING_DOWN")
    assert [line["event"] for line in lines][-1] == "stopped"
    assert "Traceback" not in log.read_text()


# ``serve`` whose SQLite commits say on its log that they have reached the store, and wait for a
# write lock another connection holds for as long as it holds it: a SubmitAction that stays in
# flight until the test lets it go, holding the grace period.
HELD_COMMITS = """
import sys
from referee.service import server
from referee.store import sqlite
sqlite.BUSY_TIMEOUT_SECONDS = 3600.0
commit = sqlite.SqliteStore.commit
def announced(store, job):
    print("commit_entered", file=sys.stderr, flush=True)
    return commit(store, job)
sqlite.SqliteStore.commit = announced
sys.exit(server.main(sys.argv[1:]))
"""


@pytest.mark.parametrize(
    ("first", "second"),
    [(signal.SIGTERM, signal.SIGTERM), (signal.SIGINT, signal.SIGINT)],
    ids=["SIGTERM twice", "SIGINT twice"],
)
async def test_a_second_stop_signal_cancels_the_calls_in_flight_and_exits_at_once(
    tmp_path: Path, first: signal.Signals, second: signal.Signals
) -> None:
    """Was: a second SIGTERM or SIGINT during the graceful stop changed nothing, so a call in
    flight held the process for the whole grace period (an hour here). Now the second cancels
    the calls in flight at once, logs ``forced_stop`` and exits 128 plus its number, once the
    commit the store had begun has finished (here when the test lets go of its lock)."""
    db = tmp_path / "referee.db"
    log = tmp_path / "server.log"
    with running(db, free_port(), log, "--grace-seconds", "3600", script=HELD_COMMITS) as server:
        await server.wait_serving()
        async with RefereeClient(server.address) as client:
            game = await client.create_game("partnership", seed="held")
            holder = sqlite3.connect(db, isolation_level=None)
            try:
                holder.execute("BEGIN IMMEDIATE")  # the server's commit waits for this lock
                seat = client.seat(game.game_id, game.seat_tokens[1])
                in_flight = asyncio.ensure_future(seat.submit({"type": "pass"}))
                await _logged(server, "commit_entered")
                server.process.send_signal(first)
                await _logged(server, '"shutting_down"')
                assert server.process.poll() is None, "the graceful stop did not wait for the call"
                server.process.send_signal(second)
                with pytest.raises(RefereeError) as cut:
                    await asyncio.wait_for(in_flight, 60)
                assert cut.value.code in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
            finally:
                holder.rollback()
                holder.close()
            assert await asyncio.to_thread(server.process.wait, 60) == 128 + second
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    events = [line["event"] for line in lines]
    assert events.index("shutting_down") < events.index("forced_stop") < events.index("stopped")
    forced = next(line for line in lines if line["event"] == "forced_stop")
    assert (forced["signal"], forced["exit_status"]) == (second.name, 128 + second)
    assert "Traceback" not in log.read_text()


async def test_during_the_drain_health_says_not_serving_and_calls_are_still_served(
    tmp_path: Path,
) -> None:
    """Was: on a stop signal the port closed at once, so a health Check (a readiness probe,
    Envoy's health check) failed UNAVAILABLE and a balancer that had not yet taken the server
    out sent calls that could not connect. With ``--drain-seconds`` every
    service's health is NOT_SERVING and calls are still served for that long; a second signal
    skips the drain and the grace period."""
    db = tmp_path / "referee.db"
    log = tmp_path / "server.log"
    port = free_port()
    with running(db, port, log, "--grace-seconds", "3600", "--drain-seconds", "3600") as server:
        await server.wait_serving()
        async with RefereeClient(server.address) as client:
            game = await client.create_game("partnership", seed="drain")
            health = health_stub(client.channel)
            reflection = await _open_reflection_stream(client.channel)
            server.process.send_signal(signal.SIGTERM)
            for _ in range(300):  # until the drain has begun (bounded)
                reply = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
                if reply.status == health_pb2.HealthCheckResponse.NOT_SERVING:
                    break
                await asyncio.sleep(0.1)
            for name in ("", "pinochle.referee.v1.RefereeService"):
                reply = await health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
                assert reply.status == health_pb2.HealthCheckResponse.NOT_SERVING, name
            watch = health.Watch(health_pb2.HealthCheckRequest(service=""))
            assert [update.status async for update in watch] == [
                health_pb2.HealthCheckResponse.NOT_SERVING
            ]
            seat = client.seat(game.game_id, game.seat_tokens[1])
            assert (await seat.submit({"type": "pass"}, expected_version=0))["version"] == 1
            # A reflection stream ends after the drain, not as it begins: it is still answered.
            await reflection.write(reflection_pb2.ServerReflectionRequest(list_services=""))
            answer: Any = await asyncio.wait_for(reflection.read(), 30)
            assert answer.list_services_response.service
            assert server.process.poll() is None
            server.process.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(server.process.wait, 60) == 128 + signal.SIGTERM
    text = log.read_text()
    shutting_down = next(
        json.loads(line) for line in text.splitlines() if '"shutting_down"' in line
    )
    assert (shutting_down["drain_seconds"], shutting_down["grace_seconds"]) == (3600, 3600)
    assert '"forced_stop"' in text and "Traceback" not in text
    with running(db, port, log) as server:  # what the drain accepted is there
        await server.wait_serving()
        async with RefereeClient(server.address) as client:
            view = await client.session(game.game_id, game.adjudicator_token).view()
            assert view["version"] == 1


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=postgres_marks())])
def test_a_stop_signal_while_starting_abandons_the_start(
    tmp_path: Path, stop: signal.Signals, backend: str
) -> None:
    """Was: the stop signals were the loop's only once the server served, so one that came
    while it started took SIGTERM's default (exit -15; as a container's process 1, which the
    kernel spares that default, the server went on starting and served until SIGKILL) or
    SIGINT's traceback. Here the start waits for the migration lock another session holds (as
    while another replica migrates); the signal ends the start, logged, exit 0."""
    log = tmp_path / "server.log"
    with postgres_schema("test_start_signal") as schema, psycopg.connect(POSTGRES_URL) as holder:
        holder.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (MIGRATION_LOCK, schema))
        command = [
            *(sys.executable, "-m", "referee.cli", "serve", "--port", "0"),
            *("--metrics-port", "0", "--log-format", "json"),
            *("--db", POSTGRES_URL, "--db-schema", schema),
        ]
        with log.open("wb") as sink:
            process = subprocess.Popen(command, cwd=REPO, stdout=sink, stderr=sink)
        try:
            with psycopg.connect(POSTGRES_URL, autocommit=True) as watcher:
                for _ in range(600):  # until the server waits for the lock (bounded: 60 s)
                    assert process.poll() is None, log.read_text()
                    waiting = watcher.execute(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                        " AND NOT granted AND objid = hashtext(%s)::oid",
                        (schema,),
                    ).fetchone()
                    if waiting and waiting[0]:
                        break
                    time.sleep(0.1)
                else:
                    raise AssertionError("the server never waited for the migration lock")
            process.send_signal(stop)
            assert process.wait(30) == 0, log.read_text()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)
            holder.rollback()
    text = log.read_text()
    assert '"start_abandoned"' in text and stop.name in text, text
    assert "Traceback" not in text and '"serving"' not in text, text
