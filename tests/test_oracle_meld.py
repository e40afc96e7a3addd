"""N-version test: the engine's meld evaluation against an independent oracle (oracle_meld.py).

Three comparisons, each over every variant the meld rules apply to and random option sets drawn
from a seeded ``random.Random`` (so a failure names its seed and replays exactly):

* rules queries (GAME_RECORD.md §3, ``kind: meld``) on random and meld-rich hands of 11 to 20
  cards, every suit as trump: the total and every ``{name, level, points, cards}`` entry;
* random games under ``meld_declaration: auto``: each seat's scored meld (state, view, events and
  the hand result) against the oracle's best meld of the hand it held at the meld;
* random games under ``meld_declaration: declared``: at every meld turn, random meld actions
  (shown cards, ``melds`` lists right and wrong, ``points`` claims right and wrong, cards not
  held) are put to ``apply``; the refusal code or the points scored must be what the spec says.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

from referee.engine.actions import decode_action
from referee.engine.engine import apply
from referee.engine.errors import IllegalAction
from referee.engine.events import Event
from referee.engine.game import DealSource, Game, SeededDeals
from referee.engine.state import BURY, MELD, PLAY, GameState
from referee.engine.views import SPECTATOR, view
from referee.query import answer_query
from referee.rules.cards import format_cards, format_suit, parse_cards
from referee.rules.dealing import Deal, deal_from_order
from referee.rules.options import RuleSet, resolve_options
from tests import oracle_meld as oracle
from tests.strategies import choose_action, pick, pick_index, sample

#: (variant, deck) pairs the whole-hand meld rules apply to, with the hand sizes a query tries.
QUERY_CONFIGS: Final[tuple[tuple[str, int, tuple[int, ...]], ...]] = (
    ("two-handed", 48, (12, 16)),
    ("cutthroat", 48, (15, 18)),
    ("partnership", 48, (12, 11)),
    ("double-deck", 80, (20, 19, 16)),
    ("double-deck", 48, (12, 11)),
    ("partnership-no-bid", 48, (12,)),
)
GAME_CONFIGS: Final[tuple[tuple[str, int], ...]] = (
    ("cutthroat", 48),
    ("partnership", 48),
    ("double-deck", 80),
    ("double-deck", 48),
    ("partnership-no-bid", 48),
)

QUERIES_PER_CONFIG: Final = 1000
AUTO_GAMES_PER_CONFIG: Final = 36
DECLARED_GAMES_PER_CONFIG: Final = 20
HANDS_PER_GAME: Final = 3
DECLARED_HANDS_PER_GAME: Final = 2
MAX_ACTIONS_PER_GAME: Final = 1500
CANDIDATES_PER_TURN: Final = 10


# --------------------------------------------------------------------------------------------
# Random option sets


def random_levels(rng: random.Random, scale: int, max_levels: int) -> list[int]:
    """A ``meld_values`` list: 1 to ``max_levels`` values, mostly rising, sometimes not."""
    count = 1 + pick_index(rng, max_levels)
    values = [pick_index(rng, 40 * scale + 1) for _ in range(count)]
    return sorted(values) if rng.random() < 0.7 else values


def random_meld_options(
    rng: random.Random, variant: str, deck_size: int, for_game: bool
) -> dict[str, Any]:
    """Options touching meld evaluation (A.2, OPTIONS.md "Meld table"), each left out or set."""
    options: dict[str, Any] = {}
    if variant == "double-deck" and (deck_size == 48 or rng.random() < 0.3):
        options["deck"] = deck_size
    two_handed_game = for_game and variant == "two-handed"
    if not two_handed_game:
        for name in ("run_counts_its_royal_marriage", "run_shares_marriage_cards"):
            if rng.random() < 0.5:
                options[name] = rng.random() < 0.6
    if rng.random() < 0.5:
        scale = 1 if variant == "double-deck" else 10
        names = [
            n
            for n in oracle.MELD_VALUE_NAMES
            if not (n == "roundhouse_bonus" and variant == "two-handed")
        ]
        chosen = sample(rng, names, 1 + pick_index(rng, 4))
        options["meld_values"] = {
            name: random_levels(rng, scale, 4 if deck_size == 80 else 2) for name in chosen
        }
    elif variant != "two-handed" and rng.random() < 0.25:
        scale = 1 if variant == "double-deck" else 10
        options["meld_values"] = {"roundhouse_bonus": random_levels(rng, scale, 2)}
    return options


def random_game_options(
    rng: random.Random, variant: str, deck_size: int, declaration: str
) -> dict[str, Any]:
    """A game's options: the meld options, ``meld_declaration``, and a spread of the options
    that decide which cards a seat holds when it melds (exchange, kitty, marriage for trump)."""
    options = random_meld_options(rng, variant, deck_size, for_game=True)
    options["meld_declaration"] = declaration
    if variant in ("partnership", "double-deck") and rng.random() < 0.6:
        mode = pick(rng, ["none", "partner", "kitty"])
        options["exchange_mode"] = mode
        options["exchange_count"] = 4 if mode == "kitty" else pick_index(rng, 6)
    if variant in ("cutthroat", "partnership", "double-deck"):
        if rng.random() < 0.3:
            options["trump_requires_marriage"] = rng.random() < 0.5
        if rng.random() < 0.3:
            options["all_pass"] = pick(rng, ["redeal", "dealer_stuck"])
    if rng.random() < 0.25:
        options["min_meld_to_record"] = pick(rng, [2, 5, 30]) * (
            1 if variant == "double-deck" else 10
        )
    return options


# --------------------------------------------------------------------------------------------
# Random and meld-rich hands


def meld_rich_hand(
    rng: random.Random, pool: Counter[str], size: int, trump: str, deck_size: int
) -> list[str]:
    """A hand of ``size`` cards taken from ``pool``, built from meld blocks (runs with extra
    trump kings and queens, pinochles, arounds, marriages, roundhouses, dixes) at random levels
    and topped up at random; the cards taken leave ``pool``."""
    copies = 4 if deck_size == 80 else 2
    hand: list[str] = []

    def take(cards: Sequence[str], times: int) -> None:
        for _ in range(times):
            for c in cards:
                if pool[c] and len(hand) < size:
                    pool[c] -= 1
                    hand.append(c)

    suits = oracle.SUIT_LETTERS
    blocks: list[list[str]] = [
        [oracle.card(r, trump) for r in oracle.RUN_RANKS],
        [oracle.card("K", trump)],
        [oracle.card("Q", trump)],
        ["QS", "JD"],
        [oracle.card(r, s) for s in suits for r in ("K", "Q")],
        *([oracle.card(r, s) for s in suits] for r in ("A", "K", "Q", "J")),
        *([oracle.card("K", s), oracle.card("Q", s)] for s in suits),
    ]
    if deck_size == 48:
        blocks.append([oracle.card("9", trump)])
    for block in sample(rng, blocks, len(blocks)):
        if rng.random() < 0.35:
            take(block, 1 + pick_index(rng, copies))
    rest = list(pool.elements())
    while len(hand) < size and rest:
        c = rest.pop(pick_index(rng, len(rest)))
        pool[c] -= 1
        hand.append(c)
    return sample(rng, hand, len(hand))


def random_hand(rng: random.Random, deck_size: int, size: int) -> list[str]:
    return sample(rng, oracle.deck(deck_size), size)


@dataclass(frozen=True, slots=True)
class RichDeals:
    """Deals stacked for meld (a ``DealSource``): most seats get a meld-rich hand around a random
    suit (trump when the declarer names it or, no-bid, when the dealer's last card is of it);
    the widow or kitty is the rest. Hand n is drawn from ``f"{seed}:{n}"``."""

    seed: str

    def next_deal(self, rules: RuleSet, dealer: int, hand_number: int) -> Deal:
        rng = random.Random(f"{self.seed}:{hand_number}")
        pool = Counter(oracle.deck(rules.deck))
        suit = pick(rng, oracle.SUIT_LETTERS)
        order: list[str] = []
        for _ in range(rules.players):
            if rng.random() < 0.75:
                order += meld_rich_hand(rng, pool, rules.hand_size, suit, rules.deck)
            else:
                order += sample(rng, list(pool.elements()), rules.hand_size)
                pool -= Counter(order[-rules.hand_size :])
        rest = list(pool.elements())
        order += sample(rng, rest, len(rest))
        return deal_from_order(
            parse_cards(order),
            players=rules.players,
            hand_size=rules.hand_size,
            dealer=dealer,
            dealer_turns_last_card=rules.variant == "partnership-no-bid",
        )


def game_for(variant: str, options: dict[str, Any], seed: str, rich: bool) -> Game:
    """A game dealt from seeded shuffles (A.10 item 4) or from meld-rich stacked deals."""
    rules = resolve_options(variant, options)
    deals: DealSource = RichDeals(seed) if rich else SeededDeals(seed)
    return Game(rules, dealer=pick_index(random.Random(seed), rules.players), deals=deals)


# --------------------------------------------------------------------------------------------
# Comparing meld answers


def combination_key(combo: Mapping[str, Any]) -> tuple[str, int, int, tuple[str, ...]]:
    cards = combo["cards"]
    return (
        str(combo["name"]),
        int(combo["level"]),
        int(combo["points"]),
        tuple(oracle.canonical(cards)),
    )


def oracle_keys(value: oracle.MeldValue) -> list[tuple[str, int, int, tuple[str, ...]]]:
    return sorted(
        (c.name, c.level, c.points, tuple(oracle.canonical(c.cards))) for c in value.combinations
    )


def engine_keys(combos: Sequence[Mapping[str, Any]]) -> list[tuple[str, int, int, tuple[str, ...]]]:
    return sorted(combination_key(c) for c in combos)


# --------------------------------------------------------------------------------------------
# The oracle itself against the public vectors (RULES.md §10.5, §10.6)

VECTORS: Final = Path(__file__).parent / "vectors" / "meld.jsonl"


def test_the_oracle_meets_the_public_meld_vectors() -> None:
    """Before it judges the engine, the oracle must give every public meld vector's total."""
    cases = [json.loads(line) for line in VECTORS.read_text().splitlines() if line.strip()]
    for case in cases:
        query = case["query"]
        variant = query.get("variant", "partnership")
        rules = oracle.meld_rules(variant, query.get("options", {}))
        value = oracle.best_meld(query["hand"], query["trump"], rules)
        assert value.total == case["expect"]["total"], (case, value)
    assert len(cases) >= 20


# --------------------------------------------------------------------------------------------
# (b) Rules queries


@pytest.mark.parametrize(("variant", "deck_size", "sizes"), QUERY_CONFIGS)
def test_meld_queries_agree_with_the_oracle(
    variant: str, deck_size: int, sizes: tuple[int, ...]
) -> None:
    """A ``meld`` query answers the oracle's total and combinations (A.2: the points of the
    ``{name, level, points, cards}`` entries add up to ``total``)."""
    rng = random.Random(f"queries:{variant}:{deck_size}")
    scored = 0
    for index in range(QUERIES_PER_CONFIG):
        options = random_meld_options(rng, variant, deck_size, for_game=False)
        size = pick(rng, sizes)
        trump = pick(rng, oracle.SUIT_LETTERS)
        hand = (
            meld_rich_hand(rng, Counter(oracle.deck(deck_size)), size, trump, deck_size)
            if rng.random() < 0.6
            else random_hand(rng, deck_size, size)
        )
        query = {
            "kind": "meld",
            "variant": variant,
            "options": options,
            "hand": hand,
            "trump": trump,
            "id": index,
        }
        answer = answer_query(query)
        expected = oracle.best_meld(hand, trump, oracle.meld_rules(variant, options))
        context = (query, answer, expected)
        assert answer.get("total") == expected.total, context
        melds = answer["melds"]
        assert isinstance(melds, list)
        assert engine_keys(melds) == oracle_keys(expected), context
        scored += expected.total > 0
    assert scored > QUERIES_PER_CONFIG // 2


# --------------------------------------------------------------------------------------------
# Driving random games

StateHook = Callable[[GameState, Sequence[Event]], None]


def drive(game: Game, rng: random.Random, on_state: StateHook, hands: int) -> None:
    """Play random legal actions (tests/strategies.py's policy) until ``hands`` hands are done,
    showing ``on_state`` the first state and every state reached, with the events that led there."""
    on_state(game.state, list(game.events))
    for _ in range(MAX_ACTIONS_PER_GAME):
        state = game.state
        if state.over or state.hands_completed >= hands:
            return
        seat, action = choose_action(state, rng)
        events = game.act(seat, decode_action(action))
        on_state(game.state, events)


def hand_cards(state: GameState, seat: int) -> list[str]:
    assert state.hand is not None
    return format_cards(state.hand.hands[seat])


class MeldEvents:
    """``meld_scored`` events carry each seat's meld points, and a hand's ``hand_result`` lists
    the same per seat (GAME_RECORD.md §2: ``meld`` per seat)."""

    def __init__(self) -> None:
        self.scored: dict[int, int] = {}

    def feed(self, events: Sequence[Event]) -> None:
        for event in events:
            if event.kind == "meld_scored":
                self.scored[int(str(event.data["seat"]))] = int(str(event.data["points"]))
            elif event.kind == "hand_result":
                melds = event.data["meld"]
                assert isinstance(melds, list)
                if self.scored:
                    expected = [self.scored.get(s, 0) for s in range(len(melds))]
                    assert melds == expected, (event, self.scored)
                self.scored.clear()


# --------------------------------------------------------------------------------------------
# (a) Automatic meld in random games


class AutoMeldCheck:
    """Once per hand, as soon as every seat's meld is recorded: each seat's meld is the oracle's
    best meld of the cards it holds then (A.2 ``meld_declaration: auto``), in the state, the
    spectator view (A.10 item 3) and the events."""

    def __init__(self, rules: oracle.MeldRules) -> None:
        self.rules = rules
        self.checked: set[int] = set()
        self.events = MeldEvents()
        self.seats_compared = 0

    def __call__(self, state: GameState, events: Sequence[Event]) -> None:
        self.events.feed(events)
        hand = state.hand
        if hand is None or hand.number in self.checked or not hand.melds:
            return
        if any(record is None for record in hand.melds):
            return
        self.checked.add(hand.number)
        assert hand.trump is not None
        trump = format_suit(hand.trump)
        # A.7 item 1: the meld comes after the exchange or kitty discard (every seat back to its
        # dealt size), and in cutthroat before the bury (the declarer holds 15 + 3).
        cutthroat = state.rules.variant == "cutthroat"
        assert hand.phase == (BURY if cutthroat else PLAY) and not hand.tricks, hand.phase
        for seat, cards in enumerate(hand.hands):
            widow = state.rules.widow_size if cutthroat and seat == hand.declarer else 0
            assert len(cards) == state.rules.hand_size + widow, (seat, len(cards))
        public = view(state, SPECTATOR)["hand"]
        assert isinstance(public, dict)
        for seat, record in enumerate(hand.melds):
            assert record is not None
            held = hand_cards(state, seat)
            expected = oracle.best_meld(held, trump, self.rules)
            context = (state.rules.variant, dict(state.rules.explicit), seat, trump, held, expected)
            assert record.points == expected.total, (*context, record)
            shown = public["melds"][seat]
            assert shown["points"] == expected.total, (*context, shown)
            assert engine_keys(shown["melds"]) == oracle_keys(expected), (*context, shown)
            assert not Counter(shown["cards"]) - Counter(held), (*context, shown)
            self.seats_compared += 1


@pytest.mark.parametrize(("variant", "deck_size"), GAME_CONFIGS)
def test_automatic_meld_agrees_with_the_oracle(variant: str, deck_size: int) -> None:
    rng = random.Random(f"auto:{variant}:{deck_size}")
    seats_compared = 0
    for game_index in range(AUTO_GAMES_PER_CONFIG):
        options = random_game_options(rng, variant, deck_size, "auto")
        game = game_for(variant, options, f"auto:{variant}:{game_index}", game_index % 2 == 0)
        check = AutoMeldCheck(oracle.meld_rules(variant, options))
        drive(game, random.Random(game_index), check, HANDS_PER_GAME)
        seats_compared += check.seats_compared
    assert seats_compared >= AUTO_GAMES_PER_CONFIG * 6


# --------------------------------------------------------------------------------------------
# (c) Declared meld actions


def entry_json(entry: oracle.DeclaredEntry) -> dict[str, object]:
    return {"name": entry.name, "cards": list(entry.cards)}


def split_into_singles(combo: oracle.Combination) -> list[oracle.DeclaredEntry]:
    """A level-L combination declared as L separate one-set entries."""
    per_set = Counter(combo.cards)
    unit = [c for c in per_set for _ in range(per_set[c] // combo.level)]
    return [oracle.DeclaredEntry(combo.name, tuple(unit)) for _ in range(combo.level)]


def corrupt(
    rng: random.Random, entry: oracle.DeclaredEntry, held: Sequence[str]
) -> oracle.DeclaredEntry:
    """An entry made wrong in one random way (a card less, another name, a card more); the
    oracle decides whether it still holds."""
    roll = rng.random()
    if roll < 0.3 and len(entry.cards) > 1:
        cards = list(entry.cards)
        cards.pop(pick_index(rng, len(cards)))
        return oracle.DeclaredEntry(entry.name, tuple(cards))
    if roll < 0.6:
        return oracle.DeclaredEntry(pick(rng, [*oracle.CLASS_OF, "flush"]), entry.cards)
    return oracle.DeclaredEntry(entry.name, (*entry.cards, pick(rng, held)))


def run_with_its_royal_marriage(trump: str) -> list[oracle.DeclaredEntry]:
    """A run and a royal marriage that may share one of its cards (A.9 item 1)."""
    run = tuple(oracle.card(r, trump) for r in oracle.RUN_RANKS)
    royal = (oracle.card("K", trump), oracle.card("Q", trump))
    return [oracle.DeclaredEntry("run", run), oracle.DeclaredEntry("royal_marriage", royal)]


def shown_for(
    rng: random.Random, entries: Sequence[oracle.DeclaredEntry], held: Sequence[str]
) -> list[str]:
    """The held cards the entries use (per card, the most any one class needs), some other held
    cards, and now and then one card too few."""
    shown: Counter[str] = Counter()
    for klass in ("A", "B", "C"):
        shown |= Counter(
            c for e in entries if oracle.CLASS_OF.get(e.name) == klass for c in e.cards
        )
    shown &= Counter(held)
    shown |= Counter(c for c in held if rng.random() < 0.2)
    cards = oracle.canonical(shown.elements())
    if cards and rng.random() < 0.1:
        cards.pop(pick_index(rng, len(cards)))
    return cards


def candidate_melds(
    rng: random.Random, held: list[str], trump: str, rules: oracle.MeldRules, deck_size: int
) -> list[dict[str, object]]:
    """Random whole-hand meld actions (without a ``points`` claim) for a seat holding ``held``:
    shown subsets, ``melds`` lists built from the hand's combinations (whole, split into single
    sets, a run with a royal marriage sharing its cards, corrupted, not fitting the shown cards),
    and cards not held."""
    out: list[dict[str, object]] = []
    best = oracle.best_meld(held, trump, rules)
    for _ in range(CANDIDATES_PER_TURN):
        if rng.random() < 0.25:
            action: dict[str, object] = {
                "type": "meld",
                "cards": [c for c in held if rng.random() < 0.6],
            }
        else:
            entries: list[oracle.DeclaredEntry] = []
            for combo in best.combinations:
                if combo.name == oracle.ROUNDHOUSE_BONUS or rng.random() < 0.3:
                    continue
                if combo.name == "run" and rng.random() < 0.3:
                    entries.extend(run_with_its_royal_marriage(trump))
                elif combo.level > 1 and rng.random() < 0.4:
                    entries.extend(split_into_singles(combo))
                else:
                    entries.append(oracle.DeclaredEntry(combo.name, combo.cards))
            if entries and rng.random() < 0.25:
                at = pick_index(rng, len(entries))
                entries[at] = corrupt(rng, entries[at], held)
            action = {
                "type": "meld",
                "cards": shown_for(rng, entries, held),
                "melds": [entry_json(e) for e in entries],
            }
        if rng.random() < 0.08:
            copies = 4 if deck_size == 80 else 2
            missing = [c for c in set(oracle.deck(deck_size)) if held.count(c) < copies]
            cards = action["cards"]
            assert isinstance(cards, list)
            cards.append(pick(rng, oracle.canonical(missing)))
        out.append(action)
    return out


def add_claim(
    rng: random.Random, action: dict[str, object], unclaimed: oracle.DeclaredOutcome
) -> None:
    """Sometimes a ``points`` claim: the value the oracle gives the action, or a near miss."""
    roll = rng.random()
    if roll < 0.35:
        return
    value = unclaimed.points if unclaimed.code is None else pick_index(rng, 400)
    if roll < 0.7:
        action["points"] = value
    else:
        action["points"] = max(0, value + pick(rng, [-10, -4, -1, 1, 2, 10, 40]))


def judge(
    state: GameState, seat: int, action: Mapping[str, Any], rules: oracle.MeldRules
) -> oracle.DeclaredOutcome:
    """The oracle's verdict on ``action``; in ``partnership-no-bid`` the dealer's 9 of trump
    received in a dix exchange cannot score (A.7 item 7, README ruling)."""
    hand = state.hand
    assert hand is not None and hand.trump is not None
    entries = None
    if "melds" in action:
        entries = [oracle.DeclaredEntry(e["name"], tuple(e["cards"])) for e in action["melds"]]
    dead = 1 if hand.dix_exchanged_by is not None and seat == hand.dealer else 0
    return oracle.judge_declared_meld(
        hand_cards(state, seat),
        action["cards"],
        entries,
        action.get("points"),
        format_suit(hand.trump),
        rules,
        dead,
    )


class DeclaredMeldCheck:
    """At each seat's meld turn: every candidate action gets the code the oracle expects, or
    scores what it expects, plus a no-bid dix exchange's points (A.7 item 7, A.9 item 5)."""

    def __init__(self, rules: oracle.MeldRules, deck_size: int, rng: random.Random) -> None:
        self.rules = rules
        self.deck_size = deck_size
        self.rng = rng
        self.events = MeldEvents()
        self.outcomes: Counter[str | None] = Counter()

    def __call__(self, state: GameState, events: Sequence[Event]) -> None:
        self.events.feed(events)
        hand = state.hand
        if hand is None or hand.phase != MELD:
            return
        seat = hand.turn
        assert hand.trump is not None
        held = hand_cards(state, seat)
        exchanged = self.rules.value("dix", 1) if hand.dix_exchanged_by == seat else 0
        trump = format_suit(hand.trump)
        for action in candidate_melds(self.rng, held, trump, self.rules, self.deck_size):
            add_claim(self.rng, action, judge(state, seat, action, self.rules))
            expected = judge(state, seat, action, self.rules)
            context = (state.rules.variant, dict(state.rules.explicit), seat, held, action)
            try:
                after, _events = apply(state, seat, decode_action(action))
            except IllegalAction as refusal:
                assert refusal.code == expected.code, (*context, expected, refusal.to_json())
                self.outcomes[refusal.code] += 1
                continue
            assert expected.code is None, (*context, expected, "accepted")
            assert after.hand is not None
            record = after.hand.melds[seat]
            assert record is not None
            assert record.points == expected.points + exchanged, (*context, expected, record)
            self.outcomes[None] += 1


@pytest.mark.parametrize(("variant", "deck_size"), GAME_CONFIGS)
def test_declared_meld_actions_agree_with_the_oracle(variant: str, deck_size: int) -> None:
    rng = random.Random(f"declared:{variant}:{deck_size}")
    outcomes: Counter[str | None] = Counter()
    for game_index in range(DECLARED_GAMES_PER_CONFIG):
        options = random_game_options(rng, variant, deck_size, "declared")
        game = game_for(variant, options, f"declared:{variant}:{game_index}", game_index % 2 == 0)
        check = DeclaredMeldCheck(oracle.meld_rules(variant, options), deck_size, rng)
        drive(game, random.Random(game_index), check, DECLARED_HANDS_PER_GAME)
        outcomes += check.outcomes
    for code in (None, "CARD_NOT_IN_HAND", "INVALID_MELD", "MELD_MISCOUNT"):
        assert outcomes[code] > 0, outcomes
