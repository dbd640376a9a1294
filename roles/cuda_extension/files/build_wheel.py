"""Build one wheel of a CUDA extension, so that an interrupted build can always be told from a finished one.

    build_wheel.py build --workdir DIR --source DIR [--subdir SUB] --pip JSON [--env-file FILE|-]
                         [--prepend-path DIR ...] [--timeout S] [--max-jobs N] [--nvcc-threads N] [-- PIP_ARGS]
    build_wheel.py state --workdir DIR [--tail N]
    build_wheel.py clean --workdir DIR

``build`` takes an exclusive lock on the build directory (``flock`` on the directory itself, held until
it exits), so that of two builds started at once in one directory the second stops with a message
instead of racing the first for ``build.pid``. It makes itself a process group leader (the compilers
it starts join that group), records its pid in ``build.pid``, runs ``pip wheel --no-deps
--no-build-isolation --verbose`` with the whole output in ``build.log``, builds into ``tmp/`` and moves
the finished wheel into ``dist/`` with one rename, then writes ``build.status`` (exit status, seconds,
wheel) and removes ``build.pid``. A wheel in ``dist/`` is therefore always complete, and a ``build.pid``
whose process is gone, or a ``tmp/`` without a running build, means the build was interrupted.

The build's environment (``cuda_extension_pip_env``: proxies, index URLs, tokens) may hold secrets, so
it never travels on the command line, which every user of the host sees in ``ps``: it comes as a JSON
object in a file only its owner may read (mode 0600; any other is refused), removed once read, or on
stdin (``--env-file -``). ``build.log`` is created with mode 0600, and everything written to it or
printed (the environment, the pip command line, pip's own output) is masked first: the values of
variables whose names say secret (``TOKEN``, ``SECRET``, ``PASSWORD``, ``API_KEY``, ``AUTH``...), the
user and password of URLs (``https://user:token@host/`` becomes ``https://***@host/``), secret query
parameters (``?token=***``), and every such value wherever it shows up again. pip itself still gets
them as given.

``state`` prints, as JSON, what the directory says: idle, running, succeeded, failed or interrupted,
with the last lines of the log and its error lines. ``clean`` removes what an interrupted build left
(keeping its log as ``build.log.interrupted``).

Standard library only: it runs with the interpreter of the venv it builds for.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

LOG = "build.log"
INTERRUPTED_LOG = "build.log.interrupted"
PID_FILE = "build.pid"
STATUS_FILE = "build.status"
TMP_DIR = "tmp"
DIST_DIR = "dist"

# Lines worth showing when a build fails: compiler and pip errors, and the OOM killer's trace.
ERROR_LINE = re.compile(r"\berror\b|\bfatal\b|killed|\bFAILED\b", re.IGNORECASE)
# How a compiler killed by the OOM killer shows up: gcc's driver, nvcc's, make/ninja, pip, the shell.
OOM_SIGNS = re.compile(
    r"Killed signal terminated program|died due to signal 9|\(Kill signal\)|exit (?:code|status) (?:137|-9)\b"
    r"|^Killed$",
    re.MULTILINE,
)
TAIL_BYTES = 256 * 1024
EXIT_RUNNING = 3

# Names of environment variables whose values are secrets whatever they look like.
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW(?:OR)?D|PASSPHRASE|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH"
                         r"|COOKIE|SESSION", re.IGNORECASE)
# The user (and password) of a URL: https://user:token@host/ and https://token@host/.
URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/\s@'\"]+)@")
# Query parameters that carry a credential: ?token=..., &api_key=..., &X-Amz-Signature=...
QUERY_SECRET = re.compile(r"(?P<key>[?&][A-Za-z0-9_.-]*(?:token|secret|passw(?:or)?d|key|auth|sig(?:nature)?"
                          r"|credential)[A-Za-z0-9_.-]*=)(?P<value>[^&#\s'\"]+)", re.IGNORECASE)
MASK = "***"
# Shorter values are not hunted for in free text: masking every "ab" would garble the log for nothing.
MIN_SECRET_LEN = 4


class BuildError(Exception):
    """Something that stops a build before pip runs, with what was expected and found."""


class Busy(BuildError):
    """Another build holds the build directory."""


class Masker:
    """Hides secrets in text: known secret values anywhere, and credentials in URLs whatever their values."""

    def __init__(self, env: dict[str, str], args: list[str] = ()) -> None:
        values = {value for key, value in env.items() if SECRET_NAME.search(key)}
        for text in [*env.values(), *args]:
            for match in URL_USERINFO.finditer(text):
                user, _unused, password = match.group("userinfo").partition(":")
                values.add(password or user)
            values.update(match.group("value") for match in QUERY_SECRET.finditer(text))
        # Longest first, so that a value containing another is masked whole.
        self.values = sorted((v for v in values if len(v) >= MIN_SECRET_LEN), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self.values:
            text = text.replace(value, MASK)
        return mask_urls(text)

    def env(self, env: dict[str, str]) -> dict[str, str]:
        return {key: MASK if SECRET_NAME.search(key) else self(value) for key, value in env.items()}


def mask_urls(text: str) -> str:
    """Credentials in URLs masked, for text whose secrets are not known (an older log)."""
    text = URL_USERINFO.sub(lambda m: m.group("scheme") + MASK + "@", text)
    return QUERY_SECRET.sub(lambda m: m.group("key") + MASK, text)


@contextlib.contextmanager
def directory_lock(workdir: Path):
    """Hold the build directory for this process alone, or raise BuildError at once.

    flock on the directory itself: no lock file to leave behind or to race over, and the kernel drops
    the lock when the process ends, however it ends. The compilers do not inherit it (close_fds).
    """
    try:
        fd = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as err:
        raise BuildError(f"expected the build directory {workdir}; cannot open it: {err.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            record = read_json(workdir / PID_FILE) or {}
            pid = record.get("pid")
            who = f" (pid {pid})" if pid else ""
            stop = f"stop it with kill -- -{pid}" if pid else "stop the other build_wheel.py"
            raise Busy(f"another build is starting or running in {workdir}{who}; wait for it to end "
                       f"(build_wheel.py state --workdir {workdir}) or {stop}") from None
        yield
    finally:
        os.close(fd)


def read_env_file(path: str) -> dict[str, str]:
    """The environment handed over in a file only its owner reads (removed once read), or on stdin ("-")."""
    if path == "-":
        text = sys.stdin.read()
    else:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as err:
            raise BuildError(f"expected the environment file {path}; cannot open it: {err.strerror}") from None
        try:
            mode = os.fstat(fd).st_mode & 0o777
            if mode & 0o077:
                raise BuildError(f"expected the environment file {path} to be readable by its owner only (mode 0600), "
                                 f"since it may hold secrets; found mode {mode:04o}. Write it with mode 0600")
            with os.fdopen(os.dup(fd), encoding="utf-8") as handle:
                text = handle.read()
        finally:
            os.close(fd)
            # Read once: a secret left on disk would outlive the build for nothing.
            with contextlib.suppress(OSError):
                os.unlink(path)
    try:
        data = json.loads(text)
    except ValueError as err:
        raise BuildError(f"expected a JSON object of environment variables in {path}; it is not JSON ({err.msg} "
                         f"at line {err.lineno})") from None
    if not isinstance(data, dict) or not all(isinstance(v, str | int | float | bool) for v in data.values()):
        raise BuildError(f"expected a JSON object of environment variables (name: text) in {path}; found "
                         f"{type(data).__name__ if not isinstance(data, dict) else 'values that are not text'}")
    return {str(key): str(value) for key, value in data.items()}


def open_private_log(path: Path):
    """A new log only its owner can read, created so (an older one is removed first, not reused)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    return os.fdopen(fd, "w", encoding="utf-8", buffering=1)


