"""Where a webhook chosen by the agent may go: public internet addresses, or what the operator allows.

The ``url`` argument of ``mcp_send_webhook`` is the agent's choice, so without a rule the agent could
POST to loopback, the cloud metadata service or the private network, and map those services by the
errors. The rule is applied to the address **actually connected to**, not to a name checked once:

1. :class:`baton.notify.webhook.GuardedBackend` is the network backend of the HTTP client (httpcore, httpx's transport
   layer). When the client opens a connection it gets the URL's host name; the backend resolves it
   **once**, keeps only the addresses :class:`DestinationPolicy` permits, and connects to one of those
   IP literals, so nothing resolves the name a second time (no DNS rebinding between check and connect).
2. After the TCP handshake it checks the socket's peer address again (belt and braces).
3. TLS still verifies the certificate for the host *name* (httpcore passes the name as SNI and for
   hostname checking), and the ``Host`` header names it too: only the IP used to reach it is pinned.

The client follows no redirects and uses no proxy from the environment (a proxy would be the address
connected to). Refused, unresolvable and disallowed destinations all raise the same
:class:`DestinationRefusedError` before any byte is sent, so the answer says nothing about what listens there.

Operators allow exceptions with ``BATON_WEBHOOK_ALLOW``: comma-separated CIDRs, IP addresses or exact
host names (``127.0.0.0/8, 10.1.2.3, hooks.internal.example``). A CIDR permits the addresses in it; a
host name permits that name whatever it resolves to (the operator vouches for the name).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import Any

import anyio

from baton.config import Settings
from baton.errors import ConfigError, NotificationError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Ranges refused besides what the ``ipaddress`` flags say (shared address space, benchmarking, ...).
EXTRA_REFUSED: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(cidr)
    for cidr in (
        "0.0.0.0/8",  # "this network"
        "100.64.0.0/10",  # carrier-grade NAT (shared address space)
        "192.0.0.0/24",  # IETF protocol assignments
        "198.18.0.0/15",  # benchmarking
        "64:ff9b:1::/48",  # local-use NAT64
    )
)
NAT64_PREFIXES = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
REFUSED_MESSAGE = (
    "The webhook destination was refused: it is not a public internet address baton may reach "
    "(an operator can allow it with BATON_WEBHOOK_ALLOW)."
)


class DestinationRefusedError(NotificationError):
    """A webhook destination outside the public internet (or not resolvable), and not allowed."""

    def __init__(self) -> None:
        super().__init__("notification_destination_refused", REFUSED_MESSAGE, channel="webhook")


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (IPv4-mapped or -compatible, 6to4, Teredo, NAT64)."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if any(address in prefix for prefix in NAT64_PREFIXES):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if int(address) >> 32 == 0 and int(address) > 1:  # ::a.b.c.d (IPv4-compatible, deprecated)
        return ipaddress.IPv4Address(int(address))
    return None


def is_public(address: IPAddress) -> bool:
    """Whether ``address`` (and any IPv4 address it embeds) is an ordinary public unicast address."""
    forms: list[IPAddress] = [address]
    inner = embedded_ipv4(address)
    if inner is not None and int(address) >> 32 in (0, 0xFFFF):
        forms = [inner]  # IPv4-mapped or -compatible: a socket reaches exactly the IPv4 address
    elif inner is not None:
        forms.append(inner)
    for form in forms:
        if (
            not form.is_global
            or form.is_private
            or form.is_loopback
            or form.is_link_local
            or form.is_multicast
            or form.is_reserved
            or form.is_unspecified
            or (isinstance(form, ipaddress.IPv6Address) and form.is_site_local)
            or any(form in network for network in EXTRA_REFUSED if network.version == form.version)
        ):
            return False
    return True


@dataclass(frozen=True)
class DestinationPolicy:
    """Public addresses, plus the operator's exceptions (``BATON_WEBHOOK_ALLOW``)."""

    networks: tuple[IPNetwork, ...] = ()
    hosts: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str | None) -> DestinationPolicy:
        """The policy of a ``BATON_WEBHOOK_ALLOW`` value; a malformed entry is ``config_invalid``."""
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        for entry in (part.strip() for part in (text or "").split(",")):
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            name = _host_name(entry)
            if "/" in entry or not name or any(c in name for c in ":@?# "):
                raise ConfigError(
                    "config_invalid",
                    f"BATON_WEBHOOK_ALLOW has an entry that is neither a CIDR, an IP address nor a host "
                    f"name: {entry!r}.",
                    variables=["BATON_WEBHOOK_ALLOW"],
                )
            hosts.add(name)
        return cls(tuple(networks), frozenset(hosts))

    @classmethod
    def from_settings(cls, settings: Settings) -> DestinationPolicy:
        """The policy of this process's settings."""
        return cls.parse(settings.baton_webhook_allow)

    def allows_host(self, host: str) -> bool:
        """Whether the operator allowed this host name as such."""
        return _host_name(host) in self.hosts

    def permits(self, address: IPAddress) -> bool:
        """Whether baton may connect to ``address``: a public one, or one in an allowed network."""
        forms: list[IPAddress] = [address]
        inner = embedded_ipv4(address)
        if inner is not None:
            forms.append(inner)
        for form in forms:
            if any(form.version == net.version and form in net for net in self.networks):
                return True
        return is_public(address)

    async def resolve(self, host: str, port: int, seconds: float | None) -> list[str]:
        """The addresses of ``host`` baton may connect to, resolved once; refused when there is none."""
        literal = _ip_literal(host)
        if literal is not None:
            if self.allows_host(host) or self.permits(literal):
                return [str(literal)]
            raise DestinationRefusedError()
        try:
            with anyio.fail_after(seconds):
                infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, TimeoutError, ValueError):
            raise DestinationRefusedError() from None  # the same answer as a refused address
        addresses = list(dict.fromkeys(_address_of(info) for info in infos))
        if not self.allows_host(host):
            addresses = [a for a in addresses if self.permits(ipaddress.ip_address(a))]
        if not addresses:
            raise DestinationRefusedError()
        return addresses


def _host_name(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


def _ip_literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def _address_of(info: tuple[Any, ...]) -> str:
    return str(info[4][0]).split("%", 1)[0]
