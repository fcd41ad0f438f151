/* Seed for fuzz_symbols: a small shared object with global and static functions (a valid .symtab and notes). */
static int helper(int x) { return x * 7 + 3; }
int seed_entry(int x);
int seed_entry(int x) { return helper(x) - 1; }
