#include "quant_cli_util.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/progress.h"
#include "engine/loaded_model.h"

namespace ferry::cli {

StatusOr<QuantInputs> LoadForQuant(const std::string& model_path, const std::string& tokenizer_path) {
  QuantInputs in;
  LoadOptions lo;
  lo.tokenizer_path = tokenizer_path;
  FERRY_ASSIGN_OR_RETURN(in.source, OpenWithTokenizer(model_path, lo));
  FERRY_ASSIGN_OR_RETURN(in.model, quant::FloatModel::Load(*in.source));
  auto tok = Tokenizer::FromMetadata(in.source->metadata());
  if (tok.ok()) in.tokenizer = std::move(*tok);
  return in;
}

namespace {

bool IsGguf(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char magic[4] = {};
  f.read(magic, 4);
  return f && std::string(magic, 4) == "GGUF";
}

}  // namespace

StatusOr<quant::CalibStats> GetCalibration(const QuantInputs& in, const CalibFlags& flags, ThreadPool& pool) {
  if (flags.calib.empty())
    return InvalidArgumentError("this method needs calibration: pass --calib TEXT (or a STATS file)");
  if (IsGguf(flags.calib)) return quant::LoadCalibStats(flags.calib);
  std::ifstream f(flags.calib, std::ios::binary);
  if (!f) return IoError("cannot open calibration text '{}'", flags.calib);
  if (!in.tokenizer)
    return InvalidArgumentError("the model has no tokenizer to read calibration text (pass --tokenizer)");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::vector<int32_t> tokens = in.tokenizer->Encode(ss.str(), true, false);
  quant::CalibOptions o;
  o.n_windows = flags.samples;
  o.ctx = flags.ctx;
  o.max_rows = flags.rows;
  o.bos = in.tokenizer->add_bos() ? in.tokenizer->bos_id() : -1;
  o.source = std::filesystem::path(flags.calib).filename().string();
  ProgressBar bar(
      "calibrating",
      std::min<int64_t>(flags.samples, static_cast<int64_t>(tokens.size()) / std::max(flags.ctx, 1)),
      StderrIsTerminal());
  o.progress = [&](int32_t done, int32_t) { bar.Update(done); };
  auto stats = quant::Calibrate(in.model, tokens, o, &pool);
  bar.Finish();
  if (stats.ok())
    std::fprintf(stderr, "ferry: calibrated on %s: %lld tokens\n", stats->Describe().c_str(),
                 static_cast<long long>(stats->n_tokens));
  return stats;
}

uint64_t FileSize(const std::string& path) {
  std::error_code ec;
  const auto s = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<uint64_t>(s);
}

}  // namespace ferry::cli
