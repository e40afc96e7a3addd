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
from referee.demo import MAX_HANDS, bot_action, playable, values_cards
from referee.engine.actions import decode_action
from referee.engine.engine import legal_actions
from referee.engine.errors import IllegalAction
from referee.engine.game import Game, SeededDeals
from referee.engine.views import view
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

    def recording(
        entries: Sequence[Mapping[str, Any]],
        rng: random.Random,
        view: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        limit = (getattr(referee.demo, "MAX_HANDS", _HANDS) + 1) * _ACTIONS_PER_HAND
        assert len(sent) < limit, "the demo did not stop"
        sent.append(bot_action(entries, rng, view))
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
    """With 1-point counters against a partnership's x10 table and minimum bid of 250 nearly
    every contract is set (a stuck dealer's, when nobody's hand is worth 250), both sides'
    scores fall for ever and the demo never ended. It stops after MAX_HANDS hands and says
    so."""
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
    passed" for it. (A minimum bid of 80, above most hands' worth, makes the bots' dealers call
    bid-or-redeal.)"""
    redeals = 0
    for seed in ("r0", "r1", "r2"):
        demo_log("double-deck", {"target": 300, "min_bid": 80}, seed)
        out = capsys.readouterr().out
        assert "everyone passed" not in out
        redeals += out.count("  no bid: redeal\n")
    assert redeals, "no redeal in these games"


_SCORED = re.compile(
    r"^  seat (\d) (?:melds (-?\d+)|scores (-?\d+) for the dix (?:turned up \(9[SHDC]\)|played)"
    r"|exchanges the dix \(9[SHDC] for \S+\), scores (-?\d+))$"
)
_TAKEN = re.compile(r"^  trick \S+ \S+ -> seat (\d) \((-?\d+)\)$")
_DELTA = re.compile(r"^  hand result delta \[(-?\d+), (-?\d+)\]")


def test_the_two_handed_log_shows_every_dix_where_it_scores(
    capsys: pytest.CaptureFixture[str], bounded: list[dict[str, Any]]
) -> None:
    """A two-handed hand's result counts dix points no meld gave: the dealer's turned-up 9 of
    trump, a dix exchange, a 9 of trump played (dix_scores_when_played, on by default); the
    log showed none of them, so its melds and tricks did not add up to the delta. Now each
    seat's printed melds, dix scores and trick points make its delta, hand by hand."""
    seen: set[str] = set()
    checked = 0
    for seed in ("d1", "d3", "d4"):
        demo_log("two-handed", {"target": 300}, seed)
        for lines in _hands(capsys.readouterr().out):
            scored = [0, 0]
            for line in lines:
                if match := _SCORED.match(line):
                    points = next(g for g in match.groups()[1:] if g is not None)
                    scored[int(match.group(1))] += int(points)
                    seen.update(k for k in ("turned", "played", "exchanges") if k in line)
                elif match := _TAKEN.match(line):
                    scored[int(match.group(1))] += int(match.group(2))
                elif match := _DELTA.match(line):
                    assert scored == [int(match.group(1)), int(match.group(2))], lines
                    checked += 1
    assert seen == {"turned", "played", "exchanges"} and checked >= 5


def test_a_no_bid_dix_exchange_is_shown_with_the_meld_that_counts_it(
    capsys: pytest.CaptureFixture[str], bounded: list[dict[str, Any]]
) -> None:
    """partnership-no-bid (A.7 item 7): the exchanger's 10 is part of its meld, so the log
    says so rather than print it as points of its own, and the meld line that follows holds
    it."""
    demo_log("partnership-no-bid", {"target": 500}, "n1")
    lines = capsys.readouterr().out.splitlines()
    exchanges = [i for i, line in enumerate(lines) if " exchanges the dix " in line]
    assert exchanges
    for index in exchanges:
        match = re.match(
            r"^  seat (\d) exchanges the dix \(9[SHDC] for \S+\), to count in its"
            r" meld: (\d+)$",
            lines[index],
        )
        assert match, lines[index]
        seat, points = match.groups()
        meld = next(x for x in lines[index + 1 :] if x.startswith(f"  seat {seat} melds "))
        assert int(meld.split()[-1]) >= int(points)


