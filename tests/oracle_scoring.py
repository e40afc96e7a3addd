"""An independent reading of how a hand is scored and when the game ends (N-version oracle).

Written from ``RULES.md`` (Part A over Part B), ``OPTIONS.md`` and the README's rulings alone,
without the engine's scorer, so ``tests/test_oracle_scoring.py`` can compare the two in random
games. It works on the facts of a hand as the public events tell them (the contract, each seat's
meld and dix points, every trick's cards and taker, the declaring side's discards, a
concession) and on card strings, never on the engine's card ints or rule objects.

Parts, with the rules each implements:

* ``ScoringOptions.resolve``: the defaults of the options this area reads (OPTIONS.md tables
  "Counting", "Saving meld", "Game end"; A.2 ``last_trick_bonus`` following ``count_scheme``).
* ``card_points`` / ``points_in_play``: §1.6 counting schemes and the last-trick bonus.
* ``score_figures`` / ``score_hand``: A.6, A.7 items 2, 4, 5, 8; §2.5 and A.8 item 9
  (two-handed), §3.4 and §3.6 (cutthroat), §4.5, §4.7 and §10.3 (partnership), §5.6
  (double-deck), §6.5 (no-bid); A.2 / A.9 item 4 save rules; OPTIONS.md ``min_meld_to_record``.
* ``decide_game_end``: A.7 item 9, A.8 item 9, §2.5, §3.6, §4.8, §5.7, §6.5 and OPTIONS.md
  ``target``, ``both_reach``, ``margin_win``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

# --------------------------------------------------------------------------------------------
# Options this area reads, with each variant's default (OPTIONS.md)

TWO_HANDED: Final = "two-handed"
CUTTHROAT: Final = "cutthroat"
PARTNERSHIP: Final = "partnership"
DOUBLE_DECK: Final = "double-deck"
NO_BID: Final = "partnership-no-bid"

#: Seats per variant (A.1).
SEATS: Final[Mapping[str, int]] = {
    TWO_HANDED: 2,
    CUTTHROAT: 3,
    PARTNERSHIP: 4,
    DOUBLE_DECK: 4,
    NO_BID: 4,
}

#: Card values by rank per counting scheme (§1.6, A.2 ``count_scheme``).
SCHEME_VALUES: Final[Mapping[str, Mapping[str, int]]] = {
    "modern10": {"A": 10, "10": 10, "K": 10, "Q": 0, "J": 0, "9": 0},
    "simple_10_5": {"A": 10, "10": 10, "K": 5, "Q": 5, "J": 0, "9": 0},
    "classic_11": {"A": 11, "10": 10, "K": 4, "Q": 3, "J": 2, "9": 0},
    "points1": {"A": 1, "10": 1, "K": 1, "Q": 0, "J": 0, "9": 0},
    "points1_single": {"A": 1, "10": 1, "K": 1, "Q": 0, "J": 0, "9": 0},
    "points1_double": {"A": 1, "10": 1, "K": 1, "Q": 0, "J": 0, "9": 0},
}


def _by_deck(deck: int, with_48: object, with_80: object) -> object:
    return with_80 if deck == 80 else with_48


@dataclass(frozen=True, slots=True)
class ScoringOptions:
    """The options of one game that scoring and game end read, defaults filled in."""

    variant: str
    deck: int
    count_scheme: str
    last_trick_bonus: int
    save_meld: str | int
    save_applies_to: str
    dix_exempt_from_save: bool
    min_meld_to_record: int
    target: int
    both_reach: str
    margin_win: bool

    @property
    def seats(self) -> int:
        return SEATS[self.variant]

    @property
    def partnerships(self) -> bool:
        """A.3: four-handed variants play in two teams (seats 0 and 2, seats 1 and 3)."""
        return self.seats == 4

    @property
    def sides(self) -> int:
        return 2 if self.partnerships else self.seats

    def side_of(self, seat: int) -> int:
        return seat % 2 if self.partnerships else seat

    @classmethod
    def resolve(cls, variant: str, options: Mapping[str, object]) -> ScoringOptions:
        """The given options over the variant defaults of OPTIONS.md.

        ``last_trick_bonus`` left out follows the counting scheme (A.2, OPTIONS.md "Counting"):
        10 for modern10 / simple_10_5 / classic_11, ``points1`` 1 with 48 cards and 2 with 80,
        ``points1_single`` 1, ``points1_double`` 2. ``save_meld`` and friends do not apply to
        two-handed (melds score when declared): ``none`` there.
        """
        deck_option = options.get("deck")
        deck = (
            deck_option if isinstance(deck_option, int) else (80 if variant == DOUBLE_DECK else 48)
        )
        scheme_defaults = {
            TWO_HANDED: "simple_10_5",
            CUTTHROAT: "modern10",
            PARTNERSHIP: "modern10",
            NO_BID: "modern10",
            DOUBLE_DECK: "points1",
        }
        scheme = str(options.get("count_scheme", scheme_defaults[variant]))
        bonus_option = options.get("last_trick_bonus")
        if isinstance(bonus_option, int):
            bonus = bonus_option
        elif scheme in ("points1", "points1_single", "points1_double"):
            bonus = {"points1_single": 1, "points1_double": 2}.get(scheme, 2 if deck == 80 else 1)
        else:
            bonus = 10
        save_defaults: dict[str, object] = {
            TWO_HANDED: "none",
            CUTTHROAT: "trick",
            PARTNERSHIP: "trick_point",
            NO_BID: "trick",
            DOUBLE_DECK: _by_deck(deck, 1, 20),
        }
        dix_exempt_defaults: dict[str, object] = {
            TWO_HANDED: False,
            CUTTHROAT: False,
            PARTNERSHIP: True,
            NO_BID: False,
            DOUBLE_DECK: _by_deck(deck, True, False),
        }
        target_defaults: dict[str, object] = {
            TWO_HANDED: 1000,
            CUTTHROAT: 1500,
            PARTNERSHIP: 1500,
            NO_BID: 1500,
            DOUBLE_DECK: _by_deck(deck, 150, 500),
        }
        both_reach_defaults = {
            TWO_HANDED: "higher_total",
            DOUBLE_DECK: "higher_total",
            NO_BID: "higher_total",
            CUTTHROAT: "bidder_wins",
            PARTNERSHIP: "bidder_wins",
        }
        save_meld = options.get("save_meld", save_defaults[variant])
        dix_exempt = options.get("dix_exempt_from_save", dix_exempt_defaults[variant])
        target = options.get("target", target_defaults[variant])
        min_meld = options.get("min_meld_to_record", 0)
        margin_win = options.get("margin_win", variant == DOUBLE_DECK)
        assert isinstance(save_meld, str | int) and isinstance(dix_exempt, bool)
        assert isinstance(target, int) and isinstance(min_meld, int)
        assert isinstance(margin_win, bool)
        return cls(
            variant=variant,
            deck=deck,
            count_scheme=scheme,
            last_trick_bonus=bonus,
            save_meld=save_meld,
            save_applies_to=str(
                options.get("save_applies_to", "defenders" if variant == CUTTHROAT else "both")
            ),
            dix_exempt_from_save=dix_exempt,
            min_meld_to_record=min_meld,
            target=target,
            both_reach=str(options.get("both_reach", both_reach_defaults[variant])),
            margin_win=margin_win,
        )


# --------------------------------------------------------------------------------------------
# Card points (§1.6)


def rank_of(card: str) -> str:
    """The rank of a card written rank then suit (A.3): ``"10H"`` -> ``"10"``."""
    return card[:-1].upper().replace("T", "10")


def card_points(options: ScoringOptions, cards: Sequence[str]) -> int:
    """The counting scheme's value of ``cards`` (no last-trick bonus)."""
    values = SCHEME_VALUES[options.count_scheme]
    return sum(values[rank_of(card)] for card in cards)


