"""Meld evaluation: the meld table, the best meld of a whole hand, and declared melds.

The rules behind this module are RULES.md §1.7-§1.9 and §5.4 (classes, tables, how combinations
interact) as settled by Part A: A.2 (the run options and ``meld_values``), A.7 item 6 (declared
melds), A.9 items 1-3 and 5 (run options counted, the roundhouse bonus, two-handed one-set values,
dix value) and A.10 item 5 (a run that counts its royal marriage is listed at its full value).

Everything works from a 24-slot count vector (``cards.counts_of``): every meld level is a minimum
of a few counts, so the best meld of a whole hand is a fixed handful of integer operations with no
search. ``meld_total`` is that arithmetic alone; ``best_meld`` adds the list of entries a meld
answer shows; ``score_declared`` checks and scores a player's own list of combinations.

Classes (§1.7): a card may serve in melds of different classes but only once within a class.

* A: run, royal marriage, common marriage, dix;
* B: aces, kings, queens and jacks around;
* C: pinochle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from mypy_extensions import mypyc_attr

from referee.rules.cards import (
    ACE,
    CARD_COUNT,
    DIAMONDS,
    JACK,
    KING,
    NINE,
    QUEEN,
    RANK_NAMES,
    SPADES,
    SUIT_LETTERS,
    SUITS,
    TEN,
    Card,
    Suit,
    counts_of,
    format_card,
    make_card,
    suit_of,
)
from referee.rules.frozen import Frozen

MELD_NAMES: Final[tuple[str, ...]] = (
    "run",
    "royal_marriage",
    "marriage",
    "dix",
    "aces_around",
    "kings_around",
    "queens_around",
    "jacks_around",
    "pinochle",
)

ROUNDHOUSE_BONUS: Final = "roundhouse_bonus"

CLASS_OF: Final[Mapping[str, str]] = MappingProxyType(
    {
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
)

_CLASS_TEXT: Final = {
    "A": "class A (run, royal_marriage, marriage, dix)",
    "B": "class B (the arounds)",
    "C": "class C (pinochle)",
}

MAX_TABLE_LEVEL: Final = 4  # quadruple: the 80-card deck holds four copies of each card

Levels = tuple[int, int, int, int]

# --------------------------------------------------------------------------------------------
# The cards of each combination, precomputed per suit and level so that building a Meld costs a
# tuple index rather than a sort. Row index = level (0 .. 4); higher levels are built on demand.

_PRECOMPUTED_LEVELS: Final = MAX_TABLE_LEVEL + 1


def _repeat(unit: tuple[Card, ...], level: int) -> tuple[Card, ...]:
    """``level`` copies of each card of ``unit`` (already sorted), in canonical order."""
    return tuple(card for card in unit for _ in range(level))


def _rows(unit: tuple[Card, ...]) -> tuple[tuple[Card, ...], ...]:
    return tuple(_repeat(unit, level) for level in range(_PRECOMPUTED_LEVELS))


def _cards_at(rows: tuple[tuple[Card, ...], ...], level: int) -> tuple[Card, ...]:
    if level < _PRECOMPUTED_LEVELS:
        return rows[level]
    return _repeat(rows[1], level)


_RUN_RANKS: Final = (ACE, TEN, KING, QUEEN, JACK)
_AROUND_RANK: Final = {
    "aces_around": ACE,
    "kings_around": KING,
    "queens_around": QUEEN,
    "jacks_around": JACK,
}
_QS: Final = make_card(SPADES, QUEEN)
_JD: Final = make_card(DIAMONDS, JACK)

_RUN_ROWS: Final = tuple(_rows(tuple(make_card(s, r) for r in _RUN_RANKS)) for s in SUITS)
_KQ_ROWS: Final = tuple(_rows((make_card(s, KING), make_card(s, QUEEN))) for s in SUITS)
_DIX_ROWS: Final = tuple(_rows((make_card(s, NINE),)) for s in SUITS)
_AROUND_ROWS: Final = {
    name: _rows(tuple(make_card(s, rank) for s in SUITS)) for name, rank in _AROUND_RANK.items()
}
_AROUNDS: Final = tuple((name, _AROUND_ROWS[name], rank) for name, rank in _AROUND_RANK.items())
_PINOCHLE_ROWS: Final = _rows((_QS, _JD))
_ROUNDHOUSE_CARDS: Final = tuple(sorted(make_card(s, r) for s in SUITS for r in (KING, QUEEN)))


def _cards_text(cards: Sequence[Card]) -> str:
    return " ".join(format_card(c) for c in cards) if cards else "(none)"


# --------------------------------------------------------------------------------------------
# The table


def _points(values: Levels, level: int) -> int:
    """Value of ``level`` (>= 1) sets: the table up to quadruple, then + single per level (A.2)."""
    if level <= MAX_TABLE_LEVEL:
        return values[level - 1]
    return values[MAX_TABLE_LEVEL - 1] + (level - MAX_TABLE_LEVEL) * values[0]


@dataclass(frozen=True, slots=True)
class MeldTable(Frozen):
    """Value per level (index 0 = single .. 3 = quadruple), already extended to 4 levels.

    One table serves a whole game: the variant's default (OPTIONS.json ``meld_values``) with the
    game's overrides and run options folded in by ``build_meld_table``. It is hashable so callers
    may cache per-table work.
    """

    values: Mapping[str, Levels]  # keys: MELD_NAMES
    roundhouse_bonus: int
    run_counts_its_royal_marriage: bool
    run_shares_marriage_cards: bool

    def __post_init__(self) -> None:
        # Validate once here so the hot paths can index without checks, and freeze the mapping
        # so a table shared between games cannot be changed under them.
        missing = [name for name in MELD_NAMES if name not in self.values]
        extra = sorted(set(self.values) - set(MELD_NAMES))
        if missing or extra:
            raise ValueError(
                f"a meld table needs exactly the names {', '.join(MELD_NAMES)}"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; unknown {', '.join(extra)}" if extra else "")
            )
        frozen: dict[str, Levels] = {}
        # Read as objects: a table built by hand may hold anything, and the compiled core
        # (setup.py) would refuse a wrong shape with TypeError before the message below.
        given: Mapping[str, Sequence[object]] = self.values
        for name in MELD_NAMES:
            row = tuple(given[name])
            levels = [v for v in row if type(v) is int]
            if len(row) != MAX_TABLE_LEVEL or len(levels) != len(row):
                raise ValueError(f"meld table {name!r}: expected 4 integers, got {row!r}")
            frozen[name] = (levels[0], levels[1], levels[2], levels[3])
        object.__setattr__(self, "values", MappingProxyType(frozen))

    def __reduce__(self) -> tuple[type[MeldTable], tuple[object, ...]]:
        # The frozen mapping proxy cannot be pickled or deep-copied; rebuild from a plain dict
        # so game states (which hold a table) can be copied and sent between processes.
        return (
            MeldTable,
            (
                dict(self.values),
                self.roundhouse_bonus,
                self.run_counts_its_royal_marriage,
                self.run_shares_marriage_cards,
            ),
        )

    def __hash__(self) -> int:
        return hash(
            (
                tuple(self.values[name] for name in MELD_NAMES),
                self.roundhouse_bonus,
                self.run_counts_its_royal_marriage,
                self.run_shares_marriage_cards,
            )
        )

    def value(self, name: str, level: int) -> int:
        """Points for ``level`` sets of ``name``; levels above 4 add the single value per level.

        Level 0 is worth 0. ``roundhouse_bonus`` is paid once whatever the level (A.9 item 2).
        """
        if level < 0:
            raise ValueError(f"meld level must be >= 0, got {level}")
        if name == ROUNDHOUSE_BONUS:
            return self.roundhouse_bonus if level else 0
        values = self.values[name]
        return _points(values, level) if level else 0


def build_meld_table(
    lists: Mapping[str, Sequence[int]],
    *,
    per_set: bool,
    run_counts_its_royal_marriage: bool = False,
    run_shares_marriage_cards: bool = False,
) -> MeldTable:
    """Build a table from ``meld_values`` lists (OPTIONS.md "Meld table").

    ``lists``: meld name -> values per level, possibly with ``roundhouse_bonus`` (its first value
    is the bonus; absent means 0). Every name of ``MELD_NAMES`` must be present: merging a game's
    overrides into the variant's defaults is the options layer's job.

    A list shorter than 4 grows by the single value per further level (A.2: ``[40]`` gives 40, 80,
    120, 160); values past the fourth can never be reached (no deck holds five copies of a card)
    and are ignored. ``per_set=True`` is two-handed, where every meld is one set (A.9 item 3): only
    the first value counts and level L is worth L times it.
    """
    unknown = sorted(set(lists) - set(MELD_NAMES) - {ROUNDHOUSE_BONUS})
    if unknown:
        raise ValueError(f"meld_values: unknown meld name(s) {', '.join(unknown)}")
    values: dict[str, Levels] = {}
    for name in MELD_NAMES:
        if name not in lists:
            raise ValueError(f"meld_values: no values for {name!r}")
        row = _int_list(name, lists[name])
        single = row[0]
        if per_set:
            row = [single]
        while len(row) < MAX_TABLE_LEVEL:
            row.append(row[-1] + single)
        values[name] = (row[0], row[1], row[2], row[3])
    bonus = 0
    if ROUNDHOUSE_BONUS in lists:
        bonus = _int_list(ROUNDHOUSE_BONUS, lists[ROUNDHOUSE_BONUS])[0]
    return MeldTable(
        values=values,
        roundhouse_bonus=bonus,
        run_counts_its_royal_marriage=run_counts_its_royal_marriage,
        run_shares_marriage_cards=run_shares_marriage_cards,
    )


def _int_list(name: str, raw: Sequence[object] | int) -> list[int]:
    """A non-empty list of ints; a bare int is accepted as a one-value list (A.2 calls the
    roundhouse bonus "one value"). Its items are read as objects: they come from a caller's
    options, and the compiled core (setup.py) would refuse a float with TypeError before the
    message below."""
    given: list[object] = [raw] if isinstance(raw, int) else list(raw)
    row = [v for v in given if type(v) is int]  # a bool is not an int here
    if not row or len(row) != len(given):
        raise ValueError(f"meld_values.{name}: expected a non-empty list of integers, got {raw!r}")
    return row


# --------------------------------------------------------------------------------------------
# Results and errors


@dataclass(frozen=True, slots=True)
class Meld(Frozen):
    """One scored combination: ``level`` identical sets of ``name``, worth ``points``."""

    name: str  # a MELD_NAMES entry, or "roundhouse_bonus"
    level: int
    points: int
    cards: tuple[Card, ...]  # the cards of the combination, canonical order, copies repeated


@dataclass(frozen=True, slots=True)
class MeldResult(Frozen):
    """A player's meld: the entries a meld answer lists, and their sum."""

    total: int
    melds: tuple[Meld, ...]

    def dix_points(self) -> int:
        """Points of the dix entries: a side that fails to save its meld may keep these
        (``dix_exempt_from_save``)."""
        return sum(m.points for m in self.melds if m.name == "dix")


