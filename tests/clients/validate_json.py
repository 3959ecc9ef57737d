#!/usr/bin/env python3
"""Validates JSON texts against a JSON Schema with Python's `jsonschema`, the
reference validator (format checks on), for the structured-output tests.

    python3 tests/clients/validate_json.py SCHEMA.json REPLIES.json

REPLIES.json is an array of texts. Prints one line per text that is not JSON
or does not validate, then "N valid of M". Exit 0: all valid; 1: some not;
77: jsonschema is not installed (scripts/client_venv.sh installs it).
"""
import json
import sys

try:
    import jsonschema
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)


def main(schema_path, replies_path):
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    with open(replies_path, encoding="utf-8") as f:
        replies = json.load(f)
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    valid = 0
    for i, text in enumerate(replies):
        try:
            validator.validate(json.loads(text))
            valid += 1
        except (ValueError, jsonschema.ValidationError) as e:
            print(f"reply {i}: {str(e).splitlines()[0]}: {text!r}")
    print(f"{valid} valid of {len(replies)}")
    return 0 if valid == len(replies) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
