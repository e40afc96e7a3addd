"""Review of the gRPC service's outer surface, probed as a user of a game server would: the
flags of ``serve`` as a real process, TLS, limits, error codes, reflection and health.

Each test here pins a defect this review found (its docstring says what was wrong) or a
behaviour the README promises that no other test reached end to end.
"""

from __future__ import annotations

import asyncio
import socket
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2
from pinochle_client import RefereeError

from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee.service.server import (
    SERVICE_NAMES,
    bare_host,
    connection_age_options,
    host_port,
    keepalive_options,
)
from referee.store.base import StoreError
from tests.service_helpers import bearer, free_port, health_stub, new_table, serving
from tests.test_service_crash import running


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


needs_ipv6 = pytest.mark.skipif(not _ipv6_loopback(), reason="this machine has no IPv6 loopback")


def test_an_ipv6_host_is_written_in_brackets_for_grpc_and_bare_for_metrics() -> None:
    assert host_port("::", 50051) == "[::]:50051"
    assert host_port("[::1]", 0) == "[::1]:0"
    assert host_port("127.0.0.1", 9464) == "127.0.0.1:9464"
    assert host_port("localhost", 1) == "localhost:1"
    assert [bare_host(h) for h in ("[::1]", "::", "0.0.0.0")] == ["::1", "::", "0.0.0.0"]


@needs_ipv6
@pytest.mark.parametrize("host", ["::1", "[::1]", "::"])
async def test_serve_listens_on_an_ipv6_host_with_its_metrics(tmp_path: Path, host: str) -> None:
    """Was: ``--host ::`` (every interface, as an IPv6 or dual-stack cluster needs) or ``::1``
    stopped ``serve`` with ``start_failed``: the gRPC address was built as ``host:port``, which
    gRPC read as ``:::50051`` (no address) or ``::1:0`` (an IPv6 address, port 443), and
    ``[::1]`` failed the metrics server instead, which takes the address bare. Now either
    spelling serves gRPC and metrics, and the ``serving`` line names ``[host]:port``."""
    port, metrics_port = free_port(), free_port()
    log = tmp_path / "server.log"
    extra = ("--host", host, "--metrics-port", str(metrics_port))
    with running(tmp_path / "referee.db", port, log, *extra) as server:
        server.address = f"[::1]:{port}"
        await server.wait_serving()
        async with grpc.aio.insecure_channel(server.address) as channel:
            status = await health_stub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert status.status == health_pb2.HealthCheckResponse.SERVING
            created = await channel.unary_unary(
                "/pinochle.referee.v1.RefereeService/CreateGame",
                request_serializer=pb.CreateGameRequest.SerializeToString,
                response_deserializer=pb.CreateGameResponse.FromString,
            )(pb.CreateGameRequest(variant="partnership", seed="ipv6"), timeout=5)
            assert created.game_id
        with urllib.request.urlopen(f"http://[::1]:{metrics_port}/metrics", timeout=5) as page:
            assert b"grpc_server_handled_total" in page.read()
        assert f'"address":"[{bare_host(host)}]:{port}"' in log.read_text()


@pytest.mark.parametrize(
    "flags",
    [
        {"max_pending_calls": 3_000_000_000},
        {"keepalive_seconds": 30 * 86_400.0},
        {"max_connection_age_seconds": 30 * 86_400.0},
    ],
    ids=["max-pending-calls", "keepalive-seconds", "max-connection-age-seconds"],
)
async def test_a_flag_beyond_grpcs_c_int_serves(tmp_path: Path, flags: dict[str, float]) -> None:
    """Was: ``--max-pending-calls`` past 2**31 - 1, or ``--keepalive-seconds`` or
    ``--max-connection-age-seconds`` of 30 days (gRPC takes them in milliseconds, a C int:
    about 24.8 days at most) stopped ``serve`` with an OverflowError traceback, as
    ``--max-message-bytes`` of 128 MiB once did. gRPC's options now stop at the largest it
    takes."""
    async with serving(tmp_path, **flags) as srv:
        table = await new_table(srv.client, "partnership", seed="long")
        assert (await table.seats[1].submit({"type": "pass"}))["version"] == 1


