"""``GET /docs``: the API reference, one HTML page made of the OpenAPI document: the routes by
group, with the key each takes, its parameters, its body's fields and its answers, then every
shape they name. No script and nothing fetched from elsewhere; light or dark as the reader's
system is, and readable on a phone."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from herald.http.described import NO_KEY, Answer, described
from herald.http.openapi import cached_document
from herald.http.services import serving_app

REF_PREFIX = "#/components/schemas/"
_CODE = re.compile(r"``(.+?)``|`(.+?)`")

STYLE = """
:root { color-scheme: light dark; --fg: #1d1f23; --bg: #fff; --muted: #5d6470; --line: #dde1e6;
  --code: #f3f4f6; --accent: #0b5cad; --get: #1f7a3d; --post: #0b5cad; --put: #8a5a00;
  --patch: #6b3fa0; --delete: #b3261e; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6e8eb; --bg: #15171a; --muted: #9aa3ad; --line: #2e3238; --code: #22262b;
    --accent: #7ab7ff; --get: #6fd08c; --post: #7ab7ff; --put: #f0c060; --patch: #c7a3f5;
    --delete: #ff8a80; }
}
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--fg); background: var(--bg); }
main { max-width: 60rem; margin: 0 auto; padding: 1rem; }
a { color: var(--accent); }
h1 { font-size: 1.6rem; margin: 0.5rem 0; }
h2 { font-size: 1.3rem; margin-top: 2.5rem; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.05rem; margin: 0 0 0.25rem; overflow-wrap: anywhere; }
h4 { font-size: 0.95rem; margin: 1rem 0 0.25rem; color: var(--muted); }
code { font: 0.9em ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  background: var(--code); padding: 0.05em 0.3em; border-radius: 4px; overflow-wrap: anywhere; }
section.route, section.shape { border: 1px solid var(--line); border-radius: 8px;
  padding: 0.75rem 1rem; margin: 1rem 0; }
.method { font-weight: 700; font-family: ui-monospace, monospace; margin-right: 0.4rem; }
.GET { color: var(--get); } .POST { color: var(--post); } .PUT { color: var(--put); }
.PATCH { color: var(--patch); } .DELETE { color: var(--delete); }
.muted { color: var(--muted); }
.table { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: 0.92rem; }
th, td { text-align: left; vertical-align: top; padding: 0.3rem 0.5rem;
  border-bottom: 1px solid var(--line); }
