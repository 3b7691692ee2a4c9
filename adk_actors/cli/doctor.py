"""``adk doctor``: is this machine ready to run agents and the daemon?

Reports the Python version, the installed packages, whether ``GEMINI_API_KEY`` and
``ADK_DEV_TOKEN`` are set (never their values; for the token, whether it is long
enough for ``adk serve``), whether the data directory is writable, and where
chromium is (for the browser tests). ``status`` is ``ok``, or ``degraded`` when a
required package is missing; warnings say what will not work. It always exits 0.
"""

from __future__ import annotations

import os
import platform
import shutil
from importlib import metadata
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from adk_actors.cli.devapi import TOKEN_VARIABLE
from adk_actors.cli.output import Output, table_of
from adk_actors.cli.sanitize import markup
from adk_actors.config_file import DEFAULT_MODEL, api_key_configured

MIN_TOKEN_CHARS = 16
DEFAULT_DATA_DIR = "./.adk-data"
REQUIRED = (
    "pykka",
    "google-genai",
    "msgspec",
    "httpx",
    "websockets",
    "fastjsonschema",
    "lmdb",
    "structlog",
    "starlette",
    "uvicorn",
    "click",
    "rich",
)
OPTIONAL = ("playwright",)
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


@click.command("doctor")
@click.option(
    "--data",
    "data_dir",
    default=DEFAULT_DATA_DIR,
    show_default=True,
    help="The data directory `adk serve` would use.",
)
@click.option("--json", "json_mode", is_flag=True, help="Print the report as JSON.")
def doctor_command(data_dir: str, json_mode: bool) -> None:
    """Check the Python, packages, environment and data directory."""
    report = doctor_report(data_dir)
    # The report's keys name secrets (gemini_api_key_configured) but its values only say
    # whether one is set: redacting would hide exactly that.
    Output(json_mode).emit(report, _render, redact=False)


def doctor_report(data_dir: str, environ: dict[str, str] | None = None) -> dict[str, Any]:
    env = dict(os.environ if environ is None else environ)
    dependencies = {name: _package(name) for name in REQUIRED}
    optional = {name: _package(name) for name in OPTIONAL}
    token = env.get(TOKEN_VARIABLE, "")
    key_set = api_key_configured(env)
    data = _data_dir(data_dir)
    chromium = next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)
    warnings: list[str] = []
    if not key_set:
        warnings.append(
            'GEMINI_API_KEY is not set: Gemini agents will not start; use "provider": '
            '"scripted" with a "script" to run offline'
        )
    if not token:
        warnings.append(f"{TOKEN_VARIABLE} is not set: `adk serve` and `adk inspect` need it")
    elif len(token) < MIN_TOKEN_CHARS:
        warnings.append(f"{TOKEN_VARIABLE} is shorter than {MIN_TOKEN_CHARS} characters")
    if not data["writable"]:
        warnings.append(f"the data directory {data_dir} is not writable")
    missing = [name for name, found in dependencies.items() if not found["available"]]
    warnings.extend(f"required package {name} is not installed" for name in missing)
    return {
        "command": "doctor",
        "status": "degraded" if missing else "ok",
        "python": platform.python_version(),
        "adk_actors_version": _package("adk-actors")["version"],
        "default_model": DEFAULT_MODEL,
        "dependencies": dependencies,
        "optional_dependencies": optional,
        "gemini_api_key_configured": key_set,
        "developer_token_configured": bool(token),
        "developer_token_length_ok": len(token) >= MIN_TOKEN_CHARS,
        "data_dir": data,
        "chromium": {"found": chromium is not None, "path": chromium},
        "warnings": warnings,
    }


def _package(name: str) -> dict[str, Any]:
    try:
        return {"available": True, "version": metadata.version(name)}
    except metadata.PackageNotFoundError:
        return {"available": False, "version": None}


def _data_dir(path: str) -> dict[str, Any]:
    """Writable if it exists and is writable, or if its nearest existing parent is
    (`adk serve` creates it). Nothing is created here."""
    target = Path(path).expanduser().absolute()
    probe = target
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    writable = probe.is_dir() and os.access(probe, os.W_OK | os.X_OK)
    return {"path": str(target), "exists": target.exists(), "writable": writable}


def _render(console: Console, report: dict[str, Any]) -> None:
    status = report["status"]
    colour = "green" if status == "ok" else "red"
    console.print(f"[bold]adk doctor[/]: [{colour}]{status}[/]")
    console.print(f"python {report['python']}, adk-actors {report['adk_actors_version']}")
    rows = [
        {"package": name, "version": found["version"] or "missing"}
        for name, found in {**report["dependencies"], **report["optional_dependencies"]}.items()
    ]
    console.print(table_of(rows))
    _check(console, "GEMINI_API_KEY set", report["gemini_api_key_configured"])
    _check(console, f"{TOKEN_VARIABLE} set", report["developer_token_configured"])
    _check(
        console,
        f"{TOKEN_VARIABLE} has at least {MIN_TOKEN_CHARS} characters",
        report["developer_token_length_ok"],
    )
    _check(
        console,
        f"data directory {report['data_dir']['path']} writable",
        report["data_dir"]["writable"],
    )
    chromium = report["chromium"]
    _check(console, f"chromium {chromium['path'] or 'not found'}", chromium["found"])
    for warning in report["warnings"]:
        console.print(f"[yellow]warning[/]: {markup(warning)}")


def _check(console: Console, what: str, ok: bool) -> None:
    mark = "[green]yes[/]" if ok else "[red]no [/]"
    console.print(f"{mark}  {markup(what)}")
