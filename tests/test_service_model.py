"""A model-based (stateful) test of the gRPC service API: ``RefereeService`` against a model.

Hypothesis drives a :class:`ServiceMachine` through random sequences of requests to one game
(seeded, or from given deals; any first dealer; with or without the players' names): legal
actions (from the model's ``legal_actions``) with fresh request ids, none, ids another seat
used or this seat had refused; any action by any seat, legal or not (a card not held, a card
it may not play, a bid too low, a type out of phase, a seat not to act); retries of any
accepted request (any seat's, any earlier one); a used request id with another action or
version; stale and future ``expected_version``s; requests refused before the rules look at
them (no action, a request id too long or holding NUL); requests with no token, a wrong token,
the spectator's, the game's or the server's adjudicator token, past the refusal budget too;
the same request sent twice at once, and one action sent at once under two ids, to one server
or to both replicas; restarts of the server on the same database; runs of legal actions
(interleaved with any action of the seat to act) to get through hands.

The model (:class:`Model`) is a client-side copy of the engine (``new_game``/``start_hand``
with ``SeededDeals``, ``apply``, ``legal_actions``, ``view``), as bench/service.py's
``ReplicaGame`` plays a seeded game, plus what a correct server keeps beside it: the events
each action makes, numbered as the game's log numbers them (the service's ``deal_committed``
and ``deal_salt`` events at the places the README gives them), the response of each accepted
request id, each server's refusal budget for callers without a seat, the audit log's entries
(every request to act, accepted or refused, but not a retry answered from its stored response
nor a request refused past the budget: README "The audit log"), and every card name each role
has been shown by its events. Each request's answer is checked against it: status, ErrorInfo
reason (the code the engine's ``apply`` raises for an illegal action), ``metadata["version"]``
and the field named, the new version, the caller's view (the engine's ``view`` for its role,
with the service's ``game_id``, ``deal_mode``, ``players`` and the hand's ``commitment``) and
its events (those its role may see). After every step every role's ``GetGame`` and
``ListLegalActions`` must agree with the model, the audit log read by the adjudicator and by
one other role must hold exactly the model's entries as that role may see them (README "What
each role sees"), ``VerifyAuditLog`` must say intact, and no view or audit entry shown to a
seat or the spectator may name a card its events never showed it (a check of the engine's
views independent of them). At the end the game is played out; its ``ExportGame`` record must
be the model's, audit as legal and finished (``referee.audit``), each hand's commitment must
open with its revealed salt, and ``WatchGame`` of the finished game (from the start, a version
or an event, for every role) must send exactly the events the role may see, or a snapshot of
its view when they reach back beyond the watch window.

Why a ``RuleBasedStateMachine`` rather than a random walk: each rule is a short coroutine run
to completion on the event loop the machine owns (``asyncio.Runner``, as
``tests/test_store_model.py`` does), so the server, the gRPC client and every step share one
loop; hypothesis then gets shrinking of failing runs for free. Shrinking replays whole runs
over gRPC, so a failure can take minutes to shrink; a passing run takes about 6 s per case,
50 s for the file.

``sqlite`` runs one in-process server on a fresh file per example, for every variant; a
restart stops it and starts another on the same file. ``postgres`` runs two in-process
replicas on a fresh schema of the test database, every request routed at random to either (a
restart restarts one), for partnership and two-handed (the slower backend; the replicas share
everything but memory, which the variants do not change); skipped, with one reason line, where
no PostgreSQL is reachable, like every PostgreSQL test.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
import re
import tempfile
import uuid
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import grpc
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from pinochle_client import RefereeClient, RefereeError

from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee.audit import audit_record
from referee.engine.actions import decode_action, encode_action
from referee.engine.engine import apply, legal_actions, new_game, start_hand
from referee.engine.errors import IllegalAction
from referee.engine.events import EVERYONE, Event, visible_to
from referee.engine.game import LogEntry, SeededDeals, export_record
from referee.engine.state import GameState
from referee.engine.views import view
from referee.rules.cards import canonical_deck, format_card
from referee.rules.options import RuleSet, resolve_options
from referee.service.convert import action_from_json, action_to_json, struct_to_dict
from referee.service.server import Running, start_server
from referee.service.settings import Settings
from tests.service_helpers import (
    ADJUDICATOR_TOKEN,
    SHORT_GAME,
    VARIANTS,
    bearer,
    concrete,
    quiet_logs,
    refused,
)
from tests.test_store import POSTGRES_URL, postgres_marks, postgres_schema

T = TypeVar("T")

STEP_TIMEOUT = 60.0  # a step that hangs fails instead
MAX_ACTIONS = 1500  # playing a game out at the end: far more than a short game takes
# Callers without a seat draw from a per-game refusal budget (referee/service/limits.py), kept
# by each server, afresh on a restart. A small burst refilled at the slowest rate allowed (a
# token every 1,000 s, while a run takes seconds) makes it exact enough to model: the first
# REFUSAL_BURST such refusals on a server are audited, the others refused unaudited.
REFUSAL_BURST = 4
REFUSAL_RATE = 0.001
GIVEN_HANDS = 40  # deals given to a game created from given deals
# The machine's games: SHORT_GAME's, with partnership's lowest bid at 100. The bots set almost
# every declarer, and at the default 250 a side loses about as much declaring as it gains
# defending (+4 and +26 points a hand per side over ten 30-hand games of the bots): a game could
# go on for dozens of hands with both sides below the target, and one did (23 hands, -380 and
# -190, when the play-out stopped at MAX_ACTIONS). At 100 a side gains about 186 a hand, so the
# play-out ends within a few hands.
MODEL_GAME: dict[str, dict[str, object]] = {
    **SHORT_GAME,
    "partnership": {**SHORT_GAME["partnership"], "min_bid": 100},
}
WATCH_WINDOW = 80
EVENTS_IN_MEMORY = 16

# Few examples, each a whole game (played out at the end) with a check of every role after
# every step: about 6 s per case here, the file within a minute. Runs of more examples and of
# other options (the kitty exchange, auto meld, winner_chooses, a 48-card double deck) were
# made while writing it; raise max_examples to search longer.
RUNS = {
    "sqlite": settings(
        max_examples=3,
        stateful_step_count=20,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    ),
    "postgres": settings(
        max_examples=3,
        stateful_step_count=15,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    ),
}

_ROLE = {
    "seat": pb.ROLE_SEAT,
    "spectator": pb.ROLE_SPECTATOR,
    "adjudicator": pb.ROLE_ADJUDICATOR,
    "anonymous": pb.ROLE_UNSPECIFIED,
}


def plain_json(data: object) -> Any:
    """``data`` as JSON carries it (tuples as lists, int keys as strings)."""
    return json.loads(json.dumps(data))


CARD = re.compile(r"(A|10|K|Q|J|9)[SHDC]")


def card_names(data: object) -> set[str]:
    """Every card name anywhere in JSON data."""
    if isinstance(data, str):
        return {data} if CARD.fullmatch(data) else set()
    if isinstance(data, Mapping):
        return set().union(*(card_names(v) for v in data.values()))
    if isinstance(data, list | tuple):
        return set().union(*(card_names(v) for v in data))
    return set()


def commitment_of(deal_json: Mapping[str, object], salt_hex: str) -> str:
    """README "Deal commitments", computed here from its definition, not the service's code."""
    text = json.dumps(deal_json, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8") + bytes.fromhex(salt_hex)).hexdigest()


# -- the model ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """An audit entry as the adjudicator's ``GetAuditLog`` must show it."""

    role: str
    seat: int | None
    outcome: str  # accepted | refused
    code: str
    request_id: str
    version: int
    # The action as the adjudicator sees it: an accepted one canonical, a refused one as sent.
    action: Mapping[str, object] | None

    def public(self) -> Mapping[str, object] | None:
        """The public part any seat or the spectator sees (README "The audit log")."""
        if self.action is None:
            return None
        kind = self.action["type"]
        if self.outcome == "refused":
            return {"type": kind}
        if kind in ("pass_cards", "discard"):
            cards = self.action["cards"]
            assert isinstance(cards, list)
            return {"type": kind, "count": len(cards)}
        return self.action


@dataclass
class Accepted:
    """An accepted request, kept to be retried or to have its id reused."""

    seat: int
    request_id: str
    action: dict[str, object]
    expected_version: int
    response: pb.SubmitActionResponse


@dataclass
class Model:
    """The game as a correct server must hold it, from the engine alone."""

    rules: RuleSet
    seed: str
    dealer: int = 0  # the first dealer
    players: list[str] | None = None  # the players' names, when given
    given: int = 0  # how many hands' deals CreateGame gave (0: the game is seeded)
    state: GameState = field(init=False)
    log: list[LogEntry] = field(default_factory=list)
    events: int = 0  # events in the game's log so far (their seqs are 1..events)
    logged: list[dict[str, object]] = field(default_factory=list)  # all of them, in order
    # Role -> every card name the events it may see have named (and, for a seat, the cards it
    # sent itself): all it can know, so all any answer to it may name.
    known: dict[int | str, set[str]] = field(default_factory=dict)
    audit: list[Entry] = field(default_factory=list)
    accepted: list[Accepted] = field(default_factory=list)
    refused_ids: dict[int, set[str]] = field(default_factory=dict)  # seat -> ids refused
    commitments: dict[int, str] = field(default_factory=dict)  # hand -> as published
    deals: dict[int, Mapping[str, object]] = field(default_factory=dict)  # hand -> deal JSON
    salts: dict[int, str] = field(default_factory=dict)  # hand -> as revealed

    def __post_init__(self) -> None:
        self.known = {role: set() for role in (*range(self.rules.players), "spectator")}
        self.state = new_game(self.rules, self.dealer)
        self.events = len(self._deal())

    def _deal(self) -> list[dict[str, object]]:
        """Deal the next hand as the service does (``GameManager._deal``): the engine's events
        with ``deal_committed`` second, its commitment left for the server to fill."""
        state = self.state
        number = state.hands_completed
        # Given deals are the seeded ones, made here: either way the deal is known.
        assert not self.given or number < self.given, "the game outlasted its given deals"
        deal = SeededDeals(self.seed).next_deal(state.rules, state.next_dealer, number)
        self.state, events = start_hand(state, deal)
        self.log.append(LogEntry(None, deal=deal))
        self.deals[number] = deal.to_json()
        events.insert(1, Event("deal_committed", EVERYONE, {"hand": number, "commitment": None}))
        return self._numbered(events)

    def _numbered(self, events: Sequence[Event]) -> list[dict[str, object]]:
        out = []
        for one in events:
            self.events += 1
            self.logged.append(
                {
                    "seq": self.events,
                    "version": self.state.version,
                    "kind": one.kind,
                    "audience": str(one.audience),
                    "data": plain_json(dict(one.data)),
                }
            )
            out.append(self.logged[-1])
            for role, names in self.known.items():
                if visible_to(one, role):
                    names.update(card_names(one.data))
        return out

    def act(self, seat: int, action_json: Mapping[str, object]) -> list[dict[str, object]]:
        """Apply a seat's action; its events in the log's numbering (raises ``IllegalAction``
        and changes nothing when the engine refuses it)."""
        before = self.state
        action = decode_action(dict(action_json))
        self.state, events = apply(before, seat, action)
        self.log.append(LogEntry(seat, action=action))
        out = self._numbered(events)
        if self.state.hands_completed > before.hands_completed:
            hand = before.hands_completed
            out += self._numbered([Event("deal_salt", EVERYONE, {"hand": hand, "salt": None})])
        if self.state.hand is None and not self.state.over:
            out += self._deal()
        return out

    def filled(self, logged: Mapping[str, object]) -> dict[str, object]:
        """A logged event with the commitment or salt the server published for it."""
        data = logged["data"]
        assert isinstance(data, dict)
        if logged["kind"] == "deal_committed":
            return {**logged, "data": {**data, "commitment": self.commitments[data["hand"]]}}
        if logged["kind"] == "deal_salt":
            return {**logged, "data": {**data, "salt": self.salts[data["hand"]]}}
        return dict(logged)

    def given_deals(self) -> list[dict[str, object]]:
        """The deals to give CreateGame: the seeded game's own, hand by hand (hand n dealt by
        the first dealer's n-th successor, as every hand passes the deal on)."""
        players = self.rules.players
        return [
            plain_json(
                SeededDeals(self.seed)
                .next_deal(self.rules, (self.dealer + number) % players, number)
                .to_json()
            )
            for number in range(self.given)
        ]

    def deal_mode(self) -> dict[str, object]:
        """How every view says the game is dealt."""
        if self.given:
            return {"mode": "given_deals", "given_deals": self.given}
        return {"mode": "seed"}

    def refusal(self, seat: int, action_json: Mapping[str, object]) -> IllegalAction | None:
        """What the engine says of the action now: its refusal, or None when it is legal."""
        try:
            apply(self.state, seat, decode_action(dict(action_json)))
        except IllegalAction as illegal:
            return illegal
        return None

    def legal(self, seat: int) -> list[dict[str, object]]:
        return plain_json(legal_actions(self.state, seat))  # type: ignore[no-any-return]

    def view(self, role: int | str) -> dict[str, object]:
        return plain_json(view(self.state, role))  # type: ignore[no-any-return]

    def record(self) -> dict[str, object]:
        record = export_record(self.rules, self.dealer, self.log, self.players)
        return plain_json(record)  # type: ignore[no-any-return]

    def seats_with_actions(self) -> list[int]:
        return [s for s in range(self.rules.players) if legal_actions(self.state, s)]


# -- servers -----------------------------------------------------------------------------------


@dataclass
class Replica:
    settings: Settings
    running: Running
    client: RefereeClient


async def start_replica(settings: Settings) -> Replica:
    running = await start_server(replace(settings, port=0))
    return Replica(settings, running, RefereeClient(f"127.0.0.1:{running.port}", retries=False))


async def stop_replica(replica: Replica) -> None:
    await replica.client.close()
    await replica.running.stop(0)


# -- the machine -------------------------------------------------------------------------------


class ServiceMachine(RuleBasedStateMachine):
    """One seeded game on one server (or two replicas) against the model. Every call runs on
    the event loop this machine owns (``asyncio.Runner``), closed in ``teardown``."""

    variant: ClassVar[str] = ""
    backend: ClassVar[str] = ""
    game_options: ClassVar[dict[str, object] | None] = None  # None: MODEL_GAME's

    def __init__(self) -> None:
        super().__init__()
        quiet_logs()
        self.resources = contextlib.ExitStack()
        self.runner = asyncio.Runner()
        self.resources.callback(self.runner.close)
        self.replicas: list[Replica] = []
        self.budgets: list[int] = []  # each server's refusal budget left for the game
        # A WatchGame stream that follows the game as it is played (a random role's).
        self.follower: asyncio.Task[None] | None = None
        self.follower_role: int | str = "spectator"
        self.followed: list[dict[str, object]] = []  # the events it received
        self.snapshots = 0  # the snapshots it received
        self.completed = True  # the last step ran to its end (teardown then plays the game out)
        self.rng = random.Random(0)
        try:
            base = Settings(
                port=0,
                metrics_port=0,
                adjudicator_token=ADJUDICATOR_TOKEN,
                refusal_burst=REFUSAL_BURST,
                refusal_rate=REFUSAL_RATE,
                # Small, so that a finished game's WatchGame meets the events kept in memory,
                # those read back from the log and a snapshot for those beyond the window.
                watch_window=WATCH_WINDOW,
                events_in_memory=EVENTS_IN_MEMORY,
            )
            if self.backend == "postgres":
                schema = self.resources.enter_context(postgres_schema("test_service_model"))
                base = replace(base, db=POSTGRES_URL, db_schema=schema)
                count = 2
            else:
                folder = self.resources.enter_context(
                    tempfile.TemporaryDirectory(prefix="service-model-")
                )
                base = replace(base, db=str(Path(folder) / "referee.db"))
                count = 1
            for _ in range(count):
                self.replicas.append(self.run(start_replica(base)))
                self.budgets.append(REFUSAL_BURST)
        except BaseException:
            self.close()  # hypothesis calls teardown only on a machine it got
            raise
        self.options = self.game_options or MODEL_GAME[self.variant]
        self.ruleset = resolve_options(self.variant, self.options, for_game=True)
        self.deck = [format_card(c) for c in sorted(set(canonical_deck(self.ruleset.deck)))]

    # -- plumbing --------------------------------------------------------------------------

    def run(self, awaitable: Awaitable[T]) -> T:
        async def bounded() -> T:
            return await asyncio.wait_for(awaitable, STEP_TIMEOUT)

        return self.runner.run(bounded())

    def close(self) -> None:
        try:
            if self.follower is not None and not self.follower.done():
                self.follower.cancel()
                self.run(asyncio.gather(self.follower, return_exceptions=True))
            for replica in self.replicas:
                self.run(stop_replica(replica))
        finally:
            self.resources.close()

    def teardown(self) -> None:
        try:
            if self.completed and hasattr(self, "model"):
                self.run(self.play_out_and_export())
        finally:
            self.close()

    @property
    def client(self) -> RefereeClient:
        """Any replica's client (one server: always the same)."""
        return self.rng.choice(self.replicas).client

    @property
    def current(self) -> int:
        return self.model.state.version

    def token(self, seat: int) -> str:
        return self.seat_tokens[seat]

    async def submit(
        self,
        token: str | None,
        action: Mapping[str, object],
        expected_version: int,
        request_id: str,
        client: RefereeClient | None = None,
    ) -> pb.SubmitActionResponse | RefereeError:
        client = self.client if client is None else client
        request = pb.SubmitActionRequest(
            game_id=self.game_id,
            action=action_from_json(action) if action else pb.Action(),
            expected_version=expected_version,
            request_id=request_id,
        )
        try:
            return await client.referee.SubmitAction(request, metadata=bearer(token))
        except grpc.aio.AioRpcError as error:
            return RefereeError(error)

    def refused_with(
        self,
        answer: pb.SubmitActionResponse | RefereeError,
        code: grpc.StatusCode,
        reason: str,
    ) -> RefereeError:
        assert isinstance(answer, RefereeError), f"accepted, but {code.name} {reason} expected"
        assert (answer.code, answer.reason) == (code, reason), (
            f"{answer.code.name} {answer.reason} ({answer.message}), expected {code.name} {reason}"
        )
        return answer

    def audit_refusal(
        self,
        role: str,
        seat: int | None,
        code: str,
        request_id: str,
        action: Mapping[str, object],
    ) -> None:
        sent = plain_json(action_to_json(action_from_json(action)))
        if seat is not None:
            self.model.known[seat] |= card_names(sent)
        self.model.audit.append(Entry(role, seat, "refused", code, request_id, self.current, sent))
        if seat is not None:
            self.model.refused_ids.setdefault(seat, set()).add(request_id)

    def check_events(
        self, seat: int, got: Sequence[pb.Event], predicted: Sequence[dict[str, object]]
    ) -> None:
        """The response's events are exactly the predicted ones the seat may see; the
        commitment and salt, which only the server knows, are learned here and checked."""
        wanted = [
            e
            for e in predicted
            if visible_to(Event(str(e["kind"]), _audience(e["audience"]), {}), seat)
        ]
        shown = [
            {
                "seq": e.seq,
                "version": e.version,
                "kind": e.kind,
                "audience": e.audience,
                "data": json.loads(e.data_json),
            }
            for e in got
        ]
        assert len(shown) == len(wanted), (shown, wanted)
        for one, predicted_one in zip(shown, wanted, strict=True):
            data = one["data"]
            assert isinstance(data, dict)
            filled = dict(predicted_one)  # the server's secrets, once checked, filled in
            if one["kind"] == "deal_committed":
                hand, commitment = data["hand"], data["commitment"]
                assert isinstance(commitment, str) and len(commitment) == 64
                self.model.commitments[hand] = commitment
            if one["kind"] == "deal_salt":
                hand, salt = data["hand"], data["salt"]
                assert isinstance(salt, str) and len(salt) == 32
                self.model.salts[hand] = salt
                assert commitment_of(self.model.deals[hand], salt) == self.model.commitments[hand]
            if one["kind"] in ("deal_committed", "deal_salt"):
                secret = "commitment" if one["kind"] == "deal_committed" else "salt"
                predicted_data = predicted_one["data"]
                assert isinstance(predicted_data, dict)
                filled["data"] = {**predicted_data, secret: data[secret]}
            assert one == filled

    def check_view(self, view_json: str, role: int | str) -> None:
        """A view is the engine's view for the role plus the service's own fields."""
        shown = json.loads(view_json)
        assert shown.pop("game_id") == self.game_id
        assert shown.pop("deal_mode") == self.model.deal_mode()
        assert shown.pop("players", None) == self.model.players
        hand = shown.get("hand")
        if isinstance(hand, dict):
            number = hand["number"]
            commitment = hand.pop("commitment")
            if number in self.model.commitments:
                assert commitment == self.model.commitments[number]
            else:  # the game's first deal, made at creation: learned from the first view
                assert isinstance(commitment, str) and len(commitment) == 64
                self.model.commitments[number] = commitment
            if role != "adjudicator":
                for secret in ("hands", "deal", "stock"):
                    assert secret not in hand, f"{role} was shown {secret}"
        if role != "adjudicator":
            # Independently of the engine's view: nothing names a card the role cannot know.
            leaked = card_names(shown) - self.model.known[role]
            assert not leaked, f"{role} was shown {sorted(leaked)}"
        assert shown == self.model.view(role)

    # -- acting ----------------------------------------------------------------------------

    async def act(
        self,
        seat: int,
        action: Mapping[str, object],
        request_id: str | None = None,
    ) -> None:
        """Submit a seat's action at the current version; the answer must be the model's."""
        request_id = uuid.uuid4().hex if request_id is None else request_id
        version = self.current
        refusal = self.model.refusal(seat, action)
        answer = await self.submit(self.token(seat), action, version, request_id)
        if refusal is not None:
            status = (
                grpc.StatusCode.INVALID_ARGUMENT
                if refusal.code == "MALFORMED_ACTION"
                else grpc.StatusCode.FAILED_PRECONDITION
            )
            error = self.refused_with(answer, status, refusal.code)
            assert error.version == version
            event(f"refused {refusal.code}")
            self.audit_refusal("seat", seat, refusal.code, request_id, action)
            return
        self.accepted(seat, action, request_id, version, answer)

    def accepted(
        self,
        seat: int,
        action: Mapping[str, object],
        request_id: str,
        version: int,
        answer: pb.SubmitActionResponse | RefereeError,
    ) -> None:
        """The answer accepts the legal action sent at ``version``: move the model on and
        check the new version, the events and the view against it."""
        assert isinstance(answer, pb.SubmitActionResponse), (
            f"seat {seat} {dict(action)} at {version} refused: {answer}"
        )
        event(f"accepted {action['type']}")
        self.model.known[seat] |= card_names(dict(action))
        canonical = plain_json(encode_action(decode_action(dict(action))))
        predicted = self.model.act(seat, action)
        assert answer.version == version + 1 == self.current
        self.check_events(seat, answer.events, predicted)
        self.check_view(answer.view_json, seat)
        self.model.audit.append(
            Entry("seat", seat, "accepted", "", request_id, self.current, canonical)
        )
        if request_id:
            self.model.accepted.append(Accepted(seat, request_id, dict(action), version, answer))

    def legal_choice(self, rng: random.Random) -> tuple[int, dict[str, object]]:
        """A seat that may act and one of its legal actions, as the test bots choose them
        (seldom a concession; never a two-handed lead of the card about to be drawn, which
        names no card)."""
        seats = self.model.seats_with_actions()
        turn = self.model.state.hand.turn if self.model.state.hand is not None else None
        seat = turn if turn in seats and rng.random() < 0.9 else rng.choice(seats)
        entries = [e for e in self.model.legal(seat) if not e.get("drawn_card")]
        if len(entries) > 1 and rng.random() < 0.95:
            entries = [e for e in entries if e["type"] != "concede"] or entries
        bids = [e for e in entries if e["type"] == "bid"]
        if bids and rng.random() < 0.7:
            entries = [e for e in entries if e["type"] != "bid"] or entries
        return seat, concrete(rng.choice(entries), rng)

    def any_seat(self, rng: random.Random) -> int:
        """Mostly the seat to act (its refusals are the rules' own, not NOT_YOUR_TURN)."""
        hand = self.model.state.hand
        if hand is not None and rng.random() < 0.7:
            return hand.turn
        return rng.randrange(self.ruleset.players)

    def any_action(self, rng: random.Random, seat: int | None = None) -> dict[str, object]:
        """An action of any type, mostly well formed for it, legal or (likelier) not: with
        ``seat``, often made of the cards that seat holds (a card it may not play, a meld
        that scores nothing, a bid too low)."""
        count = max(1, self.ruleset.exchange_count)
        hand = self.model.state.hand
        held = self.deck
        if seat is not None and hand is not None and hand.hands[seat] and rng.random() < 0.7:
            held = [format_card(c) for c in hand.hands[seat]]
        pool: list[dict[str, object]] = [
            {"type": "pass"},
            {"type": "pass", "help": True},
            {"type": "bid", "amount": rng.choice([0, 240, 250, 255, 260, 265, 300, 1000])},
            {"type": "bid_or_redeal"},
            {"type": "declare_trump", "suit": rng.choice("SHDC")},
            {"type": "pass_cards", "cards": rng.sample(held, min(len(held), count))},
            {"type": "discard", "cards": rng.sample(held, min(len(held), rng.choice([2, 3, 4])))},
            {"type": "meld", "cards": rng.sample(held, min(len(held), rng.randint(0, 5)))},
            {"type": "exchange_dix"},
            {"type": "concede"},
            {"type": "draw", "turn_up": rng.random() < 0.5},
            {"type": "play", "card": rng.choice(held)},
            {"type": "play", "card": rng.choice(held)},
        ]
        for one in range(self.ruleset.players):
            pool += [concrete(e, rng) for e in self.model.legal(one) if not e.get("drawn_card")]
        if seat is not None and rng.random() < 0.5:
            # An action of a type the seat may send now, its cards or amount chosen freely.
            kinds = {str(e["type"]) for e in self.model.legal(seat)}
            near = [a for a in pool if a["type"] in kinds and a["type"] != "concede"]
            if near:
                return rng.choice(near)
        return rng.choice(pool)

    # -- rules -----------------------------------------------------------------------------

    @initialize(seed=st.integers(0, 10**9), rng=st.randoms(use_true_random=False))
    def create(self, seed: int, rng: random.Random) -> None:
        """A seeded game, its first dealer any seat, with or without the players' names."""
        self.completed = False
        self.rng = rng
        players = self.ruleset.players
        names = [f"player {n} ♠" for n in range(players)] if rng.random() < 0.5 else None
        # A third of the games from given deals (the server's adjudicator credential), enough
        # of them for any short game: the seeded game's own deals, so the model knows them.
        given = GIVEN_HANDS if rng.random() < 0.3 else 0
        self.model = Model(self.ruleset, f"model-{seed}", rng.randrange(players), names, given)

        async def go() -> None:
            created = await self.client.create_game(
                self.variant,
                self.options,
                seed=None if given else self.model.seed,
                given_deals=self.model.given_deals() if given else None,
                adjudicator_token=ADJUDICATOR_TOKEN if given else None,
                first_dealer=self.model.dealer,
                players=names or (),
            )
            assert created.version == 0
            self.game_id = created.game_id
            self.seat_tokens = list(created.seat_tokens)
            self.spectator_token = created.spectator_token
            self.adjudicator_token = created.adjudicator_token
            token = {"spectator": self.spectator_token, "adjudicator": self.adjudicator_token}
            self.follower_role = follower
            self.follower = asyncio.ensure_future(
                self.follow(token[follower] if isinstance(follower, str) else self.token(follower))
            )

        follower: int | str = rng.choice([*range(players), "spectator", "adjudicator"])
        self.run(go())
        self.completed = True

    @precondition(lambda self: not self.model.state.over)
    @rule(rng=st.randoms(use_true_random=False))
    def legal_action(self, rng: random.Random) -> None:
        """Rule 1: a legal action with a fresh request id (now and then none) is applied."""
        self.completed = False
        seat, action = self.legal_choice(rng)
        self.run(self.act(seat, action, self.request_id_for(seat, rng)))
        self.completed = True

    def request_id_for(self, seat: int, rng: random.Random) -> str | None:
        """A request id the seat never had accepted: a fresh one (None), none at all (""),
        one of its refused requests' (a refusal stores no response), or one another seat
        used (ids are the seat's own: README "Rulings", Service)."""
        mine = {a.request_id for a in self.model.accepted if a.seat == seat}
        refused_ids = sorted(self.model.refused_ids.get(seat, set()) - mine - {""})
        others = sorted({a.request_id for a in self.model.accepted if a.seat != seat} - mine)
        pick = rng.random()
        if pick < 0.1:
            return ""
        if pick < 0.3 and refused_ids:
            return rng.choice(refused_ids)
        if pick < 0.5 and others:
            return rng.choice(others)
        return None

    @precondition(lambda self: not self.model.state.over)
    @rule(rng=st.randoms(use_true_random=False), count=st.integers(1, 60))
    def legal_run(self, rng: random.Random, count: int) -> None:
        """Several legal actions in a row, to get through hands within a run's steps, with
        now and then any action of (mostly) the seat to act between them (rule 5 in every
        phase, the play's MUST_FOLLOW_SUIT and the like included)."""
        self.completed = False
        self.run(self.play_on(rng, count))
        self.completed = True

    async def play_on(self, rng: random.Random, count: int) -> None:
        for _ in range(count):
            if self.model.state.over:
                return
            if rng.random() < 0.25:
                seat = self.any_seat(rng)
                await self.act(seat, self.any_action(rng, seat))
            elif not self.model.state.over:
                await self.act(*self.legal_choice(rng))

    @precondition(lambda self: not self.model.state.over)
    @rule(rng=st.randoms(use_true_random=False), spread=st.booleans())
    def duplicate_in_flight(self, rng: random.Random, spread: bool) -> None:
        """A request sent again while the first is still in flight (a client's retry after a
        lost connection), to the same server or the other replica: applied once, and both
        answered with its response."""
        self.completed = False
        seat, action = self.legal_choice(rng)
        request_id = uuid.uuid4().hex
        version = self.current
        first, second = self.two_clients(spread)

        async def go() -> list[pb.SubmitActionResponse | RefereeError]:
            token = self.token(seat)
            return list(
                await asyncio.gather(
                    self.submit(token, action, version, request_id, first),
                    self.submit(token, action, version, request_id, second),
                )
            )

        one, two = self.run(go())
        self.accepted(seat, action, request_id, version, one)
        assert two == one, f"the same request answered {one} and {two}"
        self.completed = True

    @precondition(lambda self: not self.model.state.over)
    @rule(rng=st.randoms(use_true_random=False), spread=st.booleans())
    def rivals_in_flight(self, rng: random.Random, spread: bool) -> None:
        """One legal action sent twice at once at the same version with two request ids (a
        client that lost track of its first request): exactly one is applied, the other is
        ABORTED STALE_VERSION at the new version (audited after the one applied).

        The same action twice, not two different ones: which of the two wins is the race's,
        and with different actions the model's game, and so what hypothesis draws next,
        would depend on it (hypothesis refuses a test whose draws are not reproducible)."""
        self.completed = False
        seat, action = self.legal_choice(rng)
        version = self.current
        ids = (uuid.uuid4().hex, uuid.uuid4().hex)
        first, second = self.two_clients(spread)

        async def go() -> list[pb.SubmitActionResponse | RefereeError]:
            token = self.token(seat)
            return list(
                await asyncio.gather(
                    self.submit(token, action, version, ids[0], first),
                    self.submit(token, action, version, ids[1], second),
                )
            )

        answers = self.run(go())
        won = [isinstance(a, pb.SubmitActionResponse) for a in answers]
        assert won.count(True) == 1, f"of two requests at one version, {won.count(True)} applied"
        winner = won.index(True)
        self.accepted(seat, action, ids[winner], version, answers[winner])
        loser = 1 - winner
        error = self.refused_with(answers[loser], grpc.StatusCode.ABORTED, "STALE_VERSION")
        assert error.version == self.current
        self.audit_refusal("seat", seat, "ABORTED", ids[loser], action)
        self.completed = True

    def two_clients(self, spread: bool) -> tuple[RefereeClient, RefereeClient]:
        """Two replicas' clients (``spread``, when there are two), or one server's twice."""
        if spread and len(self.replicas) > 1:
            first, second = self.rng.sample(self.replicas, 2)
            return first.client, second.client
        one = self.client
        return one, one

    @rule(rng=st.randoms(use_true_random=False))
    def any_action_any_seat(self, rng: random.Random) -> None:
        """Rule 5 (and 1): any action by any seat; refused exactly when the engine refuses it,
        with the engine's code, nothing changed."""
        self.completed = False
        seat = self.any_seat(rng)
        self.run(self.act(seat, self.any_action(rng, seat)))
        self.completed = True

    @precondition(lambda self: bool(self.model.accepted))
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        """Rule 2: a retry (same seat, id, action and version) gets the stored response and
        is applied once; it is no new audit entry."""
        self.completed = False
        first = data.draw(st.sampled_from(self.model.accepted))
        answer = self.run(
            self.submit(
                self.token(first.seat), first.action, first.expected_version, first.request_id
            )
        )
        assert isinstance(answer, pb.SubmitActionResponse), f"retry refused: {answer}"
        assert answer == first.response
        self.completed = True

    @precondition(lambda self: bool(self.model.accepted))
    @rule(data=st.data(), rng=st.randoms(use_true_random=False))
    def reuse_request_id(self, data: st.DataObject, rng: random.Random) -> None:
        """Rule 3: a used request id with another action or another version is
        REQUEST_ID_REUSED, nothing changed; at the current version, an action the rules refuse
        gets the rule's code instead (README "Errors")."""
        self.completed = False
        first = data.draw(st.sampled_from(self.model.accepted))
        seat = first.seat
        version = data.draw(
            st.sampled_from(sorted({first.expected_version, self.current, self.current + 1, 0}))
        )
        action = self.any_action(rng) if rng.random() < 0.7 else first.action
        if version == first.expected_version and plain_json(
            encode_action(decode_action(dict(action)))
        ) == plain_json(encode_action(decode_action(dict(first.action)))):
            action = (
                {"type": "concede"} if first.action.get("type") != "concede" else {"type": "pass"}
            )
        refusal = self.model.refusal(seat, action) if version == self.current else None
        answer = self.run(self.submit(self.token(seat), action, version, first.request_id))
        if refusal is not None:
            status = (
                grpc.StatusCode.INVALID_ARGUMENT
                if refusal.code == "MALFORMED_ACTION"
                else grpc.StatusCode.FAILED_PRECONDITION
            )
            self.refused_with(answer, status, refusal.code)
            self.audit_refusal("seat", seat, refusal.code, first.request_id, action)
        else:
            error = self.refused_with(answer, grpc.StatusCode.ALREADY_EXISTS, "REQUEST_ID_REUSED")
            assert error.fields == ["request_id"]
            assert error.version == self.current
            self.audit_refusal("seat", seat, "REQUEST_ID_REUSED", first.request_id, action)
        self.completed = True

    @rule(rng=st.randoms(use_true_random=False), ahead=st.booleans())
    def stale_version(self, rng: random.Random, ahead: bool) -> None:
        """Rule 4: an expected_version other than the current one is ABORTED STALE_VERSION
        (the current version in the metadata), whatever the action, nothing changed."""
        self.completed = False
        if not ahead and self.current == 0:
            ahead = True
        version = self.current + rng.randint(1, 3) if ahead else rng.randrange(self.current)
        seat = rng.randrange(self.ruleset.players)
        if not self.model.state.over and rng.random() < 0.6:
            seat, action = self.legal_choice(rng)
        else:
            action = self.any_action(rng)
        request_id = "" if rng.random() < 0.2 else uuid.uuid4().hex
        answer = self.run(self.submit(self.token(seat), action, version, request_id))
        error = self.refused_with(answer, grpc.StatusCode.ABORTED, "STALE_VERSION")
        assert error.version == self.current
        self.audit_refusal("seat", seat, "ABORTED", request_id, action)
        self.completed = True

    @rule(
        who=st.sampled_from(["none", "wrong", "spectator", "adjudicator", "server"]),
        rng=st.randoms(use_true_random=False),
        times=st.integers(1, 3),
    )
    def not_a_seat(self, who: str, rng: random.Random, times: int) -> None:
        """Rule 6: only a seat acts. No token or a token of no caller in the game is
        UNAUTHENTICATED; the spectator and the adjudicators are PERMISSION_DENIED. Audited,
        nothing changed; past the server's refusal budget, a caller without a seat (not the
        adjudicator) is RESOURCE_EXHAUSTED TOO_MANY_REFUSALS instead, unaudited."""
        self.completed = False
        token = {
            "none": None,
            "wrong": "not-a-token-of-this-game",
            "spectator": self.spectator_token,
            "adjudicator": self.adjudicator_token,
            "server": ADJUDICATOR_TOKEN,
        }[who]
        for _ in range(times):
            self.stranger(who, token, rng)
        self.completed = True

    def stranger(self, who: str, token: str | None, rng: random.Random) -> None:
        """One request to act by a caller who is no seat, to a server chosen here (each
        keeps its own budget)."""
        if not self.model.state.over and rng.random() < 0.7:
            _, action = self.legal_choice(rng)
        else:
            action = self.any_action(rng)
        request_id = uuid.uuid4().hex
        index = rng.randrange(len(self.replicas))
        client = self.replicas[index].client
        answer = self.run(self.submit(token, action, self.current, request_id, client))
        status = (
            grpc.StatusCode.UNAUTHENTICATED
            if who in ("none", "wrong")
            else grpc.StatusCode.PERMISSION_DENIED
        )
        if who in ("none", "wrong", "spectator"):  # no seat, no adjudicator: from the budget
            if self.budgets[index] == 0:
                error = self.refused_with(
                    answer, grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_REFUSALS"
                )
                assert error.metadata.get("refused") == status.name
                assert error.retry_delay is not None and error.retry_delay > 0
                return  # not audited
            self.budgets[index] -= 1
        self.refused_with(answer, status, status.name)
        role = {"spectator": "spectator", "adjudicator": "adjudicator", "server": "adjudicator"}
        self.audit_refusal(role.get(who, "anonymous"), None, status.name, request_id, action)

    @rule(
        kind=st.sampled_from(["no action", "long id", "NUL in id", "longest id"]),
        rng=st.randoms(use_true_random=False),
    )
    def malformed_request(self, kind: str, rng: random.Random) -> None:
        """A seat's request the service refuses before the rules look at it: no action
        (MALFORMED_ACTION, field ``action``), a request id over 128 characters or holding NUL
        (INVALID_ARGUMENT, field ``request_id``). Audited, with as much of the id as may be
        stored; nothing changed. An id of exactly 128 characters is fine."""
        self.completed = False
        seat = self.any_seat(rng)
        action = {} if kind == "no action" else self.any_action(rng, seat)
        request_id = {
            "no action": uuid.uuid4().hex,
            "long id": "r" * 129,
            "NUL in id": "a\x00" + uuid.uuid4().hex,
            "longest id": uuid.uuid4().hex.ljust(128, "x"),
        }[kind]
        if kind == "longest id":  # fresh (uuid4): a request like any other
            self.run(self.act(seat, action, request_id))
            self.completed = True
            return
        answer = self.run(self.submit(self.token(seat), action, self.current, request_id))
        reason = "MALFORMED_ACTION" if kind == "no action" else "INVALID_ARGUMENT"
        error = self.refused_with(answer, grpc.StatusCode.INVALID_ARGUMENT, reason)
        assert error.fields == ["action" if kind == "no action" else "request_id"]
        stored_id = request_id[:128].replace("\x00", "?")
        self.model.known[seat] |= card_names(action)
        self.model.audit.append(
            Entry(
                "seat",
                seat,
                "refused",
                reason,
                stored_id,
                self.current,
                plain_json(action_to_json(action_from_json(action))) if action else None,
            )
        )
        self.completed = True

    @rule(which=st.integers(0, 1))
    def restart(self, which: int) -> None:
        """Rule 8: a server stopped and started again on the same database rebuilds the game
        (the invariant checks it: same version, views, legal actions, audit log)."""
        self.completed = False
        index = which % len(self.replicas)

        async def go() -> None:
            old = self.replicas[index]
            await stop_replica(old)
            self.replicas[index] = await start_replica(old.settings)
            self.budgets[index] = REFUSAL_BURST  # a restart starts the budgets afresh

        self.run(go())
        self.completed = True

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def server_agrees_with_model(self) -> None:
        """Rules 7 and 9, after every step."""
        if not hasattr(self, "model"):
            return
        self.completed = False
        self.run(self.check_everything())
        self.completed = True

    async def check_everything(self) -> None:
        model = self.model
        referee = self.client.referee
        roles: list[tuple[int | str, str]] = [
            *((seat, token) for seat, token in enumerate(self.seat_tokens)),
            ("spectator", self.spectator_token),
            ("adjudicator", ADJUDICATOR_TOKEN),  # the server's credential reaches every game
            ("adjudicator", self.adjudicator_token),
        ]
        for role, token in roles:
            got = await referee.GetGame(
                pb.GetGameRequest(game_id=self.game_id), metadata=bearer(token)
            )
            assert got.version == model.state.version
            assert (got.role, got.seat) == (
                _ROLE["seat" if isinstance(role, int) else role],
                role if isinstance(role, int) else 0,
            )
            self.check_view(got.view_json, role)
            request = pb.ListLegalActionsRequest(game_id=self.game_id)
            if isinstance(role, int):
                legal = await self.client.referee.ListLegalActions(request, metadata=bearer(token))
                assert legal.version == model.state.version
                assert [struct_to_dict(s) for s in legal.actions] == model.legal(role)
            else:
                error = await refused(
                    self.client.referee.ListLegalActions(request, metadata=bearer(token))
                )
                assert error.code == grpc.StatusCode.PERMISSION_DENIED
        for stranger in (None, "not-a-token-of-this-game"):
            error = await refused(
                referee.GetGame(pb.GetGameRequest(game_id=self.game_id), metadata=bearer(stranger))
            )
            assert error.code == grpc.StatusCode.UNAUTHENTICATED
        # The audit log: exactly the model's entries, whole for the adjudicator, and as one
        # other role (a seat, or the spectator) may see them.
        other: int | str = self.rng.choice([*range(self.ruleset.players), "spectator"])
        for role in ("adjudicator", other):
            token = dict((r, t) for r, t in roles)[role]
            entries = await self.audit_entries(token)
            assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
            assert [self.shown_entry(e, role) for e in entries] == [
                self.expected_entry(e, role) for e in model.audit
            ]
            if role != "adjudicator":
                assert all(not (e.hash or e.previous_hash or e.hashed_content) for e in entries)
                for entry in entries:
                    leaked = card_names(struct_to_dict(entry.action)) - model.known[role]
                    assert not leaked, f"{role} was shown {sorted(leaked)} in {entry}"
        if not model.state.over:
            error = await refused(
                self.client.referee.ExportGame(
                    pb.ExportGameRequest(game_id=self.game_id),
                    metadata=bearer(self.rng.choice([*self.seat_tokens, self.spectator_token])),
                )
            )
            assert error.code == grpc.StatusCode.PERMISSION_DENIED
        verified = await self.client.referee.VerifyAuditLog(
            pb.VerifyAuditLogRequest(game_id=self.game_id),
            metadata=bearer(self.seat_tokens[0]),
        )
        assert verified.intact, verified.detail
        assert verified.entries == len(model.audit)

    async def audit_entries(self, token: str) -> list[pb.AuditEntry]:
        """The whole audit log as ``token``'s caller reads it, page after page."""
        entries: list[pb.AuditEntry] = []
        while True:
            page = await self.client.referee.GetAuditLog(
                pb.GetAuditLogRequest(
                    game_id=self.game_id,
                    after_seq=entries[-1].seq if entries else 0,
                    page_size=self.rng.choice([0, 3, 50]),
                ),
                metadata=bearer(token),
            )
            if not page.entries:
                return entries
            entries.extend(page.entries)

    @staticmethod
    def shown_entry(entry: pb.AuditEntry, role: int | str) -> tuple[object, ...]:
        action = struct_to_dict(entry.action) if entry.HasField("action") else None
        return (
            entry.role,
            entry.seat,
            entry.outcome,
            entry.code,
            entry.request_id,
            entry.version,
            action,
        )

    @staticmethod
    def expected_entry(entry: Entry, role: int | str) -> tuple[object, ...]:
        """README "The audit log": the adjudicator sees an entry whole; a seat its own
        requests whole and everyone else's public part, the code left out; the spectator the
        public part of every entry."""
        whole = role == "adjudicator" or (entry.role == "seat" and entry.seat == role)
        return (
            _ROLE[entry.role],
            entry.seat or 0,
            pb.AUDIT_OUTCOME_ACCEPTED if entry.outcome == "accepted" else pb.AUDIT_OUTCOME_REFUSED,
            entry.code if whole else "",
            entry.request_id,
            entry.version,
            dict(entry.action) if whole and entry.action is not None else entry.public(),
        )

    # -- the end ---------------------------------------------------------------------------

    async def follow(self, token: str) -> None:
        """Follow the game with WatchGame until it ends, as a client would: on a stream that
        ends early (a server stopped: UNAVAILABLE SHUTTING_DOWN with ``after_seq``; the
        client closed under it), watch again after the last event received, on the first
        server (the one now there). Runs beside the steps, on the machine's loop; draws
        nothing from hypothesis."""
        after_seq = 0
        while True:
            client = self.replicas[0].client
            request = pb.WatchGameRequest(game_id=self.game_id, after_seq=after_seq)
            try:
                async for item in client.referee.WatchGame(request, metadata=bearer(token)):
                    if item.HasField("snapshot"):
                        self.snapshots += 1
                        continue
                    got = item.event
                    self.followed.append(
                        {
                            "seq": got.seq,
                            "version": got.version,
                            "kind": got.kind,
                            "audience": got.audience,
                            "data": json.loads(got.data_json),
                        }
                    )
                    after_seq = got.seq
                return  # the game is over: every event sent
            except grpc.aio.AioRpcError as error:
                ended = RefereeError(error)
                assert ended.code in (
                    grpc.StatusCode.UNAVAILABLE,
                    grpc.StatusCode.CANCELLED,
                ), f"the watch ended {ended}"
                after_seq = max(after_seq, int(ended.metadata.get("after_seq", "0")))
            except grpc.aio.UsageError:
                pass  # its channel is closed: the server is being replaced (a restart)
            except asyncio.CancelledError:
                # The call's client was closed under it (a restart closes the old server's
                # client first): grpc.aio raises CancelledError for a call cancelled locally.
                # Only when this task itself is being cancelled does it stop.
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
            await asyncio.sleep(0.02)

    async def check_follower(self) -> None:
        """The stream that followed the game sent each event its role may see once, in
        order, with nothing else (all of them unless it fell behind the watch window and got
        a snapshot instead of some)."""
        assert self.follower is not None
        await asyncio.wait_for(self.follower, STEP_TIMEOUT)
        role = self.follower_role
        visible = [
            self.model.filled(e)
            for e in self.model.logged
            if visible_to(Event(str(e["kind"]), _audience(e["audience"]), {}), role)
        ]
        if self.snapshots == 0:
            assert self.followed == visible, role
        else:
            seqs = [_int(e["seq"]) for e in self.followed]
            assert seqs == sorted(set(seqs)), role
            by_seq = {_int(e["seq"]): e for e in visible}
            assert all(by_seq.get(_int(e["seq"])) == e for e in self.followed), role
        event(f"followed with {self.snapshots} snapshots")

    async def play_out_and_export(self) -> None:
        """Play the game to its end with checked legal actions, then export it: the record is
        the model's, audits as legal and finished, and each hand's deal opens its commitment."""
        await self.play_on(random.Random(self.model.seed), MAX_ACTIONS)
        state = self.model.state
        assert state.over, (
            f"no end in {MAX_ACTIONS} actions: {state.hands_completed} hands, scores {state.scores}"
        )
        event(f"hands in a game: {self.model.state.hands_completed}")
        await self.check_everything()
        # Over: a seat may export now, as the adjudicator may.
        for token in (self.seat_tokens[0], self.adjudicator_token):
            exported = await self.client.referee.ExportGame(
                pb.ExportGameRequest(game_id=self.game_id), metadata=bearer(token)
            )
            record = struct_to_dict(exported.record)
            hands = record["hands"]
            assert isinstance(hands, list)
            for number, hand in enumerate(hands):
                salt = hand.pop("x-deal-salt")
                assert hand.pop("x-deal-commitment") == self.model.commitments[number]
                assert commitment_of(hand["deal"], salt) == self.model.commitments[number]
            assert record == self.model.record()
            verdict = audit_record(record)
            assert verdict.get("legal") is True and verdict.get("finished") is True, verdict
        await self.check_watches(random.Random(self.model.seed))
        await self.check_follower()

    async def check_watches(self, rng: random.Random) -> None:
        """WatchGame of the finished game, for every role, from its start, from a version or
        after an event: exactly the events the role may see, in order, after a snapshot of
        its view when some of the events asked for are older than the watch window (then the
        game's end leaves nothing after it)."""
        model = self.model
        logged = [model.filled(e) for e in model.logged]
        window = self.replicas[0].settings.watch_window
        roles: list[tuple[int | str, str]] = [
            *enumerate(self.seat_tokens),
            ("spectator", self.spectator_token),
            ("adjudicator", self.adjudicator_token),
        ]
        for role, token in roles:
            how = rng.choice(["start", "version", "seq"])
            from_version = rng.randint(0, self.current) if how == "version" else 0
            after_seq = rng.randint(1, len(logged)) if how == "seq" else 0
            if from_version > 0:
                wanted = [e for e in logged if _int(e["version"]) > from_version]
            else:
                wanted = logged[after_seq:]
            visible = [
                e
                for e in wanted
                if visible_to(Event(str(e["kind"]), _audience(e["audience"]), {}), role)
            ]
            items = [
                item
                async for item in self.client.referee.WatchGame(
                    pb.WatchGameRequest(
                        game_id=self.game_id, from_version=from_version, after_seq=after_seq
                    ),
                    metadata=bearer(token),
                )
            ]
            older = bool(wanted) and _int(wanted[0]["seq"]) < len(logged) - window + 1
            event(f"watch {how} {'snapshot' if older else 'events'}")
            if older:
                assert len(items) == 1 and items[0].HasField("snapshot"), (role, how, items)
                assert items[0].snapshot.version == self.current
                self.check_view(items[0].snapshot.view_json, role)
                continue
            shown = [
                {
                    "seq": i.event.seq,
                    "version": i.event.version,
                    "kind": i.event.kind,
                    "audience": i.event.audience,
                    "data": json.loads(i.event.data_json),
                }
                for i in items
            ]
            assert all(i.HasField("event") for i in items), (role, how)
            assert shown == visible, (role, how, from_version, after_seq)


def _int(value: object) -> int:
    assert isinstance(value, int)
    return value


def _audience(value: object) -> str | int:
    text = str(value)
    return int(text) if text.isdigit() else text


BACKENDS = ("sqlite", "postgres")


def machine_for(variant: str, backend: str) -> type[ServiceMachine]:
    return type(
        f"ServiceMachine_{variant.replace('-', '_')}_{backend}",
        (ServiceMachine,),
        {"variant": variant, "backend": backend},
    )


@pytest.mark.parametrize(
    ("variant", "backend"),
    [
        pytest.param(v, b, marks=postgres_marks() if b == "postgres" else [])
        for b in BACKENDS
        for v in (VARIANTS if b == "sqlite" else ("partnership", "two-handed"))
    ],
)
def test_service_agrees_with_its_model(variant: str, backend: str) -> None:
    run_state_machine_as_test(machine_for(variant, backend), settings=RUNS[backend])
