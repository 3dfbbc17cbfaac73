#!/usr/bin/env bash
# Runs every Go fuzz target of the module for FUZZTIME each (default 10s). `make test`
# already runs their seed corpora as ordinary tests; this explores beyond them.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-10s}"
status=0
while IFS= read -r file; do
  pkg="./$(dirname "${file}")"
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "${file}" | awk '{print $2}'); do
    echo "fuzz: ${pkg} ${target} for ${FUZZTIME}"
    go test "${pkg}" -run '^$' -fuzz "^${target}\$" -fuzztime "${FUZZTIME}" || status=1
  done
done < <(grep -rlE '^func Fuzz' --include='*_test.go' internal cmd)
exit "${status}"
