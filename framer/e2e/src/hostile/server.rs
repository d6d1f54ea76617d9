//! The stdout writer (one lock, whole frames, timed `write(2)` calls), its
//! counters, the per-request cancellation flags and the backpressure
//! watchdog.

use std::collections::HashMap;
use std::fmt::Display;
use std::fs::File;
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::report;

/// A `write(2)` in progress for longer than this is reported as backpressure.
const BACKPRESSURE_AFTER: Duration = Duration::from_millis(50);

/// Writes one diagnostic line to stderr with a single `write_all`.
pub(super) fn log(msg: impl Display) {
    let line = format!("{msg}\n");
    let _ = io::stderr().lock().write_all(line.as_bytes());
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(super) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

pub(super) fn as_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

#[derive(Debug, Default)]
pub(super) struct Stats {
    pub(super) blocked_write_us: AtomicU64,
    pub(super) bytes_written: AtomicU64,
    pub(super) frames: AtomicU64,
    pub(super) junk_lines: AtomicU64,
    pub(super) backpressure_events: AtomicU64,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Snapshot {
    pub(super) blocked_write_us: u64,
    pub(super) bytes_written: u64,
    pub(super) frames: u64,
    pub(super) junk_lines: u64,
    pub(super) backpressure_events: u64,
}

impl Snapshot {
    pub(super) fn json(&self) -> Value {
        json!({
            "blocked_write_us": self.blocked_write_us,
            "bytes_written": self.bytes_written,
            "frames": self.frames,
            "junk_lines": self.junk_lines,
            "backpressure_events": self.backpressure_events,
        })
    }

    /// Writes the `stats` report line.
    pub(super) fn report(&self) {
        crate::report::emit(report::STATS, &self.json());
    }
}

/// State of the `write(2)` in progress, shared with the watchdog thread.
#[derive(Debug, Default)]
pub(super) struct WriteWatch {
    /// Incremented when each `write(2)` starts.
    pub(super) seq: AtomicU64,
    /// Start of the `write(2)` in progress, in µs since `Server::epoch`, plus
    /// one; zero when no write is in progress.
    pub(super) since_us: AtomicU64,
    /// Bytes of the current frame written so far, and its total length.
    pub(super) frame_done: AtomicU64,
    pub(super) frame_len: AtomicU64,
}

/// Cancellation flag of one in-flight request; `sleep` wakes up on cancel.
#[derive(Debug, Default)]
pub(super) struct Cancel {
    cancelled: Mutex<bool>,
    wake: Condvar,
}

impl Cancel {
    pub(super) fn cancel(&self) {
        *lock(&self.cancelled) = true;
        self.wake.notify_all();
    }

    pub(super) fn is_cancelled(&self) -> bool {
        *lock(&self.cancelled)
    }

    /// Sleeps for `d` or until cancelled; returns whether it is cancelled.
    pub(super) fn sleep(&self, d: Duration) -> bool {
        let guard = lock(&self.cancelled);
        let (guard, _) =
            self.wake.wait_timeout_while(guard, d, |cancelled| !*cancelled).unwrap_or_else(PoisonError::into_inner);
        *guard
    }
}

#[derive(Debug)]
pub(super) struct Server {
    pub(super) out: Mutex<File>,
    pub(super) stats: Stats,
    pub(super) watch: WriteWatch,
    pub(super) epoch: Instant,
    pub(super) inflight: Mutex<HashMap<String, Arc<Cancel>>>,
    pub(super) default_chunk: usize,
}

impl Server {
    pub(super) fn now_us(&self) -> u64 {
        micros(self.epoch.elapsed())
    }

    /// Takes the writer lock; frames are only written through the guard.
    pub(super) fn out(&self) -> Out<'_> {
        Out { server: self, file: lock(&self.out) }
    }

    pub(super) fn snapshot(&self) -> Snapshot {
        let s = &self.stats;
        Snapshot {
            blocked_write_us: s.blocked_write_us.load(SeqCst),
            bytes_written: s.bytes_written.load(SeqCst),
            frames: s.frames.load(SeqCst),
            junk_lines: s.junk_lines.load(SeqCst),
            backpressure_events: s.backpressure_events.load(SeqCst),
        }
    }

    pub(super) fn register(&self, id: &Value) -> Arc<Cancel> {
        let cancel = Arc::new(Cancel::default());
        if lock(&self.inflight).insert(id.to_string(), Arc::clone(&cancel)).is_some() {
            log(format_args!("duplicate in-flight request id {id}"));
        }
        cancel
    }

    pub(super) fn unregister(&self, id: &Value, cancel: &Arc<Cancel>) {
        let mut inflight = lock(&self.inflight);
        let key = id.to_string();
        if inflight.get(&key).is_some_and(|c| Arc::ptr_eq(c, cancel)) {
            inflight.remove(&key);
        }
    }

    pub(super) fn cancel(&self, id: &Value) {
        match lock(&self.inflight).get(&id.to_string()) {
            Some(cancel) => {
                crate::report::emit(report::CANCEL, &json!({"id": id, "in_flight": true}));
                cancel.cancel();
            }
            None => crate::report::emit(report::CANCEL, &json!({"id": id, "in_flight": false})),
        }
    }
}

/// Holder of the writer lock.
pub(super) struct Out<'a> {
    server: &'a Server,
    file: MutexGuard<'a, File>,
}

