"""``user_metadata``: free text, or structured (``key=value`` pairs).

Torch records the text set with ``torch.cuda.memory._set_memory_metadata`` on every
entry. Newer torch also takes a dict there and records it as compact JSON
(``{"phase":"eval","step":1}``), and a snapshot written elsewhere (JSON, a newer
writer) may hold the dict itself. Both are *structured*: shown as ``phase=eval step=1``
and filtered by key (``meta:phase=eval``). The model keeps the text as recorded (a dict
as compact JSON, remembered as one so it is written back as a dict); what it means is
read here, once per distinct string.
"""

from __future__ import annotations

from memtui.model.strings import text_of


def dict_text(value: dict[object, object]) -> str:
    """A dict's compact JSON, as ``_set_memory_metadata`` records one; never raises."""
    import json  # in each function, not at the top: a cold `info` reads no metadata's JSON

    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return text_of(value)


def fields(text: str) -> dict[str, object] | None:
    """The key/value pairs of structured metadata (a JSON object), else None."""
    if not text or text[0] != "{" or text[-1] != "}":
        return None
    import json

    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def display(text: str) -> str:
    """``phase=eval step=1`` for structured metadata; free text as it is."""
    found = fields(text)
    if found is None:
        return text
    return " ".join(f"{key}={_value(value)}" for key, value in found.items())


def _value(value: object) -> str:
    if isinstance(value, str):
        return value
    import json

    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return text_of(value)


def matches(text: str, wanted: str) -> bool:
    """Does metadata ``text`` match the filter value ``wanted`` (lower-cased)?

    ``key=value`` matches structured metadata whose ``key`` is ``value`` (both ignoring
    case; ``key=`` any value of that key) and free text that contains it; anything else
    is a substring of the text as shown or as recorded.
    """
    lower = text.lower()
    found = fields(text)
    if found is not None and "=" in wanted:
        key, _, value = wanted.partition("=")
        for k, v in found.items():
            if str(k).lower() == key.strip():
                if not value or _value(v).lower() == value.strip():
                    return True
        return False
    return wanted in lower or (found is not None and wanted in display(text).lower())
