"""``pinochle-referee demo``: one whole game played by simple legal bots through the real API.

It starts a server on a free port with a throw-away database (or connects to ``--address``),
creates a game, and lets each seat's bot ask ``ListLegalActions`` and submit one of them with
``SubmitAction`` until the game ends, printing a readable hand-by-hand log.
"""

from __future__ import annotations

import logging
import random
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import structlog
from pinochle_client import RefereeClient, RefereeError, SeatSession
from rich.console import Console

#: The demo's bots bid the minimum at random, whatever their cards: under options where a
#: contract is hard to make (count_scheme points1 with a partnership's or cutthroat's x10 meld
#: table, trump_requires_marriage, a high min_bid) every side's score can fall for ever and no
#: side ever reaches the target. The demo stops after this many hands without a winner.
MAX_HANDS = 500


def playable(entries: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The legal-action entries a bot can turn into a concrete action.

    A two-handed lead may also be the card about to be drawn: that entry is the descriptor
    ``{"type": "play", "drawn_card": true}`` (RULES.md A.8 item 2), not a card, because which
    card it is stays hidden until the draw. A bot cannot name it, so it leads a card it holds.
    """
    return [entry for entry in entries if not entry.get("drawn_card")]


def choose(entry: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """A concrete action for a legal-action entry (A.10 item 2); the bots bid the minimum.

    Descriptor entries (a bid range, cards to pass, discard or meld from) become one action they
    allow; concrete entries are sent as they are. The ``drawn_card`` entry names no card: drop
    it with ``playable`` first.
    """
    kind = entry["type"]
    if kind == "play" and entry.get("drawn_card"):
        raise ValueError("the drawn-card lead names no card: filter entries with playable()")
    if kind == "bid":
        return {"type": "bid", "amount": entry["min"]}
    if kind in ("pass_cards", "discard"):
        return {"type": kind, "cards": rng.sample(list(entry["from"]), int(entry["count"]))}
    if kind == "meld" and "from" in entry:
        return {"type": "meld", "cards": list(entry["from"])}
    return dict(entry)


def bot_action(entries: Sequence[Mapping[str, Any]], rng: random.Random) -> dict[str, Any]:
    """The demo bot's concrete action from a seat's legal actions (as ``ListLegalActions``
    returns them): it bids rarely, melds often and concedes never (unless that is all it may do).
    """
    usable = playable(entries)
    if not usable:
        raise ValueError(f"no legal action the bot can name among {list(entries)}")
    kinds = {e["type"] for e in usable}
    if "bid" in kinds and "pass" in kinds and rng.random() < 0.75:
        return choose(next(e for e in usable if e["type"] == "pass"), rng)
    if len(usable) > 1:
        usable = [e for e in usable if e["type"] != "concede"] or usable
    melds = [e for e in usable if e["type"] in ("meld", "exchange_dix")]
    if melds and rng.random() < 0.8:
        return choose(rng.choice(melds), rng)
    return choose(rng.choice(usable), rng)


async def play_game(
    client: RefereeClient,
    variant: str,
    options: Mapping[str, object] | None,
    seed: str,
    console: Console,
    creator_token: str | None = None,
) -> dict[str, Any]:
    """Play one game; stop after ``MAX_HANDS`` hands when nobody has won by then. Returns the
    last view."""
    rng = random.Random(seed)
    game = await client.create_game(variant, options, seed=seed, creator_token=creator_token)
    seats: list[SeatSession] = [client.seat(game.game_id, t) for t in game.seat_tokens]
    console.print(f"[bold]game {game.game_id}[/bold]: {variant}, {len(seats)} seats")
    # The first hand was dealt by CreateGame, whose events the loop below never sees: its
    # opening comes from the view (later hands' come with the action that ended the last one).
    opening = (await seats[0].view())["hand"]
    _print_opening(console, opening, len(seats))
    while True:
        view = await seats[0].view()
        if view["over"]:
            break
        if view["hands_completed"] >= MAX_HANDS:
            console.print(
                f"[bold]stopped[/bold] after {view['hands_completed']} hands with no winner,"
                f" scores {view['scores']}"
            )
            return dict(view)
        acted = False
        for seat_number, seat in enumerate(seats):
            entries = playable(await seat.legal_actions())
            if not entries:
                continue
            action = bot_action(entries, rng)
            try:
                result = await seat.submit(action)
            except RefereeError as error:  # another seat acted first: try again
                console.print(f"  refused {error.reason}: {error.message}")
                continue
            acted = True
            for event in result["events"]:
                _print_event(console, seat_number, event)
            break
        if not acted:
            raise RuntimeError("no seat could act")
    final: dict[str, Any] = await seats[0].view()
    console.print(f"[bold]game over[/bold]: winner {final['winner']}, scores {final['scores']}")
    return final


def _print_opening(console: Console, hand: Mapping[str, Any], players: int) -> None:
    """The first hand's opening, from the view: CreateGame dealt it, and the events it made
    (the header, a turned-up trump, automatic melds) come back with no action the loop sees."""
    _print_event(
        console, 0, {"kind": "hand_started", "hand": hand["number"], "dealer": hand["dealer"]}
    )
    if hand["trump"] is not None:  # turned up at the deal (two-handed, no-bid)
        _print_event(console, 0, {"kind": "trump_turned", "suit": hand["trump"]})
    melds = hand["melds"]
    first = (hand["dealer"] + 1) % players  # automatic melds at the deal: no-bid only
    for seat in (*range(first, players), *range(first)):
        if melds[seat] is not None:
            _print_event(
                console,
                seat,
                {"kind": "meld_scored", "seat": seat, "points": melds[seat]["points"]},
            )


def _print_event(console: Console, seat: int, event: Mapping[str, Any]) -> None:
    kind = event["kind"]
    if kind == "hand_started":
        console.print(f"[bold cyan]hand {event['hand']}[/bold cyan], dealer {event['dealer']}")
    elif kind == "contract":
        console.print(f"  contract: seat {event['declarer']} at {event['bid']}")
    elif kind in {"trump_declared", "trump_turned"}:
        console.print(f"  trump {event['suit']}")
    elif kind == "meld_scored":
        console.print(f"  seat {event['seat']} melds {event['points']}")
    elif kind == "trick_taken":
        console.print(
            f"  trick {' '.join(event['cards'])} -> seat {event['seat']} ({event['points']})",
            highlight=False,
        )
    elif kind == "hand_result":
        console.print(
            f"  [green]hand result[/green] delta {event['delta']}, scores {event['scores']}"
        )
    elif kind == "conceded":
        why = " (no marriage to name trump)" if event["no_trump"] else ""
        console.print(f"  seat {event['seat']} concedes{why}")
    elif kind == "redeal":
        # A round of passes, or of passes and bid_or_redeal calls (A.7 item 2): no bid either way.
        console.print("  no bid: redeal")
    del seat


async def run_demo(
    variant: str,
    options: Mapping[str, object] | None,
    seed: str,
    address: str | None,
    creator_token: str | None = None,
) -> int:
    console = Console()
    # The server's per-RPC log lines would drown the game log: show warnings only.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if address is not None:
        async with RefereeClient(address) as client:
            await play_game(client, variant, options, seed, console, creator_token)
        return 0
    from referee.service.server import start_server  # noqa: PLC0415
    from referee.service.settings import Settings  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(port=0, db=str(Path(folder) / "demo.db"), metrics_port=0)
        running = await start_server(settings)
        try:
            async with RefereeClient(f"127.0.0.1:{running.port}") as client:
                await play_game(client, variant, options, seed, console)
        finally:
            await running.stop(1.0)
    return 0
