"""``pinochle-referee demo``: bots play a whole game of every variant through the real API.

Issue 4 review: the two-handed demo crashed (``KeyError: 'card'``) when its bot picked the
``{"type": "play", "drawn_card": true}`` entry, the lead of the card about to be drawn, which
names no card. These tests run the demo end to end through ``referee.cli.main``.
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
from referee.demo import bot_action, choose, playable
from referee.rules.options import VARIANT_IDS
from referee.service.convert import action_from_json
from tests.service_helpers import SHORT_GAME

GAME_OVER = re.compile(r"^game over: winner \d+, scores \[[-\d, ]+\]$", re.MULTILINE)


# The demo quiets structlog for the whole process: each test puts the configuration back.
pytestmark = pytest.mark.usefixtures("restored_logging")


@pytest.fixture
def offered(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every legal-action entry the demo's bots were offered."""
    seen: list[dict[str, Any]] = []

    def recording(entries: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        seen.extend(dict(e) for e in entries)
        return playable(entries)

    monkeypatch.setattr(referee.demo, "playable", recording)
    return seen


@pytest.mark.parametrize("variant", VARIANT_IDS)
def test_the_demo_plays_every_variant_to_the_end(
    variant: str, capsys: pytest.CaptureFixture[str], offered: list[dict[str, Any]]
) -> None:
    options = json.dumps(SHORT_GAME[variant])
    status = main(["demo", "--variant", variant, "--options", options, "--seed", "test-demo"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert f": {variant}, " in out.splitlines()[0]
    # Every hand has its header, the first (dealt by CreateGame) included, in order.
    headers = [int(m) for m in re.findall(r"^hand (\d+), dealer \d+$", out, re.MULTILINE)]
    assert headers == list(range(len(headers))) and headers, out[:2000]
    assert out.splitlines()[1].startswith("hand 0, dealer ")
    assert len(GAME_OVER.findall(out)) == 1, out[-2000:]
    assert offered


def test_the_two_handed_demo_survives_the_drawn_card_lead(
    capsys: pytest.CaptureFixture[str], offered: list[dict[str, Any]]
) -> None:
    """A full-length two-handed game (the crash needed only one drawn-card entry picked)."""
    assert main(["demo", "--variant", "two-handed", "--seed", "drawn-card"]) == 0
    assert GAME_OVER.search(capsys.readouterr().out)
    drawn = [e for e in offered if e.get("drawn_card")]
    assert len(drawn) > 20, "the game never offered the drawn-card lead"


def test_the_bot_never_sends_the_drawn_card_descriptor() -> None:
    entries: list[dict[str, Any]] = [
        {"type": "meld", "name": "dix", "cards": ["9S"], "points": 10},
        {"type": "play", "card": "AS"},
        {"type": "play", "card": "10H"},
        {"type": "play", "drawn_card": True},
    ]
    sent = {json.dumps(bot_action(entries, random.Random(i)), sort_keys=True) for i in range(300)}
    assert sent == {json.dumps(e, sort_keys=True) for e in entries[:3]}
    for text in sent:
        action_from_json(json.loads(text))  # every one is a well-formed API action
    with pytest.raises(ValueError, match="drawn-card"):
        choose(entries[3], random.Random(0))
    with pytest.raises(ValueError, match="no legal action"):
        bot_action(entries[3:], random.Random(0))


def test_choose_makes_descriptor_entries_concrete() -> None:
    rng = random.Random(7)
    hand = ["AS", "10S", "KS", "QS", "JS", "9S"]
    assert choose({"type": "bid", "min": 260, "step": 10, "max": None}, rng) == {
        "type": "bid",
        "amount": 260,
    }
    passed = choose({"type": "pass_cards", "count": 4, "from": hand}, rng)
    assert passed["type"] == "pass_cards" and len(passed["cards"]) == 4
    assert set(passed["cards"]) <= set(hand)
    assert choose({"type": "meld", "from": hand}, rng) == {"type": "meld", "cards": hand}
    assert choose({"type": "pass", "help": True}, rng) == {"type": "pass", "help": True}


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--variant", "no-such-variant"], "demo: INVALID_ARGUMENT: unknown variant"),
        (["--variant", "partnership", "--options", '{"target": -5}'], "target"),
        (["--address", "127.0.0.1:1"], "demo: UNAVAILABLE: "),
    ],
)
def test_a_refused_demo_game_is_one_line_not_a_traceback(
    flags: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", *flags]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pinochle-referee: demo: ") and says in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("options", ["{", '{"target": 1' + "0" * 5000 + "}", "[" * 100_000])
def test_demo_options_that_are_not_json_are_one_line_not_a_traceback(
    options: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--variant", "partnership", "--options", options]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pinochle-referee: --options is not JSON: ")
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