# Not a native class: compiled by mypyc 1.20 (setup.py), an exception class whose __init__
# sets attributes kept every instance alive, so every refused meld leaked (tests/test_native.py).
@mypyc_attr(native_class=False)
class MeldError(ValueError):
    """A declared meld that the rules refuse; always answered with ``INVALID_MELD`` (A.5)."""

    code: str
    field: str

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.code = "INVALID_MELD"
        self.field = field


# --------------------------------------------------------------------------------------------
# The best meld of a whole hand


def _outside_royal(run_level: int, kings: int, queens: int, shares: bool) -> int:
    """Royal marriages beside the runs (A.9 item 1).

    ``kings``/``queens`` are the trump kings and queens held; the runs hold ``run_level`` of each.
    An extra card may pair with a run card under ``run_shares_marriage_cards``; two run cards never
    pair (that pair is the run's own marriage, scored only through the run).
    """
    k = kings - run_level
    q = queens - run_level
    if shares and run_level:
        return min(run_level + k, run_level + q, k + q)
    return k if k < q else q


def meld_total(counts: Sequence[int], trump: Suit, table: MeldTable) -> int:
    """The same number as ``best_meld(...).total``, from a 24-slot count vector.

    For search and simulation code that only needs the number: no entries are built.
    Preconditions (not checked, for speed): ``counts`` has 24 non-negative slots, ``trump`` is 0..3.
    """
    c = counts
    vals = table.values
    t = trump * 6
    tk = c[t + KING]
    tq = c[t + QUEEN]
    run = min(c[t + ACE], c[t + TEN], tk, tq, c[t + JACK])
    total = 0
    if run:
        total = _points(vals["run"], run)
        if table.run_counts_its_royal_marriage:
            total += _points(vals["royal_marriage"], run)
    royal = _outside_royal(run, tk, tq, table.run_shares_marriage_cards)
    if royal:
        total += _points(vals["royal_marriage"], royal)
    marriage = vals["marriage"]
    all_kq = True
    for s in (0, 6, 12, 18):
        kings = c[s + KING]
        queens = c[s + QUEEN]
        level = kings if kings < queens else queens
        if not level:
            all_kq = False
        elif s != t:
            total += _points(marriage, level)
    level = c[t + NINE]
    if level:
        total += _points(vals["dix"], level)
    level = min(c[ACE], c[6 + ACE], c[12 + ACE], c[18 + ACE])
    if level:
        total += _points(vals["aces_around"], level)
    level = min(c[KING], c[6 + KING], c[12 + KING], c[18 + KING])
    if level:
        total += _points(vals["kings_around"], level)
    level = min(c[QUEEN], c[6 + QUEEN], c[12 + QUEEN], c[18 + QUEEN])
    if level:
        total += _points(vals["queens_around"], level)
    level = min(c[JACK], c[6 + JACK], c[12 + JACK], c[18 + JACK])
    if level:
        total += _points(vals["jacks_around"], level)
    level = min(c[_QS], c[_JD])
    if level:
        total += _points(vals["pinochle"], level)
    if all_kq:
        total += table.roundhouse_bonus
    return total


