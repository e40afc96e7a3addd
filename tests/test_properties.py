"""Random-game conformance properties for every playable variant (STYLE.md: OpenSpiel-style).

Hypothesis draws a variant, an options object and two seeds (the deals and the policy); the game is
played to its end by a policy that chooses among *every* seat's legal actions. Each test class
states one claim; the checks run on every state the game passes through.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

import pytest
from hypothesis import event as note_event
from hypothesis import example, given, settings
from hypothesis import strategies as st

from referee.audit import audit_record, verdict_exit_status
from referee.engine.actions import decode_action, encode_action
from referee.engine.engine import apply, legal_actions, matches, new_game, start_hand
from referee.engine.errors import IllegalAction
from referee.engine.events import ADJUDICATOR, EVERYONE, SEALED, Event, visible_to
from referee.engine.game import Game, GivenDeals, replay
from referee.engine.state import GameState, HandState
from referee.engine.views import SPECTATOR, view
from referee.rules.cards import (
    canonical_deck,
    deck_faces,
    format_card,
    format_cards,
    parse_card,
    parse_cards,
    parse_suit,
)
from referee.rules.dealing import Deal
from referee.rules.options import OptionError, RuleSet, resolve_options
from referee.rules.scoring import SaveRule, score_hand
from referee.rules.tricks import trick_winner
from tests.strategies import (
    PLAYABLE_VARIANTS,
    Step,
    concretize,
    make_game,
    pick,
    play_random_game,
    random_game,
    sample,
    variant_options,
)

MAX_ACTIONS = 1000
SEEDS = st.integers(min_value=0, max_value=10**9)
MANY_GAMES = settings(max_examples=300, deadline=None)
GAMES = settings(max_examples=60, deadline=None)
FEW_GAMES = settings(max_examples=30, deadline=None)

# A small target per variant so the fixed-seed games below finish in a few hands.
SMALL_TARGETS: dict[str, dict[str, Any]] = {
    "cutthroat": {"target": 100},
    "partnership": {"target": 150},
    "double-deck": {"target": 40},
    "partnership-no-bid": {"target": 300},
}

CARD_TEXT = re.compile(r"(?<![0-9A-Za-z])(?:A|10|K|Q|J|9)[SHDC](?![0-9A-Za-z])")

# Card values by rank (A 10 K Q J 9), typed in from RULES.md §1.6 / OPTIONS.md count_scheme.
SCHEME_VALUES = {
    "modern10": (10, 10, 10, 0, 0, 0),
    "simple_10_5": (10, 10, 5, 5, 0, 0),
    "classic_11": (11, 10, 4, 3, 2, 0),
    "points1": (1, 1, 1, 0, 0, 0),
    "points1_single": (1, 1, 1, 0, 0, 0),
    "points1_double": (1, 1, 1, 0, 0, 0),
}

# The action types each phase accepts from the seat to act (A.7 item 1); others: WRONG_PHASE.
PHASE_TYPES = {
    "auction": {"bid", "pass", "bid_or_redeal"},
    "trump": {"declare_trump"},
    "partner_pass": {"pass_cards"},
    "declarer_pass": {"pass_cards"},
    "kitty_discard": {"discard"},
    "meld": {"meld", "exchange_dix"},
    "bury": {"discard"},
    "play": {"play"},
}
COVERAGE_EVENTS = {
    "widow_taken",
    "kitty_taken",
    "cards_passed",
    "cards_discarded",
    "dix_exchanged",
    "conceded",
    "redeal",
    "last_trick_bonus",
    "game_over",
}
# The fields each action type takes besides its type (A.4, whole-hand meld phases).
ACTION_FIELDS = {
    "bid": {"amount"},
    "pass": {"help"},
    "bid_or_redeal": set(),
    "declare_trump": {"suit"},
    "pass_cards": {"cards"},
    "discard": {"cards"},
    "meld": {"cards", "melds", "points"},
    "exchange_dix": set(),
    "concede": set(),
    "draw": {"turn_up"},
    "play": {"card"},
}
PLAY_CODES = {"MUST_FOLLOW_SUIT", "MUST_HEAD_TRICK", "MUST_TRUMP", "MUST_OVERTRUMP"}


# --------------------------------------------------------------------------------------------
# Helpers: card strings, public and private knowledge


def card_strings(obj: object) -> Iterator[str]:
    """Every card in A.3 notation inside a JSON value, standing alone or within a longer string."""
    if isinstance(obj, str):
        yield from CARD_TEXT.findall(obj)
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            yield from card_strings(key)
            yield from card_strings(value)
    elif isinstance(obj, list | tuple):
        for item in obj:
            yield from card_strings(item)


def names(cards: Iterable[int]) -> set[str]:
    return {format_card(c) for c in cards}


def public_cards(state: GameState, hand: HandState) -> set[str]:
    """Cards every role may see now (A.10 item 3): played, shown in meld, the cutthroat widow once
    taken, the turned-up trump card (and the 9 put in its place by a dix exchange)."""
    cards = set(hand.trick) | {c for t in hand.tricks for c in t.cards}
    for record in hand.melds:
        if record is not None:
            cards |= set(record.shown)
    if hand.widow_taken and state.rules.variant == "cutthroat":
        cards |= set(hand.deal.widow)
    for turned in (hand.turn_up, hand.deal.turn_up):
        if turned is not None:
            cards.add(turned)
    return names(cards)


def private_cards(state: GameState, hand: HandState, seat: int) -> set[str]:
    """What ``seat`` alone knows now: its hand, the cards passed to it, a kitty it took and its
    own discards."""
    cards = set(hand.hands[seat]) | set(hand.received[seat])
    if seat == hand.declarer:
        if hand.widow_taken:
            cards |= set(hand.deal.widow)
        cards |= set(hand.discards)
    return names(cards)


def reference_winner(cards: Sequence[int], trump: int) -> int:
    """§1.3 written independently: the highest trump, else the highest card of the suit led; of
    identical cards the first played wins."""
    led = cards[0] // 6

    def strength(card: int) -> tuple[int, int]:
        suit = card // 6
        return (2 if suit == trump else 1 if suit == led else 0, -(card % 6))

    best = max(strength(c) for c in cards)
    return next(i for i, c in enumerate(cards) if strength(c) == best)


def card_values(state: GameState) -> list[int]:
    ranks = SCHEME_VALUES[state.rules.count_scheme]
    return [ranks[c % 6] for c in range(24)]


def total_in_play(state: GameState) -> int:
    values = card_values(state)
    copies = 4 if state.rules.deck == 80 else 2
    return copies * sum(values[c] for c in deck_faces(state.rules.deck)) + (
        state.rules.last_trick_bonus
    )


def start(variant: str, options: dict[str, Any], seed: int) -> Game:
    return make_game(variant, options, f"prop-{seed}")


def run(variant: str, options: dict[str, Any], seed: int, rng_seed: int) -> tuple[Game, list[Step]]:
    """Play a whole random game (or MAX_ACTIONS of it); returns it and its steps."""
    steps: list[Step] = []
    game = play_random_game(variant, options, f"prop-{seed}", rng_seed, MAX_ACTIONS, steps.append)
    return game, steps


# --------------------------------------------------------------------------------------------
# Cards, tricks and points


def check_cards_conserved(state: GameState) -> None:
    hand = state.hand
    if hand is None:
        assert state.over, "between hands only when the game is over (Game deals at once)"
        return
    cards = [c for held in hand.hands for c in held]
    cards += list(hand.trick) + [c for t in hand.tricks for c in t.cards] + list(hand.discards)
    if not hand.widow_taken:
        cards += hand.deal.widow
    assert Counter(cards) == Counter(canonical_deck(state.rules.deck)), (
        f"hand {hand.number} phase {hand.phase}: the cards are not one whole deck"
    )
    if hand.phase == "play":
        # Every seat holds the same number of cards once its play to this trick is counted.
        n = state.rules.players
        played = {(hand.trick_leader + i) % n for i in range(len(hand.trick))}
        left = {len(held) + (seat in played) for seat, held in enumerate(hand.hands)}
        assert left == {state.rules.hand_size - len(hand.tricks)}, (hand.number, left)


def expected_winner(
    rules: RuleSet, scores: Sequence[int], declaring: int | None, target: int
) -> int | None:
    """A.7 item 9 and OPTIONS.md (target, margin_win, both_reach), read independently."""
    reached = [side for side, score in enumerate(scores) if score >= target]
    if len(reached) == 1:
        return reached[0]
    if rules.margin_win:
        lead = scores[0] - scores[1]
        if lead >= target:
            return 0
        if -lead >= target:
            return 1
    if len(reached) < 2:
        return None
    if rules.both_reach == "bidder_wins" and declaring in reached:
        return declaring
    best = max(scores[side] for side in reached)
    leaders = [side for side in reached if scores[side] == best]
    return leaders[0] if len(leaders) == 1 else None


class HandLedger:
    """Rebuilds every hand from the public event stream and checks it: the dealer rotation, the
    auction (rising bids, the contract to the last bidder), the meld order, every trick (one card
    per seat in turn order from its leader, the §1.3 winner, the §1.6 points), the card points of
    a played-out hand against the scheme's total, each side's delta and the game end (A.7)."""

    def __init__(self, state: GameState) -> None:
        self.rules = state.rules
        self.first_dealer = state.first_dealer
        self.target = state.target
        self.values = card_values(state)
        self.total = total_in_play(state)
        assert state.setup.total_in_play == self.total
        self.scores = [0] * len(state.scores)
        self.hands_seen = 0
        self.hand_number: int | None = None
        self.game_over = False

    def _new_hand(self, data: Mapping[str, Any]) -> None:
        assert data["hand"] == self.hands_seen, "hands are numbered 0, 1, 2, ..."
        self.hands_seen += 1
        self.hand_number = data["hand"]
        self.dealer = data["dealer"]
        assert self.dealer == (self.first_dealer + data["hand"]) % self.rules.players
        self.calls: list[Mapping[str, Any]] = []
        self.melders: list[int] = []
        self.declarer: int | None = None
        self.trump: int | None = None
        self.plays: list[tuple[int, str]] = []
        self.tricks: list[tuple[int, list[str], int, int]] = []
        self.side_points = [0] * len(self.scores)

    def feed(self, events: Sequence[Event], step: Step | None = None) -> None:
        n = self.rules.players
        for event in events:
            data: Mapping[str, Any] = event.data
            kind = event.kind
            assert not self.game_over, f"{kind} after game_over"
            if kind == "hand_started":
                self._new_hand(data)
            elif kind == "call":
                self._call(data)
            elif kind == "contract":
                bids = [c for c in self.calls if c["type"] == "bid"]
                assert bids and data["declarer"] == bids[-1]["seat"]
                assert data["bid"] == bids[-1]["amount"]
                passed = {c["seat"] for c in self.calls if c["type"] == "pass"}
                assert passed == set(range(n)) - {data["declarer"]}
                self.declarer = data["declarer"]
            elif kind == "meld_scored":
                first = self.declarer if self.declarer is not None else (self.dealer + 1) % n
                assert data["seat"] == (first + len(self.melders)) % n, "meld out of order"
                self.melders.append(data["seat"])
            elif kind in ("trump_declared", "trump_turned"):
                self.trump = parse_suit(data["suit"])
            elif kind == "card_played":
                assert step is not None and data["seat"] == step.seat
                assert self.trump is not None, "a card is played before trump is known"
                if self.plays:
                    expected = (self.plays[-1][0] + 1) % n
                elif self.tricks:
                    expected = self.tricks[-1][2]
                elif self.declarer is not None:
                    expected = self.declarer
                else:
                    expected = (self.dealer + 1) % n
                assert data["seat"] == expected, f"seat {data['seat']} played; {expected} was due"
                self.plays.append((data["seat"], data["card"]))
            elif kind == "trick_taken":
                self._trick(data)
            elif kind == "last_trick_bonus":
                assert len(self.tricks) == self.rules.hand_size
                assert data["seat"] == self.tricks[-1][2]
                assert data["points"] == self.rules.last_trick_bonus
            elif kind == "hand_result":
                assert step is not None
                self._result(data, step)
            elif kind == "game_over":
                assert data["scores"] == self.scores
                self.game_over = True

    def _call(self, data: Mapping[str, Any]) -> None:
        n = self.rules.players
        seat = data["seat"]
        if not self.calls:
            assert seat == (self.dealer + 1) % n, "the dealer's left calls first"
        out = {c["seat"] for c in self.calls if c["type"] == "pass"}
        assert seat not in out, f"seat {seat} called after passing"
        if data["type"] == "bid":
            amount = data["amount"]
            assert amount >= self.rules.min_bid
            standing = [c["amount"] for c in self.calls if c["type"] == "bid"]
            if standing:
                raise_ = amount - standing[-1]
                assert raise_ > 0 and raise_ % self.rules.step_at(standing[-1]) == 0
                assert self.rules.max_raise is None or raise_ <= self.rules.max_raise
        self.calls.append(data)

    def _trick(self, data: Mapping[str, Any]) -> None:
        n = self.rules.players
        assert self.trump is not None
        seats = [seat for seat, _ in self.plays]
        cards = [card for _, card in self.plays]
        assert len(seats) == n and len(set(seats)) == n, f"a trick of {seats}"
        assert data["cards"] == cards
        ints = [parse_card(c) for c in cards]
        index = reference_winner(ints, self.trump)
        assert trick_winner(ints, self.trump) == index, (cards, self.trump)
        winner = (seats[0] + index) % n
        assert data["seat"] == winner, f"trick {cards}: seat {data['seat']} took it, not {winner}"
        last = len(self.tricks) + 1 == self.rules.hand_size
        points = sum(self.values[c] for c in ints) + (self.rules.last_trick_bonus if last else 0)
        assert data["points"] == points, (cards, data["points"], points)
        self.tricks.append((seats[0], cards, winner, points))
        self.side_points[winner % 2 if self.rules.partnerships else winner] += points
        self.plays = []

    def _result(self, data: Mapping[str, Any], step: Step) -> None:
        hand = step.before.hand
        assert hand is not None and hand.number == self.hand_number
        assert data["declarer"] == self.declarer
        redeal = self.rules.bidding and data["bid"] is None
        if redeal:
            assert data["delta"] == [0] * len(self.scores) and not self.tricks
        elif data["conceded"]:
            assert data["points"] == [0] * len(self.scores)
            assert len(self.tricks) == 0, "a concession after play began"
        else:
            assert len(self.tricks) == self.rules.hand_size, "the hand ended before its last trick"
            expected = list(self.side_points)
            if hand.discards:
                declaring = self._declaring_side()
                assert declaring is not None
                expected[declaring] += sum(self.values[c] for c in hand.discards)
            assert data["points"] == expected
            assert sum(data["points"]) == self.total, "card points do not add up to the deck's"
        self._check_delta(data)
        self.scores = [a + b for a, b in zip(self.scores, data["delta"], strict=True)]
        assert data["scores"] == self.scores
        winner = expected_winner(self.rules, self.scores, self._declaring_side(), self.target)
        assert step.after.winner == winner, (self.scores, step.after.winner, winner)

    def _declaring_side(self) -> int | None:
        if self.declarer is None:
            return None
        return self.declarer % 2 if self.rules.partnerships else self.declarer

    def _check_delta(self, data: Mapping[str, Any]) -> None:
        """Bounds every scoring rule keeps: a side scores its card points and at most its meld
        on top; the declaring side makes its bid or loses it; a concession pays the others their
        meld only."""
        sides = len(self.scores)
        meld = [0] * sides
        for seat, points in enumerate(data["meld"]):
            meld[seat % 2 if self.rules.partnerships else seat] += points
        declaring = self._declaring_side()
        for side in range(sides):
            delta = data["delta"][side]
            if self.rules.bidding and data["bid"] is None:
                assert delta == 0
            elif side == declaring and (data["conceded"] or delta < data["bid"]):
                assert delta == -data["bid"], (side, data)
            elif data["conceded"]:
                assert delta in (0, meld[side]), (side, data)
            else:
                points = data["points"][side]
                assert points <= delta <= points + meld[side], (side, data)
        if declaring is not None:
            # A.7 item 8: the meld before save rules (min_meld_to_record included).
            hopeless = data["bid"] - meld[declaring] > self.total
            assert data["hopeless"] is hopeless, data

    def check_state(self, state: GameState) -> None:
        """The state's completed tricks are the ones the events told."""
        hand = state.hand
        if hand is None or hand.number != self.hand_number:
            return
        told = [(t.leader, format_cards(t.cards), t.winner, t.points) for t in hand.tricks]
        assert told == [(a, list(b), c, d) for a, b, c, d in self.tricks]
        assert [seat for seat, _ in self.plays] == [
            (hand.trick_leader + i) % state.rules.players for i in range(len(hand.trick))
        ]
        assert list(hand.side_points) == self.side_points


