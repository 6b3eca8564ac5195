/* simdkernels.dll - a second stand-in "op library" whose kernels die with an
 * access violation that the CPU raises as a general-protection fault (#GP),
 * not as a page fault: on Windows such an access violation carries the access
 * address 0xffffffffffffffff, because a #GP reports no faulting address.
 * Every kernel is EXPORTED, as in opkernels.dll, so a stack walker can name
 * frames from the export table (nearest lower export).
 *
 * Built with: x86_64-w64-mingw32-gcc -O2 -fno-inline -fno-optimize-sibling-calls
 *             -shared -static -static-libgcc  (see ../build.sh)
 *
 * Kept apart from opkernels.dll on purpose: the existing dumps depend on the
 * exact TimeDateStamp/SizeOfImage of opkernels.dll and tfhost.exe.
 */
#include <windows.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KERNEL __declspec(dllexport) __attribute__((noinline))

volatile int64_t g_sink;

/* ------------------------------------------------- misaligned aligned-SSE access */
/* Eigen's classic Windows crash: a packet kernel uses aligned loads/stores
 * (movaps) on a buffer that is only 8-byte aligned.  Here the tensor buffer
 * has an 8-byte refcount header in front of its data, so the data of a
 * 64-byte-aligned block starts 8 bytes past a 16-byte boundary. */
typedef struct tensor_buffer {
    int64_t refcount;
    float data[];           /* offset 8 */
} tensor_buffer;

static const float g_bias[4] __attribute__((aligned(16))) = {0.5f, -0.5f, 0.25f, -0.25f};

KERNEL float *tensor_alloc_f32(int64_t n)
{
    tensor_buffer *b = (tensor_buffer *)_aligned_malloc(sizeof *b + (size_t)n * sizeof(float), 64);
    b->refcount = 1;
    for (int64_t i = 0; i < n; i++)
        b->data[i] = (float)i;
    return b->data;         /* 64-byte-aligned block + 8 */
}

/* x[i..i+3] += bias, one 16-byte packet at a time.  Inline asm so the
 * compiler cannot turn the aligned accesses into movups: the first movaps,
 * whose base register holds x, faults (#GP) when x is not 16-byte aligned. */
KERNEL int64_t bias_add_packet(float *x, const float *bias, int64_t n)
{
    for (int64_t i = 0; i < n; i += 4) {
        __asm__ __volatile__("movaps (%0), %%xmm0\n\t"
                             "addps  (%1), %%xmm0\n\t"
                             "movaps %%xmm0, (%0)"
                             :
                             : "r"(x + i), "r"(bias)
                             : "xmm0", "memory");
    }
    return n;
}

KERNEL int64_t bias_add_compute(float *x, int64_t n)
{
    if (n % 4)
        return -1;
    int64_t r = bias_add_packet(x, g_bias, n);
    g_sink = r;
    return r + 1;
}

/* ------------------------------------------------------ wild (freed) pointer */
typedef struct tensor_shape {
    int64_t ndim;
    int64_t dims[4];        /* dims[0] at offset 8 */
} tensor_shape;

typedef struct op_context {
    int64_t step_id;
    tensor_shape *output_shape;
    void *allocator;
    int64_t scratch[5];
} op_context;

KERNEL op_context *op_context_create(int64_t step_id)
{
    op_context *c = (op_context *)calloc(1, sizeof *c);
    c->step_id = step_id;
    c->output_shape = (tensor_shape *)calloc(1, sizeof *c->output_shape);
    return c;
}

/* What MSVC's debug heap does on free (_free_dbg with delayed freeing): the
 * block is filled with 0xDD and kept, so a later use of the stale context
 * reads 0xdddddddddddddddd from every pointer field. */
KERNEL void op_context_release(op_context *c)
{
    free(c->output_shape);
    memset(c, 0xdd, sizeof *c);
}

/* writes the output shape through ctx->output_shape: after the release the
 * field holds 0xdddddddddddddddd, a non-canonical address -> #GP */
KERNEL int64_t allocate_output(op_context *ctx, int64_t n)
{
    tensor_shape *s = ((volatile op_context *)ctx)->output_shape;
    ((volatile tensor_shape *)s)->dims[0] = 256;
    ((volatile tensor_shape *)s)->ndim = 1;
    return n;
}

KERNEL int64_t matmul_compute(op_context *ctx, int64_t n)
{
    int64_t r = allocate_output(ctx, n);
    g_sink = r;
    return r + 1;
}

BOOL WINAPI DllMain(HINSTANCE h, DWORD reason, LPVOID reserved)
{
    (void)h; (void)reason; (void)reserved;
    return TRUE;
}
