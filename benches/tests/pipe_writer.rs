//! The `pipe_writer` child the pipe benchmarks spawn: what it writes, what it
//! reports, its pipe sizing and pinning, and the watchdog that keeps a stuck
//! run from hanging. Every run here is bounded by `pipe::run`'s watchdog.

use std::io::Read;
use std::process::ChildStdout;
use std::time::Duration;

use mcp_framer_benches::pipe::{self, Cpus, Payload, Shape, Writer};

const WRITER: &str = env!("CARGO_BIN_EXE_pipe_writer");
const TIMEOUT: Duration = Duration::from_secs(10);

/// Reads everything and returns it.
fn read_all(mut stdout: ChildStdout) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    stdout.read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[test]
fn writes_whole_frames_of_each_shape_and_reports_them() {
    let notes = Payload::ALL.map(|payload| (Shape::Notification(payload), 70_000));
    for (shape, size) in
        [(Shape::Request, 0), (Shape::ToolsList, 4096), (Shape::Text, 100_000)].into_iter().chain(notes)
    {
        // An odd write size, so writes end inside frames.
        let writer = Writer { write_size: 1000, ..Writer::with_total(shape, size, 300_000) };
        let mut bytes = Vec::new();
        let run = pipe::run(WRITER, &writer, TIMEOUT, |stdout| {
            bytes = read_all(stdout)?;
            Ok(bytes.len() as u64)
        })
        .unwrap();
        assert_eq!(run.count, writer.bytes());
        assert_eq!((run.report.bytes, run.report.frames), (writer.bytes(), writer.frames));
        let mut message = shape.message(size);
        message.push(b'\n');
        assert_eq!(bytes, message.repeat(writer.frames as usize), "{shape:?}");
        serde_json::from_slice::<serde_json::Value>(&message).unwrap();
        assert!(run.report.write_blocked <= run.report.elapsed);
    }
}

#[test]
fn enlarges_the_pipe_and_pins_itself() {
    let cpu = Cpus::current().unwrap().0[0];
    let writer = Writer { pipe_size: Some(1 << 20), cpu: Some(cpu), ..Writer::with_total(Shape::Request, 0, 100_000) };
    let run = pipe::run(WRITER, &writer, TIMEOUT, |stdout| Ok(read_all(stdout)?.len() as u64)).unwrap();
    assert_eq!(run.report.pipe_size, 1 << 20);
    assert_eq!(run.count, writer.bytes());

    let default = Writer::with_total(Shape::Request, 0, 1000);
    let run = pipe::run(WRITER, &default, TIMEOUT, |stdout| Ok(read_all(stdout)?.len() as u64)).unwrap();
    assert_eq!(run.report.pipe_size, 64 << 10);
}

#[test]
fn a_child_that_never_finishes_is_killed_and_reported() {
    // About 200 GB: it would write for minutes.
    let writer = Writer { frames: 1 << 30, ..Writer::with_total(Shape::Request, 0, 0) };
    let error = pipe::run(WRITER, &writer, Duration::from_millis(300), |stdout| Ok(read_all(stdout)?.len() as u64))
        .unwrap_err();
    assert!(error.contains("watchdog killed the child"), "{error}");
}

#[test]
fn a_reader_that_stops_early_makes_the_child_fail_not_hang() {
    let writer = Writer::with_total(Shape::Request, 0, 10 << 20);
    let error = pipe::run(WRITER, &writer, TIMEOUT, |mut stdout| {
        let mut first = [0; 100];
        stdout.read_exact(&mut first)?;
        Ok(100)
    })
    .unwrap_err();
    assert!(error.contains("Broken pipe") || error.contains("exit status: 1"), "{error}");
}
