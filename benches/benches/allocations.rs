//! Allocation counts of the host's reader: the CI gate's second measure,
//! beside the instruction counts (benches/GATE.md).
//!
//! A counting global allocator counts every call into the allocator while
//! the host transport's [`Reader`] reads a stream of `notifications/message`
//! (the pipe bench's message, [`pipe::notification`]) of 200 B, 64 KiB and
//! 1 MiB and a consumer task takes every message (`recv_many`, 256 at a
//! time) and drops it. It runs on a current-thread tokio runtime, the pipe
//! bench's, and the stream comes from an in-memory pipe that hands out at
//! most 64 KiB per read and is empty (`Pending`, waking itself) every other
//! poll, as a pipe whose writer is slower than its reader: the consumer runs
//! between two reads, so what it drops can come back to the reader. One
//! thread, no timer, no I/O driver: the counts are the same on every run of
//! the same binary.
//!
//! Printed, one JSON object per line on stdout (`--json`) or as a table:
//! allocations (`alloc` and `alloc_zeroed` calls), reallocations
//! (`realloc`), bytes asked for (both), and the minor page faults of the
//! run (`getrusage`, information only: they depend on the allocator's state
//! and the kernel), each also per message and per MiB read.
//! `scripts/bench-check` compares allocations and reallocations with
//! `benches/baseline/allocations.json`.
//!
//! Run: `cargo bench -p mcp-framer-benches --bench allocations [-- --json]`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};

use mcp_framer_benches::pipe::notification;
use mcp_framer_benches::shapes::stream;
use mcp_framer_stdio::host::{Inbound, Reader, ReaderEnd, SessionConfig, inbound_channel};
use tokio::io::{AsyncRead, ReadBuf};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static REALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees carry over; the counters have no effect
// on the memory handed out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        BYTES.fetch_add(layout.size() as u64, Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        BYTES.fetch_add(layout.size() as u64, Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        REALLOCATIONS.fetch_add(1, Relaxed);
        BYTES.fetch_add(new_size.saturating_sub(layout.size()) as u64, Relaxed);
        // SAFETY: `ptr` was allocated by this allocator (by `System`) with
        // `layout`, as the caller guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `realloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;
/// Bytes per read: one Linux pipe's capacity, the pipe writer's write.
const READ: usize = 64 * KIB;
/// Items the consumer takes per wake-up, as in the pipe bench.
const CONSUMER_BATCH: usize = 256;

/// A pipe whose writer is slower than its reader: every other poll finds it
/// empty (and wakes the task at once); the others hand out at most [`READ`]
/// bytes.
struct Paced<'a> {
    bytes: &'a [u8],
    empty: bool,
}

impl AsyncRead for Paced<'_> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.empty && !self.bytes.is_empty() {
            self.empty = false;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.empty = true;
        let n = buf.remaining().min(READ).min(self.bytes.len());
        let (now, rest) = self.bytes.split_at(n);
        buf.put_slice(now);
        self.bytes = rest;
        Poll::Ready(Ok(()))
    }
}

/// What one case counted.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    allocations: u64,
    reallocations: u64,
    bytes: u64,
    minflt: u64,
}

/// This process's minor page faults so far (`/proc/self/stat`, field 10);
/// 0 where there is no `/proc`.
fn minflt() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which ends with the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    rest.split_whitespace().nth(7).and_then(|f| f.parse().ok()).unwrap_or(0)
}

fn snapshot() -> Counts {
    Counts {
        allocations: ALLOCATIONS.load(Relaxed),
        reallocations: REALLOCATIONS.load(Relaxed),
        bytes: BYTES.load(Relaxed),
        minflt: minflt(),
    }
}

/// Reads `input` (`messages` notifications) with the host's reader on a
/// current-thread runtime while a consumer takes and drops every message;
/// returns what the allocator saw from the reader's creation to the last drop.
fn count(input: &[u8], messages: u64) -> Counts {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let before = snapshot();
    let received = runtime.block_on(async {
        let (tx, mut queue) = inbound_channel();
        let reader = Reader::new(&SessionConfig::default(), tx);
        let metrics = reader.metrics();
        let reader = reader.run(Paced { bytes: input, empty: true });
        let consumer = async move {
            let mut taken = Vec::with_capacity(CONSUMER_BATCH);
            let mut received = 0u64;
            while queue.recv_many(&mut taken, CONSUMER_BATCH).await > 0 {
                for item in taken.drain(..) {
                    assert!(matches!(item, Inbound::Notification(_)), "{item:?}");
                    received += 1;
                }
            }
            received
        };
        // One task, polled in a fixed order: the same interleaving every run.
        let (report, received) = tokio::join!(reader, consumer);
        assert!(matches!(report.end, ReaderEnd::Eof), "{:?}", report.end);
        assert_eq!(metrics.snapshot().delivered, received);
        received
    });
    let after = snapshot();
    drop(runtime);
    assert_eq!(received, messages, "every message delivered");
    Counts {
        allocations: after.allocations - before.allocations,
        reallocations: after.reallocations - before.reallocations,
        bytes: after.bytes - before.bytes,
        minflt: after.minflt - before.minflt,
    }
}

fn main() {
    let json = std::env::args().any(|arg| arg == "--json");
    // The streams (built before anything is counted): about 4 MiB of 200 B
    // messages, 8 MiB of 64 KiB ones, 16 MiB of 1 MiB ones.
    let cases =
        [("host/note_200b", 200, 4 * MIB), ("host/note_64k", 64 * KIB, 8 * MIB), ("host/note_1m", MIB, 16 * MIB)];
    if !json {
        println!(
            "{:<16} {:>9} {:>11} {:>9} {:>11} {:>10} {:>9} {:>10}",
            "case", "messages", "allocations", "per msg", "per MiB", "reallocs", "faults", "faults/MiB"
        );
    }
    for (id, size, total) in cases {
        let (bytes, messages) = stream(|_| notification(size), total);
        let c = count(&bytes, messages);
        let mib = bytes.len() as f64 / MIB as f64;
        let per_message = c.allocations as f64 / messages as f64;
        let per_mib = c.allocations as f64 / mib;
        if json {
            println!(
                "{{\"id\":\"{id}\",\"messages\":{messages},\"stream_bytes\":{},\"allocations\":{},\"reallocations\":{},\
                 \"allocated_bytes\":{},\"minflt\":{},\"allocations_per_message\":{per_message:.4},\
                 \"allocations_per_mib\":{per_mib:.4},\"minflt_per_mib\":{:.2}}}",
                bytes.len(),
                c.allocations,
                c.reallocations,
                c.bytes,
                c.minflt,
                c.minflt as f64 / mib
            );
        } else {
            println!(
                "{id:<16} {messages:>9} {:>11} {per_message:>9.3} {per_mib:>11.2} {:>10} {:>9} {:>10.1}",
                c.allocations,
                c.reallocations,
                c.minflt,
                c.minflt as f64 / mib
            );
        }
    }
}