def check_someone_can_act(state: GameState) -> None:
    if state.over:
        assert all(not legal_actions(state, s) for s in range(state.rules.players))
        return
    hand = state.hand
    assert hand is not None
    entries = {s: legal_actions(state, s) for s in range(state.rules.players)}
    assert any(entries.values()), f"nobody can act in phase {hand.phase}"
    for seat, listed in entries.items():
        if seat != hand.turn:
            assert all(e["type"] == "concede" for e in listed), (seat, hand.turn, listed)
        for entry in listed:
            assert entry["type"] == "concede" or entry["type"] in PHASE_TYPES[hand.phase]


def check_game_end(state: GameState, scores: list[int]) -> None:
    assert list(state.scores) == scores
    assert state.over == (state.winner is not None)
    if state.over:
        assert state.hand is None


class TestRandomGames:
    """Every state of a random legal game keeps the deck whole, every trick has one card from each
    seat in turn order and goes to the §1.3 winner, a played-out hand's card points add up to the
    scheme's total, some seat can always act until the game is over, and every action makes an
    event of its own (each log row holds one at least: WatchGame's reads of the log count rows
    by events, ``referee.service.games._rows_not_wanted``)."""

    @staticmethod
    def _check(variant: str, options: dict[str, Any], seed: int, rng_seed: int) -> Game:
        game = start(variant, options, seed)
        ledger = HandLedger(game.state)
        ledger.feed(game.events)
        check_cards_conserved(game.state)
        check_someone_can_act(game.state)
        for step in random_game(game, random.Random(rng_seed), MAX_ACTIONS):
            # The action's own events come first, before any next hand's deal.
            assert step.events and step.events[0].kind != "hand_started", step.action
            ledger.feed(step.events, step)
            check_cards_conserved(step.after)
            ledger.check_state(step.after)
            check_someone_can_act(step.after)
        check_game_end(game.state, ledger.scores)
        assert ledger.game_over == game.state.over
        return game

    @staticmethod
    def _label(game: Game) -> None:
        """Tell hypothesis what the game went through (see --hypothesis-show-statistics)."""
        kinds = {e.kind for e in game.events}
        for kind in sorted(kinds & COVERAGE_EVENTS):
            note_event(f"{game.state.rules.variant}: {kind}")
        results = [e.data for e in game.events if e.kind == "hand_result"]
        if any(r["conceded"] for r in results):
            note_event("a hand conceded")
        if any(r["bid"] is None and r["declarer"] is None for r in results):
            note_event("a redeal (or a no-bid hand)")
        note_event("game over" if game.state.over else "capped")

    @given(variant_options(), SEEDS, SEEDS)
    @MANY_GAMES
    # Found by this property: a cutthroat declarer whose scored melds held 16 of its 18 cards
    # had no legal bury (three to bury, two free); now any card may then be buried.
    @example(
        vo=(
            "cutthroat",
            {
                "last_trick_bonus": 0,
                "trump_requires_marriage": True,
                "min_bid": 100,
                "bid_step": 10,
                "target": 100,
            },
        ),
        seed=1594,
        rng=678466,
    )
    def test_invariants_hold(self, vo: tuple[str, dict[str, Any]], seed: int, rng: int) -> None:
        self._label(self._check(*vo, seed, rng))

    @pytest.mark.parametrize("variant", PLAYABLE_VARIANTS)
    def test_defaults_with_a_small_target(self, variant: str) -> None:
        finished = 0
        for seed in range(6):
            game = self._check(variant, SMALL_TARGETS[variant], seed, seed)
            finished += game.state.over
        # A random policy may sink every side below zero for ever; most games still end.
        assert finished >= 4, f"only {finished} of 6 {variant} games reached the target"