def points_in_play(options: ScoringOptions) -> int:
    """Every card of the deck counted, plus the last-trick bonus (A.7 item 8: 250, 50 or 25 with
    the defaults). 48 cards: two of each A 10 K Q J 9 per suit; 80: four of each, no nines."""
    values = SCHEME_VALUES[options.count_scheme]
    copies, ranks = (4, ("A", "10", "K", "Q", "J")) if options.deck == 80 else (2, tuple(values))
    return 4 * copies * sum(values[rank] for rank in ranks) + options.last_trick_bonus


# --------------------------------------------------------------------------------------------
# The facts of a hand and its result


@dataclass(frozen=True, slots=True)
class TakenTrick:
    """A completed trick: the seat that took it and its cards."""

    winner: int
    cards: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HandFacts:
    """What happened in one hand, as the public events tell it.

    ``meld`` and ``dix`` are per seat: every meld point the seat scored this hand (a no-bid dix
    exchange included, A.7 item 7; two-handed: every meld, dix show, exchange, turned or played
    dix, A.8 item 9), and the part of it that is dix points. ``discards``: the cards the
    declaring side buried or discarded (A.7 item 1). ``no_trump``: the declarer conceded for
    want of a marriage (A.7 item 5).
    """

    declarer: int | None
    bid: int | None
    meld: tuple[int, ...]
    dix: tuple[int, ...]
    tricks: tuple[TakenTrick, ...]
    discards: tuple[str, ...] = ()
    conceded: bool = False
    no_trump: bool = False


