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

Before the server starts, it drops SGLang's cached P2P verdict when the P2P facts changed since the
verdict was made. With --enable-p2p-check SGLang tests CUDA IPC once per CUDA_VISIBLE_DEVICES and keeps
the answer in gpu_p2p_access_cache_for_<devices>.json under ~/.cache/sglang (SGLANG_CACHE_DIR in newer
releases) with no expiry (custom_all_reduce_utils.py gpu_p2p_access_check, 0.5.10.post1 and 0.5.23); the
unit's home is persistent, so a driver or hypervisor change would otherwise leave the old verdict in
force. The deployment gate fingerprints those facts (gate/p2p_cache.py) and the unit's environment
carries the fingerprint in GPUHOST_P2P_FACTS; a marker beside the cache records the fingerprint the
cache was made under.

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
    for text in sorted({secret, secret.strip()}):
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
        """The length of the longest tail of data that is the beginning of a form, shorter than the form."""
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
        # Masking is decided on the raw bytes: a short form that is also the start of a longer one (the key
        # "0\r" has forms "0" and "0%0D") waits with the tail, so that a read cut after "0" masks the same
        # text as one read of it all. Matches starting before the held tail are final; one may end inside it.
        buffer = self._pending + data
        open_at = len(buffer) - self._held(buffer)
        out, at = [], 0
        for match in self._pattern.finditer(buffer):
            if match.start() >= open_at:
                break
            out += [buffer[at:match.start()], self._placeholder]
            at = match.end()
        cut = max(at, open_at)
        out.append(buffer[at:cut])
        self._pending = buffer[cut:]
        return b"".join(out)

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


P2P_FACTS_ENV = "GPUHOST_P2P_FACTS"


def p2p_cache_paths(environ: dict[str, str]) -> tuple[str, str]:
    """SGLang's P2P cache file for this unit's GPUs, and the marker of the facts it was made under."""
    root = environ.get("SGLANG_CACHE_DIR") or os.path.join(environ.get("HOME") or os.path.expanduser("~"),
                                                           ".cache", "sglang")
    # SGLang formats the variable as it finds it, "None" when it is unset.
    devices = environ.get("CUDA_VISIBLE_DEVICES")
    name = f"gpu_p2p_access_cache_for_{devices}"
    return os.path.join(root, f"{name}.json"), os.path.join(root, f"{name}.gpuhost-facts")


def refresh_p2p_cache(environ: dict[str, str]) -> str | None:
    """Remove SGLang's cached P2P verdict when the P2P facts differ from those it was made under.

    Returns what was done, for the journal; None when there was nothing to do. Raises OSError when the
    stale verdict cannot be removed (the server must not start on it).
    """
    facts = environ.get(P2P_FACTS_ENV)
    if not facts:
        return None
    cache, marker = p2p_cache_paths(environ)
    try:
        with open(marker, encoding="utf-8") as handle:
            before = handle.read().strip()
    except FileNotFoundError:
        before = None
    if before == facts:
        return None
    removed = False
    if os.path.exists(cache):
        os.remove(cache)
        removed = True
    os.makedirs(os.path.dirname(marker), exist_ok=True)
    with open(marker, "w", encoding="utf-8") as handle:
        handle.write(facts + "\n")
    if removed:
        return (f"the P2P facts changed since SGLang cached its P2P check ({before or 'facts not recorded'} -> "
                f"{facts}): removed {cache}, so SGLang tests CUDA IPC again")
    return f"recorded the P2P facts ({facts}) that SGLang's P2P check in {cache} will be made under"


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
    try:
        done = refresh_p2p_cache(environ)
    except OSError as err:
        say(f"cannot remove SGLang's cached P2P verdict, made under other P2P facts ({err}); the server is not "
            "started. Remove gpu_p2p_access_cache_for_*.json from its cache directory by hand.")
        return 1
    if done:
        say(done)
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
