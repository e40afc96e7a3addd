"""Review of the Python client (clients/python/pinochle_client) against a real in-process
server, or a stand-in where a real one would need a game of hundreds of hands: each test here
failed before the fix that came with it."""

from __future__ import annotations

import asyncio
import copy
import json
import pickle
import random
import shutil
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from pinochle_client import RefereeClient, RefereeError

from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee.service.convert import dict_to_struct
from tests.service_helpers import SilentNetwork, new_table, pick, play, serving


async def test_keepalive_seconds_0_means_no_pings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: ``keepalive_seconds=0`` (no pings in the Node client, as 0 means none for
    ``deadline_seconds`` and ``max_reconnect_backoff_seconds``) set a ping every 0 ms with a
    0 ms timeout: every connection was dropped at once ("ping timeout"), so every call and
    watch failed UNAVAILABLE."""
    seen: list[list[tuple[str, object]]] = []
    real = grpc.aio.insecure_channel

    def channel(target: str, options: list[tuple[str, object]]) -> grpc.aio.Channel:
        seen.append(options)
        return real(target, options)

    monkeypatch.setattr(grpc.aio, "insecure_channel", channel)
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="keepalive-0")
        async with RefereeClient(srv.address, keepalive_seconds=0) as quiet:
            assert not [name for name, _ in seen[-1] if "keepalive" in name or "ping" in name]
            assert await quiet.list_variants()
            stream = quiet.session(table.game_id, table.spectator_token).watch(0)
            try:
                assert "event" in await asyncio.wait_for(anext(stream), 10)
                await table.seats[1].submit({"type": "pass"}, expected_version=0)
                async with asyncio.timeout(10):
                    async for item in stream:
                        if "event" in item and item["event"]["version"] == 1:
                            break
            finally:
                await stream.aclose()


async def test_an_action_is_sent_as_given_or_not_at_all(tmp_path: Path) -> None:
    """Was: the client made an action's numbers ints and its flags bools by force, so it sent
    another action than the one given: a bid of 250.5 became a bid of 250 (accepted), "250" a
    bid of 250, ``True`` a bid of 1, ``"help": "false"`` a pass with help; its cards strs
    likewise (``"cards": {"9S": 1, ...}`` a discard of the keys). The engine refuses
    each of them in the action's JSON form (MALFORMED_ACTION); the client cannot send them
    (the fields are int32 and bool), so it refuses them before sending, and sends nothing."""
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="coerced")
        seat = table.seats[1]
        for action, field in (
            ({"type": "bid", "amount": 250.5}, "amount"),
            ({"type": "bid", "amount": "250"}, "amount"),
            ({"type": "bid", "amount": True}, "amount"),
            ({"type": "pass", "help": "false"}, "help"),
            ({"type": "meld", "cards": [], "points": 20.5}, "points"),
            ({"type": "draw", "turn_up": "false"}, "turn_up"),
            # A card, suit or name that is not a str was sent as its str() ("5", "None"), a
            # str of cards as its letters, a mapping as its keys (a discard of them), and a
            # missing field was a KeyError, or for cards a meld of nothing.
            ({"type": "play", "card": 5}, "card"),
            ({"type": "play"}, "card"),
            ({"type": "declare_trump", "suit": None}, "suit"),
            ({"type": "pass_cards", "cards": "AS"}, "cards"),
            ({"type": "discard", "cards": {"9S": 1, "9D": 1, "9C": 1}}, "cards"),
            ({"type": "discard", "cards": ["9S", None]}, r"cards\[1\]"),
            ({"type": "meld"}, "cards"),
            ({"type": "meld", "cards": [], "name": 5}, "name"),
            ({"type": "meld", "cards": [], "melds": [{"name": "run"}]}, "cards"),
            ({"type": "meld", "cards": [], "melds": ["run"]}, r"melds\[0\]"),
            ({"type": "draw"}, "turn_up"),
            # A field the type does not take was dropped: a plain bid went out (12-03).
            ({"type": "bid", "amount": 250, "extra": 1}, "bid takes no field 'extra'"),
            ({"type": "play", "card": "AS", "seat": 1}, "play takes no field 'seat'"),
            ({"type": "concede", "help": True}, "concede takes no field 'help'"),
        ):
            with pytest.raises(ValueError, match=field):
                await seat.submit(action)
        assert (await table.adj.view())["version"] == 0
        assert await table.adj.audit_log() == []
        # What means the same as an int still goes (a Struct's numbers are doubles).
        result = await seat.submit({"type": "bid", "amount": 250.0})
        assert result["events"][0]["amount"] == 250


async def test_audit_log_actions_read_like_every_other_struct(tmp_path: Path) -> None:
    """Was: ``audit_log`` gave each entry's action (a Struct) as protobuf's JSON mapping made
    it: numbers as floats (a bid of 250.0) and keys in the map's order, which changes from run
    to run, where every other Struct the client reads (legal actions, records, verdicts) has
    its integral numbers as ints, ``type`` first and the other keys sorted (as in the README
    and the Node client)."""
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="audit-actions")
        await table.seats[1].submit({"type": "bid", "amount": 250})
        meld = {"type": "meld", "name": "x", "points": 20, "cards": ["AS"]}
        with pytest.raises(RefereeError):
            await table.seats[2].submit(meld)
        bid, refused_meld = (entry["action"] for entry in await table.adj.audit_log())
        assert bid == {"type": "bid", "amount": 250} and type(bid["amount"]) is int
        assert list(refused_meld) == ["type", "cards", "name", "points"]
        assert type(refused_meld["points"]) is int


async def test_audit_log_pages_on_from_the_seq_it_gives(tmp_path: Path) -> None:
    """Was: ``audit_log`` says the next page starts after the last entry's ``seq``, but an
    entry's ``seq`` is text (protobuf's JSON mapping of an int64), and passing it back as
    ``after_seq`` raised TypeError. A ``seq`` is an int now; text is still taken."""
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="audit-pages")
        for seat in (2, 3, 2):  # not their turn: three refusals
            with pytest.raises(RefereeError):
                await table.seats[seat].submit({"type": "pass"})
        pages = [await table.adj.audit_log(page_size=2)]
        while pages[-1]:
            pages.append(await table.adj.audit_log(after_seq=pages[-1][-1]["seq"], page_size=2))
        assert [[e["seat"] for e in page] for page in pages] == [[2, 3], [2], []]
        assert [e["seq"] for e in await table.adj.audit_log(after_seq="2")] == [3]


AUDIT_ENTRY_FIELDS = [
    *("seq", "time", "role", "seat", "rpc", "action", "outcome", "code", "request_id"),
    *("version", "previous_hash", "hash", "hashed_content"),
]
# The Node client's shape for each (proto-loader: longs Number, enums String, defaults).
AUDIT_ENTRY_TYPES = {
    **dict.fromkeys(("seq", "seat", "version"), int),
    **dict.fromkeys(("role", "rpc", "outcome", "code", "request_id"), str),
    **dict.fromkeys(("previous_hash", "hash", "hashed_content"), str),
    "time": dict,
    "action": dict,
}


def _no_integral_floats(value: object) -> bool:
    """Whether no number in a JSON value is a float that is integral (48.0 where 48 is meant)."""
    if isinstance(value, float):
        return not value.is_integer()
    if isinstance(value, dict):
        return all(_no_integral_floats(v) for v in value.values())
    if isinstance(value, list):
        return all(_no_integral_floats(v) for v in value)
    return True


async def test_audit_log_entries_are_plain_data_with_every_field(tmp_path: Path) -> None:
    """Was: ``audit_log`` gave protobuf's JSON mapping (``MessageToDict``): ``seq`` and
    ``version`` as text ("1"), ``time`` as RFC 3339 text, and the fields at their default left
    out (an accepted entry's ``code``, a request with no valid token's ``role`` and ``seat``,
    the hashes a spectator or seat may not see), where the Node client's ``auditLog()`` gives
    numbers as numbers and every field. Now the same shape as Node's, keys in snake_case."""
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="audit-shape")
        before = int(time.time())
        await table.seats[1].submit({"type": "bid", "amount": 250}, request_id="bid-1")
        with pytest.raises(RefereeError):  # NOT_YOUR_TURN
            await table.seats[3].submit({"type": "pass"}, expected_version=1, request_id="pass-3")
        stranger = srv.client.seat(table.game_id, "not-a-token")
        with pytest.raises(RefereeError):  # UNAUTHENTICATED
            await stranger.submit({"type": "pass"}, expected_version=1, request_id="who")
        after = int(time.time()) + 1

        full = await table.adj.audit_log()
        assert [f.name for f in pb.AuditEntry.DESCRIPTOR.fields] == AUDIT_ENTRY_FIELDS
        for entry in full:
            assert list(entry) == AUDIT_ENTRY_FIELDS
            assert {k: type(v) for k, v in entry.items()} == AUDIT_ENTRY_TYPES, entry
            assert list(entry["time"]) == ["seconds", "nanos"]
            assert before <= entry["time"]["seconds"] <= after
            assert 0 <= entry["time"]["nanos"] < 10**9 and type(entry["time"]["nanos"]) is int
            assert len(entry["hash"]) == 64
        hidden = ("time", "hash", "hashed_content")
        shown = [{k: e[k] for k in AUDIT_ENTRY_FIELDS if k not in hidden} for e in full]
        assert shown == [
            {
                "seq": 1,
                "role": "ROLE_SEAT",
                "seat": 1,
                "rpc": "SubmitAction",
                "action": {"type": "bid", "amount": 250},
                "outcome": "AUDIT_OUTCOME_ACCEPTED",
                "code": "",
                "request_id": "bid-1",
                "version": 1,
                "previous_hash": "0" * 64,
            },
            {
                "seq": 2,
                "role": "ROLE_SEAT",
                "seat": 3,
                "rpc": "SubmitAction",
                "action": {"type": "pass"},
                "outcome": "AUDIT_OUTCOME_REFUSED",
                "code": "NOT_YOUR_TURN",
                "request_id": "pass-3",
                "version": 1,
                "previous_hash": full[0]["hash"],
            },
            {
                "seq": 3,
                "role": "ROLE_UNSPECIFIED",
                "seat": 0,
                "rpc": "SubmitAction",
                "action": {"type": "pass"},
                "outcome": "AUDIT_OUTCOME_REFUSED",
                "code": "UNAUTHENTICATED",
                "request_id": "who",
                "version": 1,
                "previous_hash": full[1]["hash"],
            },
        ]
        # What another role may not see is "" (and still there), never left out.
        for session in (table.spec, table.seats[1]):
            seen = await session.audit_log()
            for entry, whole in zip(seen, full, strict=True):
                assert list(entry) == AUDIT_ENTRY_FIELDS
                assert {k: type(v) for k, v in entry.items()} == AUDIT_ENTRY_TYPES, entry
                assert entry["hash"] == entry["previous_hash"] == ""
                same = ("seq", "time", "role", "seat", "outcome", "request_id", "version")
                assert {k: entry[k] for k in same} == {k: whole[k] for k in same}
            assert [e["code"] for e in seen] == ["", "", ""]


