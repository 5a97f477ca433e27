#include "train/metrics.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace st {

MetricsFormat parse_metrics_format(const std::string& s) {
  if (s == "csv") return MetricsFormat::Csv;
  if (s == "jsonl" || s == "json") return MetricsFormat::JsonLines;
  ST_THROW("--metrics-format: unknown format '", s, "' (csv or jsonl)");
}

MetricsWriter::MetricsWriter(const std::string& path, MetricsFormat format, bool append)
    : format_(format), path_(path) {
  const bool exists = std::filesystem::exists(path) && std::filesystem::file_size(path) > 0;
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  ST_CHECK(file_ != nullptr, path, ": cannot open metrics file: ", std::strerror(errno));
  header_written_ = append && exists;
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

MetricsWriter::MetricsWriter(MetricsWriter&& o) noexcept {
  *this = std::move(o);
}

MetricsWriter& MetricsWriter::operator=(MetricsWriter&& o) noexcept {
  if (this != &o) {
    if (file_) std::fclose(file_);
    file_ = o.file_;
    format_ = o.format_;
    header_written_ = o.header_written_;
    path_ = std::move(o.path_);
    o.file_ = nullptr;
  }
  return *this;
}

namespace {
// Shortest text that reads back to the same double (losses compare bit for bit).
std::string number(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
std::string text(const MetricValue& v, bool json) {
  if (auto i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto d = std::get_if<double>(&v)) {
    std::string s = number(*d);
    return json && !std::isfinite(*d) ? "\"" + s + "\"" : s;
  }
  const std::string& s = std::get<std::string>(v);
  return json ? "\"" + s + "\"" : s;
}
}  // namespace

namespace {
// Counts are written as doubles ("%.9g": 1.23456789e+09 past nine digits).
bool whole(double v, int64_t& value) {
  if (!std::isfinite(v) || std::floor(v) != v || std::abs(v) > 9007199254740992.0) return false;
  value = static_cast<int64_t>(v);
  return true;
}

// The value of `column` in one data line; false when the line is not a whole row with an
// integer there (a torn or zero-filled tail after a crash, a hand edit).
bool row_value(const std::string& line, MetricsFormat format, int csv_index, size_t csv_cells,
               const std::string& column, int64_t& value) {
  if (line.find('\0') != std::string::npos) return false;
  if (format == MetricsFormat::JsonLines) {
    try {
      const nlohmann::json row = nlohmann::json::parse(line);
      if (!row.is_object() || !row.contains(column) || !row[column].is_number()) return false;
      return whole(row[column].get<double>(), value);
    } catch (const std::exception&) {
      return false;
    }
  }
  std::vector<std::string> cells;
  std::stringstream ss(line);
  for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  if (cells.size() != csv_cells) return false;
  const std::string& cell = cells[static_cast<size_t>(csv_index)];
  double v = 0;
  const auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
  return ec == std::errc() && end == cell.data() + cell.size() && whole(v, value);
}
}  // namespace

void truncate_metrics(const std::string& path, MetricsFormat format, const std::string& column,
                      int64_t limit) {
  std::ifstream in(path);
  if (!in) return;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  in.close();
  int csv_index = -1;
  size_t csv_cells = 0, first = 0;
  if (format == MetricsFormat::Csv && !lines.empty()) {
    std::stringstream header(lines[0]);
    std::string name;
    for (int i = 0; std::getline(header, name, ','); ++i, ++csv_cells)
      if (name == column) csv_index = i;
    ST_CHECK(csv_index >= 0, path, ": no column '", column, "' to cut the metrics back by");
    first = 1;
  }
  std::string kept;
  int64_t damaged = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    int64_t v = 0;
    if (i >= first) {
      if (!row_value(lines[i], format, csv_index, csv_cells, column, v)) {
        damaged += !lines[i].empty();
        continue;
      }
      if (v >= limit) continue;
    }
    kept += lines[i] + "\n";
  }
  if (damaged > 0)
    std::fprintf(stderr, "note: %s: dropped %ld damaged row(s) (not a row with a whole '%s')\n",
                 path.c_str(), static_cast<long>(damaged), column.c_str());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kept;
    ST_CHECK(out.good(), tmp, ": cannot write metrics: ", std::strerror(errno));
  }
  std::filesystem::rename(tmp, path);
}

void note_metrics_in_other_format(const std::string& folder, MetricsFormat format) {
  const char* other = format == MetricsFormat::Csv ? ".jsonl" : ".csv";
  for (const char* name : {"iterations", "epochs"}) {
    const std::filesystem::path old = std::filesystem::path(folder) / (std::string(name) + other);
    if (std::filesystem::exists(old))
      std::fprintf(stderr,
                   "note: %s holds the run so far in %s; this resume writes %s%s "
                   "(--metrics-format): the history is split over both\n",
                   folder.c_str(), old.filename().c_str(), name,
                   format == MetricsFormat::Csv ? ".csv" : ".jsonl");
  }
}

void MetricsWriter::write(const MetricRow& row) {
  if (!file_) return;
  std::string line;
  if (format_ == MetricsFormat::Csv) {
    if (!header_written_) {
      for (size_t i = 0; i < row.size(); ++i) {
        if (i) line.push_back(',');
        line.append(row[i].first);
      }
      line.push_back('\n');
      header_written_ = true;
    }
    for (size_t i = 0; i < row.size(); ++i) {
      if (i) line.push_back(',');
      line.append(text(row[i].second, false));
    }
  } else {
    line.push_back('{');
    for (size_t i = 0; i < row.size(); ++i) {
      if (i) line.push_back(',');
      line.push_back('"');
      line.append(row[i].first);
      line.append("\":");
      line.append(text(row[i].second, true));
    }
    line.push_back('}');
  }
  line += "\n";
  ST_CHECK(std::fputs(line.c_str(), file_) >= 0 && std::fflush(file_) == 0, path_,
           ": cannot write metrics: ", std::strerror(errno));
}

}  // namespace st
