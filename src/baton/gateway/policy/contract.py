"""The tool contract: the reference controller's two hashes, the definition hash, and their comparison.

- ``tool_name_set_sha256`` = sha256(canonical JSON of the sorted names)
- ``tool_schema_manifest_sha256`` = sha256(canonical JSON of ``[{name, inputSchema, annotations?}]``
  sorted by name), exactly as the reference computes them
- ``tool_definition_sha256`` also covers ``title``, ``description`` and ``outputSchema``, so a
  changed description (tool poisoning) is drift too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baton.errors import GatewayError
from baton.evidence.receipts import canonical_json, sha256_hex
from baton.gateway.policy.policy import Contract, Tools

DEFINITION_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


@dataclass(frozen=True)
class ToolContract:
    """What tools/list returned, reduced to names and hashes."""

    tool_count: int
    names: tuple[str, ...]
    tool_name_set_sha256: str
    tool_schema_manifest_sha256: str
    tool_definition_sha256: str


def _tool_row(tool: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    if not isinstance(tool, dict):
        raise GatewayError("mcp_tool_schema_invalid", "tools/list returned a tool that is not an object.")
    name = tool.get("name")
    if not isinstance(name, str) or not name.strip():
        raise GatewayError("mcp_tool_schema_invalid", "tools/list returned a tool without a name.")
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        raise GatewayError("mcp_tool_schema_invalid", f"Tool {name} has no object inputSchema.", tool=name)
    row: dict[str, Any] = {"name": name.strip(), "inputSchema": schema}
    if "annotations" in tool:
        if not isinstance(tool["annotations"], dict):
            raise GatewayError(
                "mcp_tool_schema_invalid", f"Tool {name} has malformed annotations.", tool=name
            )
        row["annotations"] = tool["annotations"]
    definition = {field: tool[field] for field in DEFINITION_FIELDS if field in tool}
    definition["name"] = row["name"]
    return row, definition


def tool_contract(tools: Any) -> ToolContract:
    """Validate a tools/list result and compute the three hashes."""
    if not isinstance(tools, list) or not tools:
        raise GatewayError("mcp_tool_list_invalid", "tools/list did not return a non-empty list of tools.")
    rows, definitions = zip(*(_tool_row(tool) for tool in tools), strict=True)
    names = [row["name"] for row in rows]
    if len(set(names)) != len(names):
        raise GatewayError("mcp_tool_names_not_unique", "tools/list named a tool twice.")
    return ToolContract(
        tool_count=len(tools),
        names=tuple(sorted(names)),
        tool_name_set_sha256=sha256_hex(canonical_json(sorted(names))),
        tool_schema_manifest_sha256=sha256_hex(canonical_json(sorted(rows, key=lambda r: r["name"]))),
        tool_definition_sha256=sha256_hex(canonical_json(sorted(definitions, key=lambda r: r["name"]))),
    )


def compare(pins: Contract, server: dict[str, str], observed: ToolContract) -> None:
    """Fail closed on the first kind of drift: identity, then count/names/schemas, then definitions."""
    identity = {
        "protocol_version": server["protocol_version"],
        "server_name": server["server_name"],
        "server_version": server["server_version"],
    }
    drifted = [field for field, value in identity.items() if getattr(pins, field) != value]
    if drifted:
        raise GatewayError(
            "mcp_initialize_contract_mismatch",
            f"initialize differs from the pins in {', '.join(drifted)}.",
            mismatched=drifted,
            observed=identity,
        )
    fields = ("tool_count", "tool_name_set_sha256", "tool_schema_manifest_sha256")
    mismatched = [field for field in fields if getattr(pins, field) != getattr(observed, field)]
    if mismatched:
        raise GatewayError(
            "mcp_tool_contract_mismatch",
            f"The tool contract drifted in {', '.join(mismatched)}.",
            mismatched=mismatched,
            observed_tool_count=observed.tool_count,
        )
    if pins.tool_definition_sha256 != observed.tool_definition_sha256:
        raise GatewayError(
            "mcp_tool_definition_mismatch",
            "Tool titles, descriptions or output schemas changed while names and input schemas did not.",
            mismatched=["tool_definition_sha256"],
        )


def check_partition(tools: Tools, observed: ToolContract) -> None:
    """The observed tool set must be exactly allowed ∪ denied."""
    declared = set(tools.allowed) | set(tools.denied)
    seen = set(observed.names)
    if declared != seen:
        raise GatewayError(
            "mcp_adapter_tool_partition_mismatch",
            "The observed tools are not exactly the allowed and denied tools of the policy.",
            unlisted=sorted(seen - declared),
            missing=sorted(declared - seen),
        )


def pins_for(server: dict[str, str], observed: ToolContract) -> Contract:
    """The contract to pin from one observation."""
    return Contract(
        protocol_version=server["protocol_version"],
        server_name=server["server_name"],
        server_version=server["server_version"],
        tool_count=observed.tool_count,
        tool_name_set_sha256=observed.tool_name_set_sha256,
        tool_schema_manifest_sha256=observed.tool_schema_manifest_sha256,
        tool_definition_sha256=observed.tool_definition_sha256,
    )