VARIANT_FIELDS = ["id", "description", "players", "partnerships", "options"]
OPTION_FIELDS = ["name", "type", "allowed", "default_value", "meaning"]


async def test_list_variants_are_plain_data_with_every_field(tmp_path: Path) -> None:
    """Was: ``list_variants`` gave protobuf's JSON mapping: every number in ``allowed`` and
    ``default_value`` a float (a deck of 48.0, a target's bounds 1.0 and 2147483647.0) and
    ``partnerships`` left out when False, where the Node client's ``listVariants()`` gives
    numbers as numbers and every field. Now the same shape as Node's, keys in snake_case."""
    async with serving(tmp_path) as srv:
        variants = await srv.client.list_variants()
    assert [f.name for f in pb.Variant.DESCRIPTOR.fields] == VARIANT_FIELDS
    assert [f.name for f in pb.OptionSpec.DESCRIPTOR.fields] == OPTION_FIELDS
    for variant in variants:
        assert list(variant) == VARIANT_FIELDS
        assert [type(variant[k]) for k in VARIANT_FIELDS] == [str, str, int, bool, list]
        for option in variant["options"]:
            assert list(option) == OPTION_FIELDS
            assert [type(option[k]) for k in ("name", "type", "meaning")] == [str, str, str]
            assert _no_integral_floats(option["allowed"]), option
            assert _no_integral_floats(option["default_value"]), option
    by_id = {v["id"]: v for v in variants}
    assert by_id["two-handed"]["partnerships"] is False
    assert (by_id["two-handed"]["players"], by_id["partnership"]["partnerships"]) == (2, True)
    options = {o["name"]: o for o in by_id["cutthroat"]["options"]}
    deck = options["deck"]
    assert (deck["allowed"], deck["default_value"]) == ([48], 48)
    assert type(deck["default_value"]) is int and type(deck["allowed"][0]) is int
    raise_ = options["max_raise"]  # null as None; an object's keys sorted
    assert raise_["allowed"] == {"max": 2**31 - 1, "min": 1, "nullable": True}
    assert list(raise_["allowed"]) == ["max", "min", "nullable"]
    assert raise_["default_value"] is None
    assert type(options["target"]["default_value"]) is int


