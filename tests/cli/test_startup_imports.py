"""What a fresh no-daemon process imports: pydantic's plugin lookup is skipped only when no
installed distribution declares a pydantic plugin, and a config file is still read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_PROBE = """
import sys
from gitguard.models import ToolLedgerEntry
from gitguard import ledger
loader = sys.modules.get("pydantic.plugin._loader")
from pydantic.plugin._loader import get_plugins
print("metadata" if "importlib.metadata" in sys.modules else "no-metadata",
      "stand-in" if loader is not None and (loader.__doc__ or "").startswith("gitguard")
      else "pydantic", len(list(get_plugins())))
"""


def _probe(cwd: Path, extra_path: Path | None = None) -> list[str]:
    env = dict(os.environ)
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(extra_path),
                                                        env.get("PYTHONPATH")) if p)
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=cwd, env=env,
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def test_no_plugin_installed_no_importlib_metadata(tmp_path: Path) -> None:
    assert _probe(tmp_path) == ["no-metadata", "stand-in", "0"]


def test_an_installed_pydantic_plugin_still_loads(tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = site / "probe_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pydantic]\nprobe = probe_plugin:plugin\n")
    (site / "probe_plugin.py").write_text(
        "class _Plugin:\n"
        "    def new_schema_validator(self, *args, **kwargs):\n"
        "        return None, None, None\n"
        "plugin = _Plugin()\n")
    assert _probe(tmp_path, site) == ["metadata", "pydantic", "1"]


def test_the_stand_in_hands_anything_else_to_pydantics_loader(tmp_path: Path) -> None:
    """A newer pydantic that asks the loader for more than `get_plugins` gets the real
    module, not an ImportError in every gitguard process."""
    probe = ("import sys\nimport gitguard.models\n"
             "from pydantic.plugin._loader import PYDANTIC_ENTRY_POINT_GROUP as group\n"
             "print(group, 'importlib.metadata' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["pydantic", "True"]
