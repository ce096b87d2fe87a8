"""The operator's commands: their arguments, and what each one asks the hub and prints.

Each reads the hub's URL and the admin key from ``--url`` and ``--key``, or ``HERALD_URL`` and
``HERALD_ADMIN_KEY``; prints a table, or JSON lines with ``--json``; and exits non-zero with a
one-line reason on any error.

``herald.cli`` imports this module only to run one of these commands; it and what it imports
(``herald.operator``, ``httpx2``, ``rich``) must not import the server or the store, so that
the commands start at once (``tests/test_cli.py`` checks)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from herald.errors import HeraldError
from herald.operator.api import DEFAULT_URL, AdminApi, OperatorError

if TYPE_CHECKING:  # rich is imported once the arguments are good, not to parse them
    from herald.operator.output import Output

Command = Callable[[AdminApi, argparse.Namespace, "Output"], None]

AGENT_COLUMNS = ("id", "handle", "pending", "live_sessions", "last_activity_at", "created_at")
EVENT_COLUMNS = ("id", "agent", "type", "topic", "status", "created_at", "text")
ATTEMPT_COLUMNS = ("at", "mechanism", "session", "outcome", "error")
DELIVERY_COLUMNS = ("endpoint", "state", "tries", "next_attempt_at", "last_error")
ENDPOINT_COLUMNS = (
    "id",
    "agent",
    "kind",
    "url",
    "state",
    "failing_since",
    "last_error",
    "next_attempt_at",
)
LARGEST_PAGE = 500
"""The most items of a listing the hub gives at once."""


def add(parser: argparse.ArgumentParser, name: str) -> None:
    """Add the arguments of the operator's command ``name`` (``herald.cli`` made its parser)."""
    _ADDERS[name](parser)


def _add_agent(parser: argparse.ArgumentParser) -> None:
    agent = _actions(parser, "agent")
    agent_add = _command(agent, "add", "create an agent; its key is shown once", _agent_add)
    agent_add.add_argument("handle")
    agent_add.add_argument("--webhook-url", help="push its events to this URL too (signed)")
    listing = _command(
        agent, "list", "every agent, with its pending events and live sessions", _agents
    )
    listing.add_argument("--search", metavar="TEXT", help="only handles that contain it")
    show = _command(agent, "show", "one agent, by id or handle", _agent_show)
    show.add_argument("agent", metavar="ID_OR_HANDLE")
    remove = _command(agent, "rm", "delete an agent and its events", _agent_rm)
    remove.add_argument("agent", metavar="ID_OR_HANDLE")
    rotate = _command(agent, "rotate-key", "a new key for an agent, shown once", _rotate_key)
    rotate.add_argument("agent", metavar="ID_OR_HANDLE")
    rotate.add_argument(
        "--grace", type=float, default=0, metavar="SECONDS", help="how long the old key still works"
    )
    webhook = _command(agent, "set-webhook", "push an agent's events to a URL", _set_webhook)
    webhook.add_argument("agent", metavar="ID_OR_HANDLE")
    webhook.add_argument("target", metavar="URL", help="where its events are POSTed")
    openclaw = _command(agent, "set-openclaw", "push to an OpenClaw gateway", _set_openclaw)
    openclaw.add_argument("agent", metavar="ID_OR_HANDLE")
    openclaw.add_argument("target", metavar="URL", help="the gateway")
    openclaw.add_argument("--token", required=True, help="the gateway's hooks token")
    openclaw.add_argument("--mode", choices=["wake", "agent"], help="how the gateway is woken")
    guard = _command(
        agent, "set-loop-guard", "raise or lower an agent's loop guard limits", _set_loop_guard
    )
    guard.add_argument("agent", metavar="ID_OR_HANDLE")
    guard.add_argument("--exchanges", type=int, help="messages two agents may exchange a window")
    guard.add_argument("--window", type=int, metavar="SECONDS", help="the exchanges' window")
    guard.add_argument("--per-minute", type=int, help="messages it may send to agents a minute")


