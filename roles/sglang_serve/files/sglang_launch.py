"""Start SGLang's server with its output passed through a mask of the API key.

SGLang logs its startup arguments (``server_args=ServerArgs(..., api_key='...')``) on every start
and restart, and the journal keeps them for every reader of the journal (root, the adm and
systemd-journal groups). The unit therefore runs this launcher, which runs the server as a child
with stdout and stderr piped through it and writes them out with every form of the key (raw,
Python repr, JSON and URL escaped) replaced by ``<api key>``:

    python -I sglang_launch.py --secret-file %d/sglang.yaml -- python -m sglang.launch_server ...

The key comes from the same --config file SGLang reads (the unit's credential): never from the
command line or the environment, where every local user could read it. SIGTERM, SIGINT and
SIGHUP go to the server's process group (the server and the scheduler processes it forks, as
Ctrl-C would); the launcher exits with the server's status, or dies of the signal that killed it,
so that systemd judges the server's end, not the launcher's.

Standard library only: it runs with the serving venv's Python, whatever is installed there.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.parse

PLACEHOLDER = "<api key>"
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
CHUNK = 65536
# Seconds the output of processes that outlive the server is still copied after it exits.
PUMP_GRACE = 5.0
_KEY_LINE = re.compile(r"^\s*api[-_]key\s*:\s*(.*?)\s*$")


def secret_forms(secret: str) -> list[str]:
    """Every way the secret may be written into a log: as is, and as Python, JSON and URLs escape it.

    The same forms for the secret with surrounding whitespace taken off (a key read with a trailing
    newline is printed both ways). Longest first, so that a longer form is masked whole.
    """
    forms: set[str] = set()
    for text in {secret, secret.strip()}:
        if not text:
            continue
        forms.update((
            text,
            repr(text)[1:-1],
            # The escapes Python writes inside single quotes when the text also holds a double quote.
            repr(text + '"')[1:-2],
            ascii(text)[1:-1],
            json.dumps(text)[1:-1],
            json.dumps(text, ensure_ascii=False)[1:-1],
            urllib.parse.quote(text, safe=""),
            urllib.parse.quote_plus(text, safe=""),
            repr(text.encode("utf-8", "surrogatepass"))[2:-1],
        ))
    return sorted((form for form in forms if form), key=lambda form: (-len(form), form))


def read_secret(path: str) -> str | None:
    """The api-key of an SGLang --config file as the role writes it (a JSON string); None without one."""
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    for line in lines:
        match = _KEY_LINE.match(line)
        if not match:
            continue
        value = match.group(1)
        if value.startswith('"'):
            try:
                decoded = json.loads(value)
            except ValueError:
                decoded = value.strip('"')
            return str(decoded)
        if value.startswith("'") and value.endswith("'") and len(value) >= 2:
            return value[1:-1].replace("''", "'")
        return value
    return None


class StreamMasker:
    """Masks the secret's forms in a byte stream read in arbitrary chunks.

    Whatever can be written out is: only a tail that could be the start of a form (cut by the
    chunk boundary) is held back until the next chunk, so a log line appears as soon as it is
    written, and a form split across two reads is still masked.
    """

    def __init__(self, secret: str | None, placeholder: str = PLACEHOLDER) -> None:
        forms = secret_forms(secret) if secret else []
        self._forms = [form.encode("utf-8", "surrogatepass") for form in forms]
        self._placeholder = placeholder.encode()
        self._pattern = re.compile(b"|".join(re.escape(form) for form in self._forms)) if self._forms else None
        self._pending = b""

    def _held(self, data: bytes) -> int:
        """The length of the longest tail of data that is the beginning of a form."""
        held = 0
        for form in self._forms:
            start = max(0, len(data) - len(form) + 1)
            at = data.find(form[:1], start)
            while at != -1:
                if form.startswith(data[at:]):
                    held = max(held, len(data) - at)
                    break
                at = data.find(form[:1], at + 1)
        return held

    def feed(self, data: bytes) -> bytes:
        if self._pattern is None:
            return data
        buffer = self._pattern.sub(self._placeholder, self._pending + data)
        held = self._held(buffer)
        self._pending = buffer[len(buffer) - held:] if held else b""
        return buffer[:len(buffer) - held]

    def flush(self) -> bytes:
        rest, self._pending = self._pending, b""
        return self._pattern.sub(self._placeholder, rest) if self._pattern is not None else rest


def pump(source: int, sink: int, masker: StreamMasker) -> None:
    """Copy source to sink through the masker until the source closes."""

    def write(data: bytes) -> None:
        while data:
            try:
                written = os.write(sink, data)
            except BrokenPipeError:
                return
            data = data[written:]

    while True:
        try:
            data = os.read(source, CHUNK)
        except InterruptedError:
            continue
        if not data:
            break
        write(masker.feed(data))
    write(masker.flush())


def parse(argv: list[str]) -> tuple[str, list[str]]:
    if len(argv) < 4 or argv[0] != "--secret-file" or argv[2] != "--":
        raise ValueError("usage: sglang_launch.py --secret-file FILE -- COMMAND [ARGUMENT...]")
    return argv[1], argv[3:]


def say(message: str) -> None:
    sys.stderr.write(f"sglang_launch: {message}\n")
    sys.stderr.flush()


def main(argv: list[str]) -> int:
    try:
        secret_file, command = parse(argv)
    except ValueError as err:
        say(str(err))
        return 2
    try:
        secret = read_secret(secret_file)
    except (OSError, UnicodeDecodeError) as err:
        # Never start a server whose key could reach the journal unmasked.
        say(f"cannot read the API key from {secret_file} ({getattr(err, 'strerror', None) or err}); the server "
            "is not started. Expected the unit's credential (LoadCredential=).")
        return 1
    environ = dict(os.environ)
    # Log lines reach the journal as they are written, not when a pipe's buffer fills.
    environ.setdefault("PYTHONUNBUFFERED", "1")
    try:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environ,
                                 start_new_session=True)
    except OSError as err:
        say(f"cannot run {command[0]}: {err.strerror}")
        return 127

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signum)

    for signum in FORWARDED:
        signal.signal(signum, forward)
    assert child.stdout is not None and child.stderr is not None
    pumps = [threading.Thread(target=pump, args=(stream.fileno(), sink, StreamMasker(secret)), daemon=True)
             for stream, sink in ((child.stdout, sys.stdout.fileno()), (child.stderr, sys.stderr.fileno()))]
    for thread in pumps:
        thread.start()
    status = child.wait()
    # The server's own children (SGLang's scheduler processes) inherit the pipes; one that outlives
    # it must not keep the launcher, and so the unit, alive.
    for thread in pumps:
        thread.join(timeout=PUMP_GRACE)
    if status < 0:
        # Die of the same signal, so that systemd sees what ended the server (a SIGTERM at stop is clean).
        sys.stdout.flush()
        if -status not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        return 128 - status
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
