"""Memory one game in progress holds as it goes on: run ``python -m bench.game_memory``.

Why: the service benchmark's memory figure (bench/service.py, ``memory.rss_after``) measures
10,000 games just dealt, with 3 actions played, which is what issue 4's "10,000 active games in
at most 300 MB" was first measured on. A game in progress holds more as it is played: its state
(the hand's tricks and melds) and its last ``--events-in-memory`` events (``EVENTS_IN_MEMORY``,
64 by default), kept in memory for ``WatchGame``. This measures that growth, in process, so that the
service figure can be read for games that are further on.

Method: a ``GameManager`` on a throw-away ``SqliteStore`` (the server's own objects, no gRPC)
creates seeded partnership games and plays each to a given number of accepted actions with the
demo bots' rule, through ``GameManager.submit`` as the servicer calls it. For each count,
``tracemalloc``'s traced memory after a full collection is read before and after the games are
played, and the difference divided by the number of games is the figure: everything those
games left resident (state, events, records, tokens, caches they fill). A warm-up round of the
same count runs first, so that lazily filled module caches are not counted. Then the same games
are rebuilt from the store by a second manager (as after a restart; it rebuilds the warm-up
games first, so that its reader threads and caches are not counted either), and measured
the same way. The views' memo of finished hand parts is emptied before each reading: it is
shared by all games and bounded. tracemalloc sees Python's allocations only (SQLite's page
cache and gRPC's are not in it), so the server's RSS per game is somewhat more. tracemalloc
also slows every allocation, so this takes about a minute for some 30,000 actions.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import tempfile
import tracemalloc
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from rich.console import Console

from bench.engine import add_run_arguments, environment, output_path
from bench.service import RESULTS_FORMAT, Figure, merge_results, show
from referee.demo import bot_action
from referee.engine.engine import legal_actions
from referee.engine.views import clear_memo
from referee.service.games import GameManager
from referee.service.settings import EVENTS_IN_MEMORY
from referee.store.sqlite import SqliteStore

KIB: Final = 1024
ACTION_COUNTS: Final = (3, 30, 120, 480)
GAMES: Final = 40
WARM_GAMES: Final = 5
QUICK_COUNTS: Final = (3, 60)
QUICK_GAMES: Final = 20
SEATS: Final = 4  # partnership


async def _play(manager: GameManager, games: int, actions: int, tag: str) -> list[str]:
    """``games`` new seeded partnership games, each played to ``actions`` accepted actions
    (or its end); their ids."""
    ids = []
    for index in range(games):
        created = await manager.create(
            variant="partnership",
            options=None,
            first_dealer=0,
            deal_mode={"mode": "seed", "seed": f"{tag}:{index}"},
            players=[],
            token=None,
        )
        rng = random.Random(index)
        for _ in range(actions):
            live = manager.games.get(created.game_id)
            if live is None:  # the game ended
                break
            state = live.state
            for seat in range(SEATS):
                entries = legal_actions(state, seat)
                if entries:
                    break
            await manager.submit(
                created.game_id,
                created.seat_tokens[seat],
                bot_action(entries, rng),
                state.version,
                uuid.uuid4().hex,
            )
        ids.append(created.game_id)
    return ids


def _traced() -> int:
    """Python's traced memory now, the views' shared memo left out (it is bounded for the
    whole process, not per game: referee/engine/views.py)."""
    clear_memo()
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


async def measure(counts: Sequence[int], games: int) -> list[Figure]:
    figures = []
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(Path(folder) / "memory.db")
        await store.open()
        try:
            manager = GameManager(store, max_active_games=10**9)
            tracemalloc.start()
            for actions in counts:
                warm = await _play(manager, min(games, WARM_GAMES), actions, f"warm-{actions}")
                before = _traced()
                ids = await _play(manager, games, actions, f"game-{actions}")
                played = (_traced() - before) / games
                live = [manager.games[i] for i in ids if i in manager.games]
                events = sum(len(game.events) for game in live) / max(1, len(live))
                rebuilder = GameManager(store, max_active_games=10**9)
                for game_id in warm:  # its one-time costs (reader threads, caches) uncounted
                    await rebuilder.load(game_id)
                before = _traced()
                for game_id in ids:
                    await rebuilder.load(game_id)
                rebuilt = (_traced() - before) / games
                del rebuilder
                figures.append(
                    Figure(
                        key=f"game_memory.{actions}",
                        label=f"a game in progress after {actions} actions",
                        value=played / KIB,
                        unit="KiB",
                        digits=1,
                        note=(
                            f"{games} partnership games; {events:.0f} events in memory each"
                            f" (at most {EVENTS_IN_MEMORY}); rebuilt from the store:"
                            f" {rebuilt / KIB:.1f} KiB; 10,000 such games: about"
                            f" {played * 10_000 / KIB / KIB:,.0f} MB"
                        ),
                        detail={
                            "games": games,
                            "in_progress": len(live),
                            "events_in_memory": round(events, 1),
                            "rebuilt_kib": round(rebuilt / KIB, 1),
                        },
                    )
                )
            tracemalloc.stop()
        finally:
            await store.close()
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.game_memory", description=__doc__)
    add_run_arguments(parser, "2 action counts, 20 games each; writes nothing", merges=True)
    args = parser.parse_args(argv)
    env = environment()
    counts, games = (QUICK_COUNTS, QUICK_GAMES) if args.quick else (ACTION_COUNTS, GAMES)
    figures = asyncio.run(measure(counts, games))
    show(
        Console(),
        figures,
        env,
        title="Memory a game in progress holds (GameManager + SQLite store, tracemalloc)",
        caption="Python's allocations only; the server's RSS per game is somewhat more",
    )
    path = output_path(args)
    if path is not None:
        merge_results(
            path,
            "game_memory",
            {
                "format": RESULTS_FORMAT,
                **env,
                "quick": bool(args.quick),
                "figures": {figure.key: figure.to_json() for figure in figures},
            },
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
