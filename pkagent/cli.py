"""The `pkagent` command. Each subcommand lives beside the code it drives; this file only wires
them together and turns a bad config into one line and exit code 2."""

from __future__ import annotations

import sys

import typer

from configs import ConfigError
from pkagent import __version__

app = typer.Typer(
    name="pkagent",
    help="LLM agents that write fast multi-GPU CUDA kernels, and the checker that scores them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"pkagent {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    pass


@app.command()
def doctor(as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables.")) -> None:
    """What this machine has: Python, torch, GPUs and their links, nvcc, multicast, Docker, API keys."""
    from pkagent.doctor import collect, render

    report = collect()
    if as_json:
        import json

        typer.echo(json.dumps(report, indent=2))
    else:
        render(report)


def _register() -> None:
    """Subcommands owned by the other packages, each in its own cli module."""
    import importlib

    for module, names in (
        ("eval.cli", ("check", "problems")),
        ("sandbox.cli", ("sandbox",)),
        ("kernels_lib.cli", ("bench-lib",)),
        ("agent.cli", ("solve", "view", "demo")),
        ("agent.experiment", ("run",)),
        ("agent.report", ("report",)),
        ("agent.search", ("search",)),
    ):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            continue
        for name in names:
            obj = getattr(mod, name.replace("-", "_"), None)
            if isinstance(obj, typer.Typer):
                app.add_typer(obj, name=name)
            elif callable(obj):
                app.command(name)(obj)


_register()


def main() -> None:
    try:
        app()
    except ConfigError as e:
        print(f"pkagent: config error: {e}", file=sys.stderr)
        sys.exit(2)
