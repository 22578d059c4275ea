"""JSON Schema of baton's tool arguments and results as ``tools/list`` shows them: what a client needs, no Python.

Pydantic titles every model and field after its Python name (``PingArgs``, ``"Message"``) and describes a
model by its class docstring (``Arguments of ``mcp_ping``.``); neither tells a client or a model anything the
property names and the fields' own descriptions do not. Both are left out here. Field descriptions stay.
In output schemas a nullable plain value is ``"type": [T, "null"]`` and a literal is its ``const``/``enum``
alone (the same constraints in fewer bytes).
Output schemas also drop ``default`` (a result field with a default in :mod:`baton.results` is one that may
be absent, which ``required`` already says).
"""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

__all__ = ["CompactSchema", "OutputSchema", "input_schema", "output_schema"]

_COMPOSITE = frozenset({"enum", "const", "$ref", "anyOf", "oneOf", "allOf"})


class CompactSchema(GenerateJsonSchema):
    """Pydantic's generator without class-name titles, field titles or class docstrings."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        """Never: a field's title is its Python name re-cased."""
        return False

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        """A model's schema without its class name and docstring."""
        json_schema = super().model_schema(schema)
        json_schema.pop("title", None)
        doc = schema["cls"].__doc__
        if doc and json_schema.get("description") == inspect.cleandoc(doc):
            del json_schema["description"]
        return json_schema


class OutputSchema(CompactSchema):
    """:class:`CompactSchema` without defaults (they mean nothing in a result), with nullable values and
    literals in their shortest form. Input schemas keep pydantic's ``anyOf`` and ``type`` beside ``enum``:
    some clients read an argument's ``type`` to build a form or convert a command-line value."""

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        """``{"type": ["string", "null"]}`` rather than an ``anyOf`` of two schemas, where the value is a plain
        typed one (no ``enum``, ``const`` or reference, whose null would need the ``anyOf``)."""
        inner = self.generate_inner(schema["schema"])
        kind = inner.get("type")
        if isinstance(kind, str) and kind != "null" and not _COMPOSITE.intersection(inner):
            return {**inner, "type": [kind, "null"]}
        return self.get_union_of_schemas([inner, {"type": "null"}]) if inner != {"type": "null"} else inner

    def literal_schema(self, schema: core_schema.LiteralSchema) -> JsonSchemaValue:
        """``const``/``enum`` alone: the listed values already say their type."""
        json_schema = super().literal_schema(schema)
        json_schema.pop("type", None)
        return json_schema

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        """The inner schema alone."""
        return self.generate_inner(schema["schema"])


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A tool's ``inputSchema``."""
    return model.model_json_schema(schema_generator=CompactSchema)


def output_schema(shape: Any) -> dict[str, Any]:
    """A tool's ``outputSchema`` for ``shape`` (a model or a union of models): one object schema whose
    shared definitions sit in its own ``$defs``."""
    schema = TypeAdapter(shape).json_schema(schema_generator=OutputSchema)
    return {"type": "object", **_inline_single_use(schema)}


def _inline_single_use(schema: dict[str, Any]) -> dict[str, Any]:
    """Put the top-level alternatives in place when nothing else refers to them; shared shapes stay in
    ``$defs`` (``Usage``, a request row)."""
    import json

    defs = dict(schema.get("$defs", {}))
    text = json.dumps(schema)
    alternatives = []
    for option in schema.get("anyOf", []):
        name = option.get("$ref", "").removeprefix("#/$defs/")
        if name in defs and text.count(f'"#/$defs/{name}"') == 1:
            alternatives.append(defs.pop(name))
        else:
            alternatives.append(option)
    inlined = {key: value for key, value in schema.items() if key not in ("$defs", "anyOf")}
    if alternatives:
        inlined["anyOf"] = alternatives
    if defs:
        inlined["$defs"] = defs
    return inlined
