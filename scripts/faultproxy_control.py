"""The control API of ``scripts/faultproxy.py``: its rules (``validate_rule``, used by the proxy)
and the client of a running proxy (``ProxyControl``: rules, log, stats, delay), for the tests
and benchmarks; ``faultproxy`` re-exports both. Standard library only."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

#: Path prefix of the control API on the proxy's own port.
CONTROL_PREFIX = "/__proxy/"
ACTIONS = ("status", "delay_ms", "truncate", "close")


class RuleError(ValueError):
    """A control-API rule that is malformed (unknown action, bad status, bad count...)."""


def validate_rule(raw: Any) -> dict[str, Any]:
    """Check one rule from the control API and return it normalised.

    Raises ``RuleError`` naming the bad field for anything that is not a JSON object with a
    known ``action`` and well-typed parameters (see the module docstring for the fields).
    """
    if not isinstance(raw, dict):
        raise RuleError(f"a rule must be a JSON object, got {type(raw).__name__}")
    known = {"path", "method", "count", "action", "status", "delay_ms", "mode", "bytes"}
    unknown = set(raw) - known
    if unknown:
        raise RuleError(f"unknown rule field(s) {sorted(unknown)}; known: {sorted(known)}")
    action = raw.get("action")
    if action not in ACTIONS:
        raise RuleError(f"rule action must be one of {ACTIONS}, got {action!r}")
    path = raw.get("path", "")
    if not isinstance(path, str):
        raise RuleError("rule 'path' must be a string (a substring of the request path)")
    method = raw.get("method")
    if method is not None and not isinstance(method, str):
        raise RuleError("rule 'method' must be a string such as 'GET'")
    count = raw.get("count", 1)
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise RuleError(f"rule 'count' must be a positive integer or null, got {count!r}")
    rule: dict[str, Any] = {
        "path": path,
        "method": method.upper() if method else None,
        "count": count,
        "action": action,
    }
    if action == "status":
        status = raw.get("status")
        if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599:
            raise RuleError(f"a 'status' rule needs 'status' in 400..599, got {status!r}")
        rule["status"] = status
    elif action == "delay_ms":
        delay = raw.get("delay_ms")
        if not isinstance(delay, (int, float)) or isinstance(delay, bool) or delay < 0:
            raise RuleError(f"a 'delay_ms' rule needs 'delay_ms' >= 0 (ms), got {delay!r}")
        rule["delay_ms"] = delay
    elif action == "truncate":
        mode = raw.get("mode", "body")
        if mode not in ("body", "range"):
            raise RuleError(f"a 'truncate' rule's 'mode' must be 'body' or 'range', got {mode!r}")
        nbytes = raw.get("bytes")
        if nbytes is not None and (
            not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 0
        ):
            raise RuleError(f"a 'truncate' rule's 'bytes' must be an integer >= 0, got {nbytes!r}")
        rule["mode"] = mode
        rule["bytes"] = nbytes
    return rule


class ProxyControl:
    """Client for a running proxy's control API (``base`` is e.g. ``http://127.0.0.1:PORT``)."""

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")

    def _call(self, method: str, route: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.base + CONTROL_PREFIX + route,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def add_rule(self, **rule: Any) -> list[dict[str, Any]]:
        """Append one rule (fields as in the module docstring); returns the current rules.

        Raises ``urllib.error.HTTPError`` (400) for a malformed rule.
        """
        return self._call("POST", "rules", rule)["rules"]

    def rules(self) -> list[dict[str, Any]]:
        """The rules still active, with their remaining counts."""
        return self._call("GET", "rules")["rules"]

    def clear_rules(self) -> None:
        """Drop every rule."""
        self._call("DELETE", "rules")

    def log(self) -> list[dict[str, Any]]:
        """Every request seen since start or the last ``clear_log``, oldest first."""
        return self._call("GET", "log")

    def clear_log(self) -> None:
        """Empty the request log (counters in ``stats`` keep running)."""
        self._call("DELETE", "log")

    def stats(self) -> dict[str, Any]:
        """Request and byte counters since the proxy started."""
        return self._call("GET", "stats")

    def set_delay(self, delay_ms: float) -> None:
        """Change the delay added each way per request (ms)."""
        self._call("POST", "config", {"delay_ms": delay_ms})
