"""The admin key, as the hub keeps it (``Hub.setup_admin_key``, ``is_admin_key``,
``rotate_admin_key``): stored only hashed, the same in every process that shares the store.

Every admin request checks the key, so the hash is kept in memory; it is read again at the first
check once the copy is a second old by the store's clock. A key replaced in another process
(HERALD_ADMIN_KEY at its start, ``herald admin-key rotate``) thus stops working here, and its
successor starts, within a second, at the cost of one store read a second at most.
"""

from __future__ import annotations

from herald.keys import ADMIN_PREFIX, check_chosen_key, hash_key, matches, new_key
from herald.store import Store

ADMIN_KEY_SETTING = "admin_key_hash"
MAX_AGE_MS = 1_000
"""How old the copy of the stored hash may be before a check reads it again."""


class AdminKey:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._hash: str | None = None
        self._read_at: int | None = None

    async def setup(self, given: str | None = None) -> str | None:
        """Settle the admin key: ``given`` (from HERALD_ADMIN_KEY) if set, which replaces the
        stored one; else the one stored; else a new one. Returns the key only when it was
        generated now, to be shown once.

        Raises:
            InvalidInput: ``given`` is under 32 characters or not all visible ASCII.
        """
        if given:
            check_chosen_key(given, "HERALD_ADMIN_KEY")
            # Stored, so that the key it replaces stops working for good: once the variable is
            # unset too, and in every process that shares the store.
            await self._replace(hash_key(given))
            return None
        if await self._read() is not None:
            return None
        key = new_key(ADMIN_PREFIX)
        # Another process may have generated one at the same moment: the first one stored wins.
        self._keep(await self._store.set_setting_if_absent(ADMIN_KEY_SETTING, hash_key(key)))
        return key if await self.accepts(key) else None

    async def rotate(self) -> str:
        """A new admin key, replacing the stored one for good; returned to be shown once."""
        key = new_key(ADMIN_PREFIX)
        await self._replace(hash_key(key))
        return key

    async def accepts(self, key: str) -> bool:
        """Whether ``key`` is the admin key, by a copy of the stored hash at most a second old.

        Raises:
            StoreUnavailable: the copy was due to be read again and the store failed.
        """
        if self._is_stale():
            await self._read()
        return self._hash is not None and matches(key, self._hash)

    def _is_stale(self) -> bool:
        now = self._store.now()
        # A clock set back counts as stale too, or the copy could be kept for good.
        return self._read_at is None or not self._read_at <= now < self._read_at + MAX_AGE_MS

    async def _read(self) -> str | None:
        # Marked read before the round trip: the checks made meanwhile use the copy, so that
        # a busy process still reads once a second, not once per request.
        self._read_at = self._store.now()
        self._hash = await self._store.get_setting(ADMIN_KEY_SETTING)
        return self._hash

    async def _replace(self, key_hash: str) -> None:
        await self._store.set_setting(ADMIN_KEY_SETTING, key_hash)
        self._keep(key_hash)

    def _keep(self, key_hash: str) -> None:
        self._hash, self._read_at = key_hash, self._store.now()
