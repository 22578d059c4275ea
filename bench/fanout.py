"""Item 5: N concurrent async subagents against a loopback model server with a fixed 50 ms latency.

For each N a fresh ``baton serve`` (own store) gets N ``mcp_spawn_subagent(mode="async")`` calls
written back to back on its stdin; the wall time runs from the first spawn written to the moment the
store shows all N finished, and is divided by the model latency. The reference is the same N requests
sent straight to the model server through the openai SDK from one asyncio loop: what the model server
and the client library allow without baton. It is measured twice: ``direct`` over the SDK's default
httpx transport, ``direct_aiohttp`` over its aiohttp transport (the one baton's model client uses).
Below both, ``raw``: the same N requests as hand-written HTTP/1.1 on N asyncio sockets, the floor the
model server itself allows.

CPU: ``cpu_ms_per_subagent`` is the baton process's CPU over N. Two floors are measured beside it, neither
running baton code: the bare openai client's CPU per request (above), and ``sdk_server_cpu_ms_per_call``,
the official SDK's low-level ``Server`` (``bench/peers/lowlevel_server.py``, a no-op echo tool, the SDK's
own stdio transport) answering the same N ``tools/call`` written back to back. Every async spawn is one
MCP request answered and one model request made, so ``cpu_floor_ms_per_subagent`` (their sum, over aiohttp,
baton's transport) is what the stack baton is built on costs before baton does anything;
``cpu_over_floor_ms`` is baton's own share (its store transactions, receipts, budget, the subagent's task,
and pydantic-ai's model layer over the openai client). The house rules require pydantic-ai for providers,
so a second floor puts it in: ``pydantic_ai_cpu_ms_per_request`` is the same N requests made through
pydantic-ai's ``model_request`` over the same client (with the garbage collector set as ``baton serve``
sets it), and ``ping_cpu_ms_per_call`` is baton's cheapest call, ``mcp_ping`` (the SDK's dispatch, baton's
transport and one receipt committed before the answer), N written back to back. A subagent is at least
both, so ``required_floor_ms_per_subagent`` is their sum, and ``cpu_over_required_floor_ms`` is what the
rest of a subagent costs: two more durable transactions, its task, the redaction and privacy filter, the
budget and the answer. Inside the client's floor, ``openai_transform_ms``
is one step timed alone: the SDK walking a request's parameters against their TypedDict annotations
(``async_maybe_transform``, a private helper of the SDK; not measured when a release drops it) for a
subagent's first turn, a system and a user message. The fan-out's model is not in genai-prices' table, so
its pricing is a failed lookup; ``pricing_ms_priced_model`` is baton's pricing of one call of a model that is
(``calc_price`` on the call's usage), what every model call of a priced model pays on top.
The model server is ``bench/peers/model_server.py``, asynchronous (uvicorn), so that it is not the
bottleneck: its floor is compared with the latency too.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path
from typing import Any, Literal

from baton.wire.heap import settle
from bench._common import (
    PipeClient,
    baton_command,
    baton_env,
    cpu_ms,
    peer_command,
    ratio,
    rss_kib,
    temp_home,
)

LATENCY_SECONDS = 0.05
SIZES = (10, 100, 500)
DEADLINE_SECONDS = 120.0
#: The fan-out's model name (not in genai-prices' table) and a model of the table, for the pricing figure.
MODEL = "fake-model"
PRICED_MODEL = "gpt-4o-mini"


def start_model_server(stack: ExitStack) -> str:
    """The loopback model server in its own process; returns its ``/v1`` base URL."""
    process = subprocess.Popen(
        peer_command("model_server.py", str(LATENCY_SECONDS)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=baton_env(Path("/nonexistent")),
    )
    stack.callback(process.wait, 10)
    stack.callback(process.stdin.close)  # type: ignore[union-attr]
    assert process.stdout is not None
    return process.stdout.readline().decode().strip()


async def direct(
    base_url: str, count: int, transport: Literal["httpx", "aiohttp"] = "httpx"
) -> tuple[float, float]:
    """Seconds for ``count`` concurrent chat completions sent straight to the model server through the
    openai SDK (with the SDK's own pool defaults), without baton; and the CPU milliseconds this process
    spent on them (the client's own cost, a floor under baton's CPU per subagent)."""
    from openai import AsyncOpenAI, DefaultAioHttpClient, DefaultAsyncHttpxClient

    messages: Any = [{"role": "user", "content": "hello"}]
    http = DefaultAioHttpClient() if transport == "aiohttp" else DefaultAsyncHttpxClient()
    options: Any = {"api_key": "not-needed", "base_url": base_url, "max_retries": 0, "timeout": 60}
    async with AsyncOpenAI(**options, http_client=http) as client:
        await client.chat.completions.create(model=MODEL, messages=messages)
        cpu_before = cpu_ms(os.getpid())
        started = time.perf_counter()
        await asyncio.gather(
            *(client.chat.completions.create(model=MODEL, messages=messages) for _ in range(count))
        )
        return time.perf_counter() - started, cpu_ms(os.getpid()) - cpu_before


async def through_pydantic_ai(base_url: str, count: int) -> float:
    """CPU milliseconds per request of ``count`` concurrent requests made the way a subagent's turn makes
    them, with none of baton's code: pydantic-ai's ``model_request`` (its direct API) over its
    ``OpenAIChatModel`` over the openai client on aiohttp, a system and a user message, the same settings
    (output cap and timeout) baton passes. The house rules require pydantic-ai for providers, so this, with
    the SDK's server, is the floor of the parts baton must use."""
    from openai import AsyncOpenAI, DefaultAioHttpClient
    from pydantic_ai.direct import model_request
    from pydantic_ai.messages import ModelRequest, SystemPromptPart, UserPromptPart
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.settings import ModelSettings

    system = "You are a subagent. Answer the task you are given."
    settings: ModelSettings = {"max_tokens": 1024, "timeout": 60.0}
    options: Any = {"api_key": "not-needed", "base_url": base_url, "max_retries": 0, "timeout": 60}
    async with AsyncOpenAI(**options, http_client=DefaultAioHttpClient()) as client:
        model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client))

        def turn(index: int) -> Any:
            task = f"fan-out task {index}"
            return model_request(
                model,
                [ModelRequest(parts=[SystemPromptPart(system), UserPromptPart(task)])],
                model_settings=settings,
            )

        await turn(-1)
        with collector_as_in_baton_serve():
            cpu_before = cpu_ms(os.getpid())
            await asyncio.gather(*(turn(index) for index in range(count)))
            return (cpu_ms(os.getpid()) - cpu_before) / count


