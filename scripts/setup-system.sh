#!/usr/bin/env bash
# System packages Kiln needs on a Debian 12 (bookworm) machine, CI included:
# - Mesa 25 lavapipe from bookworm-backports: the CPU Vulkan driver Dawn (npm `webgpu`) runs on where there is
#   no GPU (Debian 12's own Mesa 22 is rejected by Dawn; see docs/engine.md);
# - Chromium, for the web page's end-to-end test (playwright-core drives /usr/bin/chromium);
# - redis-server, the real Redis the many-hosts tests (test/cluster) start on a free port;
# - ffmpeg (Debian's, security-maintained): it encodes every video and decodes every uploaded clip (src/media/ffmpeg.ts
#   runs the first `ffmpeg` on PATH, or FFMPEG). npm's ffmpeg-static is not used: its install script downloads the
#   binary from GitHub, which CI and air-gapped hosts cannot reach.
# Idempotent; needs root (or sudo). sqlite comes from better-sqlite3.
set -euo pipefail
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
if ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || ! dpkg -s mesa-vulkan-drivers 2>/dev/null | grep -q '^Version: 2[5-9]'; then
  uri=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$uri" ] || uri=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list)
  echo "deb $uri bookworm-backports main" | $SUDO tee /etc/apt/sources.list.d/backports.list >/dev/null
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq -t bookworm-backports mesa-vulkan-drivers
fi
if [ "${KILN_SKIP_CHROMIUM:-0}" != 1 ] && ! command -v chromium >/dev/null; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq chromium fonts-dejavu-core
fi
if ! command -v redis-server >/dev/null; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq redis-server
fi
if ! command -v ffmpeg >/dev/null; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends ffmpeg
fi
echo "system packages ready: $(dpkg -s mesa-vulkan-drivers | awk '/^Version/{print "mesa-vulkan-drivers " $2}'), $(redis-server --version | cut -d" " -f1-3), $(ffmpeg -version | head -1 | cut -d" " -f1-3)"
