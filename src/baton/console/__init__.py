"""The operator console: what agents did and what waits for a person, in the browser.

Served by ``baton serve --http`` under ``/inbox/console`` behind the inbox's own authentication
(the same login, session cookie, CSRF tokens and strict CSP), and by ``baton console`` on loopback
over the local store without an MCP server. Pages are rendered on the server; charts are SVG drawn
by pygal on the server, so the browser loads no script and nothing from elsewhere.
"""
