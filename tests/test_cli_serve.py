"""What ``herald serve`` does to its process before it serves."""

from __future__ import annotations

import gc

import herald.serve
from herald.cli_serve import _keep_what_lasts


def test_the_server_s_modules_are_kept_out_of_the_collector_s_passes() -> None:
    assert herald.serve.serve  # imported, as herald serve imports it before serving
    try:
        _keep_what_lasts()
        frozen = gc.get_freeze_count()
        walked = len(gc.get_objects())  # what a full pass of the collector walks now
    finally:
        gc.unfreeze()
    assert frozen > 10 * walked, (frozen, walked)
