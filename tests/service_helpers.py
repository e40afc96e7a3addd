"""Helpers for the gRPC service tests: an in-process server, clients, and bots that play legal
actions through the API (issue 4, "Tests").

Nothing here talks to the engine directly: a bot asks ``ListLegalActions`` and sends one of the
answers with ``SubmitAction``, exactly as a frontend would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import socket
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog
import trustme
from google.protobuf.json_format import MessageToDict
from grpc_health.v1 import health_pb2_grpc
from pinochle_client import RefereeClient, RefereeError, SeatSession, Session

from protos.pinochle.referee.v1 import referee_pb2 as pb
from protos.pinochle.referee.v1 import referee_pb2_grpc as pb_grpc
from referee.service.convert import action_from_json
from referee.service.games import Created, GameManager
from referee.service.observability import CONSOLE_TRACEBACK
from referee.service.server import Running, start_server
from referee.service.settings import Settings

ADJUDICATOR_TOKEN = "server-adjudicator-credential-for-tests"
VARIANTS = ("two-handed", "cutthroat", "partnership", "double-deck", "partnership-no-bid")
# Low targets so that a game usually ends after a hand or two.
SHORT_GAME: dict[str, dict[str, object]] = {
    "two-handed": {"target": 100},
    "cutthroat": {"target": 100},
    "partnership": {"target": 100},
    "double-deck": {"target": 20},
    "partnership-no-bid": {"target": 100},
}
CLIENT_MISTAKE_CODES = frozenset(
    set(grpc.StatusCode) - {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}
)


def quiet_logs() -> None:
    """The server logs one line per RPC; tests only want warnings.

    structlog's defaults first: a test that configured JSON logs under ``capfd`` left them
    writing to that test's capture file, closed since, and a later server's error line would
    then fail its request with ``ValueError: I/O operation on closed file``."""
    structlog.reset_defaults()
    structlog.configure(
        # Python's own traceback text, as the server writes it (rich's, the default, took
        # about a second per logged failure with its locals).
        processors=[
            *structlog.get_config()["processors"][:-1],
            structlog.dev.ConsoleRenderer(exception_formatter=CONSOLE_TRACEBACK),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def bearer(token: str | None) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),) if token is not None else ()


@dataclass
class Served:
    """An in-process server and a client connected to it."""

    running: Running
    settings: Settings
    address: str
    client: RefereeClient

    @property
    def referee(self) -> pb_grpc.RefereeServiceAsyncStub:
        return self.client.referee

    @property
    def rules(self) -> pb_grpc.RulesServiceAsyncStub:
        return self.client.rules

    @property
    def db(self) -> Path:
        return Path(self.settings.db)


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, **overrides: Any) -> AsyncIterator[Served]:
    """Start ``start_server`` on port 0 with a fresh database; stop it (grace 0) afterwards."""
    quiet_logs()
    settings = Settings(
        port=0,
        db=str(tmp_path / "x.db"),
        metrics_port=0,
        adjudicator_token=ADJUDICATOR_TOKEN,
    )
    settings = replace(settings, **overrides)
    running = await start_server(settings)
    address = f"127.0.0.1:{running.port}"
    client = RefereeClient(address)
    try:
        yield Served(running, settings, address, client)
    finally:
        await client.close()
        await running.stop(0)


class SilentNetwork:
    """A TCP relay to a server whose open connections can be cut silently: everything they
    carry is dropped from then on and nothing is closed (no FIN, no RST), which is what a cut
    network or a dead phone looks like to both ends. Connections made afterwards are relayed
    normally (the client found another way back)."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target_port = target_port
        self.target_host = target_host
        self.port = 0
        self.connections = 0  # made through the relay so far
        self._server: asyncio.Server | None = None
        self._open: dict[asyncio.Task[Any], list[bool]] = {}  # relay -> [cut]

    async def __aenter__(self) -> SilentNetwork:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for relay in list(self._open):
            relay.cancel()
        await asyncio.gather(*self._open, return_exceptions=True)

    def cut(self) -> None:
        """Drop everything on the connections open now, for good."""
        for state in self._open.values():
            state[0] = True

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        state = self._open[task] = [False]
        self.connections += 1
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(
                self.target_host, self.target_port
            )
            try:
                await asyncio.gather(
                    _pipe(reader, upstream_writer, state), _pipe(upstream_reader, writer, state)
                )
            finally:
                upstream_writer.close()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            del self._open[task]


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter, cut: list[bool]) -> None:
    while data := await source.read(65536):
        if not cut[0]:
            sink.write(data)
            await sink.drain()


