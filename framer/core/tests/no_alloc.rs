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

#[test]
fn framing_allocates_nothing_per_frame_once_the_buffer_has_grown() {
    for frame_len in [200, 64 * 1024, 1024 * 1024] {
        let input = stream(frame_len, 40);
        let over = stream(3 * 1024 * 1024, 2);
        let config = Config::DEFAULT.with_max_frame(2 * 1024 * 1024);

        // Read-into mode, 64 KiB reads.
        let mut framer = Framer::new(config);
        let mut frames = 0;
        let feed = |framer: &mut Framer, bytes: &[u8], frames: &mut usize| {
            for piece in bytes.chunks(64 * 1024) {
                framer.spare()[..piece.len()].copy_from_slice(piece);
                framer.commit(piece.len());
                while let Some(event) = framer.next_event().unwrap() {
                    if let Event::Frame(_) = event {
                        *frames += 1;
                    }
                }
            }
        };
        // Warm-up: the buffer grows to hold a candidate up to the limit.
        feed(&mut framer, &over, &mut frames);
        feed(&mut framer, &input, &mut frames);
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        feed(&mut framer, &input, &mut frames);
        feed(&mut framer, &over, &mut frames); // oversize discard allocates nothing either
        let allocated = ALLOCATIONS.load(Ordering::Relaxed) - before;
        assert_eq!(frames, 80, "frame_len {frame_len}");
        assert_eq!(allocated, 0, "read-into, frame_len {frame_len}: {allocated} allocations after warm-up");

        // Push mode, 64 KiB chunks.
        let mut framer = Framer::new(config);
        let mut frames = 0;
        let push_all = |framer: &mut Framer, bytes: &[u8], frames: &mut usize| {
            for piece in bytes.chunks(64 * 1024) {
                let mut push = framer.push(piece);
                while let Some(event) = push.next_event().unwrap() {
                    if let Event::Frame(_) = event {
                        *frames += 1;
                    }
                }
            }
        };
        push_all(&mut framer, &over, &mut frames);
        push_all(&mut framer, &input, &mut frames);
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        push_all(&mut framer, &input, &mut frames);
        push_all(&mut framer, &over, &mut frames);
        let allocated = ALLOCATIONS.load(Ordering::Relaxed) - before;
        assert_eq!(frames, 80, "frame_len {frame_len}");
        assert_eq!(allocated, 0, "push, frame_len {frame_len}: {allocated} allocations after warm-up");
    }
}
