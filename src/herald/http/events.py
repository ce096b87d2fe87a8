"""Publishing events (one, or a batch of up to 1,000, each for one agent or a list of them)
with the admin key or a publisher key within its scope, reading one back with its attempts and
replies, listing them page by page, and offering one again."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald import answers
from herald.errors import InvalidInput, NotFound
from herald.http.auth import admin_or_agent, admin_or_publisher, require_admin
from herald.http.described import ADMIN_ONLY, JSON, Answer, described
from herald.http.io import json_of, json_response, read_body
from herald.http.limits import ADMIN, PublishRate
from herald.http.services import services
from herald.hub import Hub
from herald.hub.publisher_keys import check_scope, check_topic_scope
from herald.inputs.events import (
    CheckedBatches,
    Lists,
    PublishInput,
    PublishQuery,
    is_topic_publish,
    parse_publish,
    parse_topic_event,
    read_publish,
    stored_count,
)
from herald.inputs.listing import EventListingInput, listing_position, page_cursor
from herald.inputs.refusals import parse
from herald.models import EventStatus, NewEvent, Published, is_scheduled
from herald.overview import EventQuery, why_waiting
from herald.times import iso_ms


@described(
    "Publish an event, or a batch of up to 1,000",
    keys=("admin", "publisher"),
    body=PublishInput,
    query=PublishQuery,
    answers={
        202: Answer(
            "Published: at least one event is new. A receipt for one event for one agent; for a"
            " batch or a list of handles, the receipts of the events stored, in order.",
            {JSON: answers.Receipt | answers.Receipts | answers.TopicPublished},
        ),
        200: Answer(
            "Every event was published before (the same dedupe_key): nothing new. With"
            " dry_run=true: every event would be taken, and none was stored.",
            {JSON: answers.Receipt | answers.Receipts | answers.Checked},
        ),
    },
    errors=(404, 429),
    description=(
        "An object publishes one event, an array a batch (each item in order, all or none);"
        " the answer is a receipt, or one per item. An event's to may be a list of up to 1,000"
        " handles, each once: the event is stored once for each agent (each its own id, seq"
        " and status; a dedupe_key holds for each agent on its own), in one transaction with"
        ' the rest, and the answer is {"events": [...]}, a receipt for each event stored in'
        " order: an item for a list gives one for each of its handles, in the list's order."
        " A list naming a handle no agent has is refused whole (422, naming it), as is one"
        " naming an agent twice; a publish stores at most 1,000 events in all. A publisher"
        " key limited to handles must cover every handle of a list. With dry_run=true each"
        " event is checked as a publish would check it (its fields, the key's scope, its"
        " type's payload schema, its addressees) and nothing is stored; a dry run does not"
        " count against the publish rate. An object with topic instead of to (not both: 422)"
        " publishes to a declared topic (404 if it is not): the event is stored once for each"
        " agent subscribed to it at that moment, in one transaction, and the answer says how"
        " many it reached, with each one's receipt; none subscribed is a 202 that says so."
        " A publish to a topic counts once against the publish rate; a publisher key limited"
        " to topics may publish only to those, one limited to handles to none."
    ),
)
async def publish(request: Request) -> Response:
    found = services(request)
    hub, limits = found.hub, found.limits
    publisher = await admin_or_publisher(hub, request)
    caller = ADMIN if publisher is None else publisher.id
    dry_run = _dry_run(request)
    raw = await read_body(request)
    if b'"topic"' in raw and is_topic_publish(body := json_of(raw)):
        topic, event = parse_topic_event(body)
        if publisher is not None:
            check_topic_scope(publisher, topic, event)
        return await _to_topic(hub, limits.publish, caller, topic, event, dry_run)
    events, batch, lists = _events_of(raw, dry_run, found.checked_batches)
    if publisher is not None:
        check_scope(publisher, events, batch=batch, lists=lists)
    if dry_run:
        return await _checked(hub, limits.publish, events, lists)
    limits.publish.take(caller, len(events) if lists is None else stored_count(events, lists))
    results = await hub.publish_many(events, lists)
    if is_scheduled(events[0]):  # then all are
        return _scheduled_receipts(results, batch or lists is not None)
    if not batch and lists is None:
        (published,) = results
        receipt = _receipt(published.event.id, published.event.seq, published.created)
        return json_response(receipt, 202 if published.created else 200)
    status = 202 if any(r.created for r in results) else 200
    receipts: answers.Receipts = {
        # Written out, not a call of _receipt per event: the call costs more than the dict.
        "events": [
            {"id": r.event.id, "seq": r.event.seq, "duplicate": not r.created} for r in results
        ]
    }
    return json_response(receipts, status)


async def _to_topic(
    hub: Hub, rate: PublishRate, caller: str, topic: str, event: NewEvent, dry_run: bool
) -> Response:
    """A publish to a topic, answered with how many agents it reached (each its receipt): 202
    even when none is subscribed (the answer's note says so). A dry run counts them."""
    if dry_run:
        checked: answers.Checked = {"checked": await hub.check_topic_publish(topic, event)}
        return json_response(checked)
    rate.take(caller, 1)
    results = await hub.publish_to_topic(topic, event)
    answer: answers.TopicPublished = {
        "topic": topic,
        "reached": len(results),
        "events": [_receipt_of(r) for r in results],
        "note": None if results else NO_SUBSCRIBER.format(topic=topic),
    }
    created = not results or any(r.created for r in results)
    return json_response(answer, 202 if created else 200)


NO_SUBSCRIBER = (
    "no agent is subscribed to {topic!r}, so no event was stored; an agent subscribes with"
    " POST /channel/topics (or the operator, with PUT /v1/topics/{topic}/subscribers/AGENT)"
)


def _events_of(
    raw: bytes, dry_run: bool, checked: CheckedBatches
) -> tuple[list[NewEvent], bool, Lists | None]:
    """A publish body's events, checked, whether it is a batch, and the handles of each event
    for a list of them (None: none is).

    Raises:
        InvalidInput, TooLarge: as ``json_of`` and ``parse_publish``.
    """
    remembered = checked.parsed(raw)  # a batch a dry run passed: its fields are as they were
    if remembered is not None:
        return remembered, True, None
    read = read_publish(raw)
    if read is not None:
        events, batch = read
        lists = None
    else:  # the full checks, which name what is wrong (and take lists of handles)
        events, batch, lists = parse_publish(json_of(raw))
    # Its publish, if it follows, need not check again (a schedule's fields are read in full).
    if batch and lists is None and dry_run and not any(is_scheduled(e) for e in events):
        checked.remember(raw)
    return events, batch, lists


def _dry_run(request: Request) -> bool:
    """Whether the publish asks for a dry run: without a query string (as nearly every publish
    is sent), nothing needs a check."""
    if not request.scope["query_string"]:
        return False
    return parse(PublishQuery, dict(request.query_params)).dry_run == "true"


async def _checked(
    hub: Hub, rate: PublishRate, events: list[NewEvent], lists: Lists | None
) -> Response:
    """A dry run's answer: the events checked as their publish would be, nothing stored."""
    count = stored_count(events, lists)
    rate.check_size(count)
    await hub.check_publish(events, lists)
    checked: answers.Checked = {"checked": count}
    return json_response(checked)


@described(
    "Read an event",
    keys=("admin", "agent"),
    answers={200: answers.EventDetail},
    errors=(404,),
    description=(
        "With its delivery attempts, its replies and its webhook and OpenClaw deliveries. An"
        " agent's key reads only its own events."
    ),
)
async def get_event(request: Request) -> Response:
    hub = services(request).hub
    viewer = await admin_or_agent(hub, request)
    event, attempts = await hub.get_event(request.path_params["event_id"], viewer=viewer)
    replies = await hub.replies(event.id)
    deliveries = await hub.endpoints.deliveries(event.id)
    waiting = None  # told the admin: it names the agent's endpoints and their errors
    if viewer is None and event.status is EventStatus.PENDING and not attempts and not deliveries:
        sessions = await hub.presence.live(event.agent_id)
        waiting = why_waiting(sessions, await hub.endpoints.of_agent(event.agent_id))
    detail: answers.EventDetail = {
        **event.to_json(),
        "attempts": [a.to_json() for a in attempts],
        "replies": [r.to_json() for r in replies],
        "deliveries": [d.to_json() for d in deliveries],
        "waiting": waiting,
    }
    return json_response(detail)


@described(
    "List events",
    keys=ADMIN_ONLY,
    query=EventListingInput,
    answers={200: answers.EventPage},
    description=(
        "Events of every agent (or one), newest first, a page at a time: next is the cursor"
        " of the page after (null: this is the last). Every agent's are in the order they were"
        " created (created_at, then id); one agent's in the order they were stored (seq), those"
        " not yet numbered first (scheduled: an event takes its seq when it is due; or"
        " cancelled before that), newest published first, and since and until then narrow the"
        " page as type, topic and status do (topic: the name of the topic events were"
        " published to, or a glob of names; direct events have none). A narrowed page looks"
        " through a bounded number of events (herald serve --scan-events): it may be short,"
        " even empty, and still have a next, which goes on where its look ended. A cursor of"
        " one agent's events from before they were listed by seq is refused (422): start"
        " again from the first page."
    ),
)
async def list_events(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    asked = parse(EventListingInput, dict(request.query_params))
    query = EventQuery(
        agent_id=await agent_id_named(hub, asked.agent) if asked.agent is not None else None,
        status=EventStatus(asked.status) if asked.status is not None else None,
        type=asked.type,
        topic=asked.topic,
        since_ms=asked.since,
        until_ms=asked.until,
        before=listing_position(asked.agent, asked.cursor),
        limit=asked.limit,
    )
    page, following = await hub.overview.page(query)
    answer: answers.EventPage = {
        "events": [event.to_json() for event in page],
        "next": page_cursor(following) if following is not None else None,
    }
    return json_response(answer)


async def agent_id_named(hub: Hub, value: str) -> str:
    """The id of the agent a query names by id or handle.

    Raises:
        InvalidInput: it names no agent.
    """
    try:
        return (await hub.agent_by_id_or_handle(value)).id
    except NotFound:
        raise InvalidInput(
            f"query.agent names no agent: {value!r} is neither an agent's id nor its handle"
        ) from None


@described(
    "Offer an event again",
    keys=ADMIN_ONLY,
    answers={200: answers.Event},
    errors=(404, 409),
    description="The event is pending again, and delivered as if it were new.",
)
async def redeliver(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    event = await hub.redeliver(request.path_params["event_id"])
    return json_response(event.to_json())


def _receipt(event_id: str, seq: int, created: bool) -> answers.Receipt:
    return {"id": event_id, "seq": seq, "duplicate": not created}


def _receipt_of(published: Published) -> answers.Receipt:
    """A published event's receipt, with its due time if it is scheduled."""
    receipt = _receipt(published.event.id, published.event.seq, published.created)
    if published.event.deliver_at is not None:
        receipt["deliver_at"] = iso_ms(published.event.deliver_at)
    return receipt


def _scheduled_receipts(results: list[Published], several: bool) -> Response:
    """The receipts of a scheduled publish, each with its event's due time."""
    receipts = [_receipt_of(published) for published in results]
    status = 202 if any(r.created for r in results) else 200
    if not several:
        return json_response(receipts[0], status)
    answer: answers.Receipts = {"events": receipts}
    return json_response(answer, status)


@described(
    "Cancel a scheduled event, or recall a pending one",
    keys=("admin", "publisher"),
    answers={200: answers.Event},
    errors=(404, 409),
    description=(
        "A scheduled event (published with deliver_at or delay_s) is cancelled before it is"
        " due; a pending one is recalled only if nothing has handed it out yet (never leased,"
        " pushed, delivered or tried by a webhook). Either way it becomes cancelled, is kept,"
        " is offered by no way, and the cancel is one of its attempts. Otherwise 409, saying"
        " why. A publisher key cancels only an event it may publish (403 otherwise, changing"
        " nothing): for an agent among its handles, or, for a key limited to topics, an agent"
        " subscribed to one of them as it is cancelled; of a type and naming a sender (from)"
        " the key allows."
    ),
)
async def cancel(request: Request) -> Response:
    hub = services(request).hub
    publisher = await admin_or_publisher(hub, request)
    event = await hub.cancel(request.path_params["event_id"], publisher)
    return json_response(event.to_json())


ROUTES = [
    Route("/v1/events", publish, methods=["POST"]),
    Route("/v1/events", list_events, methods=["GET"]),
    Route("/v1/events/{event_id}", get_event, methods=["GET"]),
    Route("/v1/events/{event_id}", cancel, methods=["DELETE"]),
    Route("/v1/events/{event_id}/redeliver", redeliver, methods=["POST"]),
]
