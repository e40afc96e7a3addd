"""Seat security through the real gRPC API (issue 4, "Security" and "Tests").

* the authorization matrix: every kind of caller against every RPC of a game;
* a property over random games of every variant, played through the API: no view, event, stream
  message, error message or audit entry that a seat (or a spectator) receives shows a card that
  another seat holds concealed, nor a deal's salt before the reveal, nor the game's seed;
* idempotent retries, the stale-version race, and TLS / mutual TLS by settings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
import trustme
from grpc_health.v1 import health_pb2
from pinochle_client import RefereeClient, RefereeError, Session

from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee import cli
from referee.service import auth
from referee.service.observability import configure_logging
from referee.service.server import StartError, start_server
from referee.service.settings import KEEP_RESPONSES, Settings, add_arguments, settings_from
from referee.store.base import AuditRow
from tests.service_helpers import (
    ADJUDICATOR_TOKEN,
    SHORT_GAME,
    VARIANTS,
    Served,
    Table,
    actor,
    bearer,
    health_stub,
    new_table,
    pick,
    plain,
    raw_action,
    refused,
    serving,
    stream_refused,
    text_of,
    write_pems,
)

Role = int | str  # a seat number or "spectator"
SPECTATOR = "spectator"


@pytest_asyncio.fixture
async def srv(tmp_path: Path) -> AsyncIterator[Served]:
    # The matrices send one game more refusals from callers without a seat than the default
    # budget audits; the budget has its own tests (test_refusal_limits.py).
    async with serving(tmp_path, refusal_burst=100_000) as served:
        yield served


# ----------------------------------------------------------------------------------------------
# The authorization matrix


async def _turn(table: Table) -> int:
    view = await table.adj.view()
    turn = view["hand"]["turn"]
    assert isinstance(turn, int)
    return turn


async def test_each_seat_acts_for_itself_and_only_on_its_turn(srv: Served) -> None:
    """Walk the auction of a partnership game: at every turn, the seat to act is accepted and
    every other seat is NOT_YOUR_TURN; the accepted call is attributed to the token's seat (the
    request has no seat field)."""
    table = await new_table(srv.client, "partnership", seed="matrix")
    acted: list[int] = []
    calls: list[dict[str, Any]] = [
        {"type": "bid", "amount": 250},
        {"type": "pass"},
        {"type": "pass"},
        {"type": "pass"},
    ]
    for call in calls:
        turn = await _turn(table)
        version = (await table.adj.view())["version"]
        for seat, session in enumerate(table.seats):
            if seat == turn:
                continue
            error = await refused(session.submit({"type": "pass"}, expected_version=version))
            assert error.code == grpc.StatusCode.FAILED_PRECONDITION
            assert error.reason == "NOT_YOUR_TURN"
            assert error.version == version
        result = await table.seats[turn].submit(call, expected_version=version)
        assert result["version"] == version + 1
        made = [e for e in result["events"] if e["kind"] == "call"]
        assert made == [
            {
                "seq": made[0]["seq"],
                "version": version + 1,
                "kind": "call",
                "audience": "everyone",
                "seat": turn,
            }
            | call
        ]
        acted.append(turn)
    view = await table.adj.view()
    assert [c["seat"] for c in view["hand"]["auction"]] == acted == [1, 2, 3, 0]
    assert view["hand"]["declarer"] == 1
    log = await table.adj.audit_log()
    accepted = [e for e in log if e["outcome"] == "AUDIT_OUTCOME_ACCEPTED"]
    assert [e.get("seat", 0) for e in accepted] == acted
    assert all(e["role"] == "ROLE_SEAT" for e in accepted)
    refusals = [e for e in log if e["outcome"] == "AUDIT_OUTCOME_REFUSED"]
    assert {e["code"] for e in refusals} == {"NOT_YOUR_TURN"}
    assert len(refusals) == 3 * len(acted)


@dataclass(frozen=True)
class Caller:
    name: str
    token: str | None
    role: str  # expected role for a game's reads: seat, spectator, adjudicator, or "" (refused)
    code: grpc.StatusCode | None = None  # expected refusal of reads


async def _callers(srv: Served, table: Table) -> list[Caller]:
    other = await new_table(srv.client, "partnership", seed="other")
    seats = [Caller(f"seat{i}", t, "seat") for i, t in enumerate(table.seat_tokens)]
    unauth = grpc.StatusCode.UNAUTHENTICATED
    return [
        *seats,
        Caller("spectator", table.spectator_token, "spectator"),
        Caller("game adjudicator", table.adjudicator_token, "adjudicator"),
        Caller("server adjudicator", ADJUDICATOR_TOKEN, "adjudicator"),
        Caller("no token", None, "", unauth),
        Caller("wrong token", "not-a-token", "", unauth),
        Caller("empty bearer", "", "", unauth),
        Caller("another game's seat", other.seat_tokens[1], "", unauth),
        Caller("another game's adjudicator", other.adjudicator_token, "", unauth),
        Caller("another game's spectator", other.spectator_token, "", unauth),
    ]


async def test_authorization_matrix(srv: Served) -> None:
    """Every caller against every RPC of one game, at a state where seat 1 must act."""
    table = await new_table(srv.client, "partnership", seed="matrix")
    assert await _turn(table) == 1
    game_id = table.game_id
    stub = srv.referee
    callers = await _callers(srv, table)
    # Reads.
    for caller in callers:
        md = bearer(caller.token)
        where = caller.name
        get = pb.GetGameRequest(game_id=game_id)
        legal = pb.ListLegalActionsRequest(game_id=game_id)
        audit = pb.GetAuditLogRequest(game_id=game_id)
        verify = pb.VerifyAuditLogRequest(game_id=game_id)
        export = pb.ExportGameRequest(game_id=game_id)
        watch = pb.WatchGameRequest(game_id=game_id, from_version=0)
        if caller.code is not None:
            for call in (
                stub.GetGame(get, metadata=md),
                stub.ListLegalActions(legal, metadata=md),
                stub.GetAuditLog(audit, metadata=md),
                stub.VerifyAuditLog(verify, metadata=md),
                stub.ExportGame(export, metadata=md),
            ):
                assert (await refused(call)).code == caller.code, where
            error = await stream_refused(stub.WatchGame(watch, metadata=md))
            assert error.code == caller.code, where
            continue
        got = await stub.GetGame(get, metadata=md)
        assert (
            got.role
            == {
                "seat": pb.ROLE_SEAT,
                "spectator": pb.ROLE_SPECTATOR,
                "adjudicator": pb.ROLE_ADJUDICATOR,
            }[caller.role]
        ), where
        view = json.loads(got.view_json)
        hand = view["hand"]
        if caller.role == "seat":
            seat = int(where.removeprefix("seat"))
            assert got.seat == seat and view["role"] == seat
            assert "cards" in hand and "hands" not in hand and "deal" not in hand
            legal_actions = await stub.ListLegalActions(legal, metadata=md)
            assert bool(legal_actions.actions) == (seat == 1), where
        else:
            assert "cards" not in hand, where
            assert ("hands" in hand) == (caller.role == "adjudicator"), where
            assert ("deal" in hand) == (caller.role == "adjudicator"), where
            error = await refused(stub.ListLegalActions(legal, metadata=md))
            assert error.code == grpc.StatusCode.PERMISSION_DENIED, where
        await stub.GetAuditLog(audit, metadata=md)
        assert (await stub.VerifyAuditLog(verify, metadata=md)).intact
        if caller.role == "adjudicator":
            record = plain((await stub.ExportGame(export, metadata=md)).record)
            assert record["format"] == "pinochle-record/1"
        else:
            error = await refused(stub.ExportGame(export, metadata=md))
            assert error.code == grpc.StatusCode.PERMISSION_DENIED, where
        first = await anext(aiter(stub.WatchGame(watch, metadata=md)))
        assert first.event.kind == "hand_started", where

    # SubmitAction: only seat 1 (whose turn it is) may act, for itself; it goes last.
    callers.sort(key=lambda c: c.name == "seat1")
    for caller in callers:
        md = bearer(caller.token)
        where = caller.name
        version = (await table.adj.view())["version"]
        request = pb.SubmitActionRequest(
            game_id=game_id,
            action=raw_action({"type": "pass"}),
            expected_version=version,
            request_id=f"matrix-{where}",
        )
        if caller.name == "seat1":
            response = await stub.SubmitAction(request, metadata=md)
            assert response.version == version + 1
            auction = json.loads(response.view_json)["hand"]["auction"]
            assert auction == [{"seat": 1, "type": "pass"}]
            continue
        error = await refused(stub.SubmitAction(request, metadata=md))
        if caller.role == "seat":
            assert (error.code, error.reason) == (
                grpc.StatusCode.FAILED_PRECONDITION,
                "NOT_YOUR_TURN",
            ), where
        elif caller.role:
            assert error.code == grpc.StatusCode.PERMISSION_DENIED, where
        else:
            assert error.code == grpc.StatusCode.UNAUTHENTICATED, where
        assert (await table.adj.view())["version"] == version, where


# One action of every A.4 type, well-formed for a partnership game (RULES.md A.4: the two-handed
# meld form with a name is malformed here, and MALFORMED_ACTION comes before NOT_YOUR_TURN).
EVERY_ACTION_TYPE: tuple[dict[str, Any], ...] = (
    {"type": "bid", "amount": 250},
    {"type": "pass"},
    {"type": "pass", "help": True},
    {"type": "bid_or_redeal"},
    {"type": "declare_trump", "suit": "H"},
    {"type": "pass_cards", "cards": ["AS", "AH", "AD", "AC"]},
    {"type": "discard", "cards": ["AS", "AH", "AD", "AC"]},
    {"type": "meld", "cards": ["AS", "KS", "QS", "JS", "10S"]},
    {"type": "exchange_dix"},
    {"type": "concede"},
    {"type": "draw", "turn_up": True},
    {"type": "play", "card": "AS"},
)
LEGAL_FOR_SEAT1_NOW = (
    {"type": "bid", "amount": 250},
    {"type": "pass"},
    {"type": "pass", "help": True},
)


async def test_every_action_type_against_every_caller(srv: Served) -> None:
    """The matrix for every action type: only the seat to act may act, and only with a legal
    action; every other seat is NOT_YOUR_TURN whatever the action (a concession, not bound to
    turn order, is WRONG_PHASE before meld); a spectator or adjudicator
    is PERMISSION_DENIED and a missing or foreign token UNAUTHENTICATED. Nothing changes, and
    every attempt is one refused audit entry."""
    table = await new_table(srv.client, "partnership", seed="matrix")
    assert await _turn(table) == 1
    callers = await _callers(srv, table)
    attempts = 0
    for caller in callers:
        md = bearer(caller.token)
        for action in EVERY_ACTION_TYPE:
            if caller.name == "seat1" and action in LEGAL_FOR_SEAT1_NOW:
                continue
            where = f"{caller.name} {action}"
            request = pb.SubmitActionRequest(
                game_id=table.game_id, action=raw_action(action), expected_version=0
            )
            error = await refused(srv.referee.SubmitAction(request, metadata=md))
            attempts += 1
            if caller.name == "seat1":
                assert error.code == grpc.StatusCode.FAILED_PRECONDITION, where
                assert error.reason not in ("NOT_YOUR_TURN", ""), where
            elif caller.role == "seat":
                # A.7 item 4: a concession is not bound to turn order; before meld it is
                # WRONG_PHASE for everyone.
                expected = "WRONG_PHASE" if action["type"] == "concede" else "NOT_YOUR_TURN"
                assert (error.code, error.reason) == (
                    grpc.StatusCode.FAILED_PRECONDITION,
                    expected,
                ), where
            elif caller.role:
                assert error.code == grpc.StatusCode.PERMISSION_DENIED, where
                # Was "a adjudicator cannot act".
                assert error.message.startswith(f"the {caller.role} cannot act"), where
            else:
                assert error.code == grpc.StatusCode.UNAUTHENTICATED, where
    view = await table.adj.view()
    assert view["version"] == 0 and view["hand"]["auction"] == []
    log = await table.adj.audit_log()
    assert len(log) == attempts
    assert all(entry["outcome"] == "AUDIT_OUTCOME_REFUSED" for entry in log)


async def test_a_game_token_is_worthless_in_another_game_and_creation(srv: Served) -> None:
    table = await new_table(srv.client, "partnership", seed="a")
    other = await new_table(srv.client, "partnership", seed="a")
    # Same seed, same deal: seat 1 of game A cannot act in game B with its token.
    request = pb.SubmitActionRequest(
        game_id=other.game_id, action=raw_action({"type": "pass"}), expected_version=0
    )
    error = await refused(srv.referee.SubmitAction(request, metadata=bearer(table.seat_tokens[1])))
    assert error.code == grpc.StatusCode.UNAUTHENTICATED
    # A game's own adjudicator token is not the server's credential (given deals need that).
    deal = (await table.adj.view())["hand"]["deal"]
    error = await refused(
        srv.client.create_game(
            "partnership", given_deals=[deal], adjudicator_token=table.adjudicator_token
        )
    )
    assert error.code == grpc.StatusCode.PERMISSION_DENIED


async def test_malformed_authorization_header_is_unauthenticated(srv: Served) -> None:
    table = await new_table(srv.client, "partnership", seed="hdr")
    get = pb.GetGameRequest(game_id=table.game_id)
    # Issue 4: tokens travel as "authorization: Bearer <token>"; a valid token under another
    # scheme is refused too, not only a garbage one.
    for value in (
        "Basic abc",
        f"Basic {table.seat_tokens[0]}",
        f"Token {table.seat_tokens[0]}",
        "Bearer",
        "bearer  ",
        table.seat_tokens[0],
    ):
        md = (("authorization", value),)
        error = await refused(srv.referee.GetGame(get, metadata=md))
        assert error.code == grpc.StatusCode.UNAUTHENTICATED, value
    # The scheme is case-insensitive.
    got = await srv.referee.GetGame(
        get, metadata=(("authorization", f"bearer {table.seat_tokens[2]}"),)
    )
    assert got.seat == 2


# ----------------------------------------------------------------------------------------------
# The concealed-card property

CARD = re.compile(r"(?<![A-Za-z0-9])(?:10|[AKQJ9])[SHDC](?![A-Za-z0-9])")
SEED_TEXT = "property-seed-7f3a9c"


def cards_in(data: object) -> set[str]:
    text = data if isinstance(data, str) else text_of(data)
    return set(CARD.findall(text))


def _public_cards(hand: Mapping[str, Any]) -> set[str]:
    """Cards every role may see now (A.10 item 3), read from the adjudicator's view."""
    out: set[str] = set()
    for trick in hand["tricks"]:
        out |= set(trick["cards"])
    out |= set(hand["trick"]["cards"])
    for meld in hand["melds"]:
        if meld:
            out |= set(meld["cards"])
            for part in meld["melds"]:
                out |= set(part["cards"])
    if hand.get("widow"):
        out |= set(hand["widow"])
    if hand.get("turn_up"):
        out.add(hand["turn_up"])
    for side in hand.get("table", []):
        out |= set(side)
    for side in hand.get("pending", []):
        for pending in side:
            out |= set(pending["cards"])
    for meld in hand.get("scored_melds", []):
        out |= set(meld["cards"])
    return out


