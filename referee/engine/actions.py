"""Actions (RULES.md A.4) and their one JSON encoder/decoder.

Records, rules queries and (later) the protobuf layer all go through ``decode_action`` and
``encode_action``, so an action means the same thing wherever it comes from. Decoding checks
shape only (types, fields, card notation) and raises ``MALFORMED_ACTION``; whether the action is
legal now is the engine's business.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from referee.engine.errors import IllegalAction
from referee.rules.cards import (
    Card,
    CardSyntaxError,
    Suit,
    format_card,
    format_cards,
    format_suit,
    parse_card,
    parse_suit,
)
from referee.rules.frozen import Frozen


@dataclass(frozen=True, slots=True)
class Bid(Frozen):
    amount: int


@dataclass(frozen=True, slots=True)
class Pass(Frozen):
    help: bool = False


@dataclass(frozen=True, slots=True)
class BidOrRedeal(Frozen):
    pass


@dataclass(frozen=True, slots=True)
class DeclareTrump(Frozen):
    suit: Suit


@dataclass(frozen=True, slots=True)
class PassCards(Frozen):
    cards: tuple[Card, ...]


@dataclass(frozen=True, slots=True)
class Discard(Frozen):
    cards: tuple[Card, ...]


@dataclass(frozen=True, slots=True)
class DeclaredCombination(Frozen):
    name: str
    cards: tuple[Card, ...]


@dataclass(frozen=True, slots=True)
class Meld(Frozen):
    """Whole-hand meld: ``cards`` shown, optional ``melds`` and ``points`` claim.

    Two-handed melds use ``name`` (one combination) with ``cards``.
    """

    cards: tuple[Card, ...]
    melds: tuple[DeclaredCombination, ...] | None = None
    points: int | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class ExchangeDix(Frozen):
    pass


@dataclass(frozen=True, slots=True)
class Concede(Frozen):
    pass


@dataclass(frozen=True, slots=True)
class Draw(Frozen):
    turn_up: bool


@dataclass(frozen=True, slots=True)
class Play(Frozen):
    card: Card


Action = (
    Bid
    | Pass
    | BidOrRedeal
    | DeclareTrump
    | PassCards
    | Discard
    | Meld
    | ExchangeDix
    | Concede
    | Draw
    | Play
)

ACTION_TYPES: Final = (
    "bid",
    "pass",
    "bid_or_redeal",
    "declare_trump",
    "pass_cards",
    "discard",
    "meld",
    "exchange_dix",
    "concede",
    "draw",
    "play",
)

# Fields each type takes: name -> required? (The service's and clients' JSON forms take the same.)
ACTION_FIELDS: Final[dict[str, dict[str, bool]]] = {
    "bid": {"amount": True},
    "pass": {"help": False},
    "bid_or_redeal": {},
    "declare_trump": {"suit": True},
    "pass_cards": {"cards": True},
    "discard": {"cards": True},
    "meld": {"cards": True, "melds": False, "points": False, "name": False},
    "exchange_dix": {},
    "concede": {},
    "draw": {"turn_up": True},
    "play": {"card": True},
}


def _malformed(message: str, field: str = "") -> IllegalAction:
    return IllegalAction("MALFORMED_ACTION", message, field)


def _int(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _malformed(f"{field} must be an integer, got {value!r}", field)
    return value


def _bool(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise _malformed(f"{field} must be true or false, got {value!r}", field)
    return value


def _card(value: object, field: str) -> Card:
    try:
        return parse_card(value)
    except CardSyntaxError as error:
        raise _malformed(str(error), field) from None


def _cards(value: object, field: str) -> tuple[Card, ...]:
    if not isinstance(value, list | tuple):
        raise _malformed(f"{field} must be a list of cards", field)
    return tuple(_card(item, f"{field}[{i}]") for i, item in enumerate(value))


def _combinations(value: object) -> tuple[DeclaredCombination, ...]:
    if not isinstance(value, list | tuple):
        raise _malformed("melds must be a list of {name, cards} objects", "melds")
    result = []
    for i, entry in enumerate(value):
        path = f"melds[{i}]"
        if not isinstance(entry, Mapping) or set(entry) != {"name", "cards"}:
            raise _malformed(f"{path} must be an object with exactly name and cards", path)
        name = entry["name"]
        if not isinstance(name, str):
            raise _malformed(f"{path}.name must be a string", f"{path}.name")
        result.append(DeclaredCombination(name, _cards(entry["cards"], f"{path}.cards")))
    return tuple(result)


def decode_action(data: object, *, seat_key: bool = False) -> Action:
    """Decode the JSON form of an action.

    With ``seat_key`` the object may also hold a ``seat`` key, which the caller reads (a
    recorded game's actions carry their seat); it is ignored here, so the audit need not copy
    every action without it. Written for the audit's and the service's hot path: a plain dict
    is recognised before the slower ``Mapping`` check, and a card play, most actions of a
    game, is decoded first."""
    if type(data) is dict:
        # A well-formed card play, most of a game's actions, has exactly its type and card
        # (and the record's seat): decoded without the field loops below, which give every
        # other shape, a malformed play included, its answer.
        if (
            len(data) == 2 + seat_key
            and data.get("type") == "play"
            and "card" in data
            and (not seat_key or "seat" in data)
        ):
            return Play(_card(data["card"], "card"))
    elif not isinstance(data, Mapping):
        raise _malformed("an action must be a JSON object with a type")
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in ACTION_FIELDS:
        raise _malformed(
            f"unknown action type {kind!r}; expected one of {', '.join(ACTION_TYPES)}", "type"
        )
    fields = ACTION_FIELDS[kind]
    for key in data:
        if key != "type" and key not in fields and not (seat_key and key == "seat"):
            raise _malformed(f"{kind} takes no field {key!r}", str(key))
    for key, required in fields.items():
        if required and key not in data:
            raise _malformed(f"{kind} needs the field {key!r}", key)
    if kind == "play":
        return Play(_card(data["card"], "card"))
    if kind == "bid":
        return Bid(_int(data["amount"], "amount"))
    if kind == "pass":
        # An optional field given as null is the same as leaving it out (as a meld's are).
        help_ = data.get("help")
        return Pass(help_ is not None and _bool(help_, "help"))
    if kind == "bid_or_redeal":
        return BidOrRedeal()
    if kind == "declare_trump":
        try:
            return DeclareTrump(parse_suit(data["suit"]))
        except CardSyntaxError as error:
            raise _malformed(str(error), "suit") from None
    if kind == "pass_cards":
        return PassCards(_cards(data["cards"], "cards"))
    if kind == "discard":
        return Discard(_cards(data["cards"], "cards"))
    if kind == "meld":
        name = data.get("name")
        if name is not None and not isinstance(name, str):
            raise _malformed("name must be a string", "name")
        points = data.get("points")
        return Meld(
            cards=_cards(data["cards"], "cards"),
            melds=_combinations(data["melds"]) if data.get("melds") is not None else None,
            points=None if points is None else _int(points, "points"),
            name=name,
        )
    if kind == "exchange_dix":
        return ExchangeDix()
    if kind == "concede":
        return Concede()
    return Draw(_bool(data["turn_up"], "turn_up"))  # the last type of ACTION_FIELDS


def action_type(action: Action) -> str:
    return _TYPE_NAMES[type(action)]


_TYPE_NAMES: Final[dict[type, str]] = {
    Bid: "bid",
    Pass: "pass",
    BidOrRedeal: "bid_or_redeal",
    DeclareTrump: "declare_trump",
    PassCards: "pass_cards",
    Discard: "discard",
    Meld: "meld",
    ExchangeDix: "exchange_dix",
    Concede: "concede",
    Draw: "draw",
    Play: "play",
}


def encode_action(action: Action) -> dict[str, object]:
    """The canonical JSON form (A.4); ``decode_action(encode_action(a)) == a``.

    Hot path: a card play, most actions of a game, is answered first, without the chain of
    ``isinstance`` checks below (``Play`` is final, so its exact type says it)."""
    if type(action) is Play:
        return {"type": "play", "card": format_card(action.card)}
    kind = _TYPE_NAMES[type(action)]
    out: dict[str, object] = {"type": kind}
    if isinstance(action, Bid):
        out["amount"] = action.amount
    elif isinstance(action, Pass):
        if action.help:
            out["help"] = True
    elif isinstance(action, DeclareTrump):
        out["suit"] = format_suit(action.suit)
    elif isinstance(action, PassCards | Discard):
        out["cards"] = format_cards(action.cards)
    elif isinstance(action, Meld):
        if action.name is not None:
            out["name"] = action.name
        out["cards"] = format_cards(action.cards)
        if action.melds is not None:
            out["melds"] = [{"name": m.name, "cards": format_cards(m.cards)} for m in action.melds]
        if action.points is not None:
            out["points"] = action.points
    elif isinstance(action, Draw):
        out["turn_up"] = action.turn_up
    return out
