// shardlib.dll - a small native library that throws a C++ exception across a noexcept boundary.
//
// Built with clang for x86_64-pc-windows-msvc and lld-link (build.sh): the Microsoft C++ ABI,
// so `throw` is vcruntime140!_CxxThrowException(object, ThrowInfo) -> RaiseException(
// 0xE06D7363, params [0x19930520, object, ThrowInfo, image base]), the type is described by
// a TypeDescriptor named ".?AUShardError@@", and frames are unwound by
// vcruntime140!__CxxFrameHandler3. No MSVC headers: nothing of the STL or the CRT is included.
//
// load_shard() is noexcept: an exception may not leave it. MSVC marks such a function in its
// FuncInfo (EHFlags bit 4, FI_EHNOEXCEPT_FLAG), and the C++ runtime's frame handler calls
// std::terminate() as soon as the search phase reaches the frame with no catch for it. clang
// 14 leaves EHFlags at 1 and relies on a terminate funclet run in the unwind phase instead;
// build.sh sets the bit in clang's assembly output so that the DLL ends the way MSVC-built
// code does (see README.md for why the unwind-phase route cannot be dumped under Wine).
// load_shard_checked() is the same call without noexcept: the exception reaches its caller
// (ctypes, whose SEH filter turns any exception into OSError).
// check_shard_range() asserts like MSVC code built in release with asserts kept: a failed
// assertion calls the Universal CRT's _wassert(L"expr", L"file", line), which prints
// "Assertion failed: ..." and calls abort().

struct ShardError {  // a plain class, derived from nothing in the STL
    const char *what;
    int code;
};

extern "C" void __cdecl _wassert(const wchar_t *message, const wchar_t *file, unsigned line);

// The Microsoft C++ ABI's type_info vtable, which every TypeDescriptor points to; MSVC links it
// statically from vcruntime.lib. The runtime matches types by name, never through it.
extern "C" const void *const type_info_vftable[1] __asm__("??_7type_info@@6B@") = {nullptr};

static volatile int g_shards_loaded;

__attribute__((noinline)) static void open_shard(int index, int count)
{
    if (index < 0 || index >= count)
        throw ShardError{"shard index out of range", index};
    g_shards_loaded = g_shards_loaded + 1;
}

extern "C" __declspec(dllexport) int load_shard(int index, int count) noexcept
{
    open_shard(index, count);
    return g_shards_loaded;
}

extern "C" __declspec(dllexport) int load_shard_checked(int index, int count)
{
    open_shard(index, count);
    return g_shards_loaded;
}

#define SHARD_ASSERT(expr) \
    (void)((!!(expr)) || (_wassert(L"" #expr, L"" __FILE__, (unsigned)(__LINE__)), 0))

extern "C" __declspec(dllexport) int check_shard_range(int index, int count)
{
    SHARD_ASSERT(index >= 0 && index < count);
    return index;
}
