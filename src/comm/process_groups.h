// The groups a T x P layout needs, cut from the job's world: rank = stage * T + tensor rank,
// so a stage's tensor ranks are neighbours (one node when mpirun fills nodes in order) and a
// pipeline connects the ranks of equal tensor rank across stages (docs/scaling.md).
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace ferry::comm {

struct ProcessGroups {
  ProcessGroups() = default;
  ProcessGroups(ProcessGroups&&) = default;
  ProcessGroups& operator=(ProcessGroups&&) = default;
  ~ProcessGroups() {  // the split groups go before the world (which finalizes MPI)
    tp.reset();
    pp.reset();
    world.reset();
  }
  std::unique_ptr<Communicator> world;
  std::unique_ptr<Communicator> tp;  // this stage's tensor ranks
  std::unique_ptr<Communicator> pp;  // this tensor rank's stages
};

// The error every rank finds alike when T x P is not the job's size n (Ok otherwise).
Status CheckLayout(int n, int rank, int tensor_parallel, int pipeline_parallel);

// Errors (on every rank alike, before any collective) when T x P is not the world's size.
StatusOr<ProcessGroups> MakeProcessGroups(std::unique_ptr<Communicator> world, int tensor_parallel,
                                          int pipeline_parallel);

}  // namespace ferry::comm
