//! Shared by the fuzz targets: libFuzzer's `-malloc_limit_mb` for builds
//! without a sanitizer.
//!
//! libFuzzer enforces `-malloc_limit_mb` through the sanitizer's malloc
//! hooks, so a target built with `--sanitizer none` (see `fuzz/README.md`,
//! "Sanitizers") would silently allow any allocation. [`LimitedAlloc`], the
//! targets' global allocator, applies the same rule to every Rust
//! allocation: one of `-malloc_limit_mb` MiB or more (counted in whole MiB, as
//! libFuzzer does; the limit defaults to `-rss_limit_mb`, as in libFuzzer)
//! makes the target print `out-of-memory (malloc(N))` and abort, which
//! libFuzzer reports as a crash (`crash-<sha1>`, "deadly signal"). Under AddressSanitizer, libFuzzer's own hook sees the
//! allocation first (inside `malloc`, before [`LimitedAlloc`] checks its
//! size) and stops the run as `oom-<sha1>`, as before.
//!
//! Each target declares
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: mcp_framer_fuzz::LimitedAlloc = mcp_framer_fuzz::LimitedAlloc;
//!
//! fuzz_target!(init: mcp_framer_fuzz::limit_allocations(), |data: &[u8]| { ... });
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The limit in MiB; 0 is none (also before [`limit_allocations`] ran).
static LIMIT_MB: AtomicUsize = AtomicUsize::new(0);

/// libFuzzer's default `-rss_limit_mb`, which `-malloc_limit_mb` defaults to.
const DEFAULT_RSS_LIMIT_MB: usize = 2048;

/// Reads the limit from the fuzzer's command line (`-malloc_limit_mb=N`, else
/// `-rss_limit_mb=N`, else libFuzzer's default 2,048; the last of each flag
/// counts, 0 means none). Call it from the target's `init`.
pub fn limit_allocations() {
    let flag = |name: &str| {
        let prefix = format!("-{name}=");
        std::env::args().filter_map(|arg| arg.strip_prefix(&prefix)?.parse::<usize>().ok()).next_back()
    };
    let limit = match flag("malloc_limit_mb") {
        Some(mb) if mb > 0 => mb,
        _ => flag("rss_limit_mb").unwrap_or(DEFAULT_RSS_LIMIT_MB),
    };
    LIMIT_MB.store(limit, Ordering::Relaxed);
}

/// The system allocator, stopping the process at any single allocation of
/// the limit or more.
pub struct LimitedAlloc;

/// `ptr`, just allocated (`size` bytes), if within the limit; else says why
/// and aborts (libFuzzer reports the abort as a crash and saves the input).
fn checked(ptr: *mut u8, size: usize) -> *mut u8 {
    let limit = LIMIT_MB.load(Ordering::Relaxed);
    if limit != 0 && (size >> 20) >= limit {
        // A fixed text and integers: formatting them does not allocate.
        let _ = writeln!(
            std::io::stderr(),
            "==fuzz== ERROR: out-of-memory (malloc({size})): -malloc_limit_mb={limit} exceeded, \
             enforced by mcp_framer_fuzz::LimitedAlloc (no sanitizer)"
        );
        std::process::abort();
    }
    ptr
}

// SAFETY: every method forwards to `System` with the caller's arguments and
// returns its result unchanged, or never returns.
unsafe impl GlobalAlloc for LimitedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        checked(unsafe { System.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        checked(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is.
        checked(unsafe { System.realloc(ptr, layout, new_size) }, new_size)
    }
}
