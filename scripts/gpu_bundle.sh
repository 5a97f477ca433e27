#!/usr/bin/env bash
# Packs the libraries and headers scripts/gpu_check.sh builds against into one folder, for a
# GPU machine that has the CUDA toolkit, CMake and a compiler but no apt and no Debian
# development packages.
#   scripts/gpu_bundle.sh OUT_DIR          (on a Debian 12 machine with apt, like the CI one)
# Copy OUT_DIR to the GPU machine next to the repository (gpu-bundle/ at its root is found
# without being named; git ignores it) or name it there with GPU_BUNDLE=DIR.
#
# What it does: `apt-get download` of exactly the packages below (`apt-get update` first
# only when a download fails), `dpkg-deb -x` of each into OUT_DIR, then removes what the
# check never reads (documentation, static libraries other than GoogleTest's, Fortran
# bindings, the other FFTW precisions, Open MPI components that need InfiniBand/UCX/OFI
# libraries the bundle does not carry, and every Boost header the two Boost.Math includes
# do not reach). It writes
#   OUT_DIR/bundle.cmake  a CMake initial cache (cmake -C) that points every dependency the
#                         build looks for into the bundle, by paths relative to the file;
#   OUT_DIR/env.sh        sourced before building and running: PATH (mpirun), LD_LIBRARY_PATH,
#                         OPAL_PREFIX and PMIx's prefix and plugin folder (Open MPI moved
#                         out of /usr);
#   OUT_DIR/PACKAGES      the packages and versions it holds;
# and prints the size (it refuses above 48 MB) and any library a bundled binary needs that
# is neither in the bundle nor part of a base system.
#
# BLAS: the OpenMP build of BLIS stands in for OpenBLAS. The build only calls cblas_sgemm
# and openblas_set_num_threads (core/parallel.cpp); OpenBLAS's library alone is 37 MB plus
# 3 MB of libgfortran, BLIS's 12 MB, and a 1 KB archive compiled here maps
# openblas_set_num_threads onto bli_thread_set_num_threads. Inside the project's own
# parallel regions BLIS, like OpenBLAS's OpenMP build, runs one thread (no nested regions).
set -euo pipefail

out=${1:?usage: scripts/gpu_bundle.sh OUT_DIR}
limit_mb=48
arch=$(dpkg --print-architecture)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)

packages=(
  libblis4-openmp libblis-openmp-dev  # CPU GEMM (cblas_sgemm), in place of OpenBLAS
  libfftw3-single3 libfftw3-dev       # FFT sparsifier's CPU transforms (libfftw3f, fftw3.h)
  libboost1.74-dev                    # Boost.Math headers for SIDCo and Gaussian-k
  libxxhash0 libxxhash-dev            # checkpoint checksums (XXH3-64)
  libstb0 libstb-dev                  # image decoding (linked by the data library)
  libjpeg62-turbo libjpeg62-turbo-dev # JPEG decoding (linked by the data library)
  zlib1g zlib1g-dev                   # gzip (data library, Open MPI)
  libgtest-dev                        # the GPU test binaries
  libcli11-dev nlohmann-json3-dev     # the CLI's flags; metrics and trace JSON
  # Open MPI: the build links it (comm/) and `mpirun -np N` bootstraps NCCL over it.
  libopenmpi3 libopenmpi-dev openmpi-bin openmpi-common
  libpmix2 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libmunge2
)

mkdir -p "$out"
out=$(cd "$out" && pwd)
if [[ -e $out/usr ]]; then
  echo "gpu_bundle: $out already holds a bundle; give an empty or new folder" >&2
  exit 1
fi
debs=$(mktemp -d)  # the downloaded .deb files only; the bundle itself stays
trap 'rm -rf "$debs"' EXIT

echo "gpu_bundle: downloading ${#packages[@]} packages"
if ! (cd "$debs" && apt-get download "${packages[@]}" >"$debs/download.log" 2>&1); then
  echo "gpu_bundle: download failed; running apt-get update once"
  apt-get update -qq
  (cd "$debs" && apt-get download "${packages[@]}" >"$debs/download.log" 2>&1) ||
    { cat "$debs/download.log"; exit 1; }
