"""Protobuf <-> core, in one place.

Actions cross the wire as the ``Action`` oneof and are turned into their JSON form (A.4) here,
then decoded by the engine's one decoder (``decode_action``), so an action means the same thing
in a record, a query and an RPC. Views and event data travel as compact JSON text
(``json_text``): every game step sends them, and building a ``Struct`` in Python cost about
0.14 ms per view against 3 us for orjson (bench/service.py profile, 2026-12-01). The other
JSON-shaped values (options, deals, descriptors, records, verdicts) travel as
``google.protobuf.Struct``; Struct numbers are doubles, so ``to_plain`` turns integral numbers
back into ints on the way in. On the way out, what an audit verdict quotes from a recorded game
(JSON the client wrote) must still fit a Struct: an integer too large for any double travels as
its decimal string, and a lone surrogate (a JSON escape such as \ud800, which UTF-8 cannot hold)
as the text of its escape. Other integers travel as doubles, exact up to 2**53.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict

from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee.engine.actions import ACTION_FIELDS
from referee.engine.events import Event
from referee.store.base import compact_json


def _key_order(key: str) -> tuple[bool, str]:
    return key != "type", key


def to_plain(value: object) -> object:
    """A Struct-decoded value with integral floats made ints again (options, deals, actions).

    A Struct is a protobuf map: its fields come in no fixed order, on the wire or after
    decoding (the same answer printed differently from run to run). Objects are rebuilt with
    ``type`` first and the other keys sorted, so an equal value always reads the same; the
    Node client orders them the same way."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: to_plain(value[k]) for k in sorted(value, key=_key_order)}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    return value


def struct_to_dict(message: struct_pb2.Struct) -> dict[str, object]:
    plain = to_plain(MessageToDict(message))
    assert isinstance(plain, dict)
    return plain


def json_text(data: Mapping[str, object]) -> str:
    """Compact JSON text of a JSON-ready mapping (views, event data); int keys become strings."""
    return compact_json(data)


def dict_to_struct(data: Mapping[str, object]) -> struct_pb2.Struct:
    """A Struct of JSON-ready data (records, verdicts, descriptors, options). Most of it is
    already lists and str-keyed dicts, so the copy through ``_jsonable`` is only made when the
    fast path refuses a tuple, a non-str key or an integer beyond the doubles."""
    # Struct.update checks each value itself (hence the except); its argument's static type is
    # cast, not ignored: types-protobuf's signature changed between releases, and an ignore
    # that one release needs is an unused one, a mypy error, under the next.
    struct = struct_pb2.Struct()
    try:
        struct.update(cast("Mapping[str, Any]", data))
    except (TypeError, ValueError, AttributeError, OverflowError):
        struct = struct_pb2.Struct()
        struct.update(cast("Mapping[str, Any]", _jsonable(data)))
    return struct


def to_value(data: object) -> struct_pb2.Value:
    value = struct_pb2.Value()
    data = _jsonable(data)  # what a Struct can hold: see the module docstring
    if data is None:
        value.null_value = struct_pb2.NULL_VALUE
    elif isinstance(data, bool):
        value.bool_value = data
    elif isinstance(data, int | float):
        value.number_value = data
    elif isinstance(data, str):
        value.string_value = data
    elif isinstance(data, Mapping):
        value.struct_value.update(data)
    elif isinstance(data, list):
        value.list_value.extend(data)
    else:
        raise TypeError(f"not JSON: {data!r}")
    return value


