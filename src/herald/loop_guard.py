"""Loop guards: two agents that answer each other automatically could send thousands of
messages in minutes, each pushed into a paid model's context. Each message between agents
(``send_message``, a reply routed to an agent) carries a thread and is counted, in the
transaction that stores it, against two limits: the exchanges between the same two agents
(either direction) in a window, and the messages one agent sends a minute. Over either, the
send is refused (``errors.LoopGuardTripped``) and nothing is stored."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from herald.config import HubConfig
from herald.errors import LoopGuardTripped

if TYPE_CHECKING:
    from herald import answers

MINUTE_MS = 60_000


@dataclass(frozen=True)
class LoopLimits:
    """How many ``exchanges`` two agents may have in ``window_s`` seconds, and how many messages
    one may send a minute (``per_minute``). The sender's limits hold for its send."""

    exchanges: int
    window_s: int
    per_minute: int

    @staticmethod
    def of(config: HubConfig) -> LoopLimits:
        """The serve-wide limits ``herald serve`` was given."""
        return LoopLimits(config.loop_exchanges, config.loop_window_s, config.loop_per_minute)

    def raised(
        self, exchanges: int | None, window_s: int | None, per_minute: int | None
    ) -> LoopLimits:
        """These limits with an agent's own (None: the serve-wide one) in their place."""
        return LoopLimits(
            self.exchanges if exchanges is None else exchanges,
            self.window_s if window_s is None else window_s,
            self.per_minute if per_minute is None else per_minute,
        )

    def to_json(self) -> answers.LoopGuardLimits:
        return {
            "exchanges": self.exchanges,
            "window_s": self.window_s,
            "per_minute": self.per_minute,
        }


@dataclass(frozen=True)
class GuardedSend:
    """A message between agents about to be stored: who sends it (id and handle), to whom
    (handle), in which thread, under the serve-wide limits (the sender's own, stored, replace
    them in the transaction)."""

    sender_id: str
    sender_handle: str
    to_handle: str
    thread: str
    defaults: LoopLimits


def verdict(
    send: GuardedSend,
    limits: LoopLimits,
    nth_exchange_at: int | None,
    nth_sent_at: int | None,
    now: int,
) -> None:
    """Refuse the send if a limit is reached. ``nth_exchange_at``: when the ``exchanges``-th
    newest exchange of the two agents within the window was stored (None: fewer than that);
    ``nth_sent_at`` the same for the sender's messages of the last minute. The send may go on
    once that one leaves its window.

    Raises:
        LoopGuardTripped: naming the thread, the limit and when the send may go on.
    """
    if nth_exchange_at is not None:
        wait_ms = nth_exchange_at + limits.window_s * 1000 - now
        raise LoopGuardTripped(
            f"@{send.sender_handle} and @{send.to_handle} have exchanged {limits.exchanges}"
            f" messages in {limits.window_s} s, as many as herald allows (thread"
            f" {send.thread}): this one was not sent; send it again after"
            f" {_seconds(wait_ms)} s, or ask the operator to raise the agent's loop_guard"
            " limits (PATCH /v1/agents/{id})",
            thread=send.thread,
            limit="exchanges",
            maximum=limits.exchanges,
            window_s=limits.window_s,
            retry_after_s=wait_ms / 1000,
        )
    if nth_sent_at is not None:
        wait_ms = nth_sent_at + MINUTE_MS - now
        raise LoopGuardTripped(
            f"@{send.sender_handle} has sent {limits.per_minute} messages to agents in the last"
            f" minute, as many as herald allows (thread {send.thread}): this one was not sent;"
            f" send it again after {_seconds(wait_ms)} s, or ask the operator to raise the"
            " agent's loop_guard limits (PATCH /v1/agents/{id})",
            thread=send.thread,
            limit="per_minute",
            maximum=limits.per_minute,
            window_s=MINUTE_MS // 1000,
            retry_after_s=wait_ms / 1000,
        )


def _seconds(ms: int) -> int:
    return max(1, math.ceil(ms / 1000))
