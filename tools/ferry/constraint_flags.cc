#include "constraint_flags.h"

#include <fstream>
#include <sstream>

#include "engine/constraint_vocab.h"

namespace ferry::cli {

namespace {
StatusOr<std::string> ReadText(const std::string& path, const std::string& flag) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFoundError("{} {}: cannot open the file", flag, path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

void ConstraintFlags::Add(CLI::App* cmd, const std::string& schema_flag) {
  schema_flag_ = schema_flag;
  auto* s = cmd->add_option(schema_flag, schema_file, "constrain the output to this JSON Schema (file)");
  auto* g = cmd->add_option("--grammar", grammar_file,
                            "constrain the output to this GBNF grammar (file, llama.cpp syntax)");
  auto* r = cmd->add_option("--regex", regex, "constrain the output to this regular expression");
  s->excludes(g)->excludes(r);
  g->excludes(r);
  cmd->add_option("--json-max-whitespace", max_whitespace, "longest whitespace run inside constrained JSON")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
}

StatusOr<std::optional<constraint::ConstraintSpec>> ConstraintFlags::ToSpec() const {
  using Kind = constraint::ConstraintSpec::Kind;
  constraint::ConstraintSpec spec;
  spec.json.max_whitespace = max_whitespace;
  std::string flag;
  if (!schema_file.empty()) {
    flag = schema_flag_ + " " + schema_file;
    spec.kind = Kind::kJsonSchema;
    FERRY_ASSIGN_OR_RETURN(spec.text, ReadText(schema_file, schema_flag_));
  } else if (!grammar_file.empty()) {
    flag = "--grammar " + grammar_file;
    spec.kind = Kind::kGbnf;
    FERRY_ASSIGN_OR_RETURN(spec.text, ReadText(grammar_file, "--grammar"));
  } else if (!regex.empty()) {
    flag = "--regex";
    spec.kind = Kind::kRegex;
    spec.text = regex;
  } else {
    return std::optional<constraint::ConstraintSpec>();
  }
  // Compile once here so a bad schema fails before the model loads, naming the flag.
  if (auto p = constraint::CompileSpec(spec); !p.ok())
    return InvalidArgumentError("{}: {}", flag, p.status().message());
  return std::optional<constraint::ConstraintSpec>(std::move(spec));
}

StatusOr<std::shared_ptr<const constraint::CompiledGrammar>> ConstraintFlags::Compile(
    const std::optional<constraint::ConstraintSpec>& spec, const Tokenizer& tokenizer) {
  if (!spec) return std::shared_ptr<const constraint::CompiledGrammar>();
  FERRY_ASSIGN_OR_RETURN(constraint::Program program, constraint::CompileSpec(*spec));
  return constraint::CompiledGrammar::Create(std::move(program), ConstraintVocabulary(tokenizer));
}

}  // namespace ferry::cli
