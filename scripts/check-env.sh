#!/usr/bin/env bash
# Only src/config.ts reads the environment (style.md). Biome's noProcessEnv and noRestrictedImports
# (biome.json) catch `process.env` and `import { env } from 'node:process'`; this catches what they
# cannot see: `process` destructured or aliased (`const { env } = process`, `const p = process`).
# Exceptions: src/config.ts; test/ and bench/ read their own run settings (TEST_DB, BENCH_*), not the
# service's, and are not checked.
set -euo pipefail
cd "$(dirname "$0")/.."
hits=$(grep -rnE --include='*.ts' '(=|:)\s*(globalThis\.)?process\s*[;,)}]|(globalThis\.)?process\s*\[' src | grep -v '^src/config\.ts:' || true)
if [ -n "$hits" ]; then
  echo "$hits"
  echo "error: only src/config.ts reads process.env (read the value from Config instead)"
  exit 1
fi
