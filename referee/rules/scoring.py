"""Hand scoring (§10.3, A.6-A.7) and the end of the game (A.7 item 9, §2.5, §5.7).

Scores are kept per *side*: a team in the partnership variants, a seat otherwise. Every function
here is pure and takes plain numbers, so the engine, the audit and the ``hand_score`` query share
one implementation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from referee.rules.frozen import Frozen


@dataclass(frozen=True, slots=True)
class SaveRule(Frozen):
    """What a side must take for its meld to count (A.2 ``save_meld`` and friends)."""

    save_meld: str | int = "none"  # none | trick | trick_point | minimum card points
    applies_to: str = "both"  # both | defenders
    dix_exempt: bool = False
    min_meld_to_record: int = 0

    def saved(self, tricks: int, points: int) -> bool:
        rule = self.save_meld
        if rule == "none":
            return True
        if rule == "trick":
            return tricks >= 1
        if rule == "trick_point":
            return points >= 1
        assert isinstance(rule, int)
        return points >= rule


@dataclass(frozen=True, slots=True)
class HandScore(Frozen):
    delta: tuple[int, ...]
    saved: tuple[bool, ...]
    hopeless: bool


def no_contract(sides: int) -> HandScore:
    """A bidding variant's hand whose auction ended with no numeric bid (a redeal, A.7 item 2):
    every delta 0. Nobody's meld was lost, so every side counts as saved."""
    return HandScore((0,) * sides, (True,) * sides, False)


def score_hand(
    rule: SaveRule,
    *,
    bid: int | None,
    declaring_side: int | None,
    meld: Sequence[int],
    dix: Sequence[int],
    points: Sequence[int],
    tricks: Sequence[int],
    conceded: bool,
    total_in_play: int,
) -> HandScore:
    """Score one completed hand from per-side figures.

    ``meld`` includes ``dix``. ``points`` include the last-trick bonus. A contract is made when the
    declaring side's counted meld plus card points reach the bid; otherwise the side loses the bid
    and its meld and card points with it (§4.7). On a concession the declaring side loses the bid
    and the others score their meld only, with no save requirement (§4.5).
    """
    sides = len(meld)
    recorded = [m if m >= rule.min_meld_to_record else 0 for m in meld]
    # A.7 item 8: the declaring side's meld *before* save rules (min_meld_to_record is one).
    hopeless = (
        bid is not None
        and declaring_side is not None
        and bid - meld[declaring_side] > total_in_play
    )
    if conceded and bid is not None and declaring_side is not None:
        delta = tuple(-bid if s == declaring_side else recorded[s] for s in range(sides))
        saved = tuple(s != declaring_side for s in range(sides))
        return HandScore(delta, saved, hopeless)
    saved_list: list[bool] = []
    counted: list[int] = []
    for s in range(sides):
        bound = rule.applies_to == "both" or s != declaring_side
        ok = not bound or rule.saved(tricks[s], points[s])
        saved_list.append(ok)
        if ok:
            counted.append(recorded[s])
        else:
            counted.append(min(dix[s], recorded[s]) if rule.dix_exempt else 0)
    delta_list = [counted[s] + points[s] for s in range(sides)]
    if bid is not None and declaring_side is not None and delta_list[declaring_side] < bid:
        delta_list[declaring_side] = -bid
    return HandScore(tuple(delta_list), tuple(saved_list), hopeless)


def hopeless_contract(bid: int, declaring_meld: int, total_in_play: int) -> bool:
    """A.7 item 8: the bid cannot be reached even by taking every card point."""
    return bid - declaring_meld > total_in_play


@dataclass(frozen=True, slots=True)
class GameEndRule(Frozen):
    target: int
    both_reach: str = "higher_total"  # higher_total | bidder_wins | extend_250
    margin_win: bool = False


def game_winner(
    rule: GameEndRule, scores: Sequence[int], declaring_side: int | None, target: int
) -> tuple[int | None, int]:
    """The winning side after a completed hand (or None: play on) and the target now in force.

    Order (A.7 item 9, OPTIONS.md ``margin_win``): exactly one side at or above the target wins;
    else a lead of at least the target wins (``margin_win``); else, with several sides at the
    target, ``both_reach`` decides: the declaring side (``bidder_wins``), a target raised by 250
    until at most one side reaches it (``extend_250``), or the higher total; equal totals play on.
    """
    while True:
        reached = [s for s, score in enumerate(scores) if score >= target]
        if len(reached) == 1:
            return reached[0], target
        if rule.margin_win and len(scores) == 2:
            lead = scores[0] - scores[1]
            if abs(lead) >= target and lead != 0:
                return (0 if lead > 0 else 1), target
        if len(reached) < 2:
            return None, target
        if rule.both_reach == "bidder_wins" and declaring_side in reached:
            return declaring_side, target
        if rule.both_reach == "extend_250":
            target += 250
            continue
        best = max(scores[s] for s in reached)
        leaders = [s for s in reached if scores[s] == best]
        return (leaders[0] if len(leaders) == 1 else None), target