fi
: >"$out/PACKAGES"
for deb in "$debs"/*.deb; do
  dpkg-deb -x "$deb" "$out"
  dpkg-deb -f "$deb" Package Version | paste -sd' ' >>"$out/PACKAGES"
done
raw_kb=$(du -sk "$out" | cut -f1)

# --- what the check never reads ---------------------------------------------------------
lib=$out/usr/lib/$triplet
if [[ -d $out/lib ]]; then  # zlib1g's /lib: one library folder, as on a merged-/usr system
  mkdir -p "$lib"
  cp -a "$out/lib/$triplet/." "$lib/"
  rm -rf "$out/lib"
fi
rm -rf "$out/usr/share/doc" "$out/usr/share/man" "$out/usr/share/lintian" \
  "$out/usr/share/doc-base" "$out/usr/share/info" "$out/usr/share/bug"
rm -rf "$lib/fortran" "$lib"/openmpi/lib/*.mod "$lib"/openmpi/include/*.mod
find "$out" -name '*.a' ! -name 'libgtest*.a' -delete
rm -f "$lib"/libmpi_mpifh.so* "$lib"/libmpi_usempi*.so* "$lib"/liboshmem.so* \
  "$lib"/libblis-openmp/libblas.so* "$lib"/blis-openmp/libblas.so*
# FFTW: the single-precision library only.
find "$lib" -maxdepth 1 \( -name 'libfftw3.so*' -o -name 'libfftw3_*' -o -name 'libfftw3l*' \
  -o -name 'libfftw3q*' -o -name 'libfftw3f_*' \) -delete
rm -rf "$out/usr/bin/fftw"* "$lib/cmake/fftw3"* "$lib/pkgconfig/fftw3"[lq]*.pc
# Open MPI components whose libraries (UCX, libfabric, verbs, PSM, netlink, OpenSHMEM) the
# bundle does not carry: Open MPI would only warn and skip them.
mca=$lib/openmpi/lib/openmpi3
if [[ -d $mca ]]; then
  for f in "$mca"/*.so; do
    if objdump -p "$f" | awk '$1 == "NEEDED" {print $2}' |
      grep -qE '^lib(ucp|ucs|uct|fabric|ibverbs|psm|psm2|psm_infinipath|nl-3|nl-route-3|oshmem|mca_common_(ucx|ofi|verbs))\.'; then
      rm -f "$f" "${f%.so}.la"
    fi
  done
  rm -f "$lib"/libmca_common_{ucx,ofi,verbs}.so* "$lib"/libmpi_java.so* "$lib"/libmpi_mpifh* \
    "$out"/usr/bin/{oshmem_info,oshrun,shmemrun,mpijavac,mpijavac.pl} \
    "$lib"/openmpi/lib/libmpi_java.so
fi
# The names Debian's alternatives system would give the Open MPI programs (postinst work).
for p in mpicc mpicxx mpic++ mpirun mpiexec; do
  [[ -e $out/usr/bin/$p.openmpi ]] && ln -sf "$p.openmpi" "$out/usr/bin/$p"
done
# Boost: only the headers the two Boost.Math includes reach (g++ -M), plus boost/config.
boost_inc=$out/usr/include/boost
if [[ -d $boost_inc ]]; then
  keep=$(mktemp)
  printf '#include <boost/math/distributions/normal.hpp>\n#include <boost/math/special_functions/gamma.hpp>\n' |
    g++ -std=c++20 -O2 -DNDEBUG -fopenmp -isystem "$out/usr/include" -x c++ -M - |
    tr ' \\' '\n\n' | grep "^$out/usr/include/boost/" | sort -u >"$keep"
  find "$out/usr/include/boost/config" -type f >>"$keep"  # every compiler's and library's
  find "$boost_inc" -type f | sort | comm -23 - <(sort -u "$keep") | xargs -r rm -f
  find "$boost_inc" -depth -type d -empty -delete
  rm -f "$keep"
fi
rm -rf "$lib/cmake/Boost"* "$lib/cmake/boost"*
# Links: absolute targets made relative inside the bundle; links into what was removed go.
find "$out" -type l | while read -r link; do
  target=$(readlink "$link")
  if [[ $target == /* ]]; then
    rm -f "$link"
    target=${target/#\/lib\//\/usr\/lib\/}  # zlib1g's /lib moved above
    [[ -e $out$target ]] && ln -s "$(realpath --relative-to="$(dirname "$link")" "$out$target")" "$link"
  fi
done
find "$out" -xtype l -delete

# --- openblas_set_num_threads over BLIS -------------------------------------------------
blis=$lib/blis-openmp
cat >"$debs/openblas_shim.c" <<'C'
/* openblas_set_num_threads for a build linked against BLIS (scripts/gpu_bundle.sh). */
void bli_thread_set_num_threads(long n);
void openblas_set_num_threads(int n) { bli_thread_set_num_threads(n); }
C
cc -O2 -fPIC -c "$debs/openblas_shim.c" -o "$debs/openblas_shim.o"
ar rcs "$blis/libst_openblas_shim.a" "$debs/openblas_shim.o"
# cblas.h as the sources include it: BLIS's, plus OpenBLAS's name for the integer type.
mkdir -p "$out/usr/include/st-blis-cblas"
cat >"$out/usr/include/st-blis-cblas/cblas.h" <<C
/* cblas.h with OpenBLAS's blasint over BLIS's cblas.h (scripts/gpu_bundle.sh). */
#ifndef ST_BLIS_CBLAS_H
#define ST_BLIS_CBLAS_H
#include "../$triplet/blis-openmp/cblas.h"
typedef f77_int blasint;
#endif
C

