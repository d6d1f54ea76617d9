//! The ways a host can read a child's stdout, shared by the `pipe` and
//! `slow_consumer` benchmarks (the raw drain, the hand-written reader and the
//! host's `Session` are in the library, [`mcp_framer_benches::readers`],
//! which `pipe_profile` runs too). Each reads to end of stream and returns
//! what it counted; none stops early, and any event other than a whole frame
//! (an oversize or truncated frame, a bad line) is an error, so a benchmark
//! that returns a count has read the stream it expected.
#![allow(dead_code, reason = "each benchmark uses some of the strategies")]

use std::io::{self, BufRead, BufReader, Read};
use std::time::{Duration, Instant};

use futures::StreamExt;
use mcp_framer::{Config, Event, Framer};
use mcp_framer_benches::pipe::{self, ProcessCpu, Report, Watchdog, Writer};
use mcp_framer_benches::readers::{MAX_FRAME, READ_SIZE, START_METHOD, check_report, unexpected};
use mcp_framer_stdio::host::{
    Inbound, InboundQueue, Metrics, Overload, OverloadPolicy, Reader, ReaderReport, SessionConfig, inbound_channel,
};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc::{self, error::SendTimeoutError, error::TrySendError};
use tokio::task::JoinHandle;
use tokio_util::codec::{FramedRead, LinesCodec};

/// This crate's framer in a blocking loop: read straight into its buffer
/// ([`Framer::read_from`]), hand each frame to `consume` before reading again.
/// With a slow `consume` this is the **coupled** reader: the pipe is read only
/// when the consumer is ready. Returns frames.
pub fn framer_blocking(mut input: impl Read, mut consume: impl FnMut(&[u8])) -> io::Result<u64> {
    let mut framer = Framer::new(Config::DEFAULT.with_max_frame(MAX_FRAME));
    let mut frames = 0;
    loop {
        let n = framer.read_from(&mut input)?;
        while let Some(event) = framer.next_event().map_err(unexpected)? {
            match event {
                Event::Frame(frame) => {
                    consume(frame);
                    frames += 1;
                }
                other => return Err(unexpected(other)),
            }
        }
        if n == 0 {
            return Ok(frames);
        }
    }
}

/// std's `BufReader::read_until(b'\n')` into a reused line buffer, with the
/// same limit checked per line. Returns frames.
pub fn read_until(input: impl Read) -> io::Result<u64> {
    let mut input = BufReader::with_capacity(READ_SIZE, input);
    let mut line = Vec::new();
    let mut frames = 0;
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(frames);
        }
        if line.pop() != Some(b'\n') || line.len() > MAX_FRAME {
            return Err(unexpected(format_args!("line of {} bytes", line.len())));
        }
        frames += 1;
    }
}

/// tokio-util's `FramedRead` with `LinesCodec` (UTF-8 checked, one `String`
/// per line), limited to [`MAX_FRAME`]. Returns frames.
pub async fn framed_lines(input: impl AsyncRead + Unpin) -> io::Result<u64> {
    let mut lines = FramedRead::with_capacity(input, LinesCodec::new_with_max_length(MAX_FRAME), READ_SIZE);
    let mut frames = 0;
    while let Some(line) = lines.next().await {
        line.map_err(unexpected)?;
        frames += 1;
    }
    Ok(frames)
}

/// The bounded queue between the decoupled reader and its consumer, and how
/// long the reader may wait for room in it.
#[derive(Clone, Copy, Debug)]
pub struct Queue {
    /// Messages the queue holds.
    pub capacity: usize,
    /// How long the reader waits for room once per overload episode before it
    /// drops; `Duration::ZERO` drops as soon as the queue is full.
    pub max_wait: Duration,
}

/// What the decoupled reader did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Delivery {
    /// Frames queued for the consumer.
    pub delivered: u64,
    /// Frames dropped because the queue stayed full.
    pub dropped: u64,
    /// Time spent waiting for room in the queue.
    pub waited: Duration,
}

