// Word-level corpora: the PTB/WikiText reader, the fortunes tokeniser and split,
// batchify / shards / BPTT windows, and errors naming the missing file.
#include "data/text_corpus.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

namespace st::test {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("st_corpus_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

std::vector<std::string> words(const TextCorpus& c, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(c.vocab.word(id));
  return out;
}

TEST(TextCorpus, ReadsPtbFormatWithEosPerLineAndUnknownWords) {
  const fs::path d = fresh_dir("ptb");
  write(d / "ptb.train.txt", " the cat sat \n the <unk> ran \n");
  write(d / "ptb.valid.txt", " the dog sat \n");
  write(d / "ptb.test.txt", " cat \n\n");
  const TextCorpus c = load_text_corpus(d);
  EXPECT_EQ(words(c, c.train), (std::vector<std::string>{"the", "cat", "sat", "<eos>", "the",
                                                         "<unk>", "ran", "<eos>"}));
  // "dog" is not in train's vocabulary; an empty line still gives <eos> (PyTorch's reader).
  EXPECT_EQ(words(c, c.valid), (std::vector<std::string>{"the", "<unk>", "sat", "<eos>"}));
  EXPECT_EQ(words(c, c.test), (std::vector<std::string>{"cat", "<eos>", "<eos>"}));
  EXPECT_EQ(c.vocab.size(), 6);  // the cat sat <eos> <unk> ran
  EXPECT_EQ(c.vocab.word(0), "the");
  fs::remove_all(d);
}

TEST(TextCorpus, WikiTextAndPlainNames) {
  for (const auto& names :
       {std::vector<std::string>{"wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens"},
        std::vector<std::string>{"train.txt", "valid.txt", "test.txt"}}) {
    const fs::path d = fresh_dir("names");
    for (const auto& n : names) write(d / n, " = a b = \n c \n");
    const TextCorpus c = load_text_corpus(d);
    EXPECT_EQ(c.train.size(), 7u) << names[0];
    fs::remove_all(d);
  }
}

TEST(TextCorpus, MissingAndEmptyFilesAreNamed) {
  const fs::path d = fresh_dir("missing");
  write(d / "train.txt", "a b\n");
  write(d / "valid.txt", "a\n");
  try {
    load_text_corpus(d);
    FAIL() << "a missing test split must throw";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("test.txt"), std::string::npos) << msg;
    EXPECT_NE(msg.find(d.string()), std::string::npos) << msg;
  }
  write(d / "test.txt", "\n\n");
  try {
    load_text_corpus(d);
    FAIL() << "an empty test split must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test.txt"), std::string::npos) << e.what();
  }
  try {
    load_text_corpus(d / "nope");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos) << e.what();
  }
  fs::remove_all(d);
}

TEST(TextCorpus, TokenizerLowercasesSplitsPunctuationAndOverstrikes) {
  EXPECT_EQ(tokenize_line("Don't PANIC -- it's 42, ok?"),
            (std::vector<std::string>{"don't", "panic", "-", "-", "it's", "42", ",", "ok", "?"}));
  EXPECT_EQ(tokenize_line("'quoted' words'"),
            (std::vector<std::string>{"'", "quoted", "'", "words", "'"}));
  // Underlined "go" in old fortune files is "_\bg_\bo".
  EXPECT_EQ(tokenize_line("_\bg_\bo now\t"), (std::vector<std::string>{"go", "now"}));
  EXPECT_EQ(tokenize_line("caf\xc3\xa9 ol\xc3\xa9!"),
            (std::vector<std::string>{"caf\xc3\xa9", "ol\xc3\xa9", "!"}));
  EXPECT_TRUE(tokenize_line("   ").empty());
}

