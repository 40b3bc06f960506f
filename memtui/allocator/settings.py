"""``PYTORCH_CUDA_ALLOC_CONF``: parsed into the settings the caching allocator acts on.

The same keys and checks as torch's ``CUDAAllocatorConfig`` (c10/cuda/CUDAAllocatorConfig.cpp),
as far as they change where memory goes: ``max_split_size_mb``, ``max_non_split_rounding_mb``,
``roundup_power2_divisions`` (one number, or the per-range ``[256:1,512:2,>:4]`` form),
``garbage_collection_threshold`` and ``expandable_segments``. Keys that only change speed or
pinned host memory are accepted and ignored; a key torch does not know is refused, as torch
refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memtui.errors import UsageError

MB = 1 << 20
K_LARGE_BUFFER = 20 * MB
# roundup_power2_divisions keeps one value per power-of-two interval from 1 MiB to 64 GiB.
ROUNDUP_INTERVALS = 16
NO_LIMIT = (1 << 64) - 1  # torch's SIZE_MAX: max_split_size when unset

# Accepted, with no effect on where memory goes.
IGNORED_KEYS = frozenset({
    "release_lock_on_cudamalloc", "pinned_use_cuda_host_register", "pinned_num_register_threads",
    "pinned_use_background_threads", "pinned_reserve_segment_size_mb", "graph_capture_record_stream_reuse",
    "per_process_memory_fraction",
})


@dataclass(frozen=True)
class AllocatorSettings:
    """What the allocator reads from its configuration. Defaults are torch's."""

    max_split_size: int = NO_LIMIT
    max_non_split_rounding_size: int = K_LARGE_BUFFER
    roundup_power2_divisions: tuple[int, ...] = field(default=(0,) * ROUNDUP_INTERVALS)
    garbage_collection_threshold: float = 0.0
    expandable_segments: bool = False

    def divisions_for(self, size: int) -> int:
        """roundup_power2_divisions for a request of ``size`` bytes (by its power-of-two interval)."""
        log_size = size.bit_length() - 1
        index = max(log_size - 20, 0)
        return self.roundup_power2_divisions[min(index, ROUNDUP_INTERVALS - 1)]

    def describe(self) -> str:
        """The settings as a PYTORCH_CUDA_ALLOC_CONF value that gives them ('' for the defaults)."""
        parts = []
        if self.max_split_size != NO_LIMIT:
            parts.append(f"max_split_size_mb:{self.max_split_size // MB}")
        if self.max_non_split_rounding_size != K_LARGE_BUFFER:
            parts.append(f"max_non_split_rounding_mb:{self.max_non_split_rounding_size // MB}")
        divisions = self.roundup_power2_divisions
        if any(divisions):
            if len(set(divisions)) == 1:
                parts.append(f"roundup_power2_divisions:{divisions[0]}")
            else:
                ranges = ",".join(f"{1 << i}:{d}" for i, d in enumerate(divisions))
                parts.append(f"roundup_power2_divisions:[{ranges}]")
        if self.garbage_collection_threshold:
            parts.append(f"garbage_collection_threshold:{self.garbage_collection_threshold:g}")
        if self.expandable_segments:
            parts.append("expandable_segments:True")
        return ",".join(parts)


