"""Golden playthroughs (tests/golden_gen.py): each stored game is played again and must match.

When a change to the engine is intended, run ``make golden`` (``python -m tests.golden_gen``),
review the diff of ``tests/golden/`` and commit it with the change.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any

import pytest

from referee.engine.actions import decode_action
from referee.engine.errors import IllegalAction
from referee.engine.views import SPECTATOR, view
from referee.rules.options import VARIANT_IDS
from tests.golden_gen import (
    ALLOWED_MISSING,
    FORMAT,
    GOLDEN_DIR,
    GOLDEN_GAMES,
    MAX_BYTES,
    GoldenGame,
    expand_views,
    golden_text,
    header_of,
    new_golden_game,
    play,
    stale_files,
)

REGENERATE = "run `make golden` (python -m tests.golden_gen) if the change is intended"


def _stored(spec: GoldenGame) -> str:
    if not spec.path.exists():
        pytest.fail(f"{spec.filename} is missing: {REGENERATE}")
    return spec.path.read_text(encoding="utf-8")


def _first_difference(stored: Mapping[str, Any], fresh: Mapping[str, Any]) -> str:
    """Where two golden documents first part ways, in words."""
    for key in sorted(set(stored) | set(fresh)):
        if key not in ("steps", "start", "final") and stored.get(key) != fresh.get(key):
            return f"header field {key!r}: stored {stored.get(key)!r}, now {fresh.get(key)!r}"
    for part in ("events", "views"):
        if stored["start"][part] != fresh["start"][part]:
            return f"the first deal's {part}"
    old_steps, new_steps = stored["steps"], fresh["steps"]
    for index, (old, new) in enumerate(zip(old_steps, new_steps, strict=False)):
        for part in ("seat", "action", "events", "views"):
            if old[part] != new[part]:
                return (
                    f"step {index} ({part}): stored seat {old['seat']} {old['action']}, "
                    f"now seat {new['seat']} {new['action']}"
                )
    if len(old_steps) != len(new_steps):
        return f"{len(old_steps)} steps stored, {len(new_steps)} now"
    return f"final: stored {stored['final']}, now {fresh['final']}"


@pytest.mark.parametrize("spec", GOLDEN_GAMES, ids=lambda spec: spec.filename)
class TestGoldenGames:
    """A golden game played again gives the stored file byte for byte; the stored actions replay
    through the engine to the stored events and views; the file is small and the game ends."""

    def test_regenerates_exactly(self, spec: GoldenGame) -> None:
        stored = _stored(spec)
        fresh = golden_text(spec)
        if fresh == stored:
            return
        where = _first_difference(json.loads(stored), json.loads(fresh))
        diff = difflib.unified_diff(
            stored.splitlines(), fresh.splitlines(), "stored", "now", n=2, lineterm=""
        )
        excerpt = "\n".join(line for _, line in zip(range(60), diff, strict=False))
        pytest.fail(f"{spec.filename} differs at {where}; {REGENERATE}\n{excerpt}")

    def test_stored_actions_replay_to_stored_events_and_views(self, spec: GoldenGame) -> None:
        """Apart from the policy: the stored actions, sent again, are accepted and give the
        stored events and every full view (which also checks that the compact form is lossless)."""
        doc = json.loads(_stored(spec))
        game = new_golden_game(spec)
        players = game.state.rules.players
        roles: list[int | str] = [SPECTATOR, *range(players)]
        views = expand_views(doc)
        assert len(views) == len(doc["steps"]) + 1
        assert [e.to_json() for e in game.events] == doc["start"]["events"]
        assert [view(game.state, role) for role in roles] == views[0]
        for index, step in enumerate(doc["steps"]):
            try:
                events = game.act(step["seat"], decode_action(step["action"]))
            except IllegalAction as error:
                pytest.fail(f"step {index}: {step['action']} is now refused: {error.to_json()}")
            assert [e.to_json() for e in events] == step["events"], f"step {index}: events"
            assert [view(game.state, role) for role in roles] == views[index + 1], (
                f"step {index}: views"
            )
        state = game.state
        assert doc["final"] == {
            "hands_completed": state.hands_completed,
            "over": state.over,
            "scores": list(state.scores),
            "version": state.version,
            "winner": state.winner,
        }

    def test_file_is_a_finished_game_of_its_spec(self, spec: GoldenGame) -> None:
        text = _stored(spec)
        assert len(text.encode("utf-8")) < MAX_BYTES
        doc = json.loads(text)
        assert doc["format"] == FORMAT
        assert {key: doc[key] for key in header_of(spec)} == header_of(spec)
        assert doc["final"]["over"] is True and doc["final"]["winner"] is not None
        assert doc["final"]["version"] == len(doc["steps"])


class TestGoldenCoverage:
    """Every registered variant has golden games, except those on the explicit allow-list (each
    with its reason); no file is left over from a game that is no longer listed."""

    @pytest.mark.parametrize("variant", VARIANT_IDS)
    def test_every_registered_variant_has_golden_games(self, variant: str) -> None:
        specs = [spec for spec in GOLDEN_GAMES if spec.variant == variant]
        if variant in ALLOWED_MISSING:
            assert not specs, f"{variant} has golden games now: drop it from ALLOWED_MISSING"
            return
        assert len(specs) >= 2, f"{variant} needs at least two golden games (defaults + options)"
        assert any(set(spec.options) <= {"target"} for spec in specs), (
            f"{variant} needs a golden game with default options (a target aside)"
        )
        missing = [spec.filename for spec in specs if not spec.path.exists()]
        assert not missing, f"missing golden files {missing}: {REGENERATE}"

    def test_allow_list_names_registered_variants_with_a_reason(self) -> None:
        assert set(ALLOWED_MISSING) <= set(VARIANT_IDS)
        assert all(reason.strip() for reason in ALLOWED_MISSING.values())
        assert set(ALLOWED_MISSING) == set()

    def test_no_stale_golden_files(self) -> None:
        assert GOLDEN_DIR.is_dir()
        assert stale_files() == [], f"files no golden game writes: {REGENERATE}"

    def test_golden_games_are_distinct(self) -> None:
        names = [spec.filename for spec in GOLDEN_GAMES]
        assert len(names) == len(set(names))

    def test_generation_is_deterministic(self) -> None:
        spec = GOLDEN_GAMES[0]
        assert play(spec) == play(spec)
