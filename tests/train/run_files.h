// Reading a run folder in tests.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace st::test {

// The "loss" column of <dir>/iterations.csv, as written (9 significant digits: exact float).
inline std::vector<std::string> logged_losses(const std::string& dir) {
  std::ifstream in(dir + "/iterations.csv");
  std::string line;
  std::getline(in, line);
  std::vector<std::string> out;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string cell;
    for (int i = 0; i < 4 && std::getline(ss, cell, ','); ++i) {
    }
    out.push_back(cell);
  }
  return out;
}

}  // namespace st::test