@dataclass(frozen=True, slots=True)
class HandScore:
    """A hand's result: ``meld`` per seat as shown (before any save rule), ``points`` and
    ``delta`` and ``saved`` per side, and whether the contract was hopeless (A.7 item 8)."""

    meld: tuple[int, ...]
    points: tuple[int, ...]
    delta: tuple[int, ...]
    saved: tuple[bool, ...]
    hopeless: bool


def side_card_points(options: ScoringOptions, facts: HandFacts) -> tuple[list[int], list[int]]:
    """Card points and tricks taken per side in a played-out hand.

    §1.6: the counters captured plus the last-trick bonus for whoever takes the final trick;
    A.7 item 1: buried (cutthroat) or kitty-discarded counters count for the declaring side.
    """
    points = [0] * options.sides
    tricks = [0] * options.sides
    for index, trick in enumerate(facts.tricks):
        side = options.side_of(trick.winner)
        tricks[side] += 1
        points[side] += card_points(options, trick.cards)
        if index == len(facts.tricks) - 1:
            points[side] += options.last_trick_bonus
    if facts.declarer is not None and facts.discards:
        points[options.side_of(facts.declarer)] += card_points(options, facts.discards)
    return points, tricks


def met_save_threshold(options: ScoringOptions, points: int, tricks: int) -> bool:
    """A.2 ``save_meld``: at least one trick (``trick``), one card point (``trick_point``) or
    the given number of card points (an integer), the last-trick bonus included (A.9 item 4);
    ``none`` disables the rule."""
    rule = options.save_meld
    if rule == "none":
        return True
    if rule == "trick":
        return tricks >= 1
    if rule == "trick_point":
        return points >= 1
    assert isinstance(rule, int), rule
    return points >= rule


def score_figures(
    options: ScoringOptions,
    *,
    declarer: int | None,
    bid: int | None,
    meld: Sequence[int],
    dix: Sequence[int],
    points: Sequence[int],
    tricks: Sequence[int],
    conceded: bool = False,
    no_trump: bool = False,
) -> HandScore:
    """A hand's result from its figures: ``meld`` and ``dix`` per seat (dix included in meld),
    ``points`` (card points, last-trick bonus and discards included) and ``tricks`` per side.

    * ``two-handed`` (§2.5, A.8 item 9): each seat scores its meld (scored when declared) plus
      its card points. No contract, no save rule.
    * Redeal (A.7 item 2): no contract in a bidding variant, every delta 0.
    * A side's meld is the sum of its seats' melds (§1.9: partners' cards never combine). A side
      whose meld totals less than ``min_meld_to_record`` records none (OPTIONS.md).
    * Save (A.2, §4.7, §3.6, §5.6, §6.3): a side the rule binds (``save_applies_to``: every side,
      or only the sides without the contract) that misses the threshold loses its meld, but keeps
      its dix points when ``dix_exempt_from_save``.
    * Contract (§4.7, §5.6, §3.6, §10.3): the declaring side scores its counted meld plus card
      points when they reach the bid, else minus the bid (meld and card points lost); the other
      sides score their counted meld plus their card points. No-bid (§6.5): every side scores
      counted meld plus card points.
    * Concession (A.6, A.7 item 4, §3.4, §4.5): declaring side minus the bid, the others their
      meld only (no tricks, so no save requirement), card points 0. For want of a marriage
      (``no_trump``, A.7 item 5): declaring side minus the bid, everyone else 0, no meld.
    * Hopeless (A.7 item 8): bid minus the declaring side's meld before save rules (and before
      ``min_meld_to_record``) exceeds the card points in play.
    """
    sides = options.sides
    if options.variant == TWO_HANDED:
        return HandScore(
            meld=tuple(meld),
            points=tuple(points),
            delta=tuple(m + p for m, p in zip(meld, points, strict=True)),
            saved=(True,) * sides,
            hopeless=False,
        )
    side_meld = [0] * sides
    side_dix = [0] * sides
    for seat in range(options.seats):
        side_meld[options.side_of(seat)] += meld[seat]
        side_dix[options.side_of(seat)] += dix[seat]
    declaring = None if declarer is None else options.side_of(declarer)
    if (declaring is None or bid is None) and options.variant != NO_BID:  # A.7 item 2
        return HandScore(
            meld=tuple(meld),
            points=(0,) * sides,
            delta=(0,) * sides,
            saved=(True,) * sides,
            hopeless=False,
        )
    hopeless = (
        declaring is not None
        and bid is not None
        and bid - side_meld[declaring] > points_in_play(options)
    )
    recorded = [m if m >= options.min_meld_to_record else 0 for m in side_meld]
    if conceded:
        assert declaring is not None and bid is not None
        delta = [0 if no_trump else recorded[side] for side in range(sides)]
        delta[declaring] = -bid
        # ``saved`` is the engine's report, not a rule: RULES.md never defines it for a
        # concession. Read here as "the side's meld counts": the declaring side's is lost, the
        # others' counts with no save requirement (§4.5). This follows the engine's output.
        saved = [True] * sides
        saved[declaring] = False
        return HandScore(
            meld=tuple(meld),
            points=(0,) * sides,
            delta=tuple(delta),
            saved=tuple(saved),
            hopeless=hopeless,
        )
    saved = []
    counted = []
    for side in range(sides):
        bound = options.save_applies_to == "both" or side != declaring
        made_save = not bound or met_save_threshold(options, points[side], tricks[side])
        saved.append(made_save)
        if made_save:
            counted.append(recorded[side])
        elif options.dix_exempt_from_save:
            counted.append(side_dix[side] if recorded[side] else 0)
        else:
            counted.append(0)
    delta = [counted[side] + points[side] for side in range(sides)]
    if declaring is not None and bid is not None and delta[declaring] < bid:
        delta[declaring] = -bid
    return HandScore(
        meld=tuple(meld),
        points=tuple(points),
        delta=tuple(delta),
        saved=tuple(saved),
        hopeless=hopeless,
    )


