/* Large blocks on the kernel's 2 MiB pages.
 *
 * A cold open writes columns, tables and buffers of megabytes each, and the kernel makes
 * a 4 KiB page of each as it is first written: at 1M events on 2 cores, 39,000 faults and
 * about a tenth of the CPU. Where the kernel lends 2 MiB pages on request (transparent
 * huge pages set to "madvise", the usual default, or "always"), a block advised so takes
 * one fault per 2 MiB instead of 512.
 *
 * The kernel backs only whole, aligned 2 MiB stretches of a mapping with such pages, and it
 * places a new mapping on a 2 MiB boundary when the mapping's length is a whole number of
 * 2 MiB. glibc maps each large block on its own (scan.c, map_large_blocks) with its header
 * in front, so a large block is asked for in sizes of a whole number of 2 MiB less
 * LARGE_HEADER: the mapping then starts on a boundary and every 2 MiB of it can be one page.
 * Elsewhere (another C library, another kernel) the advice and the sizes are harmless; where
 * the base page is not 4 KiB (arm64's 16 and 64 KiB pages make the large page 32 or 512 MiB)
 * blocks are neither sized nor advised. */
#include "native.h"

#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#define HUGE_PAGE ((size_t)2 << 20)
#define BASE_PAGE ((uintptr_t)4096)
#define LARGE_HEADER 64  /* room for glibc's header before a mapped block (16 bytes) */

static int large_pages;  /* set once, by large_init, before any thread of the module runs */

void large_init(void)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    large_pages = sysconf(_SC_PAGESIZE) == (long)BASE_PAGE;
#endif
}

size_t large_bytes(size_t bytes)
{
    if (!large_pages || bytes < HUGE_PAGE || bytes > SIZE_MAX / 2) return bytes;
    return (bytes + LARGE_HEADER + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE - LARGE_HEADER;
}

void advise_large(void *data, size_t bytes)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (!large_pages || !data || bytes < HUGE_PAGE) return;
    uintptr_t start = (uintptr_t)data & ~(BASE_PAGE - 1);
    (void)madvise((void *)start, bytes + ((uintptr_t)data - start), MADV_HUGEPAGE);  /* advice: a refusal changes nothing */
#else
    (void)data;
    (void)bytes;
#endif
}

void *large_realloc(void *data, size_t bytes)
{
    void *grown = realloc(data, bytes);
    advise_large(grown, bytes);
    return grown;
}

void *large_malloc(size_t bytes)
{
    return large_realloc(NULL, large_bytes(bytes));
}

/* A block of ``bytes``, a whole number of 2 MiB, starting on a 2 MiB boundary: for a block
 * whose size is fixed (large_bytes would add to it). */
void *large_aligned(size_t bytes)
{
#if defined(__linux__)
    void *data = NULL;
    if (!large_pages || bytes < HUGE_PAGE || bytes % HUGE_PAGE) return malloc(bytes);
    if (posix_memalign(&data, HUGE_PAGE, bytes) != 0) return NULL;
    advise_large(data, bytes);
    return data;
#else
    return malloc(bytes);
#endif
}

void *large_calloc(size_t items, size_t item_size)
{
    if (item_size && items > SIZE_MAX / item_size) return NULL;
    size_t bytes = large_bytes(items * item_size);
    void *data = calloc(1, bytes);
    advise_large(data, bytes);
    return data;
}
