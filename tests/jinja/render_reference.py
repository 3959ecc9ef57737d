#!/usr/bin/env python3
"""Renders chat templates with Python's jinja2 as transformers does (for tests/jinja).

  render_reference.py REQUESTS.json OUT.json

REQUESTS.json: [{"template": "<text>", "context": {...}}, ...]; OUT.json gets one
{"output": "..."} or {"error": "..."} per request. Exit 3 when jinja2 is missing
(the calling test then skips with a warning).
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "fixtures"))
try:
    from jinja_env import make_env
except ImportError:
    sys.exit(3)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        requests = json.load(f)
    env = make_env()
    compiled = {}
    out = []
    for r in requests:
        try:
            t = compiled.get(r["template"])
            if t is None:
                t = compiled[r["template"]] = env.from_string(r["template"])
            out.append({"output": t.render(**r["context"])})
        except Exception as e:  # noqa: BLE001 - the test compares failures too
            out.append({"error": f"{type(e).__name__}: {e}"})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
