"""Interning of repeated strings (compile contexts, user metadata, filenames...)."""

from __future__ import annotations


class StringTable:
    """Assigns each distinct string a small integer id, in order of first appearance."""

    def __init__(self, values: list[str] | None = None) -> None:
        self.values: list[str] = []
        self._ids: dict[str, int] = {}
        for value in values or []:
            self.intern(value)

    def intern(self, value: object) -> int:
        if not isinstance(value, str):
            value = "" if value is None else str(value)
        found = self._ids.get(value)
        if found is None:
            found = len(self.values)
            self.values.append(value)
            self._ids[value] = found
        return found

    def find(self, value: str) -> int | None:
        return self._ids.get(value)

    def __getitem__(self, sid: int) -> str:
        return self.values[sid]

    def __len__(self) -> int:
        return len(self.values)
