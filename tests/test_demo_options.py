"""``pinochle-referee demo`` and its bots under the options a user may pass (OPTIONS.json).

Option sets are drawn from ``referee.rules.options`` (every listed value a game of the variant
accepts, and small integers inside the allowed ranges), not written by hand. The engine-level
bot (``referee.demo.bot_action`` over ``legal_actions``, no server) plays many of them; a few go
through the real API with ``pinochle-referee demo``, whose printed log is checked too.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

import referee.demo
from referee.cli import main
from referee.demo import bot_action, playable
from referee.engine.actions import decode_action
from referee.engine.engine import legal_actions
from referee.engine.errors import IllegalAction
from referee.engine.game import Game, SeededDeals
from referee.rules.options import (
    VARIANT_IDS,
    OptionError,
    RuleSet,
    allowed_values,
    option_schema,
    resolve_options,
)

# The engine test's bound in hands (the demo's own is referee.demo.MAX_HANDS).
_HANDS = 150
# Actions per hand at most: 4 seats x (bid, exchange, meld, 20 plays) and two-handed's windows.
_ACTIONS_PER_HAND = 200


# The demo quiets structlog for the whole process: each test puts the configuration back.
pytestmark = pytest.mark.usefixtures("restored_logging")


@pytest.fixture
def bounded(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every action the demo's bots send; a game that goes on past any bound fails the test
    (rather than running for ever)."""
    sent: list[dict[str, Any]] = []

    def recording(entries: Sequence[Mapping[str, Any]], rng: random.Random) -> dict[str, Any]:
        limit = (getattr(referee.demo, "MAX_HANDS", _HANDS) + 1) * _ACTIONS_PER_HAND
        assert len(sent) < limit, "the demo did not stop"
        sent.append(bot_action(entries, rng))
        return sent[-1]

    monkeypatch.setattr(referee.demo, "bot_action", recording)
    return sent


def demo_log(variant: str, options: Mapping[str, object], seed: str) -> None:
    flags = ["--variant", variant, "--options", json.dumps(options), "--seed", seed]
    assert main(["demo", *flags]) == 0


def _hands(out: str) -> list[list[str]]:
    blocks = re.split(r"^(?=hand \d+, dealer \d+$)", out, flags=re.MULTILINE)[1:]
    return [block.splitlines() for block in blocks]


def test_a_game_nobody_can_win_stops_after_max_hands(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    bounded: list[dict[str, Any]],
) -> None:
    """The bots bid the minimum blindly: with 1-point counters against a partnership's x10
    table nearly every contract is set, both sides' scores fall for ever (about -20,000 after
    250 hands) and the demo never ended. It stops after MAX_HANDS hands and says so."""
    monkeypatch.setattr(referee.demo, "MAX_HANDS", 3, raising=False)
    demo_log("partnership", {"count_scheme": "points1"}, "endless")
    out = capsys.readouterr().out
    assert re.search(r"^stopped after 3 hands with no winner, scores \[-?\d+, -?\d+\]$", out, re.M)
    assert "game over" not in out
    assert len(_hands(out)) == 4  # the fourth hand was dealt when the third ended


@pytest.mark.parametrize("variant", ["two-handed", "partnership-no-bid"])
def test_the_first_hand_shows_its_turned_trump_and_automatic_melds(
    variant: str, capsys: pytest.CaptureFixture[str], bounded: list[dict[str, Any]]
) -> None:
    """CreateGame deals the first hand, and the events of that deal (the turned-up trump; in a
    no-bid game with meld_declaration auto, every seat's meld) reached no action's answer: the
    demo printed them for every hand but the first, whose result then counted melds the log
    never showed."""
    options: dict[str, object] = {"target": 500}  # two hands or more
    if variant == "partnership-no-bid":
        options = {"meld_declaration": "auto", "target": 500}
    demo_log(variant, options, "opening")
    hands = _hands(capsys.readouterr().out)
    assert len(hands) >= 2
    for lines in hands:
        assert lines[1].startswith("  trump "), lines[:3]
        if variant == "partnership-no-bid":
            melds = [int(line.split()[-1]) for line in lines[2:6] if " melds " in line]
            assert len(melds) == 4, lines[:7]


