// herald's MCP Events webhook subscriptions with the AI SDK's events client (@ai-sdk/mcp:
// createMCPClient's experimental_events and experimental_createMCPEventWebhook), against a real
// `herald serve --webhook-allow loopback`.
//
//   node events.mjs
//
// Environment: HERALD_URL, HERALD_ADMIN_KEY, HERALD_AGENT_KEY, HERALD_AGENT_HANDLE;
// HERALD_WAIT_MS bounds every wait (default 15000).
//
// The AI SDK's webhook handler is served on a loopback port; the client subscribes it (herald
// verifies it with a signed challenge, which the handler answers), an event is published through
// herald's admin API and must reach onEvent, verified by the handler; then a refresh keeps the
// id and an unsubscribe ends it. Then the same with the callback's origin publishing
// /.well-known/mcp-webhook-receiver.json beside the handler (the AI SDK serves no such document
// itself: its handler answers only POSTs): herald verifies the callback by the document, sends
// no challenge, and the handler takes the deliveries all the same. Prints one JSON line per check
// ({"check", "ok", "detail"}); exits 1 when a check failed, 2 when the scenario itself broke.

import { createServer } from "node:http";

import {
  experimental_createMCPClient as createMCPClient,
  experimental_createMCPEventWebhook as createMCPEventWebhook,
} from "@ai-sdk/mcp";

const WAIT_MS = Number(process.env.HERALD_WAIT_MS ?? 15000);
let failed = 0;

function emit(line) {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

function check(name, ok, detail = null) {
  if (!ok) failed += 1;
  emit({ check: name, ok: Boolean(ok), detail });
}

function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

/** `promise`, or a rejection naming `what` after WAIT_MS. */
function within(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${WAIT_MS} ms`)), WAIT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** The subscriptions the AI SDK keeps (an application would persist them). */
function memoryStore() {
  const byKey = new Map();
  return {
    async get(key) {
      return byKey.get(key);
    },
    async getById(id) {
      return [...byKey.values()].find((s) => s.id === id);
    },
    async set(subscription) {
      byKey.set(subscription.key, structuredClone(subscription));
    },
    async update(key, patch) {
      const found = byKey.get(key);
      if (found) byKey.set(key, { ...found, ...patch });
    },
    async delete(key) {
      byKey.delete(key);
    },
  };
}

/** A Node HTTP server in front of a Web Request -> Response handler. */
function serve(handler) {
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const request = new Request(`http://${req.headers.host}${req.url}`, {
      method: req.method,
      headers: req.headers,
      body: req.method === "POST" ? Buffer.concat(chunks) : undefined,
    });
    const response = await handler(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

async function publish(handle, type, text) {
  const answer = await fetch(`${env("HERALD_URL")}/v1/events`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${env("HERALD_ADMIN_KEY")}`,
      "content-type": "application/json",
    },
    body: JSON.stringify({ to: handle, type, text }),
  });
  if (answer.status !== 202) throw new Error(`publish answered ${answer.status}`);
  return (await answer.json()).id;
}

const RECEIVER_DOCUMENT = "/.well-known/mcp-webhook-receiver.json";

/**
 * The AI SDK's handler behind an origin that publishes the receiver document for /hooks/;
 * `seen` counts the document's fetches and the challenges that reach the handler.
 */
function publishing(webhook, seen) {
  return async (request) => {
    if (request.method === "GET" && new URL(request.url).pathname === RECEIVER_DOCUMENT) {
      seen.documents += 1;
      return Response.json({ receivers: ["/hooks/"] });
    }
    const body = await request.clone().text();
    if (body.startsWith('{"type":"verification"')) seen.challenges += 1;
    return webhook(request);
  };
}

/** Subscribe a callback verified by its origin's document; an event must reach onEvent. */
async function verifiedByTheDocument(client, store) {
  let arrived;
  const coming = new Promise((resolve) => (arrived = resolve));
  const webhook = createMCPEventWebhook({ store, onEvent: async ({ event }) => arrived(event) });
  const seen = { documents: 0, challenges: 0 };
  const server = await serve(publishing(webhook, seen));
  try {
    const made = await client.experimental_events.subscribe({
      name: "herald.event",
      arguments: { types: ["doc.*"] },
      delivery: {
        mode: "webhook",
        url: `http://127.0.0.1:${server.address().port}/hooks/aisdk`,
        allowInsecureLocalhost: true,
      },
      ttlMs: 600000,
    });
    check("the receiver document verifies the callback, without a challenge",
      seen.documents === 1 && seen.challenges === 0 && /^sub_/.test(made.id), { seen, made });
    const eventId = await publish(env("HERALD_AGENT_HANDLE"), "doc.received", "by the document");
    const event = await within(coming, "event at the document-verified webhook");
    check("the AI SDK's handler takes its deliveries", event.eventId === eventId, event);
    await client.experimental_events.unsubscribe({ id: made.id });
  } finally {
    server.close();
  }
}

async function main() {
  const store = memoryStore();
  const received = [];
  let arrived;
  const nextEvent = () => new Promise((resolve) => (arrived = resolve));
  const webhook = createMCPEventWebhook({
    store,
    onEvent: async ({ subscription, event }) => {
      received.push({ subscription, event });
      arrived?.(event);
    },
  });
  const server = await serve(webhook);
  const client = await createMCPClient({
    transport: {
      type: "http",
      url: `${env("HERALD_URL")}/mcp`,
      headers: { authorization: `Bearer ${env("HERALD_AGENT_KEY")}` },
    },
    experimental_events: { store },
  });
  try {
    const listed = await client.experimental_events.list();
    const entry = listed.events.find((e) => e.name === "herald.event");
    check("herald.event is offered by webhook", entry?.delivery.includes("webhook"), entry);

    const callback = `http://127.0.0.1:${server.address().port}/hook`;
    const made = await client.experimental_events.subscribe({
      name: "herald.event",
      arguments: { types: ["dm.*"] },
      delivery: { mode: "webhook", url: callback, allowInsecureLocalhost: true },
      ttlMs: 600000,
    });
    check("subscribe answers an id and a grant", /^sub_[0-9a-f]{16}$/.test(made.id) &&
      made.refreshBefore !== null && made.truncated === false, made);

    const coming = nextEvent();
    const eventId = await publish(env("HERALD_AGENT_HANDLE"), "dm.received", "hello AI SDK");
    const event = await within(coming, "event at the AI SDK's webhook");
    check("the event arrives verified at onEvent", event.eventId === eventId &&
      event.name === "herald.event" && event.data.text === "hello AI SDK", event);
    check("it carries a cursor", typeof event.cursor === "string", event.cursor);
    check("for its subscription", received[0].subscription.id === made.id, received[0].subscription);

    const refreshed = await client.experimental_events.refresh({ id: made.id });
    check("a refresh keeps the id", refreshed.id === made.id, refreshed);

    await client.experimental_events.unsubscribe({ id: made.id });
    let gone = null;
    try {
      await client.experimental_events.refresh({ id: made.id });
    } catch (error) {
      gone = String(error);
    }
    check("unsubscribe ends it", gone !== null && (await store.getById(made.id)) === undefined, gone);

    await verifiedByTheDocument(client, store);
  } finally {
    await client.close();
    server.close();
  }
}

main().then(
  () => process.exit(failed ? 1 : 0),
  (error) => {
    emit({ check: "scenario", ok: false, detail: String(error?.stack ?? error) });
    process.exit(2);
  },
);
