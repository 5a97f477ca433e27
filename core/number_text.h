// Numbers in messages and help texts: the shortest text that reads back as the same
// double ("0.909", "1024", "inf"), as std::to_chars writes it.
#pragma once

#include <string>

namespace st {

std::string number_text(double v);

}  // namespace st
