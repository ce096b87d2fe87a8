"""``herald serve``'s settings: from flags, ``HERALD_*`` variables and a TOML file, over the
defaults of ``herald.config``."""

from herald.settings.report import effective_toml, masked_url
from herald.settings.sources import ConfigProblems, Resolved, resolve
from herald.settings.table import SETTINGS, Setting

__all__ = [
    "SETTINGS",
    "ConfigProblems",
    "Resolved",
    "Setting",
    "effective_toml",
    "masked_url",
    "resolve",
]
