"""``check_origin``: a ``--cors-origin`` is taken only as a browser writes its ``Origin`` header,
and one written otherwise is refused with the origin to write instead, when there is one."""

from __future__ import annotations

import re

import pytest

from herald.config import HttpConfig
from herald.errors import InvalidInput
from herald.origins import check_origin


@pytest.mark.parametrize(
    "origin",
    [
        "https://app.example.com",
        "http://localhost:5173",
        "http://127.0.0.1:8080",
        "http://[::1]:3000",
        "https://xn--bcher-kva.example",
    ],
)
def test_an_origin_as_browsers_write_it_is_taken(origin: str) -> None:
    assert check_origin(origin, "the origin") == origin
    assert HttpConfig(cors_origins=(origin,)).cors_origins == (origin,)


@pytest.mark.parametrize(
    ("written", "instead"),
    [
        ("https://app.example.com/", "https://app.example.com"),
        ("HTTPS://App.Example.com", "https://app.example.com"),
        ("https://app.example.com:443", "https://app.example.com"),
        ("http://localhost:80/", "http://localhost"),
    ],
)
def test_an_origin_written_otherwise_is_refused_with_the_one_to_write(
    written: str, instead: str
) -> None:
    said = re.escape(f"written as a browser sends it: '{instead}'")
    with pytest.raises(InvalidInput, match=said):
        check_origin(written, "the origin")


@pytest.mark.parametrize(
    "written",
    [
        "null",
        "*",
        "app.example.com",
        "ftp://app.example.com",
        "https://app.example.com/page",
        "https://app.example.com?x=1",
        "https://app.example.com#top",
        "https://user@app.example.com",
        "https://bücher.example",
        "https://app.example.com:99999",
        "https://app .example.com",
    ],
)
def test_what_is_no_origin_is_refused_by_name(written: str) -> None:
    with pytest.raises(InvalidInput, match=r"the origin .* is not an origin such as"):
        check_origin(written, "the origin")
    with pytest.raises(InvalidInput, match="a CORS origin"):
        HttpConfig(cors_origins=(written,))