@dataclass
class Knowledge:
    """What each role may know during the current hand, and so what is secret from it.

    A card (as text: copies are not distinguished) is secret from a seat when another seat holds
    it concealed, or it lies undealt (stock, kitty, widow) or discarded, and the seat has not
    held it itself nor seen it in public during this hand.
    """

    players: int
    hand_number: int | None = None
    public: set[str] = field(default_factory=set)
    held: list[set[str]] = field(default_factory=list)

    def secrets(self, adjudicator_view: Mapping[str, Any]) -> dict[Role, frozenset[str]]:
        hand = adjudicator_view["hand"]
        roles: list[Role] = [*range(self.players), SPECTATOR]
        if hand is None:
            return {role: frozenset() for role in roles}
        if hand["number"] != self.hand_number:
            self.hand_number = hand["number"]
            self.public = set()
            self.held = [set() for _ in range(self.players)]
        self.public |= _public_cards(hand)
        hands = [set(h) for h in hand["hands"]]
        for seat in range(self.players):
            self.held[seat] |= hands[seat] | set(hand["received"][seat])
        hidden_piles = set(hand.get("stock") or []) | set(hand["deal"]["widow"])
        hidden_piles |= set(hand["deal"]["stock"]) | set(hand["discards"])
        out: dict[Role, frozenset[str]] = {}
        for seat in range(self.players):
            pool = set().union(*(h for o, h in enumerate(hands) if o != seat)) | hidden_piles
            out[seat] = frozenset(pool - self.held[seat] - self.public)
        out[SPECTATOR] = frozenset((set().union(*hands) | hidden_piles) - self.public)
        return out


