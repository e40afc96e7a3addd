"""Operations (issue 4): SIGINT shutdown, log formats, the metrics endpoint, the active-games
gauge, default settings, the adjudicator token file, and the secure shuffle behind real deals.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import math
import os
import random
import re
import secrets
import signal
import socket
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog
from google.protobuf import descriptor_pool
from grpc_health.v1 import health_pb2
from pinochle_client import RefereeClient, RefereeError
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

import referee.engine.game
from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee import cli
from referee.cli import build_parser
from referee.engine.game import secure_shuffle
from referee.service import servicers as servicers_module
from referee.service.observability import configure_logging, route_library_logs
from referee.service.server import SERVED_SERVICES, open_store
from referee.service.settings import ENV_PREFIX, Settings, settings_from
from referee.store.postgres import _one_line, secrets_of
from tests.service_helpers import (
    SHORT_GAME,
    Served,
    free_port,
    health_stub,
    new_table,
    play,
    refused,
    serving,
)
from tests.test_service_crash import running

# ----------------------------------------------------------------------------------------------
# Log formats

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _log_lines(log_format: str, capfd: pytest.CaptureFixture[str]) -> list[str]:
    capfd.readouterr()
    configure_logging(log_format)
    log = structlog.get_logger("referee.test")
    log.info("first_check", answer=42, game="g1")
    log.warning("second_check", seat=3)
    return [line for line in capfd.readouterr().err.splitlines() if line.strip()]


@pytest.mark.usefixtures("restored_logging")
def test_console_logs_are_readable_lines(capfd: pytest.CaptureFixture[str]) -> None:
    lines = [ANSI.sub("", line) for line in _log_lines("console", capfd)]
    assert len(lines) == 2, lines
    for line in lines:
        with pytest.raises(json.JSONDecodeError):
            json.loads(line)
    first, second = lines
    assert "first_check" in first and "answer=42" in first and "game=g1" in first
    assert "info" in first and re.match(r"\d{4}-\d\d-\d\dT", first)
    assert "second_check" in second and "seat=3" in second and "warn" in second


@pytest.mark.parametrize("log_format", ["json", "auto"])  # auto: stderr is not a terminal here
@pytest.mark.usefixtures("restored_logging")
def test_json_logs_are_one_object_per_line(
    log_format: str, capfd: pytest.CaptureFixture[str]
) -> None:
    lines = [json.loads(line) for line in _log_lines(log_format, capfd)]
    assert [(line["event"], line["level"]) for line in lines] == [
        ("first_check", "info"),
        ("second_check", "warning"),
    ]
    assert (lines[0]["answer"], lines[0]["game"], lines[1]["seat"]) == (42, "g1", 3)
    assert all(line["timestamp"].endswith("Z") for line in lines)


# ----------------------------------------------------------------------------------------------
# Metrics

SERVICE = "pinochle.referee.v1.RefereeService"
ISSUE_METRICS = (
    "grpc_server_handled_total",
    "grpc_server_handling_seconds",
    "referee_actions_total",
    "referee_violations_total",
    "referee_games_active",
    "referee_store_commit_seconds",
)


async def _scrape(url: str, timeout: float = 15.0) -> str:
    """The metrics page; the HTTP server starts just after the gRPC one reports SERVING."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            with await asyncio.to_thread(urllib.request.urlopen, url, timeout=5) as response:
                body: bytes = response.read()
                return body.decode()
        except OSError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.1)


async def test_the_metrics_endpoint_serves_the_issues_metrics(tmp_path: Path) -> None:
    metrics_port = free_port()
    log = tmp_path / "server.log"
    extra = ("--metrics-port", str(metrics_port))
    with running(tmp_path / "referee.db", free_port(), log, *extra) as server:
        await server.wait_serving()
        async with RefereeClient(server.address) as client:
            table = await new_table(client, "partnership", seed="scrape")
            await table.seats[1].submit({"type": "bid", "amount": 250})
            error = await refused(table.seats[3].submit({"type": "pass"}, expected_version=1))
            assert error.reason == "NOT_YOUR_TURN"
        text = await _scrape(f"http://127.0.0.1:{metrics_port}/metrics")
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    names = {name for name, _ in samples}
    for metric in ISSUE_METRICS:
        assert metric in names or f"{metric}_count" in names, f"{metric} missing"
    submit = (("grpc_method", "SubmitAction"), ("grpc_service", SERVICE), ("grpc_type", "unary"))
    assert samples["grpc_server_handled_total", (("grpc_code", "OK"), *submit)] == 1
    assert samples["grpc_server_handling_seconds_count", submit] == 2
    bid = (("action", "bid"), ("result", "accepted"), ("variant", "partnership"))
    assert samples["referee_actions_total", bid] == 1
    assert samples["referee_violations_total", (("code", "NOT_YOUR_TURN"),)] == 1
    assert samples["referee_games_active", ()] == 1
    assert samples["referee_store_commit_seconds_count", ()] == 1


