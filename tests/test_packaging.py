"""The release as a user gets it: the sdist and wheel built from this tree pass ``twine
check``, and the wheel, installed in a fresh virtual environment with nothing of the source
tree on the path, runs every documented first command.

Slow (a build and two installs from the package index, once per session): marked
``packaging``; ``make test`` runs it with the rest of the suite.
"""

from __future__ import annotations

import os
import py_compile
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.packaging, pytest.mark.slow,
              pytest.mark.skipif(os.name != "posix", reason="POSIX paths")]


def _need(module: str) -> None:
    if subprocess.run([sys.executable, "-c", f"import {module}"],
                      capture_output=True).returncode != 0:
        pytest.skip(f"{module} is not installed (pip install '.[test]')")


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and the wheel, built once a session from a copy of the tracked tree."""
    _need("build")
    # make test writes bytecode caches into the tree; one is there for the build to leave out.
    py_compile.compile(str(ROOT / "src" / "agent_latency" / "__init__.py"), doraise=True)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
                   check=True, capture_output=True, timeout=900)
    (wheel,) = out.glob("agent_latency-*.whl")
    (sdist,) = out.glob("agent_latency-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


class Fresh:
    """A fresh virtual environment with the wheel installed; commands run in an empty
    directory, with no PYTHONPATH, the environment's bin first on PATH."""

    def __init__(self, root: Path, wheel: Path) -> None:
        self.root = root
        self.wheel = wheel
        self.work = root / "work"
        self.work.mkdir()
        venv.EnvBuilder(with_pip=True, clear=True).create(root / "venv")
        self.bin = root / "venv" / "bin"

    def pip(self, *args: str) -> None:
        subprocess.run([str(self.bin / "python"), "-m", "pip", "install", "-q", *args],
                       check=True, capture_output=True, timeout=900, cwd=self.work)

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PYTHON", "OTEL_", "AGENT_LATENCY_", "VIRTUAL_ENV"))}
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        return subprocess.run(list(args), cwd=self.work, env=env, capture_output=True,
                              text=True, timeout=timeout)


@pytest.fixture(scope="session")
def fresh(dist: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Fresh:
    """The wheel alone (no extras) in a fresh environment."""
    env = Fresh(tmp_path_factory.mktemp("fresh"), dist["wheel"])
    env.pip(str(dist["wheel"]))
    return env


def first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


class TestRelease:
    """Built, checked, installed from the wheel: the first five minutes of a new user."""

    def test_twine_check(self, dist):
        _need("twine")
        result = subprocess.run([sys.executable, "-m", "twine", "check", "--strict",
                                 str(dist["sdist"]), str(dist["wheel"])],
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.count("PASSED") == 2

    def test_wheel_holds_the_demo(self, dist):
        names = zipfile.ZipFile(dist["wheel"]).namelist()
        assert "agent_latency/_examples/demo_agent.py" in names
        assert "agent_latency/_examples/scripts/coding_agent.json" in names
        assert "agent_latency/py.typed" in names

    def test_no_bytecode_caches(self, dist):
        names = zipfile.ZipFile(dist["wheel"]).namelist()
        with tarfile.open(dist["sdist"]) as sdist:
            names += sdist.getnames()
        assert [n for n in names if "__pycache__" in n or n.endswith(".pyc")] == []

    def test_installed_not_the_source_tree(self, fresh):
        result = fresh.run("python", "-c", "import agent_latency; print(agent_latency.__file__)")
        assert result.returncode == 0, result.stderr
        assert str(fresh.root / "venv") in result.stdout and str(ROOT) not in result.stdout

    def test_missing_extra_is_one_line(self, fresh):
        for args, extra in ((("simulate", "--help"), "simulator"), (("demo",), "simulator")):
            result = fresh.run("agent-latency", *args)
            assert result.returncode == 2, result.stderr
            assert result.stdout == ""
            (line,) = result.stderr.splitlines()
            assert line.startswith(f"agent-latency {args[0]}: needs aiohttp")
            assert f"pip install 'agent-latency[{extra}" in line
        assert not (fresh.work / ".agent-latency").exists()

    def test_commands_with_the_extras(self, fresh, dist):
        fresh.pip(f"{dist['wheel']}[simulator,openai,report]")
        simulate = fresh.run("agent-latency", "simulate", "--help")
        assert simulate.returncode == 0, simulate.stderr
        assert first_line(simulate.stdout).startswith("usage: agent-latency simulate ")
        report = fresh.run("agent-latency", "report", "--help")
        assert report.returncode == 0, report.stderr
        assert first_line(report.stdout).startswith("usage: agent-latency report ")
        run = fresh.run("agent-latency", "run", "--", "python", "-c", "pass")
        assert run.returncode == 0, run.stderr
        assert first_line(run.stderr).startswith("task python -c "), run.stderr  # its budget
        demo = fresh.run("agent-latency", "demo")
        assert demo.returncode == 0, demo.stderr
        assert first_line(demo.stderr).startswith("starting the simulator: prefill 4000 tok/s")
        assert "\ntask demo: " in demo.stdout
        assert demo.stdout.rstrip().splitlines()[-1].startswith(
            "spans: .agent-latency/demo/traces.jsonl")
        # What the demo wrote is a report's input, from the installed package.
        again = fresh.run("agent-latency", "report", ".agent-latency/demo")
        assert again.returncode == 0, again.stderr
        assert first_line(again.stdout).startswith("1 task (1 name) from ")
        whatif = fresh.run("agent-latency", "whatif", ".agent-latency/demo")
        assert whatif.returncode == 0, whatif.stderr
        assert first_line(whatif.stdout).startswith("1 task, ")


@pytest.fixture(scope="session", autouse=True)
def _no_build_leftovers() -> None:
    """``python -m build`` from the tree leaves nothing behind in it (it builds in a copy)."""
    before = {p.name for p in ROOT.iterdir()}
    yield
    for name in {"build", "dist"} - before:
        shutil.rmtree(ROOT / name, ignore_errors=True)