# The log is written by the thread that copies pip's output and, on a timeout, by the main thread.
LOG_LOCK = threading.Lock()


def copy_masked(stream, log, mask: Masker) -> None:
    """pip's output, line by line, into the log with its secrets masked."""
    with contextlib.suppress(OSError, ValueError):
        for raw in iter(stream.readline, b""):
            line = mask(raw.decode("utf-8", errors="replace"))
            with LOG_LOCK:
                log.write(line)


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return ""


def start_ticks(pid: int) -> str:
    """When a process started (clock ticks since boot), to tell it from a later one with the same pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return ""
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else ""


def process_group(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return int(fields[2]) if len(fields) > 2 and fields[2].lstrip("-").isdigit() else None


def alive(record: dict) -> bool:
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    if record.get("boot_id") and record.get("boot_id") != boot_id():
        return False
    ticks = start_ticks(pid)
    return bool(ticks) and ticks == str(record.get("start_ticks", ""))


def read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_json(path: Path, data: dict) -> None:
    """Write whole or not at all: readers never see half a file."""
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)


def log_tail(path: Path) -> list[str]:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_BYTES))
            data = handle.read()
    except OSError:
        return []
    lines = data.decode("utf-8", errors="replace").replace("\r", "\n").splitlines()
    if size > TAIL_BYTES and lines:
        lines = lines[1:]  # the first line read is probably cut
    # Logs of older versions were written unmasked; what is shown from them is masked now.
    return [mask_urls(line.rstrip()) for line in lines if line.strip()]


def error_lines(lines: list[str], limit: int = 20) -> list[str]:
    return [line for line in lines if ERROR_LINE.search(line)][-limit:]


def killed_by_oom(lines: list[str], rc: object) -> bool:
    return rc in (-9, 137) or bool(OOM_SIGNS.search("\n".join(lines)))


def finished_wheel(workdir: Path, name: object) -> str | None:
    if isinstance(name, str) and name and (workdir / DIST_DIR / name).is_file():
        return name
    return None


def read_state(workdir: Path, tail: int = 5, now: float | None = None) -> dict:
    now = time.time() if now is None else now
    record = read_json(workdir / PID_FILE)
    status = read_json(workdir / STATUS_FILE)
    lines = log_tail(workdir / LOG)
    leftover_tmp = (workdir / TMP_DIR).exists()
    result: dict = {
        "workdir": str(workdir),
        "log": str(workdir / LOG),
        "log_exists": (workdir / LOG).exists(),
        "tail": lines[-tail:] if tail > 0 else [],
        "tail_long": lines[-20:],
        "errors": error_lines(lines),
        "leftover_tmp": leftover_tmp,
        "pid": record.get("pid") if record else None,
        "status": status,
        "wheel": None,
        "elapsed_s": None,
        "max_jobs": (record or status or {}).get("max_jobs"),
        "nvcc_threads": (record or status or {}).get("nvcc_threads"),
    }
    if record is not None and not (status is not None and status.get("started") == record.get("started")):
        started = record.get("started")
        result["elapsed_s"] = round(now - started) if isinstance(started, int | float) else None
        result["state"] = "running" if alive(record) else "interrupted"
        result["why"] = ("" if result["state"] == "running" else
                         f"build.pid names process {record.get('pid')}, which is gone, and no exit status was written")
    elif status is not None:
        rc = status.get("rc")
        result["elapsed_s"] = status.get("seconds")
        result["wheel"] = finished_wheel(workdir, status.get("wheel"))
        if rc == 0 and result["wheel"]:
            result["state"] = "succeeded"
        elif rc == 0:
            result["state"] = "idle"  # built once, but the wheel has since been removed
        else:
            result["state"] = "failed"
        result["killed"] = killed_by_oom(lines, rc)
        if record is not None or leftover_tmp:
            result["why"] = "exit status written, but the build's files were not all cleaned up"
    elif leftover_tmp:
        result["state"] = "interrupted"
        result["why"] = f"{workdir / TMP_DIR} is left over and no build is running"
    else:
        result["state"] = "idle"
    result.setdefault("killed", False)
    result.setdefault("why", "")
    return result


def clean(workdir: Path) -> dict:
    with directory_lock(workdir):
        return _clean(workdir)


def _clean(workdir: Path) -> dict:
    state = read_state(workdir)
    if state["state"] == "running":
        raise BuildError(f"a build is running in {workdir} (pid {state['pid']}); wait for it or kill its process "
                         f"group (kill -- -{state['pid']})")
    removed = []
    if state["state"] == "interrupted" and (workdir / LOG).exists():
        os.replace(workdir / LOG, workdir / INTERRUPTED_LOG)
        # A log of an older version was readable by all; what it holds stays with its owner now.
        os.chmod(workdir / INTERRUPTED_LOG, 0o600)
        removed.append(f"{LOG} (kept as {INTERRUPTED_LOG})")
    for name in (PID_FILE, STATUS_FILE, PID_FILE + ".partial", STATUS_FILE + ".partial"):
        if (workdir / name).exists():
            (workdir / name).unlink()
            removed.append(name)
    if (workdir / TMP_DIR).exists():
        shutil.rmtree(workdir / TMP_DIR)
        removed.append(TMP_DIR + "/")
    return {"workdir": str(workdir), "removed": removed, "was": state["state"], "why": state["why"]}


def resolve_source(source: Path, subdir: str) -> Path:
    """The directory to build: the source, its single top directory (unpacked archives), then subdir."""
    if not source.is_dir():
        raise BuildError(f"expected the extension's source in {source}; found no such directory")
    markers = ("setup.py", "pyproject.toml")
    entries = [entry for entry in source.iterdir() if not entry.name.startswith(".")]
    if not any((source / marker).exists() for marker in markers) and len(entries) == 1 and entries[0].is_dir():
        source = entries[0]
    if subdir:
        source = source / subdir
    if not any((source / marker).exists() for marker in markers):
        raise BuildError(f"expected setup.py or pyproject.toml in {source}; found "
                         f"{sorted(entry.name for entry in source.iterdir()) if source.is_dir() else 'no directory'}. "
                         "Check the source's subdir")
    return source


def kill_group(pgid: int, sig: int) -> None:
    """Signal every process of the group but this one (the wrapper still has to write the status)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and process_group(int(entry)) == pgid:
            with contextlib.suppress(OSError):
                os.kill(int(entry), sig)


