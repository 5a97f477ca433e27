// Links every public header's translation unit with the installed libraries and checks
// that the headers, the package and the library agree on the version.
#include <cstdio>
#include <cstring>

#include <sparsetrain/core/build_info.h>
#include <sparsetrain/core/version.h>
#include <sparsetrain/sparsify/registry.h>

int main() {
  const st::BuildInfo& b = st::build_info();
  if (std::strcmp(SPARSETRAIN_VERSION, EXPECTED_VERSION) != 0 || b.version != EXPECTED_VERSION) {
    std::fprintf(stderr, "version mismatch: header %s, package %s, library %s\n",
                 SPARSETRAIN_VERSION, EXPECTED_VERSION, b.version.c_str());
    return 1;
  }
  if (st::sparsifier_names().empty()) {
    std::fprintf(stderr, "the installed library has no sparsifiers\n");
    return 1;
  }
  std::printf("%d public headers compile on their own with -Wall -Wextra -Werror; %s", HEADER_COUNT,
              st::build_info_text().c_str());
  return 0;
}
