"""The suite's reference prompts, resources and completions, and the 2025-11-25 methods only its
scenarios need (completions, resource subscriptions): served beside baton's own
(:mod:`baton.wire.resources`) while the fixtures are on."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from baton.wire.conformance.media import PNG_BASE64, elicitation, plain
from baton.wire.resources import ContentSource

_TEMPLATE_PREFIX = "test://template/"


def _user(content: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": content}


def _text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def _prompt_messages(name: str, arguments: dict[str, str]) -> list[dict[str, Any]] | None:
    """The fixed prompts' messages (None: not one of them)."""
    if name == "test_simple_prompt":
        return [_user(_text("This is a simple prompt for testing."))]
    if name == "test_prompt_with_arguments":
        line = f"Prompt with arguments: arg1='{arguments.get('arg1')}', arg2='{arguments.get('arg2')}'"
        return [_user(_text(line))]
    if name == "test_prompt_with_embedded_resource":
        uri = arguments.get("resourceUri", "test://example-resource")
        resource = {"uri": uri, "mimeType": "text/plain", "text": "Embedded resource content for testing."}
        return [
            _user({"type": "resource", "resource": resource}),
            _user(_text("Please process the embedded resource above.")),
        ]
    if name == "test_prompt_with_image":
        image = {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"}
        return [_user(image), _user(_text("Please analyze the image above."))]
    return None


def _argument(name: str, description: str) -> types.PromptArgument:
    return types.PromptArgument(name=name, description=description, required=True)


PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A simple prompt without arguments"),
    types.Prompt(
        name="test_prompt_with_arguments",
        description="A prompt with required arguments",
        arguments=[_argument("arg1", "First test argument"), _argument("arg2", "Second test argument")],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt that includes an embedded resource",
        arguments=[_argument("resourceUri", "URI of the resource to embed")],
    ),
    types.Prompt(name="test_prompt_with_image", description="A prompt that includes image content"),
    types.Prompt(
        name="test_input_required_result_prompt", description="MRTR: a prompt that asks for context"
    ),
]
_STATIC = {
    "test://static-text": ("static-text", "text/plain", "This is the content of the static text resource."),
    "test://watched-resource": ("watched-resource", "text/plain", "Watched resource content."),
}


class FixtureCatalog(ContentSource):
    """The reference prompts and resources."""

    def prompts(self) -> list[types.Prompt]:
        """The five reference prompts."""
        return list(PROMPTS)

    async def get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> Any:
        """A fixed prompt, or the MRTR prompt's question then its answer."""
        if params.name == "test_input_required_result_prompt":
            answers = plain(params.input_responses)
            if "user_context" in answers:
                content = (answers["user_context"] or {}).get("content") or {}
                line = f"Prompt with context: {content.get('context', 'unknown')}"
                return types.GetPromptResult.model_validate({"messages": [_user(_text(line))]})
            form = elicitation(
                "What context should the prompt use?", {"context": {"type": "string"}}, ["context"]
            )
            return types.InputRequiredResult.model_validate({"inputRequests": {"user_context": form}})
        messages = _prompt_messages(params.name, dict(params.arguments or {}))
        if messages is None:
            return None
        return types.GetPromptResult.model_validate({"messages": messages})

    def resources(self) -> list[types.Resource]:
        """The static resources (text and binary) and the watched one."""
        listed = [
            types.Resource(uri=uri, name=name, mime_type=mime) for uri, (name, mime, _) in _STATIC.items()
        ]
        return [
            *listed,
            types.Resource(uri="test://static-binary", name="static-binary", mime_type="image/png"),
        ]

    def templates(self) -> list[types.ResourceTemplate]:
        """The one template with a parameter."""
        template = types.ResourceTemplate(
            uri_template=_TEMPLATE_PREFIX + "{id}/data", name="template", mime_type="application/json"
        )
        return [template]

    def read(self, uri: str) -> types.ReadResourceResult | None:
        """A static resource, the binary one, or the template filled in."""
        if uri in _STATIC:
            _name, mime, body = _STATIC[uri]
            return types.ReadResourceResult(
                contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=body)]
            )
        if uri == "test://static-binary":
            blob = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG_BASE64)
            return types.ReadResourceResult(contents=[blob])
        if uri.startswith(_TEMPLATE_PREFIX) and uri.endswith("/data"):
            item = uri.removeprefix(_TEMPLATE_PREFIX).removesuffix("/data")
            body = json.dumps({"id": item, "templateTest": True, "data": f"Data for ID: {item}"})
            contents = types.TextResourceContents(uri=uri, mime_type="application/json", text=body)
            return types.ReadResourceResult(contents=[contents])
        return None


def install_methods(server: Any) -> None:
    """``completion/complete`` (no suggestions) and resource (un)subscription (``logging/setLevel`` is
    baton's own: :func:`baton.wire.server.build_server`)."""

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        return types.CompleteResult(completion=types.Completion(values=[], total=0, has_more=False))

    async def subscription(ctx: Any, params: Any) -> types.EmptyResult:
        return types.EmptyResult()

    server.add_request_handler("completion/complete", types.CompleteRequestParams, complete)
    server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscription)
    server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, subscription)
