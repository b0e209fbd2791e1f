#include "comm/world.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "comm/local_communicator.h"
#ifdef FERRY_HAVE_MPI
#include "comm/mpi_communicator.h"
#endif

namespace ferry::comm {

bool MpiCompiledIn() {
#ifdef FERRY_HAVE_MPI
  return true;
#else
  return false;
#endif
}

int LauncherWorldSize() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* v = std::getenv(var); v && *v) return std::max(1, std::atoi(v));
  return 1;
}

StatusOr<std::unique_ptr<Communicator>> OpenWorld(const WorldOptions& options) {
  if (!(options.timeout_s > 0))
    return InvalidArgumentError("--comm-timeout must be positive seconds (got {})", options.timeout_s);
  const int launched = LauncherWorldSize();
  if (launched <= 1) return std::unique_ptr<Communicator>(std::make_unique<LocalCommunicator>());
#ifdef FERRY_HAVE_MPI
  return OpenMpiWorld(options.timeout_s);
#else
  return UnsupportedError(
      "started as one of {} ranks, but this ferry was built without MPI: install Open MPI "
      "(scripts/install-deps.sh) and configure with -DFERRY_MPI=ON",
      launched);
#endif
}

void AbortWorld(int code) {
#ifdef FERRY_HAVE_MPI
  AbortMpi(code);
#else
  (void)code;
#endif
}

}  // namespace ferry::comm
