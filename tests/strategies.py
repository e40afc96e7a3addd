"""Shared helpers for the random-game properties and the golden playthroughs.

* ``concretize(entry, rng)``: a legal-action entry (A.10 item 2) made into one JSON action.
* ``random_game(...)`` / ``play_random_game(...)``: a ``Game`` with ``SeededDeals`` driven to its
  end (or a cap on actions) by a seeded random policy choosing among *every* seat's legal actions,
  so out-of-turn actions (a concession) are drawn as well as the seat to act's.
* ``variant_options()``: a hypothesis strategy of ``(variant, options)`` over every playable
  variant and a spread of option sets, each with a small target so games end quickly.

Randomness uses ``random.Random.random()`` only (never ``choice``/``sample``/``randrange``), whose
sequence Python guarantees across versions, so golden playthroughs stay byte-stable.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from hypothesis import strategies as st

from referee.engine.actions import decode_action
from referee.engine.engine import legal_actions
from referee.engine.events import Event
from referee.engine.game import Game, SeededDeals
from referee.engine.state import GameState
from referee.rules.options import VARIANT_IDS, resolve_options, variant_defaults

#: The variants these random games play. Two-handed has random games of its own, with its own
#: policy and checks (``tests/test_two_handed.py``, ``TestRandomGames``): its melds are concrete
#: entries made after each trick won, and its drawn-card lead names no card.
PLAYABLE_VARIANTS: tuple[str, ...] = tuple(v for v in VARIANT_IDS if v != "two-handed")

_T = TypeVar("_T")

# --------------------------------------------------------------------------------------------
# Version-stable random choices


def pick_index(rng: random.Random, n: int) -> int:
    """A uniform index in [0, n) from ``rng.random()`` alone."""
    if n <= 0:
        raise ValueError("pick_index needs a non-empty range")
    return min(int(rng.random() * n), n - 1)


def pick(rng: random.Random, items: Sequence[_T]) -> _T:
    return items[pick_index(rng, len(items))]


def sample(rng: random.Random, items: Sequence[_T], k: int) -> list[_T]:
    """``k`` items of ``items`` without replacement (partial Fisher-Yates), in drawn order."""
    pool = list(items)
    if not 0 <= k <= len(pool):
        raise ValueError(f"cannot sample {k} of {len(pool)}")
    for i in range(k):
        j = i + pick_index(rng, len(pool) - i)
        pool[i], pool[j] = pool[j], pool[i]
    return pool[:k]


# --------------------------------------------------------------------------------------------
# Legal-action entries -> concrete JSON actions

# Raises above the lowest legal bid, in steps: mostly the lowest, sometimes a jump.
_BID_STEPS = (0, 0, 0, 0, 1, 1, 2, 3)


def concretize(entry: dict[str, object], rng: random.Random) -> dict[str, object]:
    """One concrete JSON action that the legal-action ``entry`` allows.

    ``bid``: ``min + k * step`` within ``max``; ``pass_cards`` / ``discard``: ``count`` cards drawn
    from ``from``; ``meld``: a subset of ``from`` (sometimes all of it, sometimes none); concrete
    entries are returned as they are (a copy).
    """
    kind = entry["type"]
    if kind == "bid":
        low, step, high = entry["min"], entry["step"], entry["max"]
        assert isinstance(low, int) and isinstance(step, int)
        k = pick(rng, _BID_STEPS)
        if high is not None:
            assert isinstance(high, int)
            k = min(k, (high - low) // step)
        return {"type": "bid", "amount": low + k * step}
    if kind in ("pass_cards", "discard"):
        source, count = entry["from"], entry["count"]
        assert isinstance(source, list) and isinstance(count, int)
        return {"type": kind, "cards": sample(rng, source, count)}
    if kind == "meld":
        source = entry["from"]
        assert isinstance(source, list)
        roll = rng.random()
        if roll < 0.3:
            shown = list(source)
        elif roll < 0.45:
            shown = []
        else:
            shown = [c for c in source if rng.random() < 0.5]
        return {"type": "meld", "cards": shown}
    return dict(entry)


def all_legal(state: GameState) -> list[tuple[int, dict[str, object]]]:
    """Every seat's legal-action entries, seat by seat."""
    return [
        (seat, entry) for seat in range(state.rules.players) for entry in legal_actions(state, seat)
    ]