TEST(TextCorpus, FortunesSplitIsDeterministicByFortuneAndCapsTheVocabulary) {
  const fs::path d = fresh_dir("fortunes");
  // 20 fortunes in two files (name order: a, b); fortune k says "word<k> common".
  std::string a, b;
  for (int k = 0; k < 20; ++k) {
    std::string& f = k < 12 ? a : b;
    f += "Word" + std::to_string(k) + " common\n\n%\n";
  }
  write(d / "a", a);
  write(d / "b", b);
  write(d / "a.dat", "binary index, skipped");
  fs::create_symlink(d / "a", d / "a.u8");
  FortunesOptions o;
  o.dir = d;
  o.max_vocab = 8;
  const TextCorpus c = load_fortunes_corpus(o);
  EXPECT_EQ(c.vocab.size(), 8);
  EXPECT_EQ(c.vocab.word(0), "<unk>");
  EXPECT_EQ(c.vocab.word(1), "<eos>");
  EXPECT_EQ(c.vocab.word(2), "common");  // the most frequent word
  // Fortunes 8 and 18 validate, 9 and 19 test, the rest train (16 fortunes x 3 tokens).
  EXPECT_EQ(c.train.size(), 48u);
  EXPECT_EQ(words(c, c.valid),
            (std::vector<std::string>{"<unk>", "common", "<eos>", "<unk>", "common", "<eos>"}));
  // Capped: 5 word<k> of the 16 training ones survive (ties alphabetically: word0,
  // word1, word10, word11, word12), the others are <unk>.
  EXPECT_GE(c.vocab.find("word0"), 0);
  EXPECT_GE(c.vocab.find("word12"), 0);
  EXPECT_EQ(c.vocab.find("word13"), -1);
  // Same input, same corpus; and written files read back to the same streams.
  const TextCorpus again = load_fortunes_corpus(o);
  EXPECT_EQ(again.train, c.train);
  write_corpus_files(c, d / "out");
  const TextCorpus back = load_text_corpus(d / "out");
  EXPECT_EQ(words(back, back.train), words(c, c.train));
  EXPECT_EQ(words(back, back.valid), words(c, c.valid));
  EXPECT_EQ(words(back, back.test), words(c, c.test));
  fs::remove_all(d);
}

TEST(TextCorpus, RealFortunesPackage) {
  if (!fs::is_directory(kFortunesDir)) GTEST_SKIP() << kFortunesDir << " missing (apt fortunes)";
  const TextCorpus c = load_fortunes_corpus();
  EXPECT_EQ(c.vocab.size(), 10000);
  EXPECT_GT(c.train.size(), 300000u);
  EXPECT_GT(c.valid.size(), c.train.size() / 12);
  EXPECT_LT(c.valid.size(), c.train.size() / 6);
  EXPECT_GT(c.test.size(), c.train.size() / 12);
}

TEST(TextCorpus, BatchifyShardsAndBpttWindows) {
  std::vector<int32_t> tokens(26);
  for (int i = 0; i < 26; ++i) tokens[i] = i;
  // 4 streams of 6 rows (tokens 24, 25 dropped); column j holds tokens [6j, 6j + 6).
  const Tensor t = batchify(tokens, 4, "test");
  ASSERT_EQ(t.shape(), (Shape{6, 4}));
  const int32_t* p = t.data<int32_t>();
  EXPECT_EQ(p[0 * 4 + 1], 6);
  EXPECT_EQ(p[5 * 4 + 3], 23);
  // Rank 1 of 2 with 2 streams each: streams 2, 3 = tokens [12, 24), contiguous text.
  const Tensor s = take_streams(t, 2, 2);
  ASSERT_EQ(s.shape(), (Shape{6, 2}));
  EXPECT_EQ(s.data<int32_t>()[0], 12);
  EXPECT_EQ(s.data<int32_t>()[1], 18);
  // Windows of 4 over 6 rows: rows [0, 4) -> [1, 5), then the last row pair [4, 5) -> [5, 6).
  EXPECT_EQ(num_bptt_windows(6, 4), 2);
  BpttWindow w0 = bptt_window(t, 0, 4);
  ASSERT_EQ(w0.input.shape(), (Shape{4, 4}));
  ASSERT_EQ(w0.target.shape(), (Shape{16}));
  EXPECT_EQ(w0.target.data<int32_t>()[0], 1);  // the next token of stream 0
  EXPECT_EQ(w0.target.data<int32_t>()[1], 7);  // the next token of stream 1
  BpttWindow w1 = bptt_window(t, 4, 4);
  ASSERT_EQ(w1.input.shape(), (Shape{1, 4}));
  EXPECT_EQ(w1.target.data<int32_t>()[3], 23);
  EXPECT_THROW(batchify(tokens, 20, "tiny split"), Error);
}

}  // namespace
}  // namespace st::test
