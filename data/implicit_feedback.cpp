#include "data/implicit_feedback.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <tuple>

#include "core/error.h"
#include "core/rng.h"

namespace st {

namespace {

// Streams of the seed: the evaluation negatives, and each epoch's training draws.
constexpr uint64_t kEvalStream = 1ull << 40;
constexpr uint64_t kEpochStream = 1ull << 41;

const char* kHeader = "userId,movieId,rating,timestamp";

struct Rating {
  int64_t user, item, time, line;
};

// An item `user` never rated, uniform over the others (rejection, as He et al.'s code).
int32_t draw_unrated(const ImplicitFeedback& d, int64_t user, Rng& rng) {
  for (;;) {
    const auto item = static_cast<int32_t>(rng.below(static_cast<uint32_t>(d.items)));
    if (!d.is_rated(user, item)) return item;
  }
}

// Holds out each user's last rating of `per_user` (sorted by time, then line) and draws the
// evaluation negatives. `per_user[u]` must be non-empty.
void split_leave_one_out(ImplicitFeedback& d, std::vector<std::vector<int32_t>>& per_user,
                         uint64_t seed) {
  d.rated.assign(static_cast<size_t>(d.users), {});
  d.test_items.assign(static_cast<size_t>(d.users), 0);
  for (int64_t u = 0; u < d.users; ++u) {
    std::vector<int32_t>& items = per_user[static_cast<size_t>(u)];
    d.test_items[static_cast<size_t>(u)] = items.back();
    for (size_t k = 0; k + 1 < items.size(); ++k) {
      d.train_users.push_back(static_cast<int32_t>(u));
      d.train_items.push_back(items[k]);
    }
    std::vector<int32_t>& r = d.rated[static_cast<size_t>(u)];
    r = items;
    std::sort(r.begin(), r.end());
    r.erase(std::unique(r.begin(), r.end()), r.end());
    ST_CHECK(static_cast<int64_t>(r.size()) < d.items, d.name, ": user ", u,
             " rated every item, so no negative can be drawn");
  }
  Rng rng(seed);
  rng.set_state(seed, kEvalStream);
  d.test_negatives.resize(static_cast<size_t>(d.users * kEvalNegatives));
  for (int64_t u = 0; u < d.users; ++u)
    for (int k = 0; k < kEvalNegatives; ++k)
      d.test_negatives[static_cast<size_t>(u * kEvalNegatives + k)] = draw_unrated(d, u, rng);
}

// Dense indices of `ids` in increasing id order; `ids` becomes the indices.
int64_t densify(std::vector<int64_t>& ids) {
  std::vector<int64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  for (int64_t& id : ids) id = std::lower_bound(sorted.begin(), sorted.end(), id) - sorted.begin();
  return static_cast<int64_t>(sorted.size());
}

template <typename T>
bool parse_field(const char*& p, const char* end, char stop, T& out) {
  const char* field_end = std::find(p, end, stop);
  if (field_end == p) return false;
  const auto [ptr, ec] = std::from_chars(p, field_end, out);
  if (ec != std::errc() || ptr != field_end) return false;
  p = field_end == end ? end : field_end + 1;
  return true;
}

// userId,movieId,rating,timestamp; false if the line is not that.
bool parse_rating(const std::string& line, Rating& r) {
  const char* p = line.data();
  const char* end = p + line.size();
  double rating = 0;
  if (!parse_field(p, end, ',', r.user) || !parse_field(p, end, ',', r.item) ||
      !parse_field(p, end, ',', rating) || !parse_field(p, end, '\n', r.time))
    return false;
  return p == end;
}

}  // namespace

bool ImplicitFeedback::is_rated(int64_t user, int32_t item) const {
  const std::vector<int32_t>& r = rated[static_cast<size_t>(user)];
  return std::binary_search(r.begin(), r.end(), item);
}

ImplicitFeedback read_movielens_ratings(const std::string& path, uint64_t seed) {
  std::ifstream in(path);
  ST_CHECK(in.good(), path, ": cannot open the MovieLens ratings file");
  std::string line;
  std::vector<Rating> ratings;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (number == 1) {
      ST_CHECK(line == kHeader, path, ":1: expected the header '", kHeader, "', got '", line, "'");
      continue;
    }
    if (line.empty()) continue;
    Rating r{0, 0, 0, number};
    ST_CHECK(parse_rating(line, r), path, ":", number,
             ": expected userId,movieId,rating,timestamp (whole ids and time), got '", line, "'");
    ratings.push_back(r);
  }
  ST_CHECK(!in.bad(), path, ": read error after line ", number);
  ST_CHECK(!ratings.empty(), path, ": no ratings after the header");
  std::vector<int64_t> users(ratings.size()), items(ratings.size());
  for (size_t k = 0; k < ratings.size(); ++k) {
    users[k] = ratings[k].user;
    items[k] = ratings[k].item;
  }
  ImplicitFeedback d;
  d.name = path;
  d.users = densify(users);
  d.items = densify(items);
  for (size_t k = 0; k < ratings.size(); ++k) {
    ratings[k].user = users[k];
    ratings[k].item = items[k];
  }
  std::sort(ratings.begin(), ratings.end(), [](const Rating& a, const Rating& b) {
    return std::tie(a.user, a.time, a.line) < std::tie(b.user, b.time, b.line);
  });
  std::vector<std::vector<int32_t>> per_user(static_cast<size_t>(d.users));
  for (const Rating& r : ratings)
    per_user[static_cast<size_t>(r.user)].push_back(static_cast<int32_t>(r.item));
  split_leave_one_out(d, per_user, seed);
  return d;
}

