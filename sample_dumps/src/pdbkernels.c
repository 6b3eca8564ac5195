/* pdbkernels.dll - an "op library" built with clang + lld for the mingw target
 * with a CodeView PDB (-gcodeview -Wl,--pdb=pdbkernels.pdb).
 *
 * The recursion runs through STATIC functions (parse_value -> parse_list ->
 * parse_item -> parse_value): they are neither exported nor in a COFF symbol
 * table (lld writes none for a PDB build), so only the PDB's procedure
 * records (S_LPROC32) can name them; the exported entry points are also PDB
 * publics (S_PUB32).  The fail-fast is raised from a static function too.
 */
#include <stdint.h>

#define KERNEL __declspec(dllexport) __attribute__((noinline))
#define NOINLINE __attribute__((noinline))

volatile int64_t g_pdb_sink;

/* ----------------------------------------------- recursion through statics */
static int64_t parse_value(const char *text, int64_t depth);

NOINLINE static int64_t parse_item(const char *text, int64_t depth)
{
    volatile char scratch[72];
    scratch[depth % 72] = text[0];
    return parse_value(text, depth + 1) + scratch[depth % 72];
}

NOINLINE static int64_t parse_list(const char *text, int64_t depth)
{
    volatile char scratch[136];
    scratch[depth % 136] = (char)depth;
    return parse_item(text, depth + 1) + scratch[depth % 136];
}

NOINLINE static int64_t parse_value(const char *text, int64_t depth)
{
    volatile char scratch[40];
    scratch[depth % 40] = text[0];
    if (text[0] == '[')
        return parse_list(text, depth + 1) + scratch[depth % 40];
    return scratch[depth % 40];
}

KERNEL int64_t parse_document(const char *text)
{
    int64_t r = parse_value(text, 0);
    g_pdb_sink = r;
    return r;
}

/* ---------------------------------------------------- fail-fast in a static */
static __inline__ __attribute__((always_inline, noreturn)) void fast_fail(unsigned code)
{
    __asm__ __volatile__("int $0x29" : : "c"(code) : "memory");
    __builtin_unreachable();
}

NOINLINE static void shape_check_failed(int64_t rank)
{
    g_pdb_sink = rank;
    fast_fail(7); /* FAST_FAIL_FATAL_APP_EXIT: what abort() / a failed CHECK ends in */
}

KERNEL int64_t validate_shape(int64_t rank)
{
    if (rank != 4)
        shape_check_failed(rank);
    g_pdb_sink = rank;
    return rank;
}