# --- the CMake initial cache and the environment ---------------------------------------
cat >"$out/bundle.cmake" <<CMAKE
# CMake initial cache (cmake -C) written by scripts/gpu_bundle.sh: every library the
# sparsetrain build looks for, from this folder (paths relative to this file).
get_filename_component(_b "\${CMAKE_CURRENT_LIST_DIR}" ABSOLUTE)
set(_l "\${_b}/usr/lib/$triplet")
set(_i "\${_b}/usr/include")
set(CMAKE_PREFIX_PATH "\${_b}/usr" CACHE STRING "the GPU bundle")
set(CMAKE_LIBRARY_PATH "\${_l}" CACHE STRING "the GPU bundle")
# Headers the sources include without a find step (nlohmann/json.hpp, CLI/CLI.hpp) and the
# bundle's copies of zlib.h, jpeglib.h, ... ahead of /usr/include.
# (scripts/gpu_check.sh sets these three itself, adding cuDNN's and NCCL's folders.)
foreach(_lang C CXX CUDA)
  set(CMAKE_\${_lang}_FLAGS "-isystem \${_i} -isystem \${_i}/$triplet" CACHE STRING "the GPU bundle")
endforeach()
set(OPENBLAS_INCLUDE_DIR "\${_i}/st-blis-cblas" CACHE PATH "BLIS's cblas.h with blasint")
set(OPENBLAS_LIBRARY "\${_l}/blis-openmp/libst_openblas_shim.a;\${_l}/blis-openmp/libblis.so.4"
    CACHE STRING "BLIS with openblas_set_num_threads")