def _add_send(send: argparse.ArgumentParser) -> None:
    _options(send, _send)
    send.add_argument(
        "handle",
        nargs="?",
        help="the agent to send to, or several separated by commas (a,b,c): one event each",
    )
    send.add_argument(
        "--topic",
        help="send to a topic instead of agents (then only TEXT): one event for each agent"
        " subscribed to it",
    )
    send.add_argument("text", nargs="?")
    send.add_argument("--type", default="message", help="the event's type (default message)")
    send.add_argument("--data", type=_json_value, help="JSON data the event carries")
    send.add_argument("--dedupe-key", help="the same key again stores nothing new")
    send.add_argument("--reply-form", type=_json_value, help="a JSON Schema form to answer")
    send.add_argument(
        "--priority",
        choices=("low", "normal", "high", "urgent"),
        help="low: never pushed, only drained; urgent: passes quiet hours (default normal)",
    )
    later = send.add_mutually_exclusive_group()
    later.add_argument(
        "--delay",
        type=_duration,
        metavar="DURATION",
        help="deliver it this long from now (3600, 90m, 2h, up to 30d): scheduled until then",
    )
    later.add_argument(
        "--at",
        metavar="TIME",
        help="deliver it at this RFC 3339 time with its offset (2026-12-08T09:00:00+01:00)",
    )
    send.add_argument(
        "--file",
        type=Path,
        help="a JSON lines file of events ({to, type, text, ...} each), sent in batches;"
        " sending it again sends only what did not arrive",
    )


def _add_events(events: argparse.ArgumentParser) -> None:
    _options(events, _events)
    events.add_argument("--agent", metavar="ID_OR_HANDLE")
    events.add_argument(
        "--status", help="pending, sent, delivered, expired, dead, scheduled, cancelled"
    )
    events.add_argument("--type", help="an event type, or a glob such as build.*")
    events.add_argument(
        "--topic", help="the topic events were published to, or a glob such as repo/*"
    )
    events.add_argument("--since", help="an ISO 8601 time")
    events.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")


def _add_event(parser: argparse.ArgumentParser) -> None:
    event = _actions(parser, "event")
    show_event = _command(event, "show", "an event and every attempt to deliver it", _event)
    show_event.add_argument("event_id", metavar="ID")
    redeliver = _command(event, "redeliver", "offer an event again", _redeliver)
    redeliver.add_argument("event_id", metavar="ID")
    cancel = _command(
        event, "cancel", "cancel a scheduled event, or recall one nothing handed out", _cancel
    )
    cancel.add_argument("event_id", metavar="ID")


def _add_endpoints(endpoints: argparse.ArgumentParser) -> None:
    _options(endpoints, _endpoints)
    endpoints.add_argument("--failing", action="store_true", help="only those failing or off")


def _add_endpoint(parser: argparse.ArgumentParser) -> None:
    endpoint = _actions(parser, "endpoint")
    enable = _command(endpoint, "enable", "bring a disabled endpoint back", _enable)
    enable.add_argument("endpoint_id", metavar="ID")


def _add_tail(tail: argparse.ArgumentParser) -> None:
    _options(tail, _tail)
    tail.add_argument("--agent", metavar="ID_OR_HANDLE", help="only this agent's")
    tail.add_argument("--type", help="only events of this type, or of a glob such as build.*")
    tail.add_argument(
        "--max-rate",
        metavar="N",
        help="at most N items a second: the newest, and a line for what was left out",
    )


def _add_key(parser: argparse.ArgumentParser) -> None:
    key = _actions(parser, "key")
    key_add = _command(key, "add", "a publisher key, shown once", _key_add)
    key_add.add_argument("name")
    key_add.add_argument("--handle", action="append", dest="handles", help="only to this agent")
    key_add.add_argument("--type", action="append", dest="types", help="only this type (glob)")
    key_add.add_argument(
        "--sender",
        action="append",
        dest="senders",
        help="an agent (glob) its events may name in from, to get the replies; none if not given",
    )
    key_add.add_argument(
        "--topic",
        action="append",
        dest="topics",
        help="only to this topic (glob); then to no agent directly unless --handle is given",
    )
    _command(key, "list", "the publisher keys (never the keys themselves)", _keys)
    revoke = _command(key, "revoke", "a publisher key stops working at once", _key_revoke)
    revoke.add_argument("key_id", metavar="ID")


