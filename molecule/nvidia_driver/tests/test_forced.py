"""The forced host: the table's default branch (580; 590 on Debian 13, whose repository has no 580) from the local
signed repository, configured, not loaded."""

import os

import pytest

testinfra_hosts = ["podman://nvidia-driver-forced"]

# make molecule PLATFORM=...: the release the containers boot.
PLATFORM = os.environ.get("GPUHOST_PLATFORM", "bookworm")
REPOSITORY = {"bookworm": "debian12", "trixie": "debian13", "noble": "ubuntu2404"}[PLATFORM]
BRANCH = "590" if PLATFORM == "trixie" else "580"
BRANCH_VERSION = {"580": "580.126.20-1", "590": "590.48.01-1"}[BRANCH]
# The newer branch the pin must hold off; Debian 13's repository has none.
NEWER_BRANCH_VERSION = None if BRANCH == "590" else "590.48.01-1"
REPO_URL = f"file:///srv/nvidia-cuda-mirror/{REPOSITORY}/x86_64/"
if PLATFORM == "noble":
    INSTALLED = ["nvidia-dkms-580-open", "libnvidia-compute-580", "nvidia-utils-580", "nvidia-compute-utils-580"]
    NOT_WANTED = ["nvidia-fabricmanager", "nvidia-dkms-580", "nvidia-dkms-open"]
else:
    INSTALLED = ["nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-smi", "nvidia-persistenced"]
    NOT_WANTED = ["nvidia-fabricmanager", "nvidia-kernel-dkms"]


def test_apt_source_is_signed_by_the_repository_key(host):
    sources = host.file("/etc/apt/sources.list.d/nvidia-cuda.sources")
    assert sources.exists
    assert sources.mode == 0o644
    text = sources.content_string
    # deb822: one field per line, continuation lines indented.
    fields = dict(line.split(":", 1) for line in text.splitlines() if line and not line[0].isspace())
    assert fields["Types"].strip() == "deb"
    assert fields["URIs"].strip() == REPO_URL
    assert fields["Suites"].strip() == "/"
    assert "Components" not in fields
    assert "Signed-By" in fields
    assert "\n    -----BEGIN PGP PUBLIC KEY BLOCK-----\n" in text
    assert not host.file("/etc/apt/trusted.gpg").exists


def test_apt_verifies_the_repository(host):
    # apt fails the update, or warns, when a Release file is unsigned or signed by another key.
    result = host.run("apt-get update --error-on=any")
    assert result.rc == 0, result.stderr
    assert "NO_PUBKEY" not in result.stderr
    assert "not signed" not in result.stderr


def test_branch_pin(host):
    pin = host.file("/etc/apt/preferences.d/nvidia-driver-branch.pref")
    assert pin.exists
    text = pin.content_string
    assert "Package: nvidia-* libnvidia-* libcuda*" in text
    assert f"Pin: version {BRANCH}.*\n" in text
    assert "Pin-Priority: 1001\n" in text


@pytest.mark.skipif(NEWER_BRANCH_VERSION is None or PLATFORM == "noble",
                    reason="no newer branch under the same names in this repository")
def test_pin_holds_the_branch_against_the_newer_one(host):
    policy = host.check_output("apt-cache policy nvidia-driver-cuda nvidia-smi")
    assert f"Installed: {BRANCH_VERSION}" in policy
    assert f"Candidate: {NEWER_BRANCH_VERSION}" not in policy
    assert NEWER_BRANCH_VERSION in policy  # the repository does offer 590
    # Without the pin, apt would move to 590: the control that shows the pin does the work.
    unpinned = host.check_output(
        "apt-get install --simulate --quiet -o Dir::Etc::preferencesparts=/nonexistent nvidia-driver-cuda"
    )
    assert f"Inst nvidia-driver-cuda [{BRANCH_VERSION}] ({NEWER_BRANCH_VERSION}" in unpinned
    pinned = host.check_output("apt-get install --simulate --quiet nvidia-driver-cuda nvidia-smi")
    assert "Inst nvidia" not in pinned


@pytest.mark.skipif(PLATFORM != "noble", reason="only Ubuntu's archive ships the driver under NVIDIA's names")
def test_ubuntus_own_build_of_the_branch_is_held_off(host):
    policy = host.check_output("apt-cache policy nvidia-dkms-580-open")
    assert f"Installed: {BRANCH_VERSION}" in policy
    # Ubuntu's archive offers 580 too (580.x-0ubuntu...), at a higher version: never a candidate.
    assert "0ubuntu" not in policy.split("Version table:")[0]


@pytest.mark.parametrize("name", INSTALLED)
def test_driver_packages_of_the_branch(host, name):
    package = host.package(name)
    assert package.is_installed
    assert package.version == BRANCH_VERSION


@pytest.mark.parametrize("name", NOT_WANTED)
def test_packages_not_wanted(host, name):
    assert not host.package(name).is_installed


@pytest.mark.parametrize("name", ["dkms", "python3-apt", "python3-debian"])
def test_prerequisites(host, name):
    assert host.package(name).is_installed


def test_nouveau_blacklisted(host):
    blacklist = host.file("/etc/modprobe.d/nvidia-driver-blacklist-nouveau.conf")
    assert blacklist.mode == 0o644
    assert "\nblacklist nouveau\n" in blacklist.content_string
    assert "\noptions nouveau modeset=0\n" in blacklist.content_string


def test_module_options(host):
    options = host.file("/etc/modprobe.d/nvidia-driver-options.conf").content_string
    line = "NVreg_DynamicPowerManagement=0x00 NVreg_EnableStreamMemOPs=1"
    assert f"\noptions nvidia {line}\n" in options
    # Debian's packaging loads the module as nvidia-current too; Ubuntu's does not.
    assert (f"\noptions nvidia-current {line}\n" in options) == (PLATFORM != "noble")
    # modprobe reads the file as configuration (it loads nothing here).
    config = host.check_output("modprobe --showconfig")
    assert f"options nvidia {line}" in config
    assert "blacklist nouveau" in config


def test_persistenced_enabled_with_persistence_mode(host):
    service = host.service("nvidia-persistenced")
    assert service.is_enabled
    # Nothing may start it: there is no driver to keep initialised.
    assert not service.is_running
    exec_start = host.check_output("systemctl show --property=ExecStart nvidia-persistenced")
    assert "--persistence-mode" in exec_start
    assert "--no-persistence-mode" not in exec_start
    assert host.check_output("systemctl show --property=StopWhenUnneeded nvidia-persistenced") == (
        "StopWhenUnneeded=no"
    )
    assert host.user("nvidia-persistenced").exists


def test_fabricmanager_absent(host):
    assert not host.file("/lib/systemd/system/nvidia-fabricmanager.service").exists
    assert not host.file("/etc/systemd/system/multi-user.target.wants/nvidia-fabricmanager.service").exists


def test_no_module_loaded(host):
    assert not host.file("/proc/driver/nvidia").exists
    # The stand-in nvidia-smi behaves like the real one without a loaded module.
    result = host.run("nvidia-smi")
    assert result.rc == 9
