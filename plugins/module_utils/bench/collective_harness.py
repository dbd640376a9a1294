"""Collective benchmark harness: torch.distributed on one host, one process per rank.

Self-contained on purpose (standard library and torch only, nothing from Ansible):
the nccl_bench module writes this file to a temporary directory on the target and
runs it with the interpreter that has torch, usually the serving venv's python::

    <python> collective_harness.py --json-config CONFIG.json
    <python> collective_harness.py --probe

Longer than 500 lines because it is shipped to the target as one self-contained script:
harness_runner.script_source() sends the text of this module alone, and the interpreter that
runs it there has neither Ansible nor the rest of gpuhost, so it cannot import a sibling file.

The parent process imports torch once, then forks one worker per rank (the import is paid
once, not once per rank: on a small CPU that is most of the start-up). Each rank gets RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1 and a free MASTER_PORT, plus the environment the
config names (the NCCL_* candidate under test); CUDA is only initialised in the ranks. Backend
``nccl`` puts one GPU per rank and CUDA tensors; ``gloo`` runs on the CPU, which lets the whole
harness run for real on a machine without a GPU.

For every collective and message size (bytes, as nccl-tests counts them: the whole
buffer), the ranks run ``warmup`` operations, then ``iters`` timed ones bracketed by a
barrier and, for CUDA, a device synchronisation; the time per operation is the slowest
rank's, and rank 0 reports it. algbw = bytes / time (GB/s, 1e9), busbw = algbw x the nccl-tests factor
(all_reduce 2(n-1)/n, all_gather and reduce_scatter (n-1)/n). With ``check`` every rank
fills its input with rank+1 and counts the elements that differ from the expected result
(for all_reduce n(n+1)/2); ``wrong`` is the count summed over ranks, as in nccl-tests.
torch.distributed.all_reduce works in place only, so all_reduce has no out-of-place
measurement here (``out_of_place`` is null); all_gather and reduce_scatter have both.

Output on stdout: one JSON object per line. ``start`` (versions, devices), ``begin``
before each size, ``result`` per size, ``done``, and last, always, ``summary`` with
status ok, timeout or error. Two limits apply: ``startup_timeout_s`` until rank 0 has joined the
process group (importing torch, NCCL's initialisation), then ``timeout_s`` for the sweep itself.
Past either the parent kills every rank and names the size that was running (``hung_at``, or
phase start-up) and the ranks that were still alive. Each rank's stdout
and stderr go to files; the NCCL lines in them (NCCL_DEBUG=INFO) come back under
``summary.nccl_debug`` so that the transport of each channel can be named.

Fault injection for tests only, through the environment variable GPUHOST_BENCH_FAULT:
``wrong:R`` makes rank R corrupt one element of its input before each value check;
``hang:R:BYTES`` makes rank R stop (sleep) when the sweep reaches BYTES.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

PROTOCOL = "gpuhost-collective/1"
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
BACKENDS = ("nccl", "gloo")
FAULT_ENV = "GPUHOST_BENCH_FAULT"
ELEMENT_BYTES = 4  # float32, as nccl-tests' default type
# After a rank fails, the others get this long to notice before they are killed.
FAILURE_GRACE_S = 3.0
# After SIGKILL, how long to wait for the ranks to go before leaving them behind.
KILL_WAIT_S = 5.0
POLL_S = 0.02
# The NCCL lines kept from all ranks together; an 8-rank INFO log is a few thousand lines.
DEBUG_MAX_CHARS = 4_000_000
STDERR_TAIL_CHARS = 4000

# Environment handed to workers by the parent, not part of the user's config.
_ENV_EVENTS = "GPUHOST_HARNESS_EVENTS"
_ENV_DEADLINE = "GPUHOST_HARNESS_DEADLINE"
_ENV_PARENT = "GPUHOST_HARNESS_PARENT"


def bus_factor(collective: str, nranks: int) -> float:
    """The nccl-tests bus bandwidth factor (doc/PERFORMANCE.md)."""
    if nranks < 1:
        raise ValueError("nranks must be at least 1")
    if collective == "all_reduce":
        return 2.0 * (nranks - 1) / nranks
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return (nranks - 1) / nranks
    if collective in ("broadcast", "reduce", "sendrecv"):
        return 1.0
    raise ValueError(f"unknown collective {collective!r}")


def message_sizes(min_bytes: int, max_bytes: int, step_factor: int) -> list[int]:
    """Sizes from min to max, multiplied by step_factor each time (nccl-tests -b -e -f)."""
    if min_bytes < 1 or max_bytes < min_bytes or step_factor < 2:
        raise ValueError("need 1 <= min_bytes <= max_bytes and step_factor >= 2")
    sizes = []
    size = min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= step_factor
    return sizes


def element_counts(collective: str, size_bytes: int, nranks: int) -> tuple[int, int]:
    """(total elements, elements each rank sends) for a message of size_bytes; (0, 0) if too small."""
    total = size_bytes // ELEMENT_BYTES
    if collective == "all_reduce":
        return total, total
    chunk = total // nranks
    return chunk * nranks, chunk


def parse_fault(text: str | None) -> dict:
    """The injected fault from GPUHOST_BENCH_FAULT ('wrong:R' or 'hang:R:BYTES')."""
    if not text:
        return {}
    parts = text.split(":")
    try:
        if parts[0] == "wrong" and len(parts) == 2:
            return {"kind": "wrong", "rank": int(parts[1])}
        if parts[0] == "hang" and len(parts) == 3:
            return {"kind": "hang", "rank": int(parts[1]), "size_bytes": int(parts[2])}
    except ValueError:
        pass
    raise ValueError(f"{FAULT_ENV}={text!r}: expected 'wrong:RANK' or 'hang:RANK:BYTES'")


def rounded(value: float) -> float:
    return float(f"{value:.6g}")


def measurement(collective: str, size_bytes: int, nranks: int, seconds: float, wrong: int | None) -> dict:
    time_us = seconds * 1e6
    algbw = size_bytes / time_us / 1e3 if time_us > 0 else 0.0
    return {
        "time_us": rounded(time_us),
        "algbw_gbps": rounded(algbw),
        "busbw_gbps": rounded(algbw * bus_factor(collective, nranks)),
        "wrong": wrong,
    }


def emit(stream, event: dict) -> None:
    stream.write(json.dumps(event, sort_keys=True) + "\n")
    stream.flush()


# ---------------------------------------------------------------------------
# Parent: starts the ranks, watches the clock, reports


def validate_config(config: dict) -> dict:
    backend = config.get("backend")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    collectives = list(config.get("collectives") or ["all_reduce"])
    unknown = [c for c in collectives if c not in COLLECTIVES]
    if unknown:
        raise ValueError(f"unknown collective(s) {', '.join(map(str, unknown))}; known: {', '.join(COLLECTIVES)}")
    nranks = int(config.get("nranks") or 0)
    if nranks < 1:
        raise ValueError("nranks must be at least 1")
    env = config.get("env") or {}
    if not isinstance(env, dict):
        raise ValueError("env must be a mapping of variable names to values")
    out = {
        "backend": backend,
        "collectives": collectives,
        "nranks": nranks,
        "min_bytes": int(config.get("min_bytes", 8)),
        "max_bytes": int(config.get("max_bytes", 1 << 30)),
        "step_factor": int(config.get("step_factor", 2)),
        "iters": max(1, int(config.get("iters", 20))),
        "warmup": max(0, int(config.get("warmup", 5))),
        "check": bool(config.get("check", True)),
        "timeout_s": float(config.get("timeout_s", 300)),
        "startup_timeout_s": float(config.get("startup_timeout_s", 120)),
        "env": {str(k): str(v) for k, v in env.items()},
        "devices": [int(d) for d in config.get("devices") or []],
    }
    message_sizes(out["min_bytes"], out["max_bytes"], out["step_factor"])
    if out["devices"] and len(out["devices"]) < nranks:
        raise ValueError(f"{nranks} ranks need {nranks} devices, {len(out['devices'])} given")
    return out


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def read_text(path: str, limit: int | None = None) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return ""
    if limit is not None and len(text) > limit:
        return text[-limit:]
    return text


def read_events(path: str) -> list[dict]:
    events = []
    for line in read_text(path).splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and "event" in event:
            events.append(event)
    return events


def nccl_lines(texts: list[str]) -> str:
    kept: list[str] = []
    size = 0
    for text in texts:
        for line in text.splitlines():
            if "NCCL" in line and size < DEBUG_MAX_CHARS:
                kept.append(line)
                size += len(line) + 1
    return "\n".join(kept)


def started_sweep(events_path: str) -> bool:
    """Whether rank 0 has written its start event: every rank has joined the process group."""
    try:
        with open(events_path, encoding="utf-8", errors="replace") as handle:
            return '"event": "start"' in handle.read(4096)
    except OSError:
        return False


class Rank:
    """One rank, forked from the parent after torch was imported; the calls mirror subprocess.Popen's."""

    def __init__(self, config_path: str, env: dict[str, str], out_path: str, err_path: str) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        self.returncode: int | None = None
        self.pid = os.fork()
        if self.pid == 0:  # the rank
            code = 1
            try:
                for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                                        (1, out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                        (2, err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
                    opened = os.open(path, flags, 0o600)
                    os.dup2(opened, fd)
                    os.close(opened)
                os.environ.clear()
                os.environ.update(env)
                code = worker_entry(config_path)
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        return self.returncode

    def wait(self, timeout: float) -> int:
        end = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > end:
                raise subprocess.TimeoutExpired(f"rank {self.pid}", timeout)
            time.sleep(POLL_S)
        return self.returncode

    def signal(self, signum: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)


def stop(ranks: list[Rank]) -> None:
    """Terminate, then kill, every rank. A rank stuck in the driver (uninterruptible sleep, a wedged
    GPU) outlives SIGKILL: it is left behind with returncode None, so that the summary still comes."""
    for rank in ranks:
        rank.signal(signal.SIGTERM)
    end = time.monotonic() + 2.0
    for rank in ranks:
        try:
            rank.wait(max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            rank.signal(signal.SIGKILL)
    end = time.monotonic() + KILL_WAIT_S
    for rank in ranks:
        with contextlib.suppress(subprocess.TimeoutExpired):
            rank.wait(max(0.0, end - time.monotonic()))


def run(config: dict, out=sys.stdout) -> int:
    started = time.monotonic()
    cfg = validate_config(config)
    try:
        import warnings

        warnings.filterwarnings("ignore", message=".*NumPy.*")
        # Imported once here; the forked ranks inherit it.
        import torch
        import torch.distributed  # noqa: F401
    except Exception as exc:  # any import failure means: no usable torch here
        emit(out, {"event": "summary", "protocol": PROTOCOL, "status": "error", "backend": cfg["backend"],
                   "nranks": cfg["nranks"], "ranks": [], "nccl_debug": "", "hung_at": None,
                   "error": {"kind": "no_torch", "rank": None,
                             "message": f"cannot import torch with {sys.executable}: {type(exc).__name__}: {exc}"}})
        return 2
    workdir = tempfile.mkdtemp(prefix="gpuhost-collective-")
    config_path = os.path.join(workdir, "config.json")
    events_path = os.path.join(workdir, "events.jsonl")
    with open(config_path, "w", encoding="utf-8") as handle:
        json.dump(cfg, handle)
    # Until the sweep starts, the start-up limit applies; the ranks' own safety net covers both.
    deadline_wall = time.time() + cfg["startup_timeout_s"]
    ranks_deadline = deadline_wall + cfg["timeout_s"]
    sweep_started = False
    startup_s = None
    port = free_port()
    procs: list[Rank] = []
    logs: list[tuple[str, str]] = []
    for rank in range(cfg["nranks"]):
        env = dict(os.environ)
        env.update(cfg["env"])
        env.update({
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(cfg["nranks"]),
            "LOCAL_WORLD_SIZE": str(cfg["nranks"]),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            _ENV_EVENTS: events_path,
            _ENV_DEADLINE: repr(ranks_deadline),
            _ENV_PARENT: str(os.getpid()),
        })
        if cfg["backend"] == "gloo":
            env.setdefault("GLOO_SOCKET_IFNAME", "lo")
            # Ranks share the CPU; one thread each keeps them from fighting over cores.
            env.setdefault("OMP_NUM_THREADS", "1")
        # GPU indexes here are NVML's (PCI order); CUDA's default order is fastest first.
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        if cfg["devices"]:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in cfg["devices"])
        out_path = os.path.join(workdir, f"rank{rank}.out")
        err_path = os.path.join(workdir, f"rank{rank}.err")
        logs.append((out_path, err_path))
        procs.append(Rank(config_path, env, out_path, err_path))

    status = "ok"
    failed_at = None
    try:
        while True:
            codes = [p.poll() for p in procs]
            if all(c is not None for c in codes):
                if any(c != 0 for c in codes):
                    status = "error"
                break
            if any(c not in (None, 0) for c in codes):
                failed_at = failed_at or time.monotonic()
                if time.monotonic() - failed_at > FAILURE_GRACE_S:
                    status = "error"
                    break
            if not sweep_started and started_sweep(events_path):
                sweep_started = True
                startup_s = time.monotonic() - started
                deadline_wall = time.time() + cfg["timeout_s"]
            if time.time() > deadline_wall:
                status = "timeout"
                break
            time.sleep(POLL_S)
    finally:
        alive = [rank for rank, p in enumerate(procs) if p.poll() is None]
        stop(procs)

    events = read_events(events_path)
    for event in events:
        emit(out, event)
    errors = [e for e in events if e.get("event") == "error"]
    if status == "ok" and not any(e.get("event") == "done" for e in events):
        status = "error"
    if errors and status != "timeout":
        status = "error"
    begun = [e for e in events if e.get("event") == "begin"]
    finished = {(e.get("collective"), e.get("size_bytes")) for e in events if e.get("event") == "result"}
    hung_at = None
    if status == "timeout":
        pending = [e for e in begun if (e.get("collective"), e.get("size_bytes")) not in finished]
        hung_at = ({"collective": pending[-1]["collective"], "size_bytes": pending[-1]["size_bytes"]}
                   if pending else {"collective": None, "size_bytes": None, "phase": "start-up"})
    texts = []
    ranks = []
    for rank, (out_path, err_path) in enumerate(logs):
        stdout_text, stderr_text = read_text(out_path), read_text(err_path)
        texts.extend([stdout_text, stderr_text])
        ranks.append({
            "rank": rank,
            "returncode": procs[rank].returncode,
            "killed": rank in alive,
            "stderr_tail": stderr_text[-STDERR_TAIL_CHARS:],
        })
    emit(out, {
        "event": "summary",
        "protocol": PROTOCOL,
        "status": status,
        "backend": cfg["backend"],
        "nranks": cfg["nranks"],
        "elapsed_s": round(time.monotonic() - started, 3),
        "startup_s": round(startup_s, 3) if startup_s is not None else None,
        "timeout_s": cfg["timeout_s"],
        "startup_timeout_s": cfg["startup_timeout_s"],
        "hung_at": hung_at,
        "alive_at_deadline": alive if status == "timeout" else [],
        "error": errors[0] if errors else None,
        "ranks": ranks,
        "nccl_debug": nccl_lines(texts),
    })
    for path in [config_path, events_path] + [p for pair in logs for p in pair]:
        with contextlib.suppress(OSError):
            os.unlink(path)
    with contextlib.suppress(OSError):
        os.rmdir(workdir)
    return 0 if status == "ok" else (124 if status == "timeout" else 1)


def probe(out=sys.stdout) -> int:
    """What this interpreter offers: torch, CUDA devices, NCCL, gloo. Never raises."""
    info: dict = {"event": "probe", "protocol": PROTOCOL, "python": sys.version.split()[0],
                  "executable": sys.executable}
    try:
        import warnings

        warnings.filterwarnings("ignore", message=".*NumPy.*")
        import torch
        import torch.distributed as dist
    except Exception as exc:  # any import failure means: no usable torch here
        info.update({"torch": None, "torch_error": f"{type(exc).__name__}: {exc}"})
        emit(out, info)
        return 0
    info.update({
        "torch": torch.__version__,
        "cuda_build": torch.version.cuda,
        "distributed": dist.is_available(),
        "gloo": bool(dist.is_available() and dist.is_gloo_available()),
        "nccl": bool(dist.is_available() and dist.is_nccl_available()),
        "nccl_version": None,
        "cuda_available": False,
        "device_count": 0,
        "devices": [],
    })
    try:
        info["cuda_available"] = bool(torch.cuda.is_available())
        info["device_count"] = torch.cuda.device_count() if info["cuda_available"] else 0
        info["devices"] = [torch.cuda.get_device_name(i) for i in range(info["device_count"])]
    except Exception as exc:
        info["cuda_error"] = f"{type(exc).__name__}: {exc}"
    info["nccl_version"] = nccl_version(torch)
    emit(out, info)
    return 0


def nccl_version(torch) -> str | None:
    try:
        version = torch.cuda.nccl.version()
    except Exception:
        return None
    if isinstance(version, tuple):
        return ".".join(str(v) for v in version)
    if isinstance(version, int):  # old torch: 2708 means 2.7.8, 21903 means 2.19.3
        major, rest = divmod(version, 10000) if version >= 10000 else divmod(version, 1000)
        minor, patch = divmod(rest, 100)
        return f"{major}.{minor}.{patch}"
    return str(version)


# ---------------------------------------------------------------------------
# Worker: one rank


def worker_entry(config_path: str) -> int:
    """A rank's life: the sweep, or its failure told in the events and in its stderr."""
    try:
        return worker(config_path)
    except Exception as exc:
        import traceback

        traceback.print_exc()
        events_path = os.environ.get(_ENV_EVENTS)
        if events_path:
            with open(events_path, "a", encoding="utf-8") as events:
                emit(events, {"event": "error", "kind": "rank_failed", "rank": int(os.environ.get("RANK", -1)),
                              "message": f"{type(exc).__name__}: {exc}"})
        return 1


def watchdog(deadline_wall: float, parent: int) -> None:
    """Ends this rank if the parent dies or the run outlives its deadline: no orphans."""
    while True:
        if os.getppid() != parent or time.time() > deadline_wall + 10:
            os._exit(124)
        time.sleep(0.5)


def worker(config_path: str) -> int:
    with open(config_path, encoding="utf-8") as handle:
        cfg = json.load(handle)
    rank = int(os.environ["RANK"])
    nranks = int(os.environ["WORLD_SIZE"])
    deadline_wall = float(os.environ[_ENV_DEADLINE])
    threading.Thread(target=watchdog, args=(deadline_wall, int(os.environ[_ENV_PARENT])), daemon=True).start()
    events = open(os.environ[_ENV_EVENTS], "a", encoding="utf-8") if rank == 0 else None  # noqa: SIM115
    fault = parse_fault(os.environ.get(FAULT_ENV))

    def fail(kind: str, message: str) -> int:
        if events is not None:
            emit(events, {"event": "error", "kind": kind, "rank": rank, "message": message})
        print(f"rank {rank}: {message}", file=sys.stderr, flush=True)
        return 3

    import warnings

    warnings.filterwarnings("ignore", message=".*NumPy.*")
    try:
        import torch
        import torch.distributed as dist
    except Exception as exc:
        return fail("no_torch", f"cannot import torch with {sys.executable}: {type(exc).__name__}: {exc}")
    if not dist.is_available():
        return fail("no_distributed", f"torch {torch.__version__} was built without torch.distributed")

    backend = cfg["backend"]
    if backend == "nccl":
        if not torch.cuda.is_available() or torch.cuda.device_count() < nranks:
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            return fail("no_cuda", (
                f"no CUDA device visible to {sys.executable}: torch {torch.__version__} "
                f"(CUDA build {torch.version.cuda}) sees {count} device(s), the nccl backend needs {nranks} "
                f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})"))
        if not dist.is_nccl_available():
            return fail("no_nccl", f"torch {torch.__version__} was built without NCCL")
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(1)

    from datetime import timedelta

    timeout = timedelta(seconds=max(10.0, deadline_wall - time.time()))
    init_kwargs = {"backend": backend, "init_method": "env://", "rank": rank, "world_size": nranks,
                   "timeout": timeout}
    if backend == "nccl":
        init_kwargs["device_id"] = device
    try:
        dist.init_process_group(**init_kwargs)
    except TypeError:  # torch < 2.3 has no device_id
        init_kwargs.pop("device_id", None)
        dist.init_process_group(**init_kwargs)

    def sync() -> None:
        if backend == "nccl":
            torch.cuda.synchronize(device)

    def barrier() -> None:
        if backend == "nccl":
            dist.barrier(device_ids=[rank])
        else:
            dist.barrier()
        sync()

    if events is not None:
        start = {"event": "start", "backend": backend, "nranks": nranks, "torch_version": torch.__version__,
                 "cuda_version": torch.version.cuda, "nccl_version": None, "python": sys.version.split()[0],
                 "hostname": socket.gethostname(), "devices": []}
        if backend == "nccl":
            start["nccl_version"] = nccl_version(torch)
            start["devices"] = [torch.cuda.get_device_name(i) for i in range(nranks)]
        emit(events, start)

    sizes = message_sizes(cfg["min_bytes"], cfg["max_bytes"], cfg["step_factor"])
    expected_sum = nranks * (nranks + 1) / 2
    for collective in cfg["collectives"]:
        for size_bytes in sizes:
            total, chunk = element_counts(collective, size_bytes, nranks)
            if chunk == 0:
                continue
            message = total * ELEMENT_BYTES
            if events is not None:
                emit(events, {"event": "begin", "collective": collective, "size_bytes": message})
            if fault.get("kind") == "hang" and fault["rank"] == rank and message >= fault["size_bytes"]:
                time.sleep(10 * 24 * 3600)
            placements = {}
            for placement in ("out_of_place", "in_place"):
                if collective == "all_reduce" and placement == "out_of_place":
                    placements[placement] = None
                    continue
                op = make_op(torch, dist, collective, placement, total, chunk, rank, device)
                op.fill(0.0)
                for _unused in range(cfg["warmup"]):
                    op.run()
                barrier()
                began = time.perf_counter()
                for _unused in range(cfg["iters"]):
                    op.run()
                sync()
                elapsed = torch.tensor([(time.perf_counter() - began) / cfg["iters"]], dtype=torch.float64,
                                       device=device)
                dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
                wrong = None
                if cfg["check"]:
                    op.fill(float(rank + 1))
                    if fault.get("kind") == "wrong" and fault["rank"] == rank:
                        op.send.view(-1)[0] += 1000.0
                    op.run()
                    sync()
                    errors = torch.tensor([op.wrong(nranks, expected_sum)], dtype=torch.int64, device=device)
                    dist.all_reduce(errors)
                    wrong = int(errors.item())
                placements[placement] = measurement(collective, message, nranks, float(elapsed.item()), wrong)
                del op
            if events is not None:
                emit(events, {"event": "result", "collective": collective, "size_bytes": message, "count": total,
                              "type": "float", "redop": "sum" if collective != "all_gather" else "none",
                              "root": -1, **placements})
    barrier()
    if events is not None:
        emit(events, {"event": "done"})
        events.close()
    dist.destroy_process_group()
    return 0


class _Op:
    """One collective on preallocated buffers: ``send`` is what this rank contributes."""

    def __init__(self, torch, run, send, recv, check):
        self.torch = torch
        self.run = run
        self.send = send
        self.recv = recv
        self._check = check

    def fill(self, value: float) -> None:
        self.send.fill_(value)

    def wrong(self, nranks: int, expected_sum: float) -> int:
        return int(self._check(nranks, expected_sum))


def make_op(torch, dist, collective, placement, total, chunk, rank, device) -> _Op:
    if collective == "all_reduce":
        buf = torch.empty(total, dtype=torch.float32, device=device)
        return _Op(torch, lambda: dist.all_reduce(buf), buf, buf,
                   lambda n, s: (buf != s).sum().item())
    if collective == "all_gather":
        recv = torch.empty(total, dtype=torch.float32, device=device)
        # In place, as nccl-tests does it: each rank's input is its own slot of the output.
        send = (recv[rank * chunk:(rank + 1) * chunk] if placement == "in_place"
                else torch.empty(chunk, dtype=torch.float32, device=device))

        def expected_gather(n, s):
            want = torch.arange(1, n + 1, dtype=torch.float32, device=device).repeat_interleave(chunk)
            return (recv != want).sum().item()

        return _Op(torch, lambda: dist.all_gather_into_tensor(recv, send), send, recv, expected_gather)
    if collective == "reduce_scatter":
        send = torch.empty(total, dtype=torch.float32, device=device)
        recv = (send[rank * chunk:(rank + 1) * chunk] if placement == "in_place"
                else torch.empty(chunk, dtype=torch.float32, device=device))
        return _Op(torch, lambda: dist.reduce_scatter_tensor(recv, send), send, recv,
                   lambda n, s: (recv != s).sum().item())
    raise ValueError(f"unknown collective {collective!r}")


# ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="torch.distributed collective benchmark (one process per rank)")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--json-config", metavar="PATH", help="run the sweep described by this JSON file")
    group.add_argument("--probe", action="store_true", help="print what this interpreter offers and exit")
    args = parser.parse_args(argv)
    if args.probe:
        return probe()
    try:
        with open(args.json_config, encoding="utf-8") as handle:
            config = json.load(handle)
        return run(config)
    except (OSError, ValueError) as exc:
        emit(sys.stdout, {"event": "summary", "protocol": PROTOCOL, "status": "error",
                          "error": {"kind": "config", "message": str(exc)}})
        return 2


if __name__ == "__main__":
    sys.exit(main())
