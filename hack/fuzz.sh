#!/usr/bin/env bash
# Runs every Go fuzz target of the module for FUZZTIME each (default 10s). `make test`
# already runs their seed corpora as ordinary tests; this explores beyond them.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-10s}"
status=0

# fuzz_target runs one target. The fuzzing engine sometimes fails with a bare "context
# deadline exceeded" when -fuzztime ends while it is starting or stopping a worker; that
# run found no input, so it is run once more. A real finding prints "Failing input
# written to" and fails at once.
fuzz_target() {
  local pkg="$1" target="$2" out attempt
  for attempt in 1 2; do
    echo "fuzz: ${pkg} ${target} for ${FUZZTIME}"
    if out="$(go test "${pkg}" -run '^$' -fuzz "^${target}\$" -fuzztime "${FUZZTIME}" 2>&1)"; then
      echo "${out}"
      return 0
    fi
    echo "${out}"
    if grep -q 'Failing input written to' <<<"${out}" || ! grep -q 'context deadline exceeded' <<<"${out}"; then
      return 1
    fi
    echo "fuzz: ${target}: the engine stopped on its own deadline without a finding (attempt ${attempt})"
  done
  return 1
}
while IFS= read -r file; do
  pkg="./$(dirname "${file}")"
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "${file}" | awk '{print $2}'); do
    fuzz_target "${pkg}" "${target}" || status=1
  done
done < <(grep -rlE '^func Fuzz' --include='*_test.go' internal cmd)
exit "${status}"