@dataclass
class Moment:
    """One accepted action: secrets before and after it, the cards it named, whether it ended
    a hand."""

    before: dict[Role, frozenset[str]]
    after: dict[Role, frozenset[str]]
    action_cards: set[str]
    hand_ended: bool


class Leak(AssertionError):
    pass


@dataclass
class Observer:
    """Checks everything one role receives against its secrets at that moment."""

    seen: list[tuple[int, Role, str]] = field(default_factory=list)  # (version, role, text)
    checked: int = 0

    def check(
        self, role: Role, version: int, data: object, secret: frozenset[str], what: str
    ) -> None:
        text = data if isinstance(data, str) else text_of(data)
        leaked = cards_in(text) & secret
        if leaked:
            shown = f"{role!r} concealed {sorted(leaked)}"
            raise Leak(f"{what} at version {version} shows {shown}: {text[:600]}")
        self.seen.append((version, role, text))
        self.checked += 1

    def check_events(
        self,
        role: Role,
        version: int,
        events: Sequence[Mapping[str, Any]],
        moment: Moment,
        what: str,
    ) -> None:
        """Events of one version: those of an ended hand (before the next ``hand_started``)
        against the secrets before the action less its own cards; the rest against the secrets
        after it. ``deal_revealed`` shows the ended hand's whole deal to everyone, by design."""
        old = moment.hand_ended
        for event in events:
            audience = event["audience"]
            assert audience == "everyone" or audience == str(role), (what, event)
            if event["kind"] == "hand_started":
                old = False
            if old:
                if event["kind"] != "deal_revealed":
                    secret = moment.before[role] - moment.action_cards
                    self.check(role, version, event, frozenset(secret), what)
            else:
                self.check(role, version, event, moment.after[role], what)