# --------------------------------------------------------------------------------------------
# Legal actions against apply


def well_formed(action: Mapping[str, object]) -> bool:
    """No field that the action's type does not take (A.4), two-handed's meld ``name`` included."""
    kind = action.get("type")
    return isinstance(kind, str) and not set(action) - {"type"} - ACTION_FIELDS.get(kind, set())


def allowed_by(entries: Sequence[Mapping[str, object]], action: Mapping[str, object]) -> bool:
    """A.10 item 2 read independently of ``engine.matches``."""
    if not well_formed(action):
        return False
    for entry in entries:
        kind = entry["type"]
        if action.get("type") != kind:
            continue
        if kind == "bid":
            amount, low, step, high = action["amount"], entry["min"], entry["step"], entry["max"]
            assert isinstance(amount, int) and isinstance(low, int) and isinstance(step, int)
            assert high is None or isinstance(high, int)
            if amount >= low and (amount - low) % step == 0 and (high is None or amount <= high):
                return True
        elif kind in ("pass_cards", "discard", "meld"):
            cards = action["cards"]
            assert isinstance(cards, list)
            source = entry["from"]
            assert isinstance(source, list)
            if ("count" not in entry or len(cards) == entry["count"]) and not (
                Counter(cards) - Counter(source)
            ):
                return True
        elif kind == "pass":
            if bool(action.get("help")) == bool(entry.get("help")):
                return True
        elif dict(action) == dict(entry):
            return True
    return False


