"""A Registry derives each tool's schema from its signature."""
from __future__ import annotations

import unittest
from typing import Any

from psych_runtime import ConfigurationError, Registry
from psych_runtime.registry import as_registry


class RegistryTests(unittest.TestCase):
    def test_schema_from_signature(self) -> None:
        reg = Registry()

        @reg.tool
        def search(query: str, limit: int = 10, exact: bool = False, *, lang: Any = None) -> list:
            """Search the notes."""
            return []

        t = reg.get("search")
        assert t is not None
        self.assertEqual(t.description, "Search the notes.")
        self.assertEqual(t.params, ["query", "limit", "exact"])
        self.assertEqual(t.parameters, {"type": "object", "additionalProperties": False, "required": ["query"],
                                        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"},
                                                       "exact": {"type": "boolean"}, "lang": {}}})
        self.assertEqual(t.declaration()["name"], "search")
        self.assertNotIn("destructive", t.declaration())

    def test_given_schema_and_kwargs(self) -> None:
        reg = Registry()
        schema = {"type": "object", "properties": {"path": {"type": "string", "minLength": 1}}, "required": ["path"]}
        reg.register(lambda path: path, name="rm", parameters=schema, destructive=True, description="Remove.")
        t = reg.get("rm")
        assert t is not None
        self.assertEqual((t.parameters, t.params, t.destructive), (schema, ["path"], True))
        reg.register(lambda **kw: kw, name="echo")
        self.assertNotIn("additionalProperties", reg.get("echo").parameters)  # type: ignore[union-attr]

    def test_refused(self) -> None:
        reg = Registry()
        reg.register(lambda: 1, name="a")
        for kw in ({"name": "a"}, {"name": "run_code"}, {"name": "not a name"}, {"name": "class"}, {"name": "_private"}):
            with self.subTest(kw=kw), self.assertRaises(ConfigurationError):
                reg.register(lambda: 1, **kw)
        with self.assertRaises(ConfigurationError):
            reg.register(lambda *a: 1, name="star")
        with self.assertRaises(ConfigurationError):
            as_registry({"x": 3})  # type: ignore[dict-item]
        self.assertEqual([t.name for t in as_registry({"f": lambda x: x})], ["f"])


if __name__ == "__main__":
    unittest.main()