async def _collect(session: Session) -> list[dict[str, Any]]:
    return [item async for item in session.watch(0)]


def _roles(table: Table) -> dict[Role, Session]:
    sessions: dict[Role, Session] = dict(enumerate(table.seats))
    sessions[SPECTATOR] = table.spec
    return sessions


async def _refusals(
    table: Table,
    rng: random.Random,
    view: Mapping[str, Any],
    turn: int,
    entries: Sequence[Mapping[str, Any]],
    secrets: Mapping[Role, frozenset[str]],
    observer: Observer,
) -> int:
    """Illegal requests by the seat to act and by another seat; their errors are checked."""
    hand = view["hand"]
    version = view["version"]
    attempts: list[tuple[int, dict[str, Any], set[str]]] = []
    others = [s for s in range(len(table.seats)) if s != turn]
    other = rng.choice(others)
    own = hand["hands"][other]
    attempts.append(
        (other, {"type": "play", "card": rng.choice(own)} if own else {"type": "pass"}, set())
    )
    # In a two-handed window the lead may be the card about to be drawn: never that one.
    foreign = sorted(secrets[turn] - set((hand.get("stock") or [])[:1]))
    if foreign:
        card = rng.choice(foreign)
        attempts.append((turn, {"type": "play", "card": card}, {card}))
    legal_cards = {e["card"] for e in entries if e["type"] == "play" and "card" in e}
    held = [c for c in hand["hands"][turn] if c not in legal_cards]
    if legal_cards and held:
        attempts.append((turn, {"type": "play", "card": rng.choice(held)}, set()))
    if hand["phase"] in ("partner_pass", "declarer_pass", "kitty_discard", "bury"):
        attempts.append((turn, {"type": "discard", "cards": foreign[:3]}, set(foreign[:3])))
    for seat, action, named in attempts:
        error = await refused(table.seats[seat].submit(action, expected_version=version))
        assert error.code in (
            grpc.StatusCode.FAILED_PRECONDITION,
            grpc.StatusCode.INVALID_ARGUMENT,
        ), error
        assert error.version == version
        secret = frozenset(secrets[seat] - named)
        shown = [error.message, error.reason, error.metadata, error.fields]
        observer.check(seat, version, shown, secret, f"error {error.reason} for {action}")
    return len(attempts)


CASES = [(variant, seed) for variant in VARIANTS for seed in (SEED_TEXT, None)]


