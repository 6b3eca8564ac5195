/* storage.dll: a journal and a cache, each behind its own CRITICAL_SECTION, which
   storage_flush and storage_evict enter in opposite orders: a lock-order deadlock in
   native code, called from Python through ctypes.CDLL (src/cs_deadlock.py).

   Each function meets the other inside its first critical section (meet(): both must be
   there before either goes on), so the deadlock happens on every run, not by chance.
   The critical sections are globals (.bss): their OwningThread is in the DLL's writable
   data, where a full-memory dump has it. storage_lock() hands their addresses to the
   script for its MARKER line. */
#include <windows.h>

static CRITICAL_SECTION journal_lock;
static CRITICAL_SECTION cache_lock;
static volatile LONG inside; /* threads holding their first critical section */
static int journal_entries = 3, cache_entries;

BOOL WINAPI DllMain(HINSTANCE dll, DWORD reason, LPVOID reserved)
{
    (void)dll;
    (void)reserved;
    if (reason == DLL_PROCESS_ATTACH) {
        InitializeCriticalSection(&journal_lock);
        InitializeCriticalSection(&cache_lock);
    }
    return TRUE;
}

static void meet(void)
{
    InterlockedIncrement(&inside);
    while (inside < 2)
        Sleep(1);
}

/* the journal's entries go to the cache: journal, then cache */
__declspec(dllexport) int storage_flush(void)
{
    EnterCriticalSection(&journal_lock);
    meet();
    EnterCriticalSection(&cache_lock);
    cache_entries += journal_entries;
    journal_entries = 0;
    LeaveCriticalSection(&cache_lock);
    LeaveCriticalSection(&journal_lock);
    return cache_entries;
}

/* evicted cache entries are written to the journal: cache, then journal */
__declspec(dllexport) int storage_evict(void)
{
    EnterCriticalSection(&cache_lock);
    meet();
    EnterCriticalSection(&journal_lock);
    journal_entries += cache_entries;
    cache_entries = 0;
    LeaveCriticalSection(&journal_lock);
    LeaveCriticalSection(&cache_lock);
    return journal_entries;
}

__declspec(dllexport) CRITICAL_SECTION *storage_lock(int which)
{
    return which ? &cache_lock : &journal_lock;
}

__declspec(dllexport) LONG storage_inside(void)
{
    return inside;
}
