/* opkernels.dll - a stand-in "op library" whose kernels crash in the ways
 * native TensorFlow kernels crash on Windows.  Every kernel is EXPORTED so a
 * stack walker can name frames from the export table (nearest lower export).
 *
 * Built with: x86_64-w64-mingw32-gcc -O2 -fno-inline -fno-optimize-sibling-calls
 *             -shared -static -static-libgcc  (see ../build.sh)
 *
 * Recursive functions are noinline and do real work AFTER the recursive call,
 * so every level really consumes stack; each member of the visit/expand/reduce
 * cycle has a different local array so its frame size differs.
 */
#include <windows.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KERNEL __declspec(dllexport) __attribute__((noinline))

/* __fastfail: mingw-w64's intrin.h may or may not provide it; this is what
 * MSVC's intrinsic compiles to: mov ecx, code; int 29h. */
static __inline__ __attribute__((always_inline, noreturn)) void fast_fail(unsigned code)
{
    __asm__ __volatile__("int $0x29" : : "c"(code) : "memory");
    __builtin_unreachable();
}

volatile int64_t g_sink;

/* ---------------------------------------------------------------- recursion */
KERNEL int64_t expand(int64_t depth, int64_t mode);
KERNEL int64_t reduce(int64_t depth, int64_t mode);

/* mode 0: visit -> visit -> ...             (one-function recursion)
 * mode 1: visit -> expand -> reduce -> visit (three-function cycle)      */
KERNEL int64_t visit(int64_t depth, int64_t mode)
{
    volatile char scratch[40];
    scratch[depth % 40] = (char)depth;
    int64_t r = (mode == 0) ? visit(depth + 1, mode) : expand(depth + 1, mode);
    return r + scratch[(depth + 1) % 40];
}

KERNEL int64_t expand(int64_t depth, int64_t mode)
{
    volatile char scratch[232];
    scratch[depth % 232] = (char)depth;
    int64_t r = reduce(depth + 1, mode);
    return r + scratch[(depth + 3) % 232];
}

KERNEL int64_t reduce(int64_t depth, int64_t mode)
{
    volatile char scratch[136];
    scratch[depth % 136] = (char)depth;
    int64_t r = visit(depth + 1, mode);
    return r + scratch[(depth + 5) % 136];
}

/* tiny frame, for the 1,000,000+ frame benchmark dump */
KERNEL int64_t descend(int64_t depth)
{
    volatile int64_t keep = depth;
    int64_t r = descend(depth + 1);
    return r + keep;
}

/* ------------------------------------------------------------ oversized frame */
/* 4 MiB local array on a 1 MiB stack: the prologue calls ___chkstk_ms, which
 * probes page by page and hits the end of the stack before the frame exists. */
KERNEL void conv_fill(char *buf, int64_t size, int64_t value)
{
    memset(buf, (int)value, (size_t)size);
}

KERNEL int64_t conv_big_kernel(int64_t n)
{
    char buf[4 << 20];                      /* 4 MiB on the stack */
    conv_fill(buf, sizeof buf, n);
    int64_t s = 0;
    for (size_t i = 0; i < sizeof buf; i += 4096)
        s += ((volatile char *)buf)[i];
    g_sink = s;
    return s;
}

/* ------------------------------------------------------------- tree free */
typedef struct tree_node {
    struct tree_node *child;
    struct tree_node *sibling;
    int64_t payload[2];
} tree_node;

KERNEL tree_node *tree_build_chain(int64_t n)
{
    tree_node *root = NULL;
    for (int64_t i = 0; i < n; i++) {
        tree_node *t = (tree_node *)calloc(1, sizeof *t);
        t->child = root;            /* each node nests the previous one */
        t->payload[0] = i;
        root = t;
    }
    return root;
}

/* recursive free of a deeply nested tree: depth == chain length */
KERNEL int64_t tree_free(tree_node *t)
{
    if (!t)
        return 0;
    int64_t n = tree_free(t->child);
    n += tree_free(t->sibling);
    free(t);
    return n + 1;
}

/* --------------------------------------------------------------- fail-fast */
/* abort()-style: a failed CHECK ends in __fastfail(FAST_FAIL_FATAL_APP_EXIT) */
KERNEL void check_failed_abort(const char *condition)
{
    g_sink = (int64_t)(uintptr_t)condition;
    fast_fail(7); /* FAST_FAIL_FATAL_APP_EXIT */
}

KERNEL int64_t validate_inputs(int64_t ndim)
{
    if (ndim != 4)
        check_failed_abort("input.dims() == 4");
    g_sink = ndim;
    return ndim;
}

KERNEL int64_t op_compute(int64_t ndim)
{
    int64_t r = validate_inputs(ndim);
    g_sink = r;
    return r + 1;
}

/* /GS-style: the cookie check failed; MSVC's __report_gsfailure does
 * __fastfail(FAST_FAIL_STACK_COOKIE_CHECK_FAILURE). */
static volatile uint64_t g_security_cookie = 0x00002B992DDFA232ull;

KERNEL void report_gsfailure(uint64_t cookie)
{
    g_sink = (int64_t)cookie;
    fast_fail(2); /* FAST_FAIL_STACK_COOKIE_CHECK_FAILURE */
}

KERNEL int64_t gs_check_fail(const char *input, int64_t n)
{
    struct { char buf[64]; volatile uint64_t cookie; } f;
    f.cookie = g_security_cookie ^ (uint64_t)(uintptr_t)&f;
    /* unchecked copy: n > 64 smashes the cookie */
    for (int64_t i = 0; i < n; i++)
        ((volatile char *)f.buf)[i] = input[i];
    if ((f.cookie ^ (uint64_t)(uintptr_t)&f) != g_security_cookie)
        report_gsfailure(f.cookie);
    return f.buf[0];
}

/* ---------------------------------------------------------- access violations */
/* 1 MiB buffer: the heap serves it from its own virtual block, so writing past
 * the end runs into an unmapped page quickly and deterministically. */
KERNEL int64_t heap_oob_write(int64_t n)
{
    volatile char *buf = (volatile char *)malloc((size_t)n);
    for (int64_t i = 0;; i++)           /* bug: no bound check */
        buf[i] = (char)i;
    return 0;
}

typedef struct tensor {
    void *data;
    int64_t ndim;
    int64_t dims[4];
} tensor;

KERNEL int64_t null_deref(const tensor *t)
{
    /* t == NULL: reads address 0x10 */
    return ((volatile const tensor *)t)->dims[0] + 1;
}

KERNEL int64_t illegal_instruction(int64_t x)
{
    g_sink = x;
    __asm__ __volatile__("ud2");
    return x;
}

BOOL WINAPI DllMain(HINSTANCE h, DWORD reason, LPVOID reserved)
{
    (void)h; (void)reason; (void)reserved;
    return TRUE;
}
