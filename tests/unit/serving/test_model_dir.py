"""The model directory check: weight files found, their size against the profile, readability as the service user."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sglang_model_check
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.model_dir import (
    GIB,
    Listing,
    is_weight_file,
    judge,
    walk,
)
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.modules import run_module


def sparse(path: Path, gib: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.truncate(int(gib * GIB))


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A 405 GiB model as Hugging Face lays it out: config, tokenizer, five safetensors shards (sparse)."""
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "tokenizer.json").write_text("{}")
    for shard in range(1, 6):
        sparse(tmp_path / f"model-0000{shard}-of-00005.safetensors", 81)
    return tmp_path


@pytest.mark.parametrize(("name", "weight"), [
    ("model-00001-of-00005.safetensors", True), ("pytorch_model.bin", True), ("consolidated.00.pth", True),
    ("model.pt", True), ("GLM-5-Q4_K_M.gguf", True), ("MODEL.SAFETENSORS", True),
    ("config.json", False), ("tokenizer.model", False), ("model.safetensors.index.json", False),
])
def test_weight_files(name: str, weight: bool) -> None:
    assert is_weight_file(name) is weight


def test_walk_finds_the_shards(model: Path) -> None:
    listing = walk(str(model))
    assert [name for name, _ in listing.files] == [f"model-0000{i}-of-00005.safetensors" for i in range(1, 6)]
    assert listing.total_bytes == 405 * GIB
    assert listing.unreadable == []
    assert Listing.from_dict(listing.as_dict()) == listing


def test_walk_follows_links_as_the_hub_cache_uses_them(tmp_path: Path) -> None:
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshots" / "abc123"
    sparse(blobs / "sha256-1", 2)
    snapshot.mkdir(parents=True)
    (snapshot / "model.safetensors").symlink_to(blobs / "sha256-1")
    (snapshot / "broken.safetensors").symlink_to(blobs / "missing")
    listing = walk(str(snapshot))
    assert listing.files == [("model.safetensors", 2 * GIB)]
    assert listing.unreadable == ["broken.safetensors"]


def test_judge_passes_within_tolerance(model: Path) -> None:
    verdict = judge(walk(str(model)), 405, 0.1, "sglang")
    assert verdict.ok and verdict.found_gib == 405.0 and verdict.problems == []
    assert judge(walk(str(model)), 440, 0.1).ok  # 8 % off
    assert judge(walk(str(model)), 0, 0.1).ok  # presence only


def test_judge_names_a_partial_download(model: Path) -> None:
    for shard in (4, 5):
        (model / f"model-0000{shard}-of-00005.safetensors").unlink()
    verdict = judge(walk(str(model)), 405, 0.1)
    assert verdict.problems == [
        f"the weight files under {model} hold 243.0 GiB in 3 files; the model's weights_gib expects 405 GiB (within "
        "10%). A partial download, another quantization or another model? Finish the download, or correct the "
        "model's weights_gib."]


def absent(root: Path) -> Path:
    return root / "absent"


def a_file(root: Path) -> Path:
    (root / "model.safetensors").write_text("x")
    return root / "model.safetensors"


def empty(root: Path) -> Path:
    (root / "empty").mkdir()
    return root / "empty"


@pytest.mark.parametrize(("setup", "says"), [
    (absent, "does not exist; expected the model's directory there"),
    (a_file, "is a file, not a directory"),
    (empty, "no weight files (*.safetensors, *.bin, *.pt, *.pth, *.gguf)"),
])
def test_judge_names_what_is_missing(tmp_path: Path, setup: Callable[[Path], Path], says: str) -> None:
    verdict = judge(walk(str(setup(tmp_path))), 405, 0.1)
    assert not verdict.ok
    assert says in verdict.problems[0]


@given(sizes=st.lists(st.integers(0, 2**44), max_size=6), expected=st.floats(0, 4096), tolerance=st.floats(0, 1))
def test_judge_size_rule(sizes: list[int], expected: float, tolerance: float) -> None:
    listing = Listing(path="/m", files=[(f"{i}.safetensors", size) for i, size in enumerate(sizes)])
    verdict = judge(listing, expected, tolerance)
    found = sum(sizes) / GIB
    assert verdict.ok == (bool(sizes) and (expected == 0 or abs(found - expected) <= tolerance * expected))


