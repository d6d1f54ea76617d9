//! Bounded subprocess capture.

use crate::setters::setters;
use std::fmt::{self, Write as _};
use std::io;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::cancel::Scope;
use crate::{Keep, Preview, Previewer};

/// After the process tree was killed, how long the pipes are still drained
/// before giving up on an EOF that a process outside the tree withholds.
pub const KILL_DRAIN_GRACE: Duration = Duration::from_secs(1);

const READ_CHUNK: usize = 64 * 1024;

/// What to keep, and for how long to let the command run. Build one from the
/// default with the `with_*` setters (`#[non_exhaustive]`: the fields may
/// grow).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct CaptureOptions {
    /// What to keep of stdout. Default: first 4 KiB and last 4 KiB.
    pub stdout: Keep,
    /// What to keep of stderr. Default: last 4 KiB (errors come at the end).
    pub stderr: Keep,
    /// Kill the process tree after this long. Default: none.
    pub timeout: Option<Duration>,
}

impl Default for CaptureOptions {
    fn default() -> Self {
        CaptureOptions { stdout: Keep::HeadAndTail { head: 4096, tail: 4096 }, stderr: Keep::Tail(4096), timeout: None }
    }
}

setters!(CaptureOptions {
    stdout: Keep => with_stdout,
    stderr: Keep => with_stderr,
});

impl CaptureOptions {
    /// Sets [`timeout`](CaptureOptions::timeout).
    pub fn with_timeout(mut self, timeout: Duration) -> CaptureOptions {
        self.timeout = Some(timeout);
        self
    }
}

/// One line about a stream: its size, what was kept, what was dropped.
fn describe(preview: &Preview, name: &str, out: &mut String) {
    let _ = write!(out, "{name}: {} bytes", preview.total_bytes());
    if preview.is_whole() {
        out.push_str(", all kept");
    } else {
        let (head, tail, dropped) = (preview.head().len(), preview.tail().len(), preview.dropped_bytes());
        let _ = write!(out, ", kept first {head} + last {tail}, dropped {dropped}");
    }
    if !preview.is_complete() {
        out.push_str(" (stream abandoned before EOF)");
    }
}

/// Why the command stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Ending {
    /// It exited by itself and both streams reached EOF.
    Exited,
    /// The timeout passed; the tree was killed.
    TimedOut,
    /// The scope was cancelled; the tree was killed. A cancel wins over an
    /// exit seen at the same poll, which the cancel's kill may have caused.
    Cancelled,
}

/// The result of [`capture`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capture {
    /// stdout's preview and counts; not [complete](Preview::is_complete) if
    /// the stream was abandoned before EOF after a kill.
    pub stdout: Preview,
    /// stderr's preview and counts, likewise.
    pub stderr: Preview,
    /// The exit status (after the kill, if any); the child is always reaped.
    pub status: ExitStatus,
    /// Why it stopped.
    pub ending: Ending,
    /// The child's pid (on unix also its process group id).
    pub pid: Option<u32>,
}

impl Capture {
    /// A one-line honest account: how it ended, and for each stream how many
    /// bytes it wrote, what was kept and what was dropped.
    pub fn summary(&self) -> String {
        let mut out = match self.ending {
            Ending::Exited => format!("{}; ", self.status),
            Ending::TimedOut => format!("timed out, process tree killed ({}); ", self.status),
            Ending::Cancelled => format!("cancelled, process tree killed ({}); ", self.status),
        };
        describe(&self.stdout, "stdout", &mut out);
        out.push_str("; ");
        describe(&self.stderr, "stderr", &mut out);
        out
    }
}

impl fmt::Display for Capture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.summary())
    }
}

