//! Helpers shared by the process tests (`tests/host_support`,
//! `tests/server_support`, and the tests that drive a fixture directly):
//! watchdogs, polling for a condition, and process checks through `/proc`.
//!
//! Every test that spawns a process runs under a watchdog: [`watchdog`] for
//! async bodies (a timeout that drops the body, and with it the sessions
//! whose supervisors kill their servers), [`ChildWatchdog`] for blocking
//! code (a thread that kills the child when the limit passes).

use std::future::Future;
#[cfg(unix)]
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Whether `status` is that of a server the host killed: `SIGKILL` on unix;
/// on Windows exit code 1, which terminating the server's job gives every
/// process in it.
pub fn killed(status: &std::process::ExitStatus) -> bool {
    #[cfg(unix)]
    return std::os::unix::process::ExitStatusExt::signal(status) == Some(9);
    #[cfg(windows)]
    return status.code() == Some(1);
}

/// Whether `status` is that of a server stopped by the shutdown sequence's
/// request to exit, after its stdin was closed and ignored: `SIGTERM` on
/// unix; on Windows, which has no such request, the job terminated
/// ([`killed`]).
pub fn terminated(status: &std::process::ExitStatus) -> bool {
    #[cfg(unix)]
    return std::os::unix::process::ExitStatusExt::signal(status) == Some(15);
    #[cfg(windows)]
    return killed(status);
}

/// Whether a live process holds the exclusive lock on `path` (a
/// `proc_fixture hold`): the lock goes with its holder, so this is a
/// liveness check that works the same on unix and Windows.
pub fn lock_held(path: &std::path::Path) -> bool {
    std::fs::File::open(path).is_ok_and(|file| matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock)))
}

