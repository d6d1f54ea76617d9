/*
 * A stand-in bcryptprimitives.dll for running Rust test binaries under Wine.
 *
 * Rust's std (1.78 and later) takes its randomness (HashMap keys, among
 * others) from ProcessPrng in bcryptprimitives.dll. Wine 8.0 has no such
 * DLL, so the Windows loader refuses every Rust binary before main and it
 * exits with code 53 without a word. This DLL exports ProcessPrng and fills
 * the buffer from RtlGenRandom (advapi32's SystemFunction036), which Wine
 * implements. scripts/test-windows builds it with
 * x86_64-w64-mingw32-gcc and copies it into the Wine prefix; it is never
 * shipped and never used on real Windows, which has the real DLL.
 */
#include <windows.h>
#include <ntsecapi.h>

/* Same contract as Windows': fills the buffer, returns TRUE. */
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    /* RtlGenRandom takes a ULONG length; feed it in pieces that fit. */
    while (len > 0) {
        ULONG n = len > 0x80000000u ? 0x80000000u : (ULONG)len;
        if (!RtlGenRandom(data, n))
            return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}

BOOL WINAPI DllMain(HINSTANCE inst, DWORD reason, LPVOID reserved)
{
    (void)inst;
    (void)reason;
    (void)reserved;
    return TRUE;
}
