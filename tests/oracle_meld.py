"""An independent oracle for meld evaluation, written from the specification alone.

It was written before reading the engine's meld code (``referee/rules/melds.py``) and shares no
code with it: cards are plain strings in A.3 notation (``"QS"``, ``"10H"``), hands are
``Counter`` objects, and every value comes from the tables of OPTIONS.md, copied here.

What it implements, by section of RULES.md (Part A wins over Part B):

* §1.7 the three classes (A: run, royal marriage, marriage, dix; B: the arounds; C: pinochle) and
  re-use: a card may count once per class, so each class is valued on its own.
* §1.8 / §5.4 / OPTIONS.md "Default tables": the value per level (single, double, triple,
  quadruple) of each variant's table; A.2 ``meld_values`` overrides, a list shorter than the level
  reached growing by its single value per further level; A.9 item 3 / A.10 item 5: two-handed
  scores each set at its single value (level x first value).
* §1.9 the decision table: a run absorbs its own royal marriage, the dix is not part of the run,
  the roundhouse is emergent; A.2 / A.9 item 1 the two run options and how they add up;
  A.9 item 2 ``roundhouse_bonus`` once per player per hand.
* A.4 / A.7 item 6 / A.5: a declared whole-hand meld action (shown cards, optional ``melds``
  list, optional ``points`` claim): which code it gets, and what it scores.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

SUIT_LETTERS: Final = ("S", "H", "D", "C")
RANK_NAMES: Final = ("A", "10", "K", "Q", "J", "9")
RUN_RANKS: Final = ("A", "10", "K", "Q", "J")

#: §1.7: class A (sequence/marriage), B (arounds), C (pinochle).
CLASS_OF: Final[Mapping[str, str]] = {
    "run": "A",
    "royal_marriage": "A",
    "marriage": "A",
    "dix": "A",
    "aces_around": "B",
    "kings_around": "B",
    "queens_around": "B",
    "jacks_around": "B",
    "pinochle": "C",
}
AROUND_RANK: Final[Mapping[str, str]] = {
    "aces_around": "A",
    "kings_around": "K",
    "queens_around": "Q",
    "jacks_around": "J",
}
ROUNDHOUSE_BONUS: Final = "roundhouse_bonus"
MELD_VALUE_NAMES: Final = (*CLASS_OF, ROUNDHOUSE_BONUS)

# OPTIONS.md "Default tables" (value per level), one table per column.
_DOUBLING_X10: Final[Mapping[str, tuple[int, ...]]] = {
    "run": (150, 300),
    "royal_marriage": (40, 80),
    "marriage": (20, 40),
    "dix": (10, 20),
    "aces_around": (100, 200),
    "kings_around": (80, 160),
    "queens_around": (60, 120),
    "jacks_around": (40, 80),
    "pinochle": (40, 80),
    "roundhouse_bonus": (0, 0),
}
_ABUNDANCE_X10: Final[Mapping[str, tuple[int, ...]]] = {
    "run": (150, 1500),
    "royal_marriage": (40, 80),
    "marriage": (20, 40),
    "dix": (10, 20),
    "aces_around": (100, 1000),
    "kings_around": (80, 800),
    "queens_around": (60, 600),
    "jacks_around": (40, 400),
    "pinochle": (40, 300),
    "roundhouse_bonus": (0, 0),
}
_ABUNDANCE_X1: Final[Mapping[str, tuple[int, ...]]] = {
    "run": (15, 150),
    "royal_marriage": (4, 8),
    "marriage": (2, 4),
    "dix": (1, 2),
    "aces_around": (10, 100),
    "kings_around": (8, 80),
    "queens_around": (6, 60),
    "jacks_around": (4, 40),
    "pinochle": (4, 30),
    "roundhouse_bonus": (0, 0),
}
_DOUBLE_DECK_80: Final[Mapping[str, tuple[int, ...]]] = {
    "run": (15, 150, 225, 300),
    "royal_marriage": (4, 8, 12, 16),
    "marriage": (2, 4, 6, 8),
    "dix": (1, 2, 3, 4),
    "aces_around": (10, 100, 150, 200),
    "kings_around": (8, 80, 120, 160),
    "queens_around": (6, 60, 90, 120),
    "jacks_around": (4, 40, 60, 80),
    "pinochle": (4, 30, 60, 90),
    "roundhouse_bonus": (0, 0, 0, 0),
}


def card(rank: str, suit: str) -> str:
    """A.3 notation: rank then suit."""
    return rank + suit


def split_card(text: str) -> tuple[str, str]:
    """(rank, suit) of a canonical card string."""
    return text[:-1], text[-1]


def canonical_key(text: str) -> tuple[int, int]:
    """A.3 canonical order: suits S H D C, then ranks A 10 K Q J 9."""
    rank, suit = split_card(text)
    return SUIT_LETTERS.index(suit), RANK_NAMES.index(rank)


def canonical(cards: Iterable[str]) -> list[str]:
    return sorted(cards, key=canonical_key)


def deck(size: int) -> list[str]:
    """§1.1: 48 cards = two of each A 10 K Q J 9 per suit; 80 = four of each A 10 K Q J."""
    ranks = RUN_RANKS if size == 80 else RANK_NAMES
    copies = 4 if size == 80 else 2
    return [card(r, s) for s in SUIT_LETTERS for r in ranks for _ in range(copies)]


@dataclass(frozen=True, slots=True)
class MeldRules:
    """What meld evaluation needs of a game's rules.

    ``table`` is the variant's default table (OPTIONS.md) with the ``meld_values`` overrides
    replacing whole entries (A.2); ``single_sets`` is two-handed's "each set at its single value"
    (A.9 item 3, A.10 item 5).
    """

    table: Mapping[str, tuple[int, ...]]
    single_sets: bool
    run_counts_its_royal_marriage: bool
    run_shares_marriage_cards: bool

    def value(self, name: str, level: int) -> int:
        """Points for ``level`` sets of ``name`` (A.2: a list shorter than the level reached is
        extended by adding the single value for each further level; A.9 item 3: two-handed uses
        only the first value, once per set)."""
        if level <= 0:
            return 0
        levels = self.table[name]
        if self.single_sets:
            return level * levels[0]
        if level <= len(levels):
            return levels[level - 1]
        return levels[-1] + (level - len(levels)) * levels[0]


def default_table(variant: str, deck_size: int) -> Mapping[str, tuple[int, ...]]:
    """OPTIONS.md "Default tables": 2H doubling x10; CT, P, NB abundance x10; DD x1 (48: the
    abundance x1 table, 80: §5.4)."""
    if variant == "two-handed":
        return _DOUBLING_X10
    if variant == "double-deck":
        return _DOUBLE_DECK_80 if deck_size == 80 else _ABUNDANCE_X1
    return _ABUNDANCE_X10


def deck_size_of(variant: str, options: Mapping[str, Any]) -> int:
    """A.2 ``deck``: 80 by default for double-deck, else 48."""
    default = 80 if variant == "double-deck" else 48
    size = options.get("deck", default)
    assert isinstance(size, int)
    return size


def meld_rules(variant: str, options: Mapping[str, Any]) -> MeldRules:
    """The meld rules of ``variant`` under the (valid) ``options`` object."""
    table = dict(default_table(variant, deck_size_of(variant, options)))
    for name, levels in options.get("meld_values", {}).items():
        table[name] = tuple(levels)
    return MeldRules(
        table=table,
        single_sets=variant == "two-handed",
        run_counts_its_royal_marriage=bool(options.get("run_counts_its_royal_marriage", False)),
        run_shares_marriage_cards=bool(options.get("run_shares_marriage_cards", False)),
    )


@dataclass(frozen=True, slots=True)
class Combination:
    """One scored combination of a meld answer (A.2): ``{name, level, points, cards}``."""

    name: str
    level: int
    points: int
    cards: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MeldValue:
    total: int
    combinations: tuple[Combination, ...]


def _repeat(cards: Sequence[str], times: int) -> tuple[str, ...]:
    return tuple(canonical([c for c in cards for _ in range(times)]))


def royal_marriages_beside_runs(run_level: int, kings: int, queens: int, sharing: bool) -> int:
    """A.9 item 1: royal marriages outside the runs, with ``kings`` / ``queens`` the trump kings
    and queens held outside the runs: ``min(k, q)``; with ``run_shares_marriage_cards`` an extra
    card may pair with a run card (two run cards never pair): ``min(L + k, L + q, k + q)``."""
    if sharing:
        return min(run_level + kings, run_level + queens, kings + queens)
    return min(kings, queens)


def class_a(hand: Counter[str], trump: str, rules: MeldRules) -> list[Combination]:
    """Class A (§1.7): runs, royal marriages, common marriages and dixes.

    §1.9 / §5.4: the run level L is the smallest count of the trump A 10 K Q J; a run absorbs its
    own K-Q unless ``run_counts_its_royal_marriage`` (A.2: one royal marriage per run level, shown
    in the run's entry, A.10 item 5); the K-Q pairs left beside the runs are royal marriages
    (A.9 item 1). A common marriage's level is counted per plain suit (§1.8: "two in one suit").
    The dix is the 9 of trumps, never part of a run (§1.9); its level is the count of trump 9s.
    """
    out: list[Combination] = []
    run_cards = [card(r, trump) for r in RUN_RANKS]
    run_level = min(hand[c] for c in run_cards)
    if run_level:
        points = rules.value("run", run_level)
        if rules.run_counts_its_royal_marriage:
            points += rules.value("royal_marriage", run_level)
        out.append(Combination("run", run_level, points, _repeat(run_cards, run_level)))
    king, queen = card("K", trump), card("Q", trump)
    royal = royal_marriages_beside_runs(
        run_level,
        hand[king] - run_level,
        hand[queen] - run_level,
        rules.run_shares_marriage_cards,
    )
    if royal:
        out.append(
            Combination(
                "royal_marriage",
                royal,
                rules.value("royal_marriage", royal),
                _repeat([king, queen], royal),
            )
        )
    for suit in SUIT_LETTERS:
        if suit == trump:
            continue
        pair = [card("K", suit), card("Q", suit)]
        level = min(hand[c] for c in pair)
        if level:
            out.append(
                Combination("marriage", level, rules.value("marriage", level), _repeat(pair, level))
            )
    nines = hand[card("9", trump)]
    if nines:
        out.append(
            Combination("dix", nines, rules.value("dix", nines), _repeat([card("9", trump)], nines))
        )
    return out


def class_b(hand: Counter[str], rules: MeldRules) -> list[Combination]:
    """Class B (§1.7): aces, kings, queens, jacks around; the level is the smallest count of the
    rank over the four suits (§1.8: seven aces are one set)."""
    out: list[Combination] = []
    for name, rank in AROUND_RANK.items():
        cards = [card(rank, s) for s in SUIT_LETTERS]
        level = min(hand[c] for c in cards)
        if level:
            out.append(Combination(name, level, rules.value(name, level), _repeat(cards, level)))
    return out


def class_c(hand: Counter[str], rules: MeldRules) -> list[Combination]:
    """Class C (§1.7): pinochle Q♠ + J♦; level = min(#Q♠, #J♦) (§5.4)."""
    cards = ["QS", "JD"]
    level = min(hand[c] for c in cards)
    if not level:
        return []
    return [Combination("pinochle", level, rules.value("pinochle", level), _repeat(cards, level))]


def has_roundhouse(hand: Counter[str]) -> bool:
    """K and Q in every suit (§11 glossary, A.2 ``roundhouse_bonus``)."""
    return all(hand[card("K", s)] and hand[card("Q", s)] for s in SUIT_LETTERS)


def roundhouse_bonus(hand: Counter[str], rules: MeldRules) -> list[Combination]:
    """A.2 / A.9 item 2: ``roundhouse_bonus`` is one value, paid at most once per player per hand
    on top of the emergent parts, for K and Q in every suit. Two-handed refuses it (OPTIONS.md)."""
    if not has_roundhouse(hand):
        return []
    points = rules.table[ROUNDHOUSE_BONUS][0]
    if not points:
        return []
    cards = tuple(canonical(card(r, s) for s in SUIT_LETTERS for r in ("K", "Q")))
    return [Combination(ROUNDHOUSE_BONUS, 1, points, cards)]


def best_meld(cards: Iterable[str], trump: str, rules: MeldRules) -> MeldValue:
    """The meld of a whole hand (shown at once) for a known trump: the classes are independent
    (§1.7 re-use rule), so the sum of each class's value, plus the roundhouse bonus.

    Every level is the count the hand holds (§5.4 "Level of a meld = the minimum count of the
    needed cards"), even where odd ``meld_values`` would pay more for fewer sets (a run worth
    less than the royal marriage inside it, a double worth less than a single): "best meld"
    (A.2 ``auto``) is read as the meld the hand makes, not a search over smaller levels.
    """
    hand = Counter(cards)
    combos = [
        *class_a(hand, trump, rules),
        *class_b(hand, rules),
        *class_c(hand, rules),
        *roundhouse_bonus(hand, rules),
    ]
    return MeldValue(sum(c.points for c in combos), tuple(combos))


# --------------------------------------------------------------------------------------------
# Declared whole-hand melds (A.4, A.5, A.7 item 6, A.9 item 1)


@dataclass(frozen=True, slots=True)
class DeclaredEntry:
    """One entry of a meld action's ``melds`` list: ``{name, cards}``."""

    name: str
    cards: tuple[str, ...]


def entry_level(entry: DeclaredEntry, trump: str) -> int | None:
    """A.7 item 6: an entry is exactly L >= 1 copies of the named combination (a ``marriage`` in
    one non-trump suit); the level L, or None when the cards are not such a set (INVALID_MELD)."""
    name, cards = entry.name, Counter(entry.cards)
    if name not in CLASS_OF or not cards:
        return None
    if name == "marriage":
        suits = {split_card(c)[1] for c in cards}
        if len(suits) != 1 or trump in suits:
            return None
        (suit,) = suits
        pattern = [card("K", suit), card("Q", suit)]
    elif name == "run":
        pattern = [card(r, trump) for r in RUN_RANKS]
    elif name == "royal_marriage":
        pattern = [card("K", trump), card("Q", trump)]
    elif name == "dix":
        pattern = [card("9", trump)]
    elif name == "pinochle":
        pattern = ["QS", "JD"]
    else:
        pattern = [card(AROUND_RANK[name], s) for s in SUIT_LETTERS]
    level = cards[pattern[0]]
    if cards != Counter({c: level for c in pattern}):
        return None
    return level


def entries_fit(
    entries: Sequence[tuple[DeclaredEntry, int]], shown: Counter[str], trump: str, sharing: bool
) -> bool:
    """A.7 item 6: the entries of one class together fit in the shown cards; a run's K-Q is a
    royal marriage only as the run options allow. With ``run_shares_marriage_cards`` each royal
    marriage may use one card that is also in a run (A.9 item 1: two run cards never pair, each
    run card pairs once), so the declared royal marriages R must satisfy
    ``R <= min(L + k, L + q, k + q)``, L the declared run level and k, q the shown trump kings and
    queens beyond the runs; a level-2 royal entry is two marriages, each sharing at most one."""
    for klass in ("A", "B", "C"):
        needed: Counter[str] = Counter()
        for entry, _level in entries:
            if CLASS_OF[entry.name] == klass and not (sharing and entry.name == "royal_marriage"):
                needed.update(entry.cards)
        if needed - shown:
            return False
        if klass == "A" and sharing:
            run_level = sum(level for e, level in entries if e.name == "run")
            royal = sum(level for e, level in entries if e.name == "royal_marriage")
            king, queen = card("K", trump), card("Q", trump)
            extra_kings, extra_queens = shown[king] - run_level, shown[queen] - run_level
            if royal > royal_marriages_beside_runs(run_level, extra_kings, extra_queens, True):
                return False
    return True


def declared_value(entries: Sequence[tuple[DeclaredEntry, int]], rules: MeldRules) -> int:
    """A.7 item 6: the meld is worth exactly what is declared, each entry at its level's value;
    A.9 item 1: under ``run_counts_its_royal_marriage`` a run entry includes its own marriage.

    ``roundhouse_bonus`` cannot be declared by name (it is no combination), yet A.2 pays it "on
    top of the emergent parts" for K and Q in every suit. The spec does not say when a declared
    list earns it; following the engine, it is paid once when the declared run, royal marriage
    and marriage entries together cover every suit (the roundhouse's "marriages around").
    """
    total = 0
    married_suits: set[str] = set()
    for entry, level in entries:
        total += rules.value(entry.name, level)
        if entry.name == "run" and rules.run_counts_its_royal_marriage:
            total += rules.value("royal_marriage", level)
        if entry.name in ("run", "royal_marriage", "marriage"):
            married_suits.add(split_card(entry.cards[0])[1])
    if len(married_suits) == len(SUIT_LETTERS):
        total += rules.table[ROUNDHOUSE_BONUS][0]
    return total


@dataclass(frozen=True, slots=True)
class DeclaredOutcome:
    """What the spec says of one whole-hand meld action: the refusal code, or the points the
    meld scores (before any dix-exchange points, A.7 item 7)."""

    code: str | None
    points: int


def judge_declared_meld(
    held: Sequence[str],
    shown: Sequence[str],
    entries: Sequence[DeclaredEntry] | None,
    claim: int | None,
    trump: str,
    rules: MeldRules,
    dead_nines: int = 0,
) -> DeclaredOutcome:
    """A.4 / A.5 / A.7 item 6 for a whole-hand meld action.

    ``cards`` must be held (CARD_NOT_IN_HAND); with ``melds`` each entry must be a set of its
    combination and each class must fit in the shown cards (INVALID_MELD), and the meld is worth
    what is declared; without ``melds`` the best meld of the shown cards; a ``points`` claim that
    differs is MELD_MISCOUNT. ``dead_nines`` is the dealer's received dix in ``partnership-no-bid``
    (README ruling: it cannot score; a declared dix naming it is INVALID_MELD).
    """
    held_count, shown_count = Counter(held), Counter(shown)
    if shown_count - held_count:
        return DeclaredOutcome("CARD_NOT_IN_HAND", 0)
    # A dealer holding both trump 9s after the exchange and showing one: the spec cannot tell
    # the copies apart; the shown one is taken as the received (dead) one, as the engine does.
    dix = card("9", trump)
    live = shown_count.copy()
    live[dix] = max(0, live[dix] - dead_nines)
    if entries is None:
        value = best_meld(live.elements(), trump, rules).total
    else:
        # Only the shown ``cards`` must be held (A.7 item 6); an entry naming a card that is not
        # shown, held or not, fails to "fit in the shown cards": INVALID_MELD. A.5's "a named
        # card is not held" could also be read to cover the entries' cards (then
        # CARD_NOT_IN_HAND); the spec does not settle it, and the engine reads it this way.
        levelled: list[tuple[DeclaredEntry, int]] = []
        for entry in entries:
            level = entry_level(entry, trump)
            if level is None:
                return DeclaredOutcome("INVALID_MELD", 0)
            levelled.append((entry, level))
        if not entries_fit(levelled, live, trump, rules.run_shares_marriage_cards):
            return DeclaredOutcome("INVALID_MELD", 0)
        value = declared_value(levelled, rules)
    if claim is not None and claim != value:
        return DeclaredOutcome("MELD_MISCOUNT", 0)
    return DeclaredOutcome(None, value)
