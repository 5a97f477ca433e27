#include "data/text_corpus.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "data/file_io.h"

namespace st {

int32_t Vocabulary::add(const std::string& word) {
  auto [it, inserted] = ids_.try_emplace(word, static_cast<int32_t>(words_.size()));
  if (inserted) words_.push_back(word);
  return it->second;
}

int32_t Vocabulary::find(const std::string& word) const {
  auto it = ids_.find(word);
  return it == ids_.end() ? -1 : it->second;
}

int32_t Vocabulary::id_or_unk(const std::string& word) const {
  const int32_t id = find(word);
  if (id >= 0) return id;
  const int32_t unk = find(kUnk);
  ST_CHECK(unk >= 0, "vocabulary: word '", word, "' is unknown and there is no ", kUnk);
  return unk;
}

namespace {

std::vector<std::string> read_lines(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  ST_CHECK(in.good(), path.string(), ": cannot open (", std::strerror(errno), ")");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  ST_CHECK(!in.bad(), path.string(), ": read error");
  return lines;
}

// PTB format: each line's whitespace-separated tokens, then <eos>.
std::vector<std::vector<std::string>> read_ptb(const fs::path& path) {
  std::vector<std::vector<std::string>> out;
  for (const std::string& line : read_lines(path)) {
    std::istringstream ss(line);
    std::vector<std::string> words;
    std::string w;
    while (ss >> w) words.push_back(w);
    words.emplace_back(kEos);
    out.push_back(std::move(words));
  }
  return out;
}

std::vector<int32_t> to_ids(const std::vector<std::vector<std::string>>& lines,
                            const Vocabulary& vocab) {
  std::vector<int32_t> ids;
  for (const auto& words : lines)
    for (const std::string& w : words) ids.push_back(vocab.id_or_unk(w));
  return ids;
}

unsigned char lower(unsigned char ch) {
  return ch >= 'A' && ch <= 'Z' ? static_cast<unsigned char>(ch - 'A' + 'a') : ch;
}

bool is_word_byte(unsigned char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch >= 0x80;
}

// Applies terminal overstriking: "a\bb" prints b over a, so keep b.
std::string apply_backspaces(const std::string& line) {
  std::string out;
  for (char ch : line) {
    if (ch == '\b') {
      if (!out.empty()) out.pop_back();
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

}  // namespace

TextCorpus load_text_corpus(const fs::path& dir) {
  ST_CHECK(fs::is_directory(dir), "text corpus: --data-dir ", dir.string(),
           " is not a folder (expected train/valid/test files in PTB or WikiText format)");
  const std::string who = "text corpus";
  const fs::path train = find_one_of(who, dir, {"train.txt", "ptb.train.txt", "wiki.train.tokens"});
  const fs::path valid = find_one_of(who, dir, {"valid.txt", "ptb.valid.txt", "wiki.valid.tokens"});
  const fs::path test = find_one_of(who, dir, {"test.txt", "ptb.test.txt", "wiki.test.tokens"});
  TextCorpus c;
  c.name = "text (" + dir.string() + ")";
  const auto train_lines = read_ptb(train);
  for (const auto& words : train_lines)
    for (const std::string& w : words) c.vocab.add(w);
  c.vocab.add(kUnk);
  c.train = to_ids(train_lines, c.vocab);
  c.valid = to_ids(read_ptb(valid), c.vocab);
  c.test = to_ids(read_ptb(test), c.vocab);
  // Each line contributes at least <eos>; a split of <eos> only holds no text.
  auto words_in = [&](const std::vector<int32_t>& ids) {
    const int32_t eos = c.vocab.find(kEos);
    return std::count_if(ids.begin(), ids.end(), [&](int32_t id) { return id != eos; });
  };
  ST_CHECK(words_in(c.train) > 0, train.string(), ": the training split holds no words");
  ST_CHECK(words_in(c.valid) > 0, valid.string(), ": the validation split holds no words");
  ST_CHECK(words_in(c.test) > 0, test.string(), ": the test split holds no words");
  return c;
}

std::vector<std::string> tokenize_line(const std::string& raw) {
  const std::string line = apply_backspaces(raw);
  std::vector<std::string> out;
  std::string word;
  auto flush = [&]() {
    if (!word.empty()) out.push_back(std::move(word));
    word.clear();
  };
  for (size_t i = 0; i < line.size(); ++i) {
    const unsigned char ch = lower(static_cast<unsigned char>(line[i]));
    if (is_word_byte(ch)) {
      word.push_back(static_cast<char>(ch));
    } else if (ch == '\'' && !word.empty() && i + 1 < line.size() &&
               is_word_byte(lower(static_cast<unsigned char>(line[i + 1])))) {
      word.push_back('\'');  // don't, o'clock: an apostrophe between word characters
    } else {
      flush();
      if (ch > ' ' && ch < 0x7f) out.emplace_back(1, static_cast<char>(ch));
    }
  }
  flush();
  return out;
}

TextCorpus load_fortunes_corpus(const FortunesOptions& o) {
  ST_CHECK(fs::is_directory(o.dir), "fortunes corpus: ", o.dir.string(),
           " is not a folder (install Debian's `fortunes` package, or pass --data-dir with "
           "train/valid/test files)");
  ST_CHECK(o.max_vocab >= 3, "fortunes corpus: the vocabulary cap must be at least 3, got ",
           o.max_vocab);
  ST_CHECK(o.valid_every >= 3, "fortunes corpus: valid_every must be at least 3, got ",
           o.valid_every);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(o.dir)) {
    const std::string ext = e.path().extension().string();
    if (e.is_symlink() || !e.is_regular_file() || ext == ".dat" || ext == ".u8") continue;
    files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ST_CHECK(!files.empty(), "fortunes corpus: no fortune files in ", o.dir.string());
  // Split by fortune number k (over all files in name order).
  std::vector<std::vector<std::string>> split_lines[3];  // train, valid, test
  int64_t k = 0;
  for (const fs::path& f : files) {
    std::vector<std::vector<std::string>> fortune;
    auto close = [&]() {
      if (fortune.empty()) return;
      const int r = static_cast<int>(k % o.valid_every);
      const int split = r == o.valid_every - 2 ? 1 : r == o.valid_every - 1 ? 2 : 0;
      for (auto& l : fortune) split_lines[split].push_back(std::move(l));
      fortune.clear();
      ++k;
    };
    for (const std::string& line : read_lines(f)) {
      if (line == "%") {
        close();
        continue;
      }
      std::vector<std::string> words = tokenize_line(line);
      if (!words.empty()) fortune.push_back(std::move(words));
    }
    close();
  }
  ST_CHECK(!split_lines[0].empty() && !split_lines[1].empty() && !split_lines[2].empty(),
           "fortunes corpus: ", o.dir.string(), " holds too few fortunes (", k,
           ") for a train/valid/test split");
  // Vocabulary: the most frequent training words, ties alphabetically.
  std::map<std::string, int64_t> counts;
  for (const auto& words : split_lines[0])
    for (const std::string& w : words) ++counts[w];
  std::vector<std::pair<std::string, int64_t>> ranked(counts.begin(), counts.end());
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  TextCorpus c;
  c.name = "fortunes (" + o.dir.string() + ")";
  c.vocab.add(kUnk);
  c.vocab.add(kEos);
  for (const auto& [w, n] : ranked) {
    if (c.vocab.size() >= o.max_vocab) break;
    c.vocab.add(w);
  }
  std::vector<int32_t>* out[3] = {&c.train, &c.valid, &c.test};
  const int32_t eos = c.vocab.find(kEos);
  for (int s = 0; s < 3; ++s)
    for (const auto& words : split_lines[s]) {
      for (const std::string& w : words) out[s]->push_back(c.vocab.id_or_unk(w));
      out[s]->push_back(eos);
    }
  return c;
}

void write_corpus_files(const TextCorpus& c, const fs::path& dir) {
  fs::create_directories(dir);
  const std::pair<const char*, const std::vector<int32_t>*> splits[] = {
      {"train.txt", &c.train}, {"valid.txt", &c.valid}, {"test.txt", &c.test}};
  const int32_t eos = c.vocab.find(kEos);
  for (const auto& [name, ids] : splits) {
    const fs::path path = dir / name;
    const fs::path tmp = dir / (std::string(name) + ".tmp");
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      ST_CHECK(out.good(), tmp.string(), ": cannot write (", std::strerror(errno), ")");
      bool line_start = true;
      for (int32_t id : *ids) {
        if (id == eos) {
          out << '\n';
          line_start = true;
          continue;
        }
        if (!line_start) out << ' ';
        out << c.vocab.word(id);
        line_start = false;
      }
      if (!line_start) out << '\n';  // a split not ending in <eos> gains one on reading
      ST_CHECK(out.good(), tmp.string(), ": write failed");
    }
    fs::rename(tmp, path);
  }
}

Tensor batchify(const std::vector<int32_t>& tokens, int64_t streams, const std::string& what) {
  ST_CHECK(streams > 0, "batchify: the number of streams must be positive, got ", streams);
  const int64_t rows = static_cast<int64_t>(tokens.size()) / streams;
  ST_CHECK(rows >= 2, what, ": ", tokens.size(), " tokens are too few for ", streams,
           " streams (need at least 2 per stream; use a smaller batch size)");
  Tensor t = Tensor::empty(Shape{rows, streams}, DType::I32);
  int32_t* p = t.data<int32_t>();
  for (int64_t j = 0; j < streams; ++j)
    for (int64_t i = 0; i < rows; ++i) p[i * streams + j] = tokens[j * rows + i];
  return t;
}

Tensor take_streams(const Tensor& batched, int64_t first, int64_t count) {
  ST_CHECK(batched.rank() == 2 && batched.dtype() == DType::I32,
           "take_streams: expected an int32 [rows, streams] tensor, got ", batched.str());
  const int64_t rows = batched.dim(0), streams = batched.dim(1);
  ST_CHECK(first >= 0 && count > 0 && first + count <= streams, "take_streams: streams [", first,
           ", ", first + count, ") are outside [0, ", streams, ")");
  Tensor t = Tensor::empty(Shape{rows, count}, DType::I32);
  const int32_t* src = batched.data<int32_t>();
  int32_t* dst = t.data<int32_t>();
  for (int64_t i = 0; i < rows; ++i)
    std::memcpy(dst + i * count, src + i * streams + first, count * sizeof(int32_t));
  return t;
}

int64_t num_bptt_windows(int64_t rows, int64_t bptt) {
  ST_CHECK(bptt > 0, "--bptt must be positive, got ", bptt);
  return rows <= 1 ? 0 : (rows - 1 + bptt - 1) / bptt;
}

BpttWindow bptt_window(const Tensor& batched, int64_t i, int64_t bptt) {
  const int64_t rows = batched.dim(0), streams = batched.dim(1);
  ST_CHECK(i >= 0 && i < rows - 1, "bptt_window: start row ", i, " is outside [0, ", rows - 1, ")");
  const int64_t len = std::min(bptt, rows - 1 - i);
  BpttWindow w;
  w.input = batched.slice_flat(i * streams, Shape{len, streams});
  w.target = batched.slice_flat((i + 1) * streams, Shape{len * streams});
  return w;
}

}  // namespace st
