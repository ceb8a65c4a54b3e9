"""The `pkagent` command. Each subcommand lives beside the code it drives; this file only wires
them together and, in `main`, turns every error into one line on stderr:

  a PkagentError (configs/errors.py) or an OSError naming its file   -> exit 2, what and where;
  Ctrl-C, SIGTERM, SIGHUP (cleanup code runs first)                   -> exit 130, 143, 129;
  anything else: a bug in pkagent                                     -> exit 3, with the
      traceback only under --debug or PKAGENT_DEBUG=1.
"""

from __future__ import annotations

import os
import sys

import typer

from configs.errors import PkagentError, describe
from pkagent import __version__

DEBUG_ENV = "PKAGENT_DEBUG"

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
    debug: bool = typer.Option(False, "--debug", help=f"Show the traceback of an internal error (or set {DEBUG_ENV}=1)."),
) -> None:
    if debug:
        os.environ[DEBUG_ENV] = "1"


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
        ("experiments.cli", ("run", "report", "search")),
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
    sys.exit(run(sys.argv[1:]))


def run(argv: list[str]) -> int:
    """Run the command line `argv`; the exit code. The one place errors become exit codes."""
    import signal

    # SIGTERM and SIGHUP end the command as Ctrl-C does: cleanup code (finally, with) runs
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    try:
        app(args=argv, prog_name="pkagent", standalone_mode=True)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else _say(str(e.code), 1))
    except PkagentError as e:
        return _say(f"pkagent: {e}", 2)
    except KeyboardInterrupt:
        return _say("pkagent: interrupted", 130)
    except BrokenPipeError:  # `pkagent ... | head`: the reader left; nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as e:
        if e.filename is None:
            return _bug(e)
        return _say(f"pkagent: {describe(e)}", 2)
    except Exception as e:  # noqa: BLE001 - the last line of defence
        return _bug(e)
    return 0


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM or SIGHUP: exit 128+N from wherever the main thread is, so that cleanup code runs."""
    print(f"pkagent: stopped by signal {signum}", file=sys.stderr)
    raise SystemExit(128 + signum)


def _say(line: str, code: int) -> int:
    print(line, file=sys.stderr)
    return code


def _bug(e: BaseException) -> int:
    if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        import traceback

        traceback.print_exception(e)
    hint = "" if os.environ.get(DEBUG_ENV, "") not in ("", "0") else f" (--debug or {DEBUG_ENV}=1 shows the traceback)"
    first = (str(e).strip().splitlines() or [""])[0]
    return _say(f"pkagent: internal error, a bug in pkagent: {type(e).__name__}: {first}{hint}", 3)
