"""The engine's hand results and game end against an independent oracle (``oracle_scoring``).

Random legal games of every variant, under random option sets that make saves, sets and
concessions common, are played to their end. Each hand's facts are rebuilt from the public
event stream (the contract, every meld and dix scored, every trick, the declaring side's
discards, a concession); at each ``hand_result`` the oracle scores the hand and every field of the
event is compared with it, and after each step the oracle's running scores, target and winner
are compared with the state, a spectator's view and the ``game_over`` event.

Game-end boundaries are reached on purpose: games start from scores near the target, and a
first hand played once to learn its delta is played again from scores it brings exactly to a
boundary. The ``hand_score`` rules query is compared on figures play rarely produces.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from referee.engine.actions import decode_action
from referee.engine.engine import apply, legal_actions
from referee.engine.errors import IllegalAction
from referee.engine.events import Event
from referee.engine.game import Game
from referee.engine.state import GameState, evolve_game
from referee.engine.views import SPECTATOR, view
from referee.query import answer_query
from tests.oracle_scoring import (
    TWO_HANDED,
    GameEnd,
    HandFacts,
    ScoringOptions,
    TakenTrick,
    decide_game_end,
    points_in_play,
    score_figures,
    score_hand,
)
from tests.strategies import PLAYABLE_VARIANTS, choose_action, make_game, variant_options

MAX_ACTIONS = 1500
SEEDS = st.integers(min_value=0, max_value=10**9)


# --------------------------------------------------------------------------------------------
# Rebuilding each hand's facts from the events, and comparing


@dataclass
class HandRecorder:
    """The facts of the hand in progress, from its events (any audience: the test sees all)."""

    seats: int
    two_handed: bool
    number: int = -1
    dealer: int = -1
    declarer: int | None = None
    bid: int | None = None
    trump: str | None = None
    meld: list[int] = field(default_factory=list)
    dix: list[int] = field(default_factory=list)
    tricks: list[TakenTrick] = field(default_factory=list)
    discards: list[str] = field(default_factory=list)
    conceded: bool = False
    no_trump: bool = False

    def start(self, number: int, dealer: int) -> None:
        self.number, self.dealer = number, dealer
        self.declarer = self.bid = self.trump = None
        self.meld, self.dix = [0] * self.seats, [0] * self.seats
        self.tricks, self.discards = [], []
        self.conceded = self.no_trump = False

    def record(self, event: Event) -> None:
        data = event.data
        kind = event.kind
        if kind == "hand_started":
            self.start(int_of(data, "hand"), int_of(data, "dealer"))
        elif kind == "contract":
            self.declarer, self.bid = int_of(data, "declarer"), int_of(data, "bid")
        elif kind in ("trump_declared", "trump_turned"):
            self.trump = str(data["suit"])
        elif kind == "meld_scored":
            self._meld(data)
        elif kind in ("dix_turned", "dix_exchanged", "dix_played"):
            # Two-handed: a turned-up 9 (dealer), an exchange, a dix played (A.8 item 8).
            # No-bid: the exchanger's dix points, which its meld_scored event includes (A.7
            # item 7: counted in its meld).
            seat, points = int_of(data, "seat"), int_of(data, "points")
            self.dix[seat] += points
            if self.two_handed:
                self.meld[seat] += points
        elif kind == "trick_taken":
            cards = data["cards"]
            assert isinstance(cards, list)
            self.tricks.append(TakenTrick(int_of(data, "seat"), tuple(map(str, cards))))
        elif kind == "discarded_cards":  # the cutthroat bury or the kitty discard
            cards = data["cards"]
            assert isinstance(cards, list)
            self.discards.extend(map(str, cards))
        elif kind == "conceded":
            self.conceded = True
            self.no_trump = data["no_trump"] is True

    def _meld(self, data: Mapping[str, object]) -> None:
        seat = int_of(data, "seat")
        self.meld[seat] += int_of(data, "points")
        if "name" in data:  # a two-handed meld: one combination
            if data["name"] == "dix":
                self.dix[seat] += int_of(data, "points")
            return
        combinations = data["melds"]
        assert isinstance(combinations, list)
        self.dix[seat] += sum(int(c["points"]) for c in combinations if c["name"] == "dix")

    def facts(self) -> HandFacts:
        return HandFacts(
            declarer=self.declarer,
            bid=self.bid,
            meld=tuple(self.meld),
            dix=tuple(self.dix),
            tricks=tuple(self.tricks),
            discards=tuple(self.discards),
            conceded=self.conceded,
            no_trump=self.no_trump,
        )


def int_of(data: Mapping[str, object], key: str) -> int:
    value = data[key]
    assert isinstance(value, int), (key, value)
    return value


@dataclass
class OracleLedger:
    """Follows a game through its events and checks each hand result and the game end."""

    options: ScoringOptions
    scores: list[int]
    target: int
    hand: HandRecorder
    winner: int | None = None
    deltas: list[tuple[int, ...]] = field(default_factory=list)
    game_over_told: bool = False

    @classmethod
    def for_game(cls, variant: str, options: Mapping[str, object]) -> OracleLedger:
        scoring = ScoringOptions.resolve(variant, options)
        return cls(
            scoring,
            [0] * scoring.sides,
            scoring.target,
            HandRecorder(scoring.seats, variant == TWO_HANDED),
        )

    def feed(self, events: Sequence[Event]) -> None:
        for event in events:
            assert self.winner is None or event.kind != "hand_started", "a hand after the end"
            if event.kind == "hand_result":
                self._hand_result(event.data)
            elif event.kind == "game_over":
                self._game_over(event.data)
            else:
                self.hand.record(event)

    def _hand_result(self, data: Mapping[str, object]) -> None:
        hand = self.hand
        result = score_hand(self.options, hand.facts())
        declaring = None if hand.declarer is None else self.options.side_of(hand.declarer)
        self.scores = [a + b for a, b in zip(self.scores, result.delta, strict=True)]
        expected: dict[str, object] = {
            "hand": hand.number,
            "dealer": hand.dealer,
            "declarer": hand.declarer,
            "bid": hand.bid,
            "trump": hand.trump,
            "conceded": hand.conceded,
            "hopeless": result.hopeless,
            "meld": list(result.meld),
            "points": list(result.points),
            "delta": list(result.delta),
            "saved": list(result.saved),
            "scores": list(self.scores),
        }
        actual = {key: data[key] for key in expected}
        assert actual == expected, (
            f"hand {hand.number} of {self.options}:\n engine {actual}\n oracle {expected}\n"
            f" facts {hand.facts()}"
        )
        end = decide_game_end(self.options, self.scores, self.target, declaring)
        self.winner, self.target = end.winner, end.target
        self.deltas.append(result.delta)

    def _game_over(self, data: Mapping[str, object]) -> None:
        assert self.winner is not None, f"game_over {dict(data)}: the oracle plays on"
        assert data["winner"] == self.winner and data["scores"] == self.scores, dict(data)
        self.game_over_told = True

    def check_state(self, state: GameState) -> None:
        """The state after a step, and a spectator's view of it: running scores, target,
        winner and the end of the game."""
        seen = view(state, SPECTATOR)
        expected = (self.scores, self.target, self.winner, self.winner is not None)
        assert (list(state.scores), state.target, state.winner, state.over) == expected
        assert (seen["scores"], seen["target"], seen["winner"], seen["over"]) == expected
        assert state.over == self.game_over_told
        if state.over:  # A.7 item 9: any later action is GAME_OVER; nobody has a legal action
            assert all(not legal_actions(state, seat) for seat in range(self.options.seats))
            with pytest.raises(IllegalAction) as refused:
                apply(state, 0, decode_action({"type": "play", "card": "AS"}))
            assert refused.value.code == "GAME_OVER"


# --------------------------------------------------------------------------------------------
# Driving games


def two_handed_action(state: GameState, rng: random.Random) -> tuple[int, dict[str, object]]:
    """A legal two-handed action of either seat: melds, exchanges and draws often, so that
    meld points vary (the window's drawn-card lead names no card, so it is skipped)."""
    entries = [
        (seat, entry)
        for seat in range(2)
        for entry in legal_actions(state, seat)
        if not entry.get("drawn_card")
    ]
    others = [(seat, entry) for seat, entry in entries if entry["type"] != "play"]
    if others and rng.random() < 0.7:
        entries = others
    seat, entry = entries[min(int(rng.random() * len(entries)), len(entries) - 1)]
    return seat, dict(entry)


def play_and_compare(
    variant: str,
    options: dict[str, Any],
    seed: int,
    rng_seed: int,
    start: Sequence[int] | None = None,
    hands: int | None = None,
) -> tuple[Game, OracleLedger]:
    """One random game, the oracle checking every hand result and the state after each step.

    ``start``: the running scores before the first hand (a position near the end of a game,
    which random play rarely reaches exactly; see ``starting_scores``). ``hands``: stop after
    that many hands. A hand's play does not depend on the scores, so the same seeds play the
    same first hand from any ``start``."""
    ledger = OracleLedger.for_game(variant, options)
    game = make_game(variant, options, str(seed), dealer=seed % ledger.options.seats)
    if start is not None:
        game.state = evolve_game(game.state, scores=tuple(start))
        ledger.scores = list(start)
    ledger.feed(game.events)
    rng = random.Random(rng_seed)
    for _ in range(MAX_ACTIONS):
        state = game.state
        if state.over or (hands is not None and len(ledger.deltas) >= hands):
            break
        if variant == TWO_HANDED:
            seat, action = two_handed_action(state, rng)
        else:
            seat, action = choose_action(state, rng)
        ledger.feed(game.act(seat, decode_action(action)))
        ledger.check_state(game.state)
    return game, ledger


# --------------------------------------------------------------------------------------------
# Option sets that make saves, sets, concessions and close finishes common


@st.composite
def scoring_options(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A bidding or no-bid variant from the shared strategy, with the scoring and game-end
    options pushed towards hard cases: high save thresholds, no last-trick bonus, a minimum
    meld, dix exemption, every ``both_reach`` and ``margin_win`` the variant accepts."""
    variant, options = draw(variant_options())
    x1 = variant == "double-deck"
    scale = 1 if x1 else 10
    if draw(st.booleans()):
        options["save_meld"] = draw(
            st.sampled_from(
                ["none", "trick", "trick_point", 0, 1, 6 * scale, 10 * scale, 15 * scale]
            )
        )
    if draw(st.integers(0, 2)) == 0:
        # A negative bonus too (any integer is allowed): the side taking the last trick can
        # then end below 0 card points.
        options["last_trick_bonus"] = draw(st.sampled_from([0, 1, 3 * scale, -3 * scale]))
    if draw(st.integers(0, 2)) == 0:
        options["min_meld_to_record"] = draw(st.sampled_from([1, 2, 4, 6, 10])) * scale
    if draw(st.booleans()):
        options["dix_exempt_from_save"] = draw(st.booleans())
    if variant != "partnership-no-bid" and draw(st.booleans()):
        options["save_applies_to"] = draw(st.sampled_from(["both", "defenders"]))
    if variant != "cutthroat" and draw(st.booleans()):
        options["margin_win"] = draw(st.booleans())
    if draw(st.integers(0, 3)) == 0:  # the variant's default (``starting_scores`` goes near it)
        del options["target"]
    return variant, options


@st.composite
def two_handed_options(draw: st.DrawFn) -> dict[str, Any]:
    """Two-handed options that change its hand result or game end."""
    options: dict[str, Any] = {"target": draw(st.sampled_from([200, 300, 400, 600]))}
    if draw(st.booleans()):
        options["both_reach"] = draw(st.sampled_from(["higher_total", "extend_250"]))
    if draw(st.booleans()):
        options["count_scheme"] = draw(st.sampled_from(["simple_10_5", "classic_11", "modern10"]))
    if draw(st.integers(0, 2)) == 0:
        options["last_trick_bonus"] = draw(st.sampled_from([0, 25]))
    if draw(st.booleans()):
        options["dix_scores_when_played"] = draw(st.booleans())
    if draw(st.booleans()):
        options["meld_values"] = draw(
            st.sampled_from([{"dix": [40]}, {"pinochle": [70], "marriage": [35]}])
        )
    return options


@st.composite
def starting_scores(draw: st.DrawFn, variant: str, options: dict[str, Any]) -> list[int] | None:
    """Running scores to start a game from, or None (from zero): each side a few units below
    the target, a lead a few units short of the target (``margin_win``), or sides tied at or
    above it (play on under ``higher_total``). Only positions where the game goes on (by the
    oracle's reading) are used; a redeal or a hand that changes little then tests the boundary
    exactly."""
    scoring = ScoringOptions.resolve(variant, options)
    unit = 1 if scoring.variant == "double-deck" else 5 if scoring.variant == TWO_HANDED else 10
    target, sides = scoring.target, scoring.sides
    patterns = ["zero", "zero", "near", "margin", "tie"] if "target" in options else ["near"]
    pattern = draw(st.sampled_from(patterns))
    units = st.integers(0, 12)
    if pattern == "zero":
        return None
    if pattern == "near":
        scores = [target - unit * draw(units) for _ in range(sides)]
    elif pattern == "margin":
        low = -unit * draw(units)
        scores = [low] * sides
        scores[draw(st.integers(0, sides - 1))] = low + target - unit * draw(st.integers(0, 2))
    else:
        scores = [target + unit * draw(units)] * sides
        if sides == 3:
            scores[draw(st.integers(0, 2))] = target - unit * draw(units)
    if decide_game_end(scoring, scores, target, None) != GameEnd(None, target):
        return None if "target" in options else [target - unit] * sides
    return scores


@st.composite
def aimed_scores(
    draw: st.DrawFn, variant: str, options: dict[str, Any], delta: Sequence[int]
) -> list[int] | None:
    """Running scores from which a hand worth ``delta`` ends exactly on a game-end boundary:
    a side exactly at the target, sides tied at it, both just past it, or a lead of exactly
    the target (``margin_win``). None when that start is already a finished game."""
    scoring = ScoringOptions.resolve(variant, options)
    target, sides = scoring.target, scoring.sides
    unit = max(1, target // 100)
    boundaries = ["one_exactly", "tied", "both_past"]
    if scoring.margin_win:
        boundaries += ["margin_exactly"] * 3
    boundary = draw(st.sampled_from(boundaries))
    if boundary == "margin_exactly":
        # The side the hand favours ends exactly ``target`` ahead, neither side at the target
        # before or after the hand (``offset`` keeps both low enough).
        ahead = 0 if delta[0] > delta[1] else 1
        offset = min(0, delta[ahead], target + delta[1 - ahead]) - unit
        after = [offset, offset]
        after[ahead] += target
    else:
        shapes = {
            "one_exactly": [target] + [target - unit] * (sides - 1),
            "tied": [target, target] + [target - unit] * (sides - 2),
            "both_past": [target + unit, target] + [target - unit] * (sides - 2),
        }
        after = draw(st.permutations(shapes[boundary]))
    start = [a - d for a, d in zip(after, delta, strict=True)]
    if decide_game_end(scoring, start, target, None) != GameEnd(None, target):
        return None
    return start


@st.composite
def hand_figures(draw: st.DrawFn) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A variant, options and the figures of a ``hand_score`` query (README "Asking a rules
    question"): per-seat meld and dix, per-side card points and tricks, a contract or none and a
    concession, drawn around the save thresholds and the bid, including figures play rarely
    reaches (card points without a trick: a declarer's buried counters)."""
    if draw(st.integers(0, 4)) == 0:
        variant, options = TWO_HANDED, draw(two_handed_options())
    else:
        variant, options = draw(scoring_options())
    scoring = ScoringOptions.resolve(variant, options)
    total = points_in_play(scoring)
    unit = max(1, total // 25)
    meld = [
        unit * draw(st.sampled_from([0, 0, 1, 2, 4, 6, 10, 15, 30])) for _ in range(scoring.seats)
    ]
    dix = [min(m, unit * draw(st.integers(0, 2))) for m in meld]
    # A negative last-trick bonus is the lowest figure a side can have (no counters, the last
    # trick): the query refused any figure below 0 until 12-02.
    lowest = min(0, scoring.last_trick_bonus)
    points = [
        draw(
            st.sampled_from(
                [0, 1, 2, unit, 2 * unit, 6 * unit, 10 * unit, 15 * unit, total, lowest, lowest + 1]
            )
        )
        for _ in range(scoring.sides)
    ]
    tricks = [draw(st.integers(0, 2)) for _ in range(scoring.sides)]
    figures: dict[str, Any] = {"meld": meld, "dix": dix, "points": points, "tricks": tricks}
    bidding = variant not in (TWO_HANDED, "partnership-no-bid")
    if bidding and draw(st.integers(0, 5)) > 0:
        declarer = draw(st.integers(0, scoring.seats - 1))
        side = scoring.side_of(declarer)
        own_meld = sum(m for seat, m in enumerate(meld) if scoring.side_of(seat) == side)
        bid = max(0, own_meld + points[side] + unit * draw(st.integers(-3, 3)))
        figures |= {"declarer": declarer, "bid": bid, "conceded": draw(st.booleans())}
    elif bidding:  # no contract: a redeal
        figures |= {"declarer": None, "bid": None}
    return variant, options, figures


# --------------------------------------------------------------------------------------------
# The comparisons


class TestHandResultsAndGameEnd:
    """Every hand result and every game end of random games agree with the oracle."""

    @given(st.data(), scoring_options(), SEEDS, SEEDS)
    @settings(max_examples=400, deadline=None)
    def test_bidding_and_no_bid_variants(
        self, data: st.DataObject, vo: tuple[str, dict[str, Any]], seed: int, rng_seed: int
    ) -> None:
        start = data.draw(starting_scores(*vo))
        play_and_compare(*vo, seed, rng_seed, start)

    @given(st.data(), two_handed_options(), SEEDS, SEEDS)
    @settings(max_examples=120, deadline=None)
    def test_two_handed(
        self, data: st.DataObject, options: dict[str, Any], seed: int, rng_seed: int
    ) -> None:
        start = data.draw(starting_scores(TWO_HANDED, options))
        play_and_compare(TWO_HANDED, options, seed, rng_seed, start)

    @given(st.data(), st.sampled_from(["bidding", "bidding", "bidding", TWO_HANDED]), SEEDS, SEEDS)
    @settings(max_examples=200, deadline=None)
    def test_hands_that_end_on_a_boundary(
        self, data: st.DataObject, kind: str, seed: int, rng_seed: int
    ) -> None:
        """A first hand played once to learn its delta, then again from scores that it brings
        exactly to a game-end boundary, and the game on to its end."""
        if kind == TWO_HANDED:
            variant, options = TWO_HANDED, data.draw(two_handed_options())
        else:
            variant, options = data.draw(scoring_options())
        _, first = play_and_compare(variant, options, seed, rng_seed, hands=1)
        if not first.deltas:
            return
        start = data.draw(aimed_scores(variant, options, first.deltas[0]))
        if start is not None:
            play_and_compare(variant, options, seed, rng_seed, start)

    @given(hand_figures())
    @settings(max_examples=300, deadline=None)
    def test_hand_score_query(self, case: tuple[str, dict[str, Any], dict[str, Any]]) -> None:
        """The ``hand_score`` rules query scores any figures as the oracle does."""
        variant, options, figures = case
        answer = answer_query(
            {"kind": "hand_score", "variant": variant, "options": options, **figures}
        )
        expected = score_figures(
            ScoringOptions.resolve(variant, options),
            declarer=figures.get("declarer"),
            bid=figures.get("bid"),
            meld=figures["meld"],
            dix=figures["dix"],
            points=figures["points"],
            tricks=figures["tricks"],
            conceded=figures.get("conceded", False),
        )
        assert answer == {"delta": list(expected.delta), "saved": list(expected.saved)}, figures

    @pytest.mark.parametrize(
        ("variant", "options"),
        [
            *((variant, {}) for variant in (*PLAYABLE_VARIANTS, TWO_HANDED)),
            ("double-deck", {"deck": 48}),
            ("double-deck", {"deck": 48, "save_meld": 12}),
        ],
    )
    def test_defaults_near_the_default_target(self, variant: str, options: dict[str, Any]) -> None:
        """Every default of the variant (the deck's, for double-deck), from scores a few hands
        short of the default target, to the end of the game."""
        scoring = ScoringOptions.resolve(variant, options)
        unit = max(1, scoring.target // 25)
        finished = 0
        for seed in range(12):
            start = [
                scoring.target - unit * ((seed + side) % 6) - unit for side in range(scoring.sides)
            ]
            game, ledger = play_and_compare(variant, options, seed, seed + 1, start)
            finished += game.state.over
            assert ledger.deltas
        assert finished >= 8, f"{variant}: only {finished} of 12 games ended"