def candidate_actions(
    state: GameState, listed: Mapping[int, list[dict[str, object]]], rng: random.Random
) -> list[tuple[int, dict[str, object]]]:
    """Listed actions made concrete, plus near misses around them for every seat."""
    hand = state.hand
    assert hand is not None
    rules = state.rules
    n = rules.players
    every_face = [format_card(c) for c in range(24)]
    out: list[tuple[int, dict[str, object]]] = []
    for seat, entries in listed.items():
        for entry in entries:
            kind = entry["type"]
            tries = 3 if kind in ("bid", "pass_cards", "discard", "meld") else 1
            out += [(seat, concretize(entry, rng)) for _ in range(tries)]
            if kind != "concede":  # the same action from every other seat
                out += [(other, concretize(entry, rng)) for other in range(n) if other != seat]
            if kind == "bid":
                low, step, high = entry["min"], entry["step"], entry["max"]
                assert isinstance(low, int) and isinstance(step, int)
                amounts = {low, low - 1, low - step, low + 1, low + step, rules.min_bid - 1}
                if isinstance(high, int):
                    amounts |= {high, high + 1, high + step}
                out += [(seat, {"type": "bid", "amount": a}) for a in sorted(amounts)]
    for seat in range(n):
        held = format_cards(hand.hands[seat])
        missing = [c for c in every_face if c not in held]
        out += [
            (seat, {"type": "concede"}),
            (seat, {"type": "exchange_dix"}),
            (seat, {"type": "pass"}),
            (seat, {"type": "pass", "help": True}),
            (seat, {"type": "pass", "help": False}),
            (seat, {"type": "bid_or_redeal"}),
            (seat, {"type": "draw", "turn_up": True}),  # two-handed only: WRONG_PHASE here
            (seat, {"type": "bid", "amount": max(rules.min_bid, 1)}),
        ]
        out += [(seat, {"type": "declare_trump", "suit": s}) for s in "SHDC"]
        out += [(seat, {"type": "play", "card": c}) for c in every_face]
        for kind in ("pass_cards", "discard"):
            count = rules.exchange_count if kind == "pass_cards" else len(hand.deal.widow)
            for k in {count - 1, count, count + 1}:
                if 0 <= k <= len(held):
                    out.append((seat, {"type": kind, "cards": sample(rng, held, k)}))
            if missing and 1 <= count <= len(held) + 1:
                cards = [*sample(rng, held, count - 1), missing[0]]
                out.append((seat, {"type": kind, "cards": cards}))
        out.append((seat, {"type": "meld", "cards": [c for c in held if rng.random() < 0.5]}))
        if missing:
            out.append((seat, {"type": "meld", "cards": [*held[:2], pick(rng, missing)]}))
        out.append((seat, {"type": "meld", "name": "dix", "cards": held[:1]}))  # malformed
        if held:  # one copy more than held
            out.append((seat, {"type": "meld", "cards": [held[0]] * (held.count(held[0]) + 1)}))
    return out


