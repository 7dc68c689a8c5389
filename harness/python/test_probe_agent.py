"""Probe a MAGMA agent from pytest with the `magma-validate` wheel.

The README's pytest example; `cargo xtask wheel` runs it against magma-server
from a fresh venv where only the wheel and pytest are installed:

    pip install magma-validate pytest
    AGENT_URL=http://127.0.0.1:8888 pytest test_probe_agent.py
"""

import os
import subprocess
import sysconfig
from pathlib import Path

AGENT_URL = os.environ.get("AGENT_URL", "http://127.0.0.1:8888")
# pip installs the binary beside this interpreter's scripts (venv/bin).
MAGMA_VALIDATE = Path(sysconfig.get_path("scripts")) / "magma-validate"


def test_agent_conforms_to_the_magma_contract(tmp_path):
    report = tmp_path / "magma-probe.xml"
    result = subprocess.run(
        [MAGMA_VALIDATE, "probe", AGENT_URL, "--format", "junit", "--output", report],
        capture_output=True,
        text=True,
    )
    # 0 conformant (warnings allowed), 1 a check failed, 2 no verdict
    # (agent not ready, TLS refused, wrong URL); the JUnit file is written
    # in every case.
    assert result.returncode == 0, result.stdout + result.stderr
    assert report.read_text().startswith("<?xml")