ImplicitFeedback synthetic_ncf(const SyntheticNcfOptions& o) {
  ST_CHECK(o.users > 0 && o.clusters > 0 && o.items >= 2 * o.clusters && o.per_user >= 2 &&
               o.per_user < o.items / o.clusters,
           "synthetic_ncf: need users > 0, items >= 2 clusters and 2 <= per_user < items / "
           "clusters, got ",
           o.users, " users, ", o.items, " items, ", o.clusters, " clusters, ", o.per_user,
           " per user");
  ImplicitFeedback d;
  d.name = "synthetic-ncf";
  d.users = o.users;
  d.items = o.items;
  Rng rng(o.seed);
  const int64_t per_group = o.items / o.clusters;
  std::vector<std::vector<int32_t>> per_user(static_cast<size_t>(o.users));
  for (int64_t u = 0; u < o.users; ++u) {
    std::vector<int32_t>& mine = per_user[static_cast<size_t>(u)];
    const int64_t group = u % o.clusters;
    while (static_cast<int64_t>(mine.size()) < o.per_user) {
      const bool in_group = rng.uniform() < o.in_group;
      const int64_t item = in_group
                               ? group + o.clusters * rng.below(static_cast<uint32_t>(per_group))
                               : rng.below(static_cast<uint32_t>(o.items));
      const auto i = static_cast<int32_t>(item);
      if (std::find(mine.begin(), mine.end(), i) == mine.end()) mine.push_back(i);
    }
  }
  split_leave_one_out(d, per_user, o.seed);
  return d;
}

NcfExamples training_examples(const ImplicitFeedback& d, int negatives, uint64_t seed,
                              int64_t epoch) {
  ST_CHECK(negatives >= 0, "training_examples: negatives must be >= 0, got ", negatives);
  Rng rng(seed);
  rng.set_state(seed, kEpochStream + static_cast<uint64_t>(epoch));
  const size_t positives = d.train_users.size();
  const size_t total = positives * static_cast<size_t>(1 + negatives);
  NcfExamples e;
  e.users.reserve(total);
  e.items.reserve(total);
  e.labels.reserve(total);
  for (size_t k = 0; k < positives; ++k) {
    const int32_t u = d.train_users[k];
    e.users.push_back(u);
    e.items.push_back(d.train_items[k]);
    e.labels.push_back(1.0f);
    for (int j = 0; j < negatives; ++j) {
      e.users.push_back(u);
      e.items.push_back(draw_unrated(d, u, rng));
      e.labels.push_back(0.0f);
    }
  }
  // Fisher-Yates on the three columns at once (no index array: ML-20M's epoch holds
  // 100M examples).
  for (size_t k = total; k > 1; --k) {
    const size_t r = rng.below(static_cast<uint32_t>(k));
    std::swap(e.users[k - 1], e.users[r]);
    std::swap(e.items[k - 1], e.items[r]);
    std::swap(e.labels[k - 1], e.labels[r]);
  }
  return e;
}

}  // namespace st