def parse_conf(text: str) -> AllocatorSettings:
    """Settings from one whole PYTORCH_CUDA_ALLOC_CONF value ('' or 'default': torch's defaults).

    Raises UsageError, one line, for what torch would refuse.
    """
    text = text.strip()
    if text in ("", "default"):
        return AllocatorSettings()
    values: dict = {}
    for key, value in _pairs(text):
        if key == "max_split_size_mb":
            # torch raises a smaller value to the 20 MiB large-segment size.
            values["max_split_size"] = max(_positive_int(key, value), K_LARGE_BUFFER // MB) * MB
        elif key == "max_non_split_rounding_mb":
            values["max_non_split_rounding_size"] = max(_positive_int(key, value), K_LARGE_BUFFER // MB) * MB
        elif key == "roundup_power2_divisions":
            values["roundup_power2_divisions"] = _divisions(value)
        elif key == "garbage_collection_threshold":
            values["garbage_collection_threshold"] = _threshold(value)
        elif key == "expandable_segments":
            values["expandable_segments"] = _boolean(key, value)
        elif key == "backend":
            if value != "native":
                raise UsageError(f"backend:{value}: only torch's native caching allocator can be replayed")
        elif key not in IGNORED_KEYS:
            raise UsageError(f"unknown allocator setting {key!r} in {text!r}")
    return AllocatorSettings(**values)


def settings_of_snapshot(recorded: dict) -> tuple[str, AllocatorSettings]:
    """The recorded settings: the ``allocator_settings`` a snapshot carries (newer torch),
    whose parsed fields win over the conf string (they are what the allocator used, also
    when set by ``torch.cuda.memory._set_allocator_settings``)."""
    conf = recorded.get("PYTORCH_CUDA_ALLOC_CONF")
    conf = conf.strip() if isinstance(conf, str) else ""
    try:
        base = parse_conf(conf)
    except UsageError:
        conf, base = "", AllocatorSettings()
    values: dict = {}
    split = recorded.get("max_split_size")
    if isinstance(split, int) and not isinstance(split, bool) and split > 0:
        values["max_split_size"] = min(split, NO_LIMIT)
    rounding = recorded.get("max_non_split_rounding_size")
    if isinstance(rounding, int) and not isinstance(rounding, bool) and rounding > 0:
        values["max_non_split_rounding_size"] = rounding
    divisions = recorded.get("roundup_power2_divisions")
    if isinstance(divisions, (list, tuple)) and len(divisions) == ROUNDUP_INTERVALS and all(
            isinstance(d, int) and d >= 0 for d in divisions):
        values["roundup_power2_divisions"] = tuple(divisions)
    threshold = recorded.get("garbage_collection_threshold")
    if isinstance(threshold, (int, float)) and not isinstance(threshold, bool) and 0 <= threshold < 1:
        values["garbage_collection_threshold"] = float(threshold)
    expandable = recorded.get("expandable_segments")
    if isinstance(expandable, bool):
        values["expandable_segments"] = expandable
    base_values = {k: getattr(base, k) for k in AllocatorSettings.__dataclass_fields__}
    return conf, AllocatorSettings(**{**base_values, **values})


def _pairs(text: str) -> list[tuple[str, str]]:
    pairs = []
    for item in _split_top_level(text):
        key, sep, value = item.partition(":")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise UsageError(f"allocator setting {item.strip()!r} is not key:value")
        pairs.append((key, value))
    return pairs


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside [...] (the per-range roundup form has commas inside)."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item for item in items if item.strip()]


def _positive_int(key: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise UsageError(f"{key}:{value}: expected a whole number of MiB") from None
    if number <= 0:
        raise UsageError(f"{key}:{value}: expected a positive number of MiB")
    return number


def _threshold(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise UsageError(f"garbage_collection_threshold:{value}: expected a number between 0 and 1") from None
    if not 0.0 < number < 1.0:
        raise UsageError(f"garbage_collection_threshold:{value}: must be above 0 and below 1, as torch requires")
    return number


def _boolean(key: str, value: str) -> bool:
    if value in ("True", "true", "1"):
        return True
    if value in ("False", "false", "0"):
        return False
    raise UsageError(f"{key}:{value}: expected True or False")


def _division(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise UsageError(f"roundup_power2_divisions: {text!r} is not a whole number") from None
    if number < 0 or (number and number & (number - 1)):
        raise UsageError(f"roundup_power2_divisions: {number} is not a power of two")
    return number


def _divisions(value: str) -> tuple[int, ...]:
    """One number for every size, or ``[MiB:divisions,...,>:divisions]`` per power-of-two range."""
    if not value.startswith("["):
        return (_division(value),) * ROUNDUP_INTERVALS
    if not value.endswith("]"):
        raise UsageError(f"roundup_power2_divisions:{value}: missing ']'")
    out = [0] * ROUNDUP_INTERVALS
    first, last_index = True, 0
    for item in value[1:-1].split(","):
        bound, sep, divisions = item.partition(":")
        bound, divisions = bound.strip(), divisions.strip()
        if not sep:
            raise UsageError(f"roundup_power2_divisions: {item!r} is not size:divisions")
        count = _division(divisions)
        if bound == ">":
            out[last_index + 1:] = [count] * (ROUNDUP_INTERVALS - last_index - 1)
            continue
        mib = _division(bound)
        if mib == 0:
            raise UsageError("roundup_power2_divisions: a range starts at a power of two MiB, not 0")
        index = min(mib.bit_length() - 1, ROUNDUP_INTERVALS - 1)
        if first:
            out[:index] = [count] * index
            first = False
        out[index] = count
        last_index = index
    return tuple(out)
