#!/usr/bin/env bash
# Installs the Python packages the test suite uses: the client libraries it
# drives the HTTP API with (the official `openai` client, langchain-openai,
# pydantic-ai: tests/clients/), jinja2, the reference real chat templates are
# rendered against (tests/jinja/), and jsonschema, the validator structured
# output is checked with (tests/cluster/http_structured_test.cpp), into a
# virtual environment in the
# cache folder, from PyPI, at pinned versions. Idempotent: a stamp of the
# requirements skips a second install.
# These are development-time tools: the product never imports them, and
# where PyPI is out of reach the client tests pass with a warning.
#
#   scripts/client_venv.sh            # prints the venv's python3 on success
#   ODMOE_CLIENT_VENV=/path scripts/client_venv.sh
set -euo pipefail
VENV=${ODMOE_CLIENT_VENV:-$HOME/.cache/odmoe/client-venv}
REQUIREMENTS=(
  "openai==3.63.0"
  "langchain-openai==1.8.1"
  "pydantic-ai-slim[openai]==2.78.0"
  "jinja2==3.1.6"
  "jsonschema==4.26.0"
)
stamp="$VENV/odmoe-requirements"
want=$(printf '%s\n' "${REQUIREMENTS[@]}")
if [ -x "$VENV/bin/python3" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "$VENV/bin/python3"
  exit 0
fi
mkdir -p "$(dirname "$VENV")"
python3 -m venv "$VENV" >&2
"$VENV/bin/pip" install -q --disable-pip-version-check --upgrade pip >&2
"$VENV/bin/pip" install -q --disable-pip-version-check "${REQUIREMENTS[@]}" >&2
printf '%s\n' "$want" > "$stamp"
echo "$VENV/bin/python3"
