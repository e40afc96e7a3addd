"""Review of the gRPC service's outer surface, probed as a user of a game server would: the
flags of ``serve`` as a real process, TLS, limits, error codes, reflection and health.

Each test here pins a defect this review found (its docstring says what was wrong) or a
behaviour the README promises that no other test reached end to end.
"""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2

from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee.service.server import bare_host, host_port
from tests.service_helpers import free_port, health_stub
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
