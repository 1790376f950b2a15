"""The runplane image build's own logic: its lock, its record of packages, its cache key."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from testbed import service_image

STATUS = """Package: libc6
Status: install ok installed
Architecture: amd64
Version: 2.36-9+deb12u13
Description: GNU C Library
 a continuation line: Version: 0

Package: gcc-12-base
Status: install ok installed
Architecture: amd64
Version: 12.2.0-14+deb12u1

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0
"""


def _wheel(directory: Path, filename: str, content: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / filename
    path.write_bytes(content)
    return path


def test_wheel_file_names_give_the_distribution_and_version() -> None:
    name = service_image.wheel_name_version
    assert name("PyYAML-6.0.4-cp311-cp311-manylinux_2_17_x86_64.whl") == ("pyyaml", "6.0.4")
    assert name("typing_extensions-4.16.0-py3-none-any.whl") == ("typing-extensions", "4.16.0")
    assert name("pkg-1.0-2-py3-none-any.whl") == ("pkg", "1.0")  # a build tag
    with pytest.raises(ValueError, match="not a wheel file name"):
        name("pkg-1.0.tar.gz")


def test_the_lock_pins_each_wheel_with_every_architectures_hash(tmp_path: Path) -> None:
    amd = [
        _wheel(tmp_path / "amd64", "orjson-3.13.0-cp311-cp311-manylinux_2_17_x86_64.whl", b"a"),
        _wheel(tmp_path / "amd64", "click-8.5.1-py3-none-any.whl", b"c"),
        _wheel(tmp_path / "amd64", "runplane-0.1.0-py3-none-any.whl", b"r"),
    ]
    arm = [
        _wheel(tmp_path / "arm64", "orjson-3.13.0-cp311-cp311-manylinux_2_17_aarch64.whl", b"b"),
        _wheel(tmp_path / "arm64", "click-8.5.1-py3-none-any.whl", b"c"),
    ]
    text = service_image.lock_text({"arm64": arm, "amd64": amd})
    assert service_image.locked(text) == {"click": "8.5.1", "orjson": "3.13.0"}
    orjson = text[text.index("orjson==") :]
    hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", orjson)
    assert sorted(hashes) == sorted(service_image.sha256(p) for p in (amd[0], arm[0]))
    assert text.count("--hash") == 3  # click's one wheel is the same file on both


def test_a_lock_refuses_different_versions_per_architecture(tmp_path: Path) -> None:
    amd = [_wheel(tmp_path / "amd64", "orjson-3.13.0-cp311-cp311-x.whl", b"a")]
    arm = [_wheel(tmp_path / "arm64", "orjson-3.12.0-cp311-cp311-y.whl", b"b")]
    with pytest.raises(RuntimeError, match="orjson resolves to 3.13.0 .* and 3.12.0 on arm64"):
        service_image.lock_text({"amd64": amd, "arm64": arm})


def test_the_committed_lock_covers_runplanes_requirements_and_pip() -> None:
    """A dependency added to pyproject.toml without ``--lock`` would fail the image build's
    offline install; this says so first."""
    project = tomllib.loads((service_image.ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in service_image.EXTRAS:
        wanted += project["optional-dependencies"][extra]
    names = set()
    for requirement in wanted:
        if "sys_platform == 'win32'" in requirement:
            continue
        match = re.match(r"[A-Za-z0-9._-]+", requirement)
        assert match, requirement
        names.add(service_image.normalize(match.group(0)))
    pins = service_image.locked(service_image.read_lock())
    assert names - set(pins) == set(), "run: python3 -m testbed image --lock"
    assert "pip" in pins
    assert "runplane" not in pins


def test_the_record_lists_installed_debian_packages_and_wheels_with_hashes() -> None:
    debian = service_image.debian_packages(STATUS)
    assert debian == [
        ("gcc-12-base", "12.2.0-14+deb12u1", "amd64"),
        ("libc6", "2.36-9+deb12u13", "amd64"),
    ]
    record = service_image.packages_record(
        "runplane.local/runplane:0.1.0", "amd64", debian, [("click", "8.5.1", "ab" * 32)]
    )
    lines = record.splitlines()
    assert lines[0].startswith("# runplane.local/runplane:0.1.0 (amd64, Debian bookworm)")
    assert lines[1:] == [
        "debian\tgcc-12-base\t12.2.0-14+deb12u1\tamd64",
        "debian\tlibc6\t2.36-9+deb12u13\tamd64",
        f"wheel\tclick\t8.5.1\tsha256:{'ab' * 32}",
    ]


def test_a_toolchain_is_found_among_packages_but_runtime_libraries_are_not() -> None:
    names = [
        "gcc-12",
        "gcc",
        "g++-12",
        "cpp",
        "binutils",
        "make",
        "libc6-dev",
        "libpq-dev",
        "gcc-12-base",
        "libgcc-s1",
        "libstdc++6",
        "python3.11",
        "makedev",
    ]
    found = service_image.toolchain((name, "1", "amd64") for name in names)
    assert found == ["gcc-12", "gcc", "g++-12", "cpp", "binutils", "make", "libc6-dev", "libpq-dev"]


def _tree(root: Path) -> Path:
    package = root / "src" / "runplane"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "9.8.7"\n')
    (root / "pyproject.toml").write_text("[project]\n")
    (root / "README.md").write_text("runplane\n")
    return package


def test_the_cache_key_follows_the_source_the_lock_and_the_architecture(tmp_path: Path) -> None:
    package = _tree(tmp_path)
    assert service_image.version(tmp_path) == "9.8.7"
    before = service_image.source_digest(tmp_path)
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"bytecode")
    assert service_image.source_digest(tmp_path) == before  # bytecode is no input
    (package / "cli.py").write_text("changed = True\n")
    after = service_image.source_digest(tmp_path)
    assert after != before

    key = service_image.inputs_key(after, "click==8.5.1\n", "amd64")
    assert key == service_image.inputs_key(after, "click==8.5.1\n", "amd64")
    assert key != service_image.inputs_key(before, "click==8.5.1\n", "amd64")
    assert key != service_image.inputs_key(after, "click==8.5.2\n", "amd64")
    assert key != service_image.inputs_key(after, "click==8.5.1\n", "arm64")
    # the bottom layer (Debian and the wheels) does not follow runplane's source
    base = service_image.base_key("click==8.5.1\n", "amd64")
    assert base != service_image.base_key("click==8.5.2\n", "amd64")
    assert base != service_image.base_key("click==8.5.1\n", "arm64")


def test_wheels_are_chosen_for_the_images_glibc_and_python() -> None:
    amd = service_image.pip_target_options("amd64")
    assert "--platform=manylinux_2_36_x86_64" in amd
    assert "--platform=manylinux1_x86_64" in amd
    assert "--platform=manylinux_2_37_x86_64" not in amd  # newer than Debian 12's glibc
    assert {"--abi=cp311", "--abi=abi3", "--abi=none", "--python-version=3.11"} <= set(amd)
    arm = service_image.platforms("arm64")
    assert arm[0] == "manylinux_2_36_aarch64"
    assert arm[-1] == "manylinux_2_17_aarch64"


def test_the_image_serves_as_an_unprivileged_user_with_its_data_directory_as_home() -> None:
    config = service_image.image_config("9.8.7").as_oci()
    assert config["User"] == "10001:10001"
    assert config["Entrypoint"] == ["/opt/runplane/bin/runplane"]
    assert config["Cmd"] == ["serve", "--host", "0.0.0.0"]
    listed = config["Env"]
    assert isinstance(listed, list)
    env = dict(str(item).split("=", 1) for item in listed)
    assert env["RUNPLANE_LOCAL__HOME"] == env["HOME"] == service_image.DATA_DIR
    assert env["PATH"].startswith("/opt/runplane/bin:")
    assert config["ExposedPorts"] == {"8470/tcp": {}}
    assert service_image.image_name("9.8.7") == "runplane.local/runplane:9.8.7"
