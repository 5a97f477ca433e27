// Word-level text corpora for language modelling, in the Penn Treebank / WikiText format
// (Mikolov et al. 2010; Merity et al. 2016): whitespace-separated tokens, one sentence per
// line, each line closed by an `<eos>` token, rare words already replaced by `<unk>`.
// The vocabulary comes from the training split; words of valid/test outside it become
// `<unk>`. batchify() and bptt_window() cut a token stream the way the PyTorch
// word_language_model example does (and Zaremba et al. 2014 train): B contiguous streams
// side by side, read in windows of `bptt` steps whose targets are the next tokens.
//
// Debian's `fortunes` package (plain English text under /usr/share/games/fortunes) is the
// corpus available on every machine here: load_fortunes_corpus() tokenises it, splits it
// deterministically into train/valid/test by fortune and caps the vocabulary;
// write_corpus_files() saves that split in the PTB format so other tools (the PyTorch
// peer in bench/) read exactly the same data.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace st {

inline constexpr const char* kEos = "<eos>";
inline constexpr const char* kUnk = "<unk>";
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

class Vocabulary {
 public:
  // Adds `word` if new; returns its id.
  int32_t add(const std::string& word);
  // The id of `word`, or -1.
  int32_t find(const std::string& word) const;
  // The id of `word`, or of <unk> for an unknown word (which must then exist).
  int32_t id_or_unk(const std::string& word) const;
  const std::string& word(int32_t id) const { return words_.at(id); }
  int64_t size() const { return static_cast<int64_t>(words_.size()); }
  const std::vector<std::string>& words() const { return words_; }

 private:
  std::vector<std::string> words_;
  std::unordered_map<std::string, int32_t> ids_;
};

struct TextCorpus {
  std::string name;  // for logs and errors, e.g. "fortunes (/usr/share/games/fortunes)"
  Vocabulary vocab;
  std::vector<int32_t> train, valid, test;
};

// Reads a folder holding the three splits in PTB format, under the names of PTB
// (ptb.train.txt, ptb.valid.txt, ptb.test.txt), WikiText (wiki.train.tokens,
// wiki.valid.tokens, wiki.test.tokens) or plain train.txt/valid.txt/test.txt. Every line,
// empty ones included, gives its tokens followed by <eos> (as the PyTorch example reads
// them). The vocabulary lists train's words in order of first appearance, then <unk> if
// train has none. A missing folder or split, or an empty training split, throws naming it.
TextCorpus load_text_corpus(const std::filesystem::path& dir);

struct FortunesOptions {
  std::filesystem::path dir = kFortunesDir;
  int64_t max_vocab = 10000;  // including <unk> and <eos>; rarer words become <unk>
  int valid_every = 10;       // fortune k goes to valid when k % valid_every == valid_every - 2,
                              // to test when k % valid_every == valid_every - 1, else train
};

// The fortunes corpus: every plain-text fortune file of the folder in name order (the
// .dat/.u8 index files and links are skipped), fortunes separated by lines holding only
// "%", numbered in that order and split by FortunesOptions::valid_every (80/10/10 by
// default). Lines are tokenised by tokenize_line(); empty lines are dropped. The
// vocabulary keeps the max_vocab - 2 most frequent training words (ties alphabetically)
// plus <unk> and <eos>, ids in that order after <unk> = 0 and <eos> = 1.
TextCorpus load_fortunes_corpus(const FortunesOptions& options = {});

// The corpora the language model's --dataset names: "fortunes" (load_fortunes_corpus,
// the default) and those read from --data-dir by load_text_corpus ("ptb", "wikitext2"
// or "wikitext-2", "text").
inline const std::vector<std::string>& text_corpus_names() {
  static const std::vector<std::string> names = {"fortunes", "ptb", "wikitext2", "wikitext-2",
                                                 "text"};
  return names;
}

// Lowercased words and punctuation of one line of plain text: letters, digits, bytes of
// UTF-8 sequences and apostrophes between letters form words; every other visible
// character is a token of its own. Terminal overstriking ("_\bx", "x\bx" in old fortune
// files) keeps the last character written.
std::vector<std::string> tokenize_line(const std::string& line);

// Writes train.txt, valid.txt and test.txt (PTB format: a line per <eos>) into dir, so
// load_text_corpus(dir) reads the same token streams back.
void write_corpus_files(const TextCorpus& corpus, const std::filesystem::path& dir);

// int32 [rows, streams]: column j is tokens[j * rows, (j + 1) * rows), rows =
// tokens.size() / streams (the tail that does not fill a row is dropped). Throws when
// there are fewer tokens than streams x 2.
Tensor batchify(const std::vector<int32_t>& tokens, int64_t streams, const std::string& what);

// Columns [first, first + count) of a batchified [rows, streams] tensor: rank r of P
// takes streams [r B, (r + 1) B) of a P B-stream batchify, a contiguous shard of the text.
Tensor take_streams(const Tensor& batched, int64_t first, int64_t count);

// Truncated-BPTT window starting at row i: input rows [i, i + len) and the next tokens,
// rows [i + 1, i + 1 + len) flattened, with len = min(bptt, rows - 1 - i).
struct BpttWindow {
  Tensor input;   // int32 [len, B]
  Tensor target;  // int32 [len * B]
};
BpttWindow bptt_window(const Tensor& batched, int64_t i, int64_t bptt);
// Windows per pass over `rows` rows: ceil((rows - 1) / bptt).
int64_t num_bptt_windows(int64_t rows, int64_t bptt);

}  // namespace st
