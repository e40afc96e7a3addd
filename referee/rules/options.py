"""Variants and rule options: validation and resolution (RULES.md A.1, A.2, A.9, A.10; OPTIONS.md).

A game (and a rules query) names a variant and may give an ``options`` object. This module checks
that object against ``OPTIONS.json`` and resolves it into one frozen :class:`RuleSet` holding every
option's value (explicit values over the variant's defaults) plus the sizes that follow from them,
so that the rest of the rules core reads plain attributes and never re-derives a default.

Why the data comes from ``OPTIONS.json``: the option names, values and defaults are a public
contract (A.10 item 1). Reading the shipped copy of that file, rather than restating it in code,
keeps one source of truth; only what the file states in prose (the ``requires`` conditions, the
shapes of ``meld_values`` and ``bid_schedule``, and two "not supported" refusals that OPTIONS.md
lists but the file has no field for) is spelled out here.

Why there is a cache: :func:`resolve_options` runs once per game and once per rules query, and
query benchmarks call it in a tight loop. Successful resolutions are memoised on a canonical JSON
string of the options; a :class:`RuleSet` is deeply immutable (its mappings and lists are frozen
JSON containers), so handing the same instance to every caller is safe.
"""

from __future__ import annotations

import copy
import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any, Final, NoReturn, TypeVar, cast

from referee.rules.melds import MELD_NAMES as COMBINATION_NAMES
from referee.rules.melds import ROUNDHOUSE_BONUS

__all__ = [
    "MELD_NAMES",
    "REQUIRES_ENFORCED",
    "VARIANTS",
    "VARIANT_IDS",
    "OptionError",
    "RuleSet",
    "VariantInfo",
    "allowed_values",
    "option_schema",
    "resolve_options",
    "variant_defaults",
]

VARIANT_IDS: Final = ("two-handed", "cutthroat", "partnership", "double-deck", "partnership-no-bid")

#: The meld names a ``meld_values`` object may use (A.2), in the order of the tables: the
#: combinations of the meld evaluator plus the roundhouse bonus.
MELD_NAMES: Final = (*COMBINATION_NAMES, ROUNDHOUSE_BONUS)

# A meld_values list holds one value per level: single, double, triple, quadruple (OPTIONS.json).
_MAX_MELD_LEVELS: Final = 4

#: Bounds for integer options where OPTIONS.json gives none (``null`` or no ``max``): the 32-bit
#: signed range. Why: bids, meld points and seats cross the wire as int32 (referee.proto), so a
#: min_bid, bid_step, max_raise or target beyond it could never be bid or reached through the API;
#: and without a bound a Struct number such as 1e300 (an integral double, so a 301-digit int here)
#: passed validation and then broke the game store, whose JSON encoder stops at 64 bits. The
#: bound is generous: the largest default figure is 1500.
INT_OPTION_MIN: Final = -(2**31)
INT_OPTION_MAX: Final = 2**31 - 1

#: The largest value per level in ``meld_values``. Why tighter than INT_OPTION_MAX: a hand's meld
#: total is a sum of at most a few dozen scored combinations, each worth at most four times a
#: table value (two-handed's level x first value), and that total must fit the int32 ``points``
#: of a meld action and ``total`` of a ScoreMeld answer. 1,000,000 (over 600 times the largest
#: default, 1500) keeps any hand's total far below 2**31 - 1.
MELD_VALUE_MAX: Final = 1_000_000


class OptionError(ValueError):
    """A variant or option refused at creation (or in a rules query, which checks the same way).

    ``option`` names what was refused: the option's name, a dotted path such as
    ``meld_values.flush`` for one entry of ``meld_values``, or ``None`` when the variant itself or
    the options object as a whole is wrong. The message is one sentence naming the option, the
    value and what is allowed, or saying "not supported in this version" (A.10 item 7), so a
    service can pass it on to a client unchanged.
    """

    option: str | None

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


# --------------------------------------------------------------------------------------------
# Frozen JSON containers
# --------------------------------------------------------------------------------------------

_K = TypeVar("_K")
_V = TypeVar("_V")
_T = TypeVar("_T")


def _refuse_mutation(container: object) -> NoReturn:
    raise TypeError(f"{type(container).__name__} is read-only: a RuleSet never changes")


