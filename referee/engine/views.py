"""What each role may see of a game (RULES.md A.10 item 3).

A view is built by *adding* what a role may see to the public part, never by removing secrets
from a full dump, so a field added to the state later stays hidden until someone decides who may
see it. Roles: a seat number, ``"spectator"`` or ``"adjudicator"``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from referee.engine.state import Call, GameState, HandState, MeldRecord, Trick
from referee.rules.cards import format_card, format_cards, format_suit

SPECTATOR = "spectator"
ADJUDICATOR = "adjudicator"

Role = int | str

# Memo of the JSON-ready form of a hand's parts that never change once made (the auction, the
# melds, the completed tricks): states are immutable and share those tuples from one action to
# the next, so a view of the play phase rebuilt them from scratch on every action, a quarter of
# the view's cost (bench/instructions.py). Keyed by the tuple's id, with the tuple kept in the
# entry so the id cannot be reused while the entry lives; emptied when full. The values are
# shared by every view that uses them: read-only, like the rest of a view.
_PARTS: dict[int, tuple[object, list[object]]] = {}
_PARTS_MAX = 8192


def clear_memo() -> None:
    """Empty the memo: it is shared by every game and bounded (``_PARTS_MAX`` entries), so a
    measure of what one game holds (bench/game_memory.py) leaves it out."""
    _PARTS.clear()


def _part(
    part: tuple[object, ...], build: Callable[[tuple[Any, ...]], list[object]]
) -> list[object]:
    """``build(part)``, from the memo when this very tuple was built before."""
    hit = _PARTS.get(id(part))
    if hit is not None and hit[0] is part:
        return hit[1]
    value = build(part)
    if len(_PARTS) >= _PARTS_MAX:
        _PARTS.clear()
    _PARTS[id(part)] = (part, value)
    return value


def _auction(calls: tuple[Call, ...]) -> list[object]:
    return [
        {"seat": c.seat, "type": c.kind}
        | ({"amount": c.amount} if c.amount is not None else {})
        | ({"help": True} if c.help else {})
        for c in calls
    ]


def _melds(melds: tuple[MeldRecord | None, ...]) -> list[object]:
    return [
        None
        if m is None
        else {
            "cards": format_cards(m.shown),
            "melds": [
                {
                    "name": x.name,
                    "level": x.level,
                    "points": x.points,
                    "cards": format_cards(x.cards),
                }
                for x in m.result.melds
            ],
            "points": m.points,
        }
        for m in melds
    ]


def _tricks(tricks: tuple[Trick, ...]) -> list[object]:
    return [
        {
            "leader": t.leader,
            "cards": format_cards(t.cards),
            "winner": t.winner,
            "points": t.points,
        }
        for t in tricks
    ]


def _public_hand(state: GameState, hand: HandState) -> dict[str, object]:
    rules = state.rules
    return {
        "number": hand.number,
        "dealer": hand.dealer,
        "phase": hand.phase,
        "turn": hand.turn,
        "auction": _part(hand.calls, _auction),
        "declarer": hand.declarer,
        "bid": hand.bid,
        "trump": None if hand.trump is None else format_suit(hand.trump),
        "turn_up": None if hand.turn_up is None else format_card(hand.turn_up),
        "widow": (
            format_cards(hand.deal.widow)
            if hand.widow_taken and rules.variant == "cutthroat"
            else None
        ),
        "hand_sizes": [len(h) for h in hand.hands],
        "passes": [{"seat": seat, "count": count} for seat, count in hand.passed_counts],
        "melds": _part(hand.melds, _melds),
        "tricks": _part(hand.tricks, _tricks),
        "trick": {"leader": hand.trick_leader, "cards": format_cards(hand.trick)},
        "points": list(hand.side_points),
        "conceded": hand.conceded,
    } | (_two_handed_public(hand) if state.setup.two_handed else {})


def _two_handed_public(hand: HandState) -> dict[str, object]:
    """Two-handed (A.10 item 3): the turned card, the stock size, each seat's melded cards.

    Also the winner's window and, with ``last_draw: winner_chooses``, its choice of the last draw.
    """
    return {
        "stock_size": len(hand.stock),
        "table": [format_cards(sorted(pid >> 1 for pid, _ in side)) for side in hand.table],
        "pending": [
            [
                {"name": name, "cards": format_cards(sorted(p >> 1 for p in pids))}
                for name, pids in side
            ]
            for side in hand.pending
        ],
        "meld_points": list(hand.meld_points),
        # A.10 item 3: every meld shown, with its points (its cards may since have been played).
        "scored_melds": [
            {"seat": seat, "name": name, "cards": format_cards(cards), "points": points}
            for seat, name, cards, points in hand.scored_melds
        ],
        "window_seat": hand.window_seat,
        "window_melded": hand.window_melded,
        # last_draw winner_chooses: the winner's public draw choice (its draw_chosen event goes
        # to everyone), so a snapshot tells who takes the turned card at the final draw.
        "draw_choice": hand.draw_choice,
    }


def view(state: GameState, role: Role) -> dict[str, object]:
    """The game as ``role`` may see it, JSON-ready."""
    rules = state.rules
    if not (
        role in (SPECTATOR, ADJUDICATOR) or (isinstance(role, int) and 0 <= role < rules.players)
    ):
        raise ValueError(f"unknown role {role!r}")
    out: dict[str, object] = {
        "variant": rules.variant,
        "options": dict(rules.explicit),
        "seats": rules.players,
        "role": role,
        "version": state.version,
        "first_dealer": state.first_dealer,
        "scores": list(state.scores),
        "target": state.target,
        "hands_completed": state.hands_completed,
        "over": state.over,
        "winner": state.winner,
        "hand": None,
    }
    hand = state.hand
    if hand is None:
        return out
    public = _public_hand(state, hand)
    if isinstance(role, int):
        public["cards"] = format_cards(hand.hands[role])
        public["received"] = format_cards(hand.received[role])
        if role == hand.declarer and hand.deal.widow and rules.variant != "cutthroat":
            public["kitty"] = format_cards(hand.deal.widow) if hand.widow_taken else None
        if role == hand.declarer:
            public["discards"] = format_cards(hand.discards)
    elif role == ADJUDICATOR:
        public["hands"] = [format_cards(h) for h in hand.hands]
        public["received"] = [format_cards(r) for r in hand.received]
        public["discards"] = format_cards(hand.discards)
        public["deal"] = hand.deal.to_json()
        if state.setup.two_handed:
            public["stock"] = format_cards(hand.stock)
    out["hand"] = public
    return out