/// Runs `command` under `scope` and captures its output within the preview
/// bounds of `options`: drains its stdout and its stderr concurrently and
/// separately to EOF, keeps a bounded [`Preview`] of each, counts what was
/// dropped exactly, and kills and reaps the process tree on cancellation or
/// timeout.
///
/// The right first move is to pass the limit to the command itself (`grep
/// --max-count 50`, `git log -n 20`, `| tail -n 100`, `find … -maxdepth 3`), so
/// it never produces what nobody will read. The capture is the safety net: a
/// child that writes more than a pipe holds (64 KiB on Linux) blocks until
/// someone reads, so a capture that stops reading at its limit wedges the
/// child, and the server with it.
///
/// # Contract
///
/// * stdout and stderr are read concurrently, each to EOF, whatever the
///   previews hold; memory stays bounded by the preview sizes plus one 64 KiB
///   read buffer per stream.
/// * Each stream's [`Preview`] follows the crate's one cut rule: for each,
///   `head().len() + tail().len() + dropped_bytes() == total_bytes()` exactly,
///   head and tail never overlap, and text is never cut inside a character.
/// * stdin is null. The child roots its own process tree, owned by the
///   [`Scope`] (a process group on unix, a Job Object on Windows): on
///   cancellation or timeout the whole tree is killed (`SIGKILL` to the
///   group, the job terminated), the pipes are drained to EOF (for at most
///   [`KILL_DRAIN_GRACE`], in case a process outside the tree holds them)
///   and the child is reaped.
/// * The result says what happened ([`Ending`]) and [`Capture::summary`] says
///   honestly what was kept and what was dropped.
///
/// Errors only if the command cannot be spawned (or the scope is already
/// cancelled) or the wait itself fails; a cancellation or timeout later on is
/// reported in [`Capture::ending`].
///
/// ```
/// use mcp_framer_stdio::Keep;
/// use mcp_framer_stdio::server::{CaptureOptions, Ending, Scope, capture};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let mut command = tokio::process::Command::new("sh");
/// command.args(["-c", "seq 1 100000; echo oops >&2"]);
/// let options = CaptureOptions::default().with_stdout(Keep::Tail(7));
/// let run = capture(&mut command, options, &Scope::new()).await?;
/// assert_eq!(run.ending, Ending::Exited);
/// assert_eq!(run.stdout.tail(), b"100000\n");
/// assert_eq!(run.stdout.dropped_bytes(), run.stdout.total_bytes() - 7);
/// assert!(run.stderr.is_whole());
/// assert_eq!(run.stderr.tail(), b"oops\n");
/// # Ok::<(), std::io::Error>(())
/// # }).unwrap();
/// ```
pub async fn capture(command: &mut Command, options: CaptureOptions, scope: &Scope) -> io::Result<Capture> {
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = scope.spawn_child(command)?;
    let pid = child.id();
    let mut stdout = Drain::new(child.take_stdout(), options.stdout);
    let mut stderr = Drain::new(child.take_stderr(), options.stderr);

    let stopped = {
        let run = async { tokio::join!(stdout.run(), stderr.run(), child.wait()) };
        let timeout = async {
            match options.timeout {
                Some(after) => tokio::time::sleep(after).await,
                None => std::future::pending().await,
            }
        };
        // Cancellation is polled first. `Scope::cancel` sets the token before
        // it kills the trees, so when a cancel is what ended the run, the
        // token is already set by the time the exit can be seen: an unbiased
        // select would sometimes call that exit `Exited`.
        tokio::select! {
            biased;
            () = scope.token().cancelled() => Stop::Killed(Ending::Cancelled),
            (out, err, status) = run => Stop::Exited(out, err, status),
            () = timeout => Stop::Killed(Ending::TimedOut),
        }
    };
    let stopped = match stopped {
        Stop::Killed(ending) => ending,
        Stop::Exited(out, err, status) => {
            out?;
            err?;
            let (stdout, stderr) = (stdout.finish(), stderr.finish());
            return Ok(Capture { stdout, stderr, status: status?, ending: Ending::Exited, pid });
        }
    };
    tracing::debug!(pid, ending = ?stopped, "killing captured process tree");
    child.kill_tree();
    let drained = tokio::time::timeout(KILL_DRAIN_GRACE, async { tokio::join!(stdout.run(), stderr.run()) }).await;
    if drained.is_err() {
        tracing::warn!(pid, "pipes still open after the process tree was killed; abandoning them");
    }
    let status = child.wait().await?;
    Ok(Capture { stdout: stdout.finish(), stderr: stderr.finish(), status, ending: stopped, pid })
}

