"""Rules queries (GAME_RECORD.md §3): stateless questions about a hand, one JSON line each.

``pinochle-referee query`` feeds standard input to :func:`run_queries` and prints what it yields;
the test suite runs the public vectors through the same function, so the CLI and the vectors can
never disagree. :func:`answer_query` answers one already-parsed query.

Why a query never raises: a query stream is answered line by line, and one bad line must not cost
the answers to the lines after it (§3: "the others are still answered"). Every problem becomes an
``{"error": ...}`` answer that names the field at fault, because the people reading these answers
are testing their own referee against ours and need to know *what* we refused, not just *that* we
did. For the same reason an unknown field is an error rather than ignored: a misspelt
``seat_of_partner_in_trick`` silently ignored would give a plausible but wrong legal set.

The rules themselves live in ``referee.rules``; this module only reads JSON, checks it, and calls
the same functions the engine uses (A.9 item 9: variant and options are checked exactly as game
creation checks them, through ``resolve_options``).
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any, Final, TypeGuard

from referee.engine.engine import make_setup
from referee.engine.state import Setup
from referee.jsonread import RepeatedKeyError, loads_once
from referee.rules.cards import (
    Card,
    CardSyntaxError,
    Suit,
    fits_deck,
    format_cards,
    parse_card,
    parse_suit,
)
from referee.rules.melds import best_meld
from referee.rules.options import VARIANTS, OptionError, RuleSet, resolve_options
from referee.rules.scoring import no_contract, score_hand
from referee.rules.tricks import FREE_PLAY, legal_plays, trick_winner

__all__ = [
    "ANSWER_FIELDS",
    "KINDS",
    "QUERY_FIELDS",
    "QueryError",
    "answer_fields",
    "answer_query",
    "run_queries",
]

DEFAULT_VARIANT: Final = "partnership"

#: Fields every query may carry, whatever its kind.
COMMON_FIELDS: Final = ("kind", "variant", "options", "id")

#: The input fields of each kind, in the order of §3's table (also the order they are checked).
QUERY_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "meld": ("hand", "trump"),
    "legal_plays": ("hand", "trump", "trick", "phase", "seat_of_partner_in_trick"),
    "trick_winner": ("trick", "trump"),
    "trick_points": ("cards", "last"),
    "hand_score": ("bid", "declarer", "meld", "points", "tricks", "dix", "conceded"),
}

#: The answer fields of each kind, in the order of §3's table (the order they are written).
ANSWER_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "meld": ("total", "melds"),
    "legal_plays": ("legal",),
    "trick_winner": ("winner",),
    "trick_points": ("points",),
    "hand_score": ("delta", "saved"),
}

KINDS: Final = tuple(QUERY_FIELDS)

_PHASES: Final = ("stock", "playoff")

# Lengths of a value quoted back in an error message: enough to recognise it, never a wall of text.
_SHOW_LIMIT: Final = 60


class QueryError(ValueError):
    """A query that cannot be answered; the message becomes the answer's ``error``.

    ``field`` names the input at fault as a path: a field (``trump``), an element
    (``hand[0]``), an option (``options.target``, ``options.meld_values.run``), ``variant``,
    ``options``, or "" when the query as a whole is wrong (not an object). The JSON answer
    carries only the message (§3), which names the field too; the gRPC RulesService puts
    ``field`` in a ``google.rpc.BadRequest``.
    """

    field: str

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


# --------------------------------------------------------------------------------------------
# Rule objects derived from a RuleSet
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _derived(rules: RuleSet) -> Setup:
    """The rules-core objects a query needs: the engine's own ``make_setup``, cached.

    Why cached: query streams (and the query benchmark) repeat the same variant and options line
    after line; ``resolve_options`` already hands back the same RuleSet for them, and rebuilding
    the meld table and counting scheme per line would be most of the cost of a cheap query.
    """
    return make_setup(rules)


# --------------------------------------------------------------------------------------------
# Reading fields
# --------------------------------------------------------------------------------------------


def _json_type(value: object) -> str:
    """The JSON name of a value's type, for messages read by people who wrote JSON, not Python."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _show(value: object) -> str:
    """A value as JSON, shortened: error messages quote the input so the fault can be found."""
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    if len(text) > _SHOW_LIMIT:
        text = text[: _SHOW_LIMIT - 3] + "..."
    return text


