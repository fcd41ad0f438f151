/* reports/model/comparison: the names of a comparison's conclusions (see comparison.h). */
#include "comparison.h"

const char *pl_compare_kind_name(pl_compare_kind_t k) {
    switch (k) {
    case PL_COMPARE_RETENTION: return "allocator-retention";
    case PL_COMPARE_LEAK: return "leak";
    case PL_COMPARE_OUTSIDE_HEAP: return "outside-heap";
    case PL_COMPARE_NO_GROWTH: return "no-growth";
    default: return "inconclusive";
    }
}
