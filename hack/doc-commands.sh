#!/usr/bin/env bash
# `make doc-commands`: run the fenced sh blocks of README.md, ARCHITECTURE.md,
# CONTRIBUTING.md and docs/*.md as a reader would type them, from the repository's root,
# one bash per file, in order. A block marked <!-- not run: reason --> right above its
# fence is listed with its reason and left out; hack/doccommands fails on a mark without
# a reason, a shell block under another info string, and a broken relative link.
#
# The blocks run against `make demo`'s embedded control plane, which this script starts
# and stops. DOC_COMMANDS_DEMO=running runs them against a demo already up (and leaves it
# up), for a quick retry while writing docs.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "${ROOT}"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

work="$(mktemp -d)"
started_demo=""
cleanup() {
  rm -rf "${work}"
  if [[ -n "${started_demo}" ]]; then
    hack/demo.sh down >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

files=(README.md ARCHITECTURE.md CONTRIBUTING.md docs/*.md)
say "the sh blocks of ${files[*]}"
go run ./hack/doccommands -out "${work}" "${files[@]}"

if [[ "${DOC_COMMANDS_DEMO:-}" != running ]]; then
  say "make demo (its output: .demo/doc-commands-demo.log)"
  mkdir -p .demo
  started_demo=yes
  if ! make demo >.demo/doc-commands-demo.log 2>&1; then
    tail -n 40 .demo/doc-commands-demo.log >&2
    echo "doc-commands: make demo failed; its log is .demo/doc-commands-demo.log" >&2
    exit 1
  fi
fi
export KUBECONFIG="${ROOT}/.demo/kubeconfig"

# What the blocks print goes to a log, shown when one fails; where each block stands goes
# to stderr.
log=.demo/doc-commands.log
: >"${log}"
for script in "${work}"/*.sh; do
  [[ -e "${script}" ]] || continue
  # Each file's blocks share one shell, from the repository's root, as in one terminal.
  if ! bash "${script}" >>"${log}"; then
    tail -n 40 "${log}" >&2
    echo "doc-commands: a block failed (the last '== file:line' above names it); its output: ${log}" >&2
    exit 1
  fi
done
say "every sh block ran or is marked not run"