def best_meld(hand: Sequence[Card], trump: Suit, table: MeldTable) -> MeldResult:
    """The meld of a whole hand shown at once with trump known (§1.9, A.9 item 1, A.10 item 5).

    Every level is forced by the counts (a card serves once per class, and within class A the
    combinations use disjoint cards, except as the run options say), so there is nothing to choose:
    this is both the best meld and the only sensible reading of the hand.

    Entries, in order: run, royal_marriage, marriage (suits S H D C), dix, aces, kings, queens and
    jacks around, pinochle, roundhouse_bonus; one entry per name (per suit for marriages) holding
    all its sets, and none at level 0. Under ``run_counts_its_royal_marriage`` the run entry's
    points include its own royal marriages and the royal_marriage entry holds only the others.
    """
    c = counts_of(hand)
    vals = table.values
    t = trump * 6
    melds: list[Meld] = []
    total = 0

    tk = c[t + KING]
    tq = c[t + QUEEN]
    run = min(c[t + ACE], c[t + TEN], tk, tq, c[t + JACK])
    if run:
        points = _points(vals["run"], run)
        if table.run_counts_its_royal_marriage:
            points += _points(vals["royal_marriage"], run)
        melds.append(Meld("run", run, points, _cards_at(_RUN_ROWS[trump], run)))
        total += points
    royal = _outside_royal(run, tk, tq, table.run_shares_marriage_cards)
    if royal:
        points = _points(vals["royal_marriage"], royal)
        melds.append(Meld("royal_marriage", royal, points, _cards_at(_KQ_ROWS[trump], royal)))
        total += points
    marriage = vals["marriage"]
    all_kq = True
    for suit in SUITS:
        s = suit * 6
        kings = c[s + KING]
        queens = c[s + QUEEN]
        level = kings if kings < queens else queens
        if not level:
            all_kq = False
        elif suit != trump:
            points = _points(marriage, level)
            melds.append(Meld("marriage", level, points, _cards_at(_KQ_ROWS[suit], level)))
            total += points
    level = c[t + NINE]
    if level:
        points = _points(vals["dix"], level)
        melds.append(Meld("dix", level, points, _cards_at(_DIX_ROWS[trump], level)))
        total += points
    for name, rows, rank in _AROUNDS:
        level = min(c[rank], c[6 + rank], c[12 + rank], c[18 + rank])
        if level:
            points = _points(vals[name], level)
            melds.append(Meld(name, level, points, _cards_at(rows, level)))
            total += points
    level = min(c[_QS], c[_JD])
    if level:
        points = _points(vals["pinochle"], level)
        melds.append(Meld("pinochle", level, points, _cards_at(_PINOCHLE_ROWS, level)))
        total += points
    if all_kq and table.roundhouse_bonus:
        bonus = table.roundhouse_bonus
        melds.append(Meld(ROUNDHOUSE_BONUS, 1, bonus, _ROUNDHOUSE_CARDS))
        total += bonus
    return MeldResult(total, tuple(melds))


