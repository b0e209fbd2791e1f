// `ferry run --beam-width W`: beam search instead of sampling; prints every hypothesis.
#pragma once

#include <vector>

#include "core/thread_pool.h"
#include "engine/beam_search.h"
#include "engine/generator.h"
#include "engine/loaded_model.h"

namespace ferry::cli {

int RunBeamSearch(LoadedModel& lm, ThreadPool& pool, const std::vector<int32_t>& prompt,
                  const GenerateOptions& gen, BeamSearchOptions beam);

}  // namespace ferry::cli