# --------------------------------------------------------------------------------------------------
# The module, as root and as another user

NOBODY = next((entry for entry in pwd.getpwall() if entry.pw_name == "nobody"), None)
as_root = pytest.mark.skipif(os.geteuid() != 0 or NOBODY is None, reason="needs root and the user nobody")


@pytest.fixture
def shared_model() -> Iterator[Path]:
    """A model under a directory other users can traverse (pytest's own tmp_path is root's alone)."""
    root = Path(tempfile.mkdtemp(prefix="model-check-", dir="/tmp"))
    root.chmod(0o755)
    try:
        for shard in (1, 2):
            sparse(root / f"model-0000{shard}-of-00002.safetensors", 1)
            (root / f"model-0000{shard}-of-00002.safetensors").chmod(0o644)
        yield root
    finally:
        shutil.rmtree(root)


def check(capsys: pytest.CaptureFixture[str], path: Path | str, **args) -> dict:
    return run_module(sglang_model_check.main, {"path": str(path), "expected_gib": 2, **args}, capsys)


def test_module_passes_a_good_model(capsys: pytest.CaptureFixture[str], shared_model: Path) -> None:
    result = check(capsys, shared_model)
    assert result["ok"] is True and result["changed"] is False
    assert (result["files"], result["found_gib"]) == (2, 2.0)
    assert result["msg"] == f"{shared_model}: 2 weight files, 2.0 GiB (expected 2), readable by this user"


def test_module_fails_with_found_and_expected(capsys: pytest.CaptureFixture[str], shared_model: Path) -> None:
    result = check(capsys, shared_model, expected_gib=405)
    assert result["failed"] is True
    assert "hold 2.0 GiB in 2 files; the model's weights_gib expects 405 GiB (within 10%)" in result["msg"]
    report = check(capsys, shared_model, expected_gib=405, fail_on_problem=False)
    assert "failed" not in report and report["ok"] is False


@as_root
def test_module_checks_as_the_service_user(capsys: pytest.CaptureFixture[str], shared_model: Path) -> None:
    assert NOBODY is not None
    assert check(capsys, shared_model, user="nobody")["ok"] is True
    (shared_model / "model-00002-of-00002.safetensors").chmod(0o600)
    result = check(capsys, shared_model, user="nobody")
    assert result["unreadable"] == ["model-00002-of-00002.safetensors"]
    assert "the user nobody cannot read 1 entries" in result["msg"]
    # root itself still reads it: the check really ran as nobody.
    assert check(capsys, shared_model, expected_gib=2)["ok"] is True
    shared_model.chmod(0o700)
    assert "the user nobody cannot list" in check(capsys, shared_model, user="nobody")["msg"]


def test_module_names_a_missing_user(capsys: pytest.CaptureFixture[str], shared_model: Path) -> None:
    result = check(capsys, shared_model, user="no-such-user-here")
    assert result["failed"] is True
    assert result["msg"].startswith("sglang_model_check: the user no-such-user-here does not exist")


# --------------------------------------------------------------------------------------------------
# Entries that are no regular file, and settings that would pass anything


def walk_within(path: Path, seconds: float = 10) -> Listing:
    """walk(path) in a thread: a walk that blocks (on a FIFO) fails the test instead of hanging it."""
    found: list[Listing] = []
    thread = threading.Thread(target=lambda: found.append(walk(str(path))), daemon=True)
    thread.start()
    thread.join(seconds)
    assert found, f"walk({path}) did not return within {seconds} s"
    return found[0]


def test_a_fifo_named_like_weights_is_named_not_opened(model: Path) -> None:
    os.mkfifo(model / "model-00006-of-00006.safetensors")
    (model / "link.safetensors").symlink_to(model / "model-00006-of-00006.safetensors")
    listing = walk_within(model)
    assert listing.not_regular == ["link.safetensors", "model-00006-of-00006.safetensors"]
    assert len(listing.files) == 5 and listing.unreadable == []
    assert Listing.from_dict(listing.as_dict()) == listing
    verdict = judge(listing, 405, 0.1)
    assert verdict.problems == [
        f"2 weight names under {model} are no regular file (a FIFO, a socket or a device): link.safetensors, "
        "model-00006-of-00006.safetensors; SGLang cannot load them. Replace them with the weight files."]