def test_a_concession_is_in_the_log(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    bounded: list[dict[str, Any]],
) -> None:
    """trump_requires_marriage: a declarer without a marriage can only concede (A.7 item 5);
    the log showed the contract and then a result with nothing played in between. (A minimum
    bid no hand is worth leaves the dealer stuck with the contract, marriage or not.)"""
    monkeypatch.setattr(referee.demo, "MAX_HANDS", 3)
    options = {"trump_requires_marriage": True, "min_bid": 400, "target": 400}
    demo_log("partnership", options, "c1")
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


def engine_game(
    variant: str,
    options: Mapping[str, object],
    seed: str,
    *,
    seeing: bool = True,
    hands: int = _HANDS,
) -> tuple[Game, list[Mapping[str, object]]]:
    """A game played by the demo's bot straight on the engine, seats asked as the demo asks
    them (each given its view where the demo gives it one; none when not ``seeing``, so the bot
    bids blindly), for at most ``hands`` hands; every action it sends must be accepted.
    Returns the game and its hand results (the ``hand_result`` events' data)."""
    rules = resolve_options(variant, options)
    game = Game(rules, dealer=0, deals=SeededDeals(seed))
    rng = random.Random(seed)
    actions = 0
    results: list[Mapping[str, object]] = []
    while not game.state.over and game.state.hands_completed < hands:
        for seat in range(rules.players):
            entries = playable(legal_actions(game.state, seat))
            if entries:
                break
        else:
            raise AssertionError(f"no seat can act: {variant} {options}")
        seen = view(game.state, seat) if seeing and values_cards(entries) else None
        action = bot_action(entries, rng, seen)
        try:
            events = game.act(seat, decode_action(action))
        except IllegalAction as error:
            raise AssertionError(f"{variant} {options}: seat {seat} {action} refused") from error
        results.extend(event.data for event in events if event.kind == "hand_result")
        actions += 1
        assert actions <= hands * _ACTIONS_PER_HAND
    return game, results


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
        # Over with a winner, or stopped by the bound with no side at the target (under some
        # options no contract is worth making and every score falls: referee.demo.MAX_HANDS).
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


_GAMES = 6


@pytest.mark.parametrize(
    ("variant", "options"),
    [
        ("cutthroat", {}),
        ("partnership", {}),
        ("double-deck", {}),  # whose count_scheme is points1
        ("cutthroat", {"count_scheme": "points1"}),
        ("partnership", {"count_scheme": "points1"}),
    ],
)
def test_bots_that_value_their_cards_make_their_contracts(
    variant: str, options: dict[str, object]
) -> None:
    """The bots bid the minimum whatever they held and named a trump at random: with the
    defaults a partnership or cutthroat contract was set about three times in four, and with
    count_scheme points1 (a partnership's or cutthroat's x10 meld table against 25 card points)
    nearly always, every score falling until the demo's 500-hand stop. Bidding up to what the
    hand is worth, naming its best trump and keeping its meld in the exchange, they make most
    contracts and the game ends, with a winner, within a few dozen hands.

    Except where the options leave hardly a contract worth making: under points1 a cutthroat
    hand is nearly always redealt (nobody's hand is worth the minimum bid of 300), yet a game
    ends in half ``MAX_HANDS`` (the blind bots' games ran to it); a partnership's dealer is
    stuck with 250 it cannot make hand after hand, and the scores can still fall for ever (only
    the share made is asked, over the first 150 hands)."""
    endless = variant == "partnership" and bool(options)
    limit = _HANDS if endless else MAX_HANDS
    shares: dict[bool, float] = {}
    hands: dict[bool, list[int]] = {}
    for seeing in (False, True):
        made = contracts = 0
        hands[seeing] = []
        for number in range(_GAMES):
            game, results = engine_game(
                variant, options, f"made:{number}", seeing=seeing, hands=limit
            )
            for result in results:
                bid, declarer, delta = result["bid"], result["declarer"], result["delta"]
                if bid is None:
                    continue
                assert isinstance(declarer, int) and isinstance(delta, list)
                side = declarer % 2 if game.state.rules.partnerships else declarer
                contracts += 1
                made += delta[side] >= 0
            state = game.state
            hands[seeing].append(state.hands_completed if state.over else limit + 1)
            if seeing and state.over:
                assert state.winner is not None
        shares[seeing] = made / contracts
    assert shares[True] >= shares[False] + 0.15, (shares, hands)
    if not options:
        assert shares[True] >= 0.7 and max(hands[True]) <= 30, (shares, hands)
        assert max(hands[True]) < max(hands[False]), hands
    elif not endless:
        assert max(hands[True]) <= MAX_HANDS // 2, hands


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
