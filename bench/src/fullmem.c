/* fullmem.exe - a process with a big, mostly idle heap that dies of a stack overflow.
 *
 *   fullmem.exe [MIB]      (default 4096)
 *
 * Commits MIB MiB of memory in blocks of varied size (the shape of a model's weights,
 * an allocator's arenas and a few huge tensors), writes one small header into each block
 * and leaves the rest untouched, then runs a three-function recursion (walk_graph ->
 * visit_node -> fold_node) on a worker thread with a 1 MiB stack until it overflows.
 * Run under sample_dumps/bin/dumper.exe --full, which writes the dump with
 * MiniDumpWithFullMemory on the first-chance 0xC00000FD: every committed byte is in the
 * dump (a Memory64List of several GiB), but a crash analyser needs only the crashing
 * thread's stack and the modules' unwind data from it.
 */
#include <windows.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

struct node { struct node *next; int64_t weight[24]; };

NOINLINE static int64_t visit_node(struct node *n, int64_t depth);

NOINLINE static int64_t fold_node(struct node *n, int64_t depth)
{
    volatile int64_t acc[12];
    for (int i = 0; i < 12; i++)
        acc[i] = n->weight[i] + depth;
    return visit_node(n->next, depth + 1) + acc[depth % 12];
}

NOINLINE static int64_t visit_node(struct node *n, int64_t depth)
{
    volatile int64_t scratch[6];
    scratch[depth % 6] = depth;
    return fold_node(n, depth) + scratch[depth % 6];
}

NOINLINE static int64_t walk_graph(struct node *root)
{
    volatile int64_t r = visit_node(root, 0);
    return r;
}

static DWORD WINAPI graph_worker(LPVOID arg)
{
    return (DWORD)walk_graph((struct node *)arg);
}

int main(int argc, char **argv)
{
    int64_t mib = argc > 1 ? atoll(argv[1]) : 4096;
    /* block sizes in MiB, cycled: many small arenas, some large tensors */
    static const int sizes[] = {1, 2, 4, 1, 8, 16, 1, 2, 64, 1, 4, 256};
    int64_t done = 0;
    int blocks = 0;
    for (int i = 0; done < mib; i++) {
        int64_t want = sizes[i % (sizeof sizes / sizeof sizes[0])];
        if (want > mib - done)
            want = mib - done;
        char *p = VirtualAlloc(NULL, (SIZE_T)want << 20, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
        if (!p) {
            fprintf(stderr, "fullmem: VirtualAlloc of %lld MiB failed after %lld MiB (%lu)\n",
                    (long long)want, (long long)done, GetLastError());
            return 3;
        }
        snprintf(p, 64, "block %d: %lld MiB", blocks, (long long)want);
        done += want;
        blocks++;
    }
    fprintf(stderr, "fullmem: %lld MiB committed in %d blocks\n", (long long)done, blocks);

    /* a cyclic graph: the recursion never reaches a leaf */
    static struct node ring[3];
    ring[0].next = &ring[1];
    ring[1].next = &ring[2];
    ring[2].next = &ring[0];
    HANDLE h = CreateThread(NULL, 1 << 20, graph_worker, ring, STACK_SIZE_PARAM_IS_A_RESERVATION, NULL);
    if (!h)
        return 3;
    WaitForSingleObject(h, INFINITE);
    return 0;
}
