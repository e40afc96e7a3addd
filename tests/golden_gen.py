"""Golden playthroughs: whole games written out step by step (STYLE.md, OpenSpiel-style).

``python -m tests.golden_gen`` (``make golden``) plays every game of ``GOLDEN_GAMES`` with a
deterministic policy (``SeededDeals`` with a fixed seed; a seeded ``random.Random`` choosing among
every seat's legal actions, as the random-game properties do) and writes
``tests/golden/<variant>-<n>.json``. ``tests/test_golden.py`` plays them again in memory and
compares with the files exactly, so any change in legal actions, events, views or scores shows up
as a readable diff, to be reviewed and then accepted by running this script again.

A file holds the variant, options and seeds, then the events and views of the first deal, then
for every step the action (seat and JSON form), the events it caused (``Event.to_json``), the
spectator view and each seat's view after it, and finally the scores. To keep files small and
diffs readable, views are stored compactly: the spectator's view as what changed since the step
before (the first one relative to the header's variant, options, seat count and first dealer),
and each seat's view as what differs from the spectator's (its own cards, the cards passed to
it, its kitty and discards). ``expand_views`` puts every view back together.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from referee.engine.actions import decode_action
from referee.engine.events import Event
from referee.engine.game import Game, SeededDeals
from referee.engine.state import GameState
from referee.engine.views import SPECTATOR, view
from referee.rules.options import VARIANT_IDS, resolve_options
from tests.strategies import all_legal, choose_action, pick

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
FORMAT = "pinochle-golden/1"
MAX_ACTIONS = 3000
MAX_BYTES = 2_000_000
#: View keys that stay the same for a whole game; stored once in the header.
STATIC_VIEW_KEYS = ("first_dealer", "options", "seats", "variant")
#: Registered variants with no golden games yet, and why.
ALLOWED_MISSING: Mapping[str, str] = {}


@dataclass(frozen=True, slots=True)
class GoldenGame:
    """One golden playthrough: a variant, its options, the deal seed and the policy seed."""

    variant: str
    number: int
    options: Mapping[str, Any] = field(default_factory=dict)
    deal_seed: str = ""
    policy_seed: int = 0
    dealer: int = 0

    @property
    def filename(self) -> str:
        return f"{self.variant}-{self.number}.json"

    @property
    def path(self) -> Path:
        return GOLDEN_DIR / self.filename


# Defaults (with a small target so games stay short) and one option set per variant. The policy
# seeds were picked so that the games between them show a redeal, a concession, a dix exchange,
# a kitty and a played-out hand, and every file stays small.
GOLDEN_GAMES: tuple[GoldenGame, ...] = (
    # Two-handed: policy seeds with several melds, dix exchanges and a meld using table cards.
    GoldenGame("two-handed", 1, {"target": 300}, "golden-two-handed-1", 9),
    GoldenGame(
        "two-handed",
        2,
        {  # the Hoyle/Bicycle profile (OPTIONS.md "Two-handed")
            "target": 300,
            "new_card_required": True,
            "deferred_meld_scoring": False,
            "head_rule": "trump_lead_only",
            "dix_scores_when_played": False,
        },
        "golden-two-handed-2",
        39,
        dealer=1,
    ),
    GoldenGame("cutthroat", 1, {"target": 100}, "golden-cutthroat-1", 126),
    GoldenGame(
        "cutthroat",
        2,
        {
            "target": 150,
            "allow_pass_with_help": True,
            "count_scheme": "classic_11",
            "head_rule": "trump_lead_only",
            "may_bury_melded_cards": True,
            "save_applies_to": "both",
        },
        "golden-cutthroat-2",
        148,
        dealer=2,
    ),
    GoldenGame("partnership", 1, {"target": 150}, "golden-partnership-1", 94),
    GoldenGame(
        "partnership",
        2,
        {
            "target": 200,
            "all_pass": "redeal",
            "allow_bid_or_redeal": True,
            "exchange_mode": "kitty",
            "exchange_count": 4,
            "head_over_partner": False,
            "must_overtrump": False,
            "run_counts_its_royal_marriage": True,
        },
        "golden-partnership-2",
        4,
        dealer=1,
    ),
    GoldenGame("double-deck", 1, {"target": 40}, "golden-double-deck-1", 34),
    GoldenGame(
        "double-deck",
        2,
        {
            "deck": 48,
            "target": 25,
            "bid_schedule": [[20, 1], [30, 5]],
            "exchange_count": 2,
            "head_when_trumped": "beat_highest_led_card",
            "meld_declaration": "auto",
            "min_meld_to_record": 5,
        },
        "golden-double-deck-2",
        92,
    ),
    GoldenGame("partnership-no-bid", 1, {"target": 300}, "golden-partnership-no-bid-1", 75),
    GoldenGame(
        "partnership-no-bid",
        2,
        {
            "target": 300,
            "count_scheme": "points1",
            "must_trump_even_if_cannot_overtrump": False,
            "meld_values": {"pinochle": [40, 300], "roundhouse_bonus": [240]},
            "save_meld": "none",
        },
        "golden-partnership-no-bid-2",
        128,
        dealer=3,
    ),
)


# --------------------------------------------------------------------------------------------
# Compact views


def _diff(base: Mapping[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    """What ``other`` changes or adds relative to ``base`` (nested for dicts), plus the keys it
    lacks under ``"-missing"``."""
    out: dict[str, Any] = {}
    for key, value in other.items():
        if key not in base:
            out[key] = value
        elif base[key] != value:
            if isinstance(value, Mapping) and isinstance(base[key], Mapping):
                out[key] = _diff(base[key], value)
            else:
                out[key] = value
    missing = sorted(key for key in base if key not in other)
    if missing:
        out["-missing"] = missing
    return out


def _patch(base: Mapping[str, Any], diff: Mapping[str, Any]) -> dict[str, Any]:
    out = {key: value for key, value in base.items() if key not in diff.get("-missing", ())}
    for key, value in diff.items():
        if key == "-missing":
            continue
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _patch(out[key], value)
        else:
            out[key] = value
    return out


def _static(header: Mapping[str, Any]) -> dict[str, Any]:
    return {key: header[key] for key in STATIC_VIEW_KEYS} | {"role": SPECTATOR}


def compact_views(
    state: GameState, previous: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The compact views after a step, and the full spectator view (the next step's base).

    ``previous`` is the spectator view before the step (for the first deal: the header's static
    keys). The spectator part holds what changed since then; each seat's part what its view has
    that the spectator's does not (or has otherwise).
    """
    spectator = view(state, SPECTATOR)
    seats = [_diff(spectator, view(state, seat)) for seat in range(state.rules.players)]
    return {"spectator": _diff(previous, spectator), "seats": seats}, spectator


