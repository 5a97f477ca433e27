# Script mode (cmake -P): copies the public headers into the folder the install takes them
# from, each project include rewritten from "core/tensor.h" to <sparsetrain/core/tensor.h>.
# In the source tree the folders are included from the source root; in an install they
# live under include/sparsetrain/, so a program includes <sparsetrain/...> and only
# include/ is on its path (no core/, layers/, ... of ours among its own headers).
#   -DST_SRC=<source root> -DST_GENERATED=<build>/generated -DST_OUT=<staging folder>
#   -DST_LIST=<file holding the list "core/tensor.h;..."> (paths under the source root, or
#   under ST_GENERATED)
file(READ ${ST_LIST} _headers)
file(REMOVE_RECURSE ${ST_OUT}/sparsetrain)  # a header no longer public leaves the install
foreach(_h ${_headers})
  if(EXISTS ${ST_GENERATED}/${_h})
    file(READ ${ST_GENERATED}/${_h} _text)
  else()
    file(READ ${ST_SRC}/${_h} _text)
  endif()
  string(REGEX REPLACE
         "#include \"((core|layers|models|data|optim|comm|sparsify|train)/[^\"]+)\""
         "#include <sparsetrain/\\1>" _text "${_text}")
  file(WRITE ${ST_OUT}/sparsetrain/${_h} "${_text}")
endforeach()