def test_a_bid_or_redeal_redeal_is_not_said_to_be_everyone_passing(
    capsys: pytest.CaptureFixture[str], bounded: list[dict[str, Any]]
) -> None:
    """Double-deck's defaults: the dealer may not pass (all_pass dealer_stuck), so a redeal
    comes only from a round of calls with a bid_or_redeal in it; the demo said "everyone
    passed" for it."""
    redeals = 0
    for seed in ("r0", "r1", "r2"):
        demo_log("double-deck", {"target": 60}, seed)
        out = capsys.readouterr().out
        assert "everyone passed" not in out
        redeals += out.count("  no bid: redeal\n")
    assert redeals, "no redeal in these games"


def test_a_concession_is_in_the_log(
    capsys: pytest.CaptureFixture[str], bounded: list[dict[str, Any]]
) -> None:
    """trump_requires_marriage: a declarer without a marriage can only concede (A.7 item 5);
    the log showed the contract and then a result with nothing played in between."""
    demo_log("partnership", {"trump_requires_marriage": True, "target": 400}, "c5")
    hands = _hands(capsys.readouterr().out)
    conceded = [h for h in hands if any(" concedes (no marriage to name trump)" in x for x in h)]
    assert conceded
    for lines in conceded:
        assert not any(line.startswith("  trick ") for line in lines)


# --------------------------------------------------------------------------------------------
# Random option sets: the bot on the engine, and the demo through the real API

# Small integers for the integer options (each kept only where the variant's range allows it).
_INTEGERS: dict[str, list[Any]] = {
    "target": [1, 20, 60, 150],
    "min_bid": [1, 10, 25, 50, 100, 250],
    "bid_step": [1, 5, 10, 20],
    "max_raise": [None, 1, 5, 10, 20, 50],
    "exchange_count": [0, 1, 2, 3, 4, 5],
    "last_trick_bonus": [-5, 0, 1, 2, 10],
    "min_meld_to_record": [0, 10, 50],
    "save_meld": [0, 1, 20, 100],
}
_SHAPES: dict[str, list[Any]] = {
    "bid_schedule": [[[1, 1]], [[1, 5], [100, 10]], [[0, 10], [300, 20]]],
    "meld_values": [{}, {"dix": [0]}, {"run": [0], "pinochle": [1000]}, {"marriage": [1]}],
}


def _fits(value: object, allowed: object) -> bool:
    if value is None:
        return isinstance(allowed, dict) and bool(allowed.get("nullable"))
    if isinstance(allowed, dict) and "min" in allowed:
        low, high = allowed.get("min"), allowed.get("max")
        assert isinstance(value, int)
        return (low is None or value >= low) and (high is None or value <= high)
    return True


def random_options(variant: str, rng: random.Random) -> dict[str, object]:
    """Some of the variant's options (each with probability 1/2), each with an allowed value."""
    while True:
        options: dict[str, object] = {}
        for entry in option_schema():
            name = str(entry["name"])
            applies = entry["applies_to"]
            assert isinstance(applies, list)
            if variant not in applies or rng.random() < 0.5:
                continue
            allowed = allowed_values(variant, name)
            if isinstance(allowed, list):
                options[name] = rng.choice(allowed)
            elif isinstance(allowed, dict) and "strings" in allowed:
                numbers = [n for n in _INTEGERS[name] if _fits(n, allowed["int"])]
                options[name] = rng.choice([*allowed["strings"], *numbers])
            elif name in _SHAPES:
                options[name] = rng.choice(_SHAPES[name])
            else:
                options[name] = rng.choice([n for n in _INTEGERS[name] if _fits(n, allowed)])
        try:
            resolve_options(variant, options)
        except OptionError:  # a `requires` condition: draw again
            continue
        return options


