#!/usr/bin/env bash
# Builds the real Kubernetes control plane the in-cluster tests run against, from Go modules,
# into a cache outside the repository keyed by version, and prints the folder holding the binaries.
#
#   kube-apiserver, kube-controller-manager, kubectl  k8s.io/kubernetes (staging modules pinned)
#   etcd                                               go.etcd.io/etcd/server/v3 (etcdmain)
#   kwok                                               sigs.k8s.io/kwok/cmd/kwok
#
# Only what is missing is built. KUBEBUILDER_ASSETS (setup-envtest's folder of kube-apiserver,
# etcd and kubectl) is used for the binaries it holds. Needs Go >= 1.25 and the Go module proxy.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.35.4}
ETCD_VERSION=${ETCD_VERSION:-3.6.5}
KWOK_VERSION=${KWOK_VERSION:-0.8.0}
CACHE=${GITOPS_SCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gitops-sched}/control-plane/v$K8S_VERSION
BIN=$CACHE/bin
mkdir -p "$BIN"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local

log() { echo "control-plane: $*" >&2; }

# envtest's binaries, where the user has them, are linked in instead of built
if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
  for b in kube-apiserver etcd kubectl; do
    if [ -x "$KUBEBUILDER_ASSETS/$b" ] && [ ! -e "$BIN/$b" ]; then
      ln -s "$KUBEBUILDER_ASSETS/$b" "$BIN/$b"
    fi
  done
fi

missing() { for b in "$@"; do [ -x "$BIN/$b" ] || return 0; done; return 1; }

build_kubernetes() {
  local src=$CACHE/src/kubernetes mod minor
  mkdir -p "$src"
  minor=${K8S_VERSION#*.}; minor=${minor%%.*}
  mod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  {
    echo "module gitops-sched.io/control-plane"
    echo
    grep -m1 '^go ' "$mod"
    echo
    echo "require k8s.io/kubernetes v$K8S_VERSION"
    echo
    echo "replace ("
    # every staging module k8s.io/kubernetes replaces by a folder, by its published v0.x twin
    sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 v0.'"${K8S_VERSION#*.}"'#p' "$mod"
    echo ")"
  } >"$src/go.mod"
  local pkgs=()
  for b in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  (cd "$src" && go get "${pkgs[@]/%/@v$K8S_VERSION}")
  local v=k8s.io/component-base/version cv=k8s.io/client-go/pkg/version flags="-s -w"
  for p in $v $cv; do
    flags+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    flags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  (cd "$src" && go build -trimpath -ldflags "$flags" -o "$BIN/" "${pkgs[@]}")
}

build_etcd() {
  local src=$CACHE/src/etcd
  mkdir -p "$src"
  printf 'module gitops-sched.io/etcd\n\ngo 1.24\n' >"$src/go.mod"
  printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' >"$src/main.go"
  (cd "$src" && go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" && go mod tidy &&
    go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" .)
}

want=()
for b in kube-apiserver kube-controller-manager kubectl; do missing "$b" && want+=("$b"); done
if [ ${#want[@]} -gt 0 ]; then log "building ${want[*]} v$K8S_VERSION"; build_kubernetes "${want[@]}"; fi
if missing etcd; then log "building etcd v$ETCD_VERSION"; build_etcd; fi
if missing kwok; then
  log "building kwok v$KWOK_VERSION"
  GOBIN=$BIN go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
fi
echo "$BIN"