NODE_CLIENT = Path(__file__).resolve().parents[1] / "clients" / "node" / "dist" / "src" / "index.js"
# Prints what the Node client's listVariants() and auditLog() give (adjudicator, spectator and
# a seat), as JSON: argv is the client's module, the address, the game id and the tokens.
NODE_SHAPES = """
const [module, address, gameId, ...tokens] = process.argv.slice(1);
const { RefereeClient } = require(module);
(async () => {
  const client = new RefereeClient(address);
  try {
    const logs = [];
    for (const token of tokens) logs.push(await client.session(gameId, token).auditLog());
    process.stdout.write(JSON.stringify({ variants: await client.listVariants(), logs }));
  } finally {
    client.close();
  }
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
"""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _as_node_names(variants: list[dict[str, Any]], logs: list[list[dict[str, Any]]]) -> object:
    """The Python results with the .proto fields' keys as Node names them (camelCase); the
    JSON values inside (an option's ``allowed``, an entry's ``action``) keep theirs."""
    return {
        "variants": [
            {
                **{_camel(k): v for k, v in variant.items()},
                "options": [{_camel(k): v for k, v in o.items()} for o in variant["options"]],
            }
            for variant in variants
        ],
        "logs": [[{_camel(k): v for k, v in entry.items()} for entry in log] for log in logs],
    }


