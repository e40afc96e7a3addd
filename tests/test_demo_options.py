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
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
import structlog

import referee.demo
from referee.cli import main
from referee.demo import bot_action

# The engine test's bound in hands (the demo's own is referee.demo.MAX_HANDS).
_HANDS = 150
# Actions per hand at most: 4 seats x (bid, exchange, meld, 20 plays) and two-handed's windows.
_ACTIONS_PER_HAND = 200


@pytest.fixture(autouse=True)
def _structlog_restored() -> Iterator[None]:
    """The demo quiets structlog for the whole process; put the configuration back."""
    saved = structlog.get_config()
    saved["processors"] = list(saved["processors"])
    try:
        yield
    finally:
        structlog.reset_defaults()
        structlog.configure(**saved)


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