@contextmanager
def collector_as_in_baton_serve() -> Iterator[None]:
    """The garbage collector set as ``baton serve`` sets it once it is up (:func:`baton.wire.heap.settle`: the
    heap so far frozen, young collections less often), put back after: a floor measured in this process
    is then not charged for collections baton's own process does not make."""
    threshold = gc.get_threshold()
    settle()
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


async def raw(base_url: str, count: int) -> float:
    """Seconds for ``count`` concurrent completions as raw HTTP/1.1 on ``count`` sockets: the server's floor."""
    import json
    from urllib.parse import urlsplit

    address = urlsplit(base_url)
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hello"}]}).encode()
    head = f"POST {address.path}/chat/completions HTTP/1.1\r\nHost: {address.netloc}\r\n"
    request = f"{head}Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body

    async def one() -> None:
        reader, writer = await asyncio.open_connection(address.hostname, address.port)
        writer.write(request)
        headers = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in headers.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        await reader.readexactly(length)
        writer.close()

    await one()
    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(count)))
    return time.perf_counter() - started


def finished(database: Path) -> tuple[int, int]:
    """How many subagents have finished, and how many of those did not complete."""
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        done, bad = db.execute(
            "SELECT count(*), coalesce(sum(status != 'completed'), 0) FROM subagents "
            "WHERE status NOT IN ('queued', 'running')"
        ).fetchone()
    return int(done), int(bad)


