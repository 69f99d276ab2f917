#!/usr/bin/env bash
# Downloads the Debian packages ScaleDL needs besides LibTorch and unpacks them
# into .deps/root (ignored by git), for a GPU machine that has PyTorch but no
# package registry. scripts/gpu/gpu_campaign.sh sources .deps/gpu_env.sh there.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .deps/debs .deps/root
(cd .deps/debs && apt-get download libxgboost0 libxgboost-dev xgboost libfmt9 libfmt-dev nlohmann-json3-dev libdmlc0 \
   libeigen3-dev libcli11-dev libsqlite3-dev libsqlite3-0 libgtest-dev libgmock-dev libturbojpeg0 libturbojpeg0-dev)
for f in .deps/debs/*.deb; do dpkg -x "$f" .deps/root; done
# pkg-config files name /usr as their prefix: make them relative to where they lie
sed -i 's|^\([a-z_]*\)=/usr|\1=${pcfiledir}/../../..|' .deps/root/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc
cat > .deps/gpu_env.sh <<'ENV'
# Source on the GPU machine: points CMake at the carried Debian packages and at PyTorch's LibTorch.
D=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/root
export CMAKE_PREFIX_PATH="$D/usr:$D/usr/lib/x86_64-linux-gnu/cmake:$D/usr/share:$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')"
export LD_LIBRARY_PATH="$D/usr/lib/x86_64-linux-gnu:$(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib"))'):${LD_LIBRARY_PATH:-}"
export CPATH="$D/usr/include:${CPATH:-}"
export PKG_CONFIG_PATH="$D/usr/lib/x86_64-linux-gnu/pkgconfig:${PKG_CONFIG_PATH:-}"
ENV
echo "fetch_gpu_deps: .deps/root ready ($(du -sh .deps/root | cut -f1))"
# (static sqlite and turbojpeg are left out: the build links their shared libraries.)
# The tree and .deps/ together pass the device tool's 64 MiB limit: carry the packed
# form instead (.deps-pack/, ~4 MB), which scripts/gpu/gpu_build.sh unpacks when .deps/ is absent.
mkdir -p .deps-pack
tar -C .deps --exclude=root/usr/bin --exclude=root/usr/share/doc --exclude=libsqlite3.a --exclude=libturbojpeg.a -cJf .deps-pack/root.tar.xz root gpu_env.sh
echo "fetch_gpu_deps: .deps-pack/root.tar.xz ($(du -sh .deps-pack/root.tar.xz | cut -f1)), carry .deps-pack"
