"""Trick play, differentially: the engine against the independent oracle of
``tests/oracle_play.py`` (RULES.md §1.3, §1.5, §1.6, §2.2, §2.4, A.2, A.7, A.8, A.9 item 10).

Seeded random games of every variant, under randomly drawn option sets (the play obligations,
the counting scheme and last-trick bonus, and the options that change who leads, the number of
tricks or the discards), are driven by a random legal policy. At every position of the play
phase, each seat's ``play`` entries of ``legal_actions`` must be exactly the oracle's legal cards
(in A.3 order), and every other card the seat to play holds must be refused with the oracle's
A.5 code; every completed trick must go to the oracle's winner for the oracle's points, and every
hand result must report the oracle's card points per side. The rules queries (A.10 item 5) for
legal plays, trick winners and trick points are compared with the oracle at random positions
that reach the ladder's rare rungs often, and the oracle itself is checked against the legal-play
vectors of RULES.md §10.4.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from referee.engine.actions import Play, decode_action
from referee.engine.engine import apply, legal_actions
from referee.engine.errors import IllegalAction
from referee.engine.events import Event
from referee.engine.game import Game, SeededDeals
from referee.engine.state import GameState
from referee.engine.views import ADJUDICATOR, view
from referee.query import answer_query
from referee.rules.cards import parse_card
from referee.rules.options import resolve_options
from tests.oracle_play import (
    CUTTHROAT,
    DOUBLE_DECK,
    MUST_FOLLOW_SUIT,
    MUST_HEAD_TRICK,
    MUST_OVERTRUMP,
    MUST_TRUMP,
    NO_BID,
    PARTNERSHIP,
    PLAYERS,
    RANKS,
    SUITS,
    TWO_HANDED,
    HandPlay,
    PlayOptions,
    TrickResult,
    card_points,
    legal_cards,
    refusal,
    resolve_play_options,
    suit_of,
    trick_winner,
    two_handed_legal_cards,
)
from tests.strategies import choose_action, pick, sample

VARIANTS = (TWO_HANDED, CUTTHROAT, PARTNERSHIP, DOUBLE_DECK, NO_BID)

# Games per variant, and how many hands of each game are compared (the rest is not played).
GAMES = {TWO_HANDED: 30, CUTTHROAT: 36, PARTNERSHIP: 36, DOUBLE_DECK: 30, NO_BID: 30}
HANDS_PER_GAME = 2
MAX_ACTIONS = 600

# Every option of OPTIONS.md "Play obligations" and "Counting", each left out or set at random.
PLAY_OPTIONS: Mapping[str, Sequence[object]] = {
    "head_rule": ["always", "trump_lead_only", "never"],
    "head_when_trumped": ["not_required", "beat_highest_led_card"],
    "head_over_partner": [True, False],
    "must_trump_when_void": [True, False],
    "must_overtrump": [True, False],
    "must_trump_even_if_cannot_overtrump": [True, False],
    "count_scheme": [
        "modern10",
        "simple_10_5",
        "classic_11",
        "points1",
        "points1_single",
        "points1_double",
    ],
}
LAST_TRICK_BONUSES = (0, 1, 2, 7, 10, 25, -5)

# Options that change what reaches the play: who leads (the contract), the number of tricks
# (a kitty), the discards that count for the declarer, concessions, the two-handed table.
VARIANT_OPTIONS: Mapping[str, Mapping[str, Sequence[object]]] = {
    TWO_HANDED: {
        "last_draw": ["winner_facedown", "winner_chooses"],
        "new_card_required": [True, False],
        "deferred_meld_scoring": [True, False],
        "dix_scores_when_played": [True, False],
    },
    CUTTHROAT: {
        "meld_declaration": ["declared", "auto"],
        "may_bury_melded_cards": [True, False],
        "trump_requires_marriage": [True, False],
        "all_pass": ["redeal", "dealer_stuck"],
    },
    PARTNERSHIP: {
        "meld_declaration": ["declared", "auto"],
        "exchange_mode": ["none", "partner", "kitty"],
        "trump_requires_marriage": [True, False],
    },
    DOUBLE_DECK: {
        "deck": [48, 80],
        "meld_declaration": ["declared", "auto"],
        "exchange_mode": ["none", "partner", "kitty"],
        "trump_requires_marriage": [True, False],
        "allow_bid_or_redeal": [True, False],
    },
    NO_BID: {"meld_declaration": ["declared", "auto"]},
}
PLAY_CODES = (MUST_FOLLOW_SUIT, MUST_HEAD_TRICK, MUST_TRUMP, MUST_OVERTRUMP)


def random_options(variant: str, rng: random.Random) -> dict[str, Any]:
    """An options object for ``variant``: each play, counting and variant option left out or set
    to a random value."""
    options: dict[str, Any] = {}
    for table in (PLAY_OPTIONS, VARIANT_OPTIONS[variant]):
        for name, values in table.items():
            if rng.random() < 0.5:
                options[name] = pick(rng, values)
    if rng.random() < 0.3:
        options["last_trick_bonus"] = pick(rng, LAST_TRICK_BONUSES)
    if options.get("exchange_mode") == "kitty":
        options["exchange_count"] = 4
    resolve_options(variant, options)  # a refusal here is a bug in this test
    return options


def choose_two_handed(state: GameState, rng: random.Random) -> tuple[int, dict[str, object]]:
    """A legal two-handed action: a meld, dix action or draw more often than a play (so cards
    stay on the table and are played from there), and now and then the lead of the card about to
    be drawn (named from the adjudicator's view of the stock)."""
    entries = [(seat, e) for seat in (0, 1) for e in legal_actions(state, seat)]
    others = [(seat, e) for seat, e in entries if e["type"] != "play"]
    plays = [(seat, e) for seat, e in entries if e["type"] == "play"]
    seat, entry = pick(rng, others if others and rng.random() < 0.6 else plays)
    if not entry.get("drawn_card"):
        return seat, dict(entry)
    hand = view(state, ADJUDICATOR)["hand"]
    assert isinstance(hand, dict)
    stock = hand["stock"]
    assert isinstance(stock, list)
    if len(stock) > 1:  # the last draw may be the turned card: name a held card then
        return seat, {"type": "play", "card": stock[0]}
    named = [(s, e) for s, e in plays if not e.get("drawn_card")]
    seat, entry = pick(rng, named)
    return seat, dict(entry)


@dataclass
class Tally:
    """What one run compared, to show the comparisons are not vacuous."""

    positions: int = 0
    refusals: Counter[str] = field(default_factory=Counter)
    tricks: int = 0
    hands: int = 0
    table_plays: int = 0
    hand_ends: Counter[str] = field(default_factory=Counter)


@dataclass
class Follower:
    """Follows a game's events with the oracle and checks what the engine reported."""

    variant: str
    rules: PlayOptions
    tally: Tally
    context: str
    hand: HandPlay | None = None
    pending: TrickResult | None = None
    hands_done: int = 0

    def feed(self, events: Sequence[Event]) -> None:
        for event in events:
            data = event.data
            where = f"{self.context}, hand {self.hands_done}: {event.serialize()}"
            if event.kind == "hand_started":
                self.hand = HandPlay(self.rules, int(str(data["dealer"])))
                continue
            hand = self.hand
            assert hand is not None, where
            if event.kind == "contract":
                hand.declarer = int(str(data["declarer"]))
            elif event.kind in ("trump_declared", "trump_turned"):
                hand.trump = str(data["suit"])
            elif event.kind == "discarded_cards":
                cards = data["cards"]
                assert isinstance(cards, list)
                hand.discards += [str(c) for c in cards]
            elif event.kind == "conceded":
                hand.conceded = True
            elif event.kind == "card_played":
                assert self.pending is None, where
                seat = int(str(data["seat"]))
                assert seat == hand.to_play(), f"{where}: seat {hand.to_play()} was to play"
                self.pending = hand.play(seat, str(data["card"]))
            elif event.kind == "trick_taken":
                expected = self.pending
                assert expected is not None, where
                self.pending = None
                self.tally.tricks += 1
                reported = (data["cards"], data["seat"], data["points"])
                assert reported == (list(expected.cards), expected.winner, expected.points), (
                    f"{where}: oracle {expected}"
                )
            elif event.kind == "last_trick_bonus":
                assert hand.tricks and hand.tricks[-1].last, where
                assert data["seat"] == hand.last_winner(), where
                assert data["points"] == self.rules.last_trick_bonus, where
            elif event.kind == "hand_result":
                assert self.pending is None, where
                # A hand ends after its last trick unless it was conceded or redealt.
                if hand.tricks or not (hand.conceded or data["bid"] is None):
                    assert len(hand.tricks) == self.rules.tricks_per_hand, where
                assert data["points"] == hand.card_points(), f"{where}: oracle {hand}"
                if hand.conceded:
                    self.tally.hand_ends["conceded"] += 1
                elif not hand.tricks:
                    self.tally.hand_ends["redealt"] += 1
                else:
                    self.tally.hand_ends["with discards" if hand.discards else "played"] += 1
                self.tally.hands += 1
                self.hands_done += 1


def held_cards(state: GameState, seat: int) -> tuple[list[str], list[str]]:
    """The seat's concealed cards and (two-handed) its melded cards on the table, as it sees
    them in its view."""
    hand = view(state, seat)["hand"]
    assert isinstance(hand, dict)
    cards = hand["cards"]
    assert isinstance(cards, list)
    table: list[str] = []
    if "table" in hand:
        tables = hand["table"]
        assert isinstance(tables, list)
        table = list(tables[seat])
    return [str(c) for c in cards], table


def check_position(state: GameState, follower: Follower, context: str) -> None:
    """Every seat's play entries against the oracle's legal cards; every other card the seat to
    play holds refused with the oracle's code; another seat's play refused as NOT_YOUR_TURN."""
    public = view(state, "spectator")["hand"]
    assert isinstance(public, dict)
    hand = follower.hand
    in_play = public["phase"] in ("play", "stock_play")
    for seat in range(state.rules.players):
        entries = [e for e in legal_actions(state, seat) if e["type"] == "play"]
        listed = [str(e["card"]) for e in entries if "card" in e]
        drawn = any(e.get("drawn_card") for e in entries)
        if not in_play:
            assert not entries, f"{context}: seat {seat} may play in phase {public['phase']}"
            continue
        assert hand is not None
        cards, table = held_cards(state, seat)
        expected = hand.legal_cards(seat, cards, table)
        where = f"{context}: seat {seat}, trick {hand.trick}, trump {hand.trump}, cards {cards}"
        assert listed == expected, f"{where}, table {table}: engine {listed}, oracle {expected}"
        assert drawn == hand.lead_may_be_drawn_card(seat), f"{where}: drawn-card lead {drawn}"
        if seat == hand.to_play():
            follower.tally.positions += 1
            follower.tally.table_plays += bool(set(expected) - set(cards))
            for card in sorted(set(cards) - set(expected)):
                code = hand.refusal(seat, cards, card)
                assert code is not None, where
                follower.tally.refusals[code] += 1
                with pytest.raises(IllegalAction) as refused:
                    apply(state, seat, Play(parse_card(card)))
                assert refused.value.code == code, f"{where}: {card} refused as {refused.value}"
        elif cards:
            assert hand.refusal(seat, cards, cards[0]) == "NOT_YOUR_TURN"
            with pytest.raises(IllegalAction) as refused:
                apply(state, seat, Play(parse_card(cards[0])))
            assert refused.value.code == "NOT_YOUR_TURN", f"{where}: {refused.value}"


def compare_game(variant: str, options: dict[str, Any], seed: int, tally: Tally) -> None:
    """Play one random game of ``variant`` for ``HANDS_PER_GAME`` hands, comparing as it goes."""
    context = f"{variant} {options} seed {seed}"
    rules = resolve_options(variant, options)
    game = Game(rules, dealer=seed % rules.players, deals=SeededDeals(f"oracle-play-{seed}"))
    follower = Follower(variant, resolve_play_options(variant, options), tally, context)
    follower.feed(game.events)
    rng = random.Random(seed)
    for _ in range(MAX_ACTIONS):
        state = game.state
        if state.over or follower.hands_done >= HANDS_PER_GAME:
            return
        check_position(state, follower, context)
        if variant == TWO_HANDED:
            seat, action = choose_two_handed(state, rng)
        else:
            seat, action = choose_action(state, rng)
        follower.feed(game.act(seat, decode_action(action)))


@pytest.mark.parametrize("variant", VARIANTS)
def test_engine_plays_as_the_oracle(variant: str) -> None:
    tally = Tally()
    rng = random.Random(f"oracle-play-{variant}")
    for game_index in range(GAMES[variant]):
        options = random_options(variant, rng)
        compare_game(variant, options, 1000 * VARIANTS.index(variant) + game_index, tally)
    # The comparisons reached every rung of the ladder and every hand's end.
    assert tally.hands >= GAMES[variant], tally
    assert tally.tricks >= 8 * GAMES[variant], tally
    assert tally.positions >= PLAYERS[variant] * tally.tricks, tally
    codes = set(PLAY_CODES) - ({MUST_OVERTRUMP} if variant == TWO_HANDED else set())
    assert codes <= set(tally.refusals), tally
    if variant == TWO_HANDED:
        assert tally.table_plays > 0, tally
    if variant in (CUTTHROAT, PARTNERSHIP, DOUBLE_DECK):
        assert tally.hand_ends["with discards"] and tally.hand_ends["conceded"], tally


# --------------------------------------------------------------------------------------------
# Rules queries (A.10 item 5) at random positions: the ladder's rare rungs many times over

QUERY_POSITIONS = 600


def full_deck(deck: int) -> list[str]:
    """A.10 item 4 / §1.1: two copies of every card, or four with no nines in the 80-card deck."""
    ranks = RANKS if deck == 48 else RANKS[:-1]
    return [rank + suit for suit in SUITS for rank in ranks for _ in range(deck // 24)]


def take(rng: random.Random, pool: list[str], wanted: Sequence[str]) -> str | None:
    """Remove and return a random card of ``pool`` that is in ``wanted`` (None if none is)."""
    indices = [i for i, card in enumerate(pool) if card in wanted]
    return pool.pop(pick(rng, indices)) if indices else None


def random_position(
    rules: PlayOptions, rng: random.Random
) -> tuple[list[str], list[str], str, int | None]:
    """A hand, a trick so far, trump and the partner's place in the trick, all from one deck.

    Biased towards the rare rungs: the hand holds one to four suits (so it is often void in the
    suit led), and each card after the lead is a trump, of the suit led or anything, in turn.
    """
    pool = full_deck(rules.deck)
    trump, led = pick(rng, SUITS), pick(rng, SUITS)
    trick: list[str] = []
    for index in range(pick(rng, range(rules.players))):
        if index == 0:
            choice = [c for c in pool if suit_of(c) == led]
        else:
            suit = pick(rng, [trump, led, pick(rng, SUITS)])
            choice = [c for c in pool if suit_of(c) == suit]
        card = take(rng, pool, choice)
        if card is not None:
            trick.append(card)
    suits = sample(rng, SUITS, 1 + pick(rng, range(4)))
    hand: list[str] = []
    for _ in range(1 + pick(rng, range(rules.tricks_per_hand))):
        card = take(rng, pool, [c for c in pool if suit_of(c) in suits])
        if card is not None:
            hand.append(card)
    partner: int | None = None
    if len(trick) >= 2 and rules.partnerships:
        partner = len(trick) - 2  # the seat opposite played two cards before this one
    elif trick and rules.variant == CUTTHROAT and rng.random() < 0.5:
        partner = pick(rng, range(len(trick)))
    return hand, trick, trump, partner


@pytest.mark.parametrize("variant", VARIANTS)
def test_rules_queries_answer_as_the_oracle(variant: str) -> None:
    """The legal_plays, trick_winner and trick_points queries at random positions under random
    option sets, against the oracle (two-handed: both phases)."""
    rng = random.Random(f"oracle-play-queries-{variant}")
    rungs: Counter[str | None] = Counter()
    for _ in range(QUERY_POSITIONS):
        options = random_options(variant, rng)
        rules = resolve_play_options(variant, options)
        hand, trick, trump, partner = random_position(rules, rng)
        query: dict[str, Any] = {
            "kind": "legal_plays",
            "variant": variant,
            "options": options,
            "hand": hand,
            "trick": trick,
            "trump": trump,
        }
        if variant == TWO_HANDED:
            query["phase"] = pick(rng, ["stock", "playoff"])
            expected = two_handed_legal_cards(
                hand, [], trick, trump, rules, query["phase"] == "stock"
            )
        else:
            if partner is not None:
                query["seat_of_partner_in_trick"] = partner
            expected = legal_cards(hand, trick, trump, rules, partner)
            rungs.update(refusal(hand, trick, trump, rules, c, partner) for c in set(hand))
        answer = answer_query(query)
        assert answer == {"legal": expected}, (query, expected)
        whole = trick + hand[: rules.players - len(trick)]
        if len(whole) == rules.players:
            answer = answer_query(
                {"kind": "trick_winner", "variant": variant, "options": options}
                | {"trick": whole, "trump": trump}
            )
            assert answer == {"winner": trick_winner(whole, trump)}, (whole, trump)
        last = rng.random() < 0.5
        answer = answer_query(
            {"kind": "trick_points", "variant": variant, "options": options}
            | {"cards": whole, "last": last}
        )
        points = card_points(whole, rules.count_scheme) + (rules.last_trick_bonus if last else 0)
        assert answer == {"points": points}, (whole, options)
    if variant != TWO_HANDED:
        assert set(PLAY_CODES) <= set(rungs), rungs


# --------------------------------------------------------------------------------------------
# The oracle itself against RULES.md §10.4 (hearts trump)

DEFAULTS = resolve_play_options(PARTNERSHIP, {})
HOYLE = resolve_play_options(TWO_HANDED, {"head_rule": "trump_lead_only"})
TWO_HANDED_DEFAULTS = resolve_play_options(TWO_HANDED, {})


@pytest.mark.parametrize(
    ("trick", "hand", "partner_index", "legal"),
    [
        (["10C"], ["AC", "9C", "KH"], None, ["AC"]),  # L1
        (["10C"], ["10C", "9C", "KH"], None, ["10C", "9C"]),  # L2
        (["10C", "QH"], ["KC", "9C", "AH"], None, ["KC", "9C"]),  # L3
        (["10C", "QH"], ["KH", "JH", "AS"], None, ["KH"]),  # L4
        (["10C", "QH"], ["JH", "AS"], None, ["JH"]),  # L5
        (["10C", "QH"], ["AS", "9D"], None, ["AS", "9D"]),  # L6
        (["JH"], ["AH", "9H", "AC"], None, ["AH"]),  # L7
        (["JH"], ["9H", "AC"], None, ["9H"]),  # L8
        (["KC", "AC"], ["AC", "10C"], 1, ["AC", "10C"]),  # L9
        (["9C", "KC"], ["AC", "QC"], 1, ["AC"]),  # L10
    ],
)
def test_oracle_legal_plays_of_the_vectors(
    trick: list[str], hand: list[str], partner_index: int | None, legal: list[str]
) -> None:
    assert legal_cards(hand, trick, "H", DEFAULTS, partner_index) == legal


def test_oracle_two_handed_vectors() -> None:
    """L11-L14: free play while the stock lasts, strict play-off, Hoyle's heading on trump leads
    only."""
    anything = ["AH", "9C", "QS", "JD"]
    assert two_handed_legal_cards(anything, [], ["10S"], "H", TWO_HANDED_DEFAULTS, True) == [
        "QS",
        "AH",
        "JD",
        "9C",
    ]
    strict = TWO_HANDED_DEFAULTS
    assert two_handed_legal_cards(["AS", "9S", "9H"], [], ["10S"], "H", strict, False) == ["AS"]
    assert two_handed_legal_cards(["9H", "AD"], [], ["10S"], "H", strict, False) == ["9H"]
    assert two_handed_legal_cards(["AS", "9S"], [], ["10S"], "H", HOYLE, False) == ["AS", "9S"]
