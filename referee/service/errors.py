"""Rich gRPC errors every client language can branch on.

A refused request raises ``ServiceError`` inside the service; the servicer turns it into a
``google.rpc.Status`` with details: ``ErrorInfo`` (``reason`` = the A.5 violation code or a
service reason, ``metadata.version`` = the game's current version), for malformed requests
``BadRequest`` naming the field, and for a request refused by a rate limit ``RetryInfo`` saying
when to try again. Client mistakes are never ``UNKNOWN`` or ``INTERNAL``.
"""

from __future__ import annotations

from collections.abc import Mapping

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

DOMAIN = "pinochle-referee"

_CODE_NUMBER = {
    grpc.StatusCode.INVALID_ARGUMENT: code_pb2.INVALID_ARGUMENT,
    grpc.StatusCode.FAILED_PRECONDITION: code_pb2.FAILED_PRECONDITION,
    grpc.StatusCode.ABORTED: code_pb2.ABORTED,
    grpc.StatusCode.NOT_FOUND: code_pb2.NOT_FOUND,
    grpc.StatusCode.UNAUTHENTICATED: code_pb2.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED: code_pb2.PERMISSION_DENIED,
    grpc.StatusCode.RESOURCE_EXHAUSTED: code_pb2.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ALREADY_EXISTS: code_pb2.ALREADY_EXISTS,
    grpc.StatusCode.UNAVAILABLE: code_pb2.UNAVAILABLE,
    grpc.StatusCode.INTERNAL: code_pb2.INTERNAL,
    grpc.StatusCode.DEADLINE_EXCEEDED: code_pb2.DEADLINE_EXCEEDED,
    grpc.StatusCode.DATA_LOSS: code_pb2.DATA_LOSS,
}


# The longest message a refusal carries. It travels twice in the trailers (grpc-message, and in
# grpc-status-details-bin with a BadRequest description), percent- or base64-encoded, and gRPC
# drops a response whose metadata passes 16 KiB: a message quoting a 9,000-character game id or
# card in full reached the client as RESOURCE_EXHAUSTED with no details at all.
MAX_MESSAGE = 400


def shortened(message: str) -> str:
    """``message`` cut to MAX_MESSAGE characters, saying how long it was."""
    if len(message) <= MAX_MESSAGE:
        return message
    return f"{message[: MAX_MESSAGE - 40]}... ({len(message)} characters in all)"


# The longest field path a BadRequest names. A path quotes a name from the request
# (``options.<name>``): a 12,000-character option name made the trailers too large, and the
# client got RESOURCE_EXHAUSTED instead of INVALID_ARGUMENT. A path cut short still says where.
MAX_FIELD = 200


def shortened_field(field: str) -> str:
    """``field`` cut to MAX_FIELD characters, ``...`` marking the cut."""
    if len(field) <= MAX_FIELD:
        return field
    return field[: MAX_FIELD - 3] + "..."


class ServiceError(Exception):
    """A refusal with its gRPC status code, a reason, and what a client needs to recover."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        *,
        reason: str = "",
        field: str = "",
        metadata: Mapping[str, str] | None = None,
        retry_delay: float | None = None,
    ) -> None:
        message = shortened(message)
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or code.name
        self.field = shortened_field(field)
        self.metadata = dict(metadata or {})
        self.retry_delay = retry_delay  # seconds; sent as google.rpc.RetryInfo

    def to_status(self) -> grpc.Status:
        details = []
        info = any_pb2.Any()
        info.Pack(
            error_details_pb2.ErrorInfo(reason=self.reason, domain=DOMAIN, metadata=self.metadata)
        )
        details.append(info)
        if self.field:
            bad = any_pb2.Any()
            bad.Pack(
                error_details_pb2.BadRequest(
                    field_violations=[
                        error_details_pb2.BadRequest.FieldViolation(
                            field=self.field, description=self.message
                        )
                    ]
                )
            )
            details.append(bad)
        if self.retry_delay is not None:
            delay = duration_pb2.Duration()
            delay.FromNanoseconds(max(0, round(self.retry_delay * 1e9)))
            retry = any_pb2.Any()
            retry.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
            details.append(retry)
        status = status_pb2.Status(
            code=_CODE_NUMBER[self.code], message=self.message, details=details
        )
        converted: grpc.Status = rpc_status.to_status(status)
        return converted


def invalid(message: str, field: str = "", reason: str = "INVALID_ARGUMENT") -> ServiceError:
    return ServiceError(grpc.StatusCode.INVALID_ARGUMENT, message, reason=reason, field=field)


def over_limit(message: str, *, reason: str, limit: int, **metadata: str) -> ServiceError:
    """A request refused because one of the server's caps is reached: RESOURCE_EXHAUSTED with
    a reason of the cap's own (a client branches on it: wait, shrink the request, try another
    replica) and ``metadata["limit"]`` the cap, the same for every cap so that clients read it
    one way."""
    return ServiceError(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        message,
        reason=reason,
        metadata={"limit": str(limit), **metadata},
    )


def error_details(error: grpc.RpcError) -> dict[str, object]:
    """Client side: the reason, metadata and bad fields of a rich error (empty if none)."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]  # aio errors are Calls too
    out: dict[str, object] = {}
    if status is None:
        return out
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            out["reason"] = info.reason
            out["metadata"] = dict(info.metadata)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            out["fields"] = [v.field for v in bad.field_violations]
    return out


def schema_changed() -> ServiceError:
    """The answer of a server whose store stopped serving its schema, changed under it (a
    downgrade while it held no serving lock: ``SchemaChanged``). UNAVAILABLE: the request is
    fine and nothing of it was written, so the same request (the same ``request_id``) may be
    sent to another replica, which the balancer now prefers, this one's readiness being
    NOT_SERVING; this one refuses until it is restarted. The store's message (database, schema,
    versions) stays in the log, like every store failure's."""
    return ServiceError(
        grpc.StatusCode.UNAVAILABLE,
        "this server has stopped serving: its database schema was changed under it (a"
        " downgrade?); nothing was written, and the same request may be sent to another server",
        reason="STORE_SCHEMA_CHANGED",
    )