def choose_action(state: GameState, rng: random.Random) -> tuple[int, dict[str, object]]:
    """A uniformly chosen entry among all seats' entries, made concrete."""
    options = all_legal(state)
    if not options:
        raise AssertionError(f"no seat has a legal action (version {state.version})")
    seat, entry = pick(rng, options)
    return seat, concretize(entry, rng)


# --------------------------------------------------------------------------------------------
# Driving a game


@dataclass(frozen=True, slots=True)
class Step:
    """One accepted action: the state before and after it and the events it caused.

    ``events`` are what ``Game.act`` returned: the action's own events, then the next hand's deal
    events when the action finished a hand.
    """

    index: int
    seat: int
    action: dict[str, object]
    before: GameState
    after: GameState
    events: tuple[Event, ...]


def make_game(variant: str, options: dict[str, Any], seed: str, dealer: int = 0) -> Game:
    rules = resolve_options(variant, options)
    return Game(rules, dealer=dealer, deals=SeededDeals(seed))


def random_game(game: Game, rng: random.Random, max_actions: int) -> Iterator[Step]:
    """Drive ``game`` with a random policy, yielding each accepted step, until it is over or
    ``max_actions`` actions have been taken."""
    for index in range(max_actions):
        state = game.state
        if state.over:
            return
        seat, action = choose_action(state, rng)
        events = game.act(seat, decode_action(action))
        yield Step(index, seat, action, state, game.state, tuple(events))


def play_random_game(
    variant: str,
    options: dict[str, Any],
    seed: str | int,
    rng_seed: int,
    max_actions: int = 2000,
    on_step: Callable[[Step], None] | None = None,
) -> Game:
    """Play one game of ``variant`` with ``SeededDeals(seed)`` and a policy seeded by
    ``rng_seed``; ``on_step`` sees every accepted step. Returns the game (over, or capped)."""
    game = make_game(variant, options, str(seed))
    for step in random_game(game, random.Random(rng_seed), max_actions):
        if on_step is not None:
            on_step(step)
    return game


# --------------------------------------------------------------------------------------------
# (variant, options) for hypothesis

_COMMON_PLAY: dict[str, st.SearchStrategy[Any]] = {
    "head_rule": st.sampled_from(["always", "trump_lead_only", "never"]),
    "head_when_trumped": st.sampled_from(["not_required", "beat_highest_led_card"]),
    "head_over_partner": st.just(False),
    "must_trump_when_void": st.booleans(),
    "must_overtrump": st.just(False),
    "must_trump_even_if_cannot_overtrump": st.just(False),
    "meld_declaration": st.just("auto"),
    "run_counts_its_royal_marriage": st.booleans(),
    "run_shares_marriage_cards": st.booleans(),
}


@st.composite
def _maybe(draw: st.DrawFn, table: dict[str, st.SearchStrategy[Any]]) -> dict[str, Any]:
    """Each option of ``table`` left out or set, independently."""
    out: dict[str, Any] = {}
    for name, values in table.items():
        if draw(st.booleans()):
            out[name] = draw(values)
    return out