class Terminated(Exception):
    pass


def _terminate(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def build(args: argparse.Namespace) -> int:
    workdir = Path(args.workdir)
    try:
        with directory_lock(workdir):
            return _build(args, workdir)
    except BuildError as err:
        print(str(err), file=sys.stderr)
        return EXIT_RUNNING if isinstance(err, Busy) else 2


def _build(args: argparse.Namespace, workdir: Path) -> int:
    state = read_state(workdir)
    if state["state"] == "running":
        print(f"a build is already running in {workdir} (pid {state['pid']})", file=sys.stderr)
        return EXIT_RUNNING
    # Fails only for a session leader, which leads its group already.
    with contextlib.suppress(OSError):
        os.setpgrp()
    pgid = os.getpgrp()
    started = time.time()
    record = {"pid": os.getpid(), "pgid": pgid, "boot_id": boot_id(), "start_ticks": start_ticks(os.getpid()),
              "started": started, "max_jobs": args.max_jobs, "nvcc_threads": args.nvcc_threads}
    write_json(workdir / PID_FILE, record)
    for name in (STATUS_FILE,):
        if (workdir / name).exists():
            (workdir / name).unlink()
    if (workdir / TMP_DIR).exists():
        shutil.rmtree(workdir / TMP_DIR)
    (workdir / TMP_DIR).mkdir()

    rc: int = 0
    timed_out = False
    wheel = None
    signal.signal(signal.SIGTERM, _terminate)
    mask = Masker({}, args.pip_args)
    with open_private_log(workdir / LOG) as log:
        try:
            given = read_env_file(args.env_file) if args.env_file else {}
            mask = Masker(given, args.pip_args)
            source = resolve_source(Path(args.source), args.subdir)
            env = dict(os.environ)
            env.update(given)
            env["PATH"] = os.pathsep.join([*args.prepend_path, env.get("PATH", "/usr/bin:/bin")])
            argv = [*json.loads(args.pip), "wheel", "--no-deps", "--no-build-isolation", "--verbose",
                    "--wheel-dir", str(workdir / TMP_DIR), *args.pip_args, str(source)]
            log.write(f"build_wheel: pid {os.getpid()}, process group {pgid}, source {source}\n")
            log.write(f"build_wheel: environment {json.dumps(mask.env(given), sort_keys=True)}\n")
            log.write(f"build_wheel: PATH starts with {os.pathsep.join(args.prepend_path)}\n")
            log.write(f"build_wheel: {mask(' '.join(argv))}\n")
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=str(source), env=env)
            # pip's output goes through the masker; a thread, so that the timeout below still holds.
            pump = threading.Thread(target=copy_masked, args=(proc.stdout, log, mask), daemon=True)
            pump.start()
            try:
                rc = proc.wait(timeout=args.timeout or None)
            except subprocess.TimeoutExpired:
                timed_out = True
                with LOG_LOCK:
                    log.write(f"\nbuild_wheel: no end after {args.timeout} s; stopping the build\n")
                kill_group(pgid, signal.SIGTERM)
                try:
                    rc = proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    kill_group(pgid, signal.SIGKILL)
                    rc = proc.wait()
            # The rest of the output, up to the end of the pipe (a compiler that escaped the group could keep
            # it open: not waited for long).
            pump.join(timeout=30)
            if rc == 0:
                wheels = sorted((workdir / TMP_DIR).glob("*.whl"))
                if len(wheels) != 1:
                    raise BuildError(f"expected one wheel in {workdir / TMP_DIR} after pip wheel; found "
                                     f"{[path.name for path in wheels]}")
                dist = workdir / DIST_DIR
                dist.mkdir(exist_ok=True)
                for old in dist.glob("*.whl"):
                    old.unlink()
                os.replace(wheels[0], dist / wheels[0].name)
                wheel = wheels[0].name
        except (BuildError, OSError, ValueError) as err:
            log.write(f"build_wheel: error: {mask(str(err))}\n")
            rc = 2
        except Terminated as err:
            log.write(f"\nbuild_wheel: terminated by signal {err.args[0]}; stopping the build\n")
            kill_group(pgid, signal.SIGKILL)
            rc = -int(err.args[0])
        seconds = round(time.time() - started, 1)
        log.write(f"\nbuild_wheel: exit status {rc} after {seconds} s; wheel {wheel or 'none'}\n")
    write_json(workdir / STATUS_FILE, {"rc": rc, "timed_out": timed_out, "seconds": seconds, "wheel": wheel,
                                       "started": started, "max_jobs": args.max_jobs,
                                       "nvcc_threads": args.nvcc_threads, "log": str(workdir / LOG)})
    shutil.rmtree(workdir / TMP_DIR, ignore_errors=True)
    (workdir / PID_FILE).unlink()
    return 0 if rc == 0 else 1


