#!/usr/bin/env bash
# Builds the sandbox's real components (etcd, Kubernetes control plane, kwok, the IMDS mock, the
# SQS server, helm) from the pinned modules under tools/, into a cache outside the checkout.
#
#   hack/tools.sh            build what is missing, then print the bin directory
#   hack/tools.sh --dir      print the bin directory only (nothing is built)
#
# Each tool lands in $CACHE/build/<tool>-<version>-<hash of its go.mod and go.sum>/, so a warm run
# rebuilds nothing and a changed pin rebuilds only that tool. $CACHE/bin-<hash>/ holds links to the
# binaries of exactly this checkout's pins. CI clones afresh, so the cache must live outside it.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${LIFEBOAT_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lifeboat-tools}
goversion=$(go env GOVERSION)

# tool directory | version | binary name | package
tools=(
  "etcd|v3.6.16|etcd|go.etcd.io/etcd/server/v3"
  "kube|v1.36.3|kube-apiserver|k8s.io/kubernetes/cmd/kube-apiserver"
  "kube|v1.36.3|kube-controller-manager|k8s.io/kubernetes/cmd/kube-controller-manager"
  "kube|v1.36.3|kube-scheduler|k8s.io/kubernetes/cmd/kube-scheduler"
  "kube|v1.36.3|kubectl|k8s.io/kubernetes/cmd/kubectl"
  "kwok|v0.8.0|kwok|sigs.k8s.io/kwok/cmd/kwok"
  "imds|v1.12.0|ec2-metadata-mock|github.com/aws/amazon-ec2-metadata-mock/cmd"
  "goaws|v0.5.4|goaws|github.com/Admiral-Piett/goaws/app/cmd"
  "helm|v3.17.3|helm|helm.sh/helm/v3/cmd/helm"
)

key_of() { # tool dir -> short hash of its pins and the Go toolchain
  cat "$root/tools/$1/go.mod" "$root/tools/$1/go.sum" <(echo "$goversion") | sha256sum | cut -c1-12
}

bin_dir() {
  local all=""
  for t in "${tools[@]}"; do IFS='|' read -r dir ver name pkg <<<"$t"; all+="$name-$ver-$(key_of "$dir") "; done
  echo "$cache/bin-$(echo "$all" | sha256sum | cut -c1-12)"
}

if [ "${1:-}" = "--dir" ]; then bin_dir; exit 0; fi

bin=$(bin_dir)
mkdir -p "$bin" "$cache/build"
for t in "${tools[@]}"; do
  IFS='|' read -r dir ver name pkg <<<"$t"
  out="$cache/build/$name-$ver-$(key_of "$dir")"
  if [ ! -x "$out/$name" ]; then
    echo "building $name $ver ..." >&2
    start=$(date +%s)
    ldflags="-s -w"
    if [ "$dir" = kube ]; then
      minor=${ver#v1.}; minor=${minor%%.*}
      ldflags+=" -X k8s.io/component-base/version.gitVersion=$ver -X k8s.io/component-base/version.gitMajor=1"
      ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
    fi
    mkdir -p "$out.tmp"
    # -p 2: two cores; the Kubernetes and AWS packages need several GB each to compile.
    (cd "$root/tools/$dir" && CGO_ENABLED=0 go build -p 2 -trimpath -ldflags "$ldflags" -o "$out.tmp/$name" "$pkg")
    if [ "$name" = kwok ]; then # kwok refuses to start without stages; they ship in its module
      moddir=$(cd "$root/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
      mkdir -p "$out.tmp/stages"
      for s in node/fast node/heartbeat-with-lease pod/fast; do
        for f in "$moddir/kustomize/stage/$s"/*.yaml; do
          [ "$(basename "$f")" = kustomization.yaml ] && continue
          cp "$f" "$out.tmp/stages/${s//\//-}-$(basename "$f")"
        done
      done
      chmod -R u+w "$out.tmp/stages"
    fi
    rm -rf "$out" && mv "$out.tmp" "$out"
    echo "built $name $ver in $(( $(date +%s) - start ))s" >&2
  fi
  ln -sfn "$out/$name" "$bin/$name"
  [ -d "$out/stages" ] && ln -sfn "$out/stages" "$bin/kwok-stages"
done
echo "$bin"