class _FrozenDict(dict[_K, _V]):
    """A read-only ``dict``.

    A subclass of ``dict`` rather than a ``MappingProxyType`` so that ``json.dumps`` accepts it
    (``RuleSet.explicit`` is meant to be written into game records as is) and so that it compares
    equal to the plain ``dict`` it was made from. It is hashable so a ``RuleSet`` is hashable.
    """

    __slots__ = ()

    def __setitem__(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_mutation(self)

    def __delitem__(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_mutation(self)

    # mypy wants in-place operators to return what the plain operator does; this one refuses.
    def __ior__(self, *args: Any, **kwargs: Any) -> NoReturn:  # type: ignore[misc]
        _refuse_mutation(self)

    def clear(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_mutation(self)

    def pop(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_mutation(self)

    def popitem(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_mutation(self)

    def setdefault(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_mutation(self)

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_mutation(self)

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle through the constructor: the default protocol would call __setitem__.
        return (type(self), (dict(self),))

    def __copy__(self) -> _FrozenDict[_K, _V]:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> _FrozenDict[_K, _V]:
        return self  # its contents are immutable too


class _FrozenList(list[_T]):
    """A read-only ``list``: JSON-serialisable, equal to the list it was made from, hashable."""

    __slots__ = ()

    def __setitem__(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_mutation(self)

    def __delitem__(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_mutation(self)

    # mypy wants in-place operators to return what the plain operator does; this one refuses.
    def __iadd__(self, *args: Any, **kwargs: Any) -> NoReturn:  # type: ignore[misc]
        _refuse_mutation(self)

    # mypy wants in-place operators to return what the plain operator does; this one refuses.
    def __imul__(self, *args: Any, **kwargs: Any) -> NoReturn:  # type: ignore[misc]
        _refuse_mutation(self)

    def append(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_mutation(self)

    def extend(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_mutation(self)

    def insert(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_mutation(self)

    def pop(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_mutation(self)

    def remove(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_mutation(self)

    def clear(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_mutation(self)

    def sort(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_mutation(self)

    def reverse(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_mutation(self)

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (list(self),))

    def __copy__(self) -> _FrozenList[_T]:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> _FrozenList[_T]:
        return self


def _freeze(value: object) -> object:
    """A deep, read-only copy of a validated JSON value (str/int subclasses become plain)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, Mapping):
        return _FrozenDict({str(k): _freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return _FrozenList(_freeze(v) for v in value)
    raise TypeError(f"not a validated JSON value: {value!r}")  # pragma: no cover - guarded


# --------------------------------------------------------------------------------------------
# The shipped OPTIONS.json, parsed once
# --------------------------------------------------------------------------------------------


def _load_spec() -> dict[str, Any]:
    text = resources.files("referee.rules").joinpath("options.json").read_text(encoding="utf-8")
    spec: dict[str, Any] = json.loads(text)
    return spec


_SPEC: Final = _load_spec()
_OPTION_SPECS: Final[Mapping[str, dict[str, Any]]] = MappingProxyType(
    {entry["name"]: entry for entry in _SPEC["options"]}
)
_NOT_CONFIGURABLE: Final[Mapping[str, str]] = MappingProxyType(
    {entry["name"]: entry["why"] for entry in _SPEC["not_configurable"]}
)

#: The ``requires`` conditions of OPTIONS.json this module enforces (see ``_check_requires``); a
#: test compares this with the file so that a new condition cannot be silently ignored.
REQUIRES_ENFORCED: Final = frozenset(
    {
        "exchange_mode kitty requires exchange_count 4",
        "the first level of bid_schedule is not above min_bid",
    }
)

# OPTIONS.md ("Values refused at creation as not supported in this version") names two refusals
# that OPTIONS.json can only express as a narrower `values_by_variant`: a value outside that list
# is reported as "not supported in this version", with the reason.
_PROSE_NOT_SUPPORTED: Final[Mapping[tuple[str, str], str]] = MappingProxyType(
    {
        ("save_applies_to", "partnership-no-bid"): "there is no declarer (A.9 item 6)",
        ("min_meld_to_record", "two-handed"): "two-handed scores melds when they are declared",
    }
)


# --------------------------------------------------------------------------------------------
# Variants
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VariantInfo:
    """The facts a variant fixes, which no option changes (A.1, §7 rows ``players``/``teams``)."""

    id: str
    description: str
    players: int
    partnerships: bool
    bidding: bool


VARIANTS: Final[Mapping[str, VariantInfo]] = MappingProxyType(
    {
        "two-handed": VariantInfo(
            id="two-handed",
            description=(
                "SEED2: stock, turned-up trump, progressive meld after winning a trick, strict"
                " play-off of the last 12 tricks, A/10 = 10 and K/Q = 5, game 1000"
            ),
            players=2,
            partnerships=False,
            bidding=False,
        ),
        "cutthroat": VariantInfo(
            id="cutthroat",
            description=(
                "three-handed auction: 15 each + widow 3, bidder takes widow, names trump,"
                " buries 3; game 1500"
            ),
            players=3,
            partnerships=False,
            bidding=True,
        ),
        "partnership": VariantInfo(
            id="partnership",
            description=(
                "SEED0: auction from 250 by +10/+20, pass with help, 4 cards passed each way,"
                " throw-in, A/10/K = 10, game 1500"
            ),
            players=4,
            partnerships=True,
            bidding=True,
        ),
        "double-deck": VariantInfo(
            id="double-deck",
            description=(
                "SEED3: 20 each, bids by 1 from 50, bid-or-redeal, trump needs a marriage,"
                " exchange with partner or kitty, 1-point counters, last trick 2, save-meld"
                " minimum, target/margin/tie settings"
            ),
            players=4,
            partnerships=True,
            bidding=True,
        ),
        "partnership-no-bid": VariantInfo(
            id="partnership-no-bid",
            description=(
                "SEED0's no-bidding mode, resolved as Bicycle Partnership Pinochle: dealer's last"
                " card turned for trump, dix exchange, everyone melds, game 1500"
            ),
            players=4,
            partnerships=True,
            bidding=False,
        ),
    }
)


def _default_for_deck(default: object, deck: int) -> object:
    """A default as it applies to ``deck``: ``{"deck48": x, "deck80": y}`` picks one."""
    if isinstance(default, dict) and set(default) == {"deck48", "deck80"}:
        return default[f"deck{deck}"]
    return default


def _compute_defaults(variant: str, deck: int) -> dict[str, object]:
    """Every applicable option's default for ``variant``; deck-dependent ones for ``deck``."""
    return {
        name: _default_for_deck(entry["default"][variant], deck)
        for name, entry in _OPTION_SPECS.items()
        if variant in entry["applies_to"]
    }


# Defaults per (variant, deck), computed once; never handed out without a copy.
_DEFAULTS: Final[Mapping[tuple[str, int], dict[str, object]]] = MappingProxyType(
    {
        (variant, deck): _compute_defaults(variant, deck)
        for variant in VARIANT_IDS
        for deck in (48, 80)
    }
)


# --------------------------------------------------------------------------------------------
# The resolved rule set
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RuleSet:
    """Every option resolved for one game (explicit values over variant defaults), plus sizes.

    The engine, the scorer and the query answers all read this one object, so a default is
    decided in exactly one place and a recorded game replays under the rules it states.

    Sizes: ``hand_size`` is the number of cards dealt to each seat (two-handed 12, cutthroat 15,
    four seats ``(deck - widow_size) / 4``: 12 or 11 with 48 cards, 20 or 19 with 80), and
    ``widow_size`` the cards dealt aside for the declarer (cutthroat 3, ``exchange_mode: kitty``
    4, else 0: the two-handed stock is not a widow).

    Options that do not apply to the variant hold a neutral value, chosen so that code reading
    them without checking the variant does nothing surprising: ``min_bid`` 0, ``bid_step`` 1,
    ``max_raise`` None, ``bid_schedule`` None, ``all_pass`` "redeal", ``exchange_mode`` "none",
    ``exchange_count`` 0, ``save_meld`` "none", ``save_applies_to`` "both", ``last_draw``
    "winner_facedown", and False for ``allow_pass_with_help``, ``allow_bid_or_redeal``,
    ``trump_requires_marriage``, ``may_bury_melded_cards``, ``dix_exempt_from_save``,
    ``new_card_required``, ``deferred_meld_scoring`` and ``dix_scores_when_played``. Options that
    apply to every variant always hold the variant's default or the given value.

    ``exchange_count`` keeps its resolved value under ``exchange_mode: none`` (where the rules
    ignore it). ``meld_values`` is the full table: the variant's default lists (deck-dependent for
    double-deck), with the lists given in the ``meld_values`` option replacing whole entries; the
    lists are as given, not yet extended to higher levels. ``explicit`` is a read-only copy of the
    options exactly as given, JSON-serialisable, for game records and export.
    """

    variant: str
    players: int
    partnerships: bool
    bidding: bool
    deck: int
    hand_size: int
    widow_size: int
    min_bid: int
    bid_step: int
    max_raise: int | None
    bid_schedule: tuple[tuple[int, int], ...] | None
    allow_pass_with_help: bool
    allow_bid_or_redeal: bool
    all_pass: str
    trump_requires_marriage: bool
    exchange_mode: str
    exchange_count: int
    may_bury_melded_cards: bool
    meld_declaration: str
    meld_values: Mapping[str, tuple[int, ...]]
    run_counts_its_royal_marriage: bool
    run_shares_marriage_cards: bool
    head_rule: str
    head_when_trumped: str
    head_over_partner: bool
    must_trump_when_void: bool
    must_overtrump: bool
    must_trump_even_if_cannot_overtrump: bool
    count_scheme: str
    last_trick_bonus: int
    save_meld: str | int
    save_applies_to: str
    dix_exempt_from_save: bool
    min_meld_to_record: int
    target: int
    both_reach: str
    margin_win: bool
    new_card_required: bool
    deferred_meld_scoring: bool
    dix_scores_when_played: bool
    last_draw: str
    explicit: Mapping[str, object]

    def step_at(self, level: int) -> int:
        """The bid step in force at a standing bid of ``level`` (A.2 ``bid_schedule``).

        With a schedule: the step of the last pair whose level is at most ``level``, or the first
        pair's step below the first level. Without one: ``bid_step``.
        """
        schedule = self.bid_schedule
        if schedule is None:
            return self.bid_step
        step = schedule[0][1]
        for pair_level, pair_step in schedule:
            if pair_level > level:
                break
            step = pair_step
        return step


# Values for the fields of options that do not apply to a variant (documented on RuleSet).
_NEUTRAL: Final[Mapping[str, object]] = MappingProxyType(
    {
        "min_bid": 0,
        "bid_step": 1,
        "max_raise": None,
        "bid_schedule": None,
        "allow_pass_with_help": False,
        "allow_bid_or_redeal": False,
        "all_pass": "redeal",
        "trump_requires_marriage": False,
        "exchange_mode": "none",
        "exchange_count": 0,
        "may_bury_melded_cards": False,
        "save_meld": "none",
        "save_applies_to": "both",
        "dix_exempt_from_save": False,
        "new_card_required": False,
        "deferred_meld_scoring": False,
        "dix_scores_when_played": False,
        "last_draw": "winner_facedown",
    }
)

# last_trick_bonus when count_scheme is given and last_trick_bonus is not (A.2, OPTIONS.md).
_BONUS_BY_SCHEME: Final[Mapping[str, int | None]] = MappingProxyType(
    {
        "modern10": 10,
        "simple_10_5": 10,
        "classic_11": 10,
        "points1": None,  # 1 with 48 cards, 2 with 80
        "points1_single": 1,
        "points1_double": 2,
    }
)


# --------------------------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------------------------


def _show(value: object) -> str:
    """A value as a client wrote it: JSON (true, null, "kitty"), or repr for non-JSON input."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _show_int(value)
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _show_all(values: Iterable[object]) -> str:
    return ", ".join(_show(v) for v in values)


def _describe_range(bounds: Mapping[str, Any]) -> str:
    low, high = bounds.get("min"), bounds.get("max")
    if low is not None and high is not None:
        text = f"an integer from {low} to {high}"
    elif low is not None:
        text = f"an integer >= {low}"
    elif high is not None:
        text = f"an integer <= {high}"
    else:
        text = "any integer"
    return text + (", or null" if bounds.get("nullable") else "")


_TYPE_WORDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "bool": "true or false",
        "int": "an integer",
        "string": "a string",
        "list": "a list",
        "object": "an object",
        "int_or_string": "an integer or a string",
    }
)


# --------------------------------------------------------------------------------------------
# Checking one option
# --------------------------------------------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _member(value: object, allowed: Iterable[object]) -> bool:
    """``value in allowed`` without Python's ``True == 1`` (types are checked before this)."""
    return any(type(a) is type(value) and a == value for a in allowed)


def _in_range(value: int, bounds: Mapping[str, Any]) -> bool:
    low, high = bounds.get("min"), bounds.get("max")
    return (low is None or value >= low) and (high is None or value <= high)


def _bounded(bounds: Mapping[str, Any]) -> dict[str, Any]:
    """``bounds`` with the missing ends filled in from INT_OPTION_MIN / INT_OPTION_MAX."""
    low, high = bounds.get("min"), bounds.get("max")
    out: dict[str, Any] = {
        "min": INT_OPTION_MIN if low is None else max(low, INT_OPTION_MIN),
        "max": INT_OPTION_MAX if high is None else min(high, INT_OPTION_MAX),
    }
    if bounds.get("nullable"):
        out["nullable"] = True
    return out


def _show_int(value: int) -> str:
    """An integer for a message; a huge one (1e300 sent as a number) shortened."""
    text = str(value)
    return text if len(text) <= 24 else f"{text[:12]}... ({len(text.lstrip('-'))} digits)"


def _check_int_bounds(name: str, value: int, bounds: Mapping[str, Any]) -> None:
    """Refuse an integer outside the service's bounds (INT_OPTION_MIN .. INT_OPTION_MAX)."""
    fitted = _bounded(bounds)
    if not fitted["min"] <= value <= fitted["max"]:
        raise OptionError(
            f'option "{name}" value {_show_int(value)} is out of range (allowed: an integer'
            f" from {fitted['min']} to {fitted['max']})",
            name,
        )


def _check_type(name: str, kind: str, value: object, nullable: bool) -> None:
    if value is None and nullable:
        return
    if kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "int":
        ok = _is_int(value)
    elif kind == "string":
        ok = isinstance(value, str)
    elif kind == "list":
        ok = isinstance(value, list | tuple)
    elif kind == "object":
        ok = isinstance(value, Mapping)
    elif kind == "int_or_string":
        ok = _is_int(value) or isinstance(value, str)
    else:  # pragma: no cover - a type OPTIONS.json does not use
        raise AssertionError(f"OPTIONS.json type {kind!r} of {name!r} is not handled")
    if not ok:
        wanted = _TYPE_WORDS[kind] + (" or null" if nullable else "")
        hint = " (leave the option out for no schedule)" if name == "bid_schedule" else ""
        raise OptionError(f'option "{name}" must be {wanted}, got {_show(value)}{hint}', name)


def _check_meld_values(variant: str, value: Mapping[Any, Any]) -> dict[str, tuple[int, ...]]:
    """Check a ``meld_values`` object (A.2, A.9 items 2-3) and return its lists as tuples."""
    name = "meld_values"
    if not all(isinstance(key, str) for key in value):
        bad = next(key for key in value if not isinstance(key, str))
        raise OptionError(f'option "{name}" keys must be meld names, got {_show(bad)}', name)
    table: dict[str, tuple[int, ...]] = {}
    for key in sorted(value):
        path = f"{name}.{key}"
        if key not in MELD_NAMES:
            raise OptionError(
                f'"{path}" is not a meld name (meld names: {", ".join(MELD_NAMES)})', path
            )
        if key == "roundhouse_bonus" and variant == "two-handed":
            raise OptionError(f'"{path}" does not apply to two-handed', path)
        levels = value[key]
        if (
            not isinstance(levels, list | tuple)
            or not 1 <= len(levels) <= _MAX_MELD_LEVELS
            or not all(_is_int(v) and v >= 0 for v in levels)
        ):
            raise OptionError(
                f'"{path}" must be a list of 1 to {_MAX_MELD_LEVELS} integers >= 0, one per'
                f" level (single, double, triple, quadruple), got {_show(levels)}",
                path,
            )
        too_big = [v for v in levels if v > MELD_VALUE_MAX]
        if too_big:
            raise OptionError(
                f'"{path}" value {_show_int(too_big[0])} is out of range (a meld is worth at'
                f" most {MELD_VALUE_MAX} points per level)",
                path,
            )
        table[key] = tuple(int(v) for v in levels)
    return table


def _check_bid_schedule(value: list[Any] | tuple[Any, ...]) -> tuple[tuple[int, int], ...]:
    """Check a ``bid_schedule`` list's shape (A.2); its first level is checked against min_bid
    once min_bid is resolved (``_check_requires``)."""
    name = "bid_schedule"
    if not value:
        raise OptionError(
            f'option "{name}" must be a non-empty list of [level, step] pairs'
            " (leave the option out for no schedule)",
            name,
        )
    pairs: list[tuple[int, int]] = []
    for pair in value:
        if not (isinstance(pair, list | tuple) and len(pair) == 2 and all(map(_is_int, pair))):
            raise OptionError(
                f'option "{name}" must hold [level, step] integer pairs, got {_show(pair)}', name
            )
        level, step = int(pair[0]), int(pair[1])
        if not (INT_OPTION_MIN <= level <= INT_OPTION_MAX and step <= INT_OPTION_MAX):
            raise OptionError(
                f'option "{name}" pair [{_show_int(level)}, {_show_int(step)}] is out of range'
                f" (levels and steps must be from {INT_OPTION_MIN} to {INT_OPTION_MAX})",
                name,
            )
        if step < 1:
            raise OptionError(
                f'option "{name}" pair {_show(pair)} has step {step}; every step must be >= 1',
                name,
            )
        if pairs and level <= pairs[-1][0]:
            raise OptionError(
                f'option "{name}" levels must rise strictly, but {level} follows {pairs[-1][0]}',
                name,
            )
        pairs.append((level, step))
    return tuple(pairs)


def _check_option(name: str, value: object, variant: str, for_game: bool) -> object:
    """Check one given option; return its value in the form a RuleSet field holds."""
    if name in _NOT_CONFIGURABLE:
        why = _NOT_CONFIGURABLE[name]
        # Some of OPTIONS.json's reasons say "not supported in this version" themselves.
        said = why if why.startswith("not supported") else f"not supported in this version: {why}"
        raise OptionError(f'option "{name}" is {said}', name)
    entry = _OPTION_SPECS.get(name)
    if entry is None:
        close = difflib.get_close_matches(name, _OPTION_SPECS, n=1, cutoff=0.8)
        hint = f' (did you mean "{close[0]}"?)' if close else " (OPTIONS.md lists the options)"
        raise OptionError(f'unknown option "{name}"{hint}', name)
    applies_to: list[str] = entry["applies_to"]
    if variant not in applies_to:
        raise OptionError(
            f'option "{name}" does not apply to {variant} (it applies to {", ".join(applies_to)})',
            name,
        )
    values: Any = entry["values"]
    nullable = isinstance(values, dict) and bool(values.get("nullable"))
    _check_type(name, entry["type"], value, nullable)
    if value is None:
        return None

    # game_values_by_variant narrows games alone: in a rules query its variant's not_supported
    # values are accepted too. This is how run_counts_its_royal_marriage and
    # run_shares_marriage_cards true are refused in a two-handed game but accepted in a query.
    # OPTIONS.md's table says "in games and queries alike" for those two, but OPTIONS.json files
    # them under game_values_by_variant and OPTIONS.md's closing list says "in a two-handed game
    # (not a rules query)"; we follow OPTIONS.json.
    game_narrowed: list[Any] | None = entry.get("game_values_by_variant", {}).get(variant)
    if for_game or game_narrowed is None:
        unsupported: list[Any] = entry.get("not_supported", {}).get(variant, [])
        if _member(value, unsupported):
            allowed_here = [
                v for v in _allowed_list(entry, variant, for_game) if not _member(v, unsupported)
            ]
            where = f"a {variant} game" if game_narrowed is not None else variant
            raise OptionError(
                f'option "{name}" value {_show(value)} is not supported in this version for'
                f" {where} (allowed: {_show_all(allowed_here)})",
                name,
            )

    narrowed: list[Any] | None = entry.get("values_by_variant", {}).get(variant)
    result: object = value
    if isinstance(values, list):
        allowed = narrowed if narrowed is not None else values
        if not _member(value, allowed):
            _refuse_value(name, value, variant, allowed, narrowed is not None)
    else:
        if name == "meld_values":
            result = _check_meld_values(variant, cast(Mapping[Any, Any], value))
        elif name == "bid_schedule":
            result = _check_bid_schedule(cast(list[Any], value))
        elif isinstance(value, str):  # int_or_string
            strings: list[str] = values["strings"]
            if value not in strings:
                raise OptionError(
                    f'option "{name}" value {_show(value)} is not allowed (allowed:'
                    f" {_show_all(strings)}, or {_describe_range(values['int'])})",
                    name,
                )
        else:
            assert isinstance(value, int)  # narrowed by _check_type
            bounds: Mapping[str, Any] = values.get("int", values)
            if not _in_range(value, bounds):
                extra = f"{_show_all(values['strings'])}, or " if "strings" in values else ""
                raise OptionError(
                    f'option "{name}" value {_show_int(value)} is out of range (allowed:'
                    f" {extra}{_describe_range(bounds)})",
                    name,
                )
            _check_int_bounds(name, value, bounds)
        if narrowed is not None and not _member(value, narrowed):
            _refuse_value(name, value, variant, narrowed, True)
        if isinstance(value, int) and not isinstance(value, bool):
            result = int(value)
        elif isinstance(value, str):
            result = str(value)

    if for_game and game_narrowed is not None and not _member(value, game_narrowed):
        raise OptionError(
            f'option "{name}" value {_show(value)} is not allowed in a {variant} game (allowed:'
            f" {_show_all(game_narrowed)}; rules queries accept {_show_all(values)})",
            name,
        )
    return result


def _allowed_list(entry: Mapping[str, Any], variant: str, for_game: bool) -> list[Any]:
    """The listed values a variant accepts for an option (empty when values is not a list)."""
    values: Any = entry["values"]
    allowed: list[Any] = list(values) if isinstance(values, list) else []
    narrowed = entry.get("values_by_variant", {}).get(variant)
    if narrowed is not None:
        allowed = list(narrowed)
    game_narrowed = entry.get("game_values_by_variant", {}).get(variant)
    if for_game and game_narrowed is not None:
        allowed = [v for v in allowed if _member(v, game_narrowed)]
    return allowed


def _refuse_value(
    name: str, value: object, variant: str, allowed: list[Any], narrowed: bool
) -> NoReturn:
    reason = _PROSE_NOT_SUPPORTED.get((name, variant))
    if reason is not None:
        raise OptionError(
            f'option "{name}" value {_show(value)} is not supported in this version for'
            f" {variant}: {reason}; allowed: {_show_all(allowed)}",
            name,
        )
    where = f" for {variant}" if narrowed else ""
    raise OptionError(
        f'option "{name}" value {_show(value)} is not allowed{where}'
        f" (allowed: {_show_all(allowed)})",
        name,
    )


def _check_requires(given: Mapping[str, object], merged: Mapping[str, object]) -> None:
    """The ``requires`` conditions of OPTIONS.json, on the resolved values (REQUIRES_ENFORCED)."""
    schedule = cast("tuple[tuple[int, int], ...] | None", merged["bid_schedule"])
    min_bid = cast(int, merged["min_bid"])
    if "bid_schedule" in given and schedule is not None and schedule[0][0] > min_bid:
        raise OptionError(
            f'option "bid_schedule" starts at level {schedule[0][0]}, above min_bid {min_bid};'
            " its first level must be at most min_bid",
            "bid_schedule",
        )
    _check_opening_bid(given, merged)
    if merged["exchange_mode"] == "kitty" and merged["exchange_count"] != 4:
        raise OptionError(
            f'option "exchange_count" is {merged["exchange_count"]}, but exchange_mode "kitty"'
            " needs exchange_count 4 (the kitty is 4 cards)",
            "exchange_count",
        )


def _check_opening_bid(given: Mapping[str, object], merged: Mapping[str, object]) -> None:
    """A combination that makes no sense (A.1): no opening bid at all would be legal.

    The opening bid is a raise of the step in force at min_bid (A.7 item 3); when that step is
    larger than max_raise nobody can ever bid, and a stuck dealer would have no legal action.
    """
    max_raise = merged["max_raise"]
    if max_raise is None or not ({"max_raise", "bid_step", "bid_schedule"} & set(given)):
        return
    assert isinstance(max_raise, int)
    min_bid = cast(int, merged["min_bid"])
    schedule = cast("tuple[tuple[int, int], ...] | None", merged["bid_schedule"])
    step = cast(int, merged["bid_step"])
    if schedule:
        step = schedule[0][1]
        for level, level_step in schedule:
            if level <= min_bid:
                step = level_step
    if step > max_raise:
        raise OptionError(
            f'option "max_raise" is {max_raise}, below the bid step {step} in force at min_bid '
            f"{min_bid}: no bid could ever be made",
            "max_raise",
        )


# --------------------------------------------------------------------------------------------
# Resolution
# --------------------------------------------------------------------------------------------


def _check_variant(variant: object) -> str:
    if not isinstance(variant, str) or variant not in VARIANTS:
        raise OptionError(
            f"unknown variant {_show(variant)} (variants: {', '.join(VARIANT_IDS)})", None
        )
    return str(variant)


def _resolve(variant: str, options: Mapping[str, object], for_game: bool) -> RuleSet:
    """Validate ``options`` (first problem first, names in sorted order) and build the RuleSet."""
    given = {
        name: _check_option(name, options[name], variant, for_game) for name in sorted(options)
    }

    info = VARIANTS[variant]
    deck = cast(int, given.get("deck", _OPTION_SPECS["deck"]["default"][variant]))
    defaults = _DEFAULTS[(variant, deck)]
    merged: dict[str, object] = {**_NEUTRAL, **defaults, **given}
    if "last_trick_bonus" not in given and "count_scheme" in given:
        bonus = _BONUS_BY_SCHEME[cast(str, given["count_scheme"])]
        merged["last_trick_bonus"] = bonus if bonus is not None else (1 if deck == 48 else 2)
    _check_requires(given, merged)

    table = {
        name: tuple(cast(list[int], levels))
        for name, levels in cast(dict[str, Any], defaults["meld_values"]).items()
    }
    table.update(cast(dict[str, tuple[int, ...]], given.get("meld_values", {})))

    exchange_mode = cast(str, merged["exchange_mode"])
    if variant == "cutthroat":
        widow_size = 3
    elif exchange_mode == "kitty":
        widow_size = 4
    else:
        widow_size = 0
    # Two-handed deals 12 each and leaves a stock of 24 (not a widow): A.1, §2.1.
    hand_size = 12 if variant == "two-handed" else (deck - widow_size) // info.players

    def m(name: str) -> Any:
        return merged[name]

    return RuleSet(
        variant=variant,
        players=info.players,
        partnerships=info.partnerships,
        bidding=info.bidding,
        deck=deck,
        hand_size=hand_size,
        widow_size=widow_size,
        min_bid=m("min_bid"),
        bid_step=m("bid_step"),
        max_raise=m("max_raise"),
        bid_schedule=m("bid_schedule"),
        allow_pass_with_help=m("allow_pass_with_help"),
        allow_bid_or_redeal=m("allow_bid_or_redeal"),
        all_pass=m("all_pass"),
        trump_requires_marriage=m("trump_requires_marriage"),
        exchange_mode=exchange_mode,
        exchange_count=m("exchange_count"),
        may_bury_melded_cards=m("may_bury_melded_cards"),
        meld_declaration=m("meld_declaration"),
        meld_values=_FrozenDict(table),
        run_counts_its_royal_marriage=m("run_counts_its_royal_marriage"),
        run_shares_marriage_cards=m("run_shares_marriage_cards"),
        head_rule=m("head_rule"),
        head_when_trumped=m("head_when_trumped"),
        head_over_partner=m("head_over_partner"),
        must_trump_when_void=m("must_trump_when_void"),
        must_overtrump=m("must_overtrump"),
        must_trump_even_if_cannot_overtrump=m("must_trump_even_if_cannot_overtrump"),
        count_scheme=m("count_scheme"),
        last_trick_bonus=m("last_trick_bonus"),
        save_meld=m("save_meld"),
        save_applies_to=m("save_applies_to"),
        dix_exempt_from_save=m("dix_exempt_from_save"),
        min_meld_to_record=m("min_meld_to_record"),
        target=m("target"),
        both_reach=m("both_reach"),
        margin_win=m("margin_win"),
        new_card_required=m("new_card_required"),
        deferred_meld_scoring=m("deferred_meld_scoring"),
        dix_scores_when_played=m("dix_scores_when_played"),
        last_draw=m("last_draw"),
        explicit=cast(Mapping[str, object], _freeze(options)),
    )


# Successful resolutions by (variant, for_game, canonical JSON of the options). Failures are not
# cached (they raise). Bounded crudely: emptied when full, which keeps it simple and O(1).
_CACHE: Final[dict[tuple[str, bool, str], RuleSet]] = {}
_CACHE_LIMIT: Final = 4096


def resolve_options(variant: object, options: object = None, *, for_game: bool = True) -> RuleSet:
    """Check ``variant`` and ``options`` and resolve every option for one game or rules query.

    ``options`` is a JSON object (a mapping with string keys) or None for all defaults. Raises
    :class:`OptionError` for the first problem found: the variant; then each given option in
    sorted name order (not configurable, unknown, not applicable to the variant, wrong type, not
    supported, not allowed or out of range, narrower per-variant values, game-only values when
    ``for_game``); then the ``requires`` conditions between options. ``for_game=False`` checks a
    rules query, which accepts the values OPTIONS.json narrows for games alone
    (``game_values_by_variant``, A.9 item 9).
    """
    name = _check_variant(variant)
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise OptionError(f"options must be a JSON object, got {_show(options)}", None)
    for key in options:
        if not isinstance(key, str):
            raise OptionError(f"option names must be strings, got {_show(key)}", None)
    try:
        canonical = json.dumps(options, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        # Not JSON at all (a set, a float NaN, an object): validation will say which option.
        return _resolve(name, options, for_game)
    key = (name, for_game, canonical)
    rules = _CACHE.get(key)
    if rules is None:
        rules = _resolve(name, options, for_game)
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        _CACHE[key] = rules
    return rules


def option_schema() -> list[dict[str, object]]:
    """The ``options`` entries of OPTIONS.json as fresh JSON-ready data (for a service to serve)."""
    return copy.deepcopy(cast(list[dict[str, object]], _SPEC["options"]))


def allowed_values(variant: str, name: str) -> object:
    """What a game of ``variant`` accepts for option ``name``, as fresh JSON-ready data.

    For ListVariants, which must not offer a value CreateGame refuses: a list for enumerated
    options (``values_by_variant``, ``game_values_by_variant`` and ``not_supported`` applied);
    ``{"min", "max"}`` (plus ``"nullable": true``) for integers, with the bounds this module adds
    (INT_OPTION_MIN / INT_OPTION_MAX) filled in; ``{"strings", "int"}`` likewise for
    ``int_or_string``; and for ``meld_values`` and ``bid_schedule`` the description of
    OPTIONS.json with the bounds appended. Raises OptionError for an unknown variant, an unknown
    option or one that does not apply to the variant.
    """
    variant = _check_variant(variant)
    entry = _OPTION_SPECS.get(name)
    if entry is None or variant not in entry["applies_to"]:
        raise OptionError(f'option "{name}" does not apply to {variant}', name)
    values: Any = entry["values"]
    narrowed = entry.get("values_by_variant", {}).get(variant)
    if isinstance(values, list) or narrowed is not None:
        unsupported: list[Any] = entry.get("not_supported", {}).get(variant, [])
        listed = _allowed_list(entry, variant, for_game=True)
        return [copy.deepcopy(v) for v in listed if not _member(v, unsupported)]
    if isinstance(values, dict) and "strings" in values:
        return {"strings": list(values["strings"]), "int": _bounded(values["int"])}
    if isinstance(values, dict):
        return _bounded(values)
    if name == "meld_values":
        extra = f"each value from 0 to {MELD_VALUE_MAX}"
        if variant == "two-handed":
            extra += "; roundhouse_bonus does not apply to two-handed"
        return f"{values} ({extra})"
    if name == "bid_schedule":
        return f"{values} (levels and steps at most {INT_OPTION_MAX})"
    return copy.deepcopy(values)  # pragma: no cover - every OPTIONS.json shape is handled above


def variant_defaults(variant: str) -> dict[str, object]:
    """Each applicable option's default for ``variant``, as fresh JSON-ready data.

    Deck-dependent defaults are resolved for the variant's default deck (80 for double-deck).
    Options whose default is "no limit" / "no schedule" map to None.
    """
    name = _check_variant(variant)
    deck = cast(int, _OPTION_SPECS["deck"]["default"][name])
    return copy.deepcopy(_DEFAULTS[(name, deck)])