async def refused(call: Awaitable[Any]) -> RefereeError:
    """The error of a call that must be refused; a client mistake is never UNKNOWN/INTERNAL."""
    try:
        await call
    except RefereeError as error:
        found = error
    except grpc.aio.AioRpcError as error:
        found = RefereeError(error)
    else:
        raise AssertionError("the call was accepted but should have been refused")
    assert found.code in CLIENT_MISTAKE_CODES, f"a client mistake gave {found}"
    return found


async def stream_refused(stream: AsyncIterable[Any]) -> RefereeError:
    """Like ``refused`` for a server stream (the error comes while reading)."""
    return await refused(_drain(stream))


async def _drain(stream: AsyncIterable[Any]) -> list[Any]:
    return [item async for item in stream]


async def log_lines(
    capfd: pytest.CaptureFixture[str], rpcs: int, within: float = 10.0
) -> list[dict[str, Any]]:
    """The JSON log lines written to stderr since the last read, once ``rpcs`` canonical RPC
    lines (``"event": "rpc"``) are among them (or ``within`` seconds have passed).

    The server writes an RPC's line when its handler ends, and a refusal's status reaches the
    client from inside the handler (``context.abort``), so a test that reads the log as soon as
    its last call returns can miss that call's line."""
    text = ""
    deadline = time.monotonic() + within
    while True:
        text += capfd.readouterr().err
        lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        logged = sum(1 for line in lines if line.get("event") == "rpc")
        if logged >= rpcs or time.monotonic() > deadline:
            return lines
        await asyncio.sleep(0.01)


