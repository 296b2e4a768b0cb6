"""The in-tree PEP 517 backend of psych-runtime: standard library only, so
an offline ``pip install --no-index ./clients/python`` needs no index. It
builds a pure-Python wheel of the psych_runtime package (py.typed
included) and an sdist of the source tree."""
from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import zipfile
from typing import Dict, List, Optional

NAME, DIST, VERSION = "psych_runtime", "psych_runtime", "0.1.0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = "py3-none-any"

METADATA = """Metadata-Version: 2.1
Name: psych-runtime
Version: {v}
Summary: Run a language model's Python program in psych's hardened Linux sandbox and get the result back as data
Requires-Python: >=3.8
License: Apache-2.0
""".format(v=VERSION)

WHEEL = """Wheel-Version: 1.0
Generator: psych_build
Root-Is-Purelib: true
Tag: {t}
""".format(t=TAG)


def _package_files() -> List[str]:
    out = []
    for d, dirs, files in os.walk(os.path.join(ROOT, NAME)):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py") or f == "py.typed":
                out.append(os.path.relpath(os.path.join(d, f), ROOT))
    return out


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


def _dist_info() -> str:
    return "%s-%s.dist-info" % (DIST, VERSION)


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, str]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, str]] = None) -> List[str]:
    return []


get_requires_for_build_editable = get_requires_for_build_wheel


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Optional[Dict[str, str]] = None) -> str:
    d = os.path.join(metadata_directory, _dist_info())
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write(METADATA)
    with open(os.path.join(d, "WHEEL"), "w") as f:
        f.write(WHEEL)
    return _dist_info()


def _write_wheel(wheel_directory: str, files: Dict[str, bytes]) -> str:
    name = "%s-%s-%s.whl" % (DIST, VERSION, TAG)
    di = _dist_info()
    files = dict(files)
    files[di + "/METADATA"] = METADATA.encode()
    files[di + "/WHEEL"] = WHEEL.encode()
    record = [_record_line(p, b) for p, b in files.items()] + [di + "/RECORD,,"]
    files[di + "/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for p, b in files.items():
            info = zipfile.ZipInfo(p, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, b, zipfile.ZIP_DEFLATED)
    return name


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, str]] = None,
                metadata_directory: Optional[str] = None) -> str:
    files = {}
    for rel in _package_files():
        with open(os.path.join(ROOT, rel), "rb") as f:
            files[rel.replace(os.sep, "/")] = f.read()
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory: str, config_settings: Optional[Dict[str, str]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, {"psych_runtime_editable.pth": (ROOT + "\n").encode()})


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, str]] = None) -> str:
    base = "%s-%s" % (DIST, VERSION)
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        rels = ["pyproject.toml", "_build/psych_build.py"] + _package_files()
        for rel in rels:
            t.add(os.path.join(ROOT, rel), arcname=base + "/" + rel.replace(os.sep, "/"), recursive=False)
        info = tarfile.TarInfo(base + "/PKG-INFO")
        data = METADATA.encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name
