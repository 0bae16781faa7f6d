"""A generic, typed reader of contract dicts: a frozen dataclass read from a block of a JSON contract
(a saved analysis, a comparison, a trend) by its field names and type hints.

:func:`load` builds a record from its dict once, so code downstream reads fields, not string keys:

* a field takes the value of the contract key of its name (or of ``metadata["key"]`` where the
  key is not a Python name: ``class``, ``<10us``); a key absent from the dict (an analysis saved by
  an older version) leaves the field's default; keys the record does not declare are not read;
* a field typed as a record (``Window``, ``Window | None``) is read as that record; ``tuple[X, ...]``
  reads a list item by item; ``dict[str, X]`` (a map keyed by names: by cause, by direction,
  histograms) keeps its keys and reads each value as ``X``; any other type keeps the value as the
  contract holds it (no number is converted: an int stays an int, so every figure formats as before).

Records built elsewhere pass through :func:`load` unchanged, so a function may take either.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

R = TypeVar("R")
KEY = "key"  # a field's metadata entry naming its contract key


def key(name: str, default: Any = None, **kwargs) -> Any:
    """A field read from the contract key ``name`` (one that is not a Python name), ``default`` when absent."""
    return dataclasses.field(default=default, metadata={KEY: name}, **kwargs)


def contract_key(field: dataclasses.Field) -> str:
    """The contract key a record's field is read from."""
    return field.metadata.get(KEY, field.name)


def load(cls: type[R], block: Any) -> R | None:
    """The record ``cls`` read from one contract dict (None for None; a ``cls`` instance as it is)."""
    if block is None or isinstance(block, cls):
        return block
    return _reader(cls)(block)


def load_all(cls: type[R], blocks: Any) -> tuple[R, ...]:
    """The records ``cls`` read from a contract list (empty for None)."""
    return tuple(load(cls, block) for block in blocks or ())


def _identity(value: Any) -> Any:
    return value


def _optional(inner: type) -> type:
    """``X`` of ``X | None`` (the type itself otherwise)."""
    args = typing.get_args(inner)
    if typing.get_origin(inner) in (typing.Union, types.UnionType):
        kept = [a for a in args if a is not type(None)]
        if len(kept) == 1:
            return kept[0]
    return inner


def _converter(hint: Any) -> Callable[[Any], Any]:
    """How a value of a field typed ``hint`` is read from the contract (a null list or map reads as an empty one)."""
    hint = _optional(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return functools.partial(load, hint)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = _converter(args[0])
        if item is _identity:
            return lambda value: () if value is None else tuple(value)
        return lambda value: () if value is None else tuple(item(x) for x in value)
    if origin is dict and len(args) == 2:
        item = _converter(args[1])
        if item is _identity:
            return lambda value: {} if value is None else value
        return lambda value: {} if value is None else {k: item(x) for k, x in value.items()}
    return _identity


@functools.cache
def _reader(cls: type) -> Callable[[dict], Any]:
    """The function that reads ``cls`` from its dict, built once per record type."""
    hints = typing.get_type_hints(cls)
    plan = [(field.name, contract_key(field), _converter(hints[field.name])) for field in dataclasses.fields(cls)]

    def read(block: dict) -> Any:
        return cls(**{name: convert(block[source]) for name, source, convert in plan if source in block})

    return read


def field_keys(cls: type) -> dict[str, str]:
    """Contract key -> field name of a record's fields, in declaration order."""
    return {contract_key(field): field.name for field in dataclasses.fields(cls)}