def expand_views(doc: Mapping[str, Any]) -> list[list[dict[str, Any]]]:
    """Every full view back from a golden document: for the first deal and then each step, the
    spectator's view followed by each seat's."""
    spectator = _static(doc)
    out = []
    for views in [doc["start"]["views"]] + [step["views"] for step in doc["steps"]]:
        spectator = _patch(spectator, views["spectator"])
        out.append([spectator] + [_patch(spectator, seat) for seat in views["seats"]])
    return out


# --------------------------------------------------------------------------------------------
# Playing a golden game


def _events(events: Sequence[Event]) -> list[dict[str, object]]:
    return [event.to_json() for event in events]


def header_of(spec: GoldenGame) -> dict[str, Any]:
    rules = resolve_options(spec.variant, dict(spec.options))
    return {
        "format": FORMAT,
        "variant": spec.variant,
        "options": dict(spec.options),
        "deal_seed": spec.deal_seed,
        "policy_seed": spec.policy_seed,
        "first_dealer": spec.dealer,
        "seats": rules.players,
    }


def new_golden_game(spec: GoldenGame) -> Game:
    rules = resolve_options(spec.variant, dict(spec.options))
    return Game(rules, dealer=spec.dealer, deals=SeededDeals(spec.deal_seed))


def _final(state: GameState) -> dict[str, Any]:
    return {
        "hands_completed": state.hands_completed,
        "over": state.over,
        "scores": list(state.scores),
        "version": state.version,
        "winner": state.winner,
    }


