"""Review of the Python client (clients/python/pinochle_client) against a real in-process
server: each test here failed before the fix that came with it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from pinochle_client import RefereeClient

from tests.service_helpers import new_table, serving


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