def test_a_device_named_like_weights_is_named(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").symlink_to("/dev/null")
    listing = walk_within(tmp_path)
    assert listing.not_regular == ["model.safetensors"] and listing.files == []
    assert "no regular file" in judge(listing, 0, 0.1).problems[0]


@pytest.mark.parametrize(("expected", "tolerance", "says"), [
    (405, float("nan"), "tolerance is nan; expected a finite number, 0 or more"),
    (405, float("inf"), "tolerance is inf"),
    (405, -0.1, "tolerance is -0.1"),
    (float("nan"), 0.1, "expected_gib is nan"),
    (float("inf"), 0.1, "expected_gib is inf"),
])
def test_judge_refuses_settings_that_pass_anything(model: Path, expected: float, tolerance: float, says: str) -> None:
    verdict = judge(walk(str(model)), expected, tolerance)
    assert not verdict.ok
    assert says in verdict.problems[0]


@pytest.mark.parametrize("tolerance", ["nan", "inf", "-inf", -1])
def test_module_refuses_a_tolerance_that_passes_anything(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                         tolerance: Any) -> None:
    # 1 MiB of weights where the profile says 405 GiB: a NaN tolerance used to let it pass.
    sparse(tmp_path / "model.safetensors", 1 / 1024)
    result = check(capsys, tmp_path, expected_gib=405, tolerance=tolerance)
    assert result["failed"] is True
    assert result["msg"].startswith("sglang_model_check: tolerance is ")
    assert "expected a finite number, 0 or more" in result["msg"]


# --------------------------------------------------------------------------------------------------
# config.json: the collectives per decode step counted from the model's own file

MODEL_CONFIGS = Path(__file__).resolve().parents[2] / "fixtures" / "model_configs"


def test_the_module_counts_collectives_from_the_directory_config(capsys: pytest.CaptureFixture[str],
                                                                 shared_model: Path) -> None:
    shutil.copy(MODEL_CONFIGS / "GLM-5.1_config.json", shared_model / "config.json")
    result = check(capsys, shared_model, tensor_parallel_size=8)
    assert result["ok"] is True and result["config_problem"] is None
    counted = result["collectives"]
    assert (counted["status"], counted["architecture"], counted["allreduces_per_step"],
            counted["allreduce_bytes"]) == ("modelled", "GlmMoeDsaForCausalLM", 157, 12288)
    # The same model type the gate and the benchmark price.
    assert result["model"] == {"name": shared_model.name, "layers": 78, "allreduces_per_layer": 2, "hidden_size": 6144,
                               "dtype_bytes": 2, "tensor_parallel_size": 8, "extra_allreduces": 1,
                               "notes": "from config.json (GlmMoeDsaForCausalLM)"}
    # Without the serving TP nothing is counted.
    assert check(capsys, shared_model)["collectives"] is None


def test_a_config_that_cannot_be_read_says_why_and_counts_nothing(capsys: pytest.CaptureFixture[str],
                                                                 shared_model: Path) -> None:
    result = check(capsys, shared_model, tensor_parallel_size=8)
    assert result["collectives"] is None and "config.json cannot be read" in result["config_problem"]
    (shared_model / "config.json").write_text("{not json")
    assert "is not valid JSON" in check(capsys, shared_model, tensor_parallel_size=8)["config_problem"]
    (shared_model / "config.json").write_text("[1, 2]")
    assert "holds a JSON list; expected an object" in walk(str(shared_model)).config_problem


def test_an_unknown_architecture_is_not_modelled(capsys: pytest.CaptureFixture[str], shared_model: Path) -> None:
    (shared_model / "config.json").write_text('{"architectures": ["RwkvForCausalLM"]}')
    counted = check(capsys, shared_model, tensor_parallel_size=4)["collectives"]
    assert counted["status"] == "not_modelled" and "'RwkvForCausalLM' is not modelled" in counted["reason"]
    assert check(capsys, shared_model, tensor_parallel_size=4)["model"] is None
    (shared_model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "hidden_size": 8}')
    counted = check(capsys, shared_model, tensor_parallel_size=4)["collectives"]
    assert counted["status"] == "not_modelled" and "expected num_hidden_layers" in counted["reason"]


def test_listing_with_config_round_trips(model: Path) -> None:
    listing = walk(str(model))
    assert listing.config == {} and listing.config_problem is None
    assert Listing.from_dict(listing.as_dict()) == listing
