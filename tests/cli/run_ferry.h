// Runs the built `ferry` binary with arguments and captures its exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "test_util.h"

namespace ferry::testing {

struct CliResult {
  int code;         // exit status (-1: did not exit normally)
  std::string out;  // stdout
  std::string err;  // stderr
};

// `tag` names the stderr file in the scratch folder (not TempDir(): this also runs from
// SetUpTestSuite, outside any test).
inline CliResult RunFerryCli(const std::string& args, const std::string& tag) {
  const std::string err_file = ScratchPath(tag + "_stderr.txt");
  const std::string cmd = std::string(FERRY_BINARY_DIR) + "/bin/ferry " + args + " 2>" + err_file;
  CliResult r{-1, "", ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_file);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

}  // namespace ferry::testing