/// The **decoupled** reader: a tokio task that reads the pipe straight into
/// the framer's buffer, copies each frame out and offers it to a bounded
/// queue. It never waits on the consumer for more than `max_wait` per overload
/// episode: when the queue is still full after that wait it drops the frame,
/// and keeps dropping without waiting until a frame fits again (the host
/// transport's `OverloadPolicy::Drop`). Must be called inside a runtime with
/// time enabled.
pub fn spawn_decoupled(
    mut input: impl AsyncRead + Unpin + Send + 'static,
    queue: Queue,
) -> (JoinHandle<io::Result<Delivery>>, mpsc::Receiver<Box<[u8]>>) {
    let (tx, rx) = mpsc::channel::<Box<[u8]>>(queue.capacity);
    let reader = tokio::spawn(async move {
        let mut framer = Framer::new(Config::DEFAULT.with_max_frame(MAX_FRAME));
        let mut delivery = Delivery::default();
        let mut overloaded = false;
        loop {
            let n = input.read(framer.spare()).await?;
            if n == 0 {
                framer.finish();
            } else {
                framer.commit(n);
            }
            while let Some(event) = framer.next_event().map_err(unexpected)? {
                let frame: Box<[u8]> = match event {
                    Event::Frame(frame) => frame.into(),
                    other => return Err(unexpected(other)),
                };
                let frame = match tx.try_send(frame) {
                    Ok(()) => {
                        overloaded = false;
                        delivery.delivered += 1;
                        continue;
                    }
                    Err(TrySendError::Full(frame)) if !overloaded && !queue.max_wait.is_zero() => frame,
                    Err(TrySendError::Full(_)) => {
                        overloaded = true;
                        delivery.dropped += 1;
                        continue;
                    }
                    Err(TrySendError::Closed(_)) => return Err(unexpected("closed queue")),
                };
                let started = Instant::now();
                let sent = tx.send_timeout(frame, queue.max_wait).await;
                delivery.waited += started.elapsed();
                match sent {
                    Ok(()) => delivery.delivered += 1,
                    Err(SendTimeoutError::Timeout(_)) => {
                        overloaded = true;
                        delivery.dropped += 1;
                    }
                    Err(SendTimeoutError::Closed(_)) => return Err(unexpected("closed queue")),
                }
            }
            if n == 0 {
                return Ok(delivery);
            }
        }
    });
    (reader, rx)
}

/// The host transport's reader ([`Reader`]) on its own task over `input`:
/// framing, classification, one copy per message, and a queue bounded by
/// `max_queued_bytes` with [`OverloadPolicy::Drop`] after `max_wait`. Must
/// be called inside a runtime with time enabled.
pub fn spawn_host_reader(
    input: impl AsyncRead + Unpin + Send + 'static,
    max_queued_bytes: usize,
    max_wait: Duration,
) -> (JoinHandle<ReaderReport>, InboundQueue, Arc<Metrics>) {
    let (tx, rx) = inbound_channel();
    let overload = Overload::default()
        .with_policy(OverloadPolicy::Drop)
        .with_max_wait(max_wait)
        .with_max_queued_bytes(max_queued_bytes);
    let config = SessionConfig::default().with_max_receive(MAX_FRAME).with_overload(overload);
    let reader = Reader::new(&config, tx);
    let metrics = reader.metrics();
    (reader.spawn(input), rx, metrics)
}

/// Whether a queued item is a message (not a report of something skipped).
pub fn is_message(item: &Inbound) -> bool {
    matches!(item, Inbound::Request(_) | Inbound::Notification(_) | Inbound::Response(_))
}

/// Busy-waits for `time`: a consumer that spends `time` of CPU per message.
pub fn spin_for(time: Duration) {
    let start = Instant::now();
    while start.elapsed() < time {
        std::hint::spin_loop();
    }
}