/// How the first phase of a capture ended.
enum Stop {
    Exited(io::Result<()>, io::Result<()>, io::Result<ExitStatus>),
    Killed(Ending),
}

/// One stream being drained into a bounded preview.
struct Drain<R> {
    /// The stream, until EOF.
    reader: Option<R>,
    kept: Previewer,
}

impl<R: AsyncRead + Unpin> Drain<R> {
    /// A stream that was not piped (`None`) has nothing to read: it is at its
    /// end at once.
    fn new(reader: Option<R>, keep: Keep) -> Drain<R> {
        Drain { reader, kept: Previewer::new(keep) }
    }

    /// Reads to EOF. Cancel-safe: every byte read is accounted for before the
    /// next await, so it can be resumed after being dropped.
    async fn run(&mut self) -> io::Result<()> {
        let Some(reader) = self.reader.as_mut() else { return Ok(()) };
        let mut buf = vec![0; READ_CHUNK];
        loop {
            let n = reader.read(&mut buf).await?;
            if n == 0 {
                self.reader = None;
                return Ok(());
            }
            self.kept.push(&buf[..n]);
        }
    }

    /// The preview: complete if the stream reached EOF, partial if it was
    /// abandoned.
    fn finish(&self) -> Preview {
        if self.reader.is_none() { self.kept.preview() } else { self.kept.preview_partial() }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::time::Instant;

    use super::*;

    const MIB_100: u64 = 100 * 1024 * 1024;

    fn sh(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        command
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    }

    /// Runs a test body under a watchdog: a hung capture fails loudly after
    /// 60 s (dropping it kills the child's group) instead of hanging CI.
    fn watched<F: std::future::Future>(body: F) -> F::Output {
        runtime().block_on(async {
            tokio::time::timeout(Duration::from_secs(60), body).await.expect("watchdog: the capture test hung")
        })
    }

    /// Both streams at once, 100 MiB each, written concurrently by two
    /// processes that each hold both pipes: draining one stream to EOF before
    /// the other would deadlock. The previews stay bounded and the dropped
    /// counts are exact.
    #[test]
    fn hundred_mib_on_each_stream_is_drained_with_exact_counts() {
        watched(async {
            let mut command = sh("yes abcdefg | head -c 104857600 & head -c 104857600 /dev/zero >&2; wait");
            let options = CaptureOptions::default()
                .with_stdout(Keep::HeadAndTail { head: 1000, tail: 3000 })
                .with_stderr(Keep::Tail(5000));
            let run = tokio::time::timeout(Duration::from_secs(60), capture(&mut command, options, &Scope::new()))
                .await
                .expect("capture finished (watchdog: 60 s)")
                .unwrap();
            assert_eq!(run.ending, Ending::Exited);
            assert!(run.status.success(), "{}", run.summary());
            assert_eq!(run.stdout.total_bytes(), MIB_100);
            assert_eq!((run.stdout.head().len(), run.stdout.tail().len()), (1000, 3000));
            assert_eq!(run.stdout.dropped_bytes(), MIB_100 - 4000);
            assert_eq!(&run.stdout.head()[..16], b"abcdefg\nabcdefg\n");
            // 104857600 = 8 * 13107200: the stream ends on a whole line.
            assert!(run.stdout.tail().ends_with(b"abcdefg\nabcdefg\n"));
            assert!(run.stdout.is_complete() && run.stderr.is_complete());
            assert_eq!(run.stderr.total_bytes(), MIB_100);
            assert!(run.stderr.head().is_empty());
            assert_eq!(run.stderr.tail(), vec![0; 5000]);
            assert_eq!(run.stderr.dropped_bytes(), MIB_100 - 5000);
            let summary = run.summary();
            assert!(summary.contains("stdout: 104857600 bytes, kept first 1000 + last 3000, dropped 104853600"));
            assert!(summary.contains("stderr: 104857600 bytes, kept first 0 + last 5000, dropped 104852600"));
        });
    }

    #[test]
    fn small_output_is_kept_whole() {
        watched(async {
            let run =
                capture(&mut sh("printf 'héllo'; printf warn >&2; exit 3"), CaptureOptions::default(), &Scope::new())
                    .await
                    .unwrap();
            assert_eq!(run.status.code(), Some(3));
            assert!(run.stdout.is_whole() && run.stderr.is_whole());
            assert_eq!(run.stdout.to_text(), "héllo");
            assert_eq!(run.stderr.tail(), b"warn");
            assert!(run.summary().contains("stdout: 6 bytes, all kept"), "{}", run.summary());
        });
    }

    #[test]
    fn every_split_keeps_head_tail_and_dropped_consistent() {
        let data: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        for keep in [Keep::Head(100), Keep::Tail(100), Keep::HeadAndTail { head: 70, tail: 130 }] {
            for chunk in [1, 7, 99, 100, 101, 4096, 5000] {
                let mut drain = Drain::<&[u8]>::new(None, keep);
                for piece in data.chunks(chunk) {
                    drain.kept.push(piece);
                }
                let kept = drain.finish();
                let (head, tail) = keep.limits();
                assert_eq!(kept.head(), &data[..head]);
                assert_eq!(kept.tail(), &data[data.len() - tail..]);
                assert_eq!(kept.dropped_bytes(), (data.len() - head - tail) as u64);
                assert_eq!(kept.total_bytes(), data.len() as u64);
            }
        }
    }

    #[test]
    fn text_output_is_cut_at_character_boundaries() {
        watched(async {
            // 3-byte characters: 4096 is not a multiple of 3, so both limits
            // fall inside a character.
            let mut command = sh("i=0; while [ $i -lt 5000 ]; do printf '€'; i=$((i+1)); done");
            let run = capture(&mut command, CaptureOptions::default(), &Scope::new()).await.unwrap();
            assert_eq!(run.stdout.total_bytes(), 15_000);
            assert_eq!((run.stdout.head().len(), run.stdout.tail().len()), (4095, 4095));
            assert_eq!(run.stdout.dropped_bytes(), 15_000 - 2 * 4095);
            assert!(std::str::from_utf8(run.stdout.head()).is_ok() && std::str::from_utf8(run.stdout.tail()).is_ok());
            assert!(run.stdout.to_text().contains("[preview: first 4095 and last 4095 of 15000 bytes; 6810 bytes"));
        });
    }

    /// A timeout kills the whole group (the grandchild holding the pipes
    /// too), the pipes reach EOF and the child is reaped.
    #[test]
    fn timeout_kills_the_group_and_reaps() {
        watched(async {
            // Long enough for `sh` to start and echo on a loaded machine.
            let options = CaptureOptions::default().with_timeout(Duration::from_secs(2));
            let started = Instant::now();
            let run =
                capture(&mut sh("echo started; sleep 30 & sleep 30; wait"), options, &Scope::new()).await.unwrap();
            // At the timeout, not when the sleeps end: the kill and the reap
            // take milliseconds, so a loaded machine stays far under 10 s.
            let took = started.elapsed();
            assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(10), "{took:?}");
            assert_eq!(run.ending, Ending::TimedOut);
            // The backgrounded grandchild holds the pipes too: EOF means it died.
            assert!(run.stdout.is_complete(), "pipes reached EOF once the whole group was dead");
            assert_eq!(run.stdout.head(), b"started\n");
            assert!(run.summary().starts_with("timed out, process tree killed"), "{}", run.summary());
            let pgid = run.pid.unwrap();
            assert!(!std::path::Path::new(&format!("/proc/{pgid}")).exists(), "the child was reaped");
        });
    }