# --------------------------------------------------------------------------------------------
# Declared melds


def _a(name: str) -> str:
    """``name`` with its indefinite article, for messages: "an aces_around", "a run"."""
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _unit_of(
    name: str, cards: Sequence[Card], trump: Suit, field: str
) -> tuple[tuple[Card, ...], str]:
    """The cards of one set of ``name`` and how to describe it for an error message.

    A marriage's suit is read from its first card; the shape check that follows refuses the
    rest of the cards if they are not of that suit. A K-Q of trump declared as a marriage gets
    its own message, as it is the likely mix-up.
    """
    tl = SUIT_LETTERS[trump]
    if name == "run":
        return _RUN_ROWS[trump][1], f"A 10 K Q J of trump ({tl})"
    if name == "royal_marriage":
        return _KQ_ROWS[trump][1], f"K and Q of trump ({tl})"
    if name == "marriage":
        suit = suit_of(cards[0])
        if all(suit_of(card) == trump for card in cards):
            raise MeldError(
                f"{field}: {_cards_text(cards)} is in trump ({tl}); a K-Q of trump is a "
                "royal_marriage, a marriage is K-Q of one non-trump suit",
                field,
            )
        return _KQ_ROWS[suit][1], f"K and Q of one non-trump suit (trump is {tl})"
    if name == "dix":
        return _DIX_ROWS[trump][1], f"the 9 of trump ({tl})"
    if name in _AROUND_ROWS:
        return _AROUND_ROWS[name][1], f"the {RANK_NAMES[_AROUND_RANK[name]]} of each suit"
    if name == "pinochle":
        return _PINOCHLE_ROWS[1], "QS and JD"
    raise AssertionError(name)  # pragma: no cover - names are checked by the caller


