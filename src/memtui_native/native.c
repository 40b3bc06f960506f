/* memtui._native as one translation unit, so the compiler can inline across the parts:
 * the scanner's inner loop calls from entry.c into scan.c and tables.c for every value. */
#include "tables.c"
#include "scan.c"
#include "entry.c"
#include "parallel.c"
#include "lifetimes.c"
#include "columns.c"
#include "curves.c"
#include "allocator.c"
#include "opcodes.c"
#include "checksum.c"
#include "reach.c"
#include "module.c"
