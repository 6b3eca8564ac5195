/* nativelib.dll: a small native library a Python program calls through ctypes.
 *
 * walk_tree(node, depth) and visit_node(node, depth) recurse into each other (a cycle of
 * period 2: walk_tree follows node->left, visit_node node->right) and stop only at NULL,
 * so a tree with a cycle in it (a node that is its own child) recurses without bound.
 * Each level keeps a local buffer (256 / 192 bytes) that is filled before the call and
 * read after it returns, so neither the buffer nor the call can be optimised away and the
 * call is not a tail call: frames of 320 (walk_tree) and 240 (visit_node) bytes. Both are
 * noinline and exported (a debugger names them from the export table, without symbols):
 * with -O2 every level is a real CALL and a real frame until the thread's stack runs out.
 *
 * Build (../build.sh): x86_64-w64-mingw32-gcc -O2 -fno-optimize-sibling-calls -g0 -shared \
 *        -static-libgcc -o nativelib.dll nativelib.c
 */
typedef struct tree_node {
    struct tree_node *left;
    struct tree_node *right;
    int value;
} tree_node;

__declspec(dllexport) __attribute__((noinline)) int visit_node(const tree_node *node, int depth);

__declspec(dllexport) __attribute__((noinline)) int walk_tree(const tree_node *node, int depth)
{
    volatile unsigned char scratch[256];
    int total;
    if (!node)
        return 0;
    for (int i = 0; i < (int)sizeof(scratch); i += 16)
        scratch[i] = (unsigned char)(depth + i);
    total = visit_node(node->left, depth + 1);
    return total + scratch[depth & 0xf0] + node->value;
}

__declspec(dllexport) __attribute__((noinline)) int visit_node(const tree_node *node, int depth)
{
    volatile unsigned char scratch[192];
    int total;
    if (!node)
        return 0;
    for (int i = 0; i < (int)sizeof(scratch); i += 16)
        scratch[i] = (unsigned char)(depth ^ i);
    total = walk_tree(node->right, depth + 1);
    return total + scratch[(depth & 0x70)] + 1;
}

/* The entry point the Python program calls: the sum of a tree's values. */
__declspec(dllexport) int nl_sum_tree(const tree_node *root, int depth)
{
    return walk_tree(root, depth) + 0;
}

/* A harmless export, so the DLL has more than the one function. */
__declspec(dllexport) int nl_version(void)
{
    return 0x0102;
}