@pytest.mark.parametrize(
    ("variant", "seed"), CASES, ids=[f"{v}-{'seed' if s else 'shuffle'}" for v, s in CASES]
)
async def test_no_seat_ever_sees_another_seats_concealed_cards(
    srv: Served, variant: str, seed: str | None
) -> None:
    rng = random.Random(f"{variant}/{seed}")
    table = await new_table(srv.client, variant, SHORT_GAME[variant], seed=seed)
    players = len(table.seats)
    sessions = _roles(table)
    watchers = {role: asyncio.create_task(_collect(s)) for role, s in sessions.items()}
    knowledge = Knowledge(players)
    observer = Observer()
    adj = await table.adj.view()
    secrets = knowledge.secrets(adj)
    moments: dict[int, Moment] = {0: Moment(secrets, secrets, set(), False)}
    audit_seen: dict[Role, int] = dict.fromkeys(sessions, 0)
    refusals = 0
    for _ in range(2000):
        if adj["over"]:
            break
        version = adj["version"]
        # What every role sees now.
        legal: dict[int, list[dict[str, Any]]] = {}
        for role, session in sessions.items():
            view = await session.view()
            observer.check(role, version, view, secrets[role], "view")
            forbidden = {"hands", "deal", "stock"}
            if role == SPECTATOR:
                forbidden |= {"cards", "received", "kitty", "discards"}
            assert not forbidden & set(view["hand"]), (role, view["hand"])
            if isinstance(role, int):
                legal[role] = await table.seats[role].legal_actions()
                observer.check(role, version, legal[role], secrets[role], "legal actions")
        turn = adj["hand"]["turn"]
        entries = legal[turn] or next(e for e in legal.values() if e)
        if rng.random() < 0.25:
            refusals += await _refusals(table, rng, adj, turn, entries, secrets, observer)
        action = pick(entries, rng)
        result = await table.seats[turn].submit(action, expected_version=version)
        adj = await table.adj.view()
        after = knowledge.secrets(adj)
        ended = any(e["kind"] == "hand_result" for e in result["events"])
        moment = Moment(secrets, after, cards_in(action), ended)
        new_version = result["version"]
        moments[new_version] = moment
        events = [{"audience": e.get("audience", str(turn)), **e} for e in result["events"]]
        observer.check_events(turn, new_version, events, moment, "SubmitAction events")
        observer.check(turn, new_version, result["view"], after[turn], "SubmitAction view")
        # Audit entries written by this step (refusals and the action), as each role sees them.
        for role, session in sessions.items():
            entries_seen = await session.audit_log(after_seq=audit_seen[role])
            if entries_seen:
                audit_seen[role] = entries_seen[-1]["seq"]
            secret = frozenset(moment.before[role] - moment.action_cards)
            # A seat's own requests come back in full: they echo only what that seat sent.
            others = [
                e
                for e in entries_seen
                if not (
                    isinstance(role, int)
                    and e.get("role") == "ROLE_SEAT"
                    and e.get("seat", 0) == role
                )
            ]
            observer.check(role, version, others, secret, "audit entries")
        secrets = after
    assert adj["over"], "the game did not end"
    # Every stream ends at game over, with the events of every version.
    streamed: dict[Role, list[dict[str, Any]]] = {}
    for role, task in watchers.items():
        items = streamed[role] = await asyncio.wait_for(task, 10)
        assert items and all("event" in item for item in items), role
        by_version: dict[int, list[dict[str, Any]]] = {}
        for item in items:
            by_version.setdefault(item["event"]["version"], []).append(item["event"])
        assert set(by_version) <= set(moments)
        for version, events in by_version.items():
            observer.check_events(role, version, events, moments[version], "WatchGame")
        assert items[-1]["event"]["kind"] in ("game_over", "deal_salt")
    # No salt before its hand ended, and never the seed. The salts as the spectator's stream
    # revealed them (every seat's says the same: deal_salt is for everyone). Not a new watch of
    # the finished game: one longer than the watch window (512 events, a long shuffled game)
    # starts with a snapshot, and the salts before it are not in the stream.
    reveals = {
        event["salt"]: event["version"]
        for item in streamed[SPECTATOR]
        if (event := item["event"])["kind"] == "deal_salt"
    }
    assert reveals
    for version, role, text in observer.seen:
        assert SEED_TEXT not in text, (role, version)
        for salt, revealed in reveals.items():
            assert salt not in text or version >= revealed, (role, version, "salt")
    assert observer.checked > 100 and (refusals > 0 or len(moments) < 20)


async def test_two_handed_lead_after_a_trick_does_not_show_the_stock(srv: Served) -> None:
    """The trick winner may lead the card it is about to draw; ListLegalActions says so with a
    ``drawn_card`` descriptor, never by naming the stock's top card (undealt card order)."""
    table = await new_table(srv.client, "two-handed", seed="stock-peek")
    rng = random.Random(3)
    windows = 0
    for _ in range(300):
        adj = await table.adj.view()
        hand = adj["hand"]
        if adj["over"] or hand is None or hand["phase"] != "stock_play":
            break
        turn = hand["turn"]
        entries = await table.seats[turn].legal_actions()
        if hand.get("window_seat") == turn and hand["stock"]:
            windows += 1
            plays = {e["card"] for e in entries if e["type"] == "play" and "card" in e}
            own = set(hand["hands"][turn]) | set(hand["table"][turn])
            assert plays <= own, sorted(plays - own)
            assert {"type": "play", "drawn_card": True} in entries
            if hand["stock"][0] not in own:
                assert hand["stock"][0] not in text_of(entries)
        await table.seats[turn].submit(pick(entries, rng))
    assert windows > 5


def _recover(entry: Mapping[str, Any], candidates: Sequence[dict[str, Any]]) -> list[Any]:
    """Brute force: the hidden actions whose audit content hashes to the hash a seat was shown
    (every other hashed field is in the entry the seat received)."""
    if not entry["hash"]:
        return []
    base = entry["time"]["seconds"] + entry["time"]["nanos"] / 1e9
    times = {base}
    for _ in range(4):
        times |= {math.nextafter(t, math.inf) for t in times}
        times |= {math.nextafter(t, -math.inf) for t in times}
    role = {"ROLE_SEAT": "seat", "ROLE_SPECTATOR": "spectator", "ROLE_ADJUDICATOR": "adjudicator"}
    found = []
    for action in candidates:
        for time_ in times:
            row = AuditRow(
                seq=entry["seq"],
                time=time_,
                role=role.get(entry["role"], "anonymous"),
                seat=entry["seat"],
                rpc=entry["rpc"],
                action=action,
                public_action=entry["action"],
                outcome="accepted" if entry["outcome"] == "AUDIT_OUTCOME_ACCEPTED" else "refused",
                code=entry["code"],
                request_id=entry["request_id"],
                version=entry["version"],
                previous_hash=entry["previous_hash"],
            )
            if row.computed_hash() == entry["hash"]:
                found.append(action)
    return found


