"""Model parameters, declared once per model as a typed schema (pydantic v2), and the errors they raise.

A model's schema is a subclass of ``ModelParams`` whose fields are made with ``param(...)``: a default, bounds
or choices, a label, a unit, a help text, when a change takes effect (``applies``) and an optional widget hint.
Everything else is derived from it: the command-line options of ``latticelab run <model>`` and ``latticelab
gui`` (app/commands/), the GUI form (app/form.py), the stored settings (app/settings.py) and the scalars of a
saved state (sim/state.py). So a parameter is written down in exactly one place.

When a change takes effect (``applies``):
    "live"     the running model takes it at once (``Model.update``): temperature, rewiring, algorithm ...
    "reset"    used by the next reset (seed, initial state); the running model is not touched
    "rebuild"  a new model is made (dimension, lattice size); the old one stays if that fails

Every bad value raises ``ParameterError`` naming the parameter and saying what is allowed; pydantic's own
messages are translated (``params_error``), never shown raw.
"""
from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import numpy as np
import pydantic
from pydantic import ConfigDict, Field

APPLIES = ("live", "reset", "rebuild")
Applies = Literal["live", "reset", "rebuild"]


class ParameterError(ValueError):
    """A parameter is out of range; ``parameter`` names it and the message says what is allowed."""

    def __init__(self, parameter: str, message: str):
        super().__init__(f"{parameter}: {message}")
        self.parameter = parameter


def param(default: Any, *, label: str, help: str, unit: str = "", applies: Applies = "live",
          widget: str | None = None, choices: tuple | None = None, cli: bool = True, slow: bool = False,
          **bounds) -> Any:
    """A schema field. ``bounds`` are pydantic's (ge, gt, le, lt); ``choices`` restricts the value to a list;
    ``widget`` names a custom GUI widget (app/form.py) instead of the one the type implies; ``cli=False``
    keeps a field off the command line; ``slow=True`` says that applying a live change can take a noticeable
    time (the Ising rewiring rebuilds the graph), so the window shows a wait cursor, as it does for every
    "rebuild" field."""
    if applies not in APPLIES:
        raise ValueError(f"applies: must be one of {APPLIES}; got {applies!r}")
    extra = {"label": label, "unit": unit, "applies": applies, "widget": widget, "choices": choices, "cli": cli,
             "slow": bool(slow)}
    return Field(default, description=help, json_schema_extra=extra, **bounds)


class ModelParams(pydantic.BaseModel):
    """Base of every model's parameter schema: immutable, no unknown fields, exact types.

    Integers must be integers (16.9 is refused, not truncated; NumPy integers are accepted), numbers must be
    finite real numbers (a bool is refused as a number). Subclasses add fields with ``param`` and may
    override ``suggested`` for defaults that depend on other values or on the machine.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=False)

    seed: int = param(1, label="Seed", help="random seed (used by the next reset)", applies="reset", ge=0,
                      lt=2 ** 63)

    # Set by subclasses: the model's registry name (for messages), and the fields that select a variant of
    # the model whose other defaults differ (the Ising model's dimension: each dimension keeps its own size
    # and temperature). When a variant field changes, the fields ``suggested`` returns take that variant's
    # remembered or suggested values.
    model_name: ClassVar[str] = ""
    variant_fields: ClassVar[tuple[str, ...]] = ()
    # The field that rewires the model's graph (a probability in [0, 1]), for the small-world curve of the Graph
    # dock (sim/analysis/graph.py), or None.
    rewiring_field: ClassVar[str | None] = None

    @pydantic.field_validator("*", mode="before")
    @classmethod
    def _exact_numbers(cls, value, info):
        annotation = cls.model_fields[info.field_name].annotation
        if isinstance(value, np.generic):
            value = value.item()
        if annotation in (int, float) and isinstance(value, bool):
            raise ValueError(f"must be a number, not a boolean; got {value!r}")
        if annotation is int and not isinstance(value, int):
            raise ValueError(f"must be an integer; got {value!r}")     # 16.9, 64.0 and "64" alike
        if annotation is float and isinstance(value, str):
            raise ValueError(f"must be a finite number; got {value!r}")
        if annotation is str and not isinstance(value, str):
            raise ValueError(f"must be a text; got {value!r}")
        if annotation is float and isinstance(value, (int, float)) and not math.isfinite(value):
            raise ValueError(f"must be a finite number; got {value!r}")
        choices = field_info(cls, info.field_name).get("choices")
        if choices is not None and value not in choices:
            allowed = ", ".join(repr(c) for c in choices)
            raise ValueError(f"must be one of {allowed}; got {value!r}")
        return value

    # ---- construction ---------------------------------------------------------------------------
    @classmethod
    def create(cls, gpu: bool = False, **values) -> "ModelParams":
        """Validated parameters from ``values``; fields not given (or None) take ``suggested`` defaults.
        Raises ParameterError naming the first bad field."""
        given = {k: v for k, v in values.items() if v is not None}
        unknown = sorted(set(given) - set(cls.model_fields))
        if unknown:
            raise ParameterError(unknown[0], f"is not a parameter of {cls.model_name or cls.__name__}; "
                                             f"allowed: {', '.join(cls.model_fields)}")
        filled = {**cls.suggested(gpu=gpu, **given), **given}
        try:
            return cls(**filled)
        except pydantic.ValidationError as exc:
            raise params_error(exc, cls) from None

    @classmethod
    def suggested(cls, gpu: bool = False, **given) -> dict:
        """Defaults that depend on the values given (e.g. the lattice size on the dimension) or on the
        machine (``gpu``); the schema's own defaults apply to the rest."""
        return {}

    def replace(self, **changes) -> "ModelParams":
        """A validated copy with ``changes``; raises ParameterError naming the first bad field."""
        unknown = sorted(set(changes) - set(type(self).model_fields))
        if unknown:
            raise ParameterError(unknown[0], f"is not a parameter of {self.model_name or type(self).__name__}")
        try:
            return type(self)(**{**self.model_dump(), **changes})
        except pydantic.ValidationError as exc:
            raise params_error(exc, type(self)) from None

    # ---- hints for the GUI (app/form.py) -------------------------------------------------------------
    @classmethod
    def options(cls, name: str, values: dict) -> tuple | None:
        """Values to offer for field ``name`` given the current ``values`` (a combo box's items), or None."""
        return None

    @classmethod
    def centre(cls, name: str, values: dict) -> float | None:
        """A special value of field ``name`` that a slider should resolve finely (a critical point), or None."""
        return None

    # ---- the schema as data -------------------------------------------------------------------------
    @classmethod
    def fields(cls) -> dict[str, dict]:
        """name -> {label, help, unit, applies, widget, choices, cli, slow, type, default, bounds} for every
        field."""
        return {name: field_info(cls, name) for name in cls.model_fields}

    @classmethod
    def is_slow(cls, name: str) -> bool:
        """Whether a change of field ``name`` can take a noticeable time to apply: a new model is made
        ("rebuild"), or the field says ``slow=True``. False for a name that is not a field."""
        info = cls.fields().get(name)
        return info is not None and (info["applies"] == "rebuild" or bool(info.get("slow")))

    @classmethod
    def names(cls, applies: str | None = None) -> tuple[str, ...]:
        return tuple(n for n, f in cls.fields().items() if applies is None or f["applies"] == applies)