    /// The moment that makes the cancel-or-exit choice: the cancel has
    /// killed the child, and by the time the capture is polled again its
    /// exit and both EOFs are ready as well. The capture must still say
    /// `Cancelled`. Polled by hand so that both outcomes are ready at once in
    /// every round; an unbiased choice fails about half of them.
    #[test]
    fn a_cancel_whose_kill_is_already_visible_is_still_cancelled() {
        use std::future::{Future, poll_fn};
        use std::task::Poll;

        watched(async {
            for round in 0..20 {
                let scope = Scope::new();
                let pid_file = std::env::temp_dir().join(format!("mcp-framer-capture-{}-{round}", std::process::id()));
                let _ = std::fs::remove_file(&pid_file);
                let mut command = sh(&format!("echo $$ > {}; exec sleep 30", pid_file.display()));
                let mut run = std::pin::pin!(capture(&mut command, CaptureOptions::default(), &scope));
                assert!(poll_fn(|cx| Poll::Ready(run.as_mut().poll(cx).is_pending())).await, "spawned, running");
                let pid =
                    wait_for(|| std::fs::read_to_string(&pid_file).ok().and_then(|s| s.trim().parse::<u32>().ok()));
                scope.cancel();
                // Killed but not reaped: a zombie, until the capture reaps it.
                // Its pipes closed when it died, and the other worker's
                // reactor sees that while this one polls /proc.
                wait_for(|| {
                    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                    stat.rsplit(')').next()?.trim_start().starts_with('Z').then_some(())
                });
                let run = run.await.unwrap();
                let _ = std::fs::remove_file(&pid_file);
                assert_eq!(run.ending, Ending::Cancelled, "round {round}: {}", run.summary());
            }
        });
    }