set(FFTW3_INCLUDE_DIR "\${_i}" CACHE PATH "")
set(FFTW3F_LIBRARY "\${_l}/libfftw3f.so" CACHE FILEPATH "")
set(BOOST_MATH_INCLUDE_DIR "\${_i}" CACHE PATH "")
set(XXHASH_INCLUDE_DIR "\${_i}" CACHE PATH "")
set(XXHASH_LIBRARY "\${_l}/libxxhash.so" CACHE FILEPATH "")
set(STB_INCLUDE_DIR "\${_i}" CACHE PATH "")
set(STB_LIBRARY "\${_l}/libstb.so" CACHE FILEPATH "")
set(JPEG_INCLUDE_DIR "\${_i}" CACHE PATH "")
set(JPEG_LIBRARY_RELEASE "\${_l}/libjpeg.so" CACHE FILEPATH "")
set(ZLIB_INCLUDE_DIR "\${_i}" CACHE PATH "")
set(ZLIB_LIBRARY_RELEASE "\${_l}/libz.so" CACHE FILEPATH "")
set(GTest_DIR "\${_l}/cmake/GTest" CACHE PATH "")
set(CLI11_DIR "\${_b}/usr/share/cmake/CLI11" CACHE PATH "")
# Open MPI through its compiler wrapper, relocated by OPAL_PREFIX (env.sh).
set(MPI_CXX_COMPILER "\${_b}/usr/bin/mpicxx" CACHE FILEPATH "")
set(MPI_C_COMPILER "\${_b}/usr/bin/mpicc" CACHE FILEPATH "")
set(MPIEXEC_EXECUTABLE "\${_b}/usr/bin/mpiexec" CACHE FILEPATH "")
set(MPIEXEC_PROGRAM "\${_b}/usr/bin/mpiexec" CACHE FILEPATH "")
CMAKE

glibc=$(find "$out" -type f \( -name '*.so*' -o -path '*/usr/bin/*' \) -exec objdump -T {} + 2>/dev/null |
  grep -o 'GLIBC_[0-9.]*' | sort -t. -k1,1 -k2,2n -u | tail -n 1 | sed 's/GLIBC_//' || true)
cat >"$out/env.sh" <<ENV
# Written by scripts/gpu_bundle.sh; sourced by scripts/gpu_check.sh (bash).
GPU_BUNDLE_DIR=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)
GPU_BUNDLE_ARCH=$arch
GPU_BUNDLE_TRIPLET=$triplet
GPU_BUNDLE_GLIBC=$glibc  # the newest glibc symbol version a bundled library needs
export OPAL_PREFIX=\$GPU_BUNDLE_DIR/usr
export PMIX_INSTALL_PREFIX=\$GPU_BUNDLE_DIR/usr/lib/$triplet/pmix2
export PMIX_MCA_mca_base_component_path=\$GPU_BUNDLE_DIR/usr/lib/$triplet/pmix2/lib/pmix
export PATH=\$GPU_BUNDLE_DIR/usr/bin:\$PATH
export LD_LIBRARY_PATH=\$GPU_BUNDLE_DIR/usr/lib/$triplet:\$GPU_BUNDLE_DIR/usr/lib/$triplet/blis-openmp:\$GPU_BUNDLE_DIR/usr/lib/$triplet/pmix2/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
ENV

# --- report -------------------------------------------------------------------------------
# Libraries a bundled binary needs that the bundle lacks and a base system may not have.
base='^(libc|libm|libdl|libpthread|librt|libutil|libgcc_s|libstdc\+\+|libgomp|libudev|ld-linux-x86-64|ld-linux-aarch64)\.so'
have=$(find "$out" \( -type f -o -type l \) -name '*.so*' -printf '%f\n' | sort -u)
missing=$(find "$out" -type f \( -name '*.so*' -o -path '*/usr/bin/*' \) -exec sh -c \
  'objdump -p "$1" 2>/dev/null | awk '\''$1 == "NEEDED" {print $2}'\''' _ {} \; | sort -u |
  grep -vE "$base" | comm -23 - <(echo "$have") | paste -sd' ')
size_kb=$(du -sk "$out" | cut -f1)
echo "gpu_bundle: $(wc -l <"$out/PACKAGES") packages into $out"
sed 's/^/  /' "$out/PACKAGES"
echo "gpu_bundle: $((raw_kb / 1024)) MB unpacked, $((size_kb / 1024)) MB after pruning" \
  "(limit $limit_mb MB); needs glibc >= $glibc on $arch"
[[ -z $missing ]] || echo "gpu_bundle: not in the bundle (the GPU machine must have them): $missing"
if ((size_kb > limit_mb * 1024)); then
  echo "gpu_bundle: $((size_kb / 1024)) MB is over the $limit_mb MB limit" >&2
  exit 1
fi
