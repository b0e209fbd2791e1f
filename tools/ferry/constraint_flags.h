// Output-constraint flags: `ferry run --json-schema FILE | --grammar FILE | --regex R` and
// `ferry bench grammar --schema FILE | --grammar FILE | --regex R` (at most one).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "constraint/compiled_grammar.h"
#include "constraint/constraint.h"
#include "tokenizer/tokenizer.h"

namespace ferry::cli {

struct ConstraintFlags {
  std::string schema_file;
  std::string grammar_file;
  std::string regex;
  int32_t max_whitespace = constraint::JsonGrammarOptions{}.max_whitespace;
  // schema_flag: "--json-schema" (run) or "--schema" (bench grammar).
  void Add(CLI::App* cmd, const std::string& schema_flag);
  // nullopt when no flag is given; errors name the flag and file.
  StatusOr<std::optional<constraint::ConstraintSpec>> ToSpec() const;
  // The spec compiled over the model's vocabulary (null when no flag is given).
  static StatusOr<std::shared_ptr<const constraint::CompiledGrammar>> Compile(
      const std::optional<constraint::ConstraintSpec>& spec, const Tokenizer& tokenizer);

 private:
  std::string schema_flag_;
};

}  // namespace ferry::cli
