"""The bundle's CycloneDX 1.5 SBOM, made with cyclonedx-python-lib (imported only here, only on lock)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any


def build_sbom(adapter_id: str, packages: list[dict[str, Any]], artifact_set: str, at: datetime) -> str:
    """A CycloneDX 1.5 JSON document listing each package with its sha512 and sha256."""
    from cyclonedx.model import HashAlgorithm, HashType
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output.json import JsonV1Dot5
    from packageurl import PackageURL

    bom = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"baton:{adapter_id}:{artifact_set}"))
    bom.metadata.timestamp = at
    for row in packages:
        name = str(row["name"])
        group, _, base = name.rpartition("/") if name.startswith("@") else ("", "", name)
        purl_type = "npm" if row["ecosystem"] == "npm" else "pypi"
        purl = PackageURL(type=purl_type, namespace=group or None, name=base, version=str(row["version"]))
        bom.components.add(
            Component(
                type=ComponentType.LIBRARY,
                name=base,
                group=group or None,
                version=str(row["version"]),
                bom_ref=purl.to_string(),
                purl=purl,
                hashes=[
                    HashType(alg=HashAlgorithm.SHA_512, content=str(row["tarball_sha512_hex"])),
                    HashType(alg=HashAlgorithm.SHA_256, content=str(row["tarball_sha256_hex"])),
                ],
            )
        )
    return str(JsonV1Dot5(bom).output_as_string(indent=None))