class _ClassFit:
    """The cards the declared entries of one class need so far, checked against the shown cards.

    Class A under ``run_shares_marriage_cards`` lets each royal marriage take one of its two
    cards from a run entry (each run card lent once): the trump K and Q are then checked by the
    borrowing conditions instead of a plain count.
    """

    __slots__ = ("cls", "lent_kq", "need", "royal_sets", "run_sets", "shares")

    def __init__(self, cls: str, trump: Suit, shares: bool) -> None:
        self.cls = cls
        self.shares = shares and cls == "A"
        self.need = [0] * CARD_COUNT
        self.run_sets = 0
        self.royal_sets = 0
        self.lent_kq = (make_card(trump, KING), make_card(trump, QUEEN))

    def add(self, name: str, level: int, cards: Sequence[Card]) -> None:
        for card in cards:
            self.need[card] += 1
        if name == "run":
            self.run_sets += level
        elif name == "royal_marriage":
            self.royal_sets += level

    def problem(self, shown: Sequence[int], entry: Sequence[Card], field: str) -> str | None:
        """Why the class no longer fits in ``shown`` after adding ``entry``, or None."""
        own = counts_of(entry)
        for card in range(CARD_COUNT):
            if own[card] > shown[card]:
                return (
                    f"{field}: needs {own[card]} × {format_card(card)} but "
                    f"{_shown_text(shown[card])} shown"
                )
        for card in range(CARD_COUNT):
            if self.shares and card in self.lent_kq:
                continue
            if self.need[card] > shown[card]:
                return self._reused(card, shown[card], field)
        if self.shares:
            king, queen = self.lent_kq
            short_k = max(0, self.need[king] - shown[king])
            short_q = max(0, self.need[queen] - shown[queen])
            if short_k > self.run_sets:
                return self._reused(king, shown[king], field)
            if short_q > self.run_sets:
                return self._reused(queen, shown[queen], field)
            if short_k + short_q > self.royal_sets:
                return (
                    f"{field}: the class A melds need {self.need[king]} × {format_card(king)} "
                    f"and {self.need[queen]} × {format_card(queen)}, "
                    f"{_shown_text(shown[king])} and {_shown_text(shown[queen])} shown; a "
                    "royal marriage may share only one of its two cards with a run"
                )
        return None

    def _reused(self, card: Card, shown: int, field: str) -> str:
        return (
            f"{field}: {format_card(card)} would serve twice in {_CLASS_TEXT[self.cls]}: the "
            f"melds of that class need {self.need[card]}, {_shown_text(shown)} shown; a card may "
            "serve in several classes but only once in its own"
        )


