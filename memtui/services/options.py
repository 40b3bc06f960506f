"""An analysis's options: name, kind, default, bounds and help, declared once on the options class.

An options class is a frozen dataclass whose fields carry an :class:`Option` in their
metadata (:func:`option`). The command line makes its flags from them, the MCP server its
typed parameters, and :func:`checked` is the one place their bounds are enforced, so every
front end accepts exactly the same values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from memtui.errors import UsageError
from memtui.units import parse_size

# "moment": a moment of a trace (memtui/analysis/moments.py), as text or an event number.
Kind = Literal["int", "float", "str", "bool", "size", "choice", "text_list", "moment"]
FrontEnd = Literal["cli", "mcp"]
EVERY_FRONT_END: tuple[FrontEnd, ...] = ("cli", "mcp")


@dataclass(frozen=True)
class Option:
    """One option of an analysis.

    ``low``/``high`` bound a number (inclusive); ``choices`` a choice. ``optional``: None is
    a value too (the analysis picks, e.g. the default device). ``flag`` is the command
    line's spelling when it is not ``--`` and the name with dashes; ``positional``: the
    command line takes it without a flag. ``front_ends``: where the option is offered (a
    rules file read from anywhere is the command line's alone). ``check``: a further test
    of the value, raising :class:`OptionError`.
    """

    help: str
    kind: Kind = "int"
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    optional: bool = False
    flag: str = ""
    metavar: str | None = None
    positional: bool = False
    front_ends: tuple[FrontEnd, ...] = EVERY_FRONT_END
    check: Callable[[Any], None] | None = None
    name: str = ""  # filled in from the field by :func:`options_of`
    default: Any = None

    @property
    def cli_flag(self) -> str:
        return self.name if self.positional else self.flag or "--" + self.name.replace("_", "-")

    def bounds_text(self) -> str:
        if self.low is not None and self.high is not None:
            return f"between {_number(self.low)} and {_number(self.high)}"
        if self.low is not None:
            return f"{_number(self.low)} or more"
        return f"{_number(self.high if self.high is not None else 0)} or less"


def option(default: Any, help: str, **kwargs: Any) -> Any:
    """A dataclass field holding ``default`` and its :class:`Option`."""
    return field(default=default, metadata={"option": Option(help, **kwargs)})


class OptionError(UsageError):
    """A value an option does not accept; each front end names the option its own way."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"{name} {detail}")
        self.name, self.detail = name, detail

    def spelled(self, spelling: str) -> UsageError:
        return UsageError(f"{spelling} {self.detail}")


def options_of(cls: type) -> list[Option]:
    """The options of an options class, in field order, each with its name and default."""
    out = []
    for f in dataclasses.fields(cls):
        declared = f.metadata.get("option")
        if declared is not None:
            out.append(dataclasses.replace(declared, name=f.name, default=f.default))
    return out


def checked(cls: type, values: Mapping[str, Any]) -> Any:
    """An instance of options class ``cls`` from ``values`` (missing ones take their
    defaults), each value converted and checked against its bounds; :class:`OptionError`
    names the first that is not accepted."""
    given = {}
    for opt in options_of(cls):
        if opt.name in values:
            given[opt.name] = check_value(opt, values[opt.name])
    return cls(**given)


def check_value(opt: Option, value: Any) -> Any:
    if value is None:
        if opt.optional or opt.default is None:
            return None
        raise OptionError(opt.name, "needs a value")
    if opt.kind == "size":
        size = value if isinstance(value, int) and not isinstance(value, bool) else parse_size(str(value))
        if size is None:
            raise OptionError(opt.name, f"is not a size: {value!r} (try 80GiB or 85899345920)")
        if size <= 0:
            raise OptionError(opt.name, f"must be more than 0 bytes, not {value!r}")
        value = size
    elif opt.kind == "choice":
        if value not in opt.choices:
            raise OptionError(opt.name, f"is one of {', '.join(opt.choices)}, not {value!r}")
    elif opt.kind in ("int", "float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise OptionError(opt.name, f"is a number, not {value!r}")
        if (opt.low is not None and value < opt.low) or (opt.high is not None and value > opt.high):
            raise OptionError(opt.name, f"must be {opt.bounds_text()}")
    elif opt.kind == "bool":
        value = bool(value)
    elif opt.kind == "moment":
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        elif not isinstance(value, str):
            raise OptionError(opt.name, f"is a moment (peak, end, oom, step:N or an event number), not {value!r}")
    elif opt.kind == "str" and not isinstance(value, str):
        raise OptionError(opt.name, f"is text, not {value!r}")
    elif opt.kind == "text_list":
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise OptionError(opt.name, f"is a list of texts, not {value!r}")
        value = list(value)
    if opt.check is not None:
        opt.check(value)
    return value


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
