"""WebAuthn ceremonies through py_webauthn: a passkey registered at enrollment, login, and step-up.

The server keeps no challenge state: each ceremony is a signed, expiring token (purpose, subject,
nonce) that the page carries back with the browser's credential, and the challenge is derived from it:

* registration: ``sha256(canonical_json({purpose: "register", person, nonce}))``;
* login: ``sha256(canonical_json({purpose: "login", nonce}))``;
* approval (every passkey approval, step-up or not): the nonce's UTF-8 bytes then the request's action
  hash (:func:`baton.chain_verify.action_sha256`: the tool, the arguments' digest, the server's origin,
  the request id and the quorum, SEP-2672's shape), the action rebuilt from the store when the assertion
  is checked, so an assertion made for another request, arguments, server or quorum does not verify. The
  assertion itself (authenticator data, client data JSON, signature) goes into the decision's receipt,
  which ``python -m baton.chain_verify`` checks against the key enrolled in the chain.

Each nonce is single use: spent in ``hitl_link_uses`` (a login at once, a step-up in the decision's own
transaction). Every ceremony requires user verification. The relying party id is the host name of
``BATON_PUBLIC_URL`` when set, else of the request's ``Host`` (browsers refuse an IP address as an RP id:
open the inbox at ``localhost``, not ``127.0.0.1``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError

from baton import clock
from baton.chain_verify import action_tool, approval_challenge
from baton.errors import PeopleError
from baton.evidence.canonical import iso
from baton.evidence.receipts import canonical_json
from baton.identity.links import LinkSigner, same
from baton.identity.people import People, StoredPasskey, credential_id_bytes, passkey_digest
from baton.runtime import Runtime
from baton.store.schema import hitl_link_uses

Purpose = Literal["register", "login", "step_up"]
#: How long a ceremony may take from the page's load to the credential's return.
CEREMONY_TTL_SECONDS = 600
RP_NAME = "baton"


@dataclass(frozen=True)
class RelyingParty:
    """Who the passkeys are for: the RP id (a host name) and the origins a browser may sign from."""

    rp_id: str
    origins: tuple[str, ...]


@dataclass(frozen=True)
class Ceremony:
    """A ceremony in flight: what it is for, for whom (a person or a request id), its nonce and expiry."""

    purpose: Purpose
    subject: str
    nonce: str
    expires: int


@dataclass(frozen=True)
class StepUpProof:
    """A verified passkey approval: ``person`` asserted, with a passkey, the request and digest named here."""

    request_id: str
    arguments_sha256: str
    person: str
    nonce: str
    #: What the receipt records: the action, the nonce, the credential id's sha256 and the assertion (base64url).
    evidence: dict[str, Any] = field(default_factory=dict)


def approval_action(view: dict[str, Any], server: str) -> dict[str, Any]:
    """The action a passkey approval of the request ``view`` signs, at the server's origin ``server``."""
    return {
        "tool": action_tool(view["kind"], view["provenance"]),
        "arguments_sha256": view["arguments_sha256"],
        "server": server,
        "request_id": view["request_id"],
        "required_approvals": view["required_approvals"],
    }


def relying_party(public_url: str | None, scheme: str, netloc: str) -> RelyingParty:
    """The RP of BATON_PUBLIC_URL when set, else of the URL the browser used."""
    origins = [f"{scheme}://{netloc}"]
    if public_url:
        public = urlsplit(public_url)
        origins.insert(0, f"{public.scheme}://{public.netloc}")
        host = public.hostname or ""
    else:
        host = urlsplit(f"{scheme}://{netloc}").hostname or ""
    return RelyingParty(rp_id=host, origins=tuple(dict.fromkeys(origins)))


def challenge(ceremony: Ceremony, action: dict[str, Any] | None = None) -> bytes:
    """The WebAuthn challenge a ceremony's credential must sign."""
    if ceremony.purpose == "step_up":
        if action is None or action["request_id"] != ceremony.subject:
            raise _refused("The passkey ceremony was made for something else.")
        return approval_challenge(action, ceremony.nonce)
    if ceremony.purpose == "register":
        body = {"purpose": "register", "person": ceremony.subject, "nonce": ceremony.nonce}
    else:
        body = {"purpose": "login", "nonce": ceremony.nonce}
    return hashlib.sha256(canonical_json(body).encode()).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _refused(message: str) -> PeopleError:
    return PeopleError("passkey_invalid", message)


