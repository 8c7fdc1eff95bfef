// Output files are written whole or not at all, and never replace what is not a regular file.
#include "sim/core/output_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/core/error.h"

namespace zerosim {
namespace {
namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(outputFile, RegularFilesAppearOnlyOnCommit) {
  const fs::path dir = fs::path(::testing::TempDir()) / "zerosim_output_file";
  fs::create_directories(dir);
  const fs::path path = dir / "out.json";
  fs::remove(path);
  {
    OutputFile f(path.string(), "--json");
    f.write("{}\n");
    EXPECT_FALSE(fs::exists(path));  // a failure before commit leaves nothing
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 0);
  write_output_file(path.string(), "{}\n", "--json");
  EXPECT_EQ(slurp(path), "{}\n");
  fs::remove_all(dir);
}

// A device is written in place: /dev/null stays a device; /dev/full refuses the bytes, which is
// an error naming the flag, never a success.
TEST(outputFile, DevicesAreWrittenInPlaceAndTheirFailuresReported) {
  if (!fs::exists("/dev/null") || !fs::exists("/dev/full"))
    GTEST_SKIP() << "no /dev/null and /dev/full on this system";
  write_output_file("/dev/null", "text\n", "--json");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  try {
    write_output_file("/dev/full", "text\n", "--trace");
    ADD_FAILURE() << "a write to /dev/full succeeded";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "--trace");
  }
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
}

}  // namespace
}  // namespace zerosim
