// The `sparsetrain train` flags, each declared once: a row of the table in train/flags.cpp
// names the flag and its field in TrainConfig (whose initialiser is the default) and
// states its help, its allowed values, whether every rank must agree on it, the run
// metadata key it is saved under (checkpoint and config.json), whether a resume checks
// it, and the language model's default for it. From the table come the CLI's
// registration (apps/sparsetrain.cpp), the range checks, the rank-agreement check, the
// run metadata and the language model's defaults; a new flag is a field and a row.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "train/checkpoint.h"
#include "train/config.h"

namespace st {

template <typename T>
using ConfigField = T TrainConfig::*;
template <typename T>
using LmField = T LmOptions::*;
// --betas: two numbers, TrainConfig::beta1 and beta2.
struct BetasField {
  bool operator==(const BetasField&) const = default;
};
// --sp key=value (repeatable): TrainConfig::sparsifier_params.
struct SpPairsField {
  bool operator==(const SpPairsField&) const = default;
};
using FlagField =
    std::variant<ConfigField<bool>, ConfigField<int>, ConfigField<int64_t>, ConfigField<uint64_t>,
                 ConfigField<float>, ConfigField<double>, ConfigField<std::string>, LmField<bool>,
                 LmField<int>, LmField<int64_t>, LmField<float>, BetasField, SpPairsField>;

// The values a number may take: at least `min` (above it when `open_min`) and, when
// `max` is finite, at most `max` (below it when `open_max`). Floating-point values must
// also be finite.
struct FlagRange {
  static constexpr double kUnbounded = std::numeric_limits<double>::infinity();
  double min = -kUnbounded;
  bool open_min = false;
  double max = kUnbounded;
  bool open_max = false;
  bool checked() const { return std::isfinite(min) || std::isfinite(max); }
};
FlagRange at_least(double min);
FlagRange above(double min);
FlagRange in_range(double min, bool open_min, double max, bool open_max);

// What every rank must share of a flag: nothing, its value, or only whether it was given
// (a path, which may differ per rank).
enum class Agree { no, value, given };

// Which kinds of training record a flag in their run metadata.
enum class SavedBy : unsigned { none = 0, image = 1, lm = 2, both = 3 };
// How a saved floating-point value is written: printf's %f (the older keys) or the
// shortest form that reads back the same (%.15g).
enum class SavedText { fixed, shortest };
inline constexpr const char* kSavedShortest = "%.15g";
// A floating-point value as run metadata writes it under SavedText::shortest.
std::string saved_number(double v);

// What a resume requires of a flag saved in the checkpoint: nothing, the same value, or
// the same value when the checkpoint lies mid-epoch (the flag fixes the batches' order).
enum class OnResume { free, same, same_mid_epoch };

struct FlagRow {
  std::string names;  // as CLI11 takes them: -b,--batch-size
  FlagField field;
  std::string help;
  bool show_default = true;  // --help prints the field's initial value
  bool inverted = false;     // a --no-... flag: given, it sets its bool field to false
  bool eval_too = false;     // `sparsetrain eval` takes it as well
  FlagRange range = {};
  std::vector<std::string> choices = {};  // the allowed values of a text flag (empty: any)
  Agree agree = Agree::no;
  std::string saved_as = {};  // run metadata key ("" = not saved)
  SavedBy saved_by = SavedBy::both;
  SavedText saved_text = SavedText::fixed;
  OnResume on_resume = OnResume::free;
  std::string lm_default = {};  // the value under --arch lstm when not given ("" = the same)
};

// Calls fn(field&) with the field of `row` in `c` (a TrainConfig, const or not), or
// fn(tag) for --betas and --sp.
template <typename Config, typename Fn>
void visit_field(const FlagField& field, Config& c, Fn&& fn) {
  std::visit(
      [&](auto member) {
        using M = decltype(member);
        if constexpr (std::is_same_v<M, BetasField> || std::is_same_v<M, SpPairsField>)
          fn(member);
        else if constexpr (std::is_invocable_v<M, const LmOptions&>)
          fn(c.lm.*member);
        else
          fn(c.*member);
      },
      field);
}

// The table, in the order --help lists the flags.
const std::vector<FlagRow>& train_flags();
// The --sp pairs as one "key=value key=value" string (run metadata, config.json).
std::string format_sparsifier_params(const std::map<std::string, std::string>& params);
// The flag as messages name it: -b/--batch-size (a short first name joins the long
// one), else the first name (--wd for --wd,--weight-decay).
std::string flag_label(const FlagRow& row);
// The row of a field; throws when no flag sets it.
const FlagRow& flag_of(const FlagField& field);
// The row of a flag by any of its names ("--batch-size" or "-b"); throws for none.
const FlagRow& flag_named(const std::string& name);
// Sets the row's field from text as the command line writes it ("3", "0.4", "1" for a
// flag that is given); throws naming the flag for text its field cannot hold.
void set_flag_text(TrainConfig& c, const FlagRow& row, const std::string& text);
// The flag's value as the rank-agreement check compares and prints it.
std::string flag_value_text(const FlagRow& row, const TrainConfig& c);

// --wd under --optimizer adamw when not given (PyTorch's AdamW default; adam's is 0).
inline constexpr double kAdamwWeightDecay = 0.01;

// Whether the command line gave a flag.
using FlagGiven = std::function<bool(const FlagRow&)>;
// The language model's defaults (the `lm_default` column) for the flags not given.
void apply_lm_defaults(TrainConfig& c, const FlagGiven& given);
// Throws one line for a language-model flag given with another --arch (it would be
// ignored).
void check_lm_only_flags(const TrainConfig& c, const FlagGiven& given);

// Throws st::Error naming the first flag (in table order) outside its range or choices.
void check_flag_ranges(const TrainConfig& c);
// The flags every rank must agree on, as (flag, value) pairs, in table order.
std::vector<std::pair<std::string, std::string>> agreed_flags(const TrainConfig& c);
// The run metadata of the flags saved by `task` (checkpoint metadata and config.json).
std::map<std::string, std::string> flag_metadata(const TrainConfig& c, SavedBy task);
// What a resume requires of the saved flags (`saved`: the checkpoint's metadata, `now`:
// this run's): throws naming the flag, both values and the checkpoint; a flag that fixes
// an epoch's batch order differing at a mid-epoch position adds `mid_epoch_hint` (where
// to resume instead). Keys an older checkpoint lacks are not checked.
void check_resumed_flags(const std::string& checkpoint,
                         const std::map<std::string, std::string>& saved,
                         const std::map<std::string, std::string>& now, const TrainPosition& pos,
                         const std::string& mid_epoch_hint);

}  // namespace st
