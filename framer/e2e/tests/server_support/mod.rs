//! Drives the `lib_server` fixture (or another server:
//! [`Fixture::start_program`]) over real pipes for the `server_*` process
//! tests and the raw `rmcp_server_*` ones: a stdout reader thread framing with `mcp_framer::Framer`, a stderr
//! collector that reads the fixture's report lines, and a watchdog (the
//! fixture library's `ChildWatchdog`) that kills the child and fails loudly.

#![allow(dead_code)] // each test file uses a different subset

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use mcp_framer::{Config, Event, Framer};
use mcp_framer_e2e::lib_server::report as lib_server;
use mcp_framer_e2e::report;
use mcp_framer_e2e::support::proc::threads;
use mcp_framer_e2e::support::{ChildWatchdog, eventually, unread_bytes};
use serde_json::{Value, json};

/// The watchdog's limit for one fixture run: a hang guard, not a speed (a
/// run takes seconds in a debug build on a loaded 2-core machine).
pub const WATCHDOG: Duration = Duration::from_secs(120);
/// The watchdog's limit for a run of another server
/// ([`Fixture::start_program`]): some of those tests flood it with tens of
/// MiB, each frame decoded by an SDK's types in a debug build. A hang guard.
pub const PROGRAM_WATCHDOG: Duration = Duration::from_secs(240);
/// How long a wait for something that must happen may take (a frame, a
/// report line, a condition): a hang guard too. What a test waits for takes
/// milliseconds to seconds; only a defect (it never happens) reaches this.
pub const WAIT: Duration = Duration::from_secs(60);
/// How long a small request may take to be answered after an incident (a
/// cancellation, bad input): milliseconds unless the server is still
/// blocked, even in a debug build on a loaded machine. The defects it
/// catches (a stdin reader starved or blocked behind stdout, a cancelled
/// task holding the loop, a writer stuck) make it wait for the blocker, and
/// every blocker in these tests lasts far longer (a minute, or forever).
pub const SECOND_REQUEST: Duration = Duration::from_secs(5);

/// One line the fixture wrote on stdout.
#[derive(Clone, Debug)]
pub struct Frame {
    /// The line parsed as JSON, or why it is not a JSON object.
    pub value: Result<Value, String>,
    /// Its length in bytes, without `\n`.
    pub len: usize,
    /// When it was read.
    pub at: Instant,
}

impl Frame {
    /// The JSON object; panics if the line was not one.
    pub fn json(&self) -> &Value {
        self.value.as_ref().unwrap_or_else(|err| panic!("stdout line is not a JSON object: {err}"))
    }

    /// The `id` of a response, if it is one.
    pub fn id(&self) -> Option<&Value> {
        self.value.as_ref().ok().and_then(|v| v.get("id")).filter(|_| self.method().is_none())
    }

    /// The `method` of a notification, if it is one.
    pub fn method(&self) -> Option<&str> {
        self.value.as_ref().ok().and_then(|v| v.get("method")).and_then(Value::as_str)
    }
}

/// What the run left behind after stdin was closed.
#[derive(Debug)]
pub struct Finished {
    /// Every stdout line, in order.
    pub frames: Vec<Frame>,
    /// All of stderr.
    pub stderr: String,
    /// The exit status.
    pub status: ExitStatus,
    /// The fields of the `report` line the fixture prints at exit.
    pub report: Value,
}

/// A running `lib_server` with its pipes.
pub struct Fixture {
    child: Arc<Mutex<Child>>,
    stdin: Option<ChildStdin>,
    frames_rx: mpsc::Receiver<Frame>,
    /// Every frame received so far, in order.
    pub frames: Vec<Frame>,
    /// Frames received but not yet returned by `next_frame`, `response` or
    /// `notification`.
    unclaimed: Vec<Frame>,
    stderr: Arc<Mutex<String>>,
    resume: Option<mpsc::Sender<()>>,
    first_read: Option<mpsc::Receiver<usize>>,
    stdout_thread: Option<JoinHandle<()>>,
    stderr_thread: Option<JoinHandle<()>>,
    watchdog: Option<ChildWatchdog>,
}

impl Fixture {
    /// Starts the fixture with `args`; stdout is read continuously.
    pub fn start(args: &[&str]) -> Fixture {
        Fixture::spawn(env!("CARGO_BIN_EXE_lib_server"), args, false, WATCHDOG)
    }

    /// Starts the fixture with stdout reading paused after the first read:
    /// [`first_stdout_read`](Fixture::first_stdout_read) waits for it and
    /// [`resume_stdout`](Fixture::resume_stdout) resumes.
    pub fn start_paused(args: &[&str]) -> Fixture {
        Fixture::spawn(env!("CARGO_BIN_EXE_lib_server"), args, true, WATCHDOG)
    }

    /// Starts another server, `program` with `args`, the same way (its
    /// stderr has no report lines: [`Finished::report`] is `null`), under a
    /// watchdog of [`PROGRAM_WATCHDOG`].
    pub fn start_program(program: &str, args: &[&str], paused: bool) -> Fixture {
        Fixture::spawn(program, args, paused, PROGRAM_WATCHDOG)
    }

