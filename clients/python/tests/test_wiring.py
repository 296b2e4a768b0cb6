"""The wiring example of docs/python.md runs as written, with psych on
PATH; the package installs offline into a venv; a ContainerSandbox runs."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from psych_runtime import ContainerSandbox

from tests import harness

TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # clients/python
DOC = os.path.join(TREE, "..", "..", "docs", "python.md")


class WiringTests(unittest.TestCase):
    def test_wiring_example_as_written(self) -> None:
        harness.require_psych(self)
        with open(DOC) as f:
            m = re.search(r"## Wiring\n.*?```python\n(.*?)```", f.read(), re.S)
        assert m is not None, "docs/python.md has no wiring example"
        tmp = tempfile.mkdtemp(prefix="psych-py-wiring-")
        self.addCleanup(shutil.rmtree, tmp, True)
        os.symlink(harness.SANDBOX_PYTHON, os.path.join(tmp, "python3"))  # the sandbox's python3 on PATH
        script = os.path.join(tmp, "wiring.py")
        with open(script, "w") as f:
            f.write(m.group(1))
        env = dict(os.environ, PYTHONPATH=TREE, PATH=os.path.dirname(harness.PSYCH_BIN) + ":" + tmp + ":" + os.environ.get("PATH", ""))
        env.pop("PSYCH_HOST", None)
        out = subprocess.run([sys.executable, script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr.decode())
        self.assertEqual(out.stdout.decode().splitlines(), [
            "['search', 'run_code']",
            "'1\\n' ['psych runs one program per sandbox'] None",
            "ZeroDivisionError 1",
            "ok ['a binding is an ordinary call']",
        ])

    def test_offline_install(self) -> None:
        """pip install --no-index ./clients/python in a fresh venv: the
        in-tree backend needs nothing from an index; the installed package
        is typed and imports by the contract's paths."""
        tmp = tempfile.mkdtemp(prefix="psych-py-venv-")
        self.addCleanup(shutil.rmtree, tmp, True)
        venv = os.path.join(tmp, "v")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=120)
        py = os.path.join(venv, "bin", "python")
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        env.pop("PYTHONPATH", None)
        out = subprocess.run([py, "-m", "pip", "install", "--no-index", TREE], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        self.assertEqual(out.returncode, 0, out.stdout.decode())
        check = ("import os, psych_runtime\n"
                 "from psych_runtime.sandbox.subprocess import SubprocessSandbox\n"
                 "from psych_runtime.sandbox.container import ContainerSandbox\n"
                 "from psych_runtime import SandboxLimits, Runtime, SubprocessSandbox as S, ContainerSandbox as C\n"
                 "assert S is SubprocessSandbox and C is ContainerSandbox\n"
                 "d = os.path.dirname(psych_runtime.__file__)\n"
                 "print(d.startswith(%r), os.path.exists(os.path.join(d, 'py.typed')))\n") % venv
        out = subprocess.run([py, "-c", check], env=env, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        self.assertEqual(out.stdout.decode(), "True True\n")

    def test_container_sandbox(self) -> None:
        """The container backend through the embedded transport, a binding
        included (podman: the engine this host's image is loaded into)."""
        harness.require_psych(self)
        image = os.environ.get("PSYCH_SANDBOX_IMAGE", "")
        if not image:
            if harness.IN_CI:
                self.fail("PSYCH_SANDBOX_IMAGE unset; CI sets it (scripts/python-client-test.sh)")
            self.skipTest("needs PSYCH_SANDBOX_IMAGE, psych's image")
        sb = ContainerSandbox(runtime="podman", image=image, psych_bin=harness.PSYCH_BIN)
        r = sb.run("print('in a container')\ntwice(21)", bindings={"twice": lambda x: 2 * x})
        self.assertEqual((r.stdout, r.value, r.failure), ("in a container\n", 42, None))
        self.assertEqual(r.isolation["backend"], "container")


if __name__ == "__main__":
    unittest.main()