def _shown_text(n: int) -> str:
    return "none" if n == 0 else f"only {n}"


def score_declared(
    shown: Sequence[Card],
    declared: Sequence[tuple[str, Sequence[Card]]],
    trump: Suit,
    table: MeldTable,
) -> MeldResult:
    """Check and score a declared ``melds`` list (A.7 item 6, A.9 item 1).

    ``shown`` are the cards the player shows (already known to be held); ``declared`` lists
    ``(name, cards)``. Each entry must be exactly L >= 1 copies of the named combination, and the
    entries of one class together must fit in ``shown`` (a card may serve in several classes but
    once in its own; under ``run_shares_marriage_cards`` a royal marriage may share one card with
    a run). The meld is worth exactly what is declared, even when the cards would make more: each
    entry scores ``value(name, L)``, a run adding its own royal marriages under
    ``run_counts_its_royal_marriage``. The roundhouse bonus is never declared; it is appended when
    the class A entries hold a K-Q in every suit.

    Raises MeldError (``INVALID_MELD``) naming the first bad entry as ``melds[i].name`` or
    ``melds[i].cards``.
    """
    shown_counts = counts_of(_checked_cards(shown, "cards"))
    fits = {cls: _ClassFit(cls, trump, table.run_shares_marriage_cards) for cls in "ABC"}
    melds: list[Meld] = []
    total = 0
    married_suits: set[Suit] = set()
    for index, (name, raw_cards) in enumerate(declared):
        name_field = f"melds[{index}].name"
        field = f"melds[{index}].cards"
        if name not in CLASS_OF:
            if name == ROUNDHOUSE_BONUS:
                raise MeldError(
                    f"{name_field}: roundhouse_bonus is not declared; it is added when the "
                    "declared marriages cover every suit",
                    name_field,
                )
            raise MeldError(
                f"{name_field}: unknown meld {name!r} (one of {', '.join(MELD_NAMES)})",
                name_field,
            )
        cards = tuple(sorted(_checked_cards(raw_cards, field)))
        if not cards:
            raise MeldError(f"{field}: no cards given for {name}", field)
        unit, description = _unit_of(name, cards, trump, field)
        level, remainder = divmod(len(cards), len(unit))
        if remainder or level == 0 or cards != _repeat(unit, level):
            raise MeldError(
                f"{field}: {_cards_text(cards)} is not {_a(name)}: {_a(name)} is L copies"
                f" each of {description}",
                field,
            )
        fit = fits[CLASS_OF[name]]
        fit.add(name, level, cards)
        problem = fit.problem(shown_counts, cards, field)
        if problem is not None:
            raise MeldError(problem, field)
        points = _points(table.values[name], level)
        if name == "run" and table.run_counts_its_royal_marriage:
            points += _points(table.values["royal_marriage"], level)
        if name in ("run", "royal_marriage", "marriage"):
            married_suits.add(suit_of(cards[0]))
        melds.append(Meld(name, level, points, cards))
        total += points
    if table.roundhouse_bonus and len(married_suits) == len(SUITS):
        melds.append(Meld(ROUNDHOUSE_BONUS, 1, table.roundhouse_bonus, _ROUNDHOUSE_CARDS))
        total += table.roundhouse_bonus
    return MeldResult(total, tuple(melds))