def spawn_params(index: int) -> dict[str, Any]:
    """The arguments of the index-th async spawn."""
    task = f"fan-out task {index}"
    return {"name": "mcp_spawn_subagent", "arguments": {"task": task, "mode": "async"}}


def fan_out(base_url: str, count: int, warm_up: bool = True) -> dict[str, Any]:
    """One baton process, ``count`` async spawns, polled to completion through its store."""
    with ExitStack() as stack:
        home = stack.enter_context(temp_home())
        env = baton_env(
            home, COLLAB_PROVIDER="openai-compatible", OPENAI_BASE_URL=base_url, OPENAI_MODEL=MODEL
        )
        client = stack.enter_context(PipeClient(baton_command(), env))
        client.initialize()
        if warm_up:  # imports the provider SDK and opens its connection pool before the clock starts
            client.call("tools/call", {"name": "mcp_spawn_subagent", "arguments": {"task": "warm-up"}})
        rss_before = rss_kib(client.pid)
        cpu_before = cpu_ms(client.pid)
        started = time.perf_counter()
        for index in range(count):
            client.send("tools/call", spawn_params(index))
        answered = [client.receive() for _ in range(count)]
        all_answered = time.perf_counter() - started
        elapsed, failed = wait_finished(home / "baton.db", count + warm_up, started)
        rss_after = rss_kib(client.pid)
        cpu_used = cpu_ms(client.pid) - cpu_before
    errors = sum(1 for a in answered if "error" in a or a["result"].get("isError"))
    return {
        "n": count,
        "wall_ms": round(elapsed * 1000, 1),
        "spawns_answered_ms": round(all_answered * 1000, 1),
        "failed": failed + errors,
        "rss_before_kib": rss_before,
        "rss_after_kib": rss_after,
        "rss_per_subagent_kib": round((rss_after - rss_before) / count, 1),
        "cpu_ms_per_subagent": round(cpu_used / count, 2),
    }


def sdk_server_cpu_ms(count: int) -> float:
    """CPU milliseconds per call of the SDK's low-level ``Server`` answering ``count`` ``tools/call`` of a
    no-op tool written back to back on its stdin (after a warm-up): the MCP half of a spawn's floor."""
    params = {"name": "echo", "arguments": {"text": "fan-out task"}}
    with PipeClient(peer_command("lowlevel_server.py"), baton_env(Path("/nonexistent"))) as client:
        return _calls_cpu_ms(client, params, count)


def ping_cpu_ms(count: int) -> float:
    """CPU milliseconds per call of ``baton serve`` answering ``count`` ``mcp_ping`` written back to back:
    the cheapest call baton serves, its receipt committed before each answer."""
    params = {"name": "mcp_ping", "arguments": {}}
    with temp_home() as home, PipeClient(baton_command(), baton_env(home)) as client:
        return _calls_cpu_ms(client, params, count)


def _calls_cpu_ms(client: PipeClient, params: dict[str, Any], count: int) -> float:
    """The server's CPU milliseconds per ``tools/call`` of ``params``, ``count`` written back to back (after
    ``initialize`` and a warm-up of 20 answered one by one)."""
    client.initialize()
    for _ in range(20):
        client.call("tools/call", params)
    cpu_before = cpu_ms(client.pid)
    for _ in range(count):
        client.send("tools/call", params)
    for _ in range(count):
        client.receive()
    return (cpu_ms(client.pid) - cpu_before) / count


