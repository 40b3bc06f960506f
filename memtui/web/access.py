"""Who may reach a served explorer: the token, the ``Host`` a browser names, the ``Origin``
of a websocket. Plain functions of header values, so the rules are tested without a server.

- The token (on by default, as Jupyter does) is the secret in the URL the server prints;
  the page sets it as a cookie so later requests carry it.
- ``Host``: a page on an attacker's domain whose DNS is later pointed at 127.0.0.1 (DNS
  rebinding) reaches the server as same-origin, but its requests still name the attacker's
  domain. Only names that cannot be rebound by someone else are accepted: IP addresses,
  ``localhost`` (and ``*.localhost``), this machine's own names and those given with
  ``--allow-host``.
- ``Origin``: browsers send cookies to every port of a host, so a page on another port of
  ``localhost`` would carry the token cookie; a websocket is accepted only from the page's
  own origin (an absent ``Origin`` is a client that is not a browser, which still needs the token).
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from urllib.parse import urlsplit


def machine_names() -> set[str]:
    """This machine's host name and fully qualified name, lower case."""
    names = {socket.gethostname(), socket.getfqdn()}
    return {name.lower() for name in names if name}


def split_host(host_header: str) -> str | None:
    """The host name of a ``Host`` header (``name``, ``name:port``, ``[v6]:port``), lower case;
    None if it is not one."""
    try:
        host = urlsplit(f"//{host_header}").hostname
    except ValueError:
        return None
    return host.lower() if host else None


def host_allowed(host_header: str | None, allowed_names: set[str]) -> bool:
    """Whether a request naming ``host_header`` may be answered (see the module docstring)."""
    host = split_host(host_header or "")
    if host is None:
        return False
    if host == "localhost" or host.endswith(".localhost") or host in allowed_names:
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def same_origin(origin: str | None, host_header: str | None) -> bool:
    """Whether a websocket's ``Origin`` is the page the server itself sent (same host and port
    as the ``Host`` the request names); True for a client that sends no ``Origin``."""
    if origin is None:
        return True
    try:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False
        default_port = 443 if parts.scheme == "https" else 80
        origin_port = parts.port or default_port
        asked = urlsplit(f"//{host_header or ''}")
        asked_port = asked.port or default_port
    except ValueError:
        return False
    return parts.hostname.lower() == (asked.hostname or "").lower() and origin_port == asked_port


def token_matches(offered: str | None, token: str) -> bool:
    """Constant-time comparison, so the time taken does not tell how much of a guess was right."""
    return hmac.compare_digest((offered or "").encode("utf-8", "surrogatepass"), token.encode("utf-8"))
