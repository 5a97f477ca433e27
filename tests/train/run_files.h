// Reading a run folder in tests.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace st::test {

// A column of a CSV file with a header row, as written (so tests compare the digits);
// empty when the header has no such column.
inline std::vector<std::string> csv_column(const std::string& file, const std::string& name) {
  std::ifstream in(file);
  std::string header, line;
  std::getline(in, header);
  int index = 0, at = -1;
  std::stringstream hs(header);
  for (std::string cell; std::getline(hs, cell, ','); ++index)
    if (cell == name) at = index;
  std::vector<std::string> values;
  if (at < 0) return values;
  while (std::getline(in, line)) {
    std::stringstream ls(line);
    std::string cell;
    for (int i = 0; std::getline(ls, cell, ','); ++i)
      if (i == at) values.push_back(cell);
  }
  return values;
}

// A column of <dir>/iterations.csv, the run's per-step metrics.
inline std::vector<std::string> run_column(const std::string& dir, const std::string& name) {
  return csv_column(dir + "/iterations.csv", name);
}

// The "loss" column of <dir>/iterations.csv, as written (9 significant digits: exact float).
inline std::vector<std::string> logged_losses(const std::string& dir) {
  return run_column(dir, "loss");
}

}  // namespace st::test
