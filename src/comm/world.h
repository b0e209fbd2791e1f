// The job's group of ranks. Under mpirun (Open MPI sets OMPI_COMM_WORLD_SIZE) with more than
// one rank: MPI's world, initialized here once; otherwise a LocalCommunicator. A build without
// MPI (-DFERRY_MPI=OFF, or no MPI found) refuses a multi-rank launch with a message saying so.
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace ferry::comm {

struct WorldOptions {
  // A call that has not completed after this many seconds fails (a peer died, stopped or lost
  // its link): the job then ends instead of hanging. `--comm-timeout` on the CLI.
  double timeout_s = 60;
};

bool MpiCompiledIn();
// The number of ranks the launcher started (1 when not launched by mpirun).
int LauncherWorldSize();
// Every communicator split from the world must be destroyed before it (MPI is finalized with it).
StatusOr<std::unique_ptr<Communicator>> OpenWorld(const WorldOptions& options);
// Ends every rank of the job with `code` (MPI_Abort) after a failure that left peers waiting;
// returns without doing anything when MPI is not running.
void AbortWorld(int code);

}  // namespace ferry::comm
