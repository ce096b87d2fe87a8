"""``GET /docs``: one HTML page made of the OpenAPI document, every route and every shape on it,
nothing fetched from elsewhere and no script, light or dark as the reader's system is."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from herald.http.app import create_app
from herald.http.openapi import document
from herald.http.reference import render
from herald.hub import Hub

VOID = {"meta", "br", "hr", "img", "input", "link"}


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    store: Path = tmp_path_factory.mktemp("never-opened") / "herald.db"
    found = document(create_app(Hub.from_url(f"sqlite:///{store}")).routes)
    return render(found), found


def test_every_route_and_every_shape_of_the_document_is_on_the_page(
    page: tuple[str, dict[str, Any]],
) -> None:
    html, found = page
    for path, methods in found["paths"].items():
        for method, operation in methods.items():
            anchor = f'id="{operation["operationId"]}"'
            assert anchor in html, f"{method.upper()} {path} is not on the page"
            section = html[html.index(anchor) :].split("</section>", 1)[0]
            assert path in section and method.upper() in section
            for status in operation["responses"]:
                assert f"<code>{status}</code>" in section, f"{method} {path}: {status}"
    for name in found["components"]["schemas"]:
        assert f'id="shape-{name}"' in html, f"the shape {name} is not on the page"
    links = set(re.findall(r'href="#(shape-[^"]+)"', html))
    assert links <= {f"shape-{name}" for name in found["components"]["schemas"]}


def test_the_page_needs_nothing_from_elsewhere_and_no_script(
    page: tuple[str, dict[str, Any]],
) -> None:
    html, _ = page
    assert "<script" not in html.lower()
    assert "@import" not in html and "url(" not in html
    assert re.findall(r'(?:src|href)="(?!#|/)[^"]*"', html) == []
    assert "prefers-color-scheme: dark" in html and 'name="viewport"' in html


def test_the_page_is_well_formed_and_what_it_quotes_is_escaped(
    page: tuple[str, dict[str, Any]],
) -> None:
    html, found = page
    _assert_balanced(html)
    hostile = {
        **found,
        "info": {**found["info"], "summary": "<img src=x onerror=alert(1)> `code`"},
    }
    shown = render(hostile)
    assert "<img src=x" not in shown
    assert "&lt;img src=x onerror=alert(1)&gt; <code>code</code>" in shown
    _assert_balanced(shown)


def _assert_balanced(html: str) -> None:
    class Tags(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.open: list[str] = []

        def handle_starttag(self, tag: str, attrs: Any) -> None:
            if tag not in VOID:
                self.open.append(tag)

        def handle_endtag(self, tag: str) -> None:
            assert self.open and self.open[-1] == tag, f"</{tag}> closes {self.open[-3:]}"
            self.open.pop()

    tags = Tags()
    tags.feed(html)
    assert tags.open == [], f"never closed: {tags.open}"
