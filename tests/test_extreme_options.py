"""Integer options at their extremes, end to end (OPTIONS.md: int options are "any integer",
bounded to int32 in ``referee.rules.options``).

Why: the rules queries guard their int32 answers, but a game reaches the same figures by play:
a last-trick bonus of 2**31 - 1 or -2**31, a bid of 2**31 - 1 that is set, meld tables at
``MELD_VALUE_MAX``. Every hand must then score as the rules say, the game's views and events
must still encode as JSON (orjson stops at 64 bits), and the game's own export must audit as
legal with the scores the game reached, whatever those values are.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from referee.audit import audit_text
from referee.cli import main as cli_main
from referee.engine.actions import decode_action
from referee.engine.engine import legal_actions
from referee.engine.game import Game, SeededDeals
from referee.engine.views import ADJUDICATOR, view
from referee.rules.options import (
    INT_OPTION_MAX,
    INT_OPTION_MIN,
    MELD_NAMES,
    MELD_VALUE_MAX,
    VARIANT_IDS,
    OptionError,
    allowed_values,
    option_schema,
    resolve_options,
)
from referee.store.base import compact_json
from tests.service_helpers import actor, new_table, serving
from tests.strategies import concretize

#: Values tried for every integer option, kept to those the variant accepts.
EXTREMES = (INT_OPTION_MIN, INT_OPTION_MIN + 1, -1, 0, 1, 2, INT_OPTION_MAX - 1, INT_OPTION_MAX)
#: Each integer option (``int_or_string``: save_meld) and the variants it applies to.
INT_OPTIONS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (str(spec["name"]), tuple(cast(list[str], spec["applies_to"])))
    for spec in option_schema()
    if spec["type"] in ("int", "int_or_string")
)


def _in_range(variant: str, name: str, value: int) -> bool:
    allowed: Any = allowed_values(variant, name)
    if isinstance(allowed, list):
        return value in allowed
    bounds = allowed.get("int", allowed)
    return bool(bounds["min"] <= value <= bounds["max"])


@st.composite
def extreme_options(draw: st.DrawFn) -> tuple[str, dict[str, object]]:
    variant = draw(st.sampled_from(VARIANT_IDS))
    options: dict[str, object] = {}
    for name, applies_to in INT_OPTIONS:
        if variant not in applies_to or not draw(st.booleans()):
            continue
        values = [v for v in EXTREMES if _in_range(variant, name, v)]
        if values:
            options[name] = draw(st.sampled_from(values))
    if draw(st.booleans()):
        names = [n for n in MELD_NAMES if not (variant == "two-handed" and n == "roundhouse_bonus")]
        options["meld_values"] = {
            name: [draw(st.sampled_from([0, 1, MELD_VALUE_MAX]))] * draw(st.integers(1, 4))
            for name in draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
        }
    if variant not in ("two-handed", "partnership-no-bid") and draw(st.booleans()):
        options["bid_schedule"] = draw(
            st.sampled_from([[[1, INT_OPTION_MAX]], [[1, 1], [INT_OPTION_MAX, INT_OPTION_MAX]]])
        )
        options["min_bid"] = draw(st.sampled_from([1, INT_OPTION_MAX]))
        options["max_raise"] = None
    try:
        resolve_options(variant, options)
    except OptionError:
        assume(False)  # a combination the rules refuse (max_raise below the step, ...)
    return variant, options


def _sendable(entry: dict[str, object]) -> bool:
    """An entry a client could send: no hidden drawn-card lead, and a bid that fits int32."""
    if entry.get("drawn_card"):
        return False
    if entry["type"] == "bid":
        return isinstance(entry["min"], int) and entry["min"] <= INT_OPTION_MAX
    return True


def _action(entry: dict[str, object], rng: random.Random) -> dict[str, object]:
    if entry["type"] == "meld" and "from" not in entry:
        return dict(entry)  # two-handed: a concrete meld entry
    action = concretize(entry, rng)
    if action["type"] == "bid":
        amount = action["amount"]
        assert isinstance(amount, int) and isinstance(entry["min"], int)
        # The int32 field of the wire holds no higher bid.
        action["amount"] = amount if amount <= INT_OPTION_MAX else entry["min"]
    return action


def _play(game: Game, rng: random.Random, hands: int) -> int:
    """Random legal actions until ``hands`` hands have ended (or the game); checks that every
    seat's view encodes as the service sends it. Returns the hands completed."""
    completed = 0
    for _ in range(3000):
        state = game.state
        if state.over or completed >= hands:
            break
        entries = [
            (seat, entry)
            for seat in range(state.rules.players)
            for entry in legal_actions(state, seat)
            if _sendable(entry)
        ]
        assert entries, f"no seat can act at version {state.version}"
        seat, entry = entries[int(rng.random() * len(entries))]
        events = game.act(seat, decode_action(_action(entry, rng)))
        for event in events:
            compact_json(event.data)
            if event.kind == "hand_result":
                completed += 1
    for seat in range(game.state.rules.players):
        compact_json(view(game.state, seat))
    compact_json(view(game.state, ADJUDICATOR))
    return completed


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(extreme_options(), st.integers(0, 2**16))
def test_a_game_under_extreme_options_exports_a_record_that_audits_as_played(
    chosen: tuple[str, dict[str, object]], seed: int
) -> None:
    variant, options = chosen
    game = Game(resolve_options(variant, options), deals=SeededDeals(f"x{seed}"))
    _play(game, random.Random(seed), hands=2)
    record = game.export()
    verdict = audit_text(json.dumps(record))
    assert "error" not in verdict, verdict
    assert verdict["legal"] and not verdict["claims"], verdict
    state = game.state
    scores = list(state.scores)
    if state.rules.variant == "two-handed" and state.hand is not None:
        scores = [a + b for a, b in zip(scores, state.hand.meld_points, strict=True)]
    assert verdict["scores"] == scores
    assert verdict["finished"] == state.over and verdict["winner"] == state.winner
    hands = verdict["hands"]
    assert isinstance(hands, list)
    completed = hands if state.hand is None else hands[:-1]
    assert [sum(col) for col in zip(*(h["delta"] for h in completed), strict=True)] in (
        [],
        list(state.scores),
    )