@pytest.mark.skipif(
    shutil.which("node") is None or not NODE_CLIENT.exists(),
    reason="no node, or the Node client is not built (make node-test; npm run build)",
)
async def test_python_and_node_clients_give_the_same_shapes(tmp_path: Path) -> None:
    """``list_variants()`` and ``audit_log()`` against the Node client's ``listVariants()`` and
    ``auditLog()`` on the same server and game: equal as JSON text (so 48 is not 48.0, and no
    field is missing on either side), once the Python keys are camelCased."""
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="both-clients")
        await table.seats[1].submit({"type": "bid", "amount": 250})
        with pytest.raises(RefereeError):  # NOT_YOUR_TURN
            await table.seats[3].submit({"type": "pass"}, expected_version=1)
        with pytest.raises(RefereeError):  # UNAUTHENTICATED
            await srv.client.seat(table.game_id, "nobody").submit({"type": "pass"})
        tokens = [table.adjudicator_token, table.spectator_token, table.seat_tokens[3]]
        sessions = [srv.client.session(table.game_id, token) for token in tokens]
        python = _as_node_names(
            await srv.client.list_variants(), [await s.audit_log() for s in sessions]
        )
        node = await _run_node(NODE_SHAPES, srv.address, table.game_id, *tokens)
    assert json.dumps(python, sort_keys=True) == json.dumps(node, sort_keys=True)