async def test_audit_hashes_do_not_reveal_a_hidden_action(srv: Served) -> None:
    """A seat sees only the public part of another seat's request; the entry's hash must not
    let it recover the rest (issue 4: a seat sees only its own concealed cards). Here seat 1
    tries to play a card that it holds but may not play (MUST_FOLLOW_SUIT); the card is hidden
    from the others, and a brute force over every card must not find it from the hash."""
    rng = random.Random(21)
    for attempt in range(20):
        table = await new_table(srv.client, "partnership", seed=f"hash-{attempt}")
        refusal = None
        for _ in range(200):
            adj = await table.adj.view()
            hand = adj["hand"]
            if adj["over"] or hand is None:
                break
            turn = hand["turn"]
            entries = await table.seats[turn].legal_actions()
            legal = {e.get("card") for e in entries if e["type"] == "play"}
            wrong = [c for c in hand["hands"][turn] if hand["phase"] == "play" and c not in legal]
            if wrong:
                card = rng.choice(wrong)
                error = await refused(table.seats[turn].submit({"type": "play", "card": card}))
                refusal = (turn, card, error.reason)
                break
            await table.seats[turn].submit(pick(entries, rng))
        if refusal is not None:
            break
    assert refusal is not None
    turn, card, _ = refusal
    ranks = ("A", "10", "K", "Q", "J", "9")
    everything = [{"type": "play", "card": f"{r}{s}"} for r in ranks for s in "SHDC"]
    full = (await table.adj.audit_log())[-1]
    assert full["outcome"] == "AUDIT_OUTCOME_REFUSED" and full["action"]["card"] == card
    assert _recover({**full, "action": {"type": "play"}}, everything) == [full["action"]]
    for seat, session in enumerate(table.seats):
        if seat == turn:
            continue
        entry = (await session.audit_log())[-1]
        assert entry["action"] == {"type": "play"}
        assert _recover(entry, everything) == [], f"seat {seat} recovers seat {turn}'s {card}"


# ----------------------------------------------------------------------------------------------
# Idempotent retry and the stale-version race


async def test_retry_with_the_same_request_id_is_applied_once(srv: Served) -> None:
    table = await new_table(srv.client, "partnership", seed="retry")
    stub = srv.referee
    md1 = bearer(table.seat_tokens[1])
    request = pb.SubmitActionRequest(
        game_id=table.game_id,
        action=raw_action({"type": "bid", "amount": 250}),
        expected_version=0,
        request_id="retry-1",
    )
    first = await stub.SubmitAction(request, metadata=md1)
    again = await stub.SubmitAction(request, metadata=md1)
    assert first == again and first.version == 1
    # A retry after the game moved on still answers the stored response.
    await table.seats[2].submit({"type": "pass"}, expected_version=1)
    late = await stub.SubmitAction(request, metadata=md1)
    assert late == first
    view = await table.adj.view()
    assert view["version"] == 2
    assert [c["seat"] for c in view["hand"]["auction"]] == [1, 2]
    # Concurrent duplicates: one application, the same answer for all.
    request3 = pb.SubmitActionRequest(
        game_id=table.game_id,
        action=raw_action({"type": "pass"}),
        expected_version=2,
        request_id="retry-3",
    )
    md3 = bearer(table.seat_tokens[3])
    answers = await asyncio.gather(*(stub.SubmitAction(request3, metadata=md3) for _ in range(5)))
    assert all(a == answers[0] for a in answers) and answers[0].version == 3
    log = await table.adj.audit_log()
    accepted = [e for e in log if e["outcome"] == "AUDIT_OUTCOME_ACCEPTED"]
    assert [(e["request_id"], e.get("seat", 0)) for e in accepted] == [
        ("retry-1", 1),
        (accepted[1]["request_id"], 2),
        ("retry-3", 3),
    ]
    assert (await table.adj.view())["version"] == 3


async def test_a_finished_games_stored_responses_are_forgotten_a_day_after_it_ends(
    tmp_path: Path,
) -> None:
    """--keep-responses-seconds (a day): the stored responses were about three quarters of what
    a game stored, kept for ever. A finished game's are now deleted a day after its last
    action: a retry until then gets its stored answer, one after that is answered as a new
    request (ABORTED, the game has moved on). A game in progress keeps all of its responses.
    The manager's wall clock is moved by hand; housekeeping runs every 0.05 s."""
    async with serving(tmp_path, housekeeping_seconds=0.05) as srv:
        now = [1_900_000_000.0]
        srv.running.games.clock = lambda: now[0]
        playing = await new_table(srv.client, "partnership", seed="forget-playing")
        opening = pb.SubmitActionRequest(
            game_id=playing.game_id,
            action=raw_action({"type": "bid", "amount": 250}),
            expected_version=0,
            request_id="open",
        )
        opened = await srv.referee.SubmitAction(opening, metadata=bearer(playing.seat_tokens[1]))
        table = await new_table(srv.client, "partnership", SHORT_GAME["partnership"], seed="gone")
        rng = random.Random(8)
        while (found := await actor(table)) is not None:
            seat, entries = found
            version = (await table.adj.view())["version"]
            last = pb.SubmitActionRequest(
                game_id=table.game_id,
                action=raw_action(pick(entries, rng)),
                expected_version=version,
                request_id=f"r{version}",
            )
            metadata = bearer(table.seat_tokens[seat])
            answer = await srv.referee.SubmitAction(last, metadata=metadata)
        assert await srv.referee.SubmitAction(last, metadata=metadata) == answer
        now[0] += KEEP_RESPONSES + 1
        key = f"{seat}:{last.request_id}"
        async with asyncio.timeout(20):  # the next housekeeping pass
            while await srv.running.store.stored_response(table.game_id, key) is not None:
                await asyncio.sleep(0.05)
        error = await refused(srv.referee.SubmitAction(last, metadata=metadata))
        assert (error.code, error.reason) == (grpc.StatusCode.ABORTED, "STALE_VERSION")
        retried = await srv.referee.SubmitAction(opening, metadata=bearer(playing.seat_tokens[1]))
        assert retried == opened