th { color: var(--muted); font-weight: 600; }
td:first-child code { white-space: nowrap; }
nav ul { padding-left: 1.2rem; } nav li { margin: 0.1rem 0; }
@media (max-width: 40rem) {
  /* On a phone each row is a card: its cells one under another, the heading row left out. */
  table, tbody, tr, td { display: block; width: 100%; }
  tr:first-child { display: none; }
  tr { border-bottom: 1px solid var(--line); padding: 0.4rem 0; }
  td { border: none; padding: 0.1rem 0; }
  td:empty { display: none; }
}
a:focus-visible { outline: 2px solid var(--accent); outline-offset: 2px; }
"""


@described(
    "This reference, as a web page",
    keys=NO_KEY,
    answers={200: Answer("The API reference.", {"text/html": str})},
    uses_store=False,
    tag="reference",
)
async def docs(request: Request) -> Response:
    state = serving_app(request).state
    page: str | None = getattr(state, "reference_page", None)
    if page is None:
        page = await anyio.to_thread.run_sync(render, await cached_document(request))
        state.reference_page = page
    return HTMLResponse(page)


def render(document: dict[str, Any]) -> str:
    """The reference page of an OpenAPI document."""
    info = document["info"]
    groups = _groups(document)
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_text(info['title'])} API reference</title>",
        f"<style>{STYLE}</style></head><body><main>",
        f"<h1>{_text(info['title'])} API reference</h1>",
        f'<p class="muted">Version {_text(info["version"])}. The same in OpenAPI 3.1:'
        ' <a href="/openapi.json">/openapi.json</a>.</p>',
        f"<p>{_prose(info.get('summary', ''))}</p><p>{_prose(info.get('description', ''))}</p>",
        _keys(document["components"].get("securitySchemes", {})),
        _contents(groups),
    ]
    for tag, operations in groups.items():
        parts.append(f'<h2 id="tag-{_text(tag)}">{_text(tag)}</h2>')
        parts.append(f"<p>{_prose(_tag_description(document, tag))}</p>")
        parts += [_route(method, path, operation) for method, path, operation in operations]
    parts.append('<h2 id="shapes">Shapes</h2>')
    parts += [_shape(name, schema) for name, schema in document["components"]["schemas"].items()]
    parts.append("</main></body></html>")
    return "\n".join(parts)


def _groups(document: dict[str, Any]) -> dict[str, list[tuple[str, str, dict[str, Any]]]]:
    groups: dict[str, list[tuple[str, str, dict[str, Any]]]] = {
        tag["name"]: [] for tag in document.get("tags", [])
    }
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            tag = (operation.get("tags") or ["other"])[0]
            groups.setdefault(tag, []).append((method.upper(), path, operation))
    return {tag: operations for tag, operations in groups.items() if operations}


def _tag_description(document: dict[str, Any], name: str) -> str:
    return next(
        (t.get("description", "") for t in document.get("tags", []) if t["name"] == name), ""
    )


def _keys(schemes: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td><code>{_text(name)}</code></td>"
        f"<td>{_text(scheme.get('bearerFormat', ''))}</td>"
        f"<td>{_prose(scheme.get('description', ''))}</td></tr>"
        for name, scheme in schemes.items()
    )
    return (
        "<h2 id='keys'>Keys</h2><p>Send a key as <code>Authorization: Bearer &lt;key&gt;</code>."
        "</p><div class='table'><table><tr><th>key</th><th>looks like</th><th>what it may do</th>"
        f"</tr>{rows}</table></div>"
    )


def _contents(groups: dict[str, list[tuple[str, str, dict[str, Any]]]]) -> str:
    items = []
    for tag, operations in groups.items():
        links = "".join(
            f'<li><a href="#{_text(op["operationId"])}"><span class="method {method}">{method}'
            f"</span>{_text(path)}</a></li>"
            for method, path, op in operations
        )
        items.append(f'<li><a href="#tag-{_text(tag)}">{_text(tag)}</a><ul>{links}</ul></li>')
    return f"<nav aria-label='Routes'><h2>Routes</h2><ul>{''.join(items)}</ul></nav>"


def _route(method: str, path: str, operation: dict[str, Any]) -> str:
    keys = [name for option in operation.get("security", []) for name in option]
    needs = " or ".join(f"<code>{_text(k)}</code>" for k in keys) if keys else "none"
    parts = [
        f'<section class="route" id="{_text(operation["operationId"])}">',
        f'<h3><span class="method {method}">{method}</span><code>{_text(path)}</code></h3>',
        f"<p>{_prose(operation.get('summary', ''))}. <span class='muted'>Key: {needs}.</span></p>",
    ]
    if operation.get("description"):
        parts.append(f"<p>{_prose(operation['description'])}</p>")
    if operation.get("parameters"):
        rows = [
            (
                f"<code>{_text(p['name'])}</code> <span class='muted'>{_text(p['in'])}</span>",
                _type(p.get("schema", {})),
                "required" if p.get("required") else "",
                _prose(p.get("description", "")),
            )
            for p in operation["parameters"]
        ]
        parts.append("<h4>Parameters</h4>" + _table(("name", "type", "", ""), rows))
    body = operation.get("requestBody")
    if body:
        for media, content in body["content"].items():
            optional = "" if body.get("required") else " (may be left out)"
            parts.append(
                f"<h4>Body{optional}</h4><p><code>{_text(media)}</code>: "
                f"{_type(content.get('schema', {}))}</p>"
            )
    answers = [
        (
            f"<code>{_text(status)}</code>",
            _prose(answer.get("description", "")),
            "<br>".join(
                f"{_type(content.get('schema', {}))} <span class='muted'>{_text(media)}</span>"
                for media, content in answer.get("content", {}).items()
            ),
        )
        for status, answer in operation["responses"].items()
    ]
    parts.append("<h4>Answers</h4>" + _table(("status", "", "body"), answers))
    parts.append("</section>")
    return "\n".join(parts)


def _shape(name: str, schema: dict[str, Any]) -> str:
    parts = [f'<section class="shape" id="shape-{_text(name)}"><h3>{_text(name)}</h3>']
    if schema.get("description"):
        parts.append(f"<p>{_prose(schema['description'])}</p>")
    properties = schema.get("properties")
    if properties:
        required = set(schema.get("required", ()))
        rows = [
            (
                f"<code>{_text(field)}</code>",
                _type(value),
                "required" if field in required else "",
                _prose(value.get("description", "")),
            )
            for field, value in properties.items()
        ]
        parts.append(_table(("field", "type", "", ""), rows))
        if schema.get("additionalProperties") is False:
            parts.append("<p class='muted'>No other field is taken.</p>")
    else:
        parts.append(f"<p>{_type(schema)}</p>")
    parts.append("</section>")
    return "\n".join(parts)


def _table(heads: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    head = "".join(f"<th>{_text(h)}</th>" for h in heads)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<div class='table'><table><tr>{head}</tr>{body}</table></div>"


def _type(schema: dict[str, Any]) -> str:
    """A schema in a few words, its named shapes linked."""
    if "$ref" in schema:
        name = str(schema["$ref"]).removeprefix(REF_PREFIX)
        return f'<a href="#shape-{_text(name)}">{_text(name)}</a>'
    for combined in ("anyOf", "oneOf"):
        if combined in schema:
            return " or ".join(_type(kind) for kind in schema[combined])
    if "const" in schema:
        return f"<code>{_text(json.dumps(schema['const']))}</code>"
    if "enum" in schema:
        return "one of " + ", ".join(f"<code>{_text(json.dumps(v))}</code>" for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        words = f"array of {_type(schema.get('items', {}))}"
    elif kind is None:
        words = "any JSON"
    else:
        words = _text(str(kind))
    return words + _bounds(schema)


def _bounds(schema: dict[str, Any]) -> str:
    said = []
    if "format" in schema:
        said.append(_text(schema["format"]))
    if "pattern" in schema:
        said.append(f"matching <code>{_text(schema['pattern'])}</code>")
    low = schema.get("minimum", schema.get("minLength", schema.get("minItems")))
    high = schema.get("maximum", schema.get("maxLength", schema.get("maxItems")))
    if "exclusiveMinimum" in schema:
        said.append(f"over {schema['exclusiveMinimum']}")
    if low is not None or high is not None:
        said.append(f"{'' if low is None else low}–{'' if high is None else high}")
    if "default" in schema:
        said.append(f"default <code>{_text(json.dumps(schema['default']))}</code>")
    return f" <span class='muted'>({', '.join(said)})</span>" if said else ""


def _text(value: str) -> str:
    return html.escape(value, quote=True)


def _prose(value: str) -> str:
    """Text, with ``code`` and `code` set as code."""
    return _CODE.sub(lambda m: f"<code>{m[1] or m[2]}</code>", _text(value))


ROUTES = [Route("/docs", docs, methods=["GET"])]
