// Target: C++ leaks in template methods of a namespace, built without -rdynamic so dladdr names none of them: the
// report must resolve them from the executable's .symtab and demangle them in full (reports/symbols.c).
// Each step, ns::Cls<int>::grow keeps 16 arrays of 1000 ints and the Cls<std::map<...>> instance (a long demangled
// name, far over any fixed frame buffer) keeps 4 arrays of 1000 bytes. Usage: leak_cxx [STEPS=30].
#include <cstddef>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "target.h"

namespace ns {
template <typename T> struct Cls {
    std::vector<void *> kept;
    __attribute__((noinline)) void grow(std::size_t n) {
        for (std::size_t i = 0; i < n; i++) {
            char *p = new char[sizeof(T) < 8 ? 1000 * sizeof(T) : 1000];
            p[0] = 1;
            kept.push_back(p);
        }
    }
};
}  // namespace ns

using long_key_t = std::map<std::string, std::vector<std::pair<int, double>>>;

int main(int argc, char **argv) {
    int steps = arg_int(argc, argv, 1, 30);
    ns::Cls<int> a;
    ns::Cls<long_key_t> b;
    a.kept.reserve((std::size_t)steps * 16);
    b.kept.reserve((std::size_t)steps * 4);
    for (int s = 0; s < steps; s++) {
        a.grow(16);
        b.grow(4);
        step();
    }
    std::printf("leaked %zu blocks\n", a.kept.size() + b.kept.size());
    return 0;
}