def test_time_options_stop_at_the_largest_c_int() -> None:
    options = dict(keepalive_options(1e12, 10.0)) | dict(connection_age_options(1e12))
    assert options["grpc.keepalive_time_ms"] == 2**31 - 1
    assert options["grpc.max_connection_age_ms"] == 2**31 - 1
    assert options["grpc.keepalive_timeout_ms"] == 20_000
    assert options["grpc.max_connection_age_grace_ms"] == 30_000


SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def test_a_health_watcher_hears_readiness_after_another_watcher_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: grpc_health's asyncio Watch deleted, as one watcher of a service left, the
    condition every other watcher of that service waited on; they never heard of a change
    again, so a watcher of RefereeService (a balancer, a dashboard) went on seeing SERVING
    while the store could not be read. Now each watcher hears every change."""
    async with serving(tmp_path, store_check_seconds=0.05) as srv:
        stub = health_stub(srv.client.channel)
        request = health_pb2.HealthCheckRequest(service=SERVICE_NAMES[0])
        leaving, staying = stub.Watch(request), stub.Watch(request)
        assert (await leaving.read()).status == (await staying.read()).status == SERVING
        leaving.cancel()
        # Another watch opened and closed once the first has left (its stream gone).
        again = stub.Watch(request)
        assert (await again.read()).status == SERVING
        again.cancel()

        async def unreachable() -> None:
            raise StoreError("read failed: connection refused")

        monkeypatch.setattr(srv.running.store, "ping", unreachable)
        assert (await asyncio.wait_for(staying.read(), 30)).status == NOT_SERVING
        monkeypatch.undo()
        assert (await asyncio.wait_for(staying.read(), 30)).status == SERVING
        staying.cancel()


async def test_health_watches_end_as_the_shutdown_begins(tmp_path: Path) -> None:
    """Was: a health Watch stream (gRPC's client-side health checking keeps one on every
    connection) followed the server until gRPC cut it, so a graceful shutdown waited out its
    whole grace period for it and then ended it with a bare "Cancelling all calls", as
    WatchGame streams once did. Now each stream sends NOT_SERVING and ends, and the shutdown
    waits only for the calls in flight (none here, with an hour's grace)."""
    async with serving(tmp_path) as srv:
        stub = health_stub(srv.client.channel)
        watches = [
            stub.Watch(health_pb2.HealthCheckRequest(service=name))
            for name in ("", *SERVICE_NAMES, "no.such.Service")
        ]
        first = [(await watch.read()).status for watch in watches]
        assert first == [SERVING, SERVING, SERVING, health_pb2.HealthCheckResponse.SERVICE_UNKNOWN]
        stopping = asyncio.ensure_future(srv.running.stop(3600))
        for watch in watches[:3]:
            assert (await asyncio.wait_for(watch.read(), 30)).status == NOT_SERVING
        for watch in watches:
            assert await asyncio.wait_for(watch.read(), 30) is grpc.aio.EOF
            assert await watch.code() == grpc.StatusCode.OK
        await asyncio.wait_for(stopping, 30)


async def test_the_audit_log_pages_within_a_small_response_limit(tmp_path: Path) -> None:
    """Was: a page of GetAuditLog stopped before 2 MiB whatever the server's response limit
    (16 times ``--max-message-bytes``), so with a limit under 128 KiB each page of a long log
    failed RESOURCE_EXHAUSTED ("Sent message larger than max") and the log could not be read.
    A page now stops before that limit too, and paging on reads the whole log."""
    limit = 1024  # requests; responses up to 16 KiB
    async with serving(tmp_path, max_message_bytes=limit) as srv:
        table = await new_table(srv.client, "partnership", seed="small-pages")
        for _ in range(80):  # each refusal's entry quotes its fifty cards
            with pytest.raises(RefereeError):
                await table.seats[1].submit({"type": "discard", "cards": ["KH"] * 50})
        pages: list[list[int]] = []
        after = 0
        while True:
            request = pb.GetAuditLogRequest(game_id=table.game_id, after_seq=after)
            page = await srv.referee.GetAuditLog(request, metadata=bearer(table.adjudicator_token))
            if not page.entries:
                break
            assert page.ByteSize() <= 16 * limit
            pages.append([entry.seq for entry in page.entries])
            after = page.entries[-1].seq
        assert len(pages) > 1
        assert [seq for page_seqs in pages for seq in page_seqs] == list(range(1, 81))