def openai_transform_ms(count: int = 500) -> float | None:
    """CPU milliseconds per request of the openai SDK's request-body transform alone, on the body of a
    subagent's first turn (``None`` when the SDK no longer has the helper)."""
    try:
        from openai._utils._transform import async_maybe_transform
        from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
    except ImportError:
        return None
    system = "You are a subagent. Answer the task you are given."
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "fan-out task 1"}]
    body = {"model": MODEL, "messages": messages, "max_completion_tokens": 1024, "stream": False}

    async def transform_all() -> float:
        await async_maybe_transform(body, CompletionCreateParamsNonStreaming)
        started = time.process_time()
        for _ in range(count):
            await async_maybe_transform(body, CompletionCreateParamsNonStreaming)
        return (time.process_time() - started) * 1000 / count

    return asyncio.run(transform_all())


def pricing_ms(model: str, count: int = 500) -> float:
    """CPU milliseconds per call of baton's pricing of one model call (genai-prices' ``calc_price`` on a
    pydantic-ai usage) for ``model`` of the openai-compatible provider."""
    from pydantic_ai.usage import RequestUsage

    from baton.models.pricing import price_call

    usage = RequestUsage(input_tokens=40, output_tokens=12)
    price_call("openai-compatible", model, usage)  # the table loads on first use
    started = time.process_time()
    for _ in range(count):
        price_call("openai-compatible", model, usage)
    return (time.process_time() - started) * 1000 / count


def wait_finished(database: Path, expected: int, started: float) -> tuple[float, int]:
    """Poll the store until ``expected`` subagents have finished; seconds since ``started``."""
    while (elapsed := time.perf_counter() - started) < DEADLINE_SECONDS:
        done, bad = finished(database)
        if done >= expected:
            return elapsed, bad
        time.sleep(0.005)
    raise RuntimeError(f"subagents not finished after {DEADLINE_SECONDS} s")