/// A fresh path for a lock file in the temporary directory, unique to this
/// process and `name`.
pub fn lock_path(name: &str) -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("mcp-framer-{name}-{}-{n}.lock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

/// How often [`eventually`] and [`eventually_async`] poll.
pub const POLL: Duration = Duration::from_millis(5);

/// Runs `body` for at most `limit`; panics, naming `what`, when the limit
/// passes. The body's future is dropped first, so every session and
/// `kill_on_drop` child it owns is killed.
pub async fn watchdog<F: Future>(limit: Duration, what: &str, body: F) -> F::Output {
    match tokio::time::timeout(limit, body).await {
        Ok(output) => output,
        Err(_) => panic!("watchdog: {what} did not finish within {limit:?}; its server was killed"),
    }
}

/// A thread that runs `on_fire` (which kills the child) unless disarmed
/// within the limit.
#[derive(Debug)]
pub struct ChildWatchdog {
    disarm: Option<mpsc::Sender<()>>,
    fired: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ChildWatchdog {
    /// Starts the watchdog: after `limit` it prints a line naming `what` on
    /// stderr and calls `on_fire`.
    pub fn arm(limit: Duration, what: impl Into<String>, on_fire: impl FnOnce() + Send + 'static) -> Self {
        let (disarm, disarmed) = mpsc::channel::<()>();
        let fired = Arc::new(AtomicBool::new(false));
        let what = what.into();
        let thread = {
            let fired = Arc::clone(&fired);
            thread::spawn(move || {
                if disarmed.recv_timeout(limit) == Err(mpsc::RecvTimeoutError::Timeout) {
                    fired.store(true, Ordering::SeqCst);
                    eprintln!("WATCHDOG: {what} still running after {limit:?}; killing it");
                    on_fire();
                }
            })
        };
        Self { disarm: Some(disarm), fired, thread: Some(thread) }
    }

    /// Whether the watchdog has fired.
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// Stops the watchdog; whether it had fired.
    pub fn disarm(mut self) -> bool {
        self.stop();
        self.fired()
    }

    fn stop(&mut self) {
        drop(self.disarm.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ChildWatchdog {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Polls `condition` every [`POLL`] for up to `timeout`; whether it held.
pub fn eventually(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(held) = settled(deadline, &mut condition) {
            return held;
        }
        thread::sleep(POLL);
    }
}

/// [`eventually`] for async code: sleeps with tokio between polls.
pub async fn eventually_async(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(held) = settled(deadline, &mut condition) {
            return held;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// One poll: `Some(true)` if `condition` holds, `Some(false)` if not and
/// `deadline` has passed, `None` to poll again.
fn settled(deadline: Instant, condition: &mut impl FnMut() -> bool) -> Option<bool> {
    if condition() {
        Some(true)
    } else if Instant::now() >= deadline {
        Some(false)
    } else {
        None
    }
}

/// Bytes written into the pipe `fd` (either end) and not yet read by the
/// other side (`FIONREAD`). Zero on the write end of a child's stdin means
/// the child has read everything sent so far.
#[cfg(unix)]
pub fn unread_bytes(fd: impl std::os::fd::AsFd) -> io::Result<u64> {
    Ok(rustix::io::ioctl_fionread(fd)?)
}

/// Checks of other processes through Linux's `/proc`.
#[cfg(unix)]
pub mod proc {
    /// Pids of the live (not zombie) processes in process group `pgid`.
    /// Killed grandchildren are orphans only PID 1 can reap, so they may
    /// linger as zombies: dead, holding nothing but their pid.
    pub fn live_group_members(pgid: u32) -> Vec<u32> {
        let mut live = Vec::new();
        let Ok(entries) = std::fs::read_dir("/proc") else { return live };
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
            // "pid (comm) state ppid pgrp ...": comm may hold spaces.
            let Some(close) = stat.rfind(')') else { continue };
            let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
            if fields.get(2) == Some(&pgid.to_string().as_str()) && fields.first() != Some(&"Z") {
                live.push(pid);
            }
        }
        live
    }

    /// One line per thread of `pid`: name, state and kernel wait channel
    /// (for diagnosing a hang).
    pub fn threads(pid: u32) -> String {
        let mut out = String::new();
        for task in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
            let path = task.path();
            let read = |name: &str| std::fs::read_to_string(path.join(name)).unwrap_or_default();
            let stat = read("stat");
            let state = stat.get(stat.rfind(')').map_or(0, |i| i + 2)..).unwrap_or("").split(' ').next().unwrap_or("");
            out.push_str(&format!("  {} {} {}\n", read("comm").trim(), state, read("wchan")));
        }
        out
    }

    /// Whether `pid` is a live process (a zombie is dead).
    pub fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| stat.rfind(')').map(|at| stat[at + 1..].trim_start().starts_with('Z')))
            .is_some_and(|zombie| !zombie)
    }

    /// Whether `/proc/<pid>` exists (a zombie not yet reaped still has one).
    pub fn pid_exists(pid: u32) -> bool {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    }
}

/// `mcp-probe` flags for the tests: the `large` and `slow` tools every probe
/// fixture has, and every wait cut down from the defaults where it is waited
/// out in full (the absence of an answer, the window after a cancellation),
/// or made generous where it is a deadline for something that must happen
/// (an answer, an exit), so that a debug build on a loaded 2-core machine
/// meets it and only a defect misses it. The slow tool runs for longer than
/// the shutdown check waits while it runs (up to a quarter of
/// `--slow-start`, then `--exit-timeout`), so a server that stays until its
/// work ends is still there when the wait ends. Pairs of flag and value: a
/// test replaces one by leaving it out and passing its own.
pub const FAST_PROBE: &[&str] = &[
    "--large",
    r#"large {"bytes":1048576}"#,
    "--slow",
    r#"slow {"seconds":10}"#,
    "--max-request",
    "1MiB",
    "--step-timeout",
    "10s",
    "--ping-timeout",
    "5s",
    "--reply-wait",
    "1s",
    "--pause",
    "2s",
    "--cancel-grace",
    "1s",
    "--cancel-watch",
    "1s",
    "--exit-timeout",
    "3s",
    "--term-timeout",
    "3s",
    "--bisect-steps",
    "2",
    "--check-timeout",
    "120s",
];

/// [`FAST_PROBE`] with the flags of `overrides` (pairs of flag and value)
/// in place of its own.
pub fn fast_probe_with<'a>(overrides: &[&'a str]) -> Vec<&'a str> {
    let kept = FAST_PROBE.chunks(2).filter(|pair| !overrides.chunks(2).any(|o| o[0] == pair[0])).flatten();
    kept.copied().chain(overrides.iter().copied()).collect()
}

/// Helpers for the tests that run `mcp-probe` (`probe_cli`) as a process:
/// the watchdog's kill and the report's schema check.
#[cfg(unix)]
pub mod probe {
    use std::path::{Path, PathBuf};
    use std::process::{Command, Output, Stdio};
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use serde_json::Value;

    use super::ChildWatchdog;

    /// A fresh path in the temporary directory for a probe's JSON report.
    pub fn temp_json(prefix: &str, label: &str) -> PathBuf {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        std::env::temp_dir().join(format!("{prefix}-{}-{n}-{label}.json", std::process::id()))
    }

    /// Runs `command` (a probe) to its end under a watchdog of `limit`
    /// that kills it and its servers; panics, naming `what`, if it fired.
    pub fn run_watched(mut command: Command, limit: Duration, what: &str) -> Output {
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn probe_cli");
        let pid = child.id();
        let watchdog = ChildWatchdog::arm(limit, what, move || kill_tree(pid));
        let output = child.wait_with_output().expect("wait for probe_cli");
        assert!(!watchdog.disarm(), "the probe hung: {what}");
        output
    }

    /// What a probe run left: its exit code, its stdout and stderr as one
    /// text, and the JSON report it wrote (if it wrote one).
    #[derive(Debug)]
    pub struct ProbeRun {
        /// The exit code.
        pub exit: Option<i32>,
        /// stdout, then stderr.
        pub text: String,
        /// The `--json` report.
        pub report: Option<Value>,
    }