def _is_int(value: object) -> TypeGuard[int]:
    """A JSON integer: ``true`` is not 1 here (a bool where a number belongs is a mistake)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _require(query: Mapping[str, Any], name: str) -> object:
    if name not in query:
        raise QueryError(f'missing field "{name}"', name)
    value: object = query[name]
    return value


def _optional(query: Mapping[str, Any], name: str) -> object:
    """An optional field's value; absent and ``null`` both mean "not given"."""
    value: object = query.get(name)
    return value


def _cards(name: str, value: object) -> tuple[Card, ...]:
    """Parse a list of cards, naming the field and the index of the first bad one."""
    if not isinstance(value, list):
        raise QueryError(f"{name}: expected a list of cards, got {_json_type(value)}", name)
    cards: list[Card] = []
    for index, item in enumerate(value):
        try:
            cards.append(parse_card(item))
        except CardSyntaxError as exc:
            raise QueryError(f"{name}[{index}]: {exc}", f"{name}[{index}]") from None
    return tuple(cards)


def _suit(name: str, value: object) -> Suit:
    try:
        return parse_suit(value)
    except CardSyntaxError as exc:
        raise QueryError(f"{name}: {exc}", name) from None


def _bool(name: str, value: object, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise QueryError(f"{name}: expected true or false, got {_show(value)}", name)
    return value


def _check_fits(cards: Sequence[Card], what: str, rules: RuleSet, field: str = "") -> None:
    """§3: a hand or trick that no deck of the variant could produce is an error."""
    reason = fits_deck(cards, rules.deck)
    if reason is not None:
        raise QueryError(
            f"{what}: {reason} (no {rules.variant} deck could produce these cards)", field or what
        )


def _int_list(name: str, value: object, length: int, per: str, low: int = 0) -> list[int]:
    """A list of ``length`` integers >= ``low`` (0 unless said), one per seat or side."""
    if not isinstance(value, list):
        raise QueryError(
            f"{name}: expected a list of {length} integers (one per {per}),"
            f" got {_json_type(value)}",
            name,
        )
    if len(value) != length:
        raise QueryError(
            f"{name}: expected {length} integers (one per {per}), got {len(value)}", name
        )
    for index, item in enumerate(value):
        if not _is_int(item):
            raise QueryError(
                f"{name}[{index}]: expected an integer, got {_show(item)}", f"{name}[{index}]"
            )
        if item < low:
            raise QueryError(f"{name}[{index}]: must be >= {low}, got {item}", f"{name}[{index}]")
    return [int(item) for item in value]


# --------------------------------------------------------------------------------------------
# The kinds
# --------------------------------------------------------------------------------------------


def _meld(query: Mapping[str, Any], rules: RuleSet) -> dict[str, object]:
    hand = _cards("hand", _require(query, "hand"))
    trump = _suit("trump", _require(query, "trump"))
    _check_fits(hand, "hand", rules)
    result = best_meld(hand, trump, _derived(rules).meld_table)
    return {
        "total": result.total,
        "melds": [
            {
                "name": meld.name,
                "level": meld.level,
                "points": meld.points,
                "cards": format_cards(meld.cards),
            }
            for meld in result.melds
        ],
    }


def _legal_plays(query: Mapping[str, Any], rules: RuleSet) -> dict[str, object]:
    hand = _cards("hand", _require(query, "hand"))
    trump = _suit("trump", _require(query, "trump"))
    raw_trick = _optional(query, "trick")
    trick = () if raw_trick is None else _cards("trick", raw_trick)
    if not hand:
        raise QueryError("hand: empty; a player with no cards has no legal play", "hand")
    if len(trick) >= rules.players:
        raise QueryError(
            f"trick: {len(trick)} cards already played, but a {rules.variant} trick has"
            f" {rules.players}; at most {rules.players - 1} may precede this player's card",
            "trick",
        )
    # The hand is named: it is the player's own cards, the trick what the others played.
    _check_fits(hand + trick, "hand and trick together", rules, "hand")

    play_rules = _derived(rules).play_rules
    phase = _optional(query, "phase")
    if phase is not None:
        if rules.variant != "two-handed":
            raise QueryError(
                f'phase: only two-handed has phases ("stock", "playoff"), not {rules.variant}',
                "phase",
            )
        if phase not in _PHASES:
            raise QueryError(f'phase: expected "stock" or "playoff", got {_show(phase)}', "phase")
        if phase == "stock":
            play_rules = FREE_PLAY  # §2.2: no obligation while the stock lasts

    partner = _optional(query, "seat_of_partner_in_trick")
    partner_winning = False
    if partner is not None:
        if rules.variant == "two-handed":
            raise QueryError(
                "seat_of_partner_in_trick: two-handed has no partners", "seat_of_partner_in_trick"
            )
        if not _is_int(partner):
            raise QueryError(
                f"seat_of_partner_in_trick: expected an index into trick, got {_show(partner)}",
                "seat_of_partner_in_trick",
            )
        if not 0 <= partner < len(trick):
            raise QueryError(
                f"seat_of_partner_in_trick: {partner} is not an index into trick"
                f" ({len(trick)} cards played)",
                "seat_of_partner_in_trick",
            )
        if rules.partnerships and partner != len(trick) - 2:
            # The partner sits opposite: its card, if played, is the one two before this
            # seat's. Another index names an opponent's card, a position no game reaches,
            # and the answer would be a plausible but wrong legal set. (Cutthroat's
            # defenders are partners against the declarer, who may have played anywhere.)
            where = (
                f"trick[{len(trick) - 2}]"
                if len(trick) >= 2
                else "none yet: the partner plays after this seat"
            )
            raise QueryError(
                f"seat_of_partner_in_trick: in {rules.variant} the partner sits opposite, so"
                f" its card is the one played two before this seat's ({where}), not"
                f" trick[{partner}]",
                "seat_of_partner_in_trick",
            )
        partner_winning = trick_winner(trick, trump) == partner

    legal = legal_plays(hand, trick, trump, play_rules, partner_winning)
    return {"legal": format_cards(legal)}


def _trick_winner(query: Mapping[str, Any], rules: RuleSet) -> dict[str, object]:
    trick = _cards("trick", _require(query, "trick"))
    trump = _suit("trump", _require(query, "trump"))
    if not 1 <= len(trick) <= rules.players:
        raise QueryError(
            f"trick: expected 1 to {rules.players} cards for {rules.variant}, got {len(trick)}",
            "trick",
        )
    _check_fits(trick, "trick", rules)
    return {"winner": trick_winner(trick, trump)}


def _trick_points(query: Mapping[str, Any], rules: RuleSet) -> dict[str, object]:
    cards = _cards("cards", _require(query, "cards"))
    last = _bool("last", _optional(query, "last"), False)
    _check_fits(cards, "cards", rules)
    return {"points": _derived(rules).counting.trick_points(cards, last)}


def _hand_score(query: Mapping[str, Any], rules: RuleSet) -> dict[str, object]:
    """Score one hand from its figures (§4.7, §5.6, §2.5; A.6, A.7 items 4, 5 and 8).

    ``meld`` and ``dix`` are per seat, because that is how a hand's melds are shown; the save rule
    and the contract are per side, so partnership figures are summed by team (A.3). ``bid`` and
    ``declarer`` must be given in the bidding variants (``null`` for a hand with no contract, which
    scores nothing, A.7 item 2): a forgotten bid would otherwise be scored, without a word, as a
    hand with no contract. ``tricks``
    only feeds the save rule, which two-handed does not have, so it is optional there alone.
    """
    derived = _derived(rules)
    players, sides = rules.players, derived.sides
    per_side = "team" if rules.partnerships else "seat"

    if rules.bidding:
        bid = _require(query, "bid")
        declarer = _require(query, "declarer")
    else:
        bid = _optional(query, "bid")
        declarer = _optional(query, "declarer")
        if bid is not None or declarer is not None:
            given = "bid" if bid is not None else "declarer"
            raise QueryError(
                f"{given}: {rules.variant} has no bidding; leave bid and declarer out (or null)",
                given,
            )
    if bid is not None and not (_is_int(bid) and bid >= 0):
        raise QueryError(f"bid: expected an integer >= 0 or null, got {_show(bid)}", "bid")
    if declarer is not None and not (_is_int(declarer) and 0 <= declarer < players):
        raise QueryError(
            f"declarer: expected a seat from 0 to {players - 1} or null, got {_show(declarer)}",
            "declarer",
        )
    if (bid is None) != (declarer is None):
        raise QueryError(
            "bid and declarer: give both (a contract) or neither (null: no contract)",
            "bid" if bid is None else "declarer",  # the one left out
        )

    meld = _int_list("meld", _require(query, "meld"), players, "seat")
    # ``points`` include the last-trick bonus, which may be any integer (OPTIONS.md): with a
    # negative one the side that takes the last trick can end below 0 (no counters and a bonus
    # of -10: -10), as a game scores it. A side takes the bonus at most once, so the lowest
    # figure a hand can give is the bonus itself; below that (and below 0 otherwise) is refused.
    lowest = min(0, rules.last_trick_bonus)
    points = _int_list("points", _require(query, "points"), sides, per_side, lowest)
    # Two-handed scores no trick counts, so there ``tricks`` is optional (absent or null: none
    # taken); elsewhere it is required, and a null is refused as a meld or points null is. It was
    # read as all zeros, which under save rule "trick" cost every side its meld without a word.
    if rules.variant == "two-handed":
        raw_tricks = _optional(query, "tricks")
        tricks = (
            [0] * sides if raw_tricks is None else _int_list("tricks", raw_tricks, sides, per_side)
        )
    else:
        tricks = _int_list("tricks", _require(query, "tricks"), sides, per_side)
    raw_dix = _optional(query, "dix")
    dix = [0] * players if raw_dix is None else _int_list("dix", raw_dix, players, "seat")
    for seat in range(players):
        if dix[seat] > meld[seat]:
            raise QueryError(
                f"dix[{seat}]: {dix[seat]} is more than meld[{seat}] {meld[seat]}"
                " (dix points are included in meld)",
                f"dix[{seat}]",
            )
    conceded = _bool("conceded", _optional(query, "conceded"), False)
    if conceded and bid is None:
        raise QueryError(
            "conceded: only a declarer can concede, and this hand has no contract"
            if rules.bidding
            else f"conceded: {rules.variant} has no declarer, so no hand is conceded",
            "conceded",
        )

    if rules.variant == "two-handed":
        # §2.5, A.8 item 9: no contract and no save rule; each seat scores meld + card points.
        return {
            "delta": [meld[s] + points[s] for s in range(sides)],
            "saved": [True] * sides,
        }

    def side_of(seat: int) -> int:
        return seat % 2 if rules.partnerships else seat

    side_meld = [0] * sides
    side_dix = [0] * sides
    for seat in range(players):
        side_meld[side_of(seat)] += meld[seat]
        side_dix[side_of(seat)] += dix[seat]
    if rules.bidding and bid is None:
        # A.7 item 2: with no contract the hand ends unplayed and nothing scores, as in a game.
        score = no_contract(sides)
    else:
        score = score_hand(
            derived.save_rule,
            bid=bid if isinstance(bid, int) else None,
            declaring_side=side_of(declarer) if isinstance(declarer, int) else None,
            meld=side_meld,
            dix=side_dix,
            points=points,
            tricks=tricks,
            conceded=conceded,
            total_in_play=derived.total_in_play,
        )
    return {"delta": list(score.delta), "saved": list(score.saved)}


_HANDLERS: Final[Mapping[str, Callable[[Mapping[str, Any], RuleSet], dict[str, object]]]] = {
    "meld": _meld,
    "legal_plays": _legal_plays,
    "trick_winner": _trick_winner,
    "trick_points": _trick_points,
    "hand_score": _hand_score,
}


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------


def _answer(query: Mapping[Any, Any]) -> dict[str, object]:
    """The answer fields of a query (without ``id``); raises QueryError or OptionError."""
    if "kind" not in query:
        raise QueryError(f'missing field "kind" (one of {", ".join(KINDS)})', "kind")
    kind = query["kind"]
    if not isinstance(kind, str) or kind not in _HANDLERS:
        raise QueryError(f"unknown kind {_show(kind)} (kinds: {', '.join(KINDS)})", "kind")
    fields = QUERY_FIELDS[kind]
    unknown = [key for key in query if key not in COMMON_FIELDS and key not in fields]
    if unknown:
        names = ", ".join(_show(key) for key in unknown)
        hints = []
        for key in unknown:
            if isinstance(key, str):
                close = difflib.get_close_matches(key, (*fields, *COMMON_FIELDS), n=1)
                if close:
                    hints.append(f'"{key}" -> "{close[0]}"?')
        hint = f"; did you mean {', '.join(hints)}" if hints else ""
        raise QueryError(
            f"unknown field{'s' if len(unknown) > 1 else ''} {names} in a {kind} query"
            f" (fields: {', '.join((*fields, *COMMON_FIELDS[1:]))}){hint}",
            str(unknown[0]),
        )
    rules = resolve_options(_variant(query), query.get("options"), for_game=False)
    return _HANDLERS[kind](query, rules)


def _variant(query: Mapping[Any, Any]) -> object:
    """The query's variant: ``null`` is the default, as for every optional field (``options``
    null already was); it was refused as 'unknown variant null'."""
    variant = _optional(query, "variant")
    return DEFAULT_VARIANT if variant is None else variant


def _option_field(query: Mapping[Any, Any], error: OptionError) -> str:
    """The field an OptionError is about, named as CreateGame names it (``options.<name>``)."""
    if error.option is not None:
        return f"options.{error.option}"
    variant = _variant(query)
    return "options" if isinstance(variant, str) and variant in VARIANTS else "variant"


def answer_fields(query: object) -> dict[str, object]:
    """The answer fields of one query (without ``id``), for callers that report errors their own
    way, such as the gRPC RulesService.

    Raises :class:`QueryError` for bad input, with ``field`` naming the input at fault and the
    same message :func:`answer_query` would answer; anything else it raises is a bug.
    """
    if not isinstance(query, Mapping):
        raise QueryError(f"a query must be a JSON object, got {_json_type(query)}")
    try:
        return _answer(query)
    except OptionError as exc:
        raise QueryError(str(exc), _option_field(query, exc)) from None


def answer_query(query: object) -> dict[str, object]:
    """One rules query (GAME_RECORD.md §3) -> its answer object.

    Never raises for bad input: returns ``{"error": "..."}`` (with ``id`` copied when the query
    has one, so a client matching answers to questions by id can still match the errors). Keys
    come in §3's order, ``id`` first.

    Any unexpected exception is answered as an "internal error" too rather than raised: a query
    stream must keep going (§3), and the error names the exception so the bug can be reported.
    """
    if not isinstance(query, Mapping):
        return {"error": f"a query must be a JSON object, got {_json_type(query)}"}
    answer: dict[str, object] = {}
    if "id" in query:
        answer["id"] = query["id"]
    try:
        answer.update(answer_fields(query))
    except QueryError as exc:
        answer["error"] = str(exc)
    except Exception as exc:  # a bug, not bad input: still answer, and say so
        answer["error"] = f"internal error: {type(exc).__name__}: {exc}"
    return answer


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    """Floats such as 1e999 parse as infinity, which cannot be written back as JSON."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text} is too large")
    return value


def _dump(answer: Mapping[str, object]) -> str:
    """One answer as one line of JSON (ASCII-escaped, so no character can break the line)."""
    try:
        return json.dumps(answer, separators=(", ", ": "))
    except (TypeError, ValueError, RecursionError):
        # Only an id nested too deep to write back can get here (everything else is ours).
        rest = {key: value for key, value in answer.items() if key != "id"}
        if "error" not in rest:
            rest = {"error": "the query's id could not be written back as JSON"}
        return json.dumps(rest, separators=(", ", ": "))


def _repeated_key_answer(query: object, error: RepeatedKeyError) -> dict[str, object]:
    """The error answer to a query that gives a key twice, its ``id`` copied (A.10 item 5)
    unless ``id`` is the key given twice."""
    answer: dict[str, object] = {}
    if error.key != "id" and isinstance(query, Mapping) and "id" in query:
        answer["id"] = query["id"]
    answer["error"] = str(error)
    return answer


def run_queries(lines: Iterable[str | bytes]) -> Iterator[str]:
    """One JSON answer line per input line, same order; blank lines are skipped.

    A line that is not JSON gets an error answer in its place, so answers stay aligned with the
    questions (§3). ``NaN``, ``Infinity`` and numbers too large for a float are refused as not
    JSON: Python would accept them, but they could not be written back as valid JSON. Lines given
    as bytes (standard input) must be UTF-8 (§1); one that is not gets an error answer too. A
    byte order mark at the start of the input (Notepad and PowerShell 5 write one) is skipped,
    as a record's is, and a key given twice in one object is an error, as in a record: readers
    differ on which of the two counts.
    """
    first = True
    for raw in lines:
        if isinstance(raw, bytes):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                first = False
                yield _dump({"error": f"not a UTF-8 line: {exc}"})
                continue
        else:
            line = raw
        if first:
            first = False
            if line.startswith("\ufeff"):
                line = line[1:]
        if not line.strip():
            continue
        try:
            query, repeated = loads_once(
                line, parse_constant=_refuse_constant, parse_float=_finite_float
            )
        except (ValueError, RecursionError) as exc:
            yield _dump({"error": f"not a JSON line: {exc}"})
            continue
        if repeated is not None:
            yield _dump(_repeated_key_answer(query, repeated))
            continue
        yield _dump(answer_query(query))
