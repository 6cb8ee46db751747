"""Rows into the domain's dataclasses, for the statements whose columns are named as the fields.

`row_reader(FactVersion, kind=FactKind)` reads every field of FactVersion from the row's column
of the same name, passing `kind` through FactKind on the way. The reader is built once, at
import, and costs per row what the written-out constructor call did: the context of a turn
reads dozens of rows on the request path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import asyncpg

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


def row_reader(cls: type[T], **convert: Callable[[Any], object]) -> Callable[[asyncpg.Record], T]:
    """A function making a `cls` from a row: each field from the column of its name, through
    `convert[field]` where one is given (a uuid to text, a text to an enum)."""
    fields = dataclasses.fields(cls)
    names = [f.name for f in fields]
    unknown = sorted(set(convert) - set(names))
    if unknown:
        raise TypeError(f"{cls.__name__} has no fields {unknown}")
    if any(f.kw_only for f in fields):
        raise TypeError(f"{cls.__name__} has keyword-only fields; they cannot be passed in order")
    converted = [(i, convert[name]) for i, name in enumerate(names) if name in convert]

    def read(row: asyncpg.Record) -> T:
        values = [row[name] for name in names]
        for i, function in converted:
            values[i] = function(values[i])
        return cls(*values)

    return read