async def test_a_request_id_is_per_seat(srv: Served) -> None:
    """Seat 2 reusing seat 1's request_id does not get seat 1's stored response."""
    table = await new_table(srv.client, "partnership", seed="retry")
    stub = srv.referee
    request = pb.SubmitActionRequest(
        game_id=table.game_id,
        action=raw_action({"type": "pass"}),
        expected_version=0,
        request_id="shared-id",
    )
    first = await stub.SubmitAction(request, metadata=bearer(table.seat_tokens[1]))
    assert first.version == 1 and json.loads(first.view_json)["role"] == 1
    # Seat 3 (not its turn): refused on its own merits, not answered with seat 1's response.
    error = await refused(stub.SubmitAction(request, metadata=bearer(table.seat_tokens[3])))
    assert error.code == grpc.StatusCode.ABORTED  # its expected_version 0 is stale
    request.expected_version = 1
    error = await refused(stub.SubmitAction(request, metadata=bearer(table.seat_tokens[3])))
    assert error.reason == "NOT_YOUR_TURN"
    # Seat 2 (its turn) with the same id: its own action is applied, with its own view.
    second = await stub.SubmitAction(request, metadata=bearer(table.seat_tokens[2]))
    assert second.version == 2 and json.loads(second.view_json)["role"] == 2
    cards = [json.loads(r.view_json)["hand"]["cards"] for r in (first, second)]
    assert cards[0] != cards[1]


async def test_two_concurrent_submissions_at_one_version_exactly_one_wins(srv: Served) -> None:
    """Two clients on separate connections race at the same version: one is accepted, the other
    is ABORTED with the version the winner made."""
    table = await new_table(srv.client, "partnership", seed="race", options={"target": 100})
    second = RefereeClient(srv.address)
    try:
        rng = random.Random(5)
        for _ in range(25):
            adj = await table.adj.view()
            if adj["over"]:
                break
            version = adj["version"]
            turn = adj["hand"]["turn"]
            entries = await table.seats[turn].legal_actions()
            a, b = pick(entries, rng), pick(entries, rng)
            mine = second.seat(table.game_id, table.seat_tokens[turn])
            results = await asyncio.gather(
                table.seats[turn].submit(a, expected_version=version),
                mine.submit(b, expected_version=version),
                return_exceptions=True,
            )
            wins = [r for r in results if isinstance(r, dict)]
            losses = [r for r in results if isinstance(r, RefereeError)]
            assert len(wins) == 1 and len(losses) == 1, results
            assert losses[0].code == grpc.StatusCode.ABORTED
            assert losses[0].version == version + 1 == wins[0]["version"]
            assert (await table.adj.view())["version"] == version + 1
    finally:
        await second.close()
    assert await table.adj.verify_audit_log()


# ----------------------------------------------------------------------------------------------
# TLS and mutual TLS


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def _mutual_tls(tmp_path: Path, pems: dict[str, Path]) -> AbstractAsyncContextManager[Served]:
    """A server presenting ``pems``' certificate and requiring clients of its CA."""
    return serving(
        tmp_path,
        tls_cert=str(pems["cert"]),
        tls_key=str(pems["key"]),
        tls_client_ca=str(pems["ca"]),
    )


async def _health(channel: grpc.aio.Channel) -> int:
    stub = health_stub(channel)
    response = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
    status: int = response.status
    return status


async def test_tls(tmp_path: Path, ca: trustme.CA) -> None:
    pems = write_pems(ca, tmp_path / "pki")
    async with serving(tmp_path, tls_cert=str(pems["cert"]), tls_key=str(pems["key"])) as srv:
        target = f"localhost:{srv.running.port}"
        credentials = grpc.ssl_channel_credentials(root_certificates=pems["ca"].read_bytes())
        async with RefereeClient(target, credentials=credentials) as client:
            assert await _health(client.channel) == health_pb2.HealthCheckResponse.SERVING
            table = await new_table(client, "partnership", seed="tls")
            assert (await table.seats[1].submit({"type": "pass"}))["version"] == 1
        # A plaintext client cannot talk to a TLS server.
        async with grpc.aio.insecure_channel(target) as plain_channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await _health(plain_channel)
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        # Nor can a client that does not trust the server's CA.
        other = trustme.CA()
        untrusted = grpc.ssl_channel_credentials(root_certificates=other.cert_pem.bytes())
        async with grpc.aio.secure_channel(target, untrusted) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await _health(channel)
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_mutual_tls(tmp_path: Path, ca: trustme.CA) -> None:
    pems = write_pems(ca, tmp_path / "pki")
    async with _mutual_tls(tmp_path, pems) as srv:
        target = f"localhost:{srv.running.port}"
        root = pems["ca"].read_bytes()
        with_cert = grpc.ssl_channel_credentials(
            root_certificates=root,
            private_key=pems["client_key"].read_bytes(),
            certificate_chain=pems["client_cert"].read_bytes(),
        )
        async with RefereeClient(target, credentials=with_cert) as client:
            assert await _health(client.channel) == health_pb2.HealthCheckResponse.SERVING
            table = await new_table(client, "two-handed", seed="mtls")
            assert (await table.seats[0].view())["role"] == 0
        without_cert = grpc.ssl_channel_credentials(root_certificates=root)
        async with grpc.aio.secure_channel(target, without_cert) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await _health(channel)
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        # A certificate from another CA is refused too.
        stranger = trustme.CA().issue_cert("client.example")
        foreign = grpc.ssl_channel_credentials(
            root_certificates=root,
            private_key=stranger.private_key_pem.bytes(),
            certificate_chain=stranger.cert_chain_pems[0].bytes(),
        )
        async with grpc.aio.secure_channel(target, foreign) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await _health(channel)
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


async def _healthy_with(target: str, ca_pem: bytes, **client_pems: bytes) -> bool:
    """Whether a new connection trusting ``ca_pem`` (and presenting ``client_pems``) works."""
    credentials = grpc.ssl_channel_credentials(root_certificates=ca_pem, **client_pems)
    async with grpc.aio.secure_channel(target, credentials) as channel:
        try:
            return await _health(channel) == health_pb2.HealthCheckResponse.SERVING
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.UNAVAILABLE
            return False