/// Runs `writer` under rmcp's `TokioChildProcess` (rmcp 3.11, the official
/// Rust SDK's stdio client transport) and counts the server notifications
/// `Transport::receive` returns until the end of stdout. The clock runs from
/// the start line to the child's exit.
pub async fn run_rmcp(exe: &str, writer: &Writer, timeout: Duration) -> Result<pipe::Run, String> {
    use rmcp::model::{ClientJsonRpcMessage, ClientNotification, CustomNotification, JsonRpcMessage};
    use rmcp::transport::{TokioChildProcess, Transport};
    use tokio::io::AsyncBufReadExt;

    let command = tokio::process::Command::from(writer.command(exe));
    let (mut child, stderr) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn {exe}: {e}"))?;
    let watchdog = Watchdog::arm(child.id().ok_or("no pid")?, timeout);
    let mut stderr = tokio::io::BufReader::new(stderr.ok_or("stderr not piped")?);
    let mut ready = String::new();
    stderr.read_line(&mut ready).await.map_err(|e| format!("child stderr: {e}"))?;
    if ready.trim_end() != "pipe_writer: ready" {
        return Err(format!("child not ready: {ready:?}"));
    }
    let cpu = ProcessCpu::start();
    let start = Instant::now();
    let note = ClientNotification::CustomNotification(CustomNotification::new(START_METHOD, None));
    child.send(ClientJsonRpcMessage::notification(note)).await.map_err(|e| format!("start: {e}"))?;
    let mut frames = 0;
    while let Some(message) = child.receive().await {
        match message {
            JsonRpcMessage::Notification(_) => frames += 1,
            other => return Err(format!("unexpected {other:?}")),
        }
    }
    let mut inner = child.into_inner().ok_or("the child is gone")?;
    let status = inner.wait().await.map_err(|e| format!("wait: {e}"))?;
    let elapsed = start.elapsed();
    let cpu = cpu.elapsed();
    let fired = watchdog.fired();
    drop(watchdog);
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).await.map_err(|e| format!("child stderr: {e}"))?;
    if fired {
        return Err(format!("the watchdog killed the child after {timeout:?}; stderr: {rest:?}"));
    }
    if !status.success() {
        return Err(format!("child {status}; stderr: {rest:?}"));
    }
    let report = Report::parse(&rest)?;
    check_report(writer, &report)?;
    Ok(pipe::Run { started: start, elapsed, cpu, count: frames, report })
}

/// Which stdio client transport [`run_rmcp_service`] puts under rmcp's
/// service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmcpTransport {
    /// rmcp's own `TokioChildProcess`.
    Stock,
    /// `mcp_framer_rmcp::ChildProcess`, this project's adapter.
    Adapter,
}