    /// [`run_watched`], then reads (and removes) the report at `json`.
    pub fn run_probe(command: Command, json: &Path, limit: Duration, what: &str) -> ProbeRun {
        let output = run_watched(command, limit, what);
        let text = format!(
            "{}\n--- stderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let report = std::fs::read(json).ok().map(|bytes| serde_json::from_slice(&bytes).expect("the report is JSON"));
        let _ = std::fs::remove_file(json);
        ProbeRun { exit: output.status.code(), text, report }
    }

    /// Kills the direct children of `pid` (the servers the probe started) and
    /// then `pid` itself: the watchdog's action.
    pub fn kill_tree(pid: u32) {
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
                let Some((_, rest)) = stat.rsplit_once(')') else { continue };
                let ppid = rest.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok());
                let child = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok());
                if let (Some(ppid), Some(child)) = (ppid, child)
                    && ppid == pid
                    && let Some(child) = rustix::process::Pid::from_raw(child)
                {
                    let _ = rustix::process::kill_process_group(child, rustix::process::Signal::KILL);
                }
            }
        }
        if let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }

    /// Checks `value` against the subset of JSON Schema the report's schema
    /// uses: type, enum, required, properties, additionalProperties: false,
    /// items, minimum, maximum.
    pub fn validate(schema: &Value, value: &Value, path: &str) {
        if let Some(types) = schema.get("type") {
            let types: Vec<&str> = match types {
                Value::String(t) => vec![t.as_str()],
                Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                _ => panic!("bad type in schema at {path}"),
            };
            let ok = types.iter().any(|t| match *t {
                "object" => value.is_object(),
                "array" => value.is_array(),
                "string" => value.is_string(),
                "integer" => value.is_i64() || value.is_u64(),
                "number" => value.is_number(),
                "boolean" => value.is_boolean(),
                "null" => value.is_null(),
                other => panic!("unknown type {other} in schema at {path}"),
            });
            assert!(ok, "{path}: {value} is not {types:?}");
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
            assert!(allowed.contains(value), "{path}: {value} not in {allowed:?}");
        }
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
            assert!(value.as_f64().is_some_and(|v| v >= min), "{path}: {value} < {min}");
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            assert!(value.as_f64().is_some_and(|v| v <= max), "{path}: {value} > {max}");
        }
        if let Some(object) = value.as_object() {
            for key in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
                let key = key.as_str().expect("required names");
                assert!(object.contains_key(key), "{path}: missing {key}");
            }
            let properties = schema.get("properties").and_then(Value::as_object);
            for (key, member) in object {
                match properties.and_then(|p| p.get(key)) {
                    Some(sub) => validate(sub, member, &format!("{path}.{key}")),
                    None => assert_ne!(
                        schema.get("additionalProperties"),
                        Some(&Value::Bool(false)),
                        "{path}: {key} is not in the schema"
                    ),
                }
            }
        }
        if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
            for (i, item) in array.iter().enumerate() {
                validate(items, item, &format!("{path}[{i}]"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watchdog_fires_only_when_not_disarmed_in_time() {
        let (tx, rx) = mpsc::channel();
        let quiet = ChildWatchdog::arm(Duration::from_secs(60), "quiet", move || tx.send(()).unwrap());
        assert!(!quiet.disarm());
        assert!(rx.try_recv().is_err(), "a disarmed watchdog never fires");

        let (tx, rx) = mpsc::channel();
        let loud = ChildWatchdog::arm(Duration::from_millis(1), "loud", move || tx.send(()).unwrap());
        rx.recv_timeout(Duration::from_secs(10)).expect("fired");
        assert!(loud.disarm());
    }

    #[test]
    fn eventually_reports_whether_the_condition_held() {
        let mut polls = 0;
        assert!(eventually(Duration::from_secs(5), || {
            polls += 1;
            polls == 3
        }));
        assert!(!eventually(Duration::from_millis(20), || false));
    }

    #[cfg(unix)]
    #[test]
    fn unread_bytes_counts_what_the_reader_has_not_taken() {
        use std::io::{Read, Write};
        let (mut reader, mut writer) = std::io::pipe().unwrap();
        writer.write_all(b"hello").unwrap();
        assert_eq!(unread_bytes(&writer).unwrap(), 5);
        let mut buf = [0; 5];
        reader.read_exact(&mut buf).unwrap();
        assert_eq!(unread_bytes(&writer).unwrap(), 0);
    }

    #[cfg(unix)]
    #[test]
    fn this_process_is_alive_and_in_its_own_group_listing() {
        let me = std::process::id();
        assert!(proc::pid_exists(me));
        let pgid = rustix::process::getpgrp().as_raw_nonzero().get().unsigned_abs();
        assert!(proc::live_group_members(pgid).contains(&me));
        assert!(!proc::threads(me).is_empty());
    }
}
