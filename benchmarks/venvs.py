"""Throwaway venvs for peer tools the benchmarks compare against (HTA, Extra-P): installed
once under benchmarks/.cache and reused while the pinned version still imports."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


def ensure_venv(venv: Path, spec: str, version_code: str, log=print,
                extra: tuple[str, ...] = ()) -> tuple[Path | None, str]:
    """The venv's python and the tool's version, installing `spec` (pkg==version) when the
    venv is missing or holds another version; (None, why) when that fails.
    `version_code` is Python that imports the tool and prints its version; `extra` are pins
    installed with it (an old pandas the tool needs)."""
    py = venv / "bin" / "python"
    check = [str(py), "-c", version_code]
    if py.exists():
        r = subprocess.run(check, capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip() == spec.split("==")[1]:
            return py, r.stdout.strip()
    log(f"installing {spec} into {venv} (one-off)")
    shutil.rmtree(venv, ignore_errors=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", spec, *extra],
                           capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            return None, "pip install failed: " + r.stderr[-500:]
        r = subprocess.run(check, capture_output=True, text=True)
        if r.returncode != 0:
            return None, "import failed: " + r.stderr[-500:]
        return py, r.stdout.strip()
    except Exception as e:  # noqa: BLE001 - any failure means "tool unavailable"
        return None, f"{type(e).__name__}: {e}"
