"""Operating baton: ``baton doctor``'s readiness checks and the ``/metrics`` route."""