def expected_refusal(
    state: GameState, seat: int, action: Mapping[str, Any], error: IllegalAction
) -> None:
    """The A.5 code of a refused action is the first that applies (the cases we can tell)."""
    hand = state.hand
    assert hand is not None
    rules = state.rules
    kind = action["type"]
    code = error.code
    if (kind == "pass" and action.get("help") and not rules.allow_pass_with_help) or (
        kind == "meld" and "name" in action
    ):
        assert code == "MALFORMED_ACTION"  # the first code of A.5, before turn and phase
        return
    if kind == "concede":
        assert code in ("WRONG_PHASE", "CONCEDE_NOT_ALLOWED")
        return
    if seat != hand.turn:
        assert code == "NOT_YOUR_TURN", (seat, hand.turn, action, code)
        return
    if kind not in PHASE_TYPES[hand.phase] or (kind == "exchange_dix" and rules.bidding):
        assert code == "WRONG_PHASE", (hand.phase, action, code)
        return
    held = format_cards(hand.hands[seat])
    if kind == "play":
        card = action["card"]
        if card not in held:
            assert code == "CARD_NOT_IN_HAND"
            return
        assert code in PLAY_CODES, code
        led = hand.trick[0] // 6
        suit = parse_card(card) // 6
        has_led = any(c // 6 == led for c in hand.hands[seat])
        if code == "MUST_FOLLOW_SUIT":
            assert has_led and suit != led
        elif code == "MUST_HEAD_TRICK":
            assert suit == led
        elif code == "MUST_TRUMP":
            assert not has_led and suit != hand.trump
        else:
            assert not has_led and suit == hand.trump
    elif kind == "bid":
        amount = action["amount"]
        if amount < rules.min_bid or (hand.high_bid is not None and amount <= hand.high_bid):
            assert code == "BID_TOO_LOW", (amount, code)
        else:
            assert code == "BID_BAD_RAISE", (amount, code)
    elif kind in ("pass_cards", "discard"):
        if Counter(action["cards"]) - Counter(held):
            assert code == "CARD_NOT_IN_HAND"
        else:
            assert code in ("WRONG_CARD_COUNT", "CANNOT_BURY_MELD"), code
            count = rules.exchange_count if kind == "pass_cards" else len(hand.deal.widow)
            assert (code == "WRONG_CARD_COUNT") == (len(action["cards"]) != count)
    elif kind == "meld":
        assert code == "CARD_NOT_IN_HAND"
    elif kind == "pass":
        assert code == "DEALER_MUST_BID"


def check_actions_against_apply(state: GameState, rng: random.Random) -> int:
    """Every listed action (made concrete) is accepted; every unlisted one is refused with
    IllegalAction and the code A.5 gives; messages quote no other seat's concealed card."""
    if state.over:
        return 0
    hand = state.hand
    assert hand is not None
    listed = {s: legal_actions(state, s) for s in range(state.rules.players)}
    public = public_cards(state, hand)
    tried = 0
    for seat, action in candidate_actions(state, listed, rng):
        allowed = allowed_by(listed[seat], action)
        if well_formed(action):  # engine.matches reads the fields an entry names, no others
            assert allowed == any(matches(e, action) for e in listed[seat]), (seat, action)
        try:
            new_state, _ = apply(state, seat, decode_action(action))
        except IllegalAction as error:
            assert not allowed, f"seat {seat} {action} is listed but refused: {error.to_json()}"
            expected_refusal(state, seat, action, error)
            quoted = set(CARD_TEXT.findall(error.message))
            sent = set(card_strings(action))
            leaked = quoted - sent - public - private_cards(state, hand, seat)
            assert not leaked, f"message {error.message!r} reveals {leaked}"
        else:
            assert allowed, f"seat {seat} {action} is not listed but was accepted"
            assert new_state.version == state.version + 1
        tried += 1
    return tried


class TestLegalActionsAgreeWithApply:
    """An action is accepted by ``apply`` exactly when it matches a ``legal_actions`` entry
    (A.10 item 2): listed ones are accepted, unlisted near misses (wrong seat, a bid off the
    window, an unlisted card, a wrong count, a card not held) are refused with their A.5 code."""

    @given(variant_options(), SEEDS, SEEDS)
    @FEW_GAMES
    def test_listed_accepted_unlisted_refused(
        self, vo: tuple[str, dict[str, Any]], seed: int, rng_seed: int
    ) -> None:
        game = start(*vo, seed)
        rng = random.Random(rng_seed + 1)
        tried = check_actions_against_apply(game.state, rng)
        for step in random_game(game, random.Random(rng_seed), MAX_ACTIONS):
            if rng.random() < 0.25 or step.after.hand is None or step.after.hand.phase != "play":
                tried += check_actions_against_apply(step.after, rng)
        assert tried > 0

    @given(variant_options(), SEEDS, SEEDS)
    @FEW_GAMES
    def test_a_refused_action_changes_nothing(
        self, vo: tuple[str, dict[str, Any]], seed: int, rng_seed: int
    ) -> None:
        game = start(*vo, seed)
        rng = random.Random(rng_seed)
        for _ in random_game(game, random.Random(rng_seed), MAX_ACTIONS):
            state = game.state
            if state.over:
                break
            listed = {s: legal_actions(state, s) for s in range(state.rules.players)}
            refused = [
                (seat, action)
                for seat, action in candidate_actions(state, listed, rng)
                if not allowed_by(listed[seat], action)
            ]
            seat, bad = pick(rng, refused)
            action = decode_action(bad)  # well formed as JSON; refused by the rules
            before, log, events = state, len(game.log), len(game.events)
            with pytest.raises(IllegalAction):
                game.act(seat, action)
            assert game.state is before and len(game.log) == log and len(game.events) == events


# --------------------------------------------------------------------------------------------
# Replay


class TestReplay:
    """Folding the log through ``start_hand`` and ``apply`` rebuilds the live state, and the same
    events in the same order."""

    @given(variant_options(), SEEDS, SEEDS)
    @GAMES
    def test_replay_equals_live_state(
        self, vo: tuple[str, dict[str, Any]], seed: int, rng_seed: int
    ) -> None:
        game, _ = run(*vo, seed, rng_seed)
        rules, dealer = game.state.rules, game.state.first_dealer
        assert replay(rules, dealer, game.log) == game.state
        state = new_game(rules, dealer)
        events: list[Event] = []
        for entry in game.log:
            if entry.deal is not None:
                state, more = start_hand(state, entry.deal)
            else:
                assert entry.seat is not None and entry.action is not None
                state, more = apply(state, entry.seat, entry.action)
            events += more
        assert state == game.state
        assert [e.serialize() for e in events] == [e.serialize() for e in game.events]

    @given(variant_options(), SEEDS, SEEDS)
    @FEW_GAMES
    def test_replay_of_any_prefix(
        self, vo: tuple[str, dict[str, Any]], seed: int, rng_seed: int
    ) -> None:
        game = start(*vo, seed)
        snapshots = [(len(game.log), game.state)]
        for step in random_game(game, random.Random(rng_seed), MAX_ACTIONS):
            snapshots.append((len(game.log), step.after))
        length, state = snapshots[random.Random(seed).randrange(len(snapshots))]
        assert replay(state.rules, state.first_dealer, game.log[:length]) == state


# --------------------------------------------------------------------------------------------
# Hidden information


def check_views(state: GameState) -> None:
    hand = state.hand
    spectator = view(state, SPECTATOR)
    assert json.loads(json.dumps(spectator)) == spectator
    if hand is None:
        assert spectator["hand"] is None
        assert not list(card_strings(spectator))
        return
    public = public_cards(state, hand)
    shown = set(card_strings(spectator))
    assert shown <= public, f"the spectator sees {sorted(shown - public)}"
    spectator_hand = spectator["hand"]
    assert isinstance(spectator_hand, dict)
    assert not {"cards", "received", "kitty", "discards", "hands", "deal"} & set(spectator_hand)
    for seat in range(state.rules.players):
        seen = view(state, seat)
        assert json.loads(json.dumps(seen)) == seen
        known = public | private_cards(state, hand, seat)
        leaked = set(card_strings(seen)) - known
        assert not leaked, f"seat {seat} sees {sorted(leaked)} in phase {hand.phase}"
        own = seen["hand"]
        assert isinstance(own, dict)
        assert own["cards"] == format_cards(hand.hands[seat])
        assert own["received"] == format_cards(hand.received[seat])
        assert own["hand_sizes"] == [len(h) for h in hand.hands]
        assert "hands" not in own and "deal" not in own
        # A seat's view is the spectator's plus that seat's own cards, nothing else differs.
        extra = set(own) - set(spectator_hand)
        assert extra <= {"cards", "received", "kitty", "discards"}, extra
        for key, value in spectator_hand.items():
            assert own[key] == value, key
        for key, value in spectator.items():
            if key not in ("role", "hand"):
                assert seen[key] == value, key
    judge = view(state, ADJUDICATOR)
    judge_hand = judge["hand"]
    assert isinstance(judge_hand, dict)
    assert judge_hand["hands"] == [format_cards(h) for h in hand.hands]


def event_knowledge(state: GameState, hand: HandState, role: int | str) -> set[str]:
    known = public_cards(state, hand)
    if isinstance(role, int):
        known |= private_cards(state, hand, role) | names(hand.deal.hands[role])
    return known


def check_events(step_before: GameState, step: Step | None, events: Sequence[Event]) -> None:
    """Events a seat or a spectator may see before the hand ends show no card it may not know."""
    after = step.after if step is not None else step_before
    roles: list[int | str] = [*range(after.rules.players), SPECTATOR]
    split = next((i for i, e in enumerate(events) if e.kind == "hand_started"), len(events))
    ended = next((i for i, e in enumerate(events) if e.kind == "hand_result"), None)
    for event in events:
        assert event.audience in (EVERYONE, SEALED, ADJUDICATOR) or (
            isinstance(event.audience, int) and 0 <= event.audience < after.rules.players
        )
    chunks: list[tuple[HandState, Sequence[Event], set[str]]] = []
    if step is not None and split > 0:
        old = step.before.hand
        assert old is not None
        if ended is not None:  # the action ended the hand: judge by the hand as it was
            assert ended < split
            chunks.append((old, events[:ended], set(card_strings(step.action))))
            for event in events[ended:split]:
                assert event.kind in ("hand_result", "deal_revealed", "game_over"), event.kind
        else:
            assert after.hand is not None
            chunks.append((after.hand, events[:split], set()))
    if split < len(events):
        assert after.hand is not None and after.hand.number == events[split].data["hand"]
        chunks.append((after.hand, events[split:], set()))
    for hand, chunk, extra in chunks:
        for role in roles:
            known = event_knowledge(after, hand, role) | extra
            for event in chunk:
                if not visible_to(event, role, hand_ended=False):
                    assert event.audience != EVERYONE
                    continue
                leaked = set(card_strings(event.to_json())) - known
                assert not leaked, f"{role} sees {sorted(leaked)} in {event.kind}"


class TestHiddenInformation:
    """No seat's view or visible event shows another seat's concealed card, spectators see only
    public cards, and a seat's view is the spectator's plus its own cards (A.10 item 3)."""

    @given(variant_options(), SEEDS, SEEDS)
    @GAMES
    def test_views_hide_concealed_cards(
        self, vo: tuple[str, dict[str, Any]], seed: int, rng_seed: int
    ) -> None:
        game = start(*vo, seed)
        check_views(game.state)
        for step in random_game(game, random.Random(rng_seed), MAX_ACTIONS):
            check_views(step.after)

    @given(variant_options(), SEEDS, SEEDS)
    @GAMES
    def test_events_hide_concealed_cards(
        self, vo: tuple[str, dict[str, Any]], seed: int, rng_seed: int
    ) -> None:
        game = start(*vo, seed)
        check_events(game.state, None, game.events)
        for step in random_game(game, random.Random(rng_seed), MAX_ACTIONS):
            check_events(step.before, step, step.events)

    @pytest.mark.parametrize("variant", PLAYABLE_VARIANTS)
    def test_hidden_information_with_defaults(self, variant: str) -> None:
        for seed in range(3):
            game = start(variant, SMALL_TARGETS[variant], seed)
            check_views(game.state)
            check_events(game.state, None, game.events)
            for step in random_game(game, random.Random(seed), MAX_ACTIONS):
                check_views(step.after)
                check_events(step.before, step, step.events)


# --------------------------------------------------------------------------------------------
# Export and audit


def hand_deltas(events: Iterable[Event]) -> list[list[int]]:
    return [list(cast("list[int]", e.data["delta"])) for e in events if e.kind == "hand_result"]


class TestExportAudits:
    """A game's exported record, after a JSON round trip, audits as legal with the same scores,
    winner and finished flag, the same hand deltas, and its true claims check out."""

    @given(variant_options(), SEEDS, SEEDS)
    @GAMES
    def test_export_audits_legal(
        self, vo: tuple[str, dict[str, Any]], seed: int, rng_seed: int
    ) -> None:
        game, steps = run(*vo, seed, rng_seed)
        state = game.state
        players = [f"player {i}" for i in range(state.rules.players)]
        record = json.loads(json.dumps(game.export(players=players)))
        assert record["players"] == players
        actions = [a for h in record["hands"] for a in h["actions"]]
        assert actions == [{"seat": s.seat, **s.action} for s in steps]
        for entry in game.log:
            if entry.action is not None:
                assert decode_action(encode_action(entry.action)) == entry.action
        verdict = audit_record(record, "random")
        assert "error" not in verdict, verdict
        assert verdict["legal"] is True and verdict["violation"] is None
        assert verdict["actions_checked"] == len(steps)
        assert verdict["scores"] == list(state.scores)
        assert verdict["winner"] == state.winner
        assert verdict["finished"] is state.over
        deltas = hand_deltas(game.events)
        hands = verdict["hands"]
        assert isinstance(hands, list)
        assert [h["delta"] for h in hands[: len(deltas)]] == deltas
        # A game still going lists the hand in progress last, with delta 0 (A.7 item 10).
        assert len(hands) == len(deltas) + (0 if state.over else 1)
        if not state.over:
            assert hands[-1]["delta"] == [0] * len(state.scores)

        # The true claims check out; a wrong one is listed.
        for raw, delta in zip(record["hands"], deltas, strict=False):
            raw["claimed"] = {"delta": delta}
        record["claimed"] = {"scores": list(state.scores), "winner": state.winner}
        verdict = audit_record(json.loads(json.dumps(record)))
        assert verdict["claims"] == [] and verdict_exit_status(verdict) == 0
        record["claimed"] = {"scores": [s + 1 for s in state.scores]}
        verdict = audit_record(record)
        claims = verdict["claims"]
        assert isinstance(claims, list) and [c["field"] for c in claims] == ["scores"]
        assert verdict_exit_status(verdict) == 1


# --------------------------------------------------------------------------------------------
# Engine bugs these properties found once (minimal reproductions, kept as regression tests)


def test_no_option_set_leaves_a_stuck_dealer_without_actions() -> None:
    """Options under which no opening bid is legal are refused at creation (no deadlock)."""
    with pytest.raises(OptionError, match="max_raise"):
        resolve_options("partnership", {"bid_step": 50, "max_raise": 20})


def _cutthroat_deal_with_run_and_extra_queen() -> Deal:
    """Seat 1 holds a heart run plus a second QH (and the other 9 cards are spades)."""
    hearts = ["AH", "10H", "KH", "QH", "QH", "JH"]
    spades = ["AS", "AS", "10S", "10S", "KS", "KS", "QS", "QS", "JS"]
    first = parse_cards(hearts + spades)
    rest = list(canonical_deck(48))
    for card in first:
        rest.remove(card)
    return Deal(
        hands=(tuple(rest[0:15]), tuple(sorted(first)), tuple(rest[15:30])),
        widow=tuple(rest[30:33]),
    )


def test_cutthroat_bury_after_a_run_sharing_its_marriage() -> None:
    rules = resolve_options("cutthroat", {"run_shares_marriage_cards": True})
    game = Game(rules, dealer=0, deals=GivenDeals([_cutthroat_deal_with_run_and_extra_queen()]))
    for seat, action in [
        (1, {"type": "bid", "amount": 300}),
        (2, {"type": "pass"}),
        (0, {"type": "pass"}),
        (1, {"type": "declare_trump", "suit": "H"}),
    ]:
        game.act(seat, decode_action(action))
    hand = game.state.hand
    assert hand is not None
    game.act(1, decode_action({"type": "meld", "cards": format_cards(hand.hands[1])}))
    game.act(2, decode_action({"type": "meld", "cards": []}))
    game.act(0, decode_action({"type": "meld", "cards": []}))
    assert game.state.hand is not None and game.state.hand.phase == "bury"
    # Run AH 10H KH QH JH (150) + royal marriage KH with the second QH (40, A.9 item 1) + double
    # spade marriage (40) = 230. JS, JC and 9C are in no combination: burying them keeps every
    # scored card, so a discard must be listed and that one accepted.
    record = game.state.hand.melds[1]
    assert record is not None and record.points == 230
    entries = legal_actions(game.state, 1)
    assert any(e["type"] == "discard" for e in entries)
    game.act(1, decode_action({"type": "discard", "cards": ["JS", "JC", "9C"]}))
    assert game.state.hand is not None and game.state.hand.phase == "play"


def test_hopeless_reads_the_meld_before_min_meld_to_record() -> None:
    # bid 260, declaring side's meld 40 (under min_meld_to_record 100), 250 points in play:
    # 260 - 40 = 220 <= 250, so the contract was not hopeless.
    score = score_hand(
        SaveRule(save_meld="none", min_meld_to_record=100),
        bid=260,
        declaring_side=0,
        meld=[40, 60],
        dix=[0, 0],
        points=[150, 100],
        tricks=[6, 6],
        conceded=False,
        total_in_play=250,
    )
    assert score.delta == (-260, 100)
    assert score.hopeless is False
