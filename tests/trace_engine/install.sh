#!/usr/bin/env bash
# Installs the trace engine of Chrome DevTools pinned by package-lock.json into node_modules
# (npm ci); does nothing when that lock is already installed. Fails when Node.js or npm is missing.
set -euo pipefail
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
for tool in node npm; do
  if ! command -v "$tool" > /dev/null; then
    echo "error: '$tool' (Node.js) is not installed; tools/setup installs it (apt-get install nodejs npm)" >&2
    exit 1
  fi
done
stamp="$dir/node_modules/.trainsim-installed-lock"
if [ -f "$stamp" ] && cmp -s "$stamp" "$dir/package-lock.json" &&
   [ -f "$dir/node_modules/@paulirish/trace_engine/package.json" ]; then
  exit 0
fi
echo "installing the trace engine (npm ci in $dir)" >&2
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
cp "$dir/package-lock.json" "$stamp"
