"""Events: what an accepted action (or a deal) made happen, tagged with who may see it.

Events are plain data with a deterministic serialization, so a stream of them can be stored,
hashed, compared between replays and sent to clients after redaction by audience.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Final, NamedTuple

from referee.rules.cards import Card, format_cards
from referee.rules.tricks import Counting

EVERYONE: Final = "everyone"
ADJUDICATOR: Final = "adjudicator"
SEALED: Final = "sealed"  # the adjudicator now; everyone once the hand has ended

Audience = str | int  # one of the constants above, or a seat number


class Event(NamedTuple):
    """Something that happened, and who may see it. A NamedTuple, like the game states: every
    action makes one or more, and a frozen dataclass's constructor cost twice as much."""

    kind: str
    audience: Audience
    data: Mapping[str, object]

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "audience": self.audience, **self.data}

    def serialize(self) -> str:
        """Canonical compact JSON with sorted keys: equal events serialize equally."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))


def visible_to(event: Event, role: str | int, hand_ended: bool = False) -> bool:
    """Whether ``role`` (a seat, ``"spectator"`` or ``"adjudicator"``) may see ``event``.

    ``hand_ended`` unseals events of a hand that is over (the deal is revealed to all then).
    """
    audience = event.audience
    if audience == EVERYONE or role == ADJUDICATOR:
        return True
    if audience == SEALED:
        return hand_ended
    return isinstance(role, int) and audience == role


def trick_events(
    counting: Counting, trick: Sequence[Card], winner: int, last: bool
) -> tuple[int, list[Event]]:
    """The points a completed trick is worth and its public events (both engines use this)."""
    points = counting.trick_points(trick, last)
    events = [
        Event(
            "trick_taken",
            EVERYONE,
            {"seat": winner, "cards": format_cards(trick), "points": points},
        )
    ]
    if last:
        events.append(
            Event(
                "last_trick_bonus", EVERYONE, {"seat": winner, "points": counting.last_trick_bonus}
            )
        )
    return points, events
