"""Topics: the admin declares them, lists them (with how many agents each reaches), reads one,
forgets one, and subscribes agents to them or unsubscribes them; an agent lists, adds and removes
its own subscriptions (``/channel/topics``). A subscription is a topic's name or a glob of names;
publishing to a topic is ``POST /v1/events`` with ``topic`` (``herald.http.events``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald import answers
from herald.http.auth import require_admin, require_agent
from herald.http.described import ADMIN_ONLY, AGENT_ONLY, JSON, Answer, described
from herald.http.io import json_response, read_json
from herald.http.services import services
from herald.inputs.refusals import parse
from herald.inputs.topics import TopicInput, TopicSubscribeInput
from herald.models import TopicSubscription


@described(
    "Declare a topic",
    keys=ADMIN_ONLY,
    body=TopicInput,
    answers={
        201: answers.Topic,
        200: Answer("The topic was declared before: this replaced its description.",
                    {JSON: answers.Topic}),
    },
    description=(
        "A name agents subscribe to (by the name, or a glob of names such as repo/*): a"
        ' publish with {"topic": name} stores one event for each agent subscribed at that'
        " moment. A name is 1-128 letters, digits and _ . : / -."
    ),
)  # fmt: skip
async def put_topic(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    body = parse(TopicInput, await read_json(request))
    topic, created = await hub.topics.put(request.path_params["topic"], body.description)
    return json_response(topic.to_json(), 201 if created else 200)


@described("List the topics", keys=ADMIN_ONLY, answers={200: answers.Topics})
async def list_topics(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    listed: answers.Topics = {"topics": [each.to_json() for each in await hub.topics.list()]}
    return json_response(listed)


@described("Read a topic", keys=ADMIN_ONLY, answers={200: answers.Topic}, errors=(404, 422))
async def get_topic(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    return json_response((await hub.topics.get(request.path_params["topic"])).to_json())


@described(
    "Forget a topic",
    keys=ADMIN_ONLY,
    answers={204: None},
    errors=(404, 422),
    description="The subscriptions to its name go with it; globs that match it stay.",
)
async def delete_topic(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    await hub.topics.delete(request.path_params["topic"])
    return Response(status_code=204)


@described(
    "List a topic's subscribers",
    keys=ADMIN_ONLY,
    answers={200: answers.TopicSubscriptions},
    errors=(404, 422),
    description="The subscriptions a publish to the topic reaches now (an agent may have two).",
)
async def list_subscribers(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    return _subscriptions(await hub.topics.subscribers(request.path_params["topic"]))


@described(
    "Subscribe an agent to a topic",
    keys=ADMIN_ONLY,
    answers={
        201: Answer("Subscribed.", {JSON: answers.TopicSubscriptions}),
        200: Answer("The agent was subscribed already.", {JSON: answers.TopicSubscriptions}),
    },
    errors=(404, 422),
    description=(
        "The topic is a declared topic's name or a glob of names (repo/*); the answer lists"
        " the agent's subscriptions."
    ),
)
async def subscribe_agent(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    agent = await hub.agent_by_id_or_handle(request.path_params["agent_id"])
    created = await hub.topics.subscribe(agent.id, request.path_params["topic"])
    return _subscriptions(await hub.topics.of_agent(agent.id), 201 if created else 200)


@described(
    "Unsubscribe an agent from a topic",
    keys=ADMIN_ONLY,
    answers={204: None},
    errors=(404, 422),
    description="The topic as the agent subscribed to it: a name, or a glob.",
)
async def unsubscribe_agent(request: Request) -> Response:
    hub = services(request).hub
    await require_admin(hub, request)
    agent = await hub.agent_by_id_or_handle(request.path_params["agent_id"])
    await hub.topics.unsubscribe(agent.id, request.path_params["topic"])
    return Response(status_code=204)


@described(
    "List the agent's topics",
    keys=AGENT_ONLY,
    answers={200: answers.TopicSubscriptions},
    description="The topics (names or globs) the agent is subscribed to.",
)
async def own_topics(request: Request) -> Response:
    hub = services(request).hub
    agent = await require_agent(hub, request)
    return _subscriptions(await hub.topics.of_agent(agent.id))


@described(
    "Subscribe the agent to a topic",
    keys=AGENT_ONLY,
    body=TopicSubscribeInput,
    answers={
        201: Answer("Subscribed.", {JSON: answers.TopicSubscriptions}),
        200: Answer("The agent was subscribed already.", {JSON: answers.TopicSubscriptions}),
    },
    errors=(404, 422),
    description=(
        "A declared topic's name, or a glob of names (repo/*): each event published to a"
        " topic it matches from now on is the agent's own, delivered as any other. The answer"
        " lists the agent's subscriptions."
    ),
)
async def subscribe(request: Request) -> Response:
    hub = services(request).hub
    agent = await require_agent(hub, request)
    body = parse(TopicSubscribeInput, await read_json(request))
    created = await hub.topics.subscribe(agent.id, body.topic)
    return _subscriptions(await hub.topics.of_agent(agent.id), 201 if created else 200)


@described(
    "Subscribe the agent to a topic, named in the path",
    keys=AGENT_ONLY,
    answers={
        201: Answer("Subscribed.", {JSON: answers.TopicSubscriptions}),
        200: Answer("The agent was subscribed already.", {JSON: answers.TopicSubscriptions}),
    },
    errors=(404, 422),
    description="As POST /channel/topics with the topic (a name or a glob) in the path.",
)
async def subscribe_named(request: Request) -> Response:
    hub = services(request).hub
    agent = await require_agent(hub, request)
    created = await hub.topics.subscribe(agent.id, request.path_params["topic"])
    return _subscriptions(await hub.topics.of_agent(agent.id), 201 if created else 200)


@described(
    "Unsubscribe the agent from a topic",
    keys=AGENT_ONLY,
    answers={204: None},
    errors=(404, 422),
    description="The topic as the agent subscribed to it: a name, or a glob.",
)
async def unsubscribe(request: Request) -> Response:
    hub = services(request).hub
    agent = await require_agent(hub, request)
    await hub.topics.unsubscribe(agent.id, request.path_params["topic"])
    return Response(status_code=204)


def _subscriptions(listed: list[TopicSubscription], status: int = 200) -> Response:
    answer: answers.TopicSubscriptions = {"subscriptions": [s.to_json() for s in listed]}
    return json_response(answer, status)


# A topic's name holds / (repo/herald): the routes of its subscribers come first, so that
# /v1/topics/repo/herald/subscribers/alice is not read as the topic "repo/herald/subscribers/...".
ROUTES = [
    Route("/v1/topics", list_topics, methods=["GET"]),
    Route("/v1/topics/{topic:path}/subscribers", list_subscribers, methods=["GET"]),
    Route("/v1/topics/{topic:path}/subscribers/{agent_id}", subscribe_agent, methods=["PUT"]),
    Route("/v1/topics/{topic:path}/subscribers/{agent_id}", unsubscribe_agent, methods=["DELETE"]),
    Route("/v1/topics/{topic:path}", put_topic, methods=["PUT"]),
    Route("/v1/topics/{topic:path}", get_topic, methods=["GET"]),
    Route("/v1/topics/{topic:path}", delete_topic, methods=["DELETE"]),
    Route("/channel/topics", own_topics, methods=["GET"]),
    Route("/channel/topics", subscribe, methods=["POST"]),
    Route("/channel/topics/{topic:path}", subscribe_named, methods=["PUT"]),
    Route("/channel/topics/{topic:path}", unsubscribe, methods=["DELETE"]),
]
