"""herald as a user gets it: the sdist and the wheel built from this checkout as a release would
build them (the wheel from the sdist), and the wheel installed, without extras, into a fresh
virtualenv that serves. Slow (a build and an install): ``-m "not package"`` leaves it out."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.herald_process import HeraldProcess

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "herald"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
VERSION: str = PROJECT["version"]
NO_EXTRA = "herald: PostgreSQL needs the postgres extra: pip install 'herald[postgres]'"
POSTGRES_URL = "postgresql://herald@127.0.0.1:5432/herald"
"""Never reached: without the extra, herald stops before it connects."""

pytestmark = [pytest.mark.package, pytest.mark.timeout(600)]


@dataclass(frozen=True)
class Dists:
    sdist: Path
    wheel: Path


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    """Built once for the module: the sdist from the checkout, the wheel from the sdist (so the
    sdist is proved to hold all the wheel needs), each in an isolated environment that has only
    what ``[build-system]`` requires."""
    out = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "build", "--outdir", str(out), str(ROOT), timeout=300)
    return Dists(out / f"herald-{VERSION}.tar.gz", out / f"herald-{VERSION}-py3-none-any.whl")


@pytest.fixture(scope="module")
def venv(dists: Dists, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv (no system packages) with the wheel installed as ``pip install
    herald`` would, its dependencies at the releases the suite runs on (constraints.txt). Its
    ``bin``. The suite's pip installs into it (``--python``): a venv without its own pip is made
    in a tenth of a second, not five."""
    home = tmp_path_factory.mktemp("venv")
    _run(sys.executable, "-m", "venv", "--without-pip", str(home))
    python = home / "bin" / "python"
    _run(
        sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
        "-c", str(ROOT / "constraints.txt"), str(dists.wheel),
        timeout=300,
    )  # fmt: skip
    return home / "bin"


def _run(*command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd="/")
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done


def _packaged(root: Path, pattern: str) -> set[str]:
    return {str(path.relative_to(root.parent)) for path in root.glob(pattern)}


def test_the_wheel_carries_the_migrations_the_console_and_py_typed(dists: Dists) -> None:
    names = set(zipfile.ZipFile(dists.wheel).namelist())
    migrations = _packaged(PACKAGE, "store/sql/*/*.sql")
    console = _packaged(PACKAGE, "console/static/*")
    assert len(migrations) > 20 and len(console) >= 4  # the globs found what is there
    assert migrations | console | {"herald/py.typed"} <= names
    licenses = f"herald-{VERSION}.dist-info/licenses"
    assert {f"{licenses}/LICENSE", f"{licenses}/NOTICE"} <= names


def test_the_wheel_says_its_license_and_asks_asyncpg_only_for_postgres(dists: Dists) -> None:
    with zipfile.ZipFile(dists.wheel) as wheel:
        metadata = wheel.read(f"herald-{VERSION}.dist-info/METADATA").decode()
    fields = [line.partition(": ") for line in metadata.split("\n\n", 1)[0].splitlines()]
    assert ("License-Expression", ": ", "Apache-2.0") in fields
    assert ("Classifier", ": ", "Operating System :: POSIX") in fields
    requires = [value for name, _, value in fields if name == "Requires-Dist"]
    asyncpg = [value for value in requires if re.split(r"[<>=!~;\[ ]", value)[0] == "asyncpg"]
    assert asyncpg == ['asyncpg<1,>=0.30; extra == "postgres"']


def test_the_sdist_carries_the_license_the_notice_and_the_sources(dists: Dists) -> None:
    top = f"herald-{VERSION}"
    with tarfile.open(dists.sdist) as sdist:
        names = set(sdist.getnames())
    sources = _packaged(PACKAGE, "**/*.py")
    assert {f"{top}/LICENSE", f"{top}/NOTICE", f"{top}/pyproject.toml"} <= names
    assert {f"{top}/src/{source}" for source in sources} <= names
    assert not any(name.startswith(f"{top}/tests/") for name in names)


def test_the_installed_wheel_is_this_version(venv: Path) -> None:
    assert _run(str(venv / "herald"), "--version").stdout.strip() == f"herald {VERSION}"
    script = (
        "import importlib.metadata as m, herald\n"
        "print(m.version('herald'), herald.__version__, herald.__file__)"
    )
    done = _run(str(venv / "python"), "-c", script)
    installed, declared, where = done.stdout.split()
    assert (installed, declared) == (VERSION, VERSION)
    assert Path(where).is_relative_to(venv.parent)  # the wheel's copy, not this checkout


@pytest.fixture
def served(venv: Path, tmp_path: Path) -> Iterator[HeraldProcess]:
    store = f"sqlite:///{tmp_path / 'herald.db'}"
    process = HeraldProcess(store, cwd=tmp_path, command=(str(venv / "herald"), "serve"))
    yield process
    process.stop()


def test_the_installed_wheel_serves_healthz_on_an_embedded_store(served: HeraldProcess) -> None:
    with served.client() as client:
        answer = client.get("/healthz")
    assert answer.status_code == 200, answer.text
    assert Path(served.store_url.removeprefix("sqlite:///")).is_file()


def test_without_the_extra_every_module_but_the_postgresql_stores_imports(venv: Path) -> None:
    script = (
        "import importlib, importlib.util, pkgutil, herald\n"
        "assert importlib.util.find_spec('asyncpg') is None, 'asyncpg is installed'\n"
        "for module in pkgutil.walk_packages(herald.__path__, 'herald.'):\n"
        "    if not module.name.startswith('herald.store.postgres'):\n"
        "        importlib.import_module(module.name)\n"
    )
    _run(str(venv / "python"), "-c", script)


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]], ids=["one", "workers"])
def test_a_postgresql_store_without_the_extra_is_one_line_naming_it(
    venv: Path, workers: list[str], tmp_path: Path
) -> None:
    done = subprocess.run(
        [str(venv / "herald"), "serve", "--store", POSTGRES_URL, "--port", "0", *workers],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert (done.returncode, done.stderr, done.stdout) == (2, NO_EXTRA + "\n", "")