def _checked_cards(cards: Sequence[Card], field: str) -> Sequence[Card]:
    """Refuse anything that is not a card int, so count vectors never index out of range."""
    for card in cards:
        if type(card) is not int or not 0 <= card < CARD_COUNT:
            raise MeldError(f"{field}: {card!r} is not a card", field)
    return cards


# --------------------------------------------------------------------------------------------
# One set at a time (two-handed progressive meld, A.8 item 1)


def one_set(name: str, cards: Sequence[Card], trump: Suit) -> tuple[Card, ...]:
    """Check that ``cards`` are exactly one set of ``name``; return them sorted.

    Two-handed melds name one combination at a time; the level is always 1 (a second set is a
    second meld). Raises MeldError (``INVALID_MELD``) for an unknown name or wrong or extra cards.
    """
    if name not in CLASS_OF:
        raise MeldError(f"name: unknown meld {name!r} (one of {', '.join(MELD_NAMES)})", "name")
    ordered = tuple(sorted(_checked_cards(cards, "cards")))
    if not ordered:
        raise MeldError(f"cards: no cards given for {name}", "cards")
    unit, description = _unit_of(name, ordered, trump, "cards")
    if ordered != unit:
        raise MeldError(
            f"cards: {_cards_text(ordered)} is not one {name}: {_a(name)} is {description}",
            "cards",
        )
    return ordered


def single_sets(trump: Suit) -> tuple[tuple[str, tuple[Card, ...]], ...]:
    """Every one-set combination under ``trump``, as (name, cards): 11 of them."""
    sets: list[tuple[str, tuple[Card, ...]]] = [
        ("run", _RUN_ROWS[trump][1]),
        ("royal_marriage", _KQ_ROWS[trump][1]),
    ]
    sets.extend(("marriage", _KQ_ROWS[s][1]) for s in SUITS if s != trump)
    sets.append(("dix", _DIX_ROWS[trump][1]))
    sets.extend((name, rows[1]) for name, rows, _ in _AROUNDS)
    sets.append(("pinochle", _PINOCHLE_ROWS[1]))
    return tuple(sets)