    fn spawn(program: &str, args: &[&str], paused: bool, watchdog: Duration) -> Fixture {
        let mut child = Command::new(program)
            .args(args)
            .env("RUST_BACKTRACE", "0")
            // Its own process group, so a test can signal the group without
            // signalling itself.
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
        let stdin = child.stdin.take();
        let mut stdout = child.stdout.take().expect("stdout");
        let mut stderr_pipe = child.stderr.take().expect("stderr");
        let child = Arc::new(Mutex::new(child));

        let watchdog = {
            let child = Arc::clone(&child);
            ChildWatchdog::arm(watchdog, program, move || {
                let _ = child.lock().unwrap().kill();
            })
        };

        let stderr = Arc::new(Mutex::new(String::new()));
        let stderr_thread = {
            let stderr = Arc::clone(&stderr);
            thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = stderr_pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    stderr.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            })
        };

        let (frames_tx, frames_rx) = mpsc::channel();
        let (first_tx, first_rx) = mpsc::channel();
        let (resume_tx, resume_rx) = mpsc::channel::<()>();
        let stdout_thread = thread::spawn(move || {
            let mut framer = Framer::new(Config::DEFAULT.with_max_frame(64 << 20));
            let mut first = paused;
            loop {
                let n = framer.read_from(&mut stdout).expect("read stdout");
                if first {
                    first = false;
                    let _ = first_tx.send(n);
                    let _ = resume_rx.recv();
                }
                while let Some(event) = framer.next_event().expect("no oversize under 64 MiB") {
                    let frame = match event {
                        Event::Frame(bytes) => Frame {
                            value: serde_json::from_slice::<Value>(bytes)
                                .map_err(|e| e.to_string())
                                .and_then(|v| if v.is_object() { Ok(v) } else { Err(format!("not an object: {v}")) }),
                            len: bytes.len(),
                            at: Instant::now(),
                        },
                        other => Frame { value: Err(format!("{other:?}")), len: 0, at: Instant::now() },
                    };
                    if frames_tx.send(frame).is_err() {
                        return;
                    }
                }
                if n == 0 {
                    return;
                }
            }
        });

        Fixture {
            child,
            stdin,
            frames_rx,
            frames: Vec::new(),
            unclaimed: Vec::new(),
            stderr,
            resume: Some(resume_tx),
            first_read: Some(first_rx),
            stdout_thread: Some(stdout_thread),
            stderr_thread: Some(stderr_thread),
            watchdog: Some(watchdog),
        }
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.lock().unwrap().id()
    }

    /// Writes `message` and a `\n` to stdin.
    pub fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// Writes raw bytes to stdin.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).and_then(|()| stdin.flush()).expect("write stdin");
    }

    /// Writes `bytes` to stdin from a thread of its own (through a duplicate
    /// of the pipe's fd), for writes the fixture may not read for a while.
    /// The thread ends when everything is written or the pipe breaks; until
    /// then it holds stdin open (no EOF for the fixture).
    pub fn send_in_background(&mut self, bytes: Vec<u8>) -> JoinHandle<std::io::Result<()>> {
        let fd = self.stdin.as_ref().expect("stdin open").as_fd().try_clone_to_owned().expect("dup stdin");
        thread::spawn(move || File::from(fd).write_all(&bytes))
    }

    /// A duplicate of the stdin pipe's fd, for a writer of the test's own or
    /// for `FIONREAD`; it holds stdin open until dropped.
    pub fn stdin_fd(&self) -> OwnedFd {
        self.stdin.as_ref().expect("stdin open").as_fd().try_clone_to_owned().expect("dup stdin")
    }

    /// Sends `tools/call` for `tool` with `arguments`.
    pub fn call(&mut self, id: i64, tool: &str, arguments: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": tool, "arguments": arguments}}));
    }

    /// Sends `notifications/cancelled` for `id`.
    pub fn cancel(&mut self, id: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": id, "reason": "test"}}));
    }

    /// The next stdout frame not yet returned, within `timeout`; panics
    /// (with the fixture's threads and stderr) if none.
    pub fn next_frame(&mut self, timeout: Duration) -> Frame {
        if !self.unclaimed.is_empty() {
            return self.unclaimed.remove(0);
        }
        self.receive(timeout)
    }

    fn receive(&mut self, timeout: Duration) -> Frame {
        match self.frames_rx.recv_timeout(timeout) {
            Ok(frame) => {
                self.frames.push(frame.clone());
                frame
            }
            Err(err) => panic!(
                "no stdout frame within {timeout:?} ({err:?}); threads:\n{}stderr:\n{}",
                threads(self.pid()),
                self.stderr()
            ),
        }
    }

    /// The first frame (received earlier or within `timeout`) for which
    /// `wanted` holds; frames passed over stay available to later calls.
    fn claim(&mut self, timeout: Duration, wanted: impl Fn(&Frame) -> bool) -> Frame {
        if let Some(i) = self.unclaimed.iter().position(&wanted) {
            return self.unclaimed.remove(i);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let frame = self.receive(deadline.saturating_duration_since(Instant::now()));
            if wanted(&frame) {
                return frame;
            }
            self.unclaimed.push(frame);
        }
    }

    /// The response to `id`, received earlier or within `timeout`.
    pub fn response(&mut self, id: i64, timeout: Duration) -> Value {
        self.response_frame(id, timeout).json().clone()
    }

    /// As [`response`](Fixture::response), with the frame's length.
    pub fn response_frame(&mut self, id: i64, timeout: Duration) -> Frame {
        self.claim(timeout, |frame| frame.id() == Some(&json!(id)))
    }

    /// A notification with `method`, received earlier or within `timeout`.
    pub fn notification(&mut self, method: &str, timeout: Duration) -> Value {
        self.claim(timeout, |frame| frame.method() == Some(method)).json().clone()
    }

    /// Everything on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits up to `timeout` for a report line with `tag` (see
    /// `mcp_framer_e2e::lib_server::report`) whose fields satisfy `wanted`;
    /// returns the fields.
    pub fn wait_report(&self, tag: &str, timeout: Duration, wanted: impl Fn(&Value) -> bool) -> Value {
        let mut found = None;
        let held = eventually(timeout, || {
            found = report::all(&self.stderr(), tag).find(&wanted);
            found.is_some()
        });
        assert!(held, "no {tag:?} report as wanted within {timeout:?}; stderr:\n{}", self.stderr());
        found.unwrap_or(Value::Null)
    }

    /// Waits for the `tool_started` report of request `id`.
    pub fn wait_started(&self, id: i64, timeout: Duration) -> Value {
        self.wait_report(lib_server::TOOL_STARTED, timeout, |fields| fields["id"] == id)
    }

    /// Waits until the serve loop has logged (as a `trace` report line) the
    /// cancellation of request `id` and the `state` it found the request
    /// in: the loop's only signal while it runs; the final report counts the
    /// same states.
    pub fn wait_cancellation(&self, id: i64, state: &str, timeout: Duration) -> Value {
        self.wait_report(lib_server::TRACE, timeout, |fields| {
            fields["message"] == "cancellation"
                && fields["id"].as_str() == Some(&*id.to_string())
                && fields["state"] == state
        })
    }

    /// Waits up to `timeout` until the fixture has read every byte written
    /// to its stdin so far (the pipe holds none); panics if it has not.
    pub fn wait_stdin_read(&self, timeout: Duration) {
        let stdin = self.stdin.as_ref().expect("stdin open");
        let mut unread = 0;
        let held = eventually(timeout, || {
            unread = unread_bytes(stdin).expect("FIONREAD on stdin");
            unread == 0
        });
        assert!(held, "{unread} bytes of stdin still unread after {timeout:?}; stderr:\n{}", self.stderr());
    }

    /// For a paused fixture: waits for the first stdout read; its byte count.
    pub fn first_stdout_read(&mut self, timeout: Duration) -> usize {
        self.first_read.as_ref().expect("paused fixture").recv_timeout(timeout).expect("first stdout read")
    }

    /// For a paused fixture: resumes reading stdout.
    pub fn resume_stdout(&mut self) {
        let _ = self.resume.take().expect("paused fixture").send(());
    }

    /// Waits up to `timeout` for the server to close its stdout (the reader
    /// sees its end), keeping the frames read meanwhile; whether it did.
    pub fn wait_stdout_closed(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            match self.frames_rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(frame) => {
                    self.frames.push(frame.clone());
                    self.unclaimed.push(frame);
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return true,
                Err(mpsc::RecvTimeoutError::Timeout) => return false,
            }
        }
    }

    /// Closes stdin (EOF for the server) without waiting for anything.
    pub fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }

    /// Waits up to `timeout` for the fixture to exit, whether or not its
    /// stdout is being read; `None` if it is still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let mut status = None;
        eventually(timeout, || {
            status = self.child.lock().unwrap().try_wait().expect("try_wait");
            status.is_some()
        });
        status
    }

    /// Closes stdin, waits for the fixture to exit (within the watchdog) and
    /// collects everything.
    pub fn finish(mut self) -> Finished {
        drop(self.stdin.take());
        if let Some(resume) = self.resume.take() {
            let _ = resume.send(());
        }
        self.stdout_thread.take().unwrap().join().expect("stdout reader");
        while let Ok(frame) = self.frames_rx.try_recv() {
            self.frames.push(frame);
        }
        self.stderr_thread.take().unwrap().join().expect("stderr reader");
        let status = self.child.lock().unwrap().wait().expect("wait");
        let fired = self.watchdog.take().is_some_and(ChildWatchdog::disarm);
        assert!(!fired, "WATCHDOG fired: the server hung; stderr:\n{}", self.stderr());
        let stderr = self.stderr();
        let report = report::last(&stderr, lib_server::REPORT).unwrap_or(Value::Null);
        Finished { frames: std::mem::take(&mut self.frames), stderr, status, report }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if self.stdout_thread.is_some() {
            // A test failed midway: do not leave the child behind.
            let _ = self.child.lock().unwrap().kill();
            let _ = self.child.lock().unwrap().wait();
        }
    }
}