def choose(state: GameState, rng: random.Random) -> tuple[int, dict[str, object]]:
    """``choose_action``, except in two-handed, whose legal actions are all concrete (a meld
    entry is one named combination, A.10 item 2): the uniformly picked entry is sent as listed.
    The other variants draw exactly as ``choose_action`` does, so their files do not change."""
    if not state.setup.two_handed:
        return choose_action(state, rng)
    # The window's {"play", "drawn_card"} entry stands for a card not drawn yet: not sendable.
    options = [(seat, e) for seat, e in all_legal(state) if not e.get("drawn_card")]
    if not options:
        raise AssertionError(f"no seat has a legal action (version {state.version})")
    seat, entry = pick(rng, options)
    return seat, dict(entry)


def play(spec: GoldenGame) -> dict[str, Any]:
    """Play ``spec`` to the end and return the golden document."""
    header = header_of(spec)
    game = new_golden_game(spec)
    rng = random.Random(spec.policy_seed)
    doc: dict[str, Any] = dict(header)
    views, spectator = compact_views(game.state, _static(header))
    doc["start"] = {"events": _events(game.events), "views": views}
    steps: list[dict[str, Any]] = []
    while not game.state.over:
        if len(steps) >= MAX_ACTIONS:
            raise RuntimeError(f"{spec.filename}: the game did not end in {MAX_ACTIONS} actions")
        seat, action = choose(game.state, rng)
        events = game.act(seat, decode_action(action))
        views, spectator = compact_views(game.state, spectator)
        steps.append({"seat": seat, "action": action, "events": _events(events), "views": views})
    doc["steps"] = steps
    doc["final"] = _final(game.state)
    return doc


# --------------------------------------------------------------------------------------------
# Stable text


def render(value: Any, indent: int = 0) -> str:
    """JSON with sorted keys and one space of indent per level; a list of plain values (cards,
    scores) stays on one line. Deterministic, and ``json.loads`` reads it back unchanged."""
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        pad = " " * (indent + 1)
        items = [
            f"{pad}{json.dumps(key)}: {render(value[key], indent + 1)}" for key in sorted(value)
        ]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(value, list | tuple):
        if all(not isinstance(item, Mapping | list | tuple) for item in value):
            return json.dumps(list(value))
        pad = " " * (indent + 1)
        items = [pad + render(item, indent + 1) for item in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    return json.dumps(value)


def golden_text(spec: GoldenGame) -> str:
    return render(play(spec)) + "\n"


def stale_files() -> list[Path]:
    """Files in the golden directory that no entry of GOLDEN_GAMES writes."""
    wanted = {spec.filename for spec in GOLDEN_GAMES}
    return sorted(p for p in GOLDEN_DIR.glob("*.json") if p.name not in wanted)


def main(argv: Sequence[str] = ()) -> int:
    GOLDEN_DIR.mkdir(exist_ok=True)
    for spec in GOLDEN_GAMES:
        text = golden_text(spec)
        if len(text.encode()) > MAX_BYTES:
            print(f"{spec.filename}: {len(text)} bytes, over {MAX_BYTES}", file=sys.stderr)
            return 1
        old = spec.path.read_text(encoding="utf-8") if spec.path.exists() else None
        if old != text:
            spec.path.write_text(text, encoding="utf-8")
        state = "unchanged" if old == text else ("written" if old is None else "UPDATED")
        steps = len(json.loads(text)["steps"])
        print(f"{spec.filename}: {steps} steps, {len(text.encode())} bytes, {state}")
    for path in stale_files():
        variant = path.stem.rsplit("-", 1)[0]
        if variant in VARIANT_IDS:  # a golden game that no longer exists
            path.unlink()
            print(f"{path.name}: removed (not in GOLDEN_GAMES)")
        else:
            print(f"{path.name}: not a golden game; left alone", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
