"""API failures as exceptions with the server's status code, reason and message."""

from __future__ import annotations

import contextlib
import json
from typing import Any


class ApiFailure(Exception):
    """The server answered with an error status (or did not answer: status 0)."""

    def __init__(self, status: int, reason: str, message: str, body: dict[str, Any] | None = None):
        super().__init__(f"{status} {reason}: {message}")
        self.status, self.reason, self.message = status, reason, message
        self.body = body or {}
        self.retry_after: float | None = None

    @classmethod
    def from_response(cls, status: int, data: bytes | str | None, headers: Any = None):
        try:
            body = json.loads(data or b"{}")
        except ValueError:
            body = {"message": (data or b"")[:500]}
        if not isinstance(body, dict):
            body = {}
        kind = {404: NotFound, 409: Conflict}.get(status, cls)
        error = kind(status, body.get("reason", ""), str(body.get("message", "")), body)
        retry_after = (headers or {}).get("Retry-After") if headers else None
        if retry_after is not None:
            with contextlib.suppress(ValueError):
                error.retry_after = float(retry_after)
        return error

    @property
    def is_field_conflict(self) -> bool:
        """A server-side apply conflict with another field manager (not worth retrying)."""
        causes = (self.body.get("details") or {}).get("causes") or []
        # StatusCause.Type is serialised as "reason"
        return any(c.get("reason") == "FieldManagerConflict" for c in causes)


class NotFound(ApiFailure):
    pass


class Conflict(ApiFailure):
    pass
