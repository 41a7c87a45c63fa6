#!/usr/bin/env bash
# Fetches the CRD manifests of another scheduler `render --target` compiles for, from its Go
# module at a pinned version, into a cache outside the repository, and prints their folder.
#
#   kai    github.com/NVIDIA/KAI-scheduler  deployments/kai-scheduler/crds/*.yaml
#   kueue  sigs.k8s.io/kueue                config/components/crd/bases/*.yaml
#
# Usage: hack/target-crds.sh kai|kueue. Needs Go and the Go module proxy (only on the first
# run of a version: the folder is kept). Nothing of theirs is committed here.
set -euo pipefail

KAI_VERSION=${KAI_VERSION:-0.13.0}
KUEUE_VERSION=${KUEUE_VERSION:-0.17.0}
case "${1:-}" in
  kai) module=github.com/NVIDIA/KAI-scheduler version=$KAI_VERSION dir=deployments/kai-scheduler/crds ;;
  kueue) module=sigs.k8s.io/kueue version=$KUEUE_VERSION dir=config/components/crd/bases ;;
  *) echo "usage: $0 kai|kueue" >&2; exit 2 ;;
esac
CACHE=${GITOPS_SCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gitops-sched}/target-crds/$1-v$version
export GOFLAGS=-mod=mod GOTOOLCHAIN=local

if ! compgen -G "$CACHE/*.yaml" >/dev/null; then
  echo "target-crds: downloading $module@v$version" >&2
  json=$(go mod download -json "$module@v$version" || true)
  src=$(sed -n 's/.*"Dir": "\(.*\)",*/\1/p' <<<"$json")
  if [ -z "$src" ]; then
    echo "target-crds: go mod download $module@v$version failed: $(sed -n 's/.*"Error": "\(.*\)",*$/\1/p' <<<"$json")" >&2
    exit 1
  fi
  mkdir -p "${CACHE%/*}"
  tmp=$(mktemp -d "${CACHE%/*}/.tmp.XXXXXX")
  cp "$src/$dir"/*.yaml "$tmp/"
  chmod u+w "$tmp"/*.yaml
  rm -rf "$CACHE" && mv "$tmp" "$CACHE"  # whole or not at all
fi
echo "$CACHE"
