"""The Python client takes what a caller gives it as the Node client does (clients/node, the
12-02 fixes to ``checkText``, ``int32``, ``sendableToken`` and ``closedError``): a call after
``close()`` is RefereeError CANCELLED, an integer field is an integer within its range, a
string is Unicode text, and a refusal names the field at fault. Each test here failed before
the fix that came with it."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from pinochle_client import RefereeClient, RefereeError

from tests.service_helpers import new_table, serving


async def test_a_watch_after_close_is_referee_error_cancelled(tmp_path: Path) -> None:
    """Was: ``watch()`` on a closed client (and a resumed watch opening again after
    ``close()``) raised gRPC's UsageError ("Channel is closed."), though every other call made
    after ``close()`` is RefereeError CANCELLED (README: "as it does any call made
    afterwards"): the stream was opened outside the code that turns errors into RefereeError."""
    async with serving(tmp_path) as srv:
        table = await new_table(srv.client, "partnership", seed="watch-closed")
        client = RefereeClient(srv.address)
        spectator = client.session(table.game_id, table.spectator_token)
        await spectator.view()
        await client.close()
        for resume in (False, True):
            with pytest.raises(RefereeError) as closed:
                async for _ in spectator.watch(resume=resume):
                    pass
            assert closed.value.code == grpc.StatusCode.CANCELLED
            assert "closed" in closed.value.message
