"""HTTP plumbing under every route: ASGI guards, connection limits, the listening socket, OAuth."""