async def _run_node(script: str, *args: str) -> Any:
    """What ``script`` prints as JSON, run by node with the Node client's module and ``args``
    as its arguments."""
    node = await asyncio.create_subprocess_exec(
        *("node", "-e", script, str(NODE_CLIENT), *args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(node.communicate(), 60)
    assert node.returncode == 0, err.decode()
    return json.loads(out)


# Prints the Node client's watch() items of a finished game from each version given, and its
# auditRecords() items without and with keepGoing, as JSON: argv is the client's module, the
# address, the game id, a token, the records (as one JSON array) and the versions.
NODE_STREAMS = """
const [module, address, gameId, token, records, ...versions] = process.argv.slice(1);
const { RefereeClient } = require(module);
(async () => {
  const client = new RefereeClient(address);
  try {
    const watched = {};
    for (const version of versions) {
      const items = [];
      const stream = client.session(gameId, token).watch(Number(version), 0, { deadlineMs: 30000 });
      for await (const item of stream) items.push(item);
      watched[version] = items;
    }
    const audits = [];
    for (const keepGoing of [false, true]) {
      const items = [];
      for await (const item of client.auditRecords(JSON.parse(records), { keepGoing })) {
        items.push(item);
      }
      audits.push(items);
    }
    process.stdout.write(JSON.stringify({ watched, audits }));
  } finally {
    client.close();
  }
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
"""


@pytest.mark.skipif(
    shutil.which("node") is None or not NODE_CLIENT.exists(),
    reason="no node, or the Node client is not built (make node-test; npm run build)",
)
async def test_python_and_node_clients_stream_the_same_items(tmp_path: Path) -> None:
    """``watch()`` and ``audit_records()`` against the Node client's ``watch()`` and
    ``auditRecords()`` on the same server and game: the same items, equal as JSON text. Was:
    Python's watch items had no ``type`` (``{"event": ...}`` where Node gives ``{type:
    "event", event}``), and ``audit_records()`` gave the bare verdict where Node gives
    ``{index, verdict}``, so a user of both clients branched differently on each."""
    async with serving(tmp_path, watch_window=64, events_in_memory=16) as srv:
        table = await new_table(srv.client, "partnership-no-bid", {"target": 100}, seed="streams")
        await play(table, random.Random(7))
        last = (await table.adj.view())["version"]
        seat = table.seats[2]
        # A finished game's stream ends by itself: from version 0 it is a snapshot (events that
        # old are no longer kept), from the last version but one that version's events.
        versions = [0, last - 1]
        watched = {str(v): [item async for item in seat.watch(v)] for v in versions}
        assert [item["type"] for item in watched["0"]] == ["snapshot"]
        assert {item["type"] for item in watched[str(last - 1)]} == {"event"}
        record = await table.adj.export()
        hand = record["hands"][0]
        play_ = next(a for a in hand["actions"] if a["type"] == "play")
        dealt = hand["deal"]["hands"][play_["seat"]]
        play_["card"] = next(c for cards in hand["deal"]["hands"] for c in cards if c not in dealt)
        # Legal, a card the player was not dealt (a violation; with keep_going a list), no JSON.
        records = [json.dumps(await table.adj.export()), json.dumps(record), "{not json"]
        audits = [
            [item async for item in srv.client.audit_records(records, keep_going)]
            for keep_going in (False, True)
        ]
        node = await _run_node(
            NODE_STREAMS,
            *(srv.address, table.game_id, table.seat_tokens[2], json.dumps(records)),
            *map(str, versions),
        )
    assert [[item["index"] for item in items] for items in audits] == [[0, 1, 2]] * 2
    python = {"watched": watched, "audits": audits}
    assert json.dumps(python, sort_keys=True) == json.dumps(node, sort_keys=True)


async def test_a_token_read_from_a_file_with_its_newline_works(tmp_path: Path) -> None:
    """Was: a token with a newline at its end (read from a file: the server reads its own
    ``--creator-token-file`` stripped, and takes the header's token stripped) could not travel
    as a header: every unary call raised gRPC's internal ``ExecuteBatchError`` (neither a
    RefereeError nor a grpc.RpcError) and a watch failed INTERNAL with no message. The client
    sends the token without the blanks around it; one that still cannot travel (a line break
    inside, a non-ASCII character) is refused with a ValueError saying so."""
    creator = "creator-credential-for-this-test"
    async with serving(tmp_path, creator_token=creator) as srv:
        game = await srv.client.create_game(
            "partnership", seed="newline", creator_token=creator + "\n"
        )
        seat = srv.client.seat(game.game_id, game.seat_tokens[1] + "\r\n")
        assert (await seat.view())["version"] == 0
        assert (await seat.submit({"type": "pass"}))["version"] == 1
        spectator = srv.client.session(game.game_id, f" {game.spectator_token}\n")
        stream = spectator.watch(0)
        try:
            assert "event" in await asyncio.wait_for(anext(stream), 10)
        finally:
            await stream.aclose()
        for bad in (game.seat_tokens[1][:8] + "\n" + game.seat_tokens[1][8:], "tökén"):
            with pytest.raises(ValueError, match="token"):
                await srv.client.seat(game.game_id, bad).view()
            with pytest.raises(ValueError, match="token"):
                await srv.client.create_game("partnership", creator_token=bad)


async def test_close_ends_open_calls_with_referee_error_cancelled(tmp_path: Path) -> None:
    """Was: ``close()`` made a call still open raise ``asyncio.CancelledError`` in its
    caller's task, though nobody had cancelled it (the task then reported itself cancelled,
    and a TaskGroup dropped it silently), and a call after ``close()`` raised gRPC's
    UsageError: neither a RefereeError. Now both are RefereeError ``CANCELLED`` (as in the Node
    client); a cancellation of the caller's own task still goes through as such."""
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="closing")
        async with SilentNetwork(srv.running.port) as network:
            client = RefereeClient(
                f"127.0.0.1:{network.port}", keepalive_seconds=None, deadline_seconds=None
            )
            seat = client.seat(table.game_id, table.seat_tokens[1])
            await table.seats[1].submit({"type": "bid", "amount": 250})
            await seat.view()  # connected through the relay
            watch = seat.watch(1)  # nothing after version 1 yet: it waits
            waiting = asyncio.ensure_future(anext(watch))
            await asyncio.sleep(0.2)  # the stream is open
            network.cut()
            hanging = asyncio.ensure_future(seat.view())  # no answer will come
            mine = asyncio.ensure_future(seat.view())
            await asyncio.sleep(0.2)
            mine.cancel()  # the caller cancels its own call
            with pytest.raises(asyncio.CancelledError):
                await mine
            await client.close()
            for task in (hanging, waiting):
                with pytest.raises(RefereeError) as closed:
                    await asyncio.wait_for(task, 20)
                assert closed.value.code == grpc.StatusCode.CANCELLED
                assert not task.cancelled()
            with pytest.raises(RefereeError) as after:
                await seat.view()
            assert after.value.code == grpc.StatusCode.CANCELLED
            assert "closed" in after.value.message


async def test_create_game_refuses_arguments_it_would_misread() -> None:
    """Was: a seed with given deals sent the seed and dropped the deals unseen, and a string
    of players named one seat per character ("Al": "A" and "l")."""
    async with RefereeClient("127.0.0.1:1") as client:
        with pytest.raises(ValueError, match="not both"):
            await client.create_game("partnership", seed="s", given_deals=[{}])
        with pytest.raises(TypeError, match="list of names"):
            await client.create_game("partnership", players="Al")


async def test_a_response_up_to_the_servers_largest_is_received() -> None:
    """Was: the client kept gRPC's receive limit of 4 MiB, and the server sends responses up to
    16 times its ``--max-message-bytes`` (16 MiB by default): the ExportGame record of a long
    game failed RESOURCE_EXHAUSTED in the client though the server had sent it. A stand-in
    server answers ExportGame with a record of about 6 MiB."""
    record = {"format": "pinochle-record/1", "hands": ["x" * 1000] * 6000}
    answer = pb.ExportGameResponse(record=dict_to_struct(record))
    assert 4 << 20 < answer.ByteSize() < 16 << 20

    async def export(request: pb.ExportGameRequest, context: Any) -> pb.ExportGameResponse:
        return answer

    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "pinochle.referee.v1.RefereeService",
                {
                    "ExportGame": grpc.unary_unary_rpc_method_handler(
                        export,
                        request_deserializer=pb.ExportGameRequest.FromString,
                        response_serializer=pb.ExportGameResponse.SerializeToString,
                    )
                },
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with RefereeClient(f"127.0.0.1:{port}") as client:
            assert await client.session("g", "t").export() == record
        # The limit is the client's option; gRPC's own 4 MiB is what it was.
        async with RefereeClient(f"127.0.0.1:{port}", max_receive_message_bytes=4 << 20) as client:
            with pytest.raises(RefereeError) as refused:
                await client.session("g", "t").export()
            assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        await server.stop(None)


def test_a_referee_error_survives_pickling() -> None:
    """Was: ``pickle.loads`` of a RefereeError raised AttributeError (pickle rebuilds an
    exception as ``cls(*args)``, and RefereeError's one argument is the gRPC error, not its
    message), so the error could not cross a process boundary (multiprocessing,
    ``concurrent.futures.ProcessPoolExecutor``); ``copy.copy`` failed so too."""
    details = [
        error_details_pb2.ErrorInfo(
            reason="NOT_YOUR_TURN", domain="pinochle", metadata={"version": "7", "seat": "2"}
        ),
        error_details_pb2.BadRequest(
            field_violations=[error_details_pb2.BadRequest.FieldViolation(field="action.card")]
        ),
        error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=1, nanos=5 * 10**8)),
    ]
    packed = []
    for detail in details:
        item = any_pb2.Any()
        item.Pack(detail)
        packed.append(item)
    message = "seat 2 played out of turn"
    status = status_pb2.Status(code=code_pb2.FAILED_PRECONDITION, message=message, details=packed)
    error = RefereeError(
        grpc.aio.AioRpcError(
            grpc.StatusCode.FAILED_PRECONDITION,
            grpc.aio.Metadata(),
            grpc.aio.Metadata(("grpc-status-details-bin", status.SerializeToString())),
            details=message,
        )
    )
    fields = {
        "code": grpc.StatusCode.FAILED_PRECONDITION,
        "message": message,
        "reason": "NOT_YOUR_TURN",
        "metadata": {"version": "7", "seat": "2"},
        "fields": ["action.card"],
        "retry_delay": 1.5,
        "version": 7,
    }
    assert {name: getattr(error, name) for name in fields} == fields
    copies = [pickle.loads(pickle.dumps(error, p)) for p in range(pickle.HIGHEST_PROTOCOL + 1)]
    for twin in [*copies, copy.copy(error), copy.deepcopy(error)]:
        assert type(twin) is RefereeError
        assert {name: getattr(twin, name) for name in fields} == fields
        assert str(twin) == str(error) == f"FAILED_PRECONDITION NOT_YOUR_TURN: {message}"
        assert twin.args == error.args
        assert vars(twin) == vars(error)  # any field added later too


async def test_submit_gives_events_as_watch_does(tmp_path: Path) -> None:
    """``submit`` left each event's audience out where ``watch`` (and the Node client, in both)
    gave it, so a seat could not tell its own private events from public ones in an answer."""
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="events-alike")
        seat = table.seats[1]
        answer = await seat.submit(pick(await seat.legal_actions(), random.Random(2)))
        assert answer["events"] and all("audience" in event for event in answer["events"])
        watched: list[dict[str, Any]] = []
        async for item in seat.watch(0):
            watched.append(item["event"])
            if item["event"]["seq"] == answer["events"][-1]["seq"]:
                break
        assert answer["events"] == [e for e in watched if e["version"] == answer["version"]]