def score_hand(options: ScoringOptions, facts: HandFacts) -> HandScore:
    """A completed hand of any variant from its facts (see ``score_figures``)."""
    points, tricks = side_card_points(options, facts)
    return score_figures(
        options,
        declarer=facts.declarer,
        bid=facts.bid,
        meld=facts.meld,
        dix=facts.dix,
        points=points,
        tricks=tricks,
        conceded=facts.conceded,
        no_trump=facts.no_trump,
    )


# --------------------------------------------------------------------------------------------
# Game end


@dataclass(frozen=True, slots=True)
class GameEnd:
    """After a completed hand: the winning side (None: play on) and the target in force."""

    winner: int | None
    target: int


def _higher_total(scores: Sequence[int], among: Sequence[int]) -> int | None:
    """The side of ``among`` with the strictly highest total, None on equal totals."""
    best = max(scores[side] for side in among)
    leaders = [side for side in among if scores[side] == best]
    return leaders[0] if len(leaders) == 1 else None


def decide_game_end(
    options: ScoringOptions, scores: Sequence[int], target: int, declaring_side: int | None
) -> GameEnd:
    """Whether the game is over after a completed hand (redeals included), A.7 item 9.

    * ``two-handed`` (§2.5, A.8 item 9): one seat at or above the target wins; both:
      ``higher_total`` (equal: play on) or ``extend_250`` (the target rises by 250 until at most
      one seat reaches it; OPTIONS.md ``both_reach``).
    * ``cutthroat`` (§3.6): under ``bidder_wins`` a bidder at the target wins first; otherwise
      one seat at the target wins, several: the higher total, equal: play on.
    * ``partnership``, ``double-deck``, ``partnership-no-bid`` (§4.8, §5.7, §6.5): exactly one
      side at the target wins; else, with ``margin_win``, a lead of at least the target wins;
      else both at the target: the declaring side under ``bidder_wins``, the higher total under
      ``higher_total`` (equal: play on). OPTIONS.md: the margin is checked after the one-side
      test and before ``both_reach``.
    """
    reached = [side for side, score in enumerate(scores) if score >= target]
    if options.variant == TWO_HANDED:
        if len(reached) < 2:
            return GameEnd(reached[0] if reached else None, target)
        if options.both_reach == "extend_250":
            while sum(score >= target for score in scores) > 1:
                target += 250
            reached = [side for side, score in enumerate(scores) if score >= target]
            return GameEnd(reached[0] if reached else None, target)
        return GameEnd(_higher_total(scores, reached), target)
    if options.variant == CUTTHROAT:
        if options.both_reach == "bidder_wins" and declaring_side in reached:
            return GameEnd(declaring_side, target)
        if not reached:
            return GameEnd(None, target)
        return GameEnd(_higher_total(scores, reached), target)
    if len(reached) == 1:
        return GameEnd(reached[0], target)
    if options.margin_win and abs(scores[0] - scores[1]) >= target:
        return GameEnd(0 if scores[0] > scores[1] else 1, target)
    if len(reached) == 2:
        if options.both_reach == "bidder_wins" and declaring_side is not None:
            return GameEnd(declaring_side, target)
        return GameEnd(_higher_total(scores, reached), target)
    return GameEnd(None, target)