def engine_game(variant: str, options: Mapping[str, object], seed: str) -> tuple[Game, int]:
    """A game played by the demo's bot straight on the engine, seats asked as the demo asks
    them; every action it sends must be accepted. Returns the game and the actions played."""
    rules = resolve_options(variant, options)
    game = Game(rules, dealer=0, deals=SeededDeals(seed))
    rng = random.Random(seed)
    actions = 0
    while not game.state.over and game.state.hands_completed < _HANDS:
        for seat in range(rules.players):
            entries = playable(legal_actions(game.state, seat))
            if entries:
                break
        else:
            raise AssertionError(f"no seat can act: {variant} {options}")
        action = bot_action(entries, rng)
        try:
            game.act(seat, decode_action(action))
        except IllegalAction as error:
            raise AssertionError(f"{variant} {options}: seat {seat} {action} refused") from error
        actions += 1
        assert actions <= _HANDS * _ACTIONS_PER_HAND
    return game, actions


@pytest.mark.parametrize("variant", VARIANT_IDS)
def test_the_bot_plays_random_option_sets_on_the_engine(variant: str) -> None:
    rng = random.Random(f"options:{variant}")
    used: dict[str, set[str]] = {}
    for number in range(60):
        options = random_options(variant, rng)
        for name, value in options.items():
            used.setdefault(name, set()).add(json.dumps(value))
        game, _ = engine_game(variant, options, f"{variant}:{number}")
        state = game.state
        # Over with a winner, or stopped by the bound with no side at the target (the bot bids
        # blindly, so under some options every score falls: see referee.demo.MAX_HANDS).
        assert (state.over and state.winner is not None) or max(state.scores) < state.target, (
            options,
            state.scores,
        )
    # Every value a game of the variant accepts for a listed option was played.
    for entry in option_schema():
        name = str(entry["name"])
        applies = entry["applies_to"]
        assert isinstance(applies, list)
        allowed = allowed_values(variant, name) if variant in applies else None
        if isinstance(allowed, list):
            assert {json.dumps(v) for v in allowed} <= used.get(name, set()), name


_VALUES = {
    "modern10": {"A": 10, "10": 10, "K": 10},
    "simple_10_5": {"A": 10, "10": 10, "K": 5, "Q": 5},
    "classic_11": {"A": 11, "10": 10, "K": 4, "Q": 3, "J": 2},
    "points1": {"A": 1, "10": 1, "K": 1},
    "points1_single": {"A": 1, "10": 1, "K": 1},
    "points1_double": {"A": 1, "10": 1, "K": 1},
}
_TRICK = re.compile(r"^  trick ((?:\S+ )+)-> seat \d+ \((-?\d+)\)$")


def check_log(out: str, rules: RuleSet) -> None:
    """The printed log: hands in order, each closed by its result (a redeal said as such), a
    turned-up trump shown for every hand, trick points by the game's counting scheme."""
    assert "refused" not in out, out[:3000]
    hands = re.split(r"^(?=hand \d+, dealer \d+$)", out, flags=re.MULTILINE)[1:]
    assert [int(h.split(",")[0].split()[1]) for h in hands] == list(range(len(hands)))
    values = _VALUES[rules.count_scheme]
    for text in hands:
        lines = text.splitlines()
        if "  hand result" not in text:  # the hand the game stopped in
            continue
        if rules.variant in ("two-handed", "partnership-no-bid"):
            assert lines[1].startswith("  trump "), text[:500]
        if "redeal" in text:
            assert "  no bid: redeal" in lines and not any("trick" in ln for ln in lines)
        tricks = [m for m in map(_TRICK.match, lines) if m]
        for index, match in enumerate(tricks):
            points = sum(values.get(card[:-1], 0) for card in match.group(1).split())
            if index == len(tricks) - 1:  # a hand with tricks is played to the end
                points += rules.last_trick_bonus
            assert int(match.group(2)) == points, (match.group(0), rules.explicit)


@pytest.mark.parametrize("variant", VARIANT_IDS)
def test_the_demo_plays_random_option_sets_through_the_api(
    variant: str, capsys: pytest.CaptureFixture[str], bounded: list[dict[str, Any]]
) -> None:
    rng = random.Random(f"demo-options:{variant}")
    for number in range(2):
        options = {**random_options(variant, rng), "target": 60}
        rules = resolve_options(variant, options)
        flags = ["--variant", variant, "--options", json.dumps(options), "--seed", f"o{number}"]
        assert main(["demo", *flags]) == 0
        out = capsys.readouterr().out
        assert re.search(r"^(game over: winner \d+|stopped after \d+ hands)", out, re.MULTILINE)
        check_log(out, rules)
    assert bounded
