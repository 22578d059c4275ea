"""``baton chat telegram-webhook``: register (or show) the URL Telegram posts button presses to."""

from __future__ import annotations

from typing import Annotated

import anyio
import typer

from baton.errors import BatonError
from baton.terminal import fail, out, print_json

app = typer.Typer(help="Chat platforms' callbacks: register baton's Telegram webhook.", no_args_is_help=True)


@app.callback()
def _chat() -> None:
    """Chat platforms' callbacks (Slack's Request URL is set in the Slack app's own settings)."""


@app.command("telegram-webhook")
def telegram_webhook(
    url: Annotated[
        str | None,
        typer.Option(
            "--url", help="https://HOST/chat/telegram/webhook; default BATON_PUBLIC_URL + that path."
        ),
    ] = None,
    show: Annotated[bool, typer.Option("--show", help="Only show what Telegram has registered.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the webhook state as JSON.")] = False,
) -> None:
    """Register baton's webhook with the bot (setWebhook with TELEGRAM_WEBHOOK_SECRET), then show its state."""
    from baton.chat.telegram_setup import set_webhook, webhook_info
    from baton.config import load_settings

    try:
        settings = load_settings()
        action = webhook_info if show else set_webhook
        state = anyio.run(action, settings, url)
    except BatonError as exc:
        fail(exc)
    if as_json:
        print_json(state.as_dict())
        return
    lines = [
        f"{'Telegram posts to' if show else 'Registered'}: {state.url or '(no webhook)'}"
        + ("" if state.matches else f" (baton expects {state.expected_url})"),
        f"Updates: {', '.join(state.allowed_updates) if state.allowed_updates else 'all kinds'}; "
        f"{state.pending_update_count} waiting to be delivered.",
    ]
    if state.last_error_message:
        lines.append(f"Telegram's last delivery error: {state.last_error_message}")
    for line in lines:
        out.print(line, markup=False, highlight=False)
    if show and not state.matches:
        raise typer.Exit(1)
