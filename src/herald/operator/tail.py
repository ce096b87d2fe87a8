"""``herald tail``: the hub's live feed (``GET /v1/stream``), one coloured line per publish,
attempt, acknowledgement, expiry or endpoint change, or JSON lines with ``--json`` (each item's
data with its ``id``). A connection that drops is made again from the last item's id, so
nothing is missed or shown twice; Ctrl-C ends it. ``--max-rate N`` asks the hub for at most N
items a second, for a busy hub: the newest, after a line saying what was left out."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from rich.markup import escape

from herald.operator.api import AdminApi, StreamLost
from herald.operator.output import Output

FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 10.0

COLOURS = {
    "published": "cyan",
    "acked": "green",
    "expired": "magenta",
    "gap": "bold yellow",
    "skipped": "yellow",
}
OUTCOME_COLOURS = {
    "delivered": "green",
    "sent": "green",
    "leased": "blue",
    "failed": "red",
    "undeliverable": "bold red",
}
STATE_COLOURS = {
    "created": "cyan",
    "enabled": "green",
    "recovered": "green",
    "failing": "yellow",
    "disabled": "bold red",
    "deleted": "magenta",
}


def tail(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    """Follow the feed until Ctrl-C, reconnecting from the last id whenever it is lost.

    Raises:
        OperatorError: the hub refused the request (a wrong key, an unknown agent...).
    """
    params = {"agent": args.agent, "type": args.type, "max_rate": args.max_rate}
    last_id: str | None = None
    backoff = FIRST_BACKOFF_S

    def opened() -> None:
        where = f"after {last_id}" if last_id is not None else "from now"
        _note(out, f"following {api.url}/v1/stream {where} (Ctrl-C to stop)")

    try:
        while True:
            try:
                for message in api.stream("/v1/stream", params, last_id, opened):
                    backoff = FIRST_BACKOFF_S
                    if message.type == "error":
                        raise StreamLost(f"the hub ended the stream: {message.data}")
                    if message.oversized or not message.data:
                        continue
                    last_id = message.last_event_id or last_id
                    show(out, message.type, message.last_event_id, json.loads(message.data))
                raise StreamLost("the hub ended the stream")
            except StreamLost as exc:
                _note(out, f"{exc.message}; following again in {backoff:g}s")
                time.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
    except KeyboardInterrupt:
        return


def _note(out: Output, text: str) -> None:
    out.note(text)
    sys.stdout.flush()  # a line for whoever reads the pipe now, not when a buffer fills


def show(out: Output, kind: str, item_id: str, data: dict[str, Any]) -> None:
    """One item: a JSON line, or a line for people."""
    if out.as_json:
        print(json.dumps({"id": item_id, **data}, ensure_ascii=False), flush=True)
        return
    out.console.print(line(kind, data))
    sys.stdout.flush()


def line(kind: str, data: dict[str, Any]) -> str:
    """The rich markup of an item's line: time, kind, agent, then what happened."""
    if kind in ("gap", "skipped"):
        return f"[{COLOURS[kind]}]{escape(str(data.get('message', kind)))}[/]"
    at = str(data.get("at", ""))
    moment = at.partition("T")[2].rstrip("Z") or at
    handle = escape(str((data.get("agent") or {}).get("handle", "?")))
    colour = COLOURS.get(kind, "white")
    if kind == "attempt":
        colour = OUTCOME_COLOURS.get(str(data.get("outcome")), "white")
    elif kind == "endpoint":
        colour = STATE_COLOURS.get(str(data.get("state")), "white")
    return f"[dim]{moment}[/] [{colour}]{kind:<9}[/] [bold]{handle}[/] {escape(_what(kind, data))}"


def _what(kind: str, data: dict[str, Any]) -> str:
    if kind == "endpoint":
        endpoint = data.get("endpoint") or {}
        said = f"{endpoint.get('kind')} {endpoint.get('id')} {data.get('state')}"
        return f"{said}: {data['reason']}" if data.get("reason") else said
    event = data.get("event") or {}
    said = f"{event.get('type')} {event.get('id')} #{event.get('seq')}"
    if kind == "attempt":
        said += f" {data.get('way')} {data.get('outcome')}"
        said += f" to {data.get('endpoint') or data.get('session')}"
        if data.get("error"):
            said += f": {data['error']}"
        if data.get("next_attempt_at"):
            said += f" (again at {data['next_attempt_at']})"
    elif kind == "acked" and data.get("by"):
        said += f" by {data['by']}"
    return said
