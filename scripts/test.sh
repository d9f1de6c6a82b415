#!/usr/bin/env bash
# The project's test command: every package with the race detector,
# then each fuzz target briefly.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
go vet ./...
go test -race -count=1 -timeout 60m ./...
for target in $(go test -list '^Fuzz' ./upstream/ | grep '^Fuzz' || true); do
	go test -run '^$' -fuzz "^${target}\$" -fuzztime 15s ./upstream/
done
