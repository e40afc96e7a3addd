"""Immutable game state.

A ``GameState`` is a value: ``apply`` returns a new one and never changes the old, so a refused
action changes nothing by construction and any state can be kept, compared or replayed. The
action log lives beside the state (in ``Game`` or the store), not in it, which keeps a state a few
kilobytes however long the game runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, TypeVar

from referee.rules.cards import Card, Suit
from referee.rules.dealing import Deal
from referee.rules.frozen import Frozen
from referee.rules.melds import MeldResult, MeldTable
from referee.rules.options import RuleSet
from referee.rules.scoring import GameEndRule, SaveRule
from referee.rules.tricks import Counting, PlayRules

# Phases of a hand (A.7 item 1).
AUCTION: Final = "auction"
TRUMP: Final = "trump"
PARTNER_PASS: Final = "partner_pass"
DECLARER_PASS: Final = "declarer_pass"
KITTY_DISCARD: Final = "kitty_discard"
MELD: Final = "meld"
BURY: Final = "bury"
PLAY: Final = "play"


@dataclass(frozen=True, slots=True)
class Call(Frozen):
    """One auction call: ``kind`` is bid, pass or bid_or_redeal."""

    seat: int
    kind: str
    amount: int | None = None
    help: bool = False


class Trick(NamedTuple):
    """A completed trick. A NamedTuple, like the states that hold it: every completed trick
    builds one, and a frozen dataclass's field-by-field ``__init__`` cost several times a
    tuple's constructor."""

    leader: int
    cards: tuple[Card, ...]
    winner: int
    points: int


@dataclass(frozen=True, slots=True)
class MeldRecord(Frozen):
    """A seat's shown meld for the hand; ``points`` include a no-bid dix exchange."""

    seat: int
    shown: tuple[Card, ...]
    result: MeldResult
    points: int
    dix_points: int


class HandState(NamedTuple):
    """One hand in progress. A NamedTuple, not a frozen dataclass, for speed: every accepted
    action builds a new one, and a tuple's constructor is several times cheaper than a frozen
    dataclass's field-by-field ``__init__`` (measured in ``bench/engine.py``). Still immutable."""

    number: int
    dealer: int
    deal: Deal
    phase: str
    turn: int  # the seat to act (auction, trump, exchange, meld, bury, play)
    hands: tuple[tuple[Card, ...], ...]  # concealed cards per seat, sorted
    calls: tuple[Call, ...] = ()
    high_bid: int | None = None
    high_bidder: int | None = None
    out: tuple[bool, ...] = ()  # passed out of the auction
    declarer: int | None = None
    bid: int | None = None
    trump: Suit | None = None
    received: tuple[tuple[Card, ...], ...] = ()  # cards passed to each seat this hand
    passed_counts: tuple[tuple[int, int], ...] = ()  # (seat, count) of each pass or discard
    discards: tuple[Card, ...] = ()  # kitty discard or cutthroat bury
    widow_taken: bool = False
    turn_up: Card | None = None  # no-bid: the face-up trump card (a 9 after the exchange)
    dix_exchanged_by: int | None = None
    melds: tuple[MeldRecord | None, ...] = ()
    trick_leader: int = 0
    trick: tuple[Card, ...] = ()
    tricks: tuple[Trick, ...] = ()
    side_points: tuple[int, ...] = ()
    side_tricks: tuple[int, ...] = ()
    conceded: bool = False
    # Two-handed only (RULES.md §2, A.8); see referee.engine.two_handed.
    stock: tuple[Card, ...] = ()  # face-down stock, top first
    table: tuple[
        tuple[tuple[int, int], ...], ...
    ] = ()  # per seat: (physical id, scored-types mask)
    pending: tuple[tuple[tuple[str, tuple[int, ...]], ...], ...] = ()  # deferred melds per seat
    meld_points: tuple[int, ...] = ()  # meld scored so far this hand, per seat
    scored_nines: tuple[int, ...] = ()  # 9s of trump in the concealed hand that have scored
    window_seat: int | None = None  # the trick winner whose meld window is open
    window_melded: bool = False  # the window's one meld has been made
    draw_choice: bool | None = None  # last_draw winner_chooses: the winner takes the turned card
    # Every two-handed meld scored this hand, in order: (seat, name, cards, points). A.10 item 3:
    # every role sees every meld shown with its points, also after its cards have been played.
    scored_melds: tuple[tuple[int, str, tuple[Card, ...], int], ...] = ()


@dataclass(frozen=True, slots=True)
class Setup(Frozen):
    """Per-game rule objects derived once from the ``RuleSet`` so the hot path reads fields."""

    rules: RuleSet
    sides: int
    play_rules: PlayRules
    counting: Counting
    total_in_play: int
    save_rule: SaveRule
    end_rule: GameEndRule
    meld_table: MeldTable
    two_handed: bool = False

    def side_of(self, seat: int) -> int:
        return seat % 2 if self.rules.partnerships else seat


class GameState(NamedTuple):
    """A whole game: a value, replaced (never changed) by every accepted action."""

    setup: Setup
    version: int  # accepted seat actions so far
    first_dealer: int
    scores: tuple[int, ...]
    target: int
    hands_completed: int
    next_dealer: int
    hand: HandState | None  # None: waiting for the next deal (or the game is over)
    winner: int | None = None
    over: bool = False

    @property
    def rules(self) -> RuleSet:
        return self.setup.rules


_HAND_FIELD_INDEX: Final = {name: index for index, name in enumerate(HandState._fields)}
_GAME_FIELD_INDEX: Final = {name: index for index, name in enumerate(GameState._fields)}
_Value = TypeVar("_Value", HandState, GameState)


def _copy_with(old: _Value, field_index: Mapping[str, int], changes: dict[str, Any]) -> _Value:
    """A copy of ``old`` with ``changes`` set by field index.

    Not ``_replace``: that pops every one of a hand's 36 field names from the changes, where
    an action changes two to five; setting only those took about a sixth of the instructions
    off the audit of recorded games (``bench/engine.py`` times it). Unknown names raise
    ValueError, as ``_replace`` does."""
    values = list(old)
    try:
        for name, value in changes.items():
            values[field_index[name]] = value
    except KeyError as unknown:
        raise ValueError(f"{type(old).__name__} has no field {unknown}") from None
    return tuple.__new__(type(old), values)


def evolve_hand(old: HandState, /, **changes: Any) -> HandState:
    """A copy of ``old`` with ``changes`` (unknown names raise ValueError)."""
    return _copy_with(old, _HAND_FIELD_INDEX, changes)


def evolve_game(old: GameState, /, **changes: Any) -> GameState:
    """A copy of ``old`` with ``changes`` (unknown names raise ValueError)."""
    return _copy_with(old, _GAME_FIELD_INDEX, changes)


def add_at(values: tuple[int, ...], index: int, amount: int) -> tuple[int, ...]:
    """``values`` with ``amount`` added to the one at ``index`` (a side's or seat's tally).

    Hot path (every completed trick): one list copy is cheaper than rebuilding the tuple
    through a generator that tests every entry."""
    changed = list(values)
    changed[index] += amount
    return tuple(changed)