def _add_topics(parser: argparse.ArgumentParser) -> None:
    topics = _actions(parser, "topics")
    _command(topics, "list", "the topics, each with how many agents it reaches", _topics)
    add = _command(topics, "add", "declare a topic, or replace its description", _topic_add)
    add.add_argument("name", help="1-128 letters, digits and _ . : / - (repo/herald)")
    add.add_argument("description", help="what its events are about")
    show = _command(topics, "show", "one topic and the agents subscribed to it", _topic_show)
    show.add_argument("name")
    remove = _command(topics, "rm", "forget a topic and the subscriptions to its name", _topic_rm)
    remove.add_argument("name")
    for verb, help, command in (
        ("subscribe", "subscribe an agent to a topic, or a glob of them", _topic_subscribe),
        ("unsubscribe", "unsubscribe an agent (the topic as it was subscribed)", _topic_leave),
    ):
        action = _command(topics, verb, help, command)
        action.add_argument("topic", metavar="NAME_OR_GLOB")
        action.add_argument("agent", metavar="ID_OR_HANDLE")


def run(args: argparse.Namespace) -> int:
    """Run the operator's command ``args`` holds; returns the exit code. What went wrong is one
    line on stderr."""
    from herald.operator.output import Output

    try:
        api = AdminApi(args.url, args.key)
        try:
            args.operation(api, args, Output(args.json))
        finally:
            api.close()
    except HeraldError as exc:
        print(f"herald: {exc.message}", file=sys.stderr)
        return 1
    return 0


class SubCommands(Protocol):
    """What ``add_subparsers`` gives (its class is private to argparse): a place to add each
    command's parser."""

    def add_parser(self, name: str, **options: Any) -> argparse.ArgumentParser: ...


def _actions(parser: argparse.ArgumentParser, name: str) -> SubCommands:
    return parser.add_subparsers(dest=f"{name}_command", required=True)


def _command(
    commands: SubCommands,
    name: str,
    help: str,
    command: Command,
) -> argparse.ArgumentParser:
    parser = commands.add_parser(name, help=help, description=help)
    _options(parser, command)
    return parser


def _options(parser: argparse.ArgumentParser, command: Command) -> None:
    """The options every command has, and what it runs."""
    parser.add_argument(
        "--url",
        default=os.environ.get("HERALD_URL", DEFAULT_URL),
        help=f"the hub (default $HERALD_URL, or {DEFAULT_URL})",
    )
    parser.add_argument(
        "--key",
        default=os.environ.get("HERALD_ADMIN_KEY"),
        help="the admin key ($HERALD_ADMIN_KEY)",
    )
    parser.add_argument("--json", action="store_true", help="JSON lines instead of tables")
    parser.set_defaults(run=run, operation=command)


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc.msg} at character {exc.pos})") from exc


def _agent_path(agent: str) -> str:
    return f"/v1/agents/{quote(agent, safe='')}"


# Agents


