"""A game with its log: the state, every deal and accepted action, and where deals come from.

The log *is* the game: replaying it through ``start_hand`` and ``apply`` rebuilds the state
exactly, and the exported record (``pinochle-record/1``) is built from it.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from referee.engine.actions import Action, encode_action
from referee.engine.engine import apply, new_game, start_hand
from referee.engine.events import Event
from referee.engine.state import GameState
from referee.rules.cards import canonical_deck
from referee.rules.dealing import Deal, deal_from_order, seeded_deal
from referee.rules.frozen import Frozen
from referee.rules.options import RuleSet

RECORD_FORMAT = "pinochle-record/1"


class DealSource(Protocol):
    """Where the next hand's deal comes from (a chance event with a pluggable source)."""

    def next_deal(self, rules: RuleSet, dealer: int, hand_number: int) -> Deal: ...


def _split(rules: RuleSet, order: Sequence[int], dealer: int) -> Deal:
    return deal_from_order(
        order,
        players=rules.players,
        hand_size=rules.hand_size,
        dealer=dealer,
        two_handed=rules.variant == "two-handed",
        dealer_turns_last_card=rules.variant == "partnership-no-bid",
    )


@dataclass(frozen=True, slots=True)
class SeededDeals(Frozen):
    """Portable deals (A.10 item 4); hand n is dealt from the seed ``f"{seed}:{n}"``."""

    seed: str

    def next_deal(self, rules: RuleSet, dealer: int, hand_number: int) -> Deal:
        return seeded_deal(
            f"{self.seed}:{hand_number}",
            deck_size=rules.deck,
            players=rules.players,
            hand_size=rules.hand_size,
            dealer=dealer,
            two_handed=rules.variant == "two-handed",
            dealer_turns_last_card=rules.variant == "partnership-no-bid",
        )


def secure_shuffle(cards: Sequence[int]) -> list[int]:
    """Unbiased Fisher-Yates driven by the operating system's CSPRNG (kept out of ``rules``)."""
    deck = list(cards)
    for i in range(len(deck) - 1, 0, -1):
        j = secrets.randbelow(i + 1)
        deck[i], deck[j] = deck[j], deck[i]
    return deck


@dataclass(frozen=True, slots=True)
class SecureDeals(Frozen):
    """Deals shuffled with the operating system's CSPRNG."""

    def next_deal(self, rules: RuleSet, dealer: int, hand_number: int) -> Deal:
        return _split(rules, secure_shuffle(canonical_deck(rules.deck)), dealer)


@dataclass(slots=True)
class GivenDeals:
    """Deals given in advance (duplicate tournaments), then another source once used up."""

    deals: Sequence[Deal]
    then: DealSource = field(default_factory=SecureDeals)

    def next_deal(self, rules: RuleSet, dealer: int, hand_number: int) -> Deal:
        if hand_number < len(self.deals):
            return self.deals[hand_number]
        return self.then.next_deal(rules, dealer, hand_number)


@dataclass(frozen=True, slots=True)
class LogEntry(Frozen):
    """One entry of a game's log: a deal (``seat`` None) or a seat's accepted action."""

    seat: int | None
    action: Action | None = None
    deal: Deal | None = None


class Game:
    """A live game: deals each hand from its source as soon as the previous one ends."""

    def __init__(self, rules: RuleSet, dealer: int = 0, deals: DealSource | None = None) -> None:
        self.state: GameState = new_game(rules, dealer)
        self.deals: DealSource = deals if deals is not None else SecureDeals()
        self.log: list[LogEntry] = []
        self.events: list[Event] = []
        self._deal_if_needed()

    def _deal_if_needed(self) -> list[Event]:
        state = self.state
        if state.over or state.hand is not None:
            return []
        deal = self.deals.next_deal(state.rules, state.next_dealer, state.hands_completed)
        self.state, events = start_hand(state, deal)
        self.log.append(LogEntry(None, deal=deal))
        self.events.extend(events)
        return events

    def act(self, seat: int, action: Action) -> list[Event]:
        """Apply an action; raises ``IllegalAction`` and changes nothing when it is refused."""
        self.state, events = apply(self.state, seat, action)
        self.log.append(LogEntry(seat, action=action))
        self.events.extend(events)
        return events + self._deal_if_needed()

    def export(self, players: Sequence[str] | None = None) -> dict[str, object]:
        return export_record(self.state.rules, self.state.first_dealer, self.log, players)


def replay(rules: RuleSet, dealer: int, log: Sequence[LogEntry]) -> GameState:
    """Fold the log through ``start_hand`` and ``apply``; the result equals the live state."""
    state = new_game(rules, dealer)
    for entry in log:
        if entry.deal is not None:
            state, _ = start_hand(state, entry.deal)
        else:
            assert entry.seat is not None and entry.action is not None
            state, _ = apply(state, entry.seat, entry.action)
    return state


def export_record(
    rules: RuleSet, dealer: int, log: Sequence[LogEntry], players: Sequence[str] | None = None
) -> dict[str, object]:
    """The game as a ``pinochle-record/1`` document, built from the log alone."""
    hands: list[dict[str, object]] = []
    for entry in log:
        if entry.deal is not None:
            hands.append({"deal": entry.deal.to_json(), "actions": []})
        else:
            assert entry.action is not None
            actions = hands[-1]["actions"]
            assert isinstance(actions, list)
            actions.append({"seat": entry.seat, **encode_action(entry.action)})
    record: dict[str, object] = {
        "format": RECORD_FORMAT,
        "variant": rules.variant,
        "options": dict(rules.explicit),
        "dealer": dealer,
        "hands": hands,
    }
    if players is not None:
        record["players"] = list(players)
    return record