class Passkeys:
    """Options and verification for the three ceremonies, over the runtime's people."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.people = People(runtime)
        self.signer = LinkSigner.for_runtime(runtime)

    # ceremony tokens ------------------------------------------------------------------------------

    def seal(self, ceremony: Ceremony) -> str:
        """The ceremony as a signed token for the page's hidden field."""
        body = _b64(
            json.dumps([ceremony.purpose, ceremony.subject, ceremony.nonce, ceremony.expires]).encode()
        )
        return f"{body}.{self.signer.sign('passkey-ceremony', body)}"

    def open(self, token: str, purpose: Purpose, subject: str | None = None) -> Ceremony:
        """A ceremony token checked: signature, purpose, subject and expiry."""
        body, _, mac = token.partition(".")
        if not body or not same(self.signer.sign("passkey-ceremony", body), mac):
            raise _refused("The passkey ceremony's token does not verify.")
        try:
            kind, who, nonce, expires = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except (ValueError, TypeError) as exc:
            raise _refused("The passkey ceremony's token is malformed.") from exc
        if kind != purpose or (subject is not None and who != subject):
            raise _refused("The passkey ceremony was made for something else.")
        if not isinstance(expires, int) or expires <= clock.time():
            raise _refused("The passkey ceremony expired; reload the page and try again.")
        return Ceremony(kind, str(who), str(nonce), expires)

    def _new(self, purpose: Purpose, subject: str) -> Ceremony:
        nonce = "pk-" + secrets.token_urlsafe(16)
        return Ceremony(purpose, subject, nonce, int(clock.time()) + CEREMONY_TTL_SECONDS)

    # registration ---------------------------------------------------------------------------------

    def registration_options(self, person: str, rp: RelyingParty) -> tuple[str, str]:
        """``(options JSON, ceremony token)`` to create a passkey for ``person``."""
        from webauthn import generate_registration_options, options_to_json
        from webauthn.helpers.structs import (
            AuthenticatorSelectionCriteria,
            PublicKeyCredentialDescriptor,
            ResidentKeyRequirement,
            UserVerificationRequirement,
        )

        ceremony = self._new("register", person)
        existing = [
            PublicKeyCredentialDescriptor(id=_raw(p.credential_id)) for p in self.people.passkeys_of(person)
        ]
        options = generate_registration_options(
            rp_id=rp.rp_id,
            rp_name=RP_NAME,
            user_name=person,
            user_id=person.encode(),
            challenge=challenge(ceremony),
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.REQUIRED,
                user_verification=UserVerificationRequirement.REQUIRED,
            ),
            exclude_credentials=existing,
            timeout=CEREMONY_TTL_SECONDS * 1000,
        )
        return options_to_json(options), self.seal(ceremony)

    def verify_registration(
        self, person: str, enroll_nonce: str, token: str, credential: str, rp: RelyingParty
    ) -> None:
        """Verify the new credential and store it, spending the enrollment link."""
        from webauthn import verify_registration_response
        from webauthn.helpers.exceptions import WebAuthnException

        ceremony = self.open(token, "register", person)
        try:
            verified = verify_registration_response(
                credential=credential,
                expected_challenge=challenge(ceremony),
                expected_rp_id=rp.rp_id,
                expected_origin=list(rp.origins),
                require_user_verification=True,
            )
        except (WebAuthnException, ValueError, KeyError, TypeError) as exc:
            raise _refused(f"The new passkey did not verify: {_reason(exc)}") from exc
        self.people.register(
            person,
            enroll_nonce,
            verified.credential_id,
            verified.credential_public_key,
            verified.sign_count,
        )

    # assertions -----------------------------------------------------------------------------------

    def login_options(self, rp: RelyingParty) -> tuple[str, str]:
        """``(options JSON, ceremony token)`` for a discoverable-credential login."""
        ceremony = self._new("login", "")
        return self._request_options(rp, challenge(ceremony), []), self.seal(ceremony)

    def verify_login(self, token: str, credential: str, rp: RelyingParty) -> tuple[str, str]:
        """The person whose passkey signed this login and that passkey's short digest, which their
        session carries so that revoking the passkey ends it (the nonce is spent)."""
        ceremony = self.open(token, "login", "")
        person = self._assert(credential, challenge(ceremony), rp, None).person
        self._spend(ceremony.nonce, "passkey-login")
        raw_id = credential_id_bytes(str(json.loads(credential)["rawId"]))
        return person, passkey_digest(raw_id)

    def step_up_options(self, person: str, view: dict[str, Any], rp: RelyingParty) -> tuple[str, str]:
        """``(options JSON, ceremony token)`` for an approval of the request ``view`` bound to its action."""
        ceremony = self._new("step_up", view["request_id"])
        allowed = [p.credential_id for p in self.people.passkeys_of(person)]
        expected = challenge(ceremony, approval_action(view, rp.origins[0]))
        return self._request_options(rp, expected, allowed), self.seal(ceremony)

    def verify_step_up(
        self, person: str, view: dict[str, Any], token: str, credential: str, rp: RelyingParty
    ) -> StepUpProof:
        """A proof that ``person`` asserted the action of the request ``view`` (read from the store), with the
        assertion the receipt records (the nonce is spent with the decision)."""
        ceremony = self.open(token, "step_up", view["request_id"])
        action = approval_action(view, rp.origins[0])
        server = RelyingParty(rp.rp_id, (action["server"],))
        stored = self._assert(credential, challenge(ceremony, action), server, person)
        response = json.loads(credential)["response"]
        evidence = {
            "action": action,
            "nonce": ceremony.nonce,
            "credential_id_sha256": hashlib.sha256(credential_id_bytes(stored.credential_id)).hexdigest(),
            "authenticator_data": response["authenticatorData"],
            "client_data_json": response["clientDataJSON"],
            "signature": response["signature"],
        }
        return StepUpProof(view["request_id"], view["arguments_sha256"], person, ceremony.nonce, evidence)

    def _request_options(self, rp: RelyingParty, challenge_bytes: bytes, allowed: list[str]) -> str:
        from webauthn import generate_authentication_options, options_to_json
        from webauthn.helpers.structs import PublicKeyCredentialDescriptor, UserVerificationRequirement

        options = generate_authentication_options(
            rp_id=rp.rp_id,
            challenge=challenge_bytes,
            allow_credentials=[PublicKeyCredentialDescriptor(id=_raw(c)) for c in allowed],
            user_verification=UserVerificationRequirement.REQUIRED,
            timeout=CEREMONY_TTL_SECONDS * 1000,
        )
        return options_to_json(options)

    def _assert(
        self, credential: str, expected: bytes, rp: RelyingParty, person: str | None
    ) -> StoredPasskey:
        """Verify an assertion against its stored passkey; returns that passkey."""
        from webauthn import verify_authentication_response
        from webauthn.helpers.exceptions import WebAuthnException

        try:
            raw_id = credential_id_bytes(str(json.loads(credential)["rawId"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise _refused("The passkey answer is malformed.") from exc
        stored = self.people.passkey(raw_id)
        if stored is None:
            raise _refused("That passkey is not registered here (or its person was removed).")
        if person is not None and stored.person != person:
            raise _refused("That passkey belongs to another person.")
        try:
            verified = verify_authentication_response(
                credential=credential,
                expected_challenge=expected,
                expected_rp_id=rp.rp_id,
                expected_origin=list(rp.origins),
                credential_public_key=stored.public_key,
                credential_current_sign_count=stored.sign_count,
                require_user_verification=True,
            )
        except (WebAuthnException, ValueError, KeyError, TypeError) as exc:
            raise _refused(f"The passkey assertion did not verify: {_reason(exc)}") from exc
        with self.runtime.store.write() as connection:
            self.people.used(connection, raw_id, verified.new_sign_count)
        return stored

    def _spend(self, nonce: str, label: str) -> None:
        try:
            with self.runtime.store.write() as connection:
                connection.execute(
                    insert(hitl_link_uses).values(nonce=nonce, request_id=label, used_at=iso(clock.time()))
                )
        except IntegrityError as exc:
            raise _refused("This passkey ceremony was already used.") from exc


def _raw(credential_id: str) -> bytes:
    return credential_id_bytes(credential_id)


def _reason(exc: Exception) -> str:
    """A short reason from py_webauthn's exception (its messages name the check, never a secret)."""
    text = str(exc).strip() or type(exc).__name__
    return text[:200]