impl Out<'_> {
    pub(super) fn begin_frame(&mut self, len: usize) {
        self.server.watch.frame_len.store(as_u64(len), SeqCst);
        self.server.watch.frame_done.store(0, SeqCst);
    }

    pub(super) fn end_frame(&mut self) {
        self.server.stats.frames.fetch_add(1, SeqCst);
    }

    /// Writes `piece` with one timed `write(2)` (more only on short writes or
    /// `EINTR`). Exits the process if stdout is unusable.
    pub(super) fn write_piece(&mut self, piece: &[u8]) {
        let (stats, watch) = (&self.server.stats, &self.server.watch);
        let mut rest = piece;
        while !rest.is_empty() {
            watch.seq.fetch_add(1, SeqCst);
            watch.since_us.store(self.server.now_us() + 1, SeqCst);
            let started = Instant::now();
            let result = self.file.write(rest);
            let took = micros(started.elapsed());
            watch.since_us.store(0, SeqCst);
            stats.blocked_write_us.fetch_add(took, SeqCst);
            match result {
                Ok(0) => fatal_stdout(self.server, io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    stats.bytes_written.fetch_add(as_u64(n), SeqCst);
                    watch.frame_done.fetch_add(as_u64(n), SeqCst);
                    rest = &rest[n..];
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => fatal_stdout(self.server, e),
            }
        }
    }

    /// Writes a complete frame (ending in `\n`) in `chunk`-byte writes.
    pub(super) fn frame(&mut self, frame: &[u8], chunk: usize) {
        self.begin_frame(frame.len());
        for piece in frame.chunks(chunk) {
            self.write_piece(piece);
        }
        self.end_frame();
    }

    /// Writes a non-protocol line (ending in `\n`) in one write.
    pub(super) fn junk(&mut self, line: &[u8]) {
        self.begin_frame(line.len());
        self.write_piece(line);
        self.server.stats.junk_lines.fetch_add(1, SeqCst);
    }
}

pub(super) fn fatal_stdout(server: &Server, err: io::Error) -> ! {
    log(format_args!("stdout write failed: {err}; exiting"));
    server.snapshot().report();
    std::process::exit(1)
}

/// Reports every `write(2)` that has been in progress for too long, once.
pub(super) fn watchdog(server: &Server) {
    let watch = &server.watch;
    let mut reported = 0;
    loop {
        thread::sleep(Duration::from_millis(10));
        let seq = watch.seq.load(SeqCst);
        let since = watch.since_us.load(SeqCst);
        if since == 0 || seq == reported {
            continue;
        }
        let blocked = server.now_us().saturating_sub(since - 1);
        if blocked < micros(BACKPRESSURE_AFTER) || watch.seq.load(SeqCst) != seq {
            continue;
        }
        reported = seq;
        server.stats.backpressure_events.fetch_add(1, SeqCst);
        crate::report::emit(
            report::BACKPRESSURE,
            &json!({
                "blocked_ms": blocked / 1000,
                "frame_done": watch.frame_done.load(SeqCst),
                "frame_len": watch.frame_len.load(SeqCst),
                "bytes_written": server.stats.bytes_written.load(SeqCst),
            }),
        );
    }
}
