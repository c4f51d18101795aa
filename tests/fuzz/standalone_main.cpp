// Runs a fuzz target over the files given on the command line (or every file
// of the directories given), so ordinary builds replay the corpus as a test.
#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int run_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int files = 0;
  for (int i = 1; i < argc; ++i) {
    struct stat st {};
    if (stat(argv[i], &st) != 0) {
      std::fprintf(stderr, "cannot read %s\n", argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      files += run_file(argv[i]);
      continue;
    }
    DIR* d = opendir(argv[i]);
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') files += run_file(std::string(argv[i]) + "/" + e->d_name);
    }
    closedir(d);
  }
  std::printf("replayed %d input(s)\n", files);
  return files > 0 ? 0 : 1;
}
