"""What the CLI prints is secret-free and inert on a terminal.

`redacted(value)` is the one redaction every printed value goes through (the project's
rule, `supervision.redact_value`): a credential-named key keeps its name and shows
``[redacted]``; a string shaped like a credential is redacted in place.

Text a model, a tool or a server wrote may carry terminal control sequences (OSC 52
writes the clipboard, OSC 8 hides a link, CSI moves the cursor over earlier output).
`terminal_text(text)` removes them, and every other C0 and C1 control character but
newline and tab; `markup(text)` also escapes rich markup, for text printed through
`rich.console.Console.print` (so ``[red]x[/red]`` prints as written).
`escape_json_controls(line)` writes DEL and the C1 controls of a JSON line as ``\\u``
escapes (the encoder escapes only C0), so JSON output is inert on a terminal too
while decoding to the same values.
"""

from __future__ import annotations

import re
from typing import Any

from rich.markup import escape

from supervision import redact_value

_STRING_INTRODUCERS = "\x90\x98\x9d\x9e\x9f"
"""8-bit DCS, SOS, OSC, PM and APC: each opens a string that runs to its terminator."""

_CONTROL_SEQUENCE = re.compile(
    # CSI: ESC [ (or 8-bit CSI), parameters, intermediates, a final byte
    r"(?:\x1b\[|\x9b)[0-?]*+[ -/]*+[@-~]"
    # OSC, DCS, SOS, PM, APC strings up to BEL, ST (ESC \) or 8-bit ST
    rf"|(?:\x1b[\]PX^_]|[{_STRING_INTRODUCERS}])[^\x07\x1b\x9c{_STRING_INTRODUCERS}]*+"
    r"(?:\x07|\x1b\\|\x9c)"
    # any other escape sequence (an unterminated string loses its introducer only)
    r"|\x1b[ -/]*+[0-~]?"
    # every other control character but tab and newline
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)
_JSON_CONTROLS = {code: f"\\u{code:04x}" for code in range(0x7F, 0xA0)}


def redacted(value: Any) -> Any:
    """A copy of a JSON value with every credential-named key's value and every
    credential-shaped string replaced by ``[redacted]``. Nothing is cut: what the CLI
    prints is already bounded (an event, a 1 MiB developer-API answer)."""
    return redact_value(value, limit=None)


def terminal_text(text: str) -> str:
    """`text` without escape sequences or control characters (newline and tab stay)."""
    if text.isprintable():
        return text
    return _CONTROL_SEQUENCE.sub("", text)


def markup(text: str) -> str:
    """`text` safe to embed in rich markup: no control sequences, markup escaped."""
    return escape(terminal_text(text))


def printable(value: Any) -> Any:
    """A JSON value with `terminal_text` applied to every string, keys included."""
    if isinstance(value, str):
        return terminal_text(value)
    if isinstance(value, dict):
        return {printable(key): printable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [printable(item) for item in value]
    return value


def escape_json_controls(line: str) -> str:
    """A JSON text with DEL and C1 controls escaped (they can only be inside strings)."""
    return line.translate(_JSON_CONTROLS)
