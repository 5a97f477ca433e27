// MetricsWriter: one row per iteration or epoch, as CSV (header from the first row) or
// JSON lines. Rows are flushed as written, so a crash loses nothing already reported,
// and a resumed run appends to the same file.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace st {

using MetricValue = std::variant<int64_t, double, std::string>;
using MetricRow = std::vector<std::pair<std::string, MetricValue>>;

enum class MetricsFormat { Csv, JsonLines };
MetricsFormat parse_metrics_format(const std::string& s);  // "csv" | "jsonl"

class MetricsWriter {
 public:
  MetricsWriter() = default;
  // Opens `path` (append when `append` and the file exists, else truncate).
  MetricsWriter(const std::string& path, MetricsFormat format, bool append);
  ~MetricsWriter();
  MetricsWriter(MetricsWriter&& o) noexcept;
  MetricsWriter& operator=(MetricsWriter&& o) noexcept;

  void write(const MetricRow& row);

 private:
  std::FILE* file_ = nullptr;
  MetricsFormat format_ = MetricsFormat::Csv;
  bool header_written_ = false;
  std::string path_;
};

// On resume: drops the rows of `path` whose integer `column` is >= `limit` (written after
// the checkpoint the run continues from, so they will be written again). A missing file
// is left alone; the file is rewritten atomically. Rows that are not whole rows (a torn
// or zero-filled tail after a crash) are dropped too, with a note saying how many.
void truncate_metrics(const std::string& path, MetricsFormat format, const std::string& column,
                      int64_t limit);
// On resume: a note for each metrics file of `folder` in the other format than `format`
// (an earlier part of the run written with another --metrics-format).
void note_metrics_in_other_format(const std::string& folder, MetricsFormat format);

}  // namespace st