/// Runs `writer` under a whole rmcp client service (`serve_directly`: the
/// child is no MCP server, so no handshake) over `transport`; the service's
/// `ClientHandler` counts the `notifications/message` it is handed, and the
/// run ends when the service has seen the end of stdout and every
/// notification was handled. The clock runs from the start notification to
/// then.
#[allow(deprecated, reason = "the child writes notifications/message, which rmcp 3.11 marks deprecated (SEP-2577)")]
pub async fn run_rmcp_service(
    exe: &str,
    writer: &Writer,
    timeout: Duration,
    transport: RmcpTransport,
) -> Result<pipe::Run, String> {
    use rmcp::model::{ClientNotification, CustomNotification, LoggingMessageNotificationParam};
    use rmcp::service::{NotificationContext, serve_directly};
    use rmcp::transport::TokioChildProcess;
    use rmcp::{ClientHandler, RoleClient};
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use tokio::io::AsyncBufReadExt;

    #[derive(Clone)]
    struct Count(Arc<AtomicU64>);
    impl ClientHandler for Count {
        async fn on_logging_message(&self, _: LoggingMessageNotificationParam, _: NotificationContext<RoleClient>) {
            self.0.fetch_add(1, Relaxed);
        }
    }

    let command = tokio::process::Command::from(writer.command(exe));
    let count = Count(Arc::new(AtomicU64::new(0)));
    let start_note = || ClientNotification::CustomNotification(CustomNotification::new(START_METHOD, None));
    // What ends a run once the service has seen every notification: the
    // child's stderr (its report), checked. A future, awaited on the runtime
    // that reads the child's stderr: blocking that runtime's one thread on
    // it would wait forever for a read that thread has to do.
    type Finish = std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>>>>;
    let (start, cpu, service, finish): (Instant, ProcessCpu, _, Finish) = match transport {
        RmcpTransport::Stock => {
            let (child, stderr) = TokioChildProcess::builder(command)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| format!("spawn {exe}: {e}"))?;
            let watchdog = Watchdog::arm(child.id().ok_or("no pid")?, timeout);
            let mut stderr = tokio::io::BufReader::new(stderr.ok_or("stderr not piped")?);
            let mut ready = String::new();
            stderr.read_line(&mut ready).await.map_err(|e| format!("child stderr: {e}"))?;
            if ready.trim_end() != "pipe_writer: ready" {
                return Err(format!("child not ready: {ready:?}"));
            }
            let (start, cpu) = (Instant::now(), ProcessCpu::start());
            let service = serve_directly(count.clone(), child, None);
            service.send_notification(start_note()).await.map_err(|e| format!("start: {e}"))?;
            // stderr is read to its end once the child has exited.
            let rest = tokio::spawn(async move {
                let mut rest = String::new();
                stderr.read_to_string(&mut rest).await.map(|_| rest)
            });
            let finish = Box::pin(async move {
                // Ends when the child exits, or when the watchdog kills it.
                let rest = rest.await.map_err(|e| e.to_string())?;
                let fired = watchdog.fired();
                drop(watchdog);
                if fired {
                    return Err(format!("the watchdog killed the child after {timeout:?}"));
                }
                rest.map_err(|e| format!("child stderr: {e}"))
            });
            (start, cpu, service, finish as Finish)
        }
        RmcpTransport::Adapter => {
            let config = SessionConfig::default().with_max_receive(MAX_FRAME);
            let child =
                mcp_framer_rmcp::ChildProcess::with_config(command, config).map_err(|e| format!("spawn {exe}: {e}"))?;
            let handle = child.handle();
            let watchdog = Watchdog::arm(handle.id().ok_or("no pid")?, timeout);
            // Untimed set-up, bounded by the watchdog.
            while !handle.stderr_tail().contains("pipe_writer: ready") {
                if handle.closed().is_some() {
                    return Err(format!("child not ready: {:?}", handle.stderr_tail()));
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let (start, cpu) = (Instant::now(), ProcessCpu::start());
            let service = serve_directly(count.clone(), child, None);
            service.send_notification(start_note()).await.map_err(|e| format!("start: {e}"))?;
            let finish = Box::pin(async move {
                let fired = watchdog.fired();
                drop(watchdog);
                if fired {
                    return Err(format!("the watchdog killed the child after {timeout:?}"));
                }
                let metrics = handle.metrics();
                if (metrics.overload_dropped, metrics.parse_errors, handle.counts().rejected) != (0, 0, 0) {
                    return Err(format!("metrics {metrics:?}, adapter {:?}", handle.counts()));
                }
                Ok(handle.stderr_tail())
            });
            (start, cpu, service, finish as Finish)
        }
    };
    let quit = service.waiting().await.map_err(|e| format!("service: {e}"))?;
    // rmcp hands each notification to the handler in a task of its own.
    while count.0.load(Relaxed) < writer.frames && start.elapsed() < timeout {
        tokio::task::yield_now().await;
    }
    let elapsed = start.elapsed();
    let cpu = cpu.elapsed();
    let stderr = finish.await?;
    let frames = count.0.load(Relaxed);
    let report = Report::parse(&stderr).map_err(|e| format!("{e} (service ended: {quit:?})"))?;
    check_report(writer, &report)?;
    Ok(pipe::Run { started: start, elapsed, cpu, count: frames, report })
}