#: Per variant, integer options at their ends together (each set is one CreateGame).
_MAX, _MIN = INT_OPTION_MAX, INT_OPTION_MIN
_ALL_MELDS = {name: [MELD_VALUE_MAX] * 4 for name in MELD_NAMES}
SERVED_GAMES: list[tuple[str, dict[str, object]]] = [
    ("two-handed", {"last_trick_bonus": _MAX, "target": _MAX}),
    ("two-handed", {"last_trick_bonus": _MIN, "meld_values": {"dix": [MELD_VALUE_MAX]}}),
    (
        "cutthroat",
        {"min_bid": _MAX, "last_trick_bonus": _MIN, "save_meld": _MAX, "min_meld_to_record": _MIN},
    ),
    (
        "partnership",
        {"min_bid": _MAX, "bid_step": _MAX, "max_raise": _MAX, "last_trick_bonus": _MAX},
    ),
    (
        "double-deck",
        {
            "min_bid": 1,
            "bid_step": _MAX,
            "last_trick_bonus": _MIN,
            "min_meld_to_record": _MAX,
            "meld_values": _ALL_MELDS,
        },
    ),
    (
        "partnership-no-bid",
        {"last_trick_bonus": _MAX, "save_meld": _MAX, "target": _MAX, "meld_values": _ALL_MELDS},
    ),
]


@pytest.mark.parametrize(("variant", "options"), SERVED_GAMES)
async def test_extreme_options_through_the_service_and_the_audit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variant: str, options: dict[str, object]
) -> None:
    """CreateGame, a whole hand through SubmitAction, GetGame for every role, WatchGame from
    the start, ExportGame, then AuditRecords and ``pinochle-referee audit`` on the export: no
    refusal, every view and event JSON, and the audit legal with the scores the game shows."""
    rng = random.Random(7)
    async with serving(tmp_path) as served:
        table = await new_table(served.client, variant, options, seed="extreme")
        last_seq = 0
        for _ in range(400):
            found = await actor(table)
            if found is None:
                break
            seat, entries = found
            sendable = [e for e in entries if _sendable(e) and e["type"] != "concede"]
            entry = sendable[int(rng.random() * len(sendable))]
            result = await table.seats[seat].submit(_action(entry, rng))
            ends = [e["seq"] for e in result["events"] if e["kind"] == "hand_result"]
            if ends:
                last_seq = ends[0]
                break
        else:
            raise AssertionError("the hand did not end in 400 actions")
        shown = await table.adj.view()
        for session in (table.spec, *table.seats):
            assert (await session.view())["scores"] == shown["scores"]
        watched = []
        async for item in table.spec.watch(0):
            assert item["type"] == "event"
            watched.append(item["event"]["seq"])
            if item["event"]["kind"] == "hand_result":
                break
        assert watched[-1] == last_seq
        record = await table.adj.export()
        verdicts = [v async for v in served.client.audit_records([record])]
    verdict = verdicts[0]["verdict"]
    assert verdict["legal"] and not verdict["claims"], verdict
    assert verdict["scores"] == shown["scores"]
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    capsys.readouterr()
    assert cli_main(["audit", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["scores"] == shown["scores"]
