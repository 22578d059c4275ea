"""``baton campaign run|verify``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from baton.testing import FakeLLMServer

app = typer.Typer(help="Run the validation campaign and verify its bundles.", no_args_is_help=True)


#: ``run``'s options, declared apart so that its signature stays a list of names.
CampaignId = Annotated[str | None, typer.Option(help="Bundle id (default: a UTC timestamp).")]
InteractiveHuman = Annotated[bool, typer.Option(help="Wait for one APPROVE/REJECT line on stdin.")]
HumanTimeoutSeconds = Annotated[int, typer.Option(help="Live decision window.")]
RealNotifications = Annotated[bool, typer.Option(help="Really send through every configured channel.")]
LoopbackModel = Annotated[
    bool,
    typer.Option(
        help="Back the model calls with baton's loopback OpenAI-compatible server (a dry run of the wiring; "
        "recorded as such in the summary)."
    ),
]


def _start_loopback_model(environ: dict[str, str]) -> FakeLLMServer:
    """Start the scripted loopback model and point the campaign's provider settings at it."""
    from baton.campaign.governed import governed_script
    from baton.testing import Behavior, FakeLLMServer

    fake = FakeLLMServer().start()
    fake.when("taxonomy", Behavior(delay_seconds=60))
    fake.when("GOVERNED-TOOL-CASE", governed_script())
    environ.update(
        {
            "COLLAB_PROVIDER": "openai-compatible",
            "OPENAI_MODEL": "loopback-model",
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "",
        }
    )
    return fake


def _exit_code(path: Path) -> int:
    """0 when the bundle's summary says passed or blocked (an external gate), 1 otherwise."""
    import json

    status = json.loads((path / "summary.json").read_text(encoding="utf-8"))["status"]
    return 0 if status in {"passed", "blocked"} else 1


@app.command("run")
def run(
    campaign_id: CampaignId = None,
    interactive_human: InteractiveHuman = False,
    human_timeout_seconds: HumanTimeoutSeconds = 14_400,
    real_notifications: RealNotifications = False,
    loopback_model: LoopbackModel = False,
) -> None:
    """Drive every primitive through a real MCP stdio client and write validation/<id>/."""
    from baton.campaign.options import CampaignOptions, default_campaign_id
    from baton.campaign.runner import run_campaign_sync
    from baton.errors import BatonError
    from baton.terminal import progress

    environ = dict(os.environ)
    fake = _start_loopback_model(environ) if loopback_model else None
    options = CampaignOptions(
        campaign_id=campaign_id or default_campaign_id(),
        interactive_human=interactive_human,
        human_timeout_seconds=human_timeout_seconds,
        real_notifications=real_notifications,
        environ=environ,
        model_source="loopback (baton.testing.FakeLLMServer)" if loopback_model else "configured provider",
    )
    try:
        with progress(f"campaign {options.campaign_id}"):
            path = run_campaign_sync(options)
    except BatonError as exc:
        typer.echo(f"{exc.error_class}: {exc.message}", err=True)
        raise typer.Exit(1) from None
    finally:
        if fake is not None:
            fake.stop()
    typer.echo(str(path))
    raise typer.Exit(_exit_code(path))


@app.command("verify")
def verify(
    directory: Path,
    public_key: Annotated[
        Path | None,
        typer.Option(
            help="Check the chain's signed checkpoints with this trusted public key (checkpoint.pub)."
        ),
    ] = None,
) -> None:
    """Recompute a bundle's manifest and receipt chain independently; exit 1 naming the first mismatch."""
    from baton.campaign.verify import main

    raise typer.Exit(main([str(directory), *(["--public-key", str(public_key)] if public_key else [])]))
