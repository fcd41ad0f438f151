/* tests/common/replay_confs.h: allocator configs that together take every path a replay can (expandable segments,
 * max_split_size and its rounding rule, garbage collection, both forms of roundup_power2_divisions), for the tests
 * and the fuzz target that hold the fast replay against the locked reference. */
#pragma once

#include <stddef.h>

static const char *const pl_test_replay_confs[] = {
    "",
    "expandable_segments:True",
    "max_split_size_mb:32",
    "garbage_collection_threshold:0.5",
    "roundup_power2_divisions:4",
    "expandable_segments:True,garbage_collection_threshold:0.6,max_split_size_mb:64",
    "roundup_power2_divisions:[256:1,512:2,>:8],max_split_size_mb:40,max_non_split_rounding_mb:10",
};
#define PL_TEST_N_REPLAY_CONFS (sizeof pl_test_replay_confs / sizeof pl_test_replay_confs[0])
