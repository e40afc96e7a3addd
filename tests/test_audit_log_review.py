"""Review of the audit log's hash chain and the deal commitments against the README's section
"The audit log and the deal commitments", through a real server.

The checkers here are written from the README's text alone (``hashlib`` and ``json``, nothing
from ``referee``), so that a third party could write them the same way: if the README and the
server ever disagree on a key, an order or an encoding, these tests say so.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import secrets
import sqlite3
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from pinochle_client import AuditCheck, verify_audit_chain

from referee.engine import game as game_module
from referee.rules.cards import canonical_deck
from referee.rules.dealing import deal_from_order
from referee.rules.options import resolve_options
from tests.service_helpers import (
    ADJUDICATOR_TOKEN,
    SHORT_GAME,
    VARIANTS,
    Served,
    Table,
    new_table,
    play,
    refused,
    serving,
)
from tests.test_postgres_review import _replica
from tests.test_store import postgres_marks, postgres_schema

ZEROS = "0" * 64
DEAL_KEYS = {"hands", "widow", "stock", "turn_up"}
SUITS = "SHDC"
RANKS = ("A", "10", "K", "Q", "J", "9")


@pytest_asyncio.fixture
async def srv(tmp_path: Path) -> AsyncIterator[Served]:
    # A watch from version 0 sends every event of a game of any length, never a snapshot.
    async with serving(tmp_path, watch_window=10**9) as served:
        yield served


def readme_commitment(deal: Mapping[str, Any], salt_hex: str) -> str:
    """The README: SHA-256 of the deal as compact JSON with sorted keys, then the salt's bytes."""
    text = json.dumps(deal, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8") + bytes.fromhex(salt_hex)).hexdigest()


def canonical_position(card: str) -> tuple[int, int]:
    """A card's place in RULES.md A.3's order: suits S H D C, then ranks A 10 K Q J 9."""
    return SUITS.index(card[-1]), RANKS.index(card[:-1])


async def all_events(table: Table) -> list[dict[str, Any]]:
    """Every event of a finished game as the spectator's stream sends it (it ends with the
    game, so nothing here waits on a clock)."""
    items = [item async for item in table.spec.watch(0)]
    assert all(item["type"] == "event" for item in items)
    return [item["event"] for item in items]


def check_deal_shape(variant: str, deal: Mapping[str, Any], seats: int) -> None:
    """The deal object as the README describes it, key by key."""
    assert set(deal) == DEAL_KEYS, deal
    hands = deal["hands"]
    assert len(hands) == seats
    for cards in hands:
        assert cards == sorted(cards, key=canonical_position), cards
    if variant == "two-handed":
        assert deal["stock"] and deal["turn_up"] is not None and deal["widow"] == []
    elif variant == "partnership-no-bid":
        assert deal["stock"] == [] and deal["turn_up"] is not None
    elif variant == "cutthroat":
        assert deal["widow"] and deal["stock"] == [] and deal["turn_up"] is None
    else:
        assert deal["stock"] == [] and deal["turn_up"] is None


@pytest.mark.parametrize("variant", VARIANTS)
async def test_a_third_party_recomputes_every_commitment_from_the_readme(
    srv: Served, variant: str
) -> None:
    """Every hand of a whole game, in each variant: ``deal_committed`` when it is dealt,
    hand, ``deal_revealed`` and ``deal_salt`` (32 hex digits) after its result, and the
    README's formula on the revealed deal gives the commitment; the export carries the same
    deal, salt and commitment. Before its reveal, the salt is in nothing the spectator got."""
    table = await new_table(srv.client, variant, SHORT_GAME[variant])
    await play(table, random.Random(f"readme-{variant}"))
    events = await all_events(table)
    seats = len(table.seats)
    committed = {e["hand"]: e for e in events if e["kind"] == "deal_committed"}
    revealed = {e["hand"]: e for e in events if e["kind"] == "deal_revealed"}
    salts = {e["hand"]: e for e in events if e["kind"] == "deal_salt"}
    assert events[-1]["kind"] in ("deal_salt", "game_over")
    assert sorted(committed) == sorted(revealed) == sorted(salts) == list(range(len(committed)))
    record = await table.spec.export()
    exported = record["hands"]
    assert len(exported) == len(committed)
    for hand, published in committed.items():
        deal, salt = revealed[hand]["deal"], salts[hand]["salt"]
        check_deal_shape(variant, deal, seats)
        assert len(salt) == 32 and int(salt, 16) >= 0
        assert readme_commitment(deal, salt) == published["commitment"]
        assert published["seq"] < revealed[hand]["seq"] < salts[hand]["seq"]
        before = json.dumps([e for e in events if e["seq"] < salts[hand]["seq"]])
        assert salt not in before
        assert exported[hand]["deal"] == deal
        assert exported[hand]["x-deal-salt"] == salt
        assert exported[hand]["x-deal-commitment"] == published["commitment"]


async def test_seeded_and_given_deals_are_committed_and_revealed_the_same_way(
    srv: Served,
) -> None:
    """A seeded game and a game from given deals still publish a commitment with a fresh salt
    (two games from one seed deal the same cards under different commitments), and the
    README's formula opens each at the reveal."""
    events: list[list[dict[str, Any]]] = []
    for seeded in range(2):
        table = await new_table(srv.client, "partnership", SHORT_GAME["partnership"], seed="same")
        await play(table, random.Random(seeded))
        events.append(await all_events(table))
    first_deal = next(e["deal"] for e in events[0] if e["kind"] == "deal_revealed")
    table = await new_table(
        srv.client,
        "partnership",
        SHORT_GAME["partnership"],
        given_deals=[first_deal],
        adjudicator_token=ADJUDICATOR_TOKEN,
    )
    await play(table, random.Random(2))
    events.append(await all_events(table))
    commitments = []
    for game in events:
        committed = next(e for e in game if e["kind"] == "deal_committed" and e["hand"] == 0)
        deal = next(e["deal"] for e in game if e["kind"] == "deal_revealed" and e["hand"] == 0)
        salt = next(e["salt"] for e in game if e["kind"] == "deal_salt" and e["hand"] == 0)
        assert deal == first_deal
        assert readme_commitment(deal, salt) == committed["commitment"]
        commitments.append(committed["commitment"])
    assert len(set(commitments)) == 3


def readme_hash(row: Mapping[str, Any]) -> str:
    """The README's audit-entry hash, from the entry's stored columns."""
    content = {key: row[key] for key in README_CHAIN_KEYS}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


README_CHAIN_KEYS = (
    "seq",
    "time",
    "role",
    "seat",
    "rpc",
    "action",
    "public_action",
    "outcome",
    "code",
    "request_id",
    "version",
    "previous_hash",
)


def stored_entries(db: Path, game_id: str) -> list[dict[str, Any]]:
    conn = sqlite3.connect(db)
    try:
        conn.row_factory = sqlite3.Row
        rows = conn.execute(
            "SELECT * FROM audit WHERE game_id = ? ORDER BY seq", (game_id,)
        ).fetchall()
    finally:
        conn.close()
    entries = []
    for row in rows:
        entry = dict(row)
        for key in ("action", "public_action"):
            entry[key] = None if entry[key] is None else json.loads(entry[key])
        entries.append(entry)
    return entries


async def test_the_readme_chain_formula_gives_every_stored_hash(srv: Served) -> None:
    """Accepted and refused requests from a seat, a spectator and callers with no valid
    token, one with text beyond ASCII in its request id: each stored hash is the README's
    formula over the README's keys, linked from 64 zeros; GetAuditLog gives the adjudicator
    those hashes and every role the same seqs, outcomes and versions."""
    table = await new_table(srv.client, "partnership", seed="chain")
    await table.seats[1].submit({"type": "pass"}, request_id="premi\u00e8re \u2660")
    await refused(table.seats[3].submit({"type": "pass"}))
    await refused(srv.client.seat(table.game_id, table.spectator_token).submit({"type": "pass"}))
    await refused(srv.client.seat(table.game_id, "no-such-token").submit({"type": "pass"}))
    await refused(table.seats[2].submit({"type": "play", "card": "AS"}))
    await table.seats[2].submit({"type": "pass"}, expected_version=1)
    stored = stored_entries(srv.db, table.game_id)
    assert [e["role"] for e in stored] == [
        "seat",
        "seat",
        "spectator",
        "anonymous",
        "seat",
        "seat",
    ]
    previous = ZEROS
    for entry in stored:
        assert entry["previous_hash"] == previous
        assert readme_hash(entry) == entry["hash"], entry
        previous = entry["hash"]
    page = await table.adj.audit_log()
    assert [e["hash"] for e in page] == [e["hash"] for e in stored]
    assert [e["previous_hash"] for e in page] == [e["previous_hash"] for e in stored]
    for session in (table.seats[0], table.spec):
        seen = await session.audit_log()
        assert [(e["seq"], e["version"]) for e in seen] == [
            (e["seq"], e["version"]) for e in stored
        ]
        assert all(e["hash"] == e["previous_hash"] == "" for e in seen)
    check = await table.spec.check_audit_log()
    assert (check.intact, check.entries, check.first_bad_seq) == (True, len(stored), 0)


async def test_the_adjudicator_recomputes_the_chain_from_get_audit_log(srv: Served) -> None:
    """Was: GetAuditLog showed the time cut to the nanosecond and no public_action, so a client
    could compare hashes but not recompute them. The adjudicator's entries now carry
    ``hashed_content``, the README's canonical JSON of the stored entry, whose SHA-256 is the
    hash: ``verify_audit_chain`` checks a log read in pages, or from a hash kept earlier, and
    finds an entry changed, one missing, or a hash that covers other content. Seats and the
    spectator get no content, as they get no hash."""
    table = await new_table(srv.client, "partnership", seed="recompute")
    await table.seats[1].submit({"type": "pass"}, request_id="premi\u00e8re \u2660")
    await refused(table.seats[3].submit({"type": "pass"}))
    await refused(srv.client.seat(table.game_id, table.spectator_token).submit({"type": "pass"}))
    await refused(srv.client.seat(table.game_id, "no-such-token").submit({"type": "pass"}))
    await refused(table.seats[2].submit({"type": "play", "card": "AS"}))
    await table.seats[2].submit({"type": "pass"}, expected_version=1)
    entries: list[dict[str, Any]] = []
    while page := await table.adj.audit_log(entries[-1]["seq"] if entries else 0, 4):
        entries += page
    stored = stored_entries(srv.db, table.game_id)
    assert len(entries) == len(stored) == 6
    for entry, row in zip(entries, stored, strict=True):
        content = json.loads(entry["hashed_content"])
        assert content == {key: row[key] for key in README_CHAIN_KEYS}
        assert entry["hashed_content"] == json.dumps(content, sort_keys=True, separators=(",", ":"))
        assert readme_hash(content) == entry["hash"]
    assert verify_audit_chain(entries) == AuditCheck(True, 6, 0, "")
    assert verify_audit_chain(entries[3:], previous_hash=entries[2]["hash"]).intact

    played = [dict(e) for e in entries]
    played[4]["action"] = {"type": "play", "card": "KS"}  # shown otherwise than hashed
    assert verify_audit_chain(played) == AuditCheck(
        False, 6, 5, "entry 5's hashed content differs in action"
    )
    assert verify_audit_chain(entries[:2] + entries[3:]).first_bad_seq == 4  # entry 3 left out
    assert verify_audit_chain(entries[3:], previous_hash=entries[1]["hash"]).first_bad_seq == 4
    rehashed = [dict(e) for e in entries]
    rehashed[1]["hash"] = hashlib.sha256(b"other content").hexdigest()
    assert verify_audit_chain(rehashed).first_bad_seq == 2
    for session in (table.seats[2], table.spec):
        seen = await session.audit_log()
        assert all(e["hashed_content"] == "" for e in seen)
        with pytest.raises(ValueError, match="adjudicator"):
            verify_audit_chain(seen)


class FakeRandbelow:
    """A stand-in for ``secrets.randbelow``: answers ``values`` in turn and records each bound
    it was asked for."""

    def __init__(self, values: Sequence[int]) -> None:
        self.answers = iter(values)
        self.asked: list[int] = []

    def __call__(self, bound: int) -> int:
        self.asked.append(bound)
        value = next(self.answers)
        assert 0 <= value < bound
        return value


def test_the_secure_shuffle_is_fisher_yates_on_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """``secure_shuffle`` asks ``secrets.randbelow`` for j in [0, i] for i from the last index
    down to 1 and swaps: with every answer 0 the deck turns by one; over every answer sequence
    for four cards each of the 24 orders comes out exactly once, so uniform answers give
    uniform orders (unbiased). A server-shuffled deal draws from it: with every answer i (no
    swap) it is the canonical deck split as A.10 item 4 splits it."""
    fake = FakeRandbelow([0] * 4)
    monkeypatch.setattr(secrets, "randbelow", fake)
    assert game_module.secure_shuffle([0, 1, 2, 3, 4]) == [1, 2, 3, 4, 0]
    assert fake.asked == [5, 4, 3, 2]
    orders = []
    for answers in itertools.product(range(4), range(3), range(2)):
        monkeypatch.setattr(secrets, "randbelow", FakeRandbelow(answers))
        orders.append(tuple(game_module.secure_shuffle([0, 1, 2, 3])))
    assert sorted(orders) == sorted(itertools.permutations(range(4)))
    rules = resolve_options("partnership", {})
    monkeypatch.setattr(secrets, "randbelow", FakeRandbelow(range(rules.deck - 1, 0, -1)))
    dealt = game_module.SecureDeals().next_deal(rules, 3, 0)
    assert dealt == deal_from_order(
        canonical_deck(rules.deck), players=4, hand_size=rules.hand_size, dealer=3
    )


async def test_every_view_shows_the_current_hands_commitment(tmp_path: Path) -> None:
    """RULES.md A.10 item 3: every role's view shows the deal commitments. The view's hand
    carries ``commitment``, the one its ``deal_committed`` event published: in GetGame for
    each role from creation on, in the view SubmitAction answers (also when that action dealt
    the next hand), and after a restart. A client that connected mid-hand (a snapshot) had no
    way to learn it but replaying the events, which a long game no longer keeps."""
    async with serving(tmp_path, watch_window=10**9) as srv:
        table = await new_table(srv.client, "two-handed", {"target": 5000})
        created = first_commitment(await all_events_so_far(table))
        for session in [*table.seats, table.spec, table.adj]:
            assert (await session.view())["hand"]["commitment"] == created
        steps = await play(table, random.Random(21), hands=1)
        events = await all_events_so_far(table)
        committed = {e["hand"]: e["commitment"] for e in events if e["kind"] == "deal_committed"}
        assert committed[0] == created and sorted(committed) == [0, 1]
        last = steps[-1].result["view"]
        assert (last["hand"]["number"], last["hand"]["commitment"]) == (1, committed[1])
        for session in [*table.seats, table.spec, table.adj]:
            hand = (await session.view())["hand"]
            assert (hand["number"], hand["commitment"]) == (1, committed[1])
    async with serving(tmp_path, watch_window=10**9) as again:
        table = table.through(again.client)
        for session in [*table.seats, table.spec, table.adj]:
            hand = (await session.view())["hand"]
            assert (hand["number"], hand["commitment"]) == (1, committed[1])


async def all_events_so_far(table: Table) -> list[dict[str, Any]]:
    """The game's events up to its current version, as the adjudicator's stream sends them."""
    version = (await table.adj.view())["version"]
    events: list[dict[str, Any]] = []
    async for item in table.adj.watch(0):
        assert item["type"] == "event"
        events.append(item["event"])
        if item["event"]["version"] == version and item["event"]["kind"] == "deal_committed":
            break
    return events


def first_commitment(events: Sequence[Mapping[str, Any]]) -> str:
    return str(next(e["commitment"] for e in events if e["kind"] == "deal_committed"))


async def test_a_refused_request_shows_nothing_of_its_cards_to_anyone_else(srv: Served) -> None:
    """A seat's refused meld, pass, discard and play name its own concealed cards: every other
    seat and the spectator see each entry's ``type`` alone, no code and no hash, and none of
    those cards anywhere on the page; the seat sees its own entries whole, the adjudicator
    every entry whole."""
    table = await new_table(srv.client, "partnership", seed="refused-claims")
    hand = (await table.adj.view())["hand"]
    seat = (hand["turn"] + 1) % 4  # not its turn: every request below is refused
    cards = hand["hands"][seat]
    secret = set(cards) - set().union(*(hand["hands"][s] for s in range(4) if s != seat))
    assert secret
    claims = [
        {"type": "meld", "cards": cards[:4]},
        {"type": "pass_cards", "cards": cards[:4]},
        {"type": "discard", "cards": cards[-3:]},
        {"type": "play", "card": sorted(secret)[0]},
        {"type": "exchange_dix"},
    ]
    for claim in claims:
        await refused(table.seats[seat].submit(claim, expected_version=0))
    whole = await table.adj.audit_log()
    assert [e["action"] for e in whole] == claims
    assert all(e["code"] and e["hash"] for e in whole)
    own = await table.seats[seat].audit_log()
    assert [(e["action"], e["code"]) for e in own] == [(e["action"], e["code"]) for e in whole]
    others = [table.seats[s] for s in range(4) if s != seat] + [table.spec]
    for session in others:
        page = await session.audit_log()
        assert [e["action"] for e in page] == [{"type": c["type"]} for c in claims]
        assert all(e["code"] == e["hash"] == e["previous_hash"] == "" for e in page)
        text = json.dumps(page)
        assert not [card for card in secret if f'"{card}"' in text]


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=postgres_marks())])
async def test_another_replica_shows_the_commitment_it_folded_in(backend: str) -> None:
    """PostgreSQL replicas: the hand another replica dealt is folded in from the log with its
    commitment, so both replicas' views show the same one (each replica kept its own copy
    of the deal's commitment only where it dealt the hand)."""
    with postgres_schema("test_audit_review") as schema:
        async with _replica(schema) as one, _replica(schema) as two:
            table = await new_table(one.client, "partnership", {"target": 5000})
            await play(table, random.Random(5), hands=1)
            here = (await table.adj.view())["hand"]
            there = (await table.through(two.client).adj.view())["hand"]
            assert here["number"] == there["number"] == 1
            assert there["commitment"] == here["commitment"] != ""
            first = await table.through(two.client).spec.check_audit_log()
            assert first.intact and first.entries > 0
