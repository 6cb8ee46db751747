"""ghz-style call data: a JSON object (or a list of objects, used round-robin by request
number) whose string values may hold Go-template actions, rendered per request.

Supported actions (the ones ghz documents for call data): ``{{.RequestNumber}}``,
``{{.WorkerID}}``, ``{{.UUID}}`` / ``{{newUUID}}``, ``{{.FullyQualifiedName}}``,
``{{.MethodName}}``, ``{{.ServiceName}}``, ``{{.InputName}}``, ``{{.OutputName}}``,
``{{.Timestamp}}``, ``{{.TimestampUnix}}``, ``{{.TimestampUnixMilli}}``,
``{{.TimestampUnixNano}}``.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

_ACTION = re.compile(r"\{\{\s*(\.?[A-Za-z_][A-Za-z0-9_]*)\s*\}\}")

KNOWN_ACTIONS = frozenset(
    {
        ".RequestNumber",
        ".WorkerID",
        ".UUID",
        "newUUID",
        ".FullyQualifiedName",
        ".MethodName",
        ".ServiceName",
        ".InputName",
        ".OutputName",
        ".Timestamp",
        ".TimestampUnix",
        ".TimestampUnixMilli",
        ".TimestampUnixNano",
    }
)


class TemplateError(ValueError):
    """The call data is not a usable template."""


@dataclass(frozen=True, slots=True)
class CallInfo:
    """What the template knows about the call (ghz's CallData fields)."""

    fully_qualified_name: str
    method_name: str
    service_name: str
    input_name: str
    output_name: str


def check_data(data: Any) -> None:
    """ghz's rule: an object, or a non-empty list of objects; every action is known."""
    if isinstance(data, list):
        if not data:
            raise TemplateError("data array must not be empty")
        if not all(isinstance(item, dict) for item in data):
            raise TemplateError("data array contains unsupported type")
    elif not isinstance(data, dict):
        raise TemplateError("unsupported type for data (an object or a list of objects)")
    _check_actions(data)


def _check_actions(value: Any) -> None:
    if isinstance(value, str):
        for match in _ACTION.finditer(value):
            if match.group(1) not in KNOWN_ACTIONS:
                raise TemplateError(f"unsupported template action {match.group(0)!r}")
    elif isinstance(value, dict):
        for item in value.values():
            _check_actions(item)
    elif isinstance(value, list):
        for item in value:
            _check_actions(item)


def render(data: Any, call: CallInfo, request_number: int, worker_id: str) -> dict[str, Any]:
    """The request object for one call, every string value rendered."""
    chosen = data[request_number % len(data)] if isinstance(data, list) else data
    now_ns = time.time_ns()

    def action(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == ".RequestNumber":
            return str(request_number)
        if name == ".WorkerID":
            return worker_id
        if name in (".UUID", "newUUID"):
            return str(uuid.uuid4())
        if name == ".FullyQualifiedName":
            return call.fully_qualified_name
        if name == ".MethodName":
            return call.method_name
        if name == ".ServiceName":
            return call.service_name
        if name == ".InputName":
            return call.input_name
        if name == ".OutputName":
            return call.output_name
        if name == ".Timestamp":
            return datetime.fromtimestamp(now_ns / 1e9).astimezone().isoformat()
        if name == ".TimestampUnix":
            return str(now_ns // 1_000_000_000)
        if name == ".TimestampUnixMilli":
            return str(now_ns // 1_000_000)
        if name == ".TimestampUnixNano":
            return str(now_ns)
        raise TemplateError(f"unsupported template action {match.group(0)!r}")

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return _ACTION.sub(action, value) if "{{" in value else value
        if isinstance(value, dict):
            return {key: walk(item) for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item) for item in value]
        return value

    rendered = walk(chosen)
    assert isinstance(rendered, dict)
    return rendered
