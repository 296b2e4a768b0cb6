"""Parsing and encoding of the API's JSON, against recorded JSON: a Result
as psych run --json prints it, and one with files, files_omitted and
artifacts by the settled names (issue 27)."""
from __future__ import annotations

import base64
import hashlib
import json
import unittest

from psych_runtime import ConfigurationError, HostFault, SandboxLimits
from psych_runtime.types import encode_files, parse_result

# Recorded from `psych run --json` (isolation trimmed).
RECORDED = json.loads(r'''{"id":"01M9809MA6F20NW8RW7012BSWX","stdout":"hi\n","stderr":"err\n","stdout_truncated":false,"stderr_truncated":true,"value":null,
"failure":{"type":"NameError","message":"name 'echo' is not defined","traceback":"Traceback (most recent call last):\n  File \"<program>\", line 4, in <module>\n","exit_code":1,"signal":null},
"limit_hit":null,"network_denied":true,"usage":{"cpu_seconds":0.149811,"peak_memory_bytes":9224192,"peak_processes":1},
"isolation":{"backend":"subprocess","mode":"namespaces","network":{"verified":true,"links":["lo"]},"warm":false},"duration_seconds":0.276016494,"suspended_seconds":0}''')

PNG = b"\x89PNG\r\n\x1a\n fake"
CSV = b"a,b\n1,2\n"
WITH_FILES = dict(RECORDED, failure=None, value={"rows": 1}, limit_hit="wall_seconds", files_truncated=True,
                  files=[{"path": "out/summary.csv", "size": len(CSV), "sha256": hashlib.sha256(CSV).hexdigest(), "mode": 420,
                          "data": base64.b64encode(CSV).decode()}],
                  files_omitted=[{"path": "big.bin", "size": 11 << 20, "reason": "too_large"}],
                  artifacts=[{"name": "figure-1.png", "mime": "image/png", "width": 640, "height": 480, "size": len(PNG),
                              "sha256": hashlib.sha256(PNG).hexdigest(), "data": base64.b64encode(PNG).decode()}],
                  artifacts_omitted=[{"path": "figure-2.png", "size": 9 << 20, "reason": "too_large"}])


class ParseTests(unittest.TestCase):
    def test_recorded_result(self) -> None:
        r = parse_result(RECORDED)
        self.assertEqual((r.stdout, r.stderr, r.value, r.id), ("hi\n", "err\n", None, "01M9809MA6F20NW8RW7012BSWX"))
        self.assertFalse(r.ok)
        self.assertEqual((r.failure.type, r.failure.exit_code, r.failure.signal), ("NameError", 1, None))
        self.assertIn('File "<program>", line 4', r.failure.traceback)
        self.assertEqual((r.limit_hit, r.network_denied, r.stdout_truncated, r.stderr_truncated), (None, True, False, True))
        self.assertAlmostEqual(r.duration_seconds, 0.276016494)
        self.assertEqual(r.usage["peak_processes"], 1)
        self.assertTrue(r.isolation["network"]["verified"])
        self.assertEqual((r.files, r.files_omitted, r.artifacts, r.files_truncated), ([], [], [], False))

    def test_files_and_artifacts(self) -> None:
        r = parse_result(WITH_FILES)
        self.assertTrue(r.ok)
        self.assertEqual(r.value, {"rows": 1})
        self.assertEqual(r.limit_hit, "wall_seconds")
        self.assertEqual(len(r.files), 1)
        f = r.files[0]
        self.assertEqual((f.path, f.size, f.mode, f.data), ("out/summary.csv", len(CSV), 0o644, CSV))
        self.assertEqual([(o.path, o.size, o.reason) for o in r.files_omitted], [("big.bin", 11 << 20, "too_large")])
        self.assertTrue(r.files_truncated)
        a = r.artifacts[0]
        self.assertEqual((a.name, a.mime, a.width, a.height, a.size, a.data), ("figure-1.png", "image/png", 640, 480, len(PNG), PNG))
        self.assertEqual([(o.path, o.size, o.reason) for o in r.artifacts_omitted], [("figure-2.png", 9 << 20, "too_large")])

    def test_hostile_result(self) -> None:
        """A wrong shape is a HostFault, never a TypeError, and data that
        does not match its size or digest is refused."""
        bad = [
            [], "x", dict(RECORDED, stdout=3), dict(RECORDED, failure="boom"), dict(RECORDED, failure=dict(RECORDED["failure"], exit_code="1")),
            dict(RECORDED, network_denied="yes"), dict(RECORDED, duration_seconds=True), dict(RECORDED, files={}), dict(RECORDED, files=[1]),
            dict(WITH_FILES, files=[dict(WITH_FILES["files"][0], data="not base64!")]),
            dict(WITH_FILES, files=[dict(WITH_FILES["files"][0], size=1)]),
            dict(WITH_FILES, files=[dict(WITH_FILES["files"][0], sha256="00" * 32)]),
            dict(WITH_FILES, artifacts=[dict(WITH_FILES["artifacts"][0], sha256="00" * 32)]),
            dict(WITH_FILES, files_omitted=[{"path": 1}]),
            dict(WITH_FILES, artifacts=[dict(WITH_FILES["artifacts"][0], size=1)]),
            dict(WITH_FILES, artifacts_omitted=[1]),
        ]
        for obj in bad:
            with self.subTest(obj=str(obj)[:80]):
                with self.assertRaises(HostFault):
                    parse_result(obj)


class EncodeTests(unittest.TestCase):
    def test_files(self) -> None:
        got = encode_files({"data/in.csv": CSV, "empty": b""})
        self.assertEqual(got, [{"path": "data/in.csv", "data": base64.b64encode(CSV).decode(), "mode": 0o644},
                               {"path": "empty", "data": "", "mode": 0o644}])
        self.assertIsNone(encode_files(None))
        for bad in ({"a": "text"}, {1: b"x"}, [("a", b"x")]):
            with self.assertRaises(ConfigurationError):
                encode_files(bad)  # type: ignore[arg-type]

    def test_limits(self) -> None:
        self.assertEqual(SandboxLimits().to_json(), {"cpu_seconds": 10.0, "address_space_bytes": 512 << 20, "file_size_bytes": 10 << 20,
                                                     "process_count": 64, "wall_seconds": 30.0})
        self.assertEqual(SandboxLimits(memory_bytes=1 << 30, open_files=64).to_json()["open_files"], 64)
        for bad in (SandboxLimits(cpu_seconds=-1), SandboxLimits(process_count="3")):  # type: ignore[arg-type]
            with self.assertRaises(ConfigurationError):
                bad.to_json()


if __name__ == "__main__":
    unittest.main()
