"""Topics, as the hub keeps them (``hub.topics``): the operator declares them, and agents are
subscribed to a topic's name or to a glob of names, by themselves or by the operator. A publish
to a topic is the hub's (``Hub.publish_to_topic``): one event for each subscriber."""

from __future__ import annotations

import builtins

from herald.errors import NoSuchTopic, NotFound
from herald.inputs.topics import check_topic_glob, check_topic_name, is_glob
from herald.models import Topic, TopicSubscription
from herald.store import Store


class TopicBook:
    """The declared topics and who subscribes to them."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def put(self, name: str, description: str) -> tuple[Topic, bool]:
        """Declare a topic, or replace its description; returns it and whether it is new.

        Raises:
            InvalidInput: ``name`` is not a topic's name.
        """
        return await self._store.put_topic(check_topic_name(name), description)

    async def get(self, name: str) -> Topic:
        """Raises: InvalidInput (not a topic's name), NoSuchTopic."""
        found = await self._store.get_topic(check_topic_name(name))
        if found is None:
            raise NoSuchTopic(name)
        return found

    async def list(self) -> list[Topic]:
        return await self._store.list_topics()

    async def delete(self, name: str) -> None:
        """Forget a topic, and the subscriptions to its name (a glob that matches it stays).

        Raises:
            InvalidInput: ``name`` is not a topic's name. NoSuchTopic: none is declared so.
        """
        if not await self._store.delete_topic(check_topic_name(name)):
            raise NoSuchTopic(name)

    async def subscribe(self, agent_id: str, pattern: str) -> bool:
        """Subscribe an agent to a topic's name or a glob of names; False if it was already.
        A name must be a declared topic's (a glob may match topics declared later).

        Raises:
            InvalidInput: ``pattern`` is neither a name nor a glob. NoSuchTopic: it names a
                topic that is not declared.
        """
        check_topic_glob(pattern)
        if not is_glob(pattern) and await self._store.get_topic(pattern) is None:
            raise NoSuchTopic(pattern)
        return await self._store.subscribe_topic(agent_id, pattern)

    async def unsubscribe(self, agent_id: str, pattern: str) -> None:
        """Raises: InvalidInput (not a pattern), NotFound (the agent has no such
        subscription)."""
        if not await self._store.unsubscribe_topic(agent_id, check_topic_glob(pattern)):
            raise NotFound(
                f"the agent is not subscribed to {pattern!r}; GET its subscriptions to see them"
            )

    async def of_agent(self, agent_id: str) -> builtins.list[TopicSubscription]:
        """An agent's subscriptions, by pattern."""
        return await self._store.topic_subscriptions(agent_id=agent_id)

    async def subscribers(self, name: str) -> builtins.list[TopicSubscription]:
        """The subscriptions that a publish to the topic ``name`` reaches now.

        Raises:
            InvalidInput: ``name`` is not a topic's name. NoSuchTopic: none is declared so.
        """
        await self.get(name)
        return await self._store.topic_subscriptions(topic=name)