def _jsonable(data: object) -> object:
    if isinstance(data, str):
        return _utf8(data)
    if isinstance(data, Mapping):
        return {_utf8(str(k)): _jsonable(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_jsonable(v) for v in data]
    if isinstance(data, int) and not isinstance(data, bool):
        try:
            float(data)
        except OverflowError:
            return str(data)
    return data


def _utf8(text: str) -> str:
    """``text``, with any lone surrogate written as its escape (``\\ud800``)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode()
    return text


def action_to_json(action: pb.Action) -> dict[str, object]:
    """The A.4 JSON form of a protobuf action ({} when no action is set)."""
    kind = action.WhichOneof("kind")
    if kind is None:
        return {}
    if kind == "bid":
        return {"type": "bid", "amount": action.bid.amount}
    if kind == "pass_turn":
        return {"type": "pass", "help": True} if action.pass_turn.help else {"type": "pass"}
    if kind == "declare_trump":
        return {"type": "declare_trump", "suit": action.declare_trump.suit}
    if kind == "pass_cards":
        return {"type": "pass_cards", "cards": list(action.pass_cards.cards)}
    if kind == "discard":
        return {"type": "discard", "cards": list(action.discard.cards)}
    if kind == "meld":
        meld = action.meld
        out: dict[str, object] = {"type": "meld", "cards": list(meld.cards)}
        if meld.HasField("melds"):
            out["melds"] = [{"name": m.name, "cards": list(m.cards)} for m in meld.melds.items]
        if meld.HasField("points"):
            out["points"] = meld.points
        if meld.HasField("name"):
            out["name"] = meld.name
        return out
    if kind == "draw":
        return {"type": "draw", "turn_up": action.draw.turn_up}
    if kind == "play":
        return {"type": "play", "card": action.play.card}
    return {"type": kind}  # bid_or_redeal, exchange_dix, concede: no fields


def action_from_json(data: Mapping[str, object]) -> pb.Action:
    """The protobuf form of an A.4 JSON action (used by clients and tests).

    A field the type does not take is refused, naming it, as the engine refuses it
    (MALFORMED_ACTION): it was dropped, and ``{"type": "bid", "amount": 250, "extra": 1}``
    went out as a plain bid, another action than the one given. A record's ``seat`` too: a
    seat acts with its own token."""
    kind = data.get("type")
    fields = ACTION_FIELDS.get(kind) if isinstance(kind, str) else None
    if fields is not None:
        for key in data:
            if key != "type" and key not in fields:
                taken = f"only {', '.join(fields)}" if fields else "no other field"
                raise ValueError(f"{kind} takes no field {key!r} ({taken})")
    action = pb.Action()
    if kind == "bid":
        action.bid.amount = _integer(_field(data, "amount"), "amount")
    elif kind == "pass":
        action.pass_turn.help = _boolean(data.get("help", False), "help")
    elif kind == "bid_or_redeal":
        action.bid_or_redeal.SetInParent()
    elif kind == "declare_trump":
        action.declare_trump.suit = _text(_field(data, "suit"), "suit")
    elif kind == "pass_cards":
        action.pass_cards.cards.extend(_texts(_field(data, "cards"), "cards"))
    elif kind == "discard":
        action.discard.cards.extend(_texts(_field(data, "cards"), "cards"))
    elif kind == "meld":
        action.meld.cards.extend(_texts(_field(data, "cards"), "cards"))
        action.meld.SetInParent()
        melds = data.get("melds")
        if melds is not None:
            action.meld.melds.SetInParent()
            if not isinstance(melds, list | tuple):
                raise ValueError(f"melds must be a list of {{name, cards}} objects, got {melds!r}")
            for i, entry in enumerate(melds):
                if not isinstance(entry, Mapping):
                    raise ValueError(f"melds[{i}] must be a {{name, cards}} object, got {entry!r}")
                name = _text(_field(entry, "name", f"melds[{i}]"), f"melds[{i}].name")
                cards = _texts(_field(entry, "cards", f"melds[{i}]"), f"melds[{i}].cards")
                action.meld.melds.items.add(name=name, cards=cards)
        if data.get("points") is not None:
            action.meld.points = _integer(data["points"], "points")
        if data.get("name") is not None:
            action.meld.name = _text(data["name"], "name")
    elif kind == "exchange_dix":
        action.exchange_dix.SetInParent()
    elif kind == "concede":
        action.concede.SetInParent()
    elif kind == "draw":
        action.draw.turn_up = _boolean(_field(data, "turn_up"), "turn_up")
    elif kind == "play":
        action.play.card = _text(_field(data, "card"), "card")
    else:
        raise ValueError(f"unknown action type {kind!r}")
    return action


def _field(data: Mapping[str, object], key: str, owner: str = "") -> object:
    """A required field of an action (or of ``owner``, a ``melds`` entry). Missing or null it
    is refused naming it, as the engine refuses it (MALFORMED_ACTION): it was a bare KeyError,
    and a missing ``cards`` was sent as no cards, a meld of nothing (accepted)."""
    value = data.get(key)
    if value is None:
        raise ValueError(f"{owner or data.get('type')} needs the field {key!r}")
    return value


def _text(value: object, field: str) -> str:
    """A card, a suit or a name: a str. Anything else was sent as its ``str()`` ("None",
    "5"), another value than the one given, refused by the server as a card nobody named."""
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string, got {value!r}")
    return value


def _texts(value: object, field: str) -> list[str]:
    """A list of cards, each a str. A str was sent as its letters (``"AS"`` as "A" and "S")
    and a mapping as its keys, another action than the one given."""
    if not isinstance(value, list | tuple):
        raise ValueError(f"{field} must be a list of cards, got {value!r}")
    return [_text(card, f"{field}[{i}]") for i, card in enumerate(value)]


def _integer(value: object, field: str) -> int:
    """An action's integer field: an int, or a float that is one (as a Struct number is).
    Anything else is refused here, as the engine refuses it in the action's JSON form: it was
    made an int (``int(250.5)``, a bid of 250), which sent another action than the one given."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{field} must be an integer, got {value!r}")
    return value


def _boolean(value: object, field: str) -> bool:
    """An action's true-or-false field (None: false); anything else is refused, as by the
    engine. It was made a bool by truth value: ``"false"`` was true."""
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ValueError(f"{field} must be true or false, got {value!r}")
    return value


def add_event(response: pb.SubmitActionResponse, event: Event, seq: int, version: int) -> None:
    """Add ``event``, numbered ``seq`` at ``version``, to ``response``'s events: the message
    ``stored_event_to_proto`` makes of its stored form.

    Hot path (every accepted action): from the engine's event, whose data is what
    ``stored_event_to_proto`` filters back out of the stored form (event data never holds the
    keys ``kind``, ``audience``, ``seq`` or ``version``), and added in place: an ``Event``
    message built apart is copied again into the response (about 5,000 instructions more)."""
    response.events.add(
        seq=seq,
        version=version,
        kind=event.kind,
        audience=str(event.audience),
        data_json=json_text(event.data),
    )


def stored_event_to_proto(stored: Mapping[str, object]) -> pb.Event:
    """An event as the store keeps it: ``Event.to_json()`` plus ``seq`` and ``version``."""
    data = {k: v for k, v in stored.items() if k not in ("kind", "audience", "seq", "version")}
    seq = stored["seq"]
    version = stored["version"]
    assert isinstance(seq, int) and isinstance(version, int)
    return pb.Event(
        seq=seq,
        version=version,
        kind=str(stored["kind"]),
        audience=str(stored["audience"]),
        data_json=json_text(data),
    )


def structs(items: Sequence[Mapping[str, object]]) -> list[struct_pb2.Struct]:
    return [dict_to_struct(item) for item in items]