@st.composite
def variant_options(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A playable variant and a valid options object for it, with a small target."""
    variant = draw(st.sampled_from(PLAYABLE_VARIANTS))
    options = draw(_maybe(_COMMON_PLAY))
    deck = 48
    if variant == "double-deck":
        deck = draw(st.sampled_from([80, 48]))
        if deck == 48:
            options["deck"] = 48
    x1 = variant == "double-deck"  # meld tables on the x1 scale
    scale = 1 if x1 else 10

    # Counting.
    if draw(st.booleans()):
        options["count_scheme"] = draw(st.sampled_from(["classic_11", "points1", "simple_10_5"]))
    if draw(st.integers(0, 4)) == 0:
        options["last_trick_bonus"] = draw(st.sampled_from([0, 1, 10]))

    # Meld table.
    if draw(st.integers(0, 3)) == 0:
        options["meld_values"] = draw(
            st.sampled_from(
                [
                    {"pinochle": [4 * scale, 30 * scale]},
                    {"roundhouse_bonus": [24 * scale]},
                    {"run": [15 * scale], "dix": [0]},
                ]
            )
        )
    if draw(st.integers(0, 3)) == 0:
        options["min_meld_to_record"] = draw(st.sampled_from([2, 5, 10])) * scale

    # Bidding.
    if variant != "partnership-no-bid":
        bidding: dict[str, st.SearchStrategy[Any]] = {
            "all_pass": st.sampled_from(["redeal", "dealer_stuck"]),
            "allow_pass_with_help": st.booleans(),
            "allow_bid_or_redeal": st.booleans(),
            "trump_requires_marriage": st.booleans(),
        }
        options |= draw(_maybe(bidding))
        if x1 and draw(st.booleans()):
            low = 25 if deck == 48 else 50
            options["min_bid"] = low
            options["bid_schedule"] = draw(
                st.sampled_from([[[low, 1], [low + 10, 5]], [[low - 10, 2], [low + 5, 3]]])
            )
        elif draw(st.integers(0, 3)) == 0:
            options["min_bid"] = draw(st.sampled_from([10, 20])) * scale
            options["bid_step"] = draw(st.sampled_from([1, 2, 5])) * scale
        # A limit of 1-3 times the largest step in force, or none, or the default when that is
        # at least the largest step. (A limit below the opening step is refused at creation.)
        rules = resolve_options(variant, {**options, "max_raise": None})
        default_max_raise = variant_defaults(variant).get("max_raise")
        steps = (
            [rules.bid_step] if rules.bid_schedule is None else [s for _, s in rules.bid_schedule]
        )
        too_small = isinstance(default_max_raise, int) and default_max_raise < max(steps)
        if draw(st.booleans()) or too_small:
            times = draw(st.sampled_from([None, 1, 2, 3]))
            options["max_raise"] = None if times is None else times * max(steps)

    # Exchange.
    if variant in ("partnership", "double-deck") and draw(st.booleans()):
        mode = draw(st.sampled_from(["none", "partner", "kitty"]))
        options["exchange_mode"] = mode
        if mode == "kitty":
            options["exchange_count"] = 4
        elif draw(st.booleans()):
            options["exchange_count"] = draw(st.integers(0, 5))
    elif variant in ("partnership", "double-deck") and draw(st.booleans()):
        options["exchange_count"] = draw(st.integers(0, 5))
    if variant == "cutthroat" and draw(st.booleans()):
        options["may_bury_melded_cards"] = draw(st.booleans())

    # Saving meld.
    if draw(st.booleans()):
        options["save_meld"] = draw(st.sampled_from(["none", "trick", "trick_point", 0, 3, 30]))
    if variant != "partnership-no-bid" and draw(st.booleans()):
        options["save_applies_to"] = draw(st.sampled_from(["both", "defenders"]))
    if draw(st.booleans()):
        options["dix_exempt_from_save"] = draw(st.booleans())

    # Game end: a small target so that random games end in a few hands.
    if x1:
        options["target"] = draw(st.sampled_from([20, 40, 60]))
    else:
        options["target"] = draw(st.sampled_from([100, 150, 300]))
    if variant != "cutthroat" and draw(st.booleans()):
        options["margin_win"] = draw(st.booleans())
    reach = {
        "partnership": ["higher_total", "bidder_wins"],
        "double-deck": ["higher_total", "bidder_wins"],
        "cutthroat": ["higher_total", "bidder_wins"],
        "partnership-no-bid": ["higher_total"],
    }[variant]
    if draw(st.booleans()):
        options["both_reach"] = draw(st.sampled_from(reach))

    resolve_options(variant, options)  # a refusal here is a bug in this strategy
    return variant, options
