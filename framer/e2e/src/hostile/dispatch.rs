//! The ordered, concurrent and inline request dispatchers.

use std::sync::{Arc, mpsc};
use std::thread::{self, JoinHandle};

use serde_json::Value;

use super::Mode;
use super::protocol::encode;
use super::server::{Cancel, Server, log};
use super::tools::handle_request;

/// Work for the dispatcher.
#[derive(Debug)]
pub(super) enum Job {
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
        cancel: Arc<Cancel>,
    },
    /// An error response that needs no request handling (e.g. parse errors).
    Reply(Value),
}

fn run_job(server: &Server, job: Job) {
    match job {
        Job::Request { id, method, params, cancel } => {
            handle_request(server, &id, &method, params, &cancel);
            server.unregister(&id, &cancel);
        }
        Job::Reply(msg) => server.out().frame(&encode(&msg), server.default_chunk),
    }
}

/// Runs jobs according to the [`Mode`].
#[derive(Debug)]
pub(super) enum Dispatcher {
    Inline(&'static Server),
    Ordered { jobs: mpsc::Sender<Job>, worker: JoinHandle<()> },
    Concurrent { server: &'static Server, workers: Vec<JoinHandle<()>> },
}

impl Dispatcher {
    pub(super) fn new(mode: Mode, server: &'static Server) -> Self {
        match mode {
            Mode::Inline => Self::Inline(server),
            Mode::Concurrent => Self::Concurrent { server, workers: Vec::new() },
            Mode::Ordered => {
                let (jobs, queue) = mpsc::channel();
                let worker = thread::Builder::new()
                    .name("worker".into())
                    .spawn(move || queue.into_iter().for_each(|job| run_job(server, job)))
                    .expect("spawn worker thread");
                Self::Ordered { jobs, worker }
            }
        }
    }

    pub(super) fn submit(&mut self, job: Job) {
        match self {
            Self::Inline(server) => run_job(server, job),
            Self::Ordered { jobs, .. } => {
                if jobs.send(job).is_err() {
                    log("worker thread is gone; request dropped");
                }
            }
            Self::Concurrent { server, workers } => {
                let server = *server;
                workers.retain(|w| !w.is_finished());
                workers.push(
                    thread::Builder::new()
                        .name("request".into())
                        .spawn(move || run_job(server, job))
                        .expect("spawn request thread"),
                );
            }
        }
    }

    /// Waits for all submitted jobs to finish.
    pub(super) fn finish(self) {
        let workers = match self {
            Self::Inline(_) => Vec::new(),
            Self::Ordered { jobs, worker } => {
                drop(jobs);
                vec![worker]
            }
            Self::Concurrent { workers, .. } => workers,
        };
        for worker in workers {
            if worker.join().is_err() {
                log("a worker thread panicked");
            }
        }
    }
}
