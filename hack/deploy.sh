#!/usr/bin/env bash
# Prints config/default with IMG as the operator's image, as the adapter image it gives
# the SkillServer pods (CANTUS_ADAPTER_IMAGE) and as the only adapter image its admission
# policy allows (config/admission), for `make deploy IMG=...`. A throwaway overlay does
# what `kustomize edit set image` does, without editing the committed kustomization or
# needing the kustomize binary (kubectl embeds it).
set -euo pipefail

IMG="${1:?usage: deploy.sh IMAGE}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
overlay="$(mktemp -d)"
trap 'rm -rf "${overlay}"' EXIT

name="${IMG%@*}"
digest=""
[[ "${IMG}" == *@* ]] && digest="${IMG#*@}"
tag=""
# A colon after the last slash is a tag; one before it is a registry port.
if [[ "${name##*/}" == *:* ]]; then tag="${name##*:}"; name="${name%:*}"; fi

# config/manager already names the default image; the overlay renames that one.
base_image="$(sed -n 's/^ *newName: *//p' "${ROOT}/config/manager/kustomization.yaml" | head -n1)"
ln -s "${ROOT}/config" "${overlay}/config"
{
  echo "resources:"
  echo "- config/default"
  echo "images:"
  echo "- name: ${base_image}"
  echo "  newName: ${name}"
  [[ -n "${tag}" ]] && echo "  newTag: \"${tag}\""
  [[ -n "${digest}" ]] && echo "  digest: ${digest}"
  echo "patches:"
  echo "- patch: |-"
  echo "    apiVersion: apps/v1"
  echo "    kind: Deployment"
  echo "    metadata: {name: cantus-operator, namespace: cantus-system}"
  echo "    spec:"
  echo "      template:"
  echo "        spec:"
  echo "          containers:"
  echo "          - name: manager"
  echo "            env:"
  echo "            - name: CANTUS_ADAPTER_IMAGE"
  echo "              value: \"${IMG}\""
  # The admission policy lets the operator run that image as the adapter, and no other.
  echo "- patch: |-"
  echo "    apiVersion: v1"
  echo "    kind: ConfigMap"
  echo "    metadata: {name: cantus-operator-admission, namespace: cantus-system}"
  echo "    data:"
  echo "      adapterImages: \"${IMG}\""
} >"${overlay}/kustomization.yaml"
kubectl kustomize "${overlay}"