def run(iterations: int) -> dict[str, Any]:
    """Fan-out at each size (only N=10 when ``iterations`` is 1, the smoke)."""
    sizes = SIZES[:1] if iterations <= 1 else SIZES
    rows = []
    with ExitStack() as stack:
        base_url = start_model_server(stack)
        # steps timed alone, in this process: they do not depend on N
        transform = openai_transform_ms()
        unpriced, priced = pricing_ms(MODEL), pricing_ms(PRICED_MODEL)
        for count in sizes:
            floor = asyncio.run(raw(base_url, count))
            reference, reference_cpu = asyncio.run(direct(base_url, count))
            over_aiohttp, over_aiohttp_cpu = asyncio.run(direct(base_url, count, "aiohttp"))
            sdk_cpu = sdk_server_cpu_ms(count)
            pydantic_ai_cpu = asyncio.run(through_pydantic_ai(base_url, count))
            ping_cpu = ping_cpu_ms(count)
            row = fan_out(base_url, count, warm_up=iterations > 1)
            row["raw_ms"] = round(floor * 1000, 1)
            row["raw_vs_latency"] = ratio(row["raw_ms"], LATENCY_SECONDS * 1000)
            row["direct_ms"] = round(reference * 1000, 1)
            row["direct_cpu_ms_per_request"] = round(reference_cpu / count, 2)
            row["cpu_vs_direct"] = ratio(row["cpu_ms_per_subagent"], row["direct_cpu_ms_per_request"])
            row["wall_vs_direct"] = ratio(row["wall_ms"], row["direct_ms"])
            row["direct_aiohttp_ms"] = round(over_aiohttp * 1000, 1)
            row["direct_aiohttp_cpu_ms_per_request"] = round(over_aiohttp_cpu / count, 2)
            row["cpu_vs_direct_aiohttp"] = ratio(
                row["cpu_ms_per_subagent"], row["direct_aiohttp_cpu_ms_per_request"]
            )
            row["wall_vs_direct_aiohttp"] = ratio(row["wall_ms"], row["direct_aiohttp_ms"])
            row["sdk_server_cpu_ms_per_call"] = round(sdk_cpu, 2)
            floor_cpu = row["direct_aiohttp_cpu_ms_per_request"] + row["sdk_server_cpu_ms_per_call"]
            row["cpu_floor_ms_per_subagent"] = round(floor_cpu, 2)
            row["cpu_over_floor_ms"] = round(row["cpu_ms_per_subagent"] - floor_cpu, 2)
            row["pydantic_ai_cpu_ms_per_request"] = round(pydantic_ai_cpu, 2)
            row["ping_cpu_ms_per_call"] = round(ping_cpu, 2)
            required = row["pydantic_ai_cpu_ms_per_request"] + row["ping_cpu_ms_per_call"]
            row["required_floor_ms_per_subagent"] = round(required, 2)
            row["cpu_over_required_floor_ms"] = round(row["cpu_ms_per_subagent"] - required, 2)
            row["openai_transform_ms"] = None if transform is None else round(transform, 3)
            row["pricing_ms_unpriced_model"] = round(unpriced, 3)
            row["pricing_ms_priced_model"] = round(priced, 3)
            row["wall_vs_latency"] = ratio(row["wall_ms"], LATENCY_SECONDS * 1000)
            row["direct_vs_latency"] = ratio(row["direct_ms"], LATENCY_SECONDS * 1000)
            rows.append(row)
    largest = rows[-1]
    return {
        "title": f"subagent fan-out against a {int(LATENCY_SECONDS * 1000)} ms model",
        "rows": rows,
        "targets": [
            _target(
                "model server floor of 500 (raw sockets) <= 3x the model latency",
                largest,
                "raw_vs_latency",
                3.0,
            ),
            _target(
                "bare openai client's fan-out of 500 <= 3x the model latency",
                largest,
                "direct_vs_latency",
                3.0,
            ),
            _target("baton's fan-out of 500 <= 1.5x the bare client's", largest, "wall_vs_direct", 1.5),
            _target("baton's CPU per subagent at 500 <= 2 ms", largest, "cpu_ms_per_subagent", 2.0),
            {
                "what": "fan-out (reference, no target): the CPU floor of a subagent at 500 without baton "
                "code, ms: the bare openai client's request (aiohttp) + the SDK low-level Server's tools/call",
                "value": largest["cpu_floor_ms_per_subagent"] if largest["n"] == SIZES[-1] else None,
                "met": None,
            },
            {
                "what": "fan-out (reference, no target): the CPU floor of a subagent at 500 on the parts "
                "baton must use, ms: pydantic-ai's model request over the openai client (aiohttp) + baton's "
                "cheapest call (mcp_ping, its receipt durable)",
                "value": largest["required_floor_ms_per_subagent"] if largest["n"] == SIZES[-1] else None,
                "met": None,
            },
            {
                "what": "fan-out (reference, no target): of the bare client's request, the openai SDK's "
                "request-body transform alone, ms",
                "value": largest["openai_transform_ms"] if largest["n"] == SIZES[-1] else None,
                "met": None,
            },
            {
                "what": f"fan-out (reference, no target): pricing one model call of {PRICED_MODEL}, a model "
                f"in genai-prices' table, ms (the fan-out's {MODEL} is not in it and costs "
                f"{largest['pricing_ms_unpriced_model']} ms): what a priced model adds to every subagent",
                "value": largest["pricing_ms_priced_model"] if largest["n"] == SIZES[-1] else None,
                "met": None,
            },
        ],
    }


def _target(what: str, row: dict[str, Any], key: str, limit: float) -> dict[str, Any]:
    """A target on the largest size's ``key`` (not judged when the largest size did not run)."""
    ran = row["n"] == SIZES[-1]
    return {"what": what, "value": row[key] if ran else None, "met": row[key] <= limit if ran else None}


if __name__ == "__main__":
    print(run(int(sys.argv[1]) if len(sys.argv) > 1 else 2))
