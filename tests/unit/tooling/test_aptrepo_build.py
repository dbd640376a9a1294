"""tests/aptrepo/build.py: spec parsing, the repository's index files, and a real build checked
the way apt checks it; the nvcc stand-in it lays out, run as the roles run it."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import ROOT

APTREPO = ROOT / "tests/aptrepo"

_spec = importlib.util.spec_from_file_location("aptrepo_build", APTREPO / "build.py")
assert _spec is not None and _spec.loader is not None
build = importlib.util.module_from_spec(_spec)
sys.modules["aptrepo_build"] = build
_spec.loader.exec_module(build)

TOOLS = all(shutil.which(tool) for tool in ("dpkg-deb", "gpg", "gpgv", "gpgconf"))
needs_tools = pytest.mark.skipif(not TOOLS, reason="needs dpkg-deb and gnupg (make system-deps)")

MINIMAL = {"name": "cuda-toolkit-12-8", "version": "12.8.1-1", "description": "CUDA Toolkit 12.8 meta-package"}


def test_minimal_package_defaults() -> None:
    [spec] = build.parse_document(MINIMAL, "t.yml")
    assert spec.architecture == "amd64"
    assert spec.deb_filename == "cuda-toolkit-12-8_12.8.1-1_amd64.deb"
    assert spec.files == ()


def test_list_of_packages_and_file_kinds() -> None:
    data = [
        {**MINIMAL, "depends": ["cuda-nvcc-12-8 (>= 12.8.93)", "cuda-toolkit-config-common"]},
        {
            "name": "cuda-nvcc-12-8", "version": "12.8.93-1", "description": "nvcc",
            "vars": {"release": 12.8},
            "files": [
                {"path": "/usr/local/cuda-12.8/bin/nvcc", "template": "nvcc-standin.sh", "mode": "0755"},
                {"path": "usr/local/cuda-12.8/include", "symlink": "targets/x86_64-linux/include"},
                {"path": "usr/local/cuda-12.8/nvvm/bin", "directory": True},
                {"path": "etc/ld.so.conf.d/000_cuda.conf", "content": "/usr/local/cuda/lib64\n"},
            ],
        },
    ]
    meta, nvcc = build.parse_document(data, "t.yml")
    assert meta.relations["depends"] == ("cuda-nvcc-12-8 (>= 12.8.93)", "cuda-toolkit-config-common")
    assert [f.kind for f in nvcc.files] == ["template", "symlink", "directory", "content"]
    assert nvcc.files[0].path == "usr/local/cuda-12.8/bin/nvcc"  # a leading / is accepted and dropped
    assert nvcc.files[0].mode == 0o755
    assert nvcc.files[3].mode == 0o644
    assert nvcc.vars == {"release": "12.8"}


@pytest.mark.parametrize(("change", "message"), [
    ({"name": "CUDA_Toolkit"}, "not a Debian package name"),
    ({"version": "v12"}, "not a Debian version"),
    ({"architecture": "x86_64"}, "architecture"),
    ({"description": " "}, "must not be empty"),
    ({"dependz": ["x"]}, "unknown keys"),
    ({"files": [{"path": "../etc/passwd", "content": "x"}]}, "not a path inside the package"),
    ({"files": [{"path": "DEBIAN/postinst", "content": "x"}]}, "control area"),
    ({"files": [{"path": "a", "content": "x", "symlink": "b"}]}, "exactly one of"),
    ({"files": [{"path": "a", "content": "x", "mode": "rwx"}]}, "mode must be octal"),
    ({"files": [{"path": "a", "content": "x"}, {"path": "/a", "content": "y"}]}, "listed twice"),
    ({"scripts": {"postinstall": "true"}}, "unknown scripts"),
])
def test_bad_specs_say_what_is_wrong(change: dict, message: str) -> None:
    with pytest.raises(build.SpecError, match=message):
        build.parse_document({**MINIMAL, **change}, "t.yml")


@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["name", "version", "description", "files", "path", "content", "mode", "depends",
                         "scripts", "vars", "symlink", "x"]), children, max_size=5),
    max_leaves=12,
))
def test_any_document_parses_or_raises_spec_error(data: object) -> None:
    with contextlib.suppress(build.SpecError):
        build.parse_document(data, "fuzz.yml")


def test_template_variables_must_be_given() -> None:
    assert build.render_template("release @@release@@", {"release": "13.1"}, "t") == "release 13.1"
    with pytest.raises(build.SpecError, match="@@build@@"):
        build.render_template("@@build@@", {}, "t")


def test_maintainer_script_gets_a_shell_and_set_e() -> None:
    assert build.maintainer_script("ldconfig") == "#!/bin/sh\nset -e\nldconfig\n"
    assert build.maintainer_script("#!/bin/bash\nexit 0\n") == "#!/bin/bash\nexit 0\n"


def test_control_and_packages_stanza_follow_nvidia_field_order() -> None:
    [spec] = build.parse_document(
        {**MINIMAL, "description": "CUDA Toolkit 12.8 meta-package\nline two\n\nline four",
         "depends": ["cuda-nvcc-12-8"], "provides": ["cuda-toolkit"]}, "t.yml")
    control = build.control_text(spec, 3)
    assert control.splitlines()[:3] == ["Package: cuda-toolkit-12-8", "Version: 12.8.1-1", "Architecture: amd64"]
    assert control.endswith("Description: CUDA Toolkit 12.8 meta-package\n line two\n .\n line four\n")
    data = b"deb bytes"
    stanza = build.packages_stanza(control, spec.deb_filename, data).splitlines()
    names = [line.split(":", 1)[0] for line in stanza if not line.startswith(" ")]
    assert names == ["Package", "Version", "Architecture", "Priority", "Section", "Maintainer", "Installed-Size",
                     "Provides", "Depends", "Filename", "Size", "MD5sum", "SHA1", "SHA256", "SHA512", "Description"]
    assert "Filename: ./cuda-toolkit-12-8_12.8.1-1_amd64.deb" in stanza
    assert f"SHA256: {hashlib.sha256(data).hexdigest()}" in stanza


def test_release_is_flat_and_labelled_like_nvidia() -> None:
    text = build.release_text({"Packages": b"abc", "Packages.gz": b"de"}, "x86_64", "Thu, 01 Jan 2026 00:00:00 GMT")
    lines = text.splitlines()
    assert lines[:4] == ["Origin: NVIDIA", "Label: NVIDIA CUDA", "Architecture: x86_64",
                         "Date: Thu, 01 Jan 2026 00:00:00 GMT"]
    assert not any(line.startswith(("Suite:", "Codename:", "Components:")) for line in lines)
    assert f" {hashlib.sha256(b'abc').hexdigest()} {3:>16} Packages" in lines
    assert lines[-1] == "Acquire-By-Hash: no"


def test_shipped_spec_files_parse() -> None:
    specs = build.load_specs(APTREPO / "packages")
    names = {(s.name, s.version) for s in specs}
    assert ("cuda-toolkit-12-8", "12.8.1-1") in names
    assert ("cuda-toolkit-13-1", "13.1.2-1") in names
    for spec in specs:
        for entry in spec.files:
            if entry.kind == "template":
                assert (APTREPO / "templates" / entry.value).is_file()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> dict:
    if not TOOLS:
        pytest.skip("needs dpkg-deb and gnupg (make system-deps)")
    out = tmp_path_factory.mktemp("repo")
    specs = tmp_path_factory.mktemp("specs")
    # The shipped CUDA specs, so the test does not depend on other roles' stand-ins.
    for path in (APTREPO / "packages").glob("cuda-*.yml"):
        shutil.copy(path, specs)
    summary = build.build(out, ["debian12", "ubuntu2404"], "x86_64", specs, APTREPO / "templates", "nvidia-test")
    return {"out": out, "summary": summary}


@needs_tools
def test_repository_layout_and_signatures(repo: dict) -> None:
    out: Path = repo["out"]
    assert (out / "nvidia-test.asc").read_text().startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    for distro in ("debian12", "ubuntu2404"):
        directory = out / distro / "x86_64"
        assert (directory / "cuda-toolkit-12-8_12.8.1-1_amd64.deb").is_file()
        packages = (directory / "Packages").read_bytes()
        assert gzip.decompress((directory / "Packages.gz").read_bytes()) == packages
        assert hashlib.sha256(packages).hexdigest() in (directory / "Release").read_text()
        for args in (["InRelease"], ["Release.gpg", "Release"]):
            subprocess.run(["gpgv", "--keyring", str(out / "nvidia-test.gpg"), *args], cwd=directory, check=True,
                           capture_output=True)


@needs_tools
def test_tampered_index_fails_the_signature(repo: dict, tmp_path: Path) -> None:
    directory = repo["out"] / "debian12/x86_64"
    tampered = tmp_path / "InRelease"
    tampered.write_text((directory / "InRelease").read_text().replace("Label: NVIDIA CUDA", "Label: Someone else"))
    result = subprocess.run(["gpgv", "--keyring", str(repo["out"] / "nvidia-test.gpg"), str(tampered)],
                            capture_output=True, check=False)
    assert result.returncode != 0


@needs_tools
def test_deb_carries_layout_scripts_and_conffiles(repo: dict, tmp_path: Path) -> None:
    directory = repo["out"] / "debian12/x86_64"
    listing = subprocess.run(["dpkg-deb", "--contents", str(directory / "cuda-cudart-dev-12-8_12.8.90-1_amd64.deb")],
                             capture_output=True, text=True, check=True).stdout
    assert "./usr/local/cuda-12.8/include -> targets/x86_64-linux/include" in listing
    assert "root/root" in listing
    control = tmp_path / "control"
    subprocess.run(["dpkg-deb", "--control", str(directory / "cuda-toolkit-12-8-config-common_12.8.90-1_all.deb"),
                    str(control)], check=True)
    assert "update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-12.8" in (
        control / "postinst").read_text()
    subprocess.run(["dpkg-deb", "--control", str(directory / "cuda-toolkit-config-common_13.1.80-1_all.deb"),
                    str(control / "common")], check=True)
    assert (control / "common/conffiles").read_text() == "/etc/ld.so.conf.d/000_cuda.conf\n"


# --- the nvcc stand-in ------------------------------------------------------------------------


def _standin(tmp_path: Path, spec_file: str) -> Path:
    specs = yaml.safe_load((APTREPO / "packages" / spec_file).read_text())
    nvcc = next(p for p in specs if p["name"].startswith("cuda-nvcc-"))
    [spec] = build.parse_document(nvcc, spec_file)
    build.lay_out(spec, tmp_path, APTREPO / "templates")
    return next(tmp_path.glob("usr/local/cuda-*/bin/nvcc"))


@pytest.fixture(params=[("cuda-12-8.yml", "12.8", "V12.8.93"), ("cuda-13-1.yml", "13.1", "V13.1.115")])
def standin(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str, str]:
    spec_file, release, version = request.param
    return _standin(tmp_path / "root", spec_file), release, version


def _run(*argv: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, check=False, cwd=cwd)


def test_standin_prints_the_real_banner(standin: tuple[Path, str, str]) -> None:
    nvcc, release, version = standin
    out = _run(nvcc, "--version")
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[0] == "nvcc: NVIDIA (R) Cuda compiler driver"
    assert lines[3] == f"Cuda compilation tools, release {release}, {version}"
    assert lines[4].startswith(f"Build cuda_{release}.r{release}/compiler.")


def test_standin_compiles_and_links_like_the_verify_step(standin: tuple[Path, str, str], tmp_path: Path) -> None:
    nvcc, release, _ = standin
    source = tmp_path / "verify_kernel.cu"
    shutil.copy(ROOT / "roles/cuda_toolkit/files/verify_kernel.cu", source)
    for arch in ("sm_120", "sm_90", "sm_120a", "compute_90"):
        obj, exe = tmp_path / f"k_{arch}.o", tmp_path / f"k_{arch}"
        assert _run(nvcc, f"-arch={arch}", "-c", source, "-o", obj).returncode == 0
        assert _run(nvcc, "-arch", arch, obj, "-o", exe).returncode == 0
        assert _run(exe).stdout.startswith(f"stand-in executable: nvcc {release} linked for {arch}")


@pytest.mark.parametrize(("args", "message"), [
    (["-arch=sm_30", "-c", "{src}"], "Unsupported gpu architecture 'sm_30'"),
    (["-arch=sm_120", "-c", "{dir}/missing.cu"], "Could not open input file"),
    (["-arch=sm_120"], "No input files specified"),
    (["-arch=sm_120", "-c", "{src}", "-o", "{dir}/no/such/dir/k.o"], "Could not open output file"),
])
def test_standin_fails_like_nvcc(standin: tuple[Path, str, str], tmp_path: Path, args: list[str],
                                 message: str) -> None:
    nvcc, _, _ = standin
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k() {}\n")
    result = _run(nvcc, *(a.format(src=source, dir=tmp_path) for a in args), cwd=tmp_path)
    assert result.returncode != 0
    assert message in result.stderr


def test_standin_13_has_no_maxwell_to_volta(tmp_path: Path) -> None:
    nvcc12 = _standin(tmp_path / "12", "cuda-12-8.yml")
    nvcc13 = _standin(tmp_path / "13", "cuda-13-1.yml")
    assert "sm_52" in _run(nvcc12, "--list-gpu-code").stdout.split()
    codes13 = _run(nvcc13, "--list-gpu-code").stdout.split()
    assert "sm_52" not in codes13
    assert "sm_120" in codes13


def test_standin_link_refuses_objects_for_another_arch(tmp_path: Path) -> None:
    nvcc = _standin(tmp_path / "root", "cuda-13-1.yml")
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k() {}\n")
    assert _run(nvcc, "-arch=sm_90", "-c", source, "-o", tmp_path / "k.o").returncode == 0
    result = _run(nvcc, "-arch=sm_120", tmp_path / "k.o", "-o", tmp_path / "k")
    assert result.returncode != 0
    assert "is not an object for sm_120" in result.stderr
