#!/usr/bin/env bash
# govulncheck on hotlane's code: fails when code hotlane calls has a known
# vulnerability in a module go.mod requires (bump that module), and names,
# without failing, those in the Go toolchain's standard library, which only
# a newer Go on the machine fixes (go.mod's go line is the minimum hotlane
# builds with, not the toolchain it is built with).
#
# The database: vuln.go.dev is not reachable from our machines, so by
# default it is built from the Go team's own golang.org/x/vulndb module
# (its data/osv, with its cmd/indexdb) at VULNDB_VERSION, once, into
# $HOTLANE_CACHE. GOVULNDB=URL uses another (e.g. https://vuln.go.dev).
# Bump VULNDB_VERSION (go list -m -versions golang.org/x/vulndb) to see
# newer reports.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
GOVULNCHECK=${GOVULNCHECK:-golang.org/x/vuln/cmd/govulncheck@v1.9.0}
VULNDB_VERSION=${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}
cache=${HOTLANE_CACHE:-$HOME/.cache/hotlane}

db=${GOVULNDB:-}
if [ -z "$db" ]; then
	dir="$cache/vulndb-$VULNDB_VERSION"
	if [ ! -f "$dir/index/db.json" ]; then
		src=$($GO mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
		[ -d "$src/data/osv" ] || { echo "vulncheck: golang.org/x/vulndb@$VULNDB_VERSION has no data/osv" >&2; exit 1; }
		echo "vulncheck: building the vulnerability database from golang.org/x/vulndb@$VULNDB_VERSION"
		rm -rf "$dir.tmp"
		$GO run "golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION" -vulns "$src/data/osv" -out "$dir.tmp"
		rm -rf "$dir" && mv "$dir.tmp" "$dir"
	fi
	db="file://$dir"
fi

out=$(mktemp /tmp/hotlane-vulncheck.XXXXXX)
trap 'rm -f "$out"' EXIT
$GO run "$GOVULNCHECK" -db "$db" -format json ./... >"$out"
# A finding whose trace starts at a function is code hotlane calls; the
# others are in packages or modules it has but does not reach.
called() {
	jq -r --arg stdlib "$1" 'select(.finding.trace[0].function != null) | .finding
		| select((.trace[0].module == "stdlib") == ($stdlib == "yes"))
		| "\(.osv) \(.trace[0].module)@\(.trace[0].version) fixed in \(.fixed_version)"' "$out" | sort -u
}
modules=$(called no)
stdlib=$(called yes)
required=$(jq -r 'select(.finding.trace[0].function == null and .finding.trace[0].module != "stdlib") | .finding
	| "\(.osv) \(.trace[0].module)@\(.trace[0].version) fixed in \(.fixed_version)"' "$out" | sort -u)
if [ -n "$required" ]; then
	echo "vulncheck: note: modules go.mod requires have known vulnerabilities that hotlane's code does not reach; bump them when convenient:"
	sed 's/^/  /' <<<"$required"
fi
if [ -n "$stdlib" ]; then
	echo "vulncheck: warning: the Go toolchain's standard library ($($GO env GOVERSION)) has vulnerabilities that hotlane's code reaches; upgrade Go on this machine:"
	sed 's/^/  /' <<<"$stdlib"
fi
if [ -n "$modules" ]; then
	echo "vulncheck: code hotlane calls has known vulnerabilities in modules it requires; bump them (go get MODULE@VERSION):" >&2
	sed 's/^/  /' <<<"$modules" >&2
	exit 1
fi
echo "vulncheck: no known vulnerabilities in the modules hotlane requires reach its code ($db)"
