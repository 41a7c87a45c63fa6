#!/usr/bin/env bash
# Builds Kueue's controller manager from its Go module at a pinned version into a cache
# outside the repository, with the webhook manifests it is deployed with, and prints the folder:
#
#   bin/kueue         sigs.k8s.io/kueue/cmd/kueue (go install: its go.mod has no replace)
#   webhook/          config/components/webhook/manifests.yaml (the webhook configurations)
#                     and config/components/crd/patches/webhook_in_*.yaml (CRD conversion)
#
# Its CRDs come from `hack/target-crds.sh kueue`. Only what is missing is built. Needs Go and
# the Go module proxy on the first run of a version. Nothing of Kueue's is committed here.
#
# Usage: hack/kueue.sh [--cached]   (--cached: build nothing; exit 3 when something is missing)
set -euo pipefail

KUEUE_VERSION=${KUEUE_VERSION:-0.17.0}
CACHE=${GITOPS_SCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gitops-sched}/kueue-v$KUEUE_VERSION
module=sigs.k8s.io/kueue
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local

if [ "${1:-}" = --cached ]; then
  if [ ! -x "$CACHE/bin/kueue" ] || ! compgen -G "$CACHE/webhook/*.yaml" >/dev/null; then
    echo "kueue: v$KUEUE_VERSION is not built in $CACHE: run hack/kueue.sh (make kueue)" >&2
    exit 3
  fi
  echo "$CACHE"
  exit 0
fi

if [ ! -x "$CACHE/bin/kueue" ]; then
  echo "kueue: building $module/cmd/kueue@v$KUEUE_VERSION" >&2
  mkdir -p "$CACHE/bin"
  GOBIN=$CACHE/bin go install -trimpath \
    -ldflags "-s -w -X $module/pkg/version.GitVersion=v$KUEUE_VERSION" \
    "$module/cmd/kueue@v$KUEUE_VERSION"
fi

if ! compgen -G "$CACHE/webhook/*.yaml" >/dev/null; then
  json=$(go mod download -json "$module@v$KUEUE_VERSION" || true)
  src=$(sed -n 's/.*"Dir": "\(.*\)",*/\1/p' <<<"$json")
  if [ -z "$src" ]; then
    echo "kueue: go mod download $module@v$KUEUE_VERSION failed: $(sed -n 's/.*"Error": "\(.*\)",*$/\1/p' <<<"$json")" >&2
    exit 1
  fi
  tmp=$(mktemp -d "$CACHE/.tmp.XXXXXX")
  cp "$src/config/components/webhook/manifests.yaml" "$tmp/"
  cp "$src"/config/components/crd/patches/webhook_in_*.yaml "$tmp/"
  chmod u+w "$tmp"/*.yaml
  rm -rf "$CACHE/webhook" && mv "$tmp" "$CACHE/webhook"  # whole or not at all
fi
echo "$CACHE"
