"""P2P proof harness: does data written from one GPU arrive at another, and how fast, by which path.

Self-contained (standard library and torch only); the gpu_p2p_probe module writes it to a
temporary directory on the target and runs it with the serving venv's interpreter::

    <python> p2p_harness.py --json-config CONFIG.json

The parent process does not import torch: it starts one worker (this file with ``--worker``)
that drives every GPU, and kills it at the deadline, because a write into a broken peer window
can hang the process inside CUDA. The last ``begin`` event names the pair and phase that hung.

For every ordered pair (i, j) of the GPUs, the worker

* records ``torch.cuda.can_device_access_peer(i, j)``; torch enables peer access on the first
  copy between two devices that may peer;
* proves the data path: a known pattern, built on GPU i, is copied into a tensor on GPU j and
  compared there with the same pattern built on j independently, once by the copy engine
  (contiguous ``copy_``) and once by a kernel writing through a strided view (the access NCCL
  and custom all-reduce kernels make); ``wrong`` counts the elements that did not arrive. Zeros
  at the destination are what a granted P2P window that is a private mirror gives
  (NVIDIA/nccl#2335);
* times copies per message size by two paths: ``peer`` (GPU i to GPU j directly, as the driver
  allows) and ``host`` (GPU i to a pinned host buffer, then to GPU j: the route of NCCL's SHM
  transport). ``time_us`` is wall time per copy, copies issued back to back; for the peer path
  ``gpu_us`` is the time per copy measured with CUDA events on the stream while it was held by
  ``torch.cuda._sleep`` until every copy was queued, as p2pBandwidthLatencyTest measures
  latency (launch costs excluded). The hold is a spin of fixed length, and queueing a cross-device
  copy records and waits on events on both streams, so the queueing may outlast it: the GPU then
  waits for the host between copies and the events time the queueing. The start event is recorded
  right behind the hold, so when it has completed before the last copy is queued the hold was
  outlasted; the figure is then measured again behind a hold 4 times longer, and after
  ``HOLD_TRIES`` holds it is null (never a figure of queueing). ``hold`` says which it was.

Output on stdout: JSON lines ``start``, ``begin``, ``proof``, ``timing`` (one per pair and
size), ``done``, and last, always, ``summary`` (status ok, timeout or error).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

PROTOCOL = "gpuhost-p2p/1"
DEFAULT_SIZES = (8, 64, 512, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1 << 20, 4 << 20, 16 << 20,
                 64 << 20, 256 << 20)
DEFAULT_PROOF_BYTES = 4 << 20
POLL_S = 0.05
# The first hold of the stream, in GPU clock cycles (about 1 ms at 2 GHz), for 50 copies; each try
# that the queueing outlasts holds 4 times longer.
HOLD_CYCLES = 2_000_000
HOLD_TRIES = 3
# After SIGKILL, how long to wait for the worker to go before leaving it behind.
KILL_WAIT_S = 5.0
_ENV_EVENTS = "GPUHOST_HARNESS_EVENTS"
_ENV_DEADLINE = "GPUHOST_HARNESS_DEADLINE"
_ENV_PARENT = "GPUHOST_HARNESS_PARENT"


def iterations(size_bytes: int) -> int:
    """Enough copies to time small sizes well, few for the large ones (each takes ms)."""
    if size_bytes <= 1 << 20:
        return 50
    if size_bytes <= 16 << 20:
        return 20
    return 5


def emit(stream, event: dict) -> None:
    stream.write(json.dumps(event, sort_keys=True) + "\n")
    stream.flush()


def read_events(path: str) -> list[dict]:
    events = []
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and "event" in event:
                    events.append(event)
    except OSError:
        pass
    return events


# ---------------------------------------------------------------------------
# Parent


def run(config: dict, out=sys.stdout) -> int:
    started = time.monotonic()
    timeout_s = float(config.get("timeout_s", 300))
    workdir = tempfile.mkdtemp(prefix="gpuhost-p2p-")
    config_path = os.path.join(workdir, "config.json")
    events_path = os.path.join(workdir, "events.jsonl")
    err_path = os.path.join(workdir, "worker.err")
    with open(config_path, "w", encoding="utf-8") as handle:
        json.dump(config, handle)
    deadline_wall = time.time() + timeout_s
    env = dict(os.environ)
    env.update({_ENV_EVENTS: events_path, _ENV_DEADLINE: repr(deadline_wall), _ENV_PARENT: str(os.getpid())})
    # GPU indexes here are NVML's (PCI order); CUDA's default order is fastest first.
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    if config.get("devices"):
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in config["devices"])
    with open(err_path, "wb") as stderr:
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", config_path],
                                stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr, env=env)
    status = "ok"
    left_behind = ""
    while proc.poll() is None:
        if time.time() > deadline_wall:
            status = "timeout"
            left_behind = stop_worker(proc)
            break
        time.sleep(POLL_S)
    events = read_events(events_path)
    for event in events:
        emit(out, event)
    errors = [e for e in events if e.get("event") == "error"]
    if status == "ok" and (proc.returncode != 0 or errors or not any(e.get("event") == "done" for e in events)):
        status = "error"
    hung_at = None
    if status == "timeout":
        begun = [e for e in events if e.get("event") == "begin"]
        hung_at = ({k: begun[-1].get(k) for k in ("src", "dst", "phase", "size_bytes")} if begun
                   else {"phase": "start-up"})
    try:
        with open(err_path, encoding="utf-8", errors="replace") as handle:
            stderr_tail = (handle.read() + left_behind)[-4000:]
    except OSError:
        stderr_tail = left_behind
    emit(out, {"event": "summary", "protocol": PROTOCOL, "status": status, "timeout_s": timeout_s,
               "elapsed_s": round(time.monotonic() - started, 3), "hung_at": hung_at,
               "error": errors[0] if errors else None, "returncode": proc.returncode, "stderr_tail": stderr_tail})
    for path in (config_path, events_path, err_path):
        with contextlib.suppress(OSError):
            os.unlink(path)
    with contextlib.suppress(OSError):
        os.rmdir(workdir)
    return 0 if status == "ok" else (124 if status == "timeout" else 1)


def stop_worker(proc) -> str:
    """Terminate, then kill, the worker; '' once it is gone, else what was left behind. A worker stuck
    in the driver (uninterruptible sleep, a wedged GPU) outlives SIGKILL: it is not waited for."""
    proc.terminate()
    try:
        proc.wait(timeout=2)
        return ""
    except subprocess.TimeoutExpired:
        proc.kill()
    try:
        proc.wait(timeout=KILL_WAIT_S)
        return ""
    except subprocess.TimeoutExpired:
        return (f"\nthe worker did not exit within {KILL_WAIT_S:g} s of SIGKILL (stuck in the driver?); it was "
                "left behind\n")


# ---------------------------------------------------------------------------
# Worker


def watchdog(deadline_wall: float, parent: int) -> None:
    while True:
        if os.getppid() != parent or time.time() > deadline_wall + 10:
            os._exit(124)
        time.sleep(0.5)


def worker(config_path: str) -> int:
    with open(config_path, encoding="utf-8") as handle:
        cfg = json.load(handle)
    threading.Thread(target=watchdog, args=(float(os.environ[_ENV_DEADLINE]), int(os.environ[_ENV_PARENT])),
                     daemon=True).start()
    events = open(os.environ[_ENV_EVENTS], "a", encoding="utf-8")  # noqa: SIM115

    def fail(kind: str, message: str) -> int:
        emit(events, {"event": "error", "kind": kind, "message": message})
        return 3

    import warnings

    warnings.filterwarnings("ignore", message=".*NumPy.*")
    try:
        import torch
    except Exception as exc:
        return fail("no_torch", f"cannot import torch with {sys.executable}: {type(exc).__name__}: {exc}")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        return fail("no_cuda", (
            f"no CUDA device visible to {sys.executable}: torch {torch.__version__} (CUDA build {torch.version.cuda}) "
            f"sees none (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})"))
    names = [torch.cuda.get_device_name(i) for i in range(count)]
    access = [[None if i == j else bool(torch.cuda.can_device_access_peer(i, j)) for j in range(count)]
              for i in range(count)]
    emit(events, {"event": "start", "torch_version": torch.__version__, "cuda_version": torch.version.cuda,
                  "python": sys.version.split()[0], "devices": [{"index": i, "name": n} for i, n in enumerate(names)],
                  "visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "access": access})
    sizes = [int(s) for s in cfg.get("sizes") or DEFAULT_SIZES]
    proof_bytes = int(cfg.get("proof_bytes") or DEFAULT_PROOF_BYTES)
    sleep = getattr(torch.cuda, "_sleep", None)
    for i in range(count):
        for j in range(count):
            if i == j:
                continue
            emit(events, {"event": "begin", "src": i, "dst": j, "phase": "proof"})
            emit(events, {"event": "proof", "src": i, "dst": j, "peer_access": access[i][j],
                          **prove(torch, i, j, proof_bytes // 4)})
            for size in sizes:
                emit(events, {"event": "begin", "src": i, "dst": j, "phase": "timing", "size_bytes": size})
                emit(events, {"event": "timing", "src": i, "dst": j, "size_bytes": size,
                              **time_paths(torch, sleep, i, j, size)})
    emit(events, {"event": "done"})
    events.close()
    return 0


def pattern(torch, elements: int, device: int, salt: int):
    """Values that differ element to element and pair to pair, never 0: zeros cannot pass for data."""
    index = torch.arange(elements, dtype=torch.int64, device=f"cuda:{device}")
    return ((index * 2654435761 + salt) % 2147483629 + 1).to(torch.int32)


def prove(torch, src: int, dst: int, elements: int) -> dict:
    salt = 1000 * src + dst + 1
    data = pattern(torch, elements, src, salt)
    expected = pattern(torch, elements, dst, salt)
    torch.cuda.synchronize(src)
    # Copy engine: one contiguous copy, a DMA from src into dst's memory when peer access is on.
    target = torch.zeros(elements, dtype=torch.int32, device=f"cuda:{dst}")
    target.copy_(data)
    torch.cuda.synchronize(dst)
    ce_wrong = int((target != expected).sum().item())
    # Kernel: a strided destination cannot be one DMA, so a copy kernel moves the elements.
    strided = torch.zeros(elements * 2, dtype=torch.int32, device=f"cuda:{dst}")
    strided[::2].copy_(data)
    torch.cuda.synchronize(src)
    torch.cuda.synchronize(dst)
    sm_wrong = int((strided[::2] != expected).sum().item())
    zeros = int((target == 0).sum().item())
    return {"elements": elements, "ce_wrong": ce_wrong, "sm_wrong": sm_wrong, "zeros_at_destination": zeros}


def time_paths(torch, sleep, src: int, dst: int, size: int) -> dict:
    iters = iterations(size)
    a = torch.empty(size, dtype=torch.uint8, device=f"cuda:{src}")
    b = torch.empty(size, dtype=torch.uint8, device=f"cuda:{dst}")
    host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    src_stream = torch.cuda.current_stream(src)
    dst_stream = torch.cuda.current_stream(dst)

    def sync() -> None:
        torch.cuda.synchronize(src)
        torch.cuda.synchronize(dst)

    def peer() -> None:
        b.copy_(a, non_blocking=True)

    def via_host() -> None:
        host.copy_(a, non_blocking=True)
        moved = torch.cuda.Event()
        moved.record(src_stream)
        dst_stream.wait_event(moved)
        b.copy_(host, non_blocking=True)

    result = {}
    for name, step in (("peer", peer), ("host", via_host)):
        step()
        sync()
        began = time.perf_counter()
        for _unused in range(iters):
            step()
        sync()
        seconds = (time.perf_counter() - began) / iters
        result[name] = {"time_us": round(seconds * 1e6, 3), "gbps": round(size / seconds / 1e9, 4)}
    held = held_copy_time(torch, sleep, src, src_stream, peer, iters, sync)
    result["peer"]["gpu_us"] = held.pop("gpu_us")
    result["hold"] = held
    result["iters"] = iters
    return result


def held_copy_time(torch, sleep, device: int, stream, copy, iters: int, sync) -> dict:
    """{gpu_us, cycles, tries, held}: the GPU time per copy of ``iters`` copies queued behind a hold of
    ``stream``; gpu_us is None when the queueing outlasted every hold (or torch has no _sleep to hold with)."""
    if sleep is None:
        return {"gpu_us": None, "cycles": 0, "tries": 0, "held": False}
    cycles = HOLD_CYCLES * max(1, iters // 50)
    for attempt in range(1, HOLD_TRIES + 1):
        with torch.cuda.device(device):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            sleep(cycles)
            start.record(stream)
            for _unused in range(iters):
                copy()
            end.record(stream)
            # Completed already: the GPU reached the first copy before the host had queued the last.
            outlasted = start.query()
        sync()
        if not outlasted:
            return {"gpu_us": round(start.elapsed_time(end) * 1000 / iters, 3), "cycles": cycles, "tries": attempt,
                    "held": True}
        if attempt < HOLD_TRIES:
            cycles *= 4
    return {"gpu_us": None, "cycles": cycles, "tries": HOLD_TRIES, "held": False}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="GPU peer-to-peer proof and copy timings")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--json-config", metavar="PATH")
    group.add_argument("--worker", metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        try:
            return worker(args.worker)
        except Exception as exc:
            import traceback

            traceback.print_exc()
            with open(os.environ[_ENV_EVENTS], "a", encoding="utf-8") as events:
                emit(events, {"event": "error", "kind": "worker_failed", "message": f"{type(exc).__name__}: {exc}"})
            return 1
    try:
        with open(args.json_config, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError) as exc:
        emit(sys.stdout, {"event": "summary", "protocol": PROTOCOL, "status": "error",
                          "error": {"kind": "config", "message": str(exc)}})
        return 2
    return run(config)


if __name__ == "__main__":
    sys.exit(main())
