"""A digest of everything the rules core answers over seeded games, to compare its builds.

``python -m tests.native_trace`` prints, for each variant and option set, the SHA-256 of every
answer the core gave while the demo's bots played a seeded game: each seat's legal actions, the
view of every seat, the spectator and the adjudicator, the events of every action, the code of
the same action sent by the next seat (mostly refused), and at the end the export and its audit
verdict. ``tests/test_native.py`` runs it in process (the build under test) and in a child
process on a copy of the tree without the compiled modules (the pure build): the digests must
be equal, so the compiled core plays exactly the games the pure one does.

The option sets are drawn with a seeded ``random.Random`` from what ``allowed_values`` lists
for each option, so both processes draw the same ones; a set the options layer refuses (an
option that needs another) is skipped in both.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from collections.abc import Mapping

from referee.audit import audit_record
from referee.demo import bot_action
from referee.engine.actions import decode_action
from referee.engine.engine import apply, legal_actions
from referee.engine.errors import IllegalAction
from referee.engine.game import Game, SeededDeals
from referee.engine.views import ADJUDICATOR, SPECTATOR, view
from referee.rules.options import (
    VARIANT_IDS,
    OptionError,
    allowed_values,
    resolve_options,
    variant_defaults,
)

ACTIONS = 250  # per game: the auction, melds and play of two or three hands
OPTION_SETS = 3  # per variant, besides the defaults
OPTIONS_PER_SET = 4


def option_sets(variant: str, rng: random.Random) -> list[dict[str, object]]:
    """The defaults, then up to ``OPTION_SETS`` sets of a few enumerated options each."""
    enumerated: list[tuple[str, list[object]]] = []
    for name in sorted(variant_defaults(variant)):
        allowed = allowed_values(variant, name)
        if isinstance(allowed, list) and len(allowed) > 1:
            enumerated.append((name, allowed))
    sets: list[dict[str, object]] = [{}]
    for _ in range(OPTION_SETS):
        chosen = rng.sample(enumerated, min(OPTIONS_PER_SET, len(enumerated)))
        options = {name: rng.choice(allowed) for name, allowed in chosen}
        try:
            resolve_options(variant, options)
        except OptionError:
            continue
        sets.append(options)
    return sets


def _text(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr).encode()


def game_digest(variant: str, options: Mapping[str, object], seed: str) -> str:
    rules = resolve_options(variant, options)
    game = Game(rules, dealer=0, deals=SeededDeals(seed))
    rng = random.Random(seed)
    digest = hashlib.sha256()
    players = rules.players
    roles: list[int | str] = [*range(players), SPECTATOR, ADJUDICATOR]
    for _ in range(ACTIONS):
        state = game.state
        if state.over:
            break
        entries = [legal_actions(state, seat) for seat in range(players)]
        digest.update(_text(entries))
        digest.update(_text([view(state, role) for role in roles]))
        seat = next((s for s in range(players) if entries[s]), None)
        if seat is None:
            break
        action = decode_action(bot_action(entries[seat], rng))
        try:
            apply(state, (seat + 1) % players, action)
            digest.update(b"accepted")
        except IllegalAction as refused:
            digest.update(_text(refused.to_json()))
        digest.update(_text([event.to_json() for event in game.act(seat, action)]))
    record = game.export()
    digest.update(_text(record))
    digest.update(_text(audit_record(json.loads(json.dumps(record)))))
    return digest.hexdigest()


def digests() -> dict[str, str]:
    """``"variant options"`` -> the digest of its seeded game, for every variant."""
    out: dict[str, str] = {}
    for variant in VARIANT_IDS:
        rng = random.Random(f"options-{variant}")
        for index, options in enumerate(option_sets(variant, rng)):
            key = f"{variant} {json.dumps(options, sort_keys=True)}"
            out[key] = game_digest(variant, options, f"trace-{variant}-{index}")
    return out


def build() -> str:
    """Which build of the core this process runs: "compiled" or "pure"."""
    from referee.engine import engine

    return "compiled" if (engine.__file__ or "").endswith(".so") else "pure"


if __name__ == "__main__":
    json.dump({"build": build(), "digests": digests()}, sys.stdout, indent=1, sort_keys=True)