def _games_active() -> float:
    value = REGISTRY.get_sample_value("referee_games_active")
    assert value is not None
    return value


async def test_games_active_drops_when_a_game_ends(tmp_path: Path) -> None:
    async with serving(tmp_path) as srv:
        before = _games_active()
        table = await new_table(srv.client, "two-handed", SHORT_GAME["two-handed"], seed="gauge")
        assert _games_active() == before + 1
        await play(table, random.Random(5))
        assert (await table.adj.view())["over"]
        assert _games_active() == before


# ----------------------------------------------------------------------------------------------
# Settings


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No PINOCHLE_REFEREE_* variables (the parser reads them as its defaults)."""
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    return monkeypatch


def _serve_settings(*flags: str) -> Settings:
    return settings_from(build_parser().parse_args(["serve", *flags]))


@pytest.fixture
def restored_root_logger() -> Iterator[None]:
    """Let a test replace the standard library's root handlers; put them back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def test_library_log_records_are_json_lines_too(
    capfd: pytest.CaptureFixture[str], restored_root_logger: None
) -> None:
    """psycopg, gRPC and asyncio log through the standard library: with serve's routing their
    warnings and errors are JSON lines like the server's own (they were bare text among them),
    exceptions included and without locals; their INFO stays out, as before."""
    del restored_root_logger
    capfd.readouterr()
    route_library_logs("json")
    library = logging.getLogger("psycopg")
    library.info("not shown")
    library.warning("error ignored terminating %r: %s", "pipeline", "pipeline aborted")
    try:
        raise RuntimeError("a library failure")
    except RuntimeError:
        logging.getLogger("asyncio").error("Task exception was never retrieved", exc_info=True)
    lines = [json.loads(line) for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert [(line["logger"], line["level"]) for line in lines] == [
        ("psycopg", "warning"),
        ("asyncio", "error"),
    ]
    assert lines[0]["event"] == "error ignored terminating 'pipeline': pipeline aborted"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", lines[0]["timestamp"])
    (raised,) = lines[1]["exception"]
    assert raised["exc_type"] == "RuntimeError" and raised["exc_value"] == "a library failure"
    assert all(frame.get("locals") is None for frame in raised["frames"])


@pytest.mark.usefixtures("restored_logging")
def test_console_tracebacks_show_no_locals(
    capfd: pytest.CaptureFixture[str], restored_root_logger: None
) -> None:
    """On a terminal, the server's own tracebacks and the libraries' are Python's text: no
    frame's locals (a request's frames hold bearer tokens and credentials; the libraries'
    default rendering showed them), and no rich panels (rendered on the event loop, they
    stalled the server for most of a second per failed request while its store failed)."""
    del restored_root_logger
    configure_logging("console")
    route_library_logs("console")
    capfd.readouterr()
    credential = "secret-token-" + "9" * 20
    for log in (
        lambda: structlog.get_logger("referee.rpc").exception("rpc_failed", rpc="SubmitAction"),
        lambda: logging.getLogger("psycopg").error("pipeline failed", exc_info=True),
    ):
        try:
            token = credential
            raise RuntimeError(f"failed with a token of {len(token)} characters")
        except RuntimeError:
            log()
    text = ANSI.sub("", capfd.readouterr().err)
    assert text.count("Traceback (most recent call last):") == 2, text
    assert text.count("RuntimeError: failed with a token of 33 characters") == 2, text
    assert credential not in text and "╭" not in text, text  # no locals, no rich panel


def test_serve_defaults_without_flags_or_environment(clean_env: pytest.MonkeyPatch) -> None:
    del clean_env
    settings = _serve_settings()
    assert (settings.host, settings.port, settings.db, settings.metrics_port) == (
        "127.0.0.1",
        50051,
        "./data/referee.db",
        9464,
    )
    assert settings.adjudicator_token == ""
    assert settings == Settings()


def test_every_command_and_flag_says_what_it_is_for() -> None:
    """``--help`` is the first thing an operator reads: no flag or argument goes unexplained."""
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert parser.description is not None and "serve" in parser.description
    for name, command in commands.choices.items():
        unexplained = [
            action.dest
            for action in command._actions
            if not isinstance(action, argparse._HelpAction) and not action.help
        ]
        assert unexplained == [], f"{name}: {unexplained}"


def test_help_does_not_print_a_database_url_from_the_environment(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``PINOCHLE_REFEREE_DB`` URL may hold a password: ``--help`` shows the built-in default."""
    clean_env.setenv(ENV_PREFIX + "DB", "postgresql://referee:hunter2@db/referee")
    for command in ("serve", "export", "backup", "downgrade", "verify-audit", "list-games"):
        with pytest.raises(SystemExit):
            build_parser().parse_args([command, "--help"])
        text = capsys.readouterr().out
        assert "hunter2" not in text, (command, text)
    assert _serve_settings().db == "postgresql://referee:hunter2@db/referee"  # still the default


def test_environment_variables_set_what_flags_do_not(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv(ENV_PREFIX + "PORT", "6000")
    clean_env.setenv(ENV_PREFIX + "METRICS_PORT", "0")
    settings = _serve_settings("--port", "7000")
    assert (settings.port, settings.metrics_port) == (7000, 0)  # the flag wins


def test_the_stream_limits_come_from_flags_and_the_environment(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv(ENV_PREFIX + "WATCH_WINDOW", "64")
    clean_env.setenv(ENV_PREFIX + "MAX_WATCHERS", "900")
    clean_env.setenv(ENV_PREFIX + "MAX_PENDING_CALLS", "300")
    settings = _serve_settings("--max-watchers", "50")
    assert (settings.watch_window, settings.max_watchers) == (64, 50)
    assert settings.max_pending_calls == 300
    assert _serve_settings("--max-pending-calls", "20").max_pending_calls == 20
    assert _serve_settings("--keepalive-seconds", "2.5").keepalive_seconds == 2.5
    assert Settings().keepalive_seconds == 60.0
    kept = _serve_settings("--keep-responses-seconds", "3600").keep_responses_seconds
    assert (kept, Settings().keep_responses_seconds) == (3600, 86_400)
    aged = _serve_settings("--max-connection-age-seconds", "600")
    assert (aged.max_connection_age_seconds, Settings().max_connection_age_seconds) == (600, 0)
    assert (Settings().watch_window, Settings().max_watchers) == (512, 10_000)
    assert (settings.events_in_memory, Settings().events_in_memory) == (64, 64)
    clean_env.setenv(ENV_PREFIX + "EVENTS_IN_MEMORY", "16")
    assert _serve_settings().events_in_memory == 16
    assert _serve_settings("--events-in-memory", "8").events_in_memory == 8
    assert Settings().max_pending_calls == 10_000
    clean_env.setenv(ENV_PREFIX + "MAX_SERVICE_STREAMS", "40")
    assert _serve_settings().max_service_streams == 40
    assert _serve_settings("--max-service-streams", "4").max_service_streams == 4
    assert Settings().max_service_streams == 1_000
    clean_env.setenv(ENV_PREFIX + "MAX_STREAMS_PER_CONNECTION", "100")
    assert _serve_settings().max_streams_per_connection == 100
    assert _serve_settings("--max-streams-per-connection", "8").max_streams_per_connection == 8
    assert Settings().max_streams_per_connection == 21_000
    clean_env.setenv(ENV_PREFIX + "DRAIN_SECONDS", "10")
    assert (_serve_settings().drain_seconds, Settings().drain_seconds) == (10, 0)
    assert _serve_settings("--drain-seconds", "2.5").drain_seconds == 2.5


@pytest.mark.parametrize(
    ("variable", "text", "flag", "value"),
    [
        ("PORT", "abc", "--port", "6000"),
        ("METRICS_PORT", "9.5", "--metrics-port", "0"),
        ("MAX_GAMES", "lots", "--max-games", "5"),
        ("MAX_MESSAGE_BYTES", "0", "--max-message-bytes", "2048"),
        ("GRACE_SECONDS", "soon", "--grace-seconds", "2"),
        # Out of range: gRPC wrapped a port past 65535 round (70000 served on 4464), and a
        # negative metrics port was a traceback once the server had made its database.
        ("PORT", "70000", "--port", "6000"),
        ("METRICS_PORT", "-5", "--metrics-port", "0"),
        ("MAX_GAMES", "-1", "--max-games", "5"),
        ("WATCH_WINDOW", "0", "--watch-window", "64"),
        ("MAX_WATCHERS", "none", "--max-watchers", "50"),
        ("MAX_PENDING_CALLS", "0", "--max-pending-calls", "100"),
        ("MAX_SERVICE_STREAMS", "0", "--max-service-streams", "100"),
        ("KEEPALIVE_SECONDS", "0.5", "--keepalive-seconds", "30"),
        ("KEEP_RESPONSES_SECONDS", "-1", "--keep-responses-seconds", "60"),
        ("DRAIN_SECONDS", "inf", "--drain-seconds", "5"),
        ("MAX_STREAMS_PER_CONNECTION", "0", "--max-streams-per-connection", "100"),
        # argparse checks choices only on the command line: a variable's value passed unseen.
        ("LOG_FORMAT", "xml", "--log-format", "json"),
    ],
)
def test_a_malformed_number_in_the_environment_is_refused_like_a_flag(
    clean_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    text: str,
    flag: str,
    value: str,
) -> None:
    """Was a traceback from every command, serve's flag given or not: a variable is the flag's
    default, converted only when serve is parsed without that flag."""
    clean_env.setenv(ENV_PREFIX + variable, text)
    with pytest.raises(SystemExit) as exited:
        _serve_settings()
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and "Traceback" not in err
    settings = _serve_settings(flag, value)  # the flag wins, and the variable is not read
    assert str(getattr(settings, flag[2:].replace("-", "_"))) in (value, f"{value}.0")
    assert cli.main(["verify-deal", "00", "00", "{}"]) == 2  # other commands do not read it


def _serve_process(db: Path, *flags: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``pinochle-referee serve`` that is expected to stop by itself (it cannot start)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "referee.cli",
            "serve",
            "--db",
            str(db),
            "--log-format",
            "json",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )


def _start_failed(completed: subprocess.CompletedProcess[str]) -> str:
    """The ``start_failed`` line's reason; the process must have exited 1 without a traceback."""
    assert completed.returncode == 1, completed.stderr + completed.stdout
    output = completed.stdout + completed.stderr
    assert "Traceback" not in output
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    (failed,) = [line for line in lines if line.get("event") == "start_failed"]
    assert failed["level"] == "error"
    return str(failed["error"])


async def _burst(srv: Served, calls: int) -> Counter[str]:
    """Open ``calls`` GetGame calls at once on one connection: how each one ended."""
    table = await new_table(srv.client, "partnership", seed="burst")
    spectator = srv.client.session(table.game_id, table.spectator_token)

    async def one() -> str:
        try:
            await spectator.view()
        except RefereeError as error:
            return error.code.name
        return "OK"

    return Counter(await asyncio.gather(*(one() for _ in range(calls))))


async def test_a_burst_of_calls_is_served_past_grpcs_default_queue(tmp_path: Path) -> None:
    """grpc.aio starts the calls it has received one at a time on the event loop, so a burst
    (clients reconnecting at once after a restart) waits in gRPC's queue of calls not yet
    started. gRPC's defaults cancel calls beyond 1,000 at random and all beyond 3,000: with
    them, some of 2,500 calls opened at once came back CANCELLED before any of the server's
    code ran. The server sets gRPC's queue from --max-pending-calls (10,000)."""
    async with serving(tmp_path) as srv:
        assert await _burst(srv, 2_500) == Counter({"OK": 2_500})


@pytest.mark.usefixtures("json_logs")
async def test_calls_beyond_max_pending_calls_are_refused_resource_exhausted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Was: with --max-pending-calls 5, of 20 slow calls opened at once most came back
    CANCELLED, gRPC's own refusal of a full queue, before any of the server's code ran: not
    logged, not counted, and a status a client reads as its own cancellation. Now the server
    holds at most that many calls at once itself and refuses the others RESOURCE_EXHAUSTED,
    reason TOO_MANY_CALLS, ``metadata["limit"]`` the limit, each logged on its canonical line
    and counted in grpc_server_handled_total; the calls it holds are answered, and a call
    after them is served. Health checks are never refused (a probe must see an overloaded
    server alive)."""
    gate = asyncio.Event()
    list_variants = servicers_module.RefereeServicer.ListVariants

    async def slow(self: Any, request: Any, context: Any) -> Any:
        await gate.wait()  # held until every call beyond the limit has been answered
        return await list_variants(self, request, context)

    monkeypatch.setattr(servicers_module.RefereeServicer, "ListVariants", slow)
    handled = ("unary", "pinochle.referee.v1.RefereeService", "ListVariants", "RESOURCE_EXHAUSTED")
    before = _handled(*handled)
    async with serving(tmp_path, max_pending_calls=5) as srv:
        configure_logging("json")  # serving() quiets the logs; this test reads them
        capfd.readouterr()

        async def one() -> RefereeError | None:
            try:
                await srv.referee.ListVariants(pb.ListVariantsRequest())
            except grpc.aio.AioRpcError as error:
                return RefereeError(error)
            return None

        calls = [asyncio.ensure_future(one()) for _ in range(20)]
        async with asyncio.timeout(30):  # the refusals come while five calls are held
            while sum(call.done() for call in calls) < 15:
                await asyncio.sleep(0.01)
        checked = await health_stub(srv.client.channel).Check(health_pb2.HealthCheckRequest())
        assert checked.status == health_pb2.HealthCheckResponse.SERVING
        gate.set()
        ended = await asyncio.gather(*calls)
        refusals = [error for error in ended if error is not None]
        assert len(refusals) == 15, ended
        for error in refusals:
            assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED, error
            assert error.reason == "TOO_MANY_CALLS" and error.metadata == {"limit": "5"}
            assert "--max-pending-calls" in error.message
        assert (await srv.referee.ListVariants(pb.ListVariantsRequest())).variants
        lines = [
            line
            for line in _json_lines(capfd.readouterr().err)
            if line.get("rpc") == "ListVariants"
        ]
    codes = Counter((line["grpc_code"], line.get("code")) for line in lines)
    assert codes == Counter({("RESOURCE_EXHAUSTED", "TOO_MANY_CALLS"): 15, ("OK", None): 6})
    assert _handled(*handled) - before == 15


def _handled(kind: str, service: str, method: str, code: str) -> float:
    labels = {"grpc_type": kind, "grpc_service": service, "grpc_method": method, "grpc_code": code}
    return REGISTRY.get_sample_value("grpc_server_handled_total", labels) or 0.0


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


async def test_a_second_server_on_a_taken_port_does_not_start(tmp_path: Path) -> None:
    """gRPC sets SO_REUSEPORT by default, so a second ``serve`` on a port a server already had
    started too and took about half of the new connections, to its own database. It now
    stops at once (exit 1, a ``start_failed`` log line) and creates no database."""
    async with serving(tmp_path) as srv:
        second = tmp_path / "second.db"
        completed = await asyncio.to_thread(
            _serve_process, second, "--port", str(srv.running.port), "--metrics-port", "0"
        )
        assert f"cannot listen on 127.0.0.1:{srv.running.port}" in _start_failed(completed)
        assert not second.exists()
        await new_table(srv.client, "partnership", seed="still-served")


async def test_a_second_server_on_one_sqlite_file_does_not_start(tmp_path: Path) -> None:
    """Two servers on one SQLite file both served: SQLite announces no changes, so each kept
    its own games in memory, refusing the other's actions (ABORTED) from then on, and neither's
    watchers saw the other's. The second now stops at once (exit 1, one ``start_failed`` line
    naming the database and the process serving it); the first serves on, and once it has
    stopped a new server starts on the file."""
    db = tmp_path / "referee.db"
    port = free_port()
    with running(db, port, tmp_path / "first.log") as first:
        await first.wait_serving()
        async with RefereeClient(first.address) as client:
            table = await new_table(client, "partnership", SHORT_GAME["partnership"], seed="one")
            await play(table, random.Random(1), hands=1)
            try:
                completed = await asyncio.to_thread(
                    _serve_process, db, "--port", "0", "--metrics-port", "0", timeout=30
                )
            except subprocess.TimeoutExpired:
                pytest.fail("a second server on the same SQLite file went on serving")
            assert _start_failed(completed).startswith(
                f"another process (pid {first.process.pid} on {socket.gethostname()}) serves"
                f" {db}: a SQLite database is served by one server at a time"
            )
            assert completed.stderr.count("\n") == 1, completed.stderr  # that line alone
            await play(table, random.Random(2), hands=1)  # the first serves on
            version = (await table.adj.view())["version"]
        first.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(first.process.wait, 15) == 0
    with running(db, port, tmp_path / "again.log") as again:
        await again.wait_serving()
        async with RefereeClient(again.address) as client:
            assert (await table.through(client).adj.view())["version"] == version


def test_a_taken_metrics_port_stops_serve_before_its_database_is_made(tmp_path: Path) -> None:
    """Was a traceback (address in use), after the SQLite file had been created."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        db = tmp_path / "never.db"
        completed = _serve_process(db, "--port", "0", "--metrics-port", str(port))
    assert f"cannot serve metrics on 127.0.0.1:{port}" in _start_failed(completed)
    assert not db.exists()


def test_a_database_that_cannot_open_stops_serve_with_one_line(tmp_path: Path) -> None:
    """The store's refusal is the start_failed line's reason (exit 1), not a traceback."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    completed = _serve_process(blocker / "referee.db", "--port", "0", "--metrics-port", "0")
    assert f"cannot open {blocker / 'referee.db'}" in _start_failed(completed)


def test_the_adjudicator_token_file_is_read_without_its_newline(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    token_file = tmp_path / "adjudicator.token"
    token_file.write_text("file-token-0123456789\n", encoding="utf-8")
    by_flag = _serve_settings("--adjudicator-token-file", str(token_file))
    assert by_flag.adjudicator_token == "file-token-0123456789"
    clean_env.setenv(ENV_PREFIX + "ADJUDICATOR_TOKEN_FILE", str(token_file))
    assert _serve_settings().adjudicator_token == "file-token-0123456789"


async def test_a_token_read_from_a_file_is_the_adjudicator_credential(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    """The stripped token is the credential the server accepts."""
    token_file = tmp_path / "adjudicator.token"
    token_file.write_text("file-token-0123456789\r\n", encoding="utf-8")
    clean_env.setenv(ENV_PREFIX + "ADJUDICATOR_TOKEN_FILE", str(token_file))
    token = _serve_settings().adjudicator_token
    async with serving(tmp_path, adjudicator_token=token) as srv:
        created = await srv.client.create_game("partnership", seed="token-file")
        view = await srv.client.session(created.game_id, "file-token-0123456789").view()
        assert view["role"] == "adjudicator" and len(view["hand"]["hands"]) == 4
        await refused(srv.client.session(created.game_id, "file-token-012345678").view())


# ----------------------------------------------------------------------------------------------
# The shuffle behind real deals (RULES.md A.10 item 4: Fisher-Yates from the last index down)


class _Recorder:
    """Stands in for ``secrets.randbelow``: records each bound, answers from a script."""

    def __init__(self, answers: list[int] | None = None) -> None:
        self.bounds: list[int] = []
        self.answers = answers

    def __call__(self, bound: int) -> int:
        self.bounds.append(bound)
        if self.answers is None:
            return 0
        answer = self.answers[len(self.bounds) - 1]
        assert 0 <= answer < bound
        return answer


def test_secure_shuffle_draws_from_the_operating_systems_csprng() -> None:
    # The module it calls is the standard library's secrets (os.urandom), not random's
    # Mersenne Twister; the tests below count its calls, so a shuffle that draws from anywhere
    # else fails them.
    assert vars(referee.engine.game)["secrets"] is secrets


@pytest.mark.parametrize("size", [48, 80])
def test_secure_shuffle_is_fisher_yates_with_unbiased_bounds(
    size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = _Recorder()
    monkeypatch.setattr(secrets, "randbelow", recorder)
    deck = list(range(size))
    shuffled = secure_shuffle(deck)
    # j uniform in [0, i] for i = n-1 down to 1: exactly n-1 draws, bounds n, n-1, ..., 2.
    assert recorder.bounds == list(range(size, 1, -1))
    assert deck == list(range(size))  # the input is not modified
    assert sorted(shuffled) == deck


def test_every_permutation_comes_from_exactly_one_draw_sequence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With uniform draws each of the n! orders is equally likely: the map from draw sequences
    (n * (n-1) * ... * 2 of them) to orders is a bijection."""
    size = 5
    orders: list[tuple[int, ...]] = []
    for draws in itertools.product(*(range(i + 1) for i in range(size - 1, 0, -1))):
        recorder = _Recorder(list(draws))
        monkeypatch.setattr(secrets, "randbelow", recorder)
        orders.append(tuple(secure_shuffle(range(size))))
        assert len(recorder.bounds) == size - 1
    assert len(orders) == math.factorial(size)
    assert set(orders) == set(itertools.permutations(range(size)))


def test_export_from_a_missing_database_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped --db is an error; opening it would leave an empty database behind."""
    path = tmp_path / "typo" / "referee.db"
    assert cli.main(["export", "0" * 24, "--db", str(path)]) == 1
    assert "no database at" in capsys.readouterr().err
    assert not path.parent.exists()


def test_export_of_a_game_id_that_is_not_unicode_text_is_no_game(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A game id from a non-UTF-8 argument (``export $'\\xff'``: a lone surrogate in Python) is
    no stored game's: one line and exit 1, as for any id the database does not hold. The
    store's query could not encode it and ended in a UnicodeEncodeError traceback."""
    path = tmp_path / "referee.db"

    async def create() -> None:
        store = open_store(str(path), serving=False)
        await store.open()
        await store.close()

    asyncio.run(create())
    assert cli.main(["export", "\udcff", "--db", str(path)]) == 1
    err = capsys.readouterr().err
    assert err == "pinochle-referee: no game '\\udcff'\n"


def test_export_from_what_cannot_be_opened_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file that is no database, an empty one, or a PostgreSQL server that is not there: exit
    1 and one line naming why (a StoreError's traceback before); the file is left as it was."""
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database\n" * 512)
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    closed = f"postgresql://127.0.0.1:{free_port()}/test"
    for db, reason in (
        (garbage, f"cannot open {garbage}: file is not a database"),
        (empty, f"{empty} holds no referee database"),
        (closed, "cannot open PostgreSQL at 127.0.0.1:"),
    ):
        assert cli.main(["export", "0" * 24, "--db", str(db)]) == 1
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.startswith(f"pinochle-referee: {reason}")
        assert captured.err.count("\n") == 1, captured.err
    assert garbage.read_bytes() == b"not a database\n" * 512 and empty.read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db", "garbage.db"]


# ----------------------------------------------------------------------------------------------
# Memory: finished games do not pile up


async def test_finished_games_leave_memory_least_recently_used_first(tmp_path: Path) -> None:
    """A game that ends moves from the games in progress to a bounded set of finished ones; the
    least recently used finished game is dropped and rebuilt from the store when asked for."""
    async with serving(tmp_path) as srv:
        games = srv.running.games
        games.finished_kept = 1
        variant = "partnership-no-bid"
        first = await new_table(srv.client, variant, SHORT_GAME[variant], seed="done-1")
        await play(first, random.Random(1))
        assert first.game_id not in games.games and list(games.finished) == [first.game_id]
        view = await first.seats[0].view()
        record = await first.adj.export()
        second = await new_table(srv.client, variant, SHORT_GAME[variant], seed="done-2")
        await play(second, random.Random(2))
        assert list(games.finished) == [second.game_id]  # the first one was dropped
        assert first.game_id not in games.games
        # Rebuilt from the store on demand, the same game as before.
        assert await first.seats[0].view() == view
        assert await first.adj.export() == record
        assert list(games.finished) == [first.game_id]  # rebuilt, it is the most recent now
        assert view["over"] and not games.games


# A password each of these URLs holds, in a form libpq cannot parse: it refuses the URL quoting
# the part it could not read, which may be the password itself or the whole URL.
UNPARSABLE_URLS = (
    "postgresql://referee:hunter2 secret@127.0.0.1:5432/referee",  # a space, not %20
    "postgresql://referee:hunter2-secret@[::1/referee",  # a bracket left open: the URL quoted
    "postgresql://referee:hunter2%2Dsecret@[::1/referee",  # the same, percent-encoded
    "postgresql://[::1/referee?sslmode=require&password=hunter2-secret",  # the query's form
)


@pytest.mark.parametrize("url", UNPARSABLE_URLS)
def test_a_database_url_that_cannot_be_parsed_is_refused_without_its_password(url: str) -> None:
    """Was: ``start_failed`` quoted libpq's refusal as it was, ``unexpected spaces found in
    "hunter2 secret"`` or ``... in URI: "postgresql://referee:hunter2-secret@[::1/referee"``,
    so the log (and ``downgrade``'s error) held the password; now it is starred."""
    completed = _serve_process(Path("unused.db"), "--db", url, "--port", "0", "--metrics-port", "0")
    reason = _start_failed(completed)
    assert reason.startswith("cannot open PostgreSQL at the configured database: ")
    assert "***" in reason
    downgrade = subprocess.run(
        [sys.executable, "-m", "referee.cli", "downgrade", "--to", "1", "--db", url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert downgrade.returncode == 1 and "cannot downgrade PostgreSQL" in downgrade.stderr
    for output in (completed.stdout + completed.stderr, downgrade.stdout + downgrade.stderr):
        assert "hunter2" not in output, output


@pytest.mark.parametrize("given", ["flag", "variable"])
@pytest.mark.parametrize("command", ["serve", "export"])
def test_a_libpq_connection_string_for_db_is_refused_without_being_quoted(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], given: str, command: str
) -> None:
    """Was: ``--db "host=db dbname=referee password=..."`` (libpq's other form, as a DSN is
    often handed out) was taken for a SQLite file name: ``serve`` created a database of that
    name in its working directory, served games no other replica saw, and wrote the string,
    password and all, on its ``serving`` line. Now it is refused (exit 2), not quoted."""
    dsn = "host=db.example port=5432 dbname=referee user=referee password=hunter2-secret"
    flags = ["--db", dsn] if given == "flag" else []
    if given == "variable":
        clean_env.setenv(ENV_PREFIX + "DB", dsn)
    arguments = [command, *flags] + (["some-game"] if command == "export" else [])
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(arguments)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --db: is a libpq key=value connection string" in err
    assert "postgresql://" in err and "hunter2" not in err
    # File names and URLs are as they were.
    for db in ("./data/referee.db", "games=2026.db", "postgresql://db/referee?password=x"):
        assert build_parser().parse_args(["serve", "--db", db]).db == db


def test_only_passwords_are_starred_in_the_stores_messages() -> None:
    """The user information's password (as written and percent-decoded) and a ``password``
    parameter are starred; a user name alone stays, so "role ... does not exist" still says
    which role."""
    url = "postgresql://referee:p%40ss@db.example/referee?sslmode=require&password=x%20y"
    assert set(secrets_of(url)) == {
        "referee:p%40ss",
        "referee:p@ss",
        "p%40ss",
        "p@ss",
        "x%20y",
        "x y",
    }
    assert secrets_of("postgresql://referee@db.example/referee") == []
    error = ValueError('role "referee" failed: password "p@ss" or "x y" \n refused')
    assert (
        _one_line(error, secrets_of(url))
        == 'role "referee" failed: password "***" or "***" refused'
    )


async def test_every_methods_grpc_series_are_there_at_zero_from_start_up(tmp_path: Path) -> None:
    """Was: a method's ``grpc_server_*`` series appeared only with its first call, so a
    dashboard showed no data and a rate of errors could not count a replica's first ones. Now
    every method of every service served has them at 0 from start-up, every status code
    included (go-grpc-prometheus's InitializeMetrics), labelled as its calls will be."""
    metrics_port = free_port()
    extra = ("--metrics-port", str(metrics_port))
    with running(tmp_path / "referee.db", free_port(), tmp_path / "server.log", *extra) as server:
        await server.wait_serving()  # health Checks, and nothing else
        text = await _scrape(f"http://127.0.0.1:{metrics_port}/metrics")
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    health = "grpc.health.v1.Health"
    reflection = "grpc.reflection.v1alpha.ServerReflection"
    for kind, service, method in (
        ("unary", SERVICE, "SubmitAction"),
        ("unary", SERVICE, "CreateGame"),
        ("server_stream", SERVICE, "WatchGame"),
        ("unary", "pinochle.referee.v1.RulesService", "ScoreMeld"),
        ("unary", health, "Check"),
        ("server_stream", health, "Watch"),
        ("bidi_stream", reflection, "ServerReflectionInfo"),
    ):
        labels = (("grpc_method", method), ("grpc_service", service), ("grpc_type", kind))
        for code in grpc.StatusCode:
            value = samples[("grpc_server_handled_total", (("grpc_code", code.name), *labels))]
            assert value == 0 or (method, code.name) == ("Check", "OK"), (method, code, value)
        if method != "Check":
            assert samples["grpc_server_handling_seconds_count", labels] == 0, method
    handled = [name for name, _ in samples if name == "grpc_server_handled_total"]
    assert len(handled) == len(grpc.StatusCode) * sum(
        len(descriptor_pool.Default().FindServiceByName(name).methods) for name in SERVED_SERVICES
    )
