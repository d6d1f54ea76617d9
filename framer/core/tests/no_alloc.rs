//! Zero heap allocations per frame once the buffer has grown, proven with a
//! counting global allocator. Kept in its own test binary so no other test
//! allocates concurrently; the one test here runs alone.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use mcp_framer::{Config, Event, Framer};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees carry over; the counter has no effect
// on the memory handed out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by this allocator (i.e. by `System`)
        // with `layout`, as the caller guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `realloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn stream(frame_len: usize, frames: usize) -> Vec<u8> {
    let mut line = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"text\":\"{}\"}}}}", "x".repeat(frame_len));
    line.truncate(frame_len);
    line.push_str("\r\n");
    line.repeat(frames).into_bytes()
}

/// Reads `bytes` in read-into mode, 64 KiB at most per read (as many reads
/// as the spare space takes), counting frames.
fn feed(framer: &mut Framer, bytes: &[u8], frames: &mut usize) {
    for piece in bytes.chunks(64 * 1024) {
        let mut piece = piece;
        while !piece.is_empty() {
            let spare = framer.spare();
            let n = spare.len().min(piece.len());
            spare[..n].copy_from_slice(&piece[..n]);
            framer.commit(n);
            piece = &piece[n..];
            while let Some(event) = framer.next_event().unwrap() {
                if let Event::Frame(_) = event {
                    *frames += 1;
                }
            }
        }
    }
}

/// Pushes `bytes` in 64 KiB chunks, counting frames.
fn push_all(framer: &mut Framer, bytes: &[u8], frames: &mut usize) {
    for piece in bytes.chunks(64 * 1024) {
        let mut push = framer.push(piece);
        while let Some(event) = push.next_event().unwrap() {
            if let Event::Frame(_) = event {
                *frames += 1;
            }
        }
    }
}

type Feed = fn(&mut Framer, &[u8], &mut usize);
const MODES: [(&str, Feed); 2] = [("read-into", feed), ("push", push_all)];

/// Allocations made while `run` runs.
fn allocations(run: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    run();
    ALLOCATIONS.load(Ordering::Relaxed) - before
}

// One test function: the counter is global, so nothing else may run beside it.
#[test]
fn framing_allocates_nothing_per_frame_once_the_buffer_has_grown() {
    // Everything within the retention threshold: frames, and oversize
    // candidates up to the limit (a 2 MiB limit under a 4 MiB threshold).
    for frame_len in [200, 64 * 1024, 1024 * 1024] {
        let input = stream(frame_len, 40);
        let over = stream(3 * 1024 * 1024, 2);
        let config = Config::DEFAULT.with_max_frame(2 * 1024 * 1024).with_retain(4 * 1024 * 1024);
        for (mode, feed) in MODES {
            let mut framer = Framer::new(config);
            let mut frames = 0;
            // Warm-up: the buffer grows to hold a candidate up to the limit.
            feed(&mut framer, &over, &mut frames);
            feed(&mut framer, &input, &mut frames);
            let allocated = allocations(|| {
                feed(&mut framer, &input, &mut frames);
                feed(&mut framer, &over, &mut frames); // oversize discard allocates nothing either
            });
            assert_eq!(frames, 80, "{mode}, frame_len {frame_len}");
            assert_eq!(allocated, 0, "{mode}, frame_len {frame_len}: {allocated} allocations after warm-up");
        }
    }

    // The default threshold (512 KiB): 200 B and 64 KiB frames stay within it.
    for frame_len in [200, 64 * 1024] {
        let input = stream(frame_len, 40);
        for (mode, feed) in MODES {
            let mut framer = Framer::new(Config::DEFAULT);
            let mut frames = 0;
            feed(&mut framer, &input, &mut frames);
            let allocated = allocations(|| feed(&mut framer, &input, &mut frames));
            assert_eq!(frames, 80, "{mode}, frame_len {frame_len}");
            assert_eq!(allocated, 0, "{mode}, default retain, frame_len {frame_len}: {allocated} allocations");
            assert!(framer.capacity() <= mcp_framer::DEFAULT_RETAIN, "{mode}: {}", framer.capacity());
        }
    }

    // Hysteresis: a stream of frames beyond the threshold (1 MiB frames,
    // 512 KiB threshold) stops reallocating once a release proved premature.
    let input = stream(1024 * 1024, 20);
    for (mode, feed) in MODES {
        let mut framer = Framer::new(Config::DEFAULT);
        let mut frames = 0;
        let warm_up = allocations(|| feed(&mut framer, &input, &mut frames));
        let steady = allocations(|| feed(&mut framer, &input, &mut frames));
        assert_eq!(frames, 40, "{mode}");
        assert_eq!(steady, 0, "{mode}: {steady} allocations for 20 large frames after {warm_up} in the first 20");
    }
}
