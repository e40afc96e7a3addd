"""Immutable game state.

A ``GameState`` is a value: ``apply`` returns a new one and never changes the old, so a refused
action changes nothing by construction and any state can be kept, compared or replayed. The
action log lives beside the state (in ``Game`` or the store), not in it, which keeps a state a few
kilobytes however long the game runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Final, TypeVar

from referee.rules.cards import Card, Suit
from referee.rules.dealing import Deal
from referee.rules.melds import MeldResult, MeldTable
from referee.rules.options import RuleSet
from referee.rules.scoring import GameEndRule, SaveRule
from referee.rules.tricks import Counting, PlayRules

T = TypeVar("T")

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
class Call:
    """One auction call: ``kind`` is bid, pass or bid_or_redeal."""

    seat: int
    kind: str
    amount: int | None = None
    help: bool = False


@dataclass(frozen=True, slots=True)
class Trick:
    leader: int
    cards: tuple[Card, ...]
    winner: int
    points: int


@dataclass(frozen=True, slots=True)
class MeldRecord:
    """A seat's shown meld for the hand; ``points`` include a no-bid dix exchange."""

    seat: int
    shown: tuple[Card, ...]
    result: MeldResult
    points: int
    dix_points: int


@dataclass(frozen=True, slots=True)
class HandState:
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
class Setup:
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


@dataclass(frozen=True, slots=True)
class GameState:
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


def _compile_evolve(cls: type[T]) -> Callable[..., T]:
    """A ``dataclasses.replace`` for ``cls`` without its per-call introspection.

    ``replace`` looks up the fields of the class on every call, which made it most of the cost
    of ``apply`` on the play path (measured in ``bench/engine.py``). This builds, once, a function
    that passes each field explicitly, so the dataclass ``__init__`` still does the work (frozen,
    typed, no bypass) and a misspelt field name still raises ``TypeError``.
    """
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    arguments = ", ".join(f"{n}=changes.pop({n!r}, old.{n})" for n in names)
    source = (
        "def evolve(old, /, **changes):\n"
        f"    new = cls({arguments})\n"
        "    if changes:\n"
        "        raise TypeError(f'unknown fields {sorted(changes)}')\n"
        "    return new\n"
    )
    namespace: dict[str, object] = {"cls": cls}
    exec(source, namespace)
    evolve = namespace["evolve"]
    assert callable(evolve)
    return evolve


evolve_hand: Final = _compile_evolve(HandState)
evolve_game: Final = _compile_evolve(GameState)
