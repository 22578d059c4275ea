"""The loopback model server takes hundreds of concurrent connections (the fan-out benchmark needs 500)."""

from __future__ import annotations

import http.client
import json
import threading

from baton.testing import Behavior, FakeLLMServer

CONCURRENT = 400


def test_hundreds_of_concurrent_slow_requests_are_all_answered() -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello"}]})
    statuses: list[int] = []
    failures: list[BaseException] = []
    start = threading.Barrier(CONCURRENT)

    with FakeLLMServer(default=Behavior(delay_seconds=0.05)) as server:
        host, port = server.base_url.removeprefix("http://").split("/")[0].split(":")

        def one() -> None:
            start.wait()
            try:
                connection = http.client.HTTPConnection(host, int(port), timeout=30)
                connection.request("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
                statuses.append(connection.getresponse().status)
                connection.close()
            except OSError as exc:
                failures.append(exc)

        threads = [threading.Thread(target=one) for _ in range(CONCURRENT)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        recorded = len(server.requests)

    assert failures == []
    assert statuses == [200] * CONCURRENT
    assert recorded == CONCURRENT