def derived_values(params: ModelParams, given: dict) -> dict:
    """The fields of ``params`` that were not ``given`` and differ from their declared default: the values
    ``suggested`` derived from the others (Cahn-Hilliard's dt from m, b, u, K and dx; a size from the device).
    A run says them, so that a value the user did not choose is never taken silently."""
    schema = type(params)
    return {name: getattr(params, name) for name, info in schema.model_fields.items()
            if name not in given and getattr(params, name) != info.default}


def field_info(cls: type[ModelParams], name: str) -> dict:
    info = cls.model_fields[name]
    extra = dict(info.json_schema_extra or {})
    bounds = {}
    for item in info.metadata:
        for key in ("ge", "gt", "le", "lt"):
            value = getattr(item, key, None)
            if value is not None:
                bounds[key] = value
    return {**extra, "help": info.description or "", "type": info.annotation, "default": info.default,
            "bounds": bounds}


_BOUND_WORDS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}
_BOUND_KEYS = {"greater_than": "gt", "greater_than_equal": "ge", "less_than": "lt", "less_than_equal": "le"}


def allowed_text(cls: type[ModelParams], name: str) -> str:
    """What a field allows, in words: 'a number > 0', 'an integer in [4, 65536]', "one of 2, 3"."""
    info = field_info(cls, name)
    if info.get("choices") is not None:
        return "one of " + ", ".join(repr(c) for c in info["choices"])
    kind = {int: "an integer", float: "a number", str: "a text", bool: "true or false"}.get(info["type"], "a value")
    b = info["bounds"]
    has_low, has_high = "ge" in b or "gt" in b, "le" in b or "lt" in b
    low, high = b.get("ge", b.get("gt")), b.get("le", b.get("lt"))
    if has_low and has_high:
        return f"{kind} in {'[' if 'ge' in b else '('}{_num(low)}, {_num(high)}{']' if 'le' in b else ')'}"
    if has_low:
        return f"{kind} {'>=' if 'ge' in b else '>'} {_num(low)}"
    if has_high:
        return f"{kind} {'<=' if 'le' in b else '<'} {_num(high)}"
    return kind


def _num(value) -> str:
    if isinstance(value, int) and value >= 2 ** 20 and value & (value - 1) == 0:
        return f"2**{value.bit_length() - 1}"          # 2**63 reads better than 9,223,372,036,854,775,808
    return f"{value:,}" if isinstance(value, int) and abs(value) >= 10 ** 6 else f"{value:g}" \
        if isinstance(value, float) else str(value)


def params_error(exc: pydantic.ValidationError, schema: type[ModelParams] | None = None) -> ParameterError:
    """The first error of a pydantic ValidationError as a ParameterError naming the field and, for a value out
    of bounds, the whole allowed range."""
    error = exc.errors(include_url=False)[0]
    original = (error.get("ctx") or {}).get("error")
    if isinstance(original, ParameterError):      # raised by our own validators: already worded
        return original
    name = str(error["loc"][0]) if error.get("loc") else "parameters"
    value = error.get("input")
    kind = error.get("type", "")
    title = exc.title
    if kind in _BOUND_WORDS and schema is not None and name in schema.model_fields:
        message = f"must be {allowed_text(schema, name)}"
    elif kind in _BOUND_WORDS:
        bound = error["ctx"][_BOUND_KEYS[kind]]
        message = f"must be {_BOUND_WORDS[kind]} {bound}"
    elif kind in ("int_parsing", "int_type", "int_from_float"):
        message = "must be an integer"
    elif kind in ("float_parsing", "float_type", "finite_number"):
        message = "must be a finite number"
    elif kind in ("string_type",):
        message = "must be a text"
    elif kind == "extra_forbidden":
        message = f"is not a parameter of {title}"
    elif kind == "missing":
        message = "is required"
    elif kind == "value_error":
        message = str(original) if original is not None else error["msg"]
    else:
        message = error["msg"]
    return ParameterError(name, f"{message}; got {value!r}" if "got " not in message else message)