    /// Polls `ready` every millisecond until it gives a value; panics after
    /// 10 s.
    fn wait_for<T>(mut ready: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(value) = ready() {
                return value;
            }
            assert!(Instant::now() < deadline, "condition not met within 10 s");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A cancel from another worker thread, landing at different moments of
    /// the capture: the capture must always say `Cancelled`, never call the
    /// killed child's exit `Exited`. Repeated, because `Scope::cancel` kills
    /// the tree right after setting the token and the order the capture sees
    /// them in is a race: until 20 captures have run (a cancel that lands
    /// before the spawn is refused instead, which a loaded machine makes
    /// more frequent, so the count of rounds is not fixed).
    #[test]
    fn cancellation_kills_the_group() {
        watched(async {
            let (mut ran, mut round) = (0, 0u64);
            while ran < 20 {
                round += 1;
                assert!(round <= 400, "only {ran} of 400 rounds spawned before their cancel");
                let scope = Scope::new();
                let canceller = scope.clone();
                let cancel = tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(round % 8 * 5)).await;
                    canceller.cancel();
                });
                let run = match capture(&mut sh("sleep 30"), CaptureOptions::default(), &scope).await {
                    Ok(run) => run,
                    // The cancel landed before the spawn: refused, the other
                    // legal outcome.
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => panic!("round {round}: {e}"),
                };
                ran += 1;
                assert_eq!(run.ending, Ending::Cancelled, "round {round}: {}", run.summary());
                assert!(!run.status.success(), "round {round}");
                assert!(run.summary().starts_with("cancelled, process tree killed"), "{}", run.summary());
                cancel.await.unwrap();
                assert!(
                    capture(&mut sh("true"), CaptureOptions::default(), &scope).await.is_err(),
                    "refused once cancelled"
                );
            }
        });
    }
}