def whole_json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON lines of a log a running server is writing. The last line may be only begun
    (a read can land between the server's writes), so a line not yet ended by its newline is
    left for the next read rather than parsed half."""
    return [
        json.loads(line)
        for line in text.splitlines(keepends=True)
        if line.startswith("{") and line.endswith("\n")
    ]


def plain(message: Any) -> dict[str, Any]:
    """A protobuf message as JSON-ready data (field names as in the .proto)."""
    out: dict[str, Any] = MessageToDict(message, preserving_proto_field_name=True)
    return out


def health_stub(channel: grpc.aio.Channel) -> Any:
    """The standard health service's stub (its typing stubs declare no methods)."""
    return health_pb2_grpc.HealthStub(channel)


def text_of(data: object) -> str:
    return json.dumps(data, sort_keys=True, default=str)


# ----------------------------------------------------------------------------------------------
# Games


@dataclass
class Table:
    """One game and a session per role."""

    client: RefereeClient
    game_id: str
    seat_tokens: list[str]
    spectator_token: str
    adjudicator_token: str
    seats: list[SeatSession] = field(default_factory=list)
    spectator: Session | None = None
    adjudicator: Session | None = None

    def __post_init__(self) -> None:
        self.seats = [self.client.seat(self.game_id, t) for t in self.seat_tokens]
        self.spectator = self.client.session(self.game_id, self.spectator_token)
        self.adjudicator = self.client.session(self.game_id, self.adjudicator_token)

    def through(self, client: RefereeClient) -> Table:
        """The same game and tokens, called through ``client`` (another server or replica, or
        the same server restarted)."""
        return Table(
            client,
            self.game_id,
            self.seat_tokens,
            self.spectator_token,
            self.adjudicator_token,
        )

    @property
    def adj(self) -> Session:
        assert self.adjudicator is not None
        return self.adjudicator

    @property
    def spec(self) -> Session:
        assert self.spectator is not None
        return self.spectator


async def new_table(
    client: RefereeClient,
    variant: str = "partnership",
    options: Mapping[str, object] | None = None,
    **kwargs: Any,
) -> Table:
    created = await client.create_game(variant, options, **kwargs)
    return Table(
        client,
        created.game_id,
        created.seat_tokens,
        created.spectator_token,
        created.adjudicator_token,
    )


def concrete(entry: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """A concrete action allowed by a legal-action entry (A.10 item 2)."""
    kind = entry["type"]
    if kind == "bid":
        low, step, high = entry["min"], entry["step"], entry["max"]
        top = low + 2 * step if high is None else min(high, low + 2 * step)
        return {"type": "bid", "amount": rng.choice(range(low, top + 1, step))}
    if kind in ("pass_cards", "discard"):
        return {"type": kind, "cards": rng.sample(list(entry["from"]), int(entry["count"]))}
    if kind == "meld" and "from" in entry:
        cards = list(entry["from"])
        return {"type": "meld", "cards": cards if rng.random() < 0.8 else []}
    return dict(entry)


def pick(entries: Sequence[Mapping[str, Any]], rng: random.Random) -> dict[str, Any]:
    """Bots bid rarely (auctions end fast), meld often, concede now and then."""
    # A two-handed lead may also be the card about to be drawn ({"drawn_card": true}); which
    # card that is stays hidden, so bots lead a card they hold.
    entries = [e for e in entries if not e.get("drawn_card")]
    kinds = {e["type"] for e in entries}
    if "bid" in kinds and "pass" in kinds and rng.random() < 0.7:
        return concrete(next(e for e in entries if e["type"] == "pass"), rng)
    if len(entries) > 1 and rng.random() < 0.97:
        entries = [e for e in entries if e["type"] != "concede"] or list(entries)
    melds = [e for e in entries if e["type"] in ("meld", "exchange_dix")]
    if melds and rng.random() < 0.8:
        return concrete(rng.choice(melds), rng)
    return concrete(rng.choice(list(entries)), rng)


async def actor(table: Table) -> tuple[int, list[dict[str, Any]]] | None:
    """The seat that may act now and its legal actions (None when the game is over)."""
    view = await table.adj.view()
    if view["over"]:
        return None
    hand = view["hand"]
    order = list(range(len(table.seats)))
    if hand is not None and hand.get("turn") is not None:
        order.remove(hand["turn"])
        order.insert(0, hand["turn"])
    for seat in order:
        entries = await table.seats[seat].legal_actions()
        entries = [e for e in entries if e["type"] != "concede"] if seat != order[0] else entries
        if entries:
            return seat, entries
    raise AssertionError(f"no seat can act at version {view['version']}")


@dataclass
class Step:
    seat: int
    action: dict[str, Any]
    result: dict[str, Any]


async def play_step(table: Table, rng: random.Random) -> Step | None:
    """One legal action by whichever seat must act; None when the game is over."""
    found = await actor(table)
    if found is None:
        return None
    seat, entries = found
    action = pick(entries, rng)
    result = await table.seats[seat].submit(action)
    return Step(seat, action, result)


async def play(
    table: Table, rng: random.Random, *, max_actions: int = 5000, hands: int | None = None
) -> list[Step]:
    """Play until the game ends (or ``hands`` more hands have ended, or ``max_actions``)."""
    steps: list[Step] = []
    ended = 0
    for _ in range(max_actions):
        step = await play_step(table, rng)
        if step is None:
            return steps
        steps.append(step)
        if any(e["kind"] == "hand_result" for e in step.result["events"]):
            ended += 1
            if hands is not None and ended >= hands:
                return steps
    raise AssertionError(f"the game did not end in {max_actions} actions")


def raw_action(action: Mapping[str, object]) -> pb.Action:
    return action_from_json(action)


def write_pems(ca: trustme.CA, folder: Path) -> dict[str, Path]:
    """PEM files from ``ca`` in ``folder``: its certificate (``ca``), a server's for localhost
    and 127.0.0.1 (``cert``, ``key``) and a client's (``client_cert``, ``client_key``)."""
    folder.mkdir(parents=True, exist_ok=True)
    server = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert("client.example")
    paths = {
        "ca": folder / "ca.pem",
        "cert": folder / "server.pem",
        "key": folder / "server.key",
        "client_cert": folder / "client.pem",
        "client_key": folder / "client.key",
    }
    ca.cert_pem.write_to_path(str(paths["ca"]))
    server.cert_chain_pems[0].write_to_path(str(paths["cert"]))
    for extra in server.cert_chain_pems[1:]:
        extra.write_to_path(str(paths["cert"]), append=True)
    server.private_key_pem.write_to_path(str(paths["key"]))
    client.cert_chain_pems[0].write_to_path(str(paths["client_cert"]))
    client.private_key_pem.write_to_path(str(paths["client_key"]))
    return paths


async def new_managed_game(games: GameManager, seed: str = "review") -> Created:
    """A seeded partnership game created straight through a ``GameManager`` (no gRPC)."""
    return await games.create(
        variant="partnership",
        options=None,
        first_dealer=0,
        deal_mode={"mode": "seed", "seed": seed},
        players=(),
        token=None,
    )
