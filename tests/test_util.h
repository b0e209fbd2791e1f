// Shared test helpers: where the shared assets are, and skipping cleanly without them.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

namespace ferry::testing {

// FERRY_ASSETS if set, else ../shared/assets beside the project root.
inline std::string AssetsDir() {
  if (const char* env = std::getenv("FERRY_ASSETS"); env && *env) return env;
  return std::string(FERRY_SOURCE_DIR) + "/../shared/assets";
}
inline std::string AssetPath(const std::string& rel) {
  return AssetsDir() + "/" + rel;
}
inline bool HaveAsset(const std::string& rel) {
  return std::filesystem::exists(AssetPath(rel));
}

// This test process's scratch folder, /tmp/ferry_test_<pid>: made on first use and removed with
// everything in it when the process exits (ctest runs every test case as its own process, so
// runs never see each other's files). FERRY_KEEP_TEST_FILES=1 keeps it for debugging.
inline const std::filesystem::path& ScratchDir() {
  struct Dir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("ferry_test_" + std::to_string(getpid()));
    Dir() { std::filesystem::create_directories(path); }
    ~Dir() {
      std::error_code ec;
      if (!std::getenv("FERRY_KEEP_TEST_FILES")) std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}
// A file name in the scratch folder.
inline std::string ScratchPath(const std::string& name) {
  return (ScratchDir() / name).string();
}

// A fresh folder per test, inside the scratch folder.
inline std::string TempDir() {
  auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::filesystem::path p = ScratchDir() / (std::string(info->test_suite_name()) + "_" + info->name());
  std::filesystem::create_directories(p);
  return p.string();
}

// [start, start + n) as token ids.
inline std::vector<int32_t> Iota(int n, int start = 0) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

}  // namespace ferry::testing

// Skips the test with a clear message when an asset is missing.
#define FERRY_REQUIRE_ASSET(rel)                                                                  \
  do {                                                                                            \
    if (!::ferry::testing::HaveAsset(rel)) {                                                      \
      GTEST_SKIP() << "asset '" << (rel) << "' not found under " << ::ferry::testing::AssetsDir() \
                   << " (set FERRY_ASSETS to the shared assets folder)";                          \
    }                                                                                             \
  } while (0)
