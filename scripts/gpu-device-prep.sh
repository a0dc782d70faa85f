#!/usr/bin/env bash
# Prepares this checkout for a `device run` on the lent NVIDIA host (docs/performance.md, "First GPU run").
#
#   bash scripts/gpu-device-prep.sh aside     # glvnd debs into .gl/, the big test-only folders set aside
#   bash scripts/gpu-device-prep.sh restore   # the folders back, tracked again, exactly as before
#
# Why: (1) the host's NVIDIA Vulkan ICD (libGLX_nvidia.so.0) needs glvnd, which the host lacks: Dawn then finds no
# driver. Carry .gl and begin the command with: for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig;
# (2) the device takes at most 64 MiB of working tree and the tracked golden fixtures and demo-training state are
# 70 MiB on their own (the gpu-kit needs neither): `aside` moves them to $ASIDE (untracked, excluded), `restore`
# brings them back. Nothing is committed either way; run `restore` before any commit.
set -euo pipefail
cd "$(dirname "$0")/.."
ASIDE=${ASIDE:-/tmp/kiln-device-aside}
BIG=(test/fixtures/golden tools/train-demo/state)
case "${1:-}" in
  aside)
    grep -qx '/.gl/' .git/info/exclude || echo '/.gl/' >> .git/info/exclude
    if ! ls .gl/*.deb >/dev/null 2>&1; then
      mkdir -p .gl /tmp/amd64/partial
      o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
      apt-get "${o[@]}" update >/dev/null
      (cd .gl && apt-get "${o[@]}" download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
    fi
    [ -e "$ASIDE" ] && { echo "gpu-device-prep: $ASIDE exists (an earlier aside not restored?)"; exit 1; }
    mkdir -p "$ASIDE"
    cp .git/info/exclude "$ASIDE/exclude"
    for d in "${BIG[@]}"; do
      git rm -r -q --cached "$d"
      mkdir -p "$ASIDE/$(dirname "$d")" && mv "$d" "$ASIDE/$d"
      echo "/$d/" >> .git/info/exclude
    done
    echo "gpu-device-prep: tracked files now $(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1) bytes; run with carry [\".gpukit\", \".gl\"], then restore" ;;
  restore)
    [ -d "$ASIDE" ] || { echo "gpu-device-prep: nothing set aside at $ASIDE"; exit 1; }
    for d in "${BIG[@]}"; do mv "$ASIDE/$d" "$d"; done
    cp "$ASIDE/exclude" .git/info/exclude
    git reset -q -- "${BIG[@]}"
    rm -rf "$ASIDE"
    git status --short -- "${BIG[@]}" | head -3
    echo "gpu-device-prep: restored" ;;
  *) echo "usage: bash scripts/gpu-device-prep.sh aside|restore"; exit 2 ;;
esac
