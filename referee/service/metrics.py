"""Prometheus metrics of the referee (served on ``--metrics-port``)."""

from __future__ import annotations

import functools
from collections.abc import Iterable

import grpc
from google.protobuf import descriptor_pool
from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

# No ``*_created`` series beside each counter and histogram (prometheus_client's default in the
# text format, one more series per label set, a third of the page): Prometheus reads counter
# resets from the values themselves, and go-grpc-prometheus exports none.
disable_created_metrics()  # type: ignore[no-untyped-call]

GRPC_HANDLED = Counter(
    "grpc_server_handled_total",
    "RPCs completed on the server, by type, service, method and status code.",
    ["grpc_type", "grpc_service", "grpc_method", "grpc_code"],
)
# Buckets from 50 us: a read (GetGame, ListLegalActions) or a health check is handled in about
# 0.05 to 0.1 ms and an accepted SubmitAction in about 1 ms (bench/README.md); from 0.5 ms up,
# every read and every health check fell in the first bucket, so no quantile below 0.5 ms could
# be told apart, nor a read that had become five times slower.
GRPC_SECONDS = Histogram(
    "grpc_server_handling_seconds",
    "Time to handle an RPC on the server.",
    ["grpc_type", "grpc_service", "grpc_method"],
    buckets=(
        0.00005,
        0.0001,
        0.00025,
        0.0005,
        0.001,
        0.0025,
        0.005,
        0.01,
        0.025,
        0.05,
        0.1,
        0.25,
        0.5,
        1.0,
        2.5,
        5.0,
    ),
)
ACTIONS = Counter(
    "referee_actions_total",
    "Game actions submitted, by variant, action type and result (accepted or refused).",
    ["variant", "action", "result"],
)
VIOLATIONS = Counter(
    "referee_violations_total", "Refused actions by RULES.md A.5 violation code.", ["code"]
)
REFUSALS_THROTTLED = Counter(
    "referee_refusals_throttled_total",
    "SubmitAction calls from callers that are not a seat, refused with RESOURCE_EXHAUSTED and"
    " not audited because the game's refusal budget was spent (referee/service/limits.py).",
)
GAMES_ACTIVE = Gauge(
    "referee_games_active",
    "Games in progress that are not idle (an accepted action within --idle-after seconds).",
)
WATCHERS_ACTIVE = Gauge(
    "referee_watchers_active",
    "WatchGame streams open on this server (at most --max-watchers).",
)
SERVICE_STREAMS_ACTIVE = Gauge(
    "referee_service_streams_active",
    "Health Watch and reflection streams open on this server (at most --max-service-streams).",
)
STORE_REACHABLE = Gauge(
    "referee_store_reachable",
    "1 while the store answers the readiness check (a read every 5 s), 0 while it does not"
    " (RefereeService's health is then NOT_SERVING).",
)
STORE_REACHABLE.set(1)
BACKGROUND_RESTARTS = Counter(
    "referee_background_restarts_total",
    "Background loops (follow-store-changes, catch-up-doubtful-commits, keep-house,"
    " follow-store-health) that failed unexpectedly and were started again (the log has each"
    " failure's traceback).",
    ["task"],
)
STORE_COMMIT_SECONDS = Histogram(
    "referee_store_commit_seconds",
    "Time from handing an action to the store until its transaction committed.",
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25),
)


# The gRPC metrics' labels are go-grpc-prometheus's and py-grpc-prometheus's, so their
# dashboards and alerts work unchanged: grpc_type (these values), grpc_service, grpc_method and
# grpc_code (the status code's name, OK or RESOURCE_EXHAUSTED, as py-grpc-prometheus writes it).
UNARY, SERVER_STREAM, CLIENT_STREAM, BIDI_STREAM = (
    "unary",
    "server_stream",
    "client_stream",
    "bidi_stream",
)


def grpc_type(request_streaming: bool, response_streaming: bool) -> str:
    """The ``grpc_type`` of a method whose requests and responses stream, or not."""
    if request_streaming:
        return BIDI_STREAM if response_streaming else CLIENT_STREAM
    return SERVER_STREAM if response_streaming else UNARY


def initialize_grpc_metrics(services: Iterable[str]) -> None:
    """Every method of ``services`` (full names, their descriptors loaded) in the gRPC metrics
    from start-up, at 0: its handling-time histogram and its handled counter for every status
    code, as go-grpc-prometheus's ``InitializeMetrics`` does. A series appeared only with its
    first call, so dashboards showed no data rather than 0, and an alert on a rate of errors
    (``rate(grpc_server_handled_total{grpc_code="INTERNAL"}[5m])``) could not see a replica's
    first failures: a counter that appears at 1 has no earlier sample to rise from."""
    pool = descriptor_pool.Default()
    for service in services:
        for method in pool.FindServiceByName(service).methods:
            kind = grpc_type(method.client_streaming, method.server_streaming)
            grpc_seconds(kind, service, method.name)
            for code in grpc.StatusCode:
                grpc_handled(kind, service, method.name, code.name)


# ``labels()`` validates and locks on every call; every RPC updates several of these, so the
# labelled children are looked up once per label set (all label values come from closed sets:
# method types, method names, status codes, variants, action types, A.5 codes).
@functools.cache
def grpc_handled(kind: str, service: str, method: str, code: str) -> Counter:
    return GRPC_HANDLED.labels(kind, service, method, code)


@functools.cache
def grpc_seconds(kind: str, service: str, method: str) -> Histogram:
    return GRPC_SECONDS.labels(kind, service, method)


@functools.cache
def actions(variant: str, action: str, result: str) -> Counter:
    return ACTIONS.labels(variant, action, result)


@functools.cache
def violations(code: str) -> Counter:
    return VIOLATIONS.labels(code)


@functools.cache
def background_restarts(task: str) -> Counter:
    return BACKGROUND_RESTARTS.labels(task)