def main(argv: list[str] | None = None) -> int:
    # No abbreviations: "--env" must not pass for "--env-file".
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], allow_abbrev=False)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("build", allow_abbrev=False)
    run.add_argument("--workdir", required=True)
    run.add_argument("--source", required=True)
    run.add_argument("--subdir", default="")
    run.add_argument("--pip", required=True, help='JSON list: the pip command, e.g. ["/venv/bin/python", "-m", "pip"]')
    run.add_argument("--env-file", default="",
                     help="a file (mode 0600, removed once read), or - for stdin, holding the JSON object of "
                          "variables added to the environment; never on the command line, which ps shows to all")
    # Refused with a message that does not repeat its value (argparse's own error would print it).
    run.add_argument("--env", help=argparse.SUPPRESS)
    run.add_argument("--prepend-path", action="append", default=[])
    run.add_argument("--timeout", type=int, default=0)
    run.add_argument("--max-jobs", type=int, default=None)
    run.add_argument("--nvcc-threads", type=int, default=None)
    run.add_argument("pip_args", nargs="*")
    show = commands.add_parser("state")
    show.add_argument("--workdir", required=True)
    show.add_argument("--tail", type=int, default=5)
    tidy = commands.add_parser("clean")
    tidy.add_argument("--workdir", required=True)
    args = parser.parse_args(argv)

    if args.command == "build" and args.env is not None:
        run.error("--env is refused: the environment may hold secrets, and a command line is visible to every user "
                  "of the host (ps). Hand it over with --env-file FILE (mode 0600) or --env-file - (stdin)")
    if args.command == "state":
        print(json.dumps(read_state(Path(args.workdir), tail=args.tail), sort_keys=True))
        return 0
    if args.command == "clean":
        try:
            print(json.dumps(clean(Path(args.workdir)), sort_keys=True))
        except BuildError as err:
            print(str(err), file=sys.stderr)
            return EXIT_RUNNING
        return 0
    return build(args)


if __name__ == "__main__":
    sys.exit(main())
