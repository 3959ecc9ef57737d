#!/usr/bin/env bash
# Fetches real models' chat templates for tests/jinja/jinja_real_templates_test.cpp
# and llama.cpp's tokenizer test vocabularies (models/ggml-vocab-*.gguf with
# their .inp texts and .out reference ids) for
# tests/tokenizer/llama_vocab_test.cpp (other projects' files: cached on this
# machine, never committed).
#
# llama-cpp-python's source distribution carries llama.cpp's
# models/templates/*.jinja (Qwen, GLM, DeepSeek, Kimi, gpt-oss, Llama, Mistral,
# Gemma, MiniMax, Nemotron, ...). This downloads it with pip (no build, no
# dependencies) and extracts the templates into
# ${ODMOE_TEMPLATES_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/odmoe/chat-templates}.
#
#   scripts/fetch_chat_templates.sh            # llama-cpp-python 0.3.36
#   LLAMA_CPP_PYTHON_VERSION=0.3.16 scripts/fetch_chat_templates.sh
set -euo pipefail
version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/odmoe"
out="${ODMOE_TEMPLATES_DIR:-$cache/chat-templates}"
sdist_dir="$cache/pip"
sdist="$sdist_dir/llama_cpp_python-$version.tar.gz"
mkdir -p "$sdist_dir" "$out"
if [[ ! -f "$sdist" ]]; then
  pip download --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$sdist_dir"
fi
tar -xzf "$sdist" -C "$out" --wildcards --strip-components=5 \
  "llama_cpp_python-$version/vendor/llama.cpp/models/templates/*.jinja"
echo "$(ls "$out"/*.jinja | wc -l) templates in $out"
vocabs="${ODMOE_LLAMA_VOCABS:-$cache/llama-vocabs}"
mkdir -p "$vocabs"
tar -xzf "$sdist" -C "$vocabs" --wildcards --strip-components=4 \
  "llama_cpp_python-$version/vendor/llama.cpp/models/ggml-vocab-*"
echo "$(ls "$vocabs"/*.gguf | wc -l) vocabularies in $vocabs"