@pytest.mark.usefixtures("json_logs")
async def test_renewed_tls_files_are_served_without_a_restart(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Was: the files were read once at start-up, so a renewed certificate (cert-manager
    rewrites the files before the old one expires) was served only after a restart, and until
    then clients met the old one until it expired. Each new connection now gets what the files
    hold; connections already open keep theirs. With mutual TLS the client CA file is read
    again too. A file that cannot be read keeps the configuration in use."""
    old_ca, new_ca = trustme.CA(), trustme.CA()
    pems = write_pems(old_ca, tmp_path / "pki")
    async with _mutual_tls(tmp_path, pems) as srv:
        configure_logging("json")  # serving() quiets the logs; this test counts warnings
        target = f"localhost:{srv.running.port}"
        old_client = {
            "private_key": pems["client_key"].read_bytes(),
            "certificate_chain": pems["client_cert"].read_bytes(),
        }
        old_root = pems["ca"].read_bytes()
        open_credentials = grpc.ssl_channel_credentials(root_certificates=old_root, **old_client)
        async with grpc.aio.secure_channel(target, open_credentials) as open_channel:
            assert await _health(open_channel) == health_pb2.HealthCheckResponse.SERVING
            renewed = write_pems(new_ca, tmp_path / "pki")  # the same paths, new contents
            new_client = {
                "private_key": renewed["client_key"].read_bytes(),
                "certificate_chain": renewed["client_cert"].read_bytes(),
            }
            new_root = renewed["ca"].read_bytes()
            assert await _healthy_with(target, new_root, **new_client)
            assert not await _healthy_with(target, old_root, **old_client)
            assert not await _healthy_with(target, new_root, **old_client)  # old client CA
            # The connection made before the renewal goes on.
            assert await _health(open_channel) == health_pb2.HealthCheckResponse.SERVING
            # Half-way through a renewal the current files stay in use: a key gone, then a key
            # that is not the certificate's (written before the certificate that goes with it).
            pems["key"].unlink()
            assert await _healthy_with(target, new_root, **new_client)
            third = trustme.CA()
            third.issue_cert("localhost", "127.0.0.1").private_key_pem.write_to_path(
                str(pems["key"])
            )
            assert await _healthy_with(target, new_root, **new_client)
            assert await _healthy_with(target, new_root, **new_client)  # still, and quietly
            write_pems(third, tmp_path / "pki")  # the renewal completed
            third_client = {
                "private_key": pems["client_key"].read_bytes(),
                "certificate_chain": pems["client_cert"].read_bytes(),
            }
            assert await _healthy_with(target, pems["ca"].read_bytes(), **third_client)
            assert not await _healthy_with(target, new_root, **new_client)
        logged = capfd.readouterr().err
        assert logged.count("tls_reload_failed") == 2, logged  # per state of the files, not call


async def test_a_key_that_is_not_the_certificates_stops_serve_before_it_serves(
    tmp_path: Path, ca: trustme.CA
) -> None:
    pems = write_pems(ca, tmp_path / "pki")
    ca.issue_cert("localhost").private_key_pem.write_to_path(str(pems["key"]))
    settings = Settings(
        port=0,
        db=str(tmp_path / "x.db"),
        metrics_port=0,
        tls_cert=str(pems["cert"]),
        tls_key=str(pems["key"]),
    )
    with pytest.raises(StartError, match="cannot use the TLS files"):
        await start_server(settings)
    assert not (tmp_path / "x.db").exists()


def test_tls_flags_and_environment_reach_the_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("c.pem", "k.pem", "ca.pem", "env-c.pem", "env-k.pem"):
        (tmp_path / name).write_text("PEM", encoding="utf-8")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = ["--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-client-ca", "ca.pem"]
    settings = settings_from(parser.parse_args(flags))
    assert (settings.tls_cert, settings.tls_key, settings.tls_client_ca) == (
        "c.pem",
        "k.pem",
        "ca.pem",
    )
    monkeypatch.setenv("PINOCHLE_REFEREE_TLS_CERT", "env-c.pem")
    monkeypatch.setenv("PINOCHLE_REFEREE_TLS_KEY", "env-k.pem")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    settings = settings_from(parser.parse_args([]))
    assert (settings.tls_cert, settings.tls_key, settings.tls_client_ca) == (
        "env-c.pem",
        "env-k.pem",
        "",
    )


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--tls-cert", "missing.pem", "--tls-key", "k.pem"], "argument --tls-cert: cannot read"),
        (["--tls-cert", "c.pem"], "--tls-cert and --tls-key go together"),
        (["--tls-key", "k.pem"], "--tls-cert and --tls-key go together"),
        (["--tls-client-ca", "c.pem"], "--tls-client-ca needs --tls-cert"),
    ],
)
def test_tls_flags_that_cannot_work_stop_serve_before_it_starts(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    says: str,
) -> None:
    """Were a traceback once the server was starting (a missing file), or a server without TLS
    (a certificate without its key): now exit 2 with the reason, before anything is opened."""
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith("PINOCHLE_REFEREE_"):
            monkeypatch.delenv(name)
    for name in ("c.pem", "k.pem"):
        (tmp_path / name).write_text("PEM", encoding="utf-8")
    db = tmp_path / "never.db"
    with pytest.raises(SystemExit) as exited:
        cli.main(["serve", "--db", str(db), "--port", "0", "--metrics-port", "0", *flags])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert not db.exists()


def test_token_hashes_map_to_roles() -> None:
    """Each stored hash names its role; an empty server credential matches nothing, and a hash
    shared by two roles (never generated, but possible in a hand-edited database) gets the
    least powerful one."""
    callers = auth.callers_by_hash(["s0", "s1", "both"], "both", ["adj", ""])
    assert callers == {
        "s0": auth.Caller(auth.SEAT, 0),
        "s1": auth.Caller(auth.SEAT, 1),
        "adj": auth.Caller(auth.ADJUDICATOR),
        "both": auth.Caller(auth.SPECTATOR),
    }
    assert auth.callers_by_hash(["x"], "spec", ["x"])["x"] == auth.Caller(auth.ADJUDICATOR)
