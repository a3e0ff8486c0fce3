#!/usr/bin/env bash
# `npm start`: installs what the local run needs (first time only), then serves the API on localhost.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --runtime
exec bash scripts/run-node.sh scripts/start-local.ts "$@"