def _agent_add(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    body = {"handle": args.handle, "webhook_url": args.webhook_url}
    made = api.post("/v1/agents", {k: v for k, v in body.items() if v is not None})
    out.record(made, f"agent {made['handle']}")
    out.note("The api_key is shown this once: give it to the agent now.")


def _agents(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    agents = _every(api, "/v1/agents", "agents", search=args.search)
    out.rows(agents, AGENT_COLUMNS, "agents")


def _agent_show(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    agent = api.get(_agent_path(args.agent))
    out.record(agent, f"agent {agent['handle']}")


def _agent_rm(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    api.delete(_agent_path(args.agent))
    out.note(f"agent {args.agent} deleted, with its events")


def _rotate_key(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    rotated = api.post(f"{_agent_path(args.agent)}/rotate-key", {"grace_s": args.grace})
    out.record(rotated, f"new key of {args.agent}")
    out.note("The api_key is shown this once: give it to the agent now.")


def _set_webhook(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    made = api.put(f"{_agent_path(args.agent)}/webhook", {"url": args.target})
    out.record(made, f"webhook of {args.agent}")
    out.note("The secret is shown this once: give it to the receiver now.")


def _set_openclaw(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    body = {"url": args.target, "token": args.token, "mode": args.mode}
    made = api.put(
        f"{_agent_path(args.agent)}/openclaw", {k: v for k, v in body.items() if v is not None}
    )
    out.record(made, f"OpenClaw gateway of {args.agent}")


def _set_loop_guard(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    limits = {"exchanges": args.exchanges, "window_s": args.window, "per_minute": args.per_minute}
    made = api.call("PATCH", _agent_path(args.agent), body={"loop_guard": limits})
    out.record(made["loop_guard"], f"loop guard of {args.agent}")


# Events


def _send(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    if args.file is not None:
        from herald.operator.send import send_file

        if args.handle is not None:
            raise OperatorError("send either HANDLE TEXT or --file, not both")
        send_file(api, args.file, out)
        return
    if args.topic is not None:
        _send_to_topic(api, args, out)
        return
    if args.handle is None or args.text is None:
        raise OperatorError("send needs HANDLE and TEXT (or --topic NAME TEXT, or --file)")
    # A comma list is sent as a list: herald stores the event once for each agent, or none.
    handles = args.handle.split(",") if "," in args.handle else None
    event = {
        "to": args.handle if handles is None else handles,
        "type": args.type,
        "text": args.text,
        "data": args.data,
        "dedupe_key": args.dedupe_key,
        "reply": args.reply_form,
        "delay_s": args.delay,
        "deliver_at": args.at,
        "priority": args.priority,
    }
    sent = api.post("/v1/events", {k: v for k, v in event.items() if v is not None})
    if handles is None:
        said = "scheduled" if "deliver_at" in sent else "sent"
        out.record(sent, said if not sent.get("duplicate") else "already sent (same dedupe key)")
        return
    rows = [{"to": to, **receipt} for to, receipt in zip(handles, sent["events"], strict=True)]
    if any("deliver_at" in receipt for receipt in rows):  # its seq is a placeholder until then
        out.rows(
            rows, ("to", "id", "deliver_at", "duplicate"), "scheduled, one event for each agent"
        )
        return
    out.rows(rows, ("to", "id", "seq", "duplicate"), "sent, one event for each agent")


def _send_to_topic(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    if args.text is not None:  # "herald send --topic t HANDLE TEXT" names agents and a topic
        raise OperatorError("send --topic takes only TEXT: the topic's subscribers get it")
    if args.handle is None:
        raise OperatorError("send --topic NAME needs TEXT")
    event = {
        "topic": args.topic,
        "type": args.type,
        "text": args.handle,
        "data": args.data,
        "dedupe_key": args.dedupe_key,
        "reply": args.reply_form,
        "priority": args.priority,
    }
    sent = api.post("/v1/events", {k: v for k, v in event.items() if v is not None})
    if sent["note"] is not None:
        out.note(sent["note"])
    out.rows(sent["events"], ("id", "seq", "duplicate"), f"sent to {sent['reached']} agent(s)")


def _events(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    found = api.get(
        "/v1/events",
        agent=args.agent,
        status=args.status,
        type=args.type,
        topic=args.topic,
        since=args.since,
        limit=args.limit,
    )
    out.rows(found["events"], EVENT_COLUMNS, "events, newest first")
    if found.get("next") and len(found["events"]) < args.limit:
        # A page narrowed by status, type or topic looks at a bounded number of the newest events.
        out.note("only the newest events were looked at: older ones may match; narrow with --agent")
    elif found.get("next"):
        out.note(
            "more: narrow with --since, --agent, --status, --type or --topic, or raise --limit"
        )


def _event(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    event = api.get(f"/v1/events/{quote(args.event_id, safe='')}")
    if out.as_json:
        out.record(event, "")
        return
    attempts = event.pop("attempts", [])
    deliveries = event.pop("deliveries", [])
    waiting = event.pop("waiting", None)
    out.record(event, f"event {event['id']}")
    if waiting is not None:
        out.note(f"not tried yet: {waiting}")
    else:
        out.rows(attempts, ATTEMPT_COLUMNS, "attempts, oldest first")
    if deliveries:
        out.rows(deliveries, DELIVERY_COLUMNS, "webhook and OpenClaw deliveries, next retry")


# Topics

TOPIC_COLUMNS = ("name", "subscribers", "description", "updated_at")


def _topic_path(topic: str) -> str:
    return f"/v1/topics/{quote(topic, safe='/*')}"


def _topics(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    out.rows(api.get("/v1/topics")["topics"], TOPIC_COLUMNS, "topics")


def _topic_add(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    topic = api.put(_topic_path(args.name), {"description": args.description})
    out.record(topic, f"topic {topic['name']}")


def _topic_show(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    topic = api.get(_topic_path(args.name))
    out.record(topic, f"topic {topic['name']}")
    subscribed = api.get(f"{_topic_path(args.name)}/subscribers")["subscriptions"]
    out.rows(subscribed, ("handle", "topic", "created_at"), "subscribed agents")


def _topic_rm(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    api.delete(_topic_path(args.name))
    out.note(f"topic {args.name} forgotten, with the subscriptions to its name")


def _topic_subscribe(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    path = f"{_topic_path(args.topic)}/subscribers/{quote(args.agent, safe='')}"
    listed = api.put(path, None)["subscriptions"]
    out.rows(listed, ("handle", "topic", "created_at"), f"topics of {args.agent}")


def _topic_leave(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    api.delete(f"{_topic_path(args.topic)}/subscribers/{quote(args.agent, safe='')}")
    out.note(f"{args.agent} unsubscribed from {args.topic}")


def _redeliver(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    event = api.post(f"/v1/events/{quote(args.event_id, safe='')}/redeliver")
    out.record(event, f"event {args.event_id} offered again")


def _cancel(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    event = api.delete(f"/v1/events/{quote(args.event_id, safe='')}")
    out.record(event, f"event {args.event_id} cancelled")


def _duration(text: str) -> float:
    """A ``--delay``: a number of seconds, or a duration such as ``90m``."""
    from herald.times import parse_duration

    try:
        return parse_duration(text)
    except HeraldError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# Endpoints


def _endpoints(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    failing = str(args.failing).lower()
    endpoints = _every(api, "/v1/endpoints", "endpoints", failing=failing)
    rows = [{**each, "agent": each["agent_handle"]} for each in endpoints]
    out.rows(rows, ENDPOINT_COLUMNS, "endpoints" if not args.failing else "failing endpoints")


def _every(api: AdminApi, path: str, field: str, **query: Any) -> list[dict[str, Any]]:
    """Every item of a listing the hub gives a page at a time (the largest pages it gives)."""
    found: list[dict[str, Any]] = []
    query["limit"] = LARGEST_PAGE
    while True:
        page = api.get(path, **query)
        found += page[field]
        if page["next"] is None:
            return found
        query["cursor"] = page["next"]


def _enable(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    endpoint = api.post(f"/v1/endpoints/{quote(args.endpoint_id, safe='')}/enable")
    out.record(endpoint, f"endpoint {args.endpoint_id} enabled")


# The hub


def _status(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    health = api.get("/healthz")
    ready = api.get("/readyz")
    stats = api.get("/v1/stats")
    endpoints: dict[str, int] = {}
    for row in stats["endpoints"]:
        endpoints[row["state"]] = endpoints.get(row["state"], 0) + row["count"]
    failures = sum(
        row["count"]
        for row in stats["attempts_recorded"]
        if row["outcome"] in {"failed", "undeliverable"}
    )
    oldest = stats["oldest_pending"]
    status = {
        "hub": api.url,
        "version": health.get("version"),
        "store": ready.get("status"),
        "events": stats["events"],
        "live sessions": sum(row["count"] for row in stats["sessions"]),
        "endpoints": endpoints,
        "failed attempts": failures,
        "most pending": [f"{row['handle']}: {row['pending']}" for row in stats["top_pending"]],
        "oldest pending": f"{oldest['handle']}: {oldest['created_at']}" if oldest else None,
    }
    out.record(status, "herald status")


def _tail(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    from herald.operator.tail import tail

    tail(api, args, out)


# Publisher keys


def _key_add(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    body = {
        "name": args.name,
        "scopes": ["publish"],
        "handles": args.handles,
        "types": args.types,
        "senders": args.senders,
        "topics": args.topics,
    }
    made = api.post("/v1/keys", {k: v for k, v in body.items() if v is not None})
    out.record(made, f"publisher key {args.name}")
    out.note("The key is shown this once: give it to the application now.")


def _keys(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    columns = ("id", "name", "handles", "types", "senders", "topics", "created_at")
    out.rows(api.get("/v1/keys")["keys"], columns, "keys")


def _key_revoke(api: AdminApi, args: argparse.Namespace, out: Output) -> None:
    api.delete(f"/v1/keys/{quote(args.key_id, safe='')}")
    out.note(f"key {args.key_id} revoked")


_ADDERS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "agent": _add_agent,
    "send": _add_send,
    "events": _add_events,
    "event": _add_event,
    "endpoints": _add_endpoints,
    "endpoint": _add_endpoint,
    "status": lambda status: _options(status, _status),
    "tail": _add_tail,
    "key": _add_key,
    "topics": _add_topics,
}
