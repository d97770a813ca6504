#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  std::printf("usage: loom <command> [options]\n");
  return argc > 1 && std::strcmp(argv[1], "--help") == 0 ? 0 : 2;
}
